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
