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
