"""``torch.compiler``'s counterpart: the names programs written for torch.compile call
around their compiled functions (Note [torch.compile's arguments] in
``staged/runtime/compiled.py``). staged captures whole graphs and never splits one, so
``disable`` marks nothing: a function so marked is traced with its caller (what it
cannot capture raises ``CaptureError``, or runs eagerly with ``fallback="eager"``)."""

from __future__ import annotations

import functools

from .eager.interceptor import current_interceptor
from .runtime.compiled import TORCH_BACKENDS, UNCOMPILED_BACKENDS
from .runtime.compiled import compile as compile  # noqa: PLC0414  (torch.compiler.compile)
from .tracing.capture import Tracer

__all__ = [
    "allow_in_graph",
    "assume_constant_result",
    "compile",
    "cudagraph_mark_step_begin",
    "disable",
    "is_compiling",
    "is_dynamo_compiling",
    "is_exporting",
    "list_backends",
    "reset",
]


def is_compiling() -> bool:
    """Whether this thread is tracing a function for ``staged.compile`` (torch: whether
    dynamo is tracing it): False in eager code and in a compiled step's compiled calls."""
    return isinstance(current_interceptor(), Tracer)


is_dynamo_compiling = is_compiling


def is_exporting() -> bool:
    """False: staged's exports (``staged.onnx``, ``staged.export``) trace as a compile does."""
    return False


def disable(fn=None, recursive: bool = True, *, reason: str | None = None):
    """``fn`` itself (a decorator with or without arguments): see the module's note."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    return fn


def allow_in_graph(fn):
    """``fn`` itself: every function a staged trace calls is in its graph."""
    return fn


def assume_constant_result(fn):
    """``fn`` itself: a trace calls it and keeps what it returns as a constant, guarded as
    any Python value the step reads."""
    return fn


def list_backends(exclude_tags=("debug", "experimental")) -> list[str]:
    """The names ``staged.compile(backend=...)`` takes from torch.compile's."""
    return sorted({*TORCH_BACKENDS, *UNCOMPILED_BACKENDS})


def reset() -> None:
    """Nothing to clear: each compiled function keeps its own traces, guarded on what they
    read, and a change re-traces by itself (torch's reset drops dynamo's caches)."""


def cudagraph_mark_step_begin() -> None:
    """Nothing to mark: staged records no CUDA graphs across calls."""
