"""Settings every compiled step reads, under the names of torch's ``torch._dynamo.config``
(``staged._dynamo.config`` is this module): ``recompile_limit`` (alias
``cache_size_limit``), the re-traces of one function after which a call none of its
traces serves runs eagerly, with a warning saying why it kept re-tracing (Note [the
recompile limit] in ``compiled.py``); ``suppress_errors``, True to run a function that cannot be captured, lowered
or compiled eagerly, with a warning, as ``fallback="eager"`` does for one step. Other
names torch's config has (``automatic_dynamic_shapes``, ``capture_scalar_outputs``...)
can be set and read, and change nothing here: staged captures whole graphs."""

from __future__ import annotations

import sys
import types

recompile_limit = 8  # torch.compile's default
suppress_errors = False


class _Config(types.ModuleType):
    """This module, with torch's older name of ``recompile_limit``."""

    @property
    def cache_size_limit(self) -> int:
        return self.recompile_limit

    @cache_size_limit.setter
    def cache_size_limit(self, n: int) -> None:
        self.recompile_limit = n


sys.modules[__name__].__class__ = _Config
