"""The op database: every module in this package contributes a list ``ENTRIES``."""

from __future__ import annotations

import importlib
import pkgutil

OP_DB = []
for _m in pkgutil.iter_modules(__path__):
    OP_DB.extend(importlib.import_module(f"{__name__}.{_m.name}").ENTRIES)
