"""``torch.compiler``'s counterpart: the names programs written for torch.compile call
around their compiled functions (Note [torch.compile's arguments] in
``staged/runtime/compiled.py``). staged captures whole graphs and never splits one: a
function marked ``disable`` that returns nothing runs after the graph at each call, for
its effects; one that returns values is traced with its caller (Note [disabled calls] in
``staged/tracing/scalars.py``)."""

from __future__ import annotations

import dis
import functools
import inspect
import types

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
    """A function that returns nothing (called for its effects: logging) run in Python at
    every call of a compiled step that calls it, after the step's graph, with the values
    its tensors have where the step calls it (Note [disabled calls] in
    ``staged/tracing/scalars.py``), and as itself outside a trace; any other ``fn`` (one
    returning values, a class, a Module) itself, traced with its caller. A decorator, with
    or without arguments."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    if not _returns_nothing(fn):  # its result may flow on: traced with its caller
        return fn

    @functools.wraps(fn)
    def outside_the_graph(*args, **kwargs):
        icpt = current_interceptor()
        if isinstance(icpt, Tracer):
            return icpt.host_call(fn, args, kwargs)
        return fn(*args, **kwargs)

    return outside_the_graph


def _returns_nothing(fn) -> bool:
    """Whether ``fn`` is a plain function whose every ``return`` returns None (by its
    bytecode): one called for its effects, which a compiled step can make after its graph.
    One that returns values (or a generator, a class, a Module) is traced with its caller,
    as any function (what it cannot capture raises ``CaptureError``)."""
    f = inspect.unwrap(fn)
    if isinstance(f, types.MethodType):
        f = f.__func__
    code = getattr(f, "__code__", None)
    if not isinstance(f, types.FunctionType) or code is None or code.co_flags & _NOT_PLAIN:
        return False
    before = None
    for ins in dis.get_instructions(code):
        if ins.opname == "RETURN_CONST" and ins.argval is not None:
            return False
        if ins.opname == "RETURN_VALUE" and not (
            before is not None and before.opname == "LOAD_CONST" and before.argval is None
        ):
            return False
        before = ins
    return True


_NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


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
