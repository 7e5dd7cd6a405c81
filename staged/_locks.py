"""Locks a forked child finds released (Note [locks across a fork]).

Note [locks across a fork]: a fork copies only the thread that forks, so a lock another
thread held at that moment stays held in the child for good: the child's first draw from
a generator, first trace or compiled call, or first compile then waited forever (a
``DataLoader``'s or ``multiprocessing``'s fork while a thread of the parent drew random
numbers or ran a step). Staged's locks are made by ``fork_safe``, which has the child
re-initialise them, as CPython does its own (``_at_fork_reinit``: ``threading``,
``logging``).
"""

from __future__ import annotations

import os
import threading
import weakref

_LOCKS: weakref.WeakSet = weakref.WeakSet()


def fork_safe(lock=None):
    """``lock`` (a new ``threading.Lock`` if None), released in a forked child."""
    lock = threading.Lock() if lock is None else lock
    _LOCKS.add(lock)
    return lock


def _after_fork_in_child() -> None:
    for lock in list(_LOCKS):  # the child's only thread: nothing adds meanwhile
        lock._at_fork_reinit()


os.register_at_fork(after_in_child=_after_fork_in_child)
