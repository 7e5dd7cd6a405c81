"""Run by test_ddp_probe.py under ``mpiexec -n N``: DDP training, eager and compiled, equals
the single-process equivalent call for call (each rank's shard run on one process, the
gradients averaged over the shards, as DDP defines them) on cases ddp.py does not cover.
Each case prints ``case NAME ok`` or ``case NAME FAIL: why``; a failing case does not stop
the others."""

import io
import sys
import traceback
from datetime import timedelta

import numpy as np

import staged
import staged.distributed as dist
from staged import nn, optim
from staged.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo", timeout=timedelta(seconds=40))
rank, world = dist.get_rank(), dist.get_world_size()
PER_RANK = 3


def case(fn):
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


def close(a, b, what, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(
        np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()), rtol, atol, err_msg=what
    )


def same_params(model, ref, what):
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p, q, f"{what}: {n}")


def identical_on_all_ranks(tensors, what):
    """Bitwise: every rank's tensors are rank 0's."""
    for i, t in enumerate(tensors):
        rows = [staged.zeros_like(t) for _ in range(world)]
        dist.all_gather(rows, t.detach().contiguous())
        for r in range(1, world):
            assert np.array_equal(rows[r].numpy(), rows[0].numpy()), f"{what}[{i}] rank {r}"


def data(step, shape, dtype=staged.float32, rows=None):
    """The global batch (every rank draws it alike) split in per-rank shards of ``rows``."""
    rows = rows or [PER_RANK] * world
    rng = np.random.default_rng(step)
    t = staged.tensor(rng.standard_normal((sum(rows), *shape)), dtype=dtype)
    at = np.cumsum([0, *rows])
    return [t[at[r] : at[r + 1]] for r in range(world)]


def ids(step, vocab, rows=None):
    rows = rows or [PER_RANK] * world
    rng = np.random.default_rng(step)
    t = staged.tensor(rng.integers(0, vocab, (sum(rows), 4)))
    at = np.cumsum([0, *rows])
    return [t[at[r] : at[r + 1]] for r in range(world)]


def reference_step(ref, ref_opt, loss_of, shards):
    """The single-process equivalent: the mean over the shards of each shard's loss."""
    ref_opt.zero_grad()
    loss = sum(loss_of(ref, *s) for s in zip(*shards)) / world
    loss.backward()
    ref_opt.step()
    return loss


def train(make, loss_of, batch, opt_of, steps=4, compiled=False, **ddp_kw):
    """DDP from per-rank initialisations (rank 0's wins) against the reference, step by step;
    afterwards parameters, gradients and optimizer state are bitwise equal on every rank."""
    ddp, ref = DDP(make(10 + rank), **ddp_kw), make(10)
    opt, ref_opt = opt_of(ddp.parameters()), opt_of(ref.parameters())

    def step(*xs):
        opt.zero_grad()
        loss = loss_of(ddp, *xs)
        loss.backward()
        opt.step()
        return loss

    run = staged.compile(step) if compiled else step
    for i in range(steps):
        shards = batch(i)
        loss = run(*(s[rank] for s in shards))
        ref_loss = reference_step(ref, ref_opt, loss_of, shards)
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        close(avg, ref_loss, f"step {i}: loss")
        same_params(ddp.module, ref, f"step {i}")
    params = list(ddp.parameters())
    identical_on_all_ranks(params, "parameters")
    identical_on_all_ranks([p.grad for p in params if p.grad is not None], "grads")
    state = [v for s in opt.state.values() for v in s.values() if isinstance(v, staged.Tensor)]
    identical_on_all_ranks(state, "optimizer state")
    return ddp, ref, run


# tied parameters: an embedding tied to the output layer, its gradient reduced once
class Tied(nn.Module):
    def __init__(self, seed, vocab=11, dim=6):
        super().__init__()
        staged.manual_seed(seed)
        self.emb = nn.Embedding(vocab, dim)
        self.mid = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, vocab, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, t):
        return self.out(self.mid(self.emb(t)).tanh())


def tied_loss(m, t):
    logits = m(t)
    return nn.functional.cross_entropy(logits.reshape(-1, 11), t.reshape(-1))


def tied_batch(i):
    return (ids(i, 11),)


def adam(params):
    return optim.Adam(params, lr=0.05)


@case
def tied_eager():
    ddp, _, _ = train(Tied, tied_loss, tied_batch, adam)
    assert len(list(ddp.parameters())) == 3  # the tied weight once


@case
def tied_compiled():
    train(Tied, tied_loss, tied_batch, adam, compiled=True)


# float64 parameters beside float32 ones (buckets hold one dtype), a frozen parameter,
# tiny buckets, SGD with momentum and weight decay
class Mixed(nn.Module):
    def __init__(self, seed):
        super().__init__()
        staged.manual_seed(seed)
        self.a = nn.Linear(5, 7)
        self.b = nn.Linear(7, 3).double()
        self.frozen = nn.Linear(5, 7)
        self.frozen.requires_grad_(False)

    def forward(self, x):
        h = (self.a(x) + self.frozen(x)).tanh()
        return self.b(h.double())


def mixed_loss(m, x, y):
    return ((m(x) - y) ** 2).mean()


def mixed_batch(i):
    return data(i, (5,)), data(100 + i, (3,), staged.float64)


def sgd(params):
    return optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=0.01)


def mixed(compiled):
    ddp, ref, _ = train(
        Mixed, mixed_loss, mixed_batch, sgd, compiled=compiled, bucket_cap_mb=2**-14
    )
    assert ddp.module.b.weight.grad.dtype == staged.float64
    assert ddp.module.frozen.weight.grad is None
    close(ddp.module.frozen.weight, ref.frozen.weight, "frozen")  # rank 0's, broadcast


@case
def mixed_dtypes_frozen_eager():
    mixed(False)


@case
def mixed_dtypes_frozen_compiled():
    mixed(True)


# uneven local batch sizes: DDP averages the per-rank means (torch's definition), which
# is not the global mean
ROWS = [PER_RANK + r for r in range(world)]


def uneven(compiled):
    def batch(i):
        return data(i, (5,), rows=ROWS), data(100 + i, (3,), staged.float64, rows=ROWS)

    train(Mixed, mixed_loss, batch, sgd, compiled=compiled)


@case
def uneven_batches_eager():
    uneven(False)


@case
def uneven_batches_compiled():
    uneven(True)


# no_sync over k micro-batches, then a synced one: the average over the ranks of the sum
class Net(nn.Module):
    def __init__(self, seed):
        super().__init__()
        staged.manual_seed(seed)
        self.l1, self.l2 = nn.Linear(5, 8), nn.Linear(8, 3)
        self.extra = nn.Linear(5, 3)

    def forward(self, x, use_extra=True):
        y = self.l2(self.l1(x).relu())
        return y + self.extra(x) if use_extra else y


def accumulate(compiled, k=3):
    ddp, ref = DDP(Net(10 + rank)), Net(10)
    opt, ref_opt = sgd(ddp.parameters()), sgd(ref.parameters())

    def micro(x, y):
        loss = ((ddp(x) - y) ** 2).mean()
        loss.backward()
        return loss

    run = staged.compile(micro) if compiled else micro
    for step in range(2):
        opt.zero_grad()
        ref_opt.zero_grad()
        xs, ys = data(10 * step, (5,)), data(10 * step + 1, (3,))
        for j in range(k):
            x, y = data(10 * step + 2 + j, (5,)), data(10 * step + 7 + j, (3,))
            if j < k - 1:
                with ddp.no_sync():
                    run(x[rank], y[rank])
            else:
                run(x[rank], y[rank])
            (sum(((ref(a) - b) ** 2).mean() for a, b in zip(x, y)) / world).backward()
        del xs, ys
        opt.step()
        ref_opt.step()
        same_params(ddp.module, ref, f"accumulated step {step}")
    identical_on_all_ranks(list(ddp.parameters()), "parameters")


@case
def no_sync_accumulation_eager():
    accumulate(False)


@case
def no_sync_accumulation_compiled():
    accumulate(True)


# a parameter unused in some steps: with find_unused_parameters it keeps its .grad (None
# after zero_grad: the optimizer skips it, momentum and weight decay included) when no rank
# used it, as torch's Reducer leaves a globally unused parameter's gradient untouched
def sometimes_unused(compiled):
    ddp, ref = DDP(Net(10 + rank), find_unused_parameters=True), Net(10)
    opt, ref_opt = sgd(ddp.parameters()), sgd(ref.parameters())

    def step(x, y, use):
        opt.zero_grad()
        loss = ((ddp(x, use) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    run = staged.compile(step) if compiled else step
    for i, use in enumerate((True, False, True, False)):
        x, y = data(i, (5,)), data(50 + i, (3,))
        run(x[rank], y[rank], use)
        ref_opt.zero_grad()
        (sum(((ref(a, use) - b) ** 2).mean() for a, b in zip(x, y)) / world).backward()
        ref_opt.step()
        if not use:
            assert ddp.module.extra.weight.grad is None, "a globally unused grad was written"
        same_params(ddp.module, ref, f"step {i} use_extra={use}")
    identical_on_all_ranks(list(ddp.parameters()), "parameters")


@case
def unused_some_steps_eager():
    sometimes_unused(False)


@case
def unused_some_steps_compiled():
    sometimes_unused(True)


@case
def unused_on_one_rank_only():
    """Used by rank 0 only: its gradient is rank 0's divided by the world size."""
    ddp, ref = DDP(Net(10 + rank), find_unused_parameters=True), Net(10)
    x, y = data(0, (5,)), data(1, (3,))
    ((ddp(x[rank], rank == 0) - y[rank]) ** 2).mean().backward()
    (
        sum(((ref(a, r == 0) - b) ** 2).mean() for r, (a, b) in enumerate(zip(x, y))) / world
    ).backward()
    for (n, p), q in zip(ddp.module.named_parameters(), ref.parameters()):
        close(p.grad, q.grad, n)


@case
def unused_without_find_raises_at_the_next_forward():
    """torch: 'Expected to have finished reduction in the prior iteration ...' naming the
    parameter, at the forward after the backward that left it out."""
    ddp = DDP(Net(10 + rank))
    x = data(0, (5,))[rank]
    ddp(x).sum().backward()
    ddp(x, False).sum().backward()
    try:
        ddp(x)
    except RuntimeError as e:
        assert "Expected to have finished reduction in the prior iteration" in str(e), e
        assert "extra.weight" in str(e) and "find_unused_parameters=True" in str(e), e
    else:
        raise AssertionError("no error at the forward after a parameter went unused")


# BatchNorm: rank 0's buffers are broadcast at each forward (broadcast_buffers=True)
class BN(nn.Module):
    def __init__(self, seed):
        super().__init__()
        staged.manual_seed(seed)
        self.l, self.bn, self.o = nn.Linear(5, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)

    def forward(self, x):
        return self.o(self.bn(self.l(x)).relu())


def batchnorm(compiled):
    ddp = DDP(BN(10 + rank))
    opt = sgd(ddp.parameters())
    ref, ref0 = BN(10), BN(10)  # ref0 is rank 0's module: its buffers are what ranks get
    ref_opt = sgd(ref.parameters())

    def step(x, y):
        opt.zero_grad()
        loss = ((ddp(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    run = staged.compile(step) if compiled else step
    for i in range(4):
        x, y = data(i, (5,)), data(50 + i, (3,))
        y = [t[:, :2] for t in y]
        run(x[rank], y[rank])
        # reference: every shard's forward starts from rank 0's buffers (the previous
        # step's rank-0 update), each shard normalised by its own statistics
        ref_opt.zero_grad()
        losses, start = [], [b.clone() for b in ref0.bn.buffers()]
        for r in range(world):
            for b, s in zip(ref.bn.buffers(), start):
                b.copy_(s)
            losses.append(((ref(x[r]) - y[r]) ** 2).mean())
            if r == 0:
                for b, s in zip(ref0.bn.buffers(), ref.bn.buffers()):
                    b.copy_(s)
            if r == rank:
                mine = [b.clone() for b in ref.bn.buffers()]
        (sum(losses) / world).backward()
        ref_opt.step()
        same_params(ddp.module, ref, f"step {i}")
        for b, m in zip(ddp.module.bn.buffers(), mine):
            close(b, m, f"step {i}: buffer")
    identical_on_all_ranks(list(ddp.parameters()), "parameters")


@case
def batchnorm_buffers_eager():
    batchnorm(False)


@case
def batchnorm_buffers_compiled():
    batchnorm(True)


@case
def module_state_dict_and_checkpoint_from_rank_0():
    ddp = DDP(Net(10 + rank))
    assert isinstance(ddp.module, Net)
    keys = list(ddp.state_dict())
    assert keys == ["module." + k for k in Net(0).state_dict()], keys
    opt = adam(ddp.parameters())
    x, y = data(0, (5,)), data(1, (3,))
    opt.zero_grad()
    ((ddp(x[rank]) - y[rank]) ** 2).mean().backward()
    opt.step()
    # rank 0 saves; every rank loads it into a fresh DDP (and its module, 'module.' removed)
    buf = io.BytesIO()
    if rank == 0:
        staged.save({"model": ddp.state_dict(), "opt": opt.state_dict()}, buf)
    blob = staged.tensor(np.frombuffer(buf.getvalue(), np.uint8).copy() if rank == 0 else [])
    size = staged.tensor([blob.numel()])
    dist.broadcast(size, 0)
    full = blob if rank == 0 else staged.zeros(int(size.item()), dtype=staged.uint8)
    dist.broadcast(full, 0)
    ckpt = staged.load(io.BytesIO(full.numpy().tobytes()))
    fresh = DDP(Net(99 + rank))
    fresh.load_state_dict(ckpt["model"])
    plain = Net(98)
    plain.load_state_dict({k.removeprefix("module."): v for k, v in ckpt["model"].items()})
    fresh_opt = adam(fresh.parameters())
    fresh_opt.load_state_dict(ckpt["opt"])
    identical_on_all_ranks(list(fresh.parameters()), "loaded parameters")
    for p, q in zip(fresh.parameters(), plain.parameters()):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy())
    # one more step each: the loaded model trains as the saved one does
    for m, o in ((ddp, opt), (fresh, fresh_opt)):
        o.zero_grad()
        ((m(x[rank]) - y[rank]) ** 2).mean().backward()
        o.step()
    for p, q in zip(ddp.parameters(), fresh.parameters()):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy())
    identical_on_all_ranks(list(fresh.parameters()), "parameters after a step")


dist.destroy_process_group()
print(f"rank {rank} of {world}: probe done", flush=True)
