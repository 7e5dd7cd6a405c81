"""``torch.__config__``: what this build runs on, as torch's ``show()`` and
``parallel_info()`` report it. Libraries parse ``show()``'s build settings (PyG reads
``USE_MKL``), so it names torch's switches with staged's values: no MKL, CUDA, cuDNN or
OpenMP (NumPy's BLAS and IREE's own thread pool), MPI where mpi4py is installed."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

import numpy as np

from . import _threads, _version


def _blas() -> str:
    info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    return f"{info.get('name', 'unknown')} {info.get('version', '')}".strip()


def _iree() -> str:
    try:
        return importlib.metadata.version("iree-base-compiler")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def show() -> str:
    """The build's configuration: its libraries and torch's build switches."""
    mpi = "ON" if importlib.util.find_spec("mpi4py") is not None else "OFF"
    settings = {
        "TORCH_VERSION": _version.TORCH,
        "BLAS_INFO": _blas().split()[0],
        "USE_CUDA": "0",
        "USE_CUDNN": "OFF",
        "USE_GLOO": "OFF",
        "USE_MKL": "OFF",
        "USE_MKLDNN": "OFF",
        "USE_MPI": mpi,
        "USE_NCCL": "OFF",
        "USE_OPENMP": "OFF",
        "USE_ROCM": "OFF",
        "USE_XPU": "OFF",
    }
    return (
        f"staged {_version.__version__} (standing in for PyTorch {_version.TORCH}) built with:\n"
        f"  - NumPy {np.__version__}, BLAS: {_blas()}\n"
        f"  - IREE {_iree()} (compiled steps)\n"
        "  - Build settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()) + ", \n"
    )


def parallel_info() -> str:
    """The thread counts staged's kernels use."""
    omp = os.environ.get("OMP_NUM_THREADS", "[not set]")
    return (
        f"staged's eager kernels: NumPy's BLAS, {_threads.get_num_threads()} threads\n"
        f"compiled steps: IREE's task pool\n"
        f"Environment variables:\n\tOMP_NUM_THREADS : {omp}\n"
    )
