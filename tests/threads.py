"""Test helpers for code run on several threads: start them together, switch often."""

from __future__ import annotations

import contextlib
import sys
import threading


@contextlib.contextmanager
def switching_often():
    """Switch threads every few bytecodes, so an unguarded read-modify-write loses updates
    on every run rather than now and then (the default interval is 5 ms)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def in_threads(*targets):
    """Run each target on its own thread, all starting together; re-raise the first error."""
    start = threading.Barrier(len(targets))
    errors: list[BaseException] = []

    def run(target):
        start.wait()
        try:
            target()
        except BaseException as err:  # noqa: BLE001 - re-raised below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "deadlocked"
    if errors:
        raise errors[0]
