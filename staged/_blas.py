"""Imported first by ``staged``, before NumPy.

Note [OpenBLAS spin]: NumPy's OpenBLAS keeps its worker threads spinning ~0.1 s after
each multi-threaded call; a compiled step that follows eager NumPy work then shares the
cores with them, and ran ~1.75x slower here (MLP 784-256-256-10 SGD step, batch 256,
2 cores; ``bench/README.md``). ``OPENBLAS_THREAD_TIMEOUT=4`` makes them sleep at once.
OpenBLAS reads it when NumPy is first imported, so setting it here only takes effect
when staged is imported before NumPy; otherwise set it in the environment.
"""

import os
import sys

if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


# Note [thread count]: ``staged.set_num_threads(n)`` caps the threads of NumPy's BLAS
# (OpenBLAS, MKL or BLIS, found by threadpoolctl among the loaded libraries) for eager
# matmuls; the IREE side (compiled steps) is in ``staged/runtime/device.py``.
_threads: list[int | None] = [None]  # what set_num_threads asked for, None before any call


def _threadpoolctl():
    """threadpoolctl, imported on first use (it costs ~30 ms at ``import staged``), or None
    where it is not installed."""
    try:
        import threadpoolctl
    except ImportError:  # pragma: no cover - a dependency, but let a bare install run
        return None
    return threadpoolctl


def set_blas_threads(n: int) -> None:
    """Limit NumPy's BLAS to ``n`` threads from now on (no-op without threadpoolctl)."""
    _threads[0] = n
    tpc = _threadpoolctl()
    if tpc is not None:
        tpc.threadpool_limits(limits=n, user_api="blas")


def blas_threads() -> int:
    """What ``set_blas_threads`` set, else the thread count NumPy's BLAS uses (the largest
    among the loaded BLAS libraries), else the CPU count."""
    if _threads[0] is not None:
        return _threads[0]
    tpc = _threadpoolctl()
    if tpc is not None:
        counts = [i["num_threads"] for i in tpc.threadpool_info() if i.get("user_api") == "blas"]
        if counts:
            return max(counts)
    return os.cpu_count() or 1
