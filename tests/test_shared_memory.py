"""Shared memory across processes, as torch's (Note [shared memory] in
staged/eager/shared_memory.py): tensors sent by ``multiprocessing`` to processes started by
``spawn`` or ``forkserver`` share their entries with the sender, and forked ones see
``share_memory_``'s; a Hogwild loop's updates all land."""

from __future__ import annotations

import os

import pytest

import staged
import staged.multiprocessing as mp

METHODS = ["spawn", "forkserver", "fork"]


def _add_one(model):
    with staged.no_grad():
        for p in model.parameters():
            p.add_(1.0)


def _model(shared):
    model = staged.nn.Linear(3, 2)
    with staged.no_grad():
        for p in model.parameters():
            p.zero_()
    return model.share_memory() if shared else model


@pytest.mark.parametrize("method", METHODS)
def test_hogwild_updates_of_every_process_land(method):
    """torch's Hogwild example: ``model.share_memory()``, then processes training it."""
    ctx = mp.get_context(method)
    model = _model(shared=True)
    procs = [ctx.Process(target=_add_one, args=(model,)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert [p.tolist() for p in model.parameters()] == [[[2.0] * 3] * 2, [2.0] * 2]


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_tensor_sent_to_a_started_process_moves_to_shared_memory_as_torchs(method):
    ctx = mp.get_context(method)
    model = _model(shared=False)
    p = ctx.Process(target=_add_one, args=(model,))
    p.start()
    p.join(timeout=120)
    assert p.exitcode == 0, p.exitcode
    assert all(t.is_shared() for t in model.parameters())
    assert model.bias.tolist() == [1.0, 1.0]


def test_a_forked_process_writes_its_own_copy_of_what_is_not_shared():
    """As torch's: fork sends nothing, the child's pages are copies on write."""
    model = _model(shared=False)
    p = mp.get_context("fork").Process(target=_add_one, args=(model,))
    p.start()
    p.join(timeout=120)
    assert p.exitcode == 0, p.exitcode
    assert model.bias.tolist() == [0.0, 0.0] and not model.bias.is_shared()


def _exchange(inbox, outbox, received, added):
    t, view = inbox.get()
    t.add_(10)  # a base and its view, shared: both writes land in the sender's memory
    view.mul_(2)
    back = staged.arange(3.0).share_memory_()
    outbox.put(back)
    received.wait()  # the sender of a tensor outlives its receipt (torch's rule too)
    back.add_(100)
    added.set()


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_queues_carry_shared_tensors_and_views_both_ways(method):
    ctx = mp.get_context(method)
    inbox, outbox, received, added = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Event()
    p = ctx.Process(target=_exchange, args=(inbox, outbox, received, added))
    p.start()
    base = staged.zeros(4).share_memory_()
    inbox.put((base, base[2:]))
    back = outbox.get(timeout=60)
    received.set()
    assert added.wait(60)
    p.join(timeout=120)
    assert p.exitcode == 0, p.exitcode
    assert base.tolist() == [10.0, 10.0, 20.0, 20.0]
    assert back.tolist() == [100.0, 101.0, 102.0] and back.is_shared()


def test_a_view_that_cannot_move_is_sent_as_a_copy_warning():
    ctx = mp.get_context("spawn")
    base = staged.zeros(4)
    q = ctx.Queue()
    with pytest.warns(UserWarning, match="goes as a copy"):
        q.put(base[1:])
        got = q.get(timeout=60)
    assert got.tolist() == [0.0] * 3 and not base.is_shared()


def test_small_tensors_share_a_few_descriptors():
    """A process may hold 1024 open files: a model's parameters must not take one each."""
    before = len(os.listdir("/proc/self/fd"))
    ts = [staged.ones(8).share_memory_() for _ in range(2000)]
    assert len(os.listdir("/proc/self/fd")) - before <= 3
    assert all(t.is_shared() for t in ts) and ts[-1].tolist() == [1.0] * 8


def _share_and_fill(q, received):
    t = staged.zeros(4).share_memory_()
    t.fill_(7.0)
    q.put(t)
    received.wait()


def test_tensors_shared_after_a_fork_in_parent_and_child_are_distinct():
    """A child forked after a share allocates in pages of its own, not in the free bytes
    of the parent's (shared) ones: else the parent's next tensor overwrote the child's."""
    ctx = mp.get_context("fork")
    staged.ones(1).share_memory_()
    q, received = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=_share_and_fill, args=(q, received))
    p.start()
    childs = q.get(timeout=60)
    received.set()
    p.join(timeout=120)
    assert p.exitcode == 0, p.exitcode
    mine = staged.zeros(4).share_memory_()
    assert childs.tolist() == [7.0] * 4 and mine.tolist() == [0.0] * 4


def _send_many(q, received):
    q.put([staged.full((4,), float(i)).share_memory_() for i in range(200)])
    received.wait()


def test_a_receiver_maps_each_file_once():
    """A queue sends a descriptor per tensor: 200 tensors of one file open one, not 200."""
    ctx = mp.get_context("spawn")
    q, received = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=_send_many, args=(q, received))
    p.start()
    before = len(os.listdir("/proc/self/fd"))
    ts = q.get(timeout=60)
    opened = len(os.listdir("/proc/self/fd")) - before
    received.set()
    p.join(timeout=120)
    assert p.exitcode == 0, p.exitcode
    assert opened <= 2
    assert [t[0].item() for t in ts] == [float(i) for i in range(200)]


def test_sharing_strategies_are_torchs_names():
    assert mp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    assert mp.get_sharing_strategy() == "file_descriptor"
    mp.set_sharing_strategy("file_system")  # many programs set it: tensors still go by fd
    try:
        assert mp.get_sharing_strategy() == "file_system"
        test_hogwild_updates_of_every_process_land("spawn")
    finally:
        mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(AssertionError, match="invalid sharing strategy 'shm'"):
        mp.set_sharing_strategy("shm")
