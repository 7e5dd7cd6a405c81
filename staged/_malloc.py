"""Imported first by ``staged``: glibc's malloc keeps the memory of freed arrays.

Note [malloc thresholds]: glibc's malloc gives memory back to the kernel early: an array
over its mmap threshold (128 KiB at first, raised to the size of each mapped block freed,
at most 32 MiB) is mapped and unmapped on every allocation, and free memory at the top of
the heap past the trim threshold (twice the mmap threshold) is returned. Each array an
eager step allocates then costs a page fault per 4 KiB page touched, every step: the
forward and backward of a huber loss on 256 x 256 float32s took 512 faults and 1.3 ms a
step (0.3 ms without them), a small CNN's SGD step 2600 faults and 18-23 ms (12-13.5 ms).
Importing torch hides it (its libraries' freed blocks raise the dynamic threshold), so
programs timed beside torch never see it. Fixed thresholds, the largest glibc takes,
keep arrays up to 32 MiB in the heap and up to 64 MiB of it free for the next step; a
process keeps that much more resident after its peak. glibc's own environment variables
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``) win where set, and
``STAGED_MALLOC_THRESHOLDS=0`` keeps glibc's defaults; other C libraries are left alone.

Note [heap after lowering]: the same thresholds keep what tracing and lowering a large
step free (the 12-layer transformer of bench/scaling.py: a 2 MB MLIR text, its lines, the
emitter's names), and the step's first call, allocating its activations in IREE's pools,
stacked on it: 16.0 MB resident over the process's base before that call, 12.0 with
glibc's defaults. ``trim`` (``malloc_trim``, 1-2 ms) after each build hands it back
(10.6 MB), and that step's peak (bench/scaling.py, 2 threads) went from 46-48 MB to 41
(torch eager's 46), the 4-layer one's from 17-18 to 14. A build is rare; the eager steps
after it fault their arrays' pages in once more.
"""

import ctypes
import os

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # malloc.h
MMAP_THRESHOLD = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit machines
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (AttributeError, ValueError, OSError):  # not a POSIX system, or not glibc
        return False


_LIBC = ctypes.CDLL(None) if _glibc() else None


def trim() -> None:
    """Return the heap's free memory to the system (Note [heap after lowering])."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def keep_freed_memory() -> bool:
    """Set glibc's thresholds (Note [malloc thresholds]); False where not applied."""
    env = os.environ
    if env.get("STAGED_MALLOC_THRESHOLDS") == "0" or _LIBC is None:
        return False
    if "MALLOC_MMAP_THRESHOLD_" in env or "MALLOC_TRIM_THRESHOLD_" in env:
        return False
    mallopt = _LIBC.mallopt
    return bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


keep_freed_memory()
