"""The interceptor a capture installs: every primitive bound on its thread goes to it
instead of NumPy (DESIGN.md: one engine, two payloads)."""

from __future__ import annotations

import threading

active = None  # (thread ident, fn(prim, inputs, params) -> payload)


def set_interceptor(fn):
    """Route every primitive issued by this thread through ``fn`` (None to stop).
    Returns the previous interceptor so captures can nest."""
    global active
    prev = active
    active = None if fn is None else (threading.get_ident(), fn)
    return prev


def current_interceptor():
    """The interceptor active on this thread, or None."""
    icpt = active
    return icpt[1] if icpt is not None and icpt[0] == threading.get_ident() else None


def restore_interceptor(prev) -> None:
    global active
    active = prev


# Note [phases]: while a capture records, each op is tagged with the phase of the step that
# issued it ("forward" by default, "backward" while the engine runs, "optimizer" inside
# ``Optimizer.step``) and with the user hook it ran in, if any (``staged.viz`` colours the
# step by them), and with the ``record_function`` ranges open around it, outermost first
# (a profiled compiled call shows them). Eager mode keeps the tags too and never reads them.
class _Tags(threading.local):
    phase = "forward"
    hook = ""
    ranges = ()


tags = _Tags()


class tagged:
    """``with tagged(phase="optimizer"):`` / ``tagged(hook=name)``: the ops issued inside
    carry that tag in a captured graph (Note [phases])."""

    __slots__ = ("hook", "phase", "prev")

    def __init__(self, phase=None, hook=None):
        self.phase, self.hook = phase, hook

    def __enter__(self):
        self.prev = (tags.phase, tags.hook)
        if self.phase is not None:
            tags.phase = self.phase
        if self.hook is not None:
            tags.hook = self.hook
        return self

    def __exit__(self, *exc):
        tags.phase, tags.hook = self.prev
        return False


def call_hook(fn, *args):
    """``fn(*args)`` for a user hook: under capture its ops are tagged with its name."""
    if active is None:
        return fn(*args)
    with tagged(hook=getattr(fn, "__qualname__", None) or type(fn).__name__):
        return fn(*args)
