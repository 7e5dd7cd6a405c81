"""``staged.set_num_threads`` / ``get_num_threads``: one thread count for eager mode
(NumPy's BLAS) and compiled llvm-cpu steps (IREE's local-task workers); Note [thread count]
in ``staged/_blas.py`` and ``staged/runtime/device.py``."""

from __future__ import annotations

import warnings

from . import _blas
from .runtime import device as _rt_device


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for matmuls and other BLAS work in eager mode, and for compiled
    CPU steps, as ``torch.set_num_threads``. IREE sizes its pool when the first compiled
    CPU step of the process runs; after that, only the eager side changes (with a warning).
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(n).__name__}")
    if n <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    _blas.set_blas_threads(n)
    if not _rt_device.set_task_threads(n):
        warnings.warn(
            f"set_num_threads({n}): compiled CPU steps keep the IREE thread pool "
            "made by the first one in this process; call set_num_threads before "
            "the first compiled step to size it",
            stacklevel=2,
        )


def get_num_threads() -> int:
    """The thread count ``set_num_threads`` set, else NumPy's BLAS's (which follows
    ``OMP_NUM_THREADS``)."""
    return _blas.blas_threads()
