"""Warn when traced code draws Python or NumPy random numbers or reads the clock.

Note [impure calls]: ``random.randint(0, 3)`` or ``time.time()`` in a traced function
runs once, at trace time; its value is baked into the graph (as a constant, or as the
structure it chose: a loop count) and every later call of the compiled step reuses it,
where eager code draws anew (PyTorch's ``dynamic_net`` tutorial, compiled, would train a
network of one fixed depth). Replaying the draw at each call cannot be done when it
chose the graph's structure, so instead the trace warns once per call site, naming it.
While a trace runs on some thread, the module functions of ``random``, ``numpy.random``
and ``time`` are wrapped; calls from other threads, and from staged itself, pass through
untouched. Names bound before (``from random import randint``) and ``Generator``
methods are not seen.
"""

from __future__ import annotations

import functools
import os
import random
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from .._locks import fork_safe
from .._where import STAGED_DIR

if TYPE_CHECKING:
    from types import FrameType

_TIME = (
    "time",
    "time_ns",
    "perf_counter",
    "perf_counter_ns",
    "monotonic",
    "monotonic_ns",
    "process_time",
    "process_time_ns",
)
_RANDOM = (
    "random",
    "uniform",
    "triangular",
    "randint",
    "randrange",
    "choice",
    "choices",
    "sample",
    "shuffle",
    "gauss",
    "normalvariate",
    "lognormvariate",
    "expovariate",
    "vonmisesvariate",
    "gammavariate",
    "betavariate",
    "paretovariate",
    "weibullvariate",
    "getrandbits",
    "randbytes",
    "binomialvariate",
)
_NP_RANDOM = (
    "rand",
    "randn",
    "randint",
    "random",
    "random_sample",
    "ranf",
    "sample",
    "random_integers",
    "uniform",
    "normal",
    "standard_normal",
    "choice",
    "permutation",
    "shuffle",
    "binomial",
    "poisson",
    "exponential",
    "beta",
    "gamma",
    "laplace",
    "logistic",
    "lognormal",
    "multinomial",
    "bytes",
)
_MODULES = (
    (random, "random", _RANDOM),
    (np.random, "numpy.random", _NP_RANDOM),
    (time, "time", _TIME),
)

_local = threading.local()  # .tracing: this thread runs a trace
_lock = fork_safe()
_users = 0  # traces running, on any thread; the wrappers are installed while > 0
_originals: list = []  # (module, name, function)
_warned: set = set()  # call sites already reported


@contextmanager
def warn_impure_calls():
    """While the body runs, report calls of random/clock functions on this thread."""
    global _users
    with _lock:
        if _users == 0:
            _install()
        _users += 1
    outer = getattr(_local, "tracing", False)
    _local.tracing = True
    try:
        yield
    finally:
        _local.tracing = outer
        with _lock:
            _users -= 1
            if _users == 0:
                _uninstall()


def _install() -> None:
    for module, prefix, names in _MODULES:
        for name in names:
            fn = getattr(module, name, None)
            if fn is not None:
                _originals.append((module, name, fn))
                setattr(module, name, _wrap(fn, f"{prefix}.{name}"))


def _uninstall() -> None:
    for module, name, fn in _originals:
        setattr(module, name, fn)
    _originals.clear()


def _wrap(fn, qualname: str):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        frame = sys._getframe(1)
        if getattr(_local, "tracing", False) and not _is_staged(frame):
            shown = repr(out)
            _report(qualname, shown if len(shown) <= 40 else f"a {type(out).__name__}", frame)
        return out

    return wrapper


def report_draw(qualname: str) -> None:
    """A staged random factory (``staged.randn``) ran under capture: its tensor becomes a
    constant of the graph. Warn once, naming the user's line."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _is_staged(frame):
        frame = frame.f_back
    if frame is not None:
        _report(qualname, "a tensor", frame)


def _is_staged(frame) -> bool:
    return os.path.abspath(frame.f_code.co_filename).startswith(STAGED_DIR)


def _report(qualname: str, shown: str, frame) -> None:
    path = os.path.abspath(frame.f_code.co_filename)
    site = (path, frame.f_lineno)
    if site in _warned:
        return
    _warned.add(site)
    warnings.warn_explicit(
        f"{os.path.relpath(path)}:{frame.f_lineno}: {qualname}() was called while staged "
        f"traced this function: its result ({shown}) is frozen into the compiled step and "
        "every call reuses it, where eager code gets a new one per call. Draw it outside "
        "the compiled function and pass it in as an argument (a tensor, to avoid a "
        "re-trace per value); dropout draws anew at every call",
        UserWarning,
        path,
        frame.f_lineno,
        module=frame.f_globals.get("__name__"),
        registry=frame.f_globals.setdefault("__warningregistry__", {}),
    )
