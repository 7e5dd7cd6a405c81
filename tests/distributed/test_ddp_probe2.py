"""DDP and the collectives against torch's on gloo, on the same ranks (probe2.py): every
op on integer dtypes, hooks on DDP's parameters, no_sync decided at the forward, compiled
and eager steps mixed, broadcast_buffers=False, DistributedSampler and DataLoader over
epochs, parameters unused in some steps with uneven batches, state_dict errors, join();
and ranks that go their own ways (an extra batch, a barrier against a forward, a caught
exception) end within the timeout, naming the rank, without reducing garbage."""

from __future__ import annotations

import functools
import re
import socket

import pytest

from tests.distributed.test_distributed import mpi, needs_mpi

CASES = [
    "collectives_every_op_and_int_dtype_as_torch_gloo",
    "tensor_hooks_on_ddp_parameters_as_torch",
    "post_accumulate_grad_hooks_before_wrapping_as_torch",
    "hook_order_within_a_linear_as_torch",
    "forward_in_no_sync_backward_outside_and_two_forwards_one_backward",
    "compiled_and_eager_steps_mixed_as_torch",
    "broadcast_buffers_false_keeps_each_ranks_statistics_as_torch",
    "a_forward_in_no_sync_or_no_grad_skips_the_next_forwards_buffer_broadcast_as_torch",
    "sampler_loader_training_two_epochs_as_torch",
    "unused_some_steps_with_uneven_batches_as_torch",
    "state_dict_errors_as_torch",
    "join_for_uneven_inputs_as_torch",
    "join_dividing_by_the_ranks_still_stepping_with_buffers_as_torch",
    "join_throw_on_early_termination_as_torch",
    "join_with_even_inputs_disabled_or_finding_unused_parameters_as_torch",
    "join_refuses_a_compiled_step_and_falls_back_to_eager_as_torch",
    "object_collectives_and_group_objects_as_torch_gloo",
    "sync_module_states_and_ddp_logging_data_as_torch",
]


def port() -> str:
    with socket.socket() as s:  # a free port for torch's gloo rendezvous
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@functools.cache
def probe(n: int, fault: str | None = None):
    return mpi(n, "probe2.py", port(), *(("fault", fault) if fault else ()))


@needs_mpi
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("n", [2, 3])
def test_ddp_and_collectives_equal_torchs(n, case):
    r = probe(n)
    ok = r.stdout.count(f"case {case} ok")
    assert ok == n, f"{ok} of {n} ranks passed {case}\n{r.stdout}\n{r.stderr[-6000:]}"
    assert r.returncode == 0 and r.stdout.count("probe2 done") == n, r.stdout + r.stderr


@needs_mpi
def test_a_rank_with_an_extra_batch_fails_within_the_timeout_naming_it():
    """No join(): rank 0's extra forward waits for ranks that have left, until the timeout."""
    r = probe(2, "extra_batch")
    assert r.returncode != 0 and (
        "rank 0: DistributedDataParallel forward (checking the ranks agree) did not "
        "complete within 0:00:04" in r.stderr
    ), r.stderr


@needs_mpi
def test_a_barrier_against_a_forward_names_both_calls():
    """Before: rank 1's barrier completed against rank 0's forward check, and rank 0 was
    told that rank 1 had passed a batch of shape ['N']."""
    r = probe(2, "barrier")
    assert "rank 1: fault barrier finished" not in r.stdout, r.stdout
    assert r.returncode != 0 and (  # from either rank: the first to abort ends the other
        "the ranks called different things (rank 0: DistributedDataParallel forward "
        "(a batch of shape ['N', 5]); rank 1: barrier)" in r.stderr
    ), r.stderr


@needs_mpi
def test_a_rank_that_skips_a_backward_never_reduces_garbage():
    """Rank 1 catches an error in its loss and goes on to the next forward. Before, its
    check paired with the others' bucket all-reduce: ranks 0 and 2 ended that backward with
    different gradients (max 0.114 and 0.275) and rank 1 read a batch shape of floats."""
    r = probe(3, "caught")
    assert r.stdout.count("step 0 backward done") == 3, r.stdout
    assert "step 1 backward done" not in r.stdout, r.stdout
    waits = r"rank \d: (all_reduce|DistributedDataParallel forward \(checking the ranks agree\))"
    assert r.returncode != 0 and re.search(waits + r" did not complete within 0:00:04", r.stderr), (
        r.stderr
    )
