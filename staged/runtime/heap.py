"""The process heap's free memory handed back to the system.

Note [heap after lowering]: tracing and lowering a large step make MBs of short-lived
objects (the 12-layer transformer of bench/scaling.py: a 2 MB MLIR text, its lines, the
emitter's names), and glibc's malloc keeps the memory they leave as free chunks of its
heap, which the step's first call, allocating its activations in IREE's pools, then
stacked on. ``trim`` (glibc's ``malloc_trim``, 1-2 ms) after each build hands it back
first: that step's resident memory over the process's base went from 16.0 to 10.6 MB
before its first call, and its peak (bench/scaling.py, 2 threads) from 46-48 MB to 41
(torch eager's 46); the 4-layer one's from 17-18 to 14. Where the C library has no
``malloc_trim`` (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

_malloc_trim: Any
try:
    _malloc_trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    _malloc_trim.argtypes, _malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
except (OSError, AttributeError):  # no glibc
    _malloc_trim = None


def trim() -> None:
    """Return the heap's free memory to the system (Note above)."""
    if _malloc_trim is not None:
        _malloc_trim(0)
