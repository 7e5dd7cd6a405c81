"""Run by test_ddp_probe2.py under ``mpiexec -n N``: DDP and the collectives against torch's
DDP and collectives on gloo, on these ranks, on cases probe.py does not cover. Each case
prints ``case NAME ok`` or ``case NAME FAIL: why``; a failing case does not stop the
others. ``probe2.py PORT fault MODE`` runs one fault instead (see ``fault``)."""

import contextlib
import re
import sys
import time
import traceback
import warnings
from datetime import timedelta

import numpy as np

import staged
import staged.distributed as dist
from staged import nn, optim
from staged.nn.parallel import DistributedDataParallel as DDP
from staged.utils.data import DataLoader, DistributedSampler, TensorDataset

FAULT = sys.argv[3] if len(sys.argv) > 3 else None
dist.init_process_group("gloo", timeout=timedelta(seconds=4 if FAULT else 40))
rank, world = dist.get_rank(), dist.get_world_size()
# torch, the oracle, outside a fault only: a fault's ranks skip its import (2 s of CPU
# each), and torch's group's stderr handling lost rank 0's abort message at times
if not FAULT:
    import torch

    torch.distributed.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=rank, world_size=world
    )
    TDDP = torch.nn.parallel.DistributedDataParallel


def case(fn):
    if FAULT:
        return fn
    try:
        fn()
    except Exception as e:  # reported, then the next case runs
        msg = f"{type(e).__name__}: {e}".replace("\n", " | ")[:600]
        print(f"rank {rank}: case {fn.__name__} FAIL: {msg}", flush=True)
        traceback.print_exc(file=sys.stderr)
    else:
        print(f"rank {rank}: case {fn.__name__} ok", flush=True)
    dist.barrier()
    return fn


def close(a, b, what, rtol=1e-10, atol=1e-12):
    a = a.detach().numpy() if hasattr(a, "detach") else a
    b = b.detach().numpy() if hasattr(b, "detach") else b
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol, atol, err_msg=what)


def shards(step, shape, rows=None):
    """This rank's rows of a float64 global batch that every rank draws alike."""
    rows = rows or [3] * world
    rng = np.random.default_rng(step)
    t = rng.standard_normal((sum(rows), *shape))
    at = np.cumsum([0, *rows])
    return t[at[rank] : at[rank + 1]]


class Net(nn.Module):
    def __init__(self, seed):
        super().__init__()
        staged.manual_seed(seed)
        self.l1, self.l2 = nn.Linear(5, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.l2(self.l1(x).tanh())


def twins(seed=10):
    """staged's Net in float64 and torch's copy of it (rank 0's initialisation)."""
    ours = Net(seed).double()
    theirs = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    theirs.double().load_state_dict(
        {
            k.replace("l1", "0").replace("l2", "2"): torch.tensor(v.numpy())
            for k, v in ours.state_dict().items()
        }
    )
    return ours, theirs


def same_model(ours, theirs, what):
    for (n, p), q in zip(ours.named_parameters(), theirs.parameters()):
        close(p, q, f"{what}: {n}")
        if q.grad is not None or p.grad is not None:
            close(p.grad, q.grad, f"{what}: {n}.grad")


def loss(m, x, y):
    return ((m(x) - y) ** 2).mean()


def t_(a):
    return torch.tensor(np.asarray(a))


def s_(a):
    return staged.tensor(np.asarray(a))


@case
def collectives_every_op_and_int_dtype_as_torch_gloo():
    """SUM/MAX/MIN/PRODUCT on int32, int64, uint8 and float32 (wrapping as torch's), AVG on
    float (gloo has none: against the mean), broadcast from the last rank, all_gather and
    all_gather_into_tensor, reduce_scatter_tensor (against NumPy: gloo has none)."""
    TOp, Op = torch.distributed.ReduceOp, dist.ReduceOp
    for dtype in ("int32", "int64", "uint8", "float32"):
        base = np.random.default_rng(rank).integers(1, 200, (2, 3)).astype(dtype)
        for op in ("SUM", "MAX", "MIN", "PRODUCT"):
            ours, theirs = s_(base), t_(base)
            dist.all_reduce(ours, op=getattr(Op, op))
            torch.distributed.all_reduce(theirs, op=getattr(TOp, op))
            assert ours.numpy().dtype == theirs.numpy().dtype, (dtype, op)
            close(ours, theirs.numpy(), f"{dtype} {op}", rtol=1e-6, atol=0)
        ours, theirs = s_(base), t_(base)
        dist.broadcast(ours, src=world - 1)
        torch.distributed.broadcast(theirs, src=world - 1)
        assert np.array_equal(ours.numpy(), theirs.numpy()), dtype
        out = staged.zeros(world * 2, 3, dtype=ours.dtype)
        tout = torch.zeros(world * 2, 3, dtype=theirs.dtype)
        dist.all_gather_into_tensor(out, s_(base))
        torch.distributed.all_gather_into_tensor(tout, t_(base))
        assert np.array_equal(out.numpy(), tout.numpy()), dtype
        rows = [staged.zeros(2, 3, dtype=ours.dtype) for _ in range(world)]
        trows = [torch.zeros(2, 3, dtype=theirs.dtype) for _ in range(world)]
        dist.all_gather(rows, s_(base))
        torch.distributed.all_gather(trows, t_(base))
        for a, b in zip(rows, trows):
            assert np.array_equal(a.numpy(), b.numpy()), dtype
    every = np.stack([np.random.default_rng(r).standard_normal((world, 2)) for r in range(world)])
    t = s_(every[rank])
    dist.all_reduce(t, op=Op.AVG)
    close(t, every.mean(0), "AVG")
    for op, ref in (("SUM", every.sum(0)), ("MIN", every.min(0)), ("PRODUCT", every.prod(0))):
        out = staged.zeros(2, dtype=staged.float64)
        dist.reduce_scatter_tensor(out, s_(every[rank]), op=getattr(Op, op))
        close(out, ref[rank], f"reduce_scatter {op}")
    ints = s_(np.arange(4, dtype=np.int64))
    try:
        dist.all_reduce(ints, op=Op.AVG)
    except RuntimeError as e:
        assert "ReduceOp.AVG needs a floating point tensor" in str(e), e
    else:
        raise AssertionError("AVG of int64 did not raise")
    scalar = staged.tensor(float(rank + 1))
    dist.all_reduce(scalar, op=Op.PRODUCT)
    assert scalar.shape == () and scalar.item() == float(np.prod(np.arange(1, world + 1)))


def hooked(ours, theirs, kind):
    """Hooks of ``kind`` on both models' parameters, recording (name, gradient) in order;
    a tensor hook doubles the gradient it is given."""
    seen, tseen = [], []
    names = [n for n, _ in ours.named_parameters()]
    for log, params in ((seen, ours.parameters()), (tseen, theirs.parameters())):
        for n, p in zip(names, params):
            if kind == "tensor":
                p.register_hook(lambda g, n=n, log=log: log.append((n, g.numpy().copy())) or g * 2)
            else:
                p.register_post_accumulate_grad_hook(
                    lambda q, n=n, log=log: log.append((n, q.grad.numpy().copy()))
                )
    return seen, tseen


def hooks(kind, wrap_first):
    """Hooks on the parameters of a DDP module (registered before or after wrapping) see
    this rank's local gradient, what a tensor hook returns is what is averaged, and .grad
    ends as the average: torch's DDP's values. Returns the two orders of the hooks."""
    ours, theirs = twins()
    if wrap_first:
        ddp, tddp = DDP(ours), TDDP(theirs)
        seen, tseen = hooked(ours, theirs, kind)
    else:
        seen, tseen = hooked(ours, theirs, kind)
        ddp, tddp = DDP(ours), TDDP(theirs)
    x, y = shards(0, (5,)), shards(1, (3,))
    loss(ddp, s_(x), s_(y)).backward()
    loss(tddp, t_(x), t_(y)).backward()
    assert len(seen) == len(tseen) == 4, (len(seen), len(tseen))
    mine = dict(seen)
    for n, b in tseen:
        close(mine[n], b, f"{kind} hook {n}")
    same_model(ddp.module, tddp.module, "after backward")
    return [n for n, _ in seen], [n for n, _ in tseen]


@case
def tensor_hooks_on_ddp_parameters_as_torch():
    hooks("tensor", wrap_first=True)


@case
def post_accumulate_grad_hooks_before_wrapping_as_torch():
    hooks("post", wrap_first=False)


@case
def hook_order_within_a_linear_as_torch():
    """torch runs a Linear's bias hook before its weight's (AddmmBackward0's edges)."""
    ours, theirs = hooks("tensor", wrap_first=True)
    assert ours == theirs, f"staged {ours}, torch {theirs}"


@case
def forward_in_no_sync_backward_outside_and_two_forwards_one_backward():
    """torch decides at the forward: a forward under no_sync does not reduce even if its
    backward runs after the block; a loss over two forwards reduces once."""
    ours, theirs = twins()
    ddp, tddp = DDP(ours), TDDP(theirs)
    x, y = shards(0, (5,)), shards(1, (3,))
    with ddp.no_sync():
        lo = loss(ddp, s_(x), s_(y))
    with tddp.no_sync():
        lt = loss(tddp, t_(x), t_(y))
    lo.backward()
    lt.backward()
    same_model(ddp.module, tddp.module, "local")
    x2 = shards(2, (5,))
    (loss(ddp, s_(x), s_(y)) + ddp(s_(x2)).sum()).backward()
    (loss(tddp, t_(x), t_(y)) + tddp(t_(x2)).sum()).backward()
    same_model(ddp.module, tddp.module, "two forwards")


@case
def compiled_and_eager_steps_mixed_as_torch():
    """One DDP model and Adam, stepped compiled, eager, compiled...: torch's DDP every step."""
    ours, theirs = twins()
    ddp, tddp = DDP(ours), TDDP(theirs)
    opt = optim.Adam(ddp.parameters(), lr=0.02)
    topt = torch.optim.Adam(tddp.parameters(), lr=0.02)

    def step(x, y):
        opt.zero_grad()
        lo = loss(ddp, x, y)
        lo.backward()
        opt.step()
        return lo

    fast = staged.compile(step)
    for i in range(5):
        x, y = shards(10 + i, (5,)), shards(20 + i, (3,))
        lo = (fast if i % 2 == 0 else step)(s_(x), s_(y))
        topt.zero_grad()
        lt = loss(tddp, t_(x), t_(y))
        lt.backward()
        topt.step()
        close(lo, lt.detach().numpy(), f"step {i} loss", rtol=1e-9)
        same_model(ddp.module, tddp.module, f"step {i}")
    for p, q in zip(ddp.parameters(), tddp.parameters()):
        for k in ("exp_avg", "exp_avg_sq"):
            close(opt.state[p][k], topt.state[q][k].numpy(), k)


class BN(nn.Module):
    def __init__(self):
        super().__init__()
        staged.manual_seed(rank)  # differing initialisations
        self.l, self.bn = nn.Linear(5, 4), nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.l(x))


def bn_twins():
    """A BatchNorm model in float64, its running statistics differing per rank, and torch's."""
    m = BN().double()
    with staged.no_grad():
        m.bn.running_mean.fill_(float(rank))
    theirs = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4)).double()
    theirs.load_state_dict(
        {
            k.replace("l.", "0.").replace("bn.", "1."): t_(v.numpy())
            for k, v in m.state_dict().items()
        }
    )
    return m, theirs


@case
def broadcast_buffers_false_keeps_each_ranks_statistics_as_torch():
    m, theirs = bn_twins()  # rank 0's parameters broadcast at construction
    ddp, tddp = DDP(m, broadcast_buffers=False), TDDP(theirs, broadcast_buffers=False)
    opt = optim.SGD(ddp.parameters(), lr=0.1)
    topt = torch.optim.SGD(tddp.parameters(), lr=0.1)
    for i in range(3):
        x = shards(30 + i, (5,), rows=[3 + r for r in range(world)])
        opt.zero_grad()
        (ddp(s_(x)) ** 2).mean().backward()
        opt.step()
        topt.zero_grad()
        (tddp(t_(x)) ** 2).mean().backward()
        topt.step()
    for (n, a), b in zip(ddp.module.state_dict().items(), tddp.module.state_dict().values()):
        close(a, b.numpy(), n)


def within(model, how):
    """The context a forward of ``how`` runs in: ``no_sync``, ``no_grad`` or none."""
    if how == "no_sync":
        return model.no_sync()
    lib = torch if isinstance(model, TDDP) else staged
    return lib.no_grad() if how == "no_grad" else contextlib.nullcontext()


@case
def a_forward_in_no_sync_or_no_grad_skips_the_next_forwards_buffer_broadcast_as_torch():
    """torch's ``require_forward_param_sync``: the forward after one under ``no_sync`` (or
    ``no_grad``) does not broadcast rank 0's buffers, so each rank's statistics move on
    from its own; the forward after one that reduces broadcasts them again."""
    m, theirs = bn_twins()
    ddp, tddp = DDP(m), TDDP(theirs)  # the buffers broadcast at construction
    for i, how in enumerate(["no_sync", "plain", "no_grad", "plain", "plain", "no_sync"]):
        x = shards(40 + i, (5,))
        for model, to in ((ddp, s_), (tddp, t_)):
            with within(model, how):
                out = model(to(x))
                if how != "no_grad":
                    (out**2).mean().backward()
        for (n, a), b in zip(ddp.module.state_dict().items(), tddp.module.state_dict().values()):
            close(a, b.numpy(), f"after {how} {i}: {n}")


@case
def sampler_loader_training_two_epochs_as_torch():
    """DistributedSampler (shuffled, 13 rows: padded) and DataLoader over 2 epochs with
    set_epoch, against torch's sampler, loader and DDP: batches, losses, parameters."""
    xs = np.random.default_rng(5).standard_normal((13, 5))
    ys = np.random.default_rng(6).standard_normal((13, 3))
    ours, theirs = twins()
    ddp, tddp = DDP(ours), TDDP(theirs)
    opt = optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    topt = torch.optim.SGD(tddp.parameters(), lr=0.05, momentum=0.9)
    data = TensorDataset(s_(xs), s_(ys))
    tdata = torch.utils.data.TensorDataset(t_(xs), t_(ys))
    sampler, tsampler = (
        DistributedSampler(data, seed=4),
        torch.utils.data.DistributedSampler(tdata, seed=4),
    )
    loader = DataLoader(data, batch_size=2, sampler=sampler)
    tloader = torch.utils.data.DataLoader(tdata, batch_size=2, sampler=tsampler)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        tsampler.set_epoch(epoch)
        assert list(sampler) == list(tsampler), epoch
        for (x, y), (tx, ty) in zip(loader, tloader, strict=True):
            close(x, tx.numpy(), "batch")
            opt.zero_grad()
            lo = loss(ddp, x, y)
            lo.backward()
            opt.step()
            topt.zero_grad()
            lt = loss(tddp, tx, ty)
            lt.backward()
            topt.step()
            close(lo, lt.detach().numpy(), f"epoch {epoch} loss")
    same_model(ddp.module, tddp.module, "after 2 epochs")


class Extra(Net):
    """Net, plus a layer that a step leaves unused where ``use`` is False."""

    def __init__(self, seed):
        super().__init__(seed)
        self.extra = nn.Linear(5, 3)

    def forward(self, x, use=True):
        y = super().forward(x)
        return y + self.extra(x) if use else y


@case
def unused_some_steps_with_uneven_batches_as_torch():
    """Uneven batches and a parameter no rank uses in some steps (find_unused_parameters),
    SGD with momentum and weight decay, from per-rank initialisations (rank 0's wins)."""

    class TorchExtra(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(5, 8), torch.nn.Linear(8, 3)
            self.extra = torch.nn.Linear(5, 3)

        def forward(self, x, use):
            y = self.l2(self.l1(x).tanh())
            return y + self.extra(x) if use else y

    theirs = TorchExtra().double()
    theirs.load_state_dict({k: t_(v.numpy()) for k, v in Extra(10).state_dict().items()})
    tddp = TDDP(theirs, find_unused_parameters=True)
    ours = DDP(Extra(10 + rank).double(), find_unused_parameters=True)
    opt = optim.SGD(ours.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    topt = torch.optim.SGD(tddp.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    rows = [3 + r for r in range(world)]
    for i, use in enumerate((True, False, True, False, False)):
        x, y = shards(i, (5,), rows), shards(50 + i, (3,), rows)
        opt.zero_grad()
        ((ours(s_(x), use) - s_(y)) ** 2).mean().backward()
        opt.step()
        topt.zero_grad()
        ((tddp(t_(x), use) - t_(y)) ** 2).mean().backward()
        topt.step()
        same_model(ours.module, theirs, f"step {i}")


@case
def state_dict_errors_as_torch():
    """Loading a plain module's state_dict into DDP fails as torch's (the keys lack 'module.')."""
    ours, theirs = twins()
    ddp, tddp = DDP(ours), TDDP(theirs)
    errors = []
    for m, sd in ((ddp, ours.state_dict()), (tddp, theirs.state_dict())):
        try:
            m.load_state_dict(sd)
        except RuntimeError as e:
            errors.append(str(e))
    assert len(errors) == 2, errors
    for e in errors:
        assert e.startswith("Error(s) in loading state_dict for DistributedDataParallel:"), e
        assert 'Missing key(s) in state_dict: "module.' in e, e


def uneven(model, step, batches, out, **join):
    """``batches`` steps of SGD (momentum) of ``model`` (staged's or torch's DDP) inside its
    ``join(**join)``, the batch rows differing per rank; each step's gradients, and the
    error raised (type and message) or None."""
    torch_ = isinstance(model, TDDP)
    to, params = (t_ if torch_ else s_), list(model.parameters())
    opt = (torch.optim.SGD if torch_ else optim.SGD)(params, lr=0.1, momentum=0.9)
    grads, error = [], None
    try:
        with model.join(**join):
            for i in range(batches):
                x = to(shards(60 + i, (5,), rows=[2 + r for r in range(world)]))
                step(model, opt, x, to(shards(70 + i, (out,), rows=[2 + r for r in range(world)])))
                grads.append([p.grad.numpy().copy() for p in params])
    except RuntimeError as e:
        error = (type(e).__name__, str(e))
    return grads, error


def train(model, opt, x, y):
    opt.zero_grad()
    ((model(x) - y) ** 2).mean().backward()
    opt.step()


def train_then_evaluate(model, opt, x, y):
    """A step, then a forward under no_grad, which reduces nothing: the joined ranks are told
    so (torch's shadow the bucket all-reduces of a backward that never comes)."""
    train(model, opt, x, y)
    with staged.no_grad():
        model(x)


def same_join(make, batches, step=train, out=3, unused=False, **join):
    """staged's DDP.join() and torch's alike: every step's gradients, the error if any, the
    final parameters and buffers."""
    ours, theirs = make()
    ddp = DDP(ours, find_unused_parameters=unused)
    tddp = TDDP(theirs, find_unused_parameters=unused)
    mine = uneven(ddp, step, batches, out, **join)
    tgrads, terror = uneven(tddp, train, batches, out, **join)
    if mine[1] is not None:  # a forward's error names the user's line (docs/errors.md)
        mine = (mine[0], (mine[1][0], re.sub(r"^\S+\.py:\d+: ", "", mine[1][1])))
    assert mine[1] == terror, f"staged raised {mine[1]}, torch {terror}"
    assert len(mine[0]) == len(tgrads), (len(mine[0]), len(tgrads))
    for i, (a, b) in enumerate(zip(mine[0], tgrads)):
        for g, h in zip(a, b):
            close(g, h, f"step {i} grad")
    for (n, a), b in zip(ddp.module.state_dict().items(), tddp.module.state_dict().values()):
        close(a, b.numpy(), n)


@case
def join_for_uneven_inputs_as_torch():
    """torch's ``join()``: rank r has 2 + r batches; the finished ranks shadow the others'
    all-reduces with zeros, the gradients divided by the world size; at the end every rank
    has the last rank's model."""
    same_join(twins, 2 + rank)
    same_join(twins, 2 + rank, step=train_then_evaluate)  # torch's loop without the no_grad


@case
def join_dividing_by_the_ranks_still_stepping_with_buffers_as_torch():
    """``divide_by_initial_world_size=False`` on a BatchNorm model, rank 0 with the most
    batches: the buffers come from the highest rank still stepping, the last joiner's
    statistics end on every rank."""
    same_join(bn_twins, 3 if rank == 0 else 1 + rank % 2, out=4, divide_by_initial_world_size=False)


@case
def join_throw_on_early_termination_as_torch():
    """Every rank raises once one has run out: the ones stepping in their forward, the one
    that ran out in the join's exit, with torch's messages; the model stays in step."""
    same_join(twins, 2 + rank, throw_on_early_termination=True)


@case
def join_with_even_inputs_disabled_or_finding_unused_parameters_as_torch():
    same_join(twins, 2)
    same_join(twins, 2, enable=False)
    same_join(twins, 2 + rank, unused=True)  # the joined ranks shadow the used-parameter map


@case
def join_refuses_a_compiled_step_and_falls_back_to_eager_as_torch():
    """A compiled step inside join() raises EagerOnlyError (traced again if it was
    compiled outside); with fallback='eager' it runs eagerly, as torch's."""
    ddp = DDP(Net(10).double())
    opt = optim.SGD(ddp.parameters(), lr=0.1)
    x, y = s_(shards(0, (5,))), s_(shards(1, (3,)))
    fast = staged.compile(train)
    fast(ddp, opt, x, y)
    fast(ddp, opt, x, y)  # compiled outside join(): the second call's trace holds
    try:
        with ddp.join():
            fast(ddp, opt, x, y)
    except NotImplementedError as e:
        assert type(e).__name__ == "EagerOnlyError", e
        assert "a compiled step cannot run inside join()" in str(e), e
    else:
        raise AssertionError("a compiled step ran inside join()")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_join(twins, 2 + rank, step=staged.compile(train, fallback="eager"))


@case
def object_collectives_and_group_objects_as_torch_gloo():
    """all_gather_object, broadcast_object_list, gather_object and scatter_object_list of
    Python objects (tensors inside) as torch's on gloo; group.WORLD, the default group,
    Backend and ReduceOp's enum members as torch's (what Lightning's DDP strategy uses)."""
    mine = {"rank": rank, "text": "x" * (rank + 1), "t": [1.5 * rank, rank]}
    ours, theirs = [None] * world, [None] * world
    dist.all_gather_object(ours, mine)
    torch.distributed.all_gather_object(theirs, mine)
    assert (
        ours
        == theirs
        == [{"rank": r, "text": "x" * (r + 1), "t": [1.5 * r, r]} for r in range(world)]
    )
    for src in range(world):
        ours = [f"from {rank}", rank, None]
        theirs = list(ours)
        dist.broadcast_object_list(ours, src=src)
        torch.distributed.broadcast_object_list(theirs, src=src)
        assert ours == theirs == [f"from {src}", src, None], (ours, theirs)
    got = [None] * world if rank == world - 1 else None
    dist.gather_object(("g", rank), got, dst=world - 1)
    if rank == world - 1:
        assert got == [("g", r) for r in range(world)], got
    out = [None]
    dist.scatter_object_list(out, [f"item {r}" for r in range(world)] if rank == 0 else None, src=0)
    assert out == [f"item {rank}"], out
    t = staged.tensor([float(rank)] * 3)
    box = [t] if rank == 0 else [None]
    dist.broadcast_object_list(box, src=0)
    assert isinstance(box[0], staged.Tensor) and box[0].tolist() == [0.0] * 3, box
    assert isinstance(dist.group.WORLD, dist.ProcessGroup) and dist.group.WORLD.size() == world
    assert dist.group.WORLD.rank() == rank == dist.get_rank(dist.group.WORLD)
    assert dist.distributed_c10d._get_default_group() is dist.group.WORLD
    assert dist.Backend("GLOO") == torch.distributed.Backend("GLOO") == dist.get_backend()
    for name in ("SUM", "AVG", "MAX", "MIN", "PRODUCT"):
        s_op, t_op = getattr(dist.ReduceOp, name), getattr(torch.distributed.ReduceOp, name)
        assert (s_op.name, s_op.value) == (t_op.name, int(t_op.value)), name
        a, b = s_(np.arange(1.0, 4.0) + rank), torch.arange(1.0, 4.0, dtype=torch.float64) + rank
        dist.all_reduce(a, op=dist.ReduceOp(s_op))
        torch.distributed.all_reduce(b, op=t_op)
        close(a, b, name)


@case
def sync_module_states_and_ddp_logging_data_as_torch():
    """distributed.utils._sync_module_states gives every rank rank 1's parameters and
    buffers but the ignored ones (Lightning's DDP strategy outside fitting); a DDP keeps
    static_graph and reports what it was made with, as torch's."""
    from staged.distributed.utils import _sync_module_states

    staged.manual_seed(rank)
    torch.manual_seed(rank)
    ours, theirs = nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    for m in (ours, theirs):
        m.running_mean.fill_(rank + 1.0)
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    ours.weight.data.fill_(float(rank))
    with torch.no_grad():
        theirs.weight.fill_(float(rank))
    _sync_module_states(ours, None, 2**20, 1, {"bias"})
    torch.distributed.utils._sync_module_states(
        theirs, torch.distributed.group.WORLD, 2**20, 1, {"bias"}
    )
    for k, v in ours.state_dict().items():
        close(v.double(), theirs.state_dict()[k].double(), k)
    assert ours.weight.tolist() == [1.0] * 3 and ours.running_mean.tolist() == [2.0] * 3
    ddp = DDP(nn.Linear(3, 2).double(), find_unused_parameters=True)
    tddp = TDDP(torch.nn.Linear(3, 2).double(), find_unused_parameters=True)
    assert ddp.static_graph is tddp.static_graph is False
    data, tdata = ddp._get_ddp_logging_data(), tddp._get_ddp_logging_data()
    for key, value in data.items():
        assert value == tdata[key], (key, value, tdata[key])
    try:  # staged's DDP runs no communication hook: refused, not ignored
        ddp.register_comm_hook(None, lambda state, bucket: None)
    except NotImplementedError as e:
        assert "no communication hooks" in str(e), e
    else:
        raise AssertionError("register_comm_hook was accepted")


def fault(mode):
    """One rank goes its own way; every rank must end within the timeout with an error
    naming it, never hang nor reduce garbage. ``extra_batch``: rank 0 has one batch more
    (no ``join()``: the user's loop ends on the others, which then exit); ``barrier``: the
    others wait in a barrier instead; ``caught``: rank 1 catches an exception it raised in
    the loss, skips that backward and goes on to the next step."""
    ddp = DDP(Net(10).double())
    steps = 3 + (rank == 0) if mode in ("extra_batch", "barrier") else 3
    start = time.monotonic()
    for i in range(steps):
        x, y = shards(i, (5,)), shards(50 + i, (3,))
        try:
            lo = loss(ddp, s_(x), s_(y))
            if mode == "caught" and rank == 1 and i == 1:
                raise ValueError("a bad batch")
        except ValueError:
            continue
        lo.backward()
        grads = [p.grad.numpy().copy() for p in ddp.parameters()]
        print(
            f"rank {rank}: step {i} backward done, |grad| {max(abs(g).max() for g in grads):.3g}",
            flush=True,
        )
    if mode == "barrier":
        dist.barrier()
    print(f"rank {rank}: fault {mode} finished in {time.monotonic() - start:.1f} s", flush=True)


if FAULT:
    from mpi4py import MPI

    MPI.COMM_WORLD.Barrier()  # start together (no timeout): each staged wait times out after 4 s
    fault(FAULT)
    sys.exit(0)  # as a user's script ends: a rank that finished leaves, the others time out
torch.distributed.destroy_process_group()
dist.destroy_process_group()
print(f"rank {rank} of {world}: probe2 done", flush=True)
