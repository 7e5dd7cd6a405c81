"""Run by test_distributed.py under ``mpiexec -n N``: every collective against NumPy, their
gradients, the mismatch errors, and DistributedSampler's shards."""

from datetime import timedelta

import numpy as np

import staged
import staged.distributed as dist
from staged.autodiff import collective as C
from staged.distributed.nn import functional as dfn
from staged.utils.data import DistributedSampler

dist.init_process_group("gloo", timeout=timedelta(seconds=30))
rank, world = dist.get_rank(), dist.get_world_size()
Op = dist.ReduceOp


def data(r, shape=(3, 4), dtype=np.float64, salt=0):
    return np.random.default_rng(100 * salt + r).uniform(0.5, 2.0, shape).astype(dtype)


def close(t, expected, rtol=1e-12):
    np.testing.assert_allclose(t.detach().numpy(), expected, rtol=rtol, atol=0)


every = np.stack([data(r) for r in range(world)])
REFS = {
    Op.SUM: every.sum(0),
    Op.AVG: every.mean(0),
    Op.MAX: every.max(0),
    Op.MIN: every.min(0),
    Op.PRODUCT: every.prod(0),
}

# all_reduce: in place, every op, sync and async; other dtypes
for op, expected in REFS.items():
    t = staged.tensor(every[rank])
    before = t._version
    assert dist.all_reduce(t, op=op) is None
    close(t, expected)
    assert t._version > before
    t = staged.tensor(every[rank])
    work = dist.all_reduce(t, op=op, async_op=True)
    assert work.wait() and work.is_completed()
    close(t, expected)
for dtype in (np.float32, np.int64):
    t = staged.tensor((every[rank] * 10).astype(dtype))
    dist.all_reduce(t)
    assert t.numpy().dtype == dtype
    close(t, (every * 10).astype(dtype).sum(0), rtol=1e-6)

# broadcast, all_gather, all_gather_into_tensor, reduce_scatter_tensor
src = world - 1
t = staged.tensor(every[rank])
dist.broadcast(t, src=src)
close(t, every[src])
outs = [staged.zeros(3, 4, dtype=staged.float64) for _ in range(world)]
dist.all_gather(outs, staged.tensor(every[rank]))
for r in range(world):
    close(outs[r], every[r])
for shape in ((world * 3, 4), (world, 3, 4)):
    out = staged.zeros(*shape, dtype=staged.float64)
    dist.all_gather_into_tensor(out, staged.tensor(every[rank]), async_op=True).wait()
    close(out, every.reshape(shape))
big = np.stack([data(r, (world * 2, 4), salt=1) for r in range(world)])
for op in (Op.SUM, Op.AVG, Op.MAX):
    out = staged.zeros(2, 4, dtype=staged.float64)
    dist.reduce_scatter_tensor(out, staged.tensor(big[rank]), op=op)
    ref = {Op.SUM: big.sum(0), Op.AVG: big.mean(0), Op.MAX: big.max(0)}[op]
    close(out, ref[2 * rank : 2 * rank + 2])
dist.barrier()

# gradients: the VJP of each collective, against the sum over ranks it stands for
w = [data(r, salt=2) for r in range(world)]  # each rank's loss weights
x = staged.tensor(every[rank], requires_grad=True)
(dfn.all_reduce(x) * staged.tensor(w[rank])).sum().backward()
close(x.grad, sum(w))
x = staged.tensor(every[rank], requires_grad=True)
(dfn.all_reduce(x, op=Op.MAX) * staged.tensor(w[rank])).sum().backward()
close(x.grad, np.where(every[rank] == every.max(0), sum(w), 0))
x = staged.tensor(every[rank], requires_grad=True)
(dfn.all_reduce(x, op=Op.PRODUCT) * staged.tensor(w[rank])).sum().backward()
close(x.grad, sum(w) * every.prod(0) / every[rank], rtol=1e-10)
x = staged.tensor(every[rank], requires_grad=True)
(dfn.broadcast(x, src=src) * staged.tensor(w[rank])).sum().backward()
close(x.grad, sum(w) if rank == src else np.zeros((3, 4)))
x = staged.tensor(every[rank], requires_grad=True)
sum(
    (g * (r + 1) * staged.tensor(w[rank])).sum() for r, g in enumerate(dfn.all_gather(x))
).backward()
close(x.grad, (rank + 1) * sum(w))
x = staged.tensor(big[rank], requires_grad=True)
(
    C.reduce_scatter(x.reshape(world, 2, 4), op="sum", world=world) * staged.tensor(w[rank][:2])
).sum().backward()
close(x.grad, np.concatenate(w)[np.arange(world * 3).reshape(world, 3)[:, :2].ravel()])

# ranks that disagree get an error naming them, on every rank, and the group goes on
for bad in (
    staged.zeros(3 + (rank == 1)),
    staged.zeros(3, dtype=staged.int64 if rank else staged.float32),
):
    try:
        dist.all_reduce(bad)
    except RuntimeError as e:
        assert "rank 1:" in str(e) and "rank 0:" in str(e), e
    else:
        raise AssertionError("mismatched all_reduce did not fail")

# DistributedSampler: the ranks' shards cover the dataset once per epoch
for n, drop_last in ((10, False), (11, False), (11, True)):
    sampler = DistributedSampler(range(n), drop_last=drop_last, seed=3)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        mine = staged.tensor(list(sampler))
        shards = [staged.zeros(len(sampler), dtype=staged.int64) for _ in range(world)]
        dist.all_gather(shards, mine)
        seen = np.concatenate([s.numpy() for s in shards])
        if drop_last:
            assert len(set(seen)) == len(seen) == n - n % world
        else:
            assert set(seen) == set(range(n)) and len(seen) == -(-n // world) * world

dist.destroy_process_group()
print(f"rank {rank} of {world}: collectives ok", flush=True)
