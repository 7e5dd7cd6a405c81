"""Note [OpenBLAS spin]: importing staged before NumPy makes OpenBLAS's idle threads
sleep at once, so eager NumPy work does not slow the compiled step that follows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _timeout_seen(code, **env):
    e = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"} | env
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code + "; import os; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))",
        ],
        cwd=ROOT,
        env=e,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()[-1]


def test_importing_staged_first_sets_the_openblas_thread_timeout():
    assert _timeout_seen("import staged") == "4"
    assert _timeout_seen("import staged", OPENBLAS_THREAD_TIMEOUT="10") == "10"  # the user's
    # NumPy first: OpenBLAS has read its environment already, so staged leaves it alone
    assert _timeout_seen("import numpy, staged") == "None"
