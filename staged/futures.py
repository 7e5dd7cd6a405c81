"""``torch.futures``: a result that may arrive later, as torch's ``Future`` (what
``torch.jit.fork`` returns and communication hooks pass on)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["Future", "collect_all", "wait_all"]

T = TypeVar("T")
S = TypeVar("S")
log = logging.getLogger(__name__)


class Future(Generic[T]):
    """A value or an exception, set once (``set_result``, ``set_exception``) by one thread
    and waited for by others; callbacks run when it is set, or at once if it was."""

    def __init__(self, *, devices=None):
        self._lock = threading.Lock()
        self._set = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future[T]], None]] = []

    def done(self) -> bool:
        return self._set.is_set()

    def wait(self) -> T:
        """The value once set (this blocks until then); raises the exception set instead."""
        self._set.wait()
        return self.value()

    def value(self) -> T:
        """The value of a completed future; raises its exception, or RuntimeError where it
        is not completed yet."""
        if not self._set.is_set():
            raise RuntimeError("Future.value() of a Future not completed yet: call wait()")
        if self._error is not None:
            raise self._error
        return self._value

    def then(self, callback: Callable[[Future[T]], S]) -> Future[S]:
        """A future of ``callback(self)``, run when this one completes; an exception it
        raises completes the new future with a RuntimeError saying so."""
        out: Future[S] = Future()

        def run(fut: Future[T]) -> None:
            try:
                result = callback(fut)
            except Exception as e:
                error = RuntimeError(f"Got the following error when running the callback: {e!r}")
                out.set_exception(error)
            else:
                out.set_result(result)

        self.add_done_callback(run)
        return out

    def add_done_callback(self, callback: Callable[[Future[T]], None]) -> None:
        """Run ``callback(self)`` when this completes (now, if it has); an exception it
        raises is logged and ignored, as torch's."""
        with self._lock:
            if not self._set.is_set():
                self._callbacks.append(callback)
                return
        self._run(callback)

    def set_result(self, result: T) -> None:
        self._complete(result, None)

    def set_exception(self, result: BaseException) -> None:
        if not isinstance(result, BaseException):
            raise TypeError(f"set_exception takes an exception, got {type(result).__name__}")
        self._complete(None, result)

    def _complete(self, value, error) -> None:
        with self._lock:
            if self._set.is_set():
                raise RuntimeError(
                    "Attempting to mark a completed Future as complete again. Note that a "
                    "Future can only be marked completed once."
                )
            self._value, self._error = value, error
            self._set.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            self._run(callback)

    def _run(self, callback) -> None:
        try:
            callback(self)
        except Exception:
            log.exception("Got the following error when running the callback")


def collect_all(futures: list[Future]) -> Future[list[Future]]:
    """A future completed, with ``futures`` as its value, once all of them are."""
    out: Future[list[Future]] = Future()
    left = [len(futures)]
    lock = threading.Lock()

    def one_done(_) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            out.set_result(list(futures))

    if not futures:
        out.set_result([])
    for f in futures:
        f.add_done_callback(one_done)
    return out


def wait_all(futures: list[Future]) -> list:
    """The values of ``futures``, waited for in order; raises the first exception."""
    return [f.wait() for f in futures]
