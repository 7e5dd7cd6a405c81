"""Keyboard interrupts held back across the few lines that must not be cut in half.

Note [interrupts]: Python runs a SIGINT's handler (``KeyboardInterrupt``) in the main
thread between any two bytecodes, and a signal that arrives during a C call (IREE's
enqueue) is raised right after it returns. A compiled call that enqueued its step and was
then interrupted while writing its results back left some parameters at step k + 1 and the
others, and the optimizer's state, at step k, and training went on from that mix, silently
(SIGINT sent at one of the 1318 lines a steady call of a small Adam step runs, each in a
fresh process: at 225 of the 543 lines from the enqueue on, the parameters matched no
eager step after two more calls); one interrupted between the enqueue and its record left
the module's timeline behind the step it had enqueued, so every later call failed
("semaphore already signaled"). ``deferred_interrupts`` runs SIGINT's handler
at the end of such a block instead (the handler swapped for one that records the signal,
then put back and called: about 0.4 us a block), so an interrupt lands before the step is
applied or after all of it. It holds only in the main thread (the only one a
``KeyboardInterrupt`` is raised in), and only blocks that finish by themselves are held:
the wait for a step's results, a collective and a compile stay interruptible.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal.py wraps these: 8x slower
import threading
from _thread import get_ident

_SIGINT = _signal.SIGINT


class deferred_interrupts:
    """``with deferred_interrupts():`` a SIGINT arriving inside the block raises its
    ``KeyboardInterrupt`` (runs its Python handler) where the block ends (Note
    [interrupts])."""

    __slots__ = ("_old", "_frame")

    def __enter__(self):
        self._old = None
        if get_ident() == threading.main_thread().ident:
            old = _signal.getsignal(_SIGINT)
            if callable(old):  # not SIG_DFL or SIG_IGN: no Python handler runs for those
                self._frame = None
                _signal.signal(_SIGINT, self._record)
                self._old = old
        return self

    def _record(self, signum, frame) -> None:
        self._frame = frame

    def __exit__(self, *exc) -> None:
        old = self._old
        if old is None:
            return
        self._old = None
        try:
            _signal.signal(_SIGINT, old)  # runs pending handlers first: ours records
        finally:  # another signal's handler raised there: SIGINT's is still put back
            if _signal.getsignal(_SIGINT) is not old:
                _signal.signal(_SIGINT, old)
        if self._frame is not None:
            old(_SIGINT, self._frame)
