"""staged.distributed, DistributedDataParallel, DistributedSampler and the launcher. The
scripts next to this file run on real MPI ranks (``mpiexec -n 2`` and ``-n 3``), started
from here with a timeout; one launch checks many things, to keep the directory fast."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import sys

import numpy as np
import pytest
import torch.utils.data

import staged
import staged.distributed as dist
import staged.runtime
import staged.multiprocessing as mp
from staged.autodiff import collective as C
from staged.distributed import run
from staged.lower.mlir import LoweringError
from staged.runtime.compiler import compile_mlir
from staged.utils.data import DistributedSampler
from tests import jobs

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
_NEXT = os.path.join(os.path.dirname(sys.executable), "mpiexec")
MPIEXEC = _NEXT if os.access(_NEXT, os.X_OK) else shutil.which("mpiexec")
needs_mpi = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None or MPIEXEC is None,
    reason="needs mpi4py and mpiexec: pip install 'staged[distributed]' (mpich, mpi4py)",
)


def launch(*args, timeout=600):
    """Run a job; the timeout only catches a hang (a cold compile cache on a loaded 2-core
    machine took over 90 s for compiled.py's steps)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return jobs.run(args, cwd=ROOT, env=env, timeout=timeout)


def mpi(n, script, *args):
    return launch(MPIEXEC, "-n", str(n), sys.executable, str(HERE / script), *args)


@needs_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_collectives_gradients_errors_and_sampler_shards(n):
    r = mpi(n, "collectives.py")
    assert r.returncode == 0 and r.stdout.count("collectives ok") == n, r.stdout + r.stderr


@needs_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_sync_batch_norm_equals_batch_norm_on_the_global_batch(n):
    r = mpi(n, "sync_batch_norm.py")
    assert r.returncode == 0 and r.stdout.count("sync batch norm ok") == n, r.stdout + r.stderr


@needs_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_ddp_training_equals_one_process_on_the_whole_batch(n):
    """Through the launcher, which sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE."""
    r = launch(
        sys.executable,
        "-m",
        "staged.distributed.run",
        "--nproc-per-node",
        str(n),
        str(HERE / "ddp.py"),
    )
    assert r.returncode == 0 and r.stdout.count("ddp ok") == n, r.stdout + r.stderr


@needs_mpi
def test_a_rank_that_raises_aborts_the_job_naming_it():
    r = mpi(3, "faults.py", "raise")
    assert r.returncode != 0 and "rank 1 raised ValueError: boom" in r.stderr, r.stderr
    # the abort ended the others, not their 60 s timeout (no test times anything: a loaded
    # machine made a 30 s bound fail)
    assert "did not complete within" not in r.stderr, r.stderr


@needs_mpi
def test_a_rank_that_leaves_makes_the_others_fail_within_the_timeout():
    r = mpi(2, "faults.py", "leave")
    assert r.returncode != 0, r.stderr
    assert (
        "rank 0: all_reduce (checking the ranks agree) did not complete within 0:00:02" in r.stderr
    ), r.stderr


@needs_mpi
def test_ranks_not_started_by_mpi_fail_at_once_naming_the_launcher():
    r = launch(
        sys.executable,
        "-c",
        "import staged.distributed as d; d.init_process_group('gloo', world_size=2, rank=1)",
        timeout=60,
    )
    assert r.returncode != 0 and "python -m staged.distributed.run" in r.stderr, r.stderr
    with pytest.raises(RuntimeError, match="python -m staged.distributed.run --nproc-per-node 2"):
        mp.spawn(print, nprocs=2)


@needs_mpi
def test_launcher_command_line():
    a = run.parse(
        ["--nnodes", "2", "--nproc_per_node", "4", "--hostfile", "hosts", "train.py", "--lr", "0.1"]
    )
    cmd = run.command(a)
    assert cmd[:7] == [MPIEXEC, "-n", "8", "-ppn", "4", "-f", "hosts"]
    assert cmd[7:] == [
        sys.executable,
        "-m",
        "staged.distributed.run",
        run.RANK_FLAG,
        "train.py",
        "--lr",
        "0.1",
    ]


def test_a_collective_starts_before_the_work_that_does_not_need_it():
    """Note [segments]: the compute independent of a started all_reduce is a later
    segment; constants' ops make no segment of their own (one that IREE compiles to no
    work signals its fence ahead of the calls queued before it: calls left unread fail)."""

    def step(x):
        a = C.all_reduce((x * 2).sum(), op="sum")  # started after segment 0 ...
        b = C.all_reduce((x * 3).exp().sum(), op="sum")  # ... while segment 1 computes this
        return a + b, C.all_reduce(x, op="sum").reshape(2, 2), staged.ones(2) * 3

    x = staged.arange(4.0)
    compiled = staged.compile(step)
    results = [compiled(x) for _ in range(6)]  # queued, none read until the last
    for ours, eager in zip(results[-1], step(x)):
        np.testing.assert_allclose(ours.numpy(), eager.numpy(), rtol=1e-6)
    plan = compiled._last.module.plan
    first, second = plan.host[0], plan.host[1]
    x_in = compiled._last.captured.graph.inputs[0].value
    assert [op.inputs[0] for op in first] == [plan.segments[0].outputs[0], x_in]
    assert len(second) == 1 and second[0].inputs[0] in plan.segments[1].outputs
    assert all(s.graph.ops for s in plan.segments)


def test_clear_errors_without_mpi():
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.all_reduce(staged.ones(2))
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        staged.nn.parallel.DistributedDataParallel(staged.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="Invalid backend: 'tcp'"):
        dist.init_process_group("tcp")
    with pytest.raises(ValueError, match="use backend='gloo' or 'mpi'"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


@needs_mpi
def test_compiled_steps_with_collectives_equal_eager(tmp_path):
    """The differentiable all_reduce, c10d's in-place one and DDP training, compiled (as
    segments with the collectives between them on the host) on 2 ranks, equal eager; the
    DDP step saved and loaded trains on as single-process training does."""
    r = mpi(2, "compiled.py", str(tmp_path))
    assert r.returncode == 0 and r.stdout.count("compiled ok") == 2, r.stdout + r.stderr


def test_compiled_steps_with_collectives_run_in_segments_and_onnx_export_fails(tmp_path):
    """Alone (no process group) every collective is the identity: the segmented step and
    the saved one equal the eager one; one module cannot hold them (cuda), nor can ONNX."""

    def step(x):
        y = C.all_reduce(x * 2, op="sum")
        return (C.all_reduce(y.sum() * 3, op="avg") + y**2).sum()

    x = staged.ones(3)
    compiled = staged.compile(step)
    np.testing.assert_allclose(compiled(x).detach().numpy(), step(x).detach().numpy(), rtol=1e-6)
    assert all(s.graph.ops for s in compiled._last.module.plan.segments)
    deployed = staged.runtime.load(compiled.save(tmp_path / "step"))
    np.testing.assert_allclose(deployed(x).numpy(), step(x).detach().numpy(), rtol=1e-6)
    collectives = [c for s in deployed.manifest["program"]["segments"] for c in s["collectives"]]
    assert [(c["name"], c["params"]) for c in collectives] == [
        ("all_reduce", {"op": "sum"}),
        ("all_reduce", {"op": "avg"}),
    ]
    assert deployed.manifest["iree_run_module"] is None
    # one module for cuda: IREE's own collectives over its channel (compiled here; they
    # run where a GPU and NCCL are)
    text = staged.capture(step, x).to_mlir()
    assert "flow.collective.all_reduce sum, f32" in text
    assert "flow.collective.all_reduce average, f32" in text
    assert compile_mlir(text, "cuda")
    with pytest.raises(staged.onnx.ExportError, match="ONNX has no collective operators"):
        staged.onnx.export(step, (x,), tmp_path / "step.onnx")


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int64", "int32", "uint8"])
def test_every_collective_lowers_to_irees_own_and_compiles_for_cuda(dtype):
    """all_reduce (each op), all_gather, reduce_scatter and broadcast as flow.collective ops
    (broadcast: an all_reduce sum of the bits of src's x and zeros elsewhere); complex
    tensors, which IREE's collectives do not take, fail naming the op."""

    def step(x):
        outs = [C.all_reduce(x, op=op) for op in ("sum", "avg", "max", "min", "product")]
        g = C.all_gather(x, world=1)
        return [*outs, g, C.reduce_scatter(g, op="sum", world=1), C.broadcast(x, src=0)]

    x = staged.ones(3, 2, dtype=getattr(staged, dtype))
    text = staged.capture(step, x).to_mlir()
    for name in ("all_reduce sum", "all_reduce average", "all_reduce maximum", "all_gather"):
        assert f"flow.collective.{name}" in text
    assert "flow.collective.reduce_scatter sum" in text and "flow.channel.rank" in text
    assert compile_mlir(text, "cuda")
    z = staged.ones(2, dtype=staged.complex64)
    with pytest.raises(LoweringError, match="all_reduce on complex64 .*no complex64 tensors"):
        staged.capture(lambda z: C.all_reduce(z, op="sum"), z).to_mlir()


def test_distributed_sampler_order_is_torchs():
    for n, replicas, drop_last, shuffle in [
        (10, 3, False, True),
        (11, 2, True, True),
        (5, 4, False, False),
        (3, 4, False, True),
    ]:
        for rank in range(replicas):
            ours = DistributedSampler(range(n), replicas, rank, shuffle, 7, drop_last)
            theirs = torch.utils.data.DistributedSampler(
                range(n), replicas, rank, shuffle, 7, drop_last
            )
            for epoch in (0, 3):
                ours.set_epoch(epoch)
                theirs.set_epoch(epoch)
                assert list(ours) == list(theirs) and len(ours) == len(theirs)
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
