"""DDP against its single-process equivalent, eager and compiled, on the cases probe.py
runs (tied and frozen parameters, float64, uneven batches, no_sync, unused parameters,
BatchNorm buffers, checkpoints; torch's DDP as the oracle is test_ddp_probe2.py's): one
``mpiexec`` launch per world size, whose per-case lines each test reads."""

from __future__ import annotations

import functools

import pytest

from tests.distributed.test_distributed import mpi, needs_mpi

CASES = [
    "tied_eager",
    "tied_compiled",
    "mixed_dtypes_frozen_eager",
    "mixed_dtypes_frozen_compiled",
    "uneven_batches_eager",
    "uneven_batches_compiled",
    "no_sync_accumulation_eager",
    "no_sync_accumulation_compiled",
    "unused_some_steps_eager",
    "unused_some_steps_compiled",
    "unused_on_one_rank_only",
    "unused_without_find_raises_at_the_next_forward",
    "batchnorm_buffers_eager",
    "batchnorm_buffers_compiled",
    "module_state_dict_and_checkpoint_from_rank_0",
]


@functools.cache
def probe(n: int):
    return mpi(n, "probe.py")


@needs_mpi
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("n", [2, 3])
def test_ddp_equals_the_single_process_equivalent(n, case):
    r = probe(n)
    ok = r.stdout.count(f"case {case} ok")
    assert ok == n, f"{ok} of {n} ranks passed {case}\n{r.stdout}\n{r.stderr[-6000:]}"
    assert r.returncode == 0 and r.stdout.count("probe done") == n, r.stdout + r.stderr
