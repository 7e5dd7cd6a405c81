"""The example models train data-parallel: ``python -m models.mlp --ddp`` on 2 MPI ranks
wraps the model in DistributedDataParallel, shards the digits with DistributedSampler and
reports the global batch; only rank 0 prints."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import sys

import pytest

from tests import jobs

ROOT = pathlib.Path(__file__).resolve().parents[2]
_NEXT = os.path.join(os.path.dirname(sys.executable), "mpiexec")
MPIEXEC = _NEXT if os.access(_NEXT, os.X_OK) else shutil.which("mpiexec")


@pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None or MPIEXEC is None,
    reason="needs mpi4py and mpiexec: pip install 'staged[distributed]'",
)
def test_mlp_ddp_on_two_ranks_reports_the_global_batch(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    r = jobs.run(
        [
            MPIEXEC,
            "-n",
            "2",
            sys.executable,
            "-m",
            "models.mlp",
            "--ddp",
            "--epochs",
            "1",
            "--batch-size",
            "16",
            "--no-progress",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "DistributedDataParallel over 2 ranks" in r.stdout, out
    assert "global batch 32 (16 x 2)" in r.stdout, out
    assert r.stdout.count("held-out accuracy:") == 2, out  # rank 0 only: line + summary
    # 1437 digits, DistributedSampler: 719 per rank, 44 full batches of 16 each
    assert "training:  44 steps" in r.stdout, out
    assert (tmp_path / "mlp_loss.png").exists() or "matplotlib is not installed" in out
