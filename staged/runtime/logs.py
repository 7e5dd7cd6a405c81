"""Compile messages: the ``staged.compile`` and ``staged.runtime`` loggers, and a status
line for slow compiles.

Note [compile messages]: staged prints nothing while it compiles; it reports through
``logging``. Logger ``staged.compile`` says why a step is traced and how long each phase
of its compile took (INFO), and its graph (DEBUG); ``staged.runtime`` whether the compile
cache had the module (DEBUG). Python shows no record below WARNING unless asked, and
staged adds no handler of its own unless ``STAGED_LOG`` is set (``info`` or ``debug``, as
``TORCH_LOGS``; ``STAGED_DEBUG=1`` means ``debug``): then one on stderr, at import, that
writes through ``tqdm.write`` while tqdm is imported, so a record does not break a progress
bar. Applications configure the loggers as any others (``logging.getLogger
("staged.compile").setLevel(logging.INFO)``).

On a terminal, a compile that takes longer than a second says what it is doing on one
line of stderr (``staged: compiling step: IREE compile 3.2 s``), rewritten in place and
cleared when it is done, so nothing is left behind (a tqdm bar on that line is redrawn at
its next update). It writes to a copy of the stderr descriptor taken when the compile
began, since IREE's compile redirects descriptor 2 to collect its diagnostics.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import warnings
from typing import cast

compile_log = logging.getLogger("staged.compile")
runtime_log = logging.getLogger("staged.runtime")
logging.getLogger("staged").addHandler(logging.NullHandler())

SHOW_AFTER = 1.0  # seconds a compile runs before the status line shows


class _Handler(logging.StreamHandler):
    """To the current ``sys.stderr``; through ``tqdm.write`` while tqdm is imported."""

    def emit(self, record):
        self.setStream(sys.stderr)
        tqdm = getattr(sys.modules.get("tqdm"), "tqdm", None)
        if tqdm is None:
            return super().emit(record)
        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # noqa: BLE001 (as logging.StreamHandler.emit)
            self.handleError(record)


def configure(value: str | None = None) -> None:
    """Log staged's records at ``value`` (default ``$STAGED_LOG``; ``debug`` if only
    ``$STAGED_DEBUG`` is set) to stderr; nothing when neither is set."""
    if value is None:
        value = os.environ.get("STAGED_LOG") or ("debug" if os.environ.get("STAGED_DEBUG") else "")
    if not value:
        return
    level = logging.getLevelName(value.strip().upper())
    if not isinstance(level, int):
        warnings.warn(f"STAGED_LOG={value!r}: expected a logging level (info, debug)", stacklevel=2)
        return
    log = logging.getLogger("staged")
    if not any(isinstance(h, _Handler) for h in log.handlers):
        handler = _Handler()
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        log.addHandler(handler)
    log.setLevel(level)


class Phases:
    """The phases of one compile (trace, lower, IREE compile, load): times each, and on a
    terminal shows the running one once the compile has taken ``SHOW_AFTER`` seconds
    (Note [compile messages]). ``with Phases(what) as p: with p("trace"): ...``."""

    times: dict[str, float]
    _fd: int | None

    def __init__(self, what: str):
        self.what, self.times, self.now = what, {}, "starting"
        self.start = time.perf_counter()
        self._lock, self._done, self._fd, self._shown = threading.Lock(), False, None, False

    def __enter__(self):
        try:
            if sys.stderr.isatty():
                self._fd = os.dup(sys.stderr.fileno())
        except (AttributeError, OSError, ValueError):
            self._fd = None
        if self._fd is not None:
            threading.Thread(target=self._show, daemon=True).start()
        return self

    def __call__(self, phase: str) -> _Phase:
        return _Phase(self, phase)

    @property
    def total(self) -> float:
        return time.perf_counter() - self.start

    def _show(self) -> None:
        time.sleep(SHOW_AFTER)
        while self._write(f"\rstaged: {self.what}: {self.now} {self.total:.1f} s\x1b[K"):
            time.sleep(0.2)

    def _write(self, text: str) -> bool:
        with self._lock:
            if self._done:
                return False
            try:
                os.write(cast(int, self._fd), text.encode())  # set while shown
                self._shown = True
            except OSError:
                return False
            return True

    def __exit__(self, *exc):
        with self._lock:
            self._done = True
            if self._fd is not None:
                try:
                    if self._shown:
                        os.write(self._fd, b"\r\x1b[K")
                finally:
                    os.close(self._fd)
        return False

    def summary(self) -> str:
        """``trace 0.21 s, lower 0.05 s, IREE compile 3.10 s, load 0.01 s``"""
        return ", ".join(f"{k} {v:.2f} s" for k, v in self.times.items())


class _Phase:
    __slots__ = ("name", "phases", "t0")

    def __init__(self, phases: Phases, name: str):
        self.phases, self.name = phases, name

    def __enter__(self):
        self.phases.now, self.t0 = self.name, time.perf_counter()

    def __exit__(self, *exc):
        t = self.phases.times
        t[self.name] = t.get(self.name, 0.0) + time.perf_counter() - self.t0
        return False


configure()
