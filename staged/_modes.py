"""The torch function modes (``staged.overrides.TorchFunctionMode``) entered on each thread,
and the call that hands a public function's call to the innermost one. A leaf module
(standard library only): the public functions' wrappers (``_where.sited``, autocast's) ask
it on every call, at the cost of one list lookup while no thread has a mode."""

from __future__ import annotations

import sys
import threading


class _Stack(threading.local):
    def __init__(self) -> None:
        self.modes: list = []


_stack = _Stack()
entered = [0]  # modes entered on any thread: calls look at their own thread's only then
_count = threading.Lock()


def push(mode) -> None:
    """Make ``mode`` this thread's innermost mode."""
    _stack.modes.append(mode)
    with _count:
        entered[0] += 1


def pop(mode) -> None:
    """Leave ``mode``, which must be this thread's innermost."""
    modes = _stack.modes
    if not modes or modes[-1] is not mode:
        raise RuntimeError(
            f"exiting {type(mode).__name__}, which is not the innermost TorchFunctionMode "
            "of this thread: modes must be exited in the reverse order of entering them"
        )
    modes.pop()
    with _count:
        entered[0] -= 1


def active() -> bool:
    """Whether this thread has a mode to hand calls to (callers ask ``entered`` first)."""
    return bool(_stack.modes)


def current():
    """This thread's innermost mode, or None."""
    return _stack.modes[-1] if _stack.modes else None


# the namespaces whose functions a mode is handed, as the public objects found there: a
# call is handed over by the innermost wrapper that asks (``_where.sited``), inside others
# (``out=``, autocast), so that wrapper is mapped to the public function around it
NAMESPACES = (
    "staged",
    "staged.nn.functional",
    "staged.linalg",
    "staged.fft",
    "staged.special",
    "staged.sparse",
    "staged.signal.windows",
)
_public: dict = {}  # a wrapper inside a public function -> that function
_indexed: list = [()]  # the namespaces loaded when _public was built


def public(func):
    """The public function ``func`` is (a wrapper of), as users name it."""
    loaded = tuple(n for n in NAMESPACES if n in sys.modules)
    if loaded != _indexed[0]:
        for name in loaded:
            for obj in list(vars(sys.modules[name]).values()):
                inner = getattr(obj, "__wrapped__", None) if callable(obj) else None
                while inner is not None:
                    _public.setdefault(inner, obj)
                    inner = getattr(inner, "__wrapped__", None)
        _indexed[0] = loaded
    return _public.get(func, func)


def handle(func, args, kwargs):
    """``func(*args, **kwargs)`` as this thread's innermost mode's ``__torch_function__``
    runs it (handed the public function ``func`` serves), with that mode off meanwhile
    (its own calls reach the modes below it, then the functions), as torch's modes."""
    modes = _stack.modes
    mode = modes.pop()
    try:
        return mode.__torch_function__(public(func), (), args, kwargs)
    finally:
        modes.append(mode)
