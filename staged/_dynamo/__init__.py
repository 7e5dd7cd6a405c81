"""``torch._dynamo``'s counterpart, for programs that set its config or call its helpers
(``torch._dynamo.config.cache_size_limit = 64``, ``torch._dynamo.reset()``): the config
is ``staged/runtime/compile_config.py``, the helpers ``staged.compiler``'s."""

from __future__ import annotations

import sys

from ..compiler import allow_in_graph, assume_constant_result, disable, is_compiling, reset
from ..compiler import list_backends as list_backends
from ..runtime import compile_config as config
from . import eval_frame, utils  # noqa: F401  (torch._dynamo.eval_frame.OptimizedModule)
from .eval_frame import OptimizedModule

sys.modules[__name__ + ".config"] = config  # ``import torch._dynamo.config``

__all__ = [
    "allow_in_graph",
    "assume_constant_result",
    "config",
    "disable",
    "is_compiling",
    "list_backends",
    "mark_dynamic",
    "mark_static",
    "OptimizedModule",
    "maybe_mark_dynamic",
    "reset",
]


def mark_dynamic(t, index, **kwargs) -> None:
    """A hint torch reads; staged makes a dimension dynamic with
    ``staged.compile(fn, dynamic=True)`` (the batch, dim 0) and keeps the others static."""


mark_static = maybe_mark_dynamic = mark_dynamic
