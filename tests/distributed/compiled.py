"""Run by test_distributed.py under ``mpiexec -n 2``: compiled steps with collectives (run
as compiled segments with the collectives between them on the host, Note [segments]) equal
the eager steps: the differentiable all_reduce, c10d's in-place all_reduce, DDP training;
the DDP step saved (to the directory argv[1] names, a subdirectory per rank) and loaded
continues as the live one does."""

import sys

import numpy as np

import staged
import staged.distributed as dist
import staged.runtime
from staged import nn, optim
from staged.distributed.nn import functional as dfn
from staged.nn.parallel import DistributedDataParallel as DDP
from training import PER_RANK, batch, mine, net  # beside this script
from staged.runtime.device import available_devices

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
Op = dist.ReduceOp


def close(a, b, rtol=1e-5, atol=1e-7):
    np.testing.assert_allclose(
        np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()), rtol=rtol, atol=atol
    )


def data(salt, shape=(3, 4)):
    return staged.tensor(
        np.random.default_rng(100 * salt + rank).uniform(0.5, 2.0, shape), dtype=staged.float32
    )


# the differentiable all_reduce: forward, gradient (an all_reduce again), a chain of two
def functional(x, w):
    y = dfn.all_reduce(x * w)
    m = dfn.all_reduce(x.sum(0), op=Op.MAX)
    loss = (dfn.all_reduce((y * y).sum() + m.sum(), op=Op.AVG) * w.sum()).sum()
    loss.backward()
    return loss, y, x.grad


compiled = staged.compile(functional)
for salt in range(3):
    outs = []
    for f in (functional, compiled):
        x = data(salt).requires_grad_()
        outs.append(f(x, data(salt + 10)))
    for a, b in zip(*outs):
        close(a, b)
graph = compiled._last.captured.graph
assert sum(op.prim.name == "all_reduce" for op in graph.ops) >= 4, graph
assert len(compiled._last.module.plan.segments) >= 3  # two collectives deep, then backward
if available_devices("vulkan-spirv"):  # the same segments on Vulkan (lavapipe here)
    on_vulkan = staged.compile(functional, backend="vulkan-spirv")
    outs = [f(data(7).requires_grad_(), data(8)) for f in (functional, on_vulkan)]
    for a, b in zip(*outs):
        close(a, b)


# c10d's in-place all_reduce (and async_op, whose wait() under capture is a no-op)
def in_place(x):
    t = x * 2
    dist.all_reduce(t, op=Op.AVG)
    u = x + 1
    dist.all_reduce(u, async_op=True).wait()
    return t, u


c_in_place = staged.compile(in_place)
for a, b in zip(in_place(data(5)), c_in_place(data(5))):
    close(a, b)


# DDP training, compiled, equals single-process training on the concatenated batch


def reference_step(x, y):
    ref_opt.zero_grad()
    ref_loss = loss_fn(ref(x), y)
    ref_loss.backward()
    ref_opt.step()
    return ref_loss


def same_parameters(params, i):
    for (name, p), q in zip(params, ref.parameters()):
        np.testing.assert_allclose(
            np.asarray(p), q.detach().numpy(), rtol=1e-5, atol=1e-7, err_msg=f"step {i}: {name}"
        )


loss_fn = nn.MSELoss()
ddp, ref = DDP(net(seed=10 + rank), bucket_cap_mb=2**-11), net(seed=10)
assert len(ddp._buckets) > 2
opt = optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
ref_opt = optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)


@staged.compile
def train_step(x, y):
    opt.zero_grad()
    loss = loss_fn(ddp(x), y)
    loss.backward()
    opt.step()
    return loss


for i in range(5):  # (not `step`: a global of the name opt.step's would be guarded)
    x, y = batch(i)
    loss = train_step(mine(x), mine(y))
    ref_loss = reference_step(x, y)
    same_parameters(((n, p.detach().numpy()) for n, p in ddp.module.named_parameters()), i)
    # each rank's loss is its own shard's; their average is the whole batch's
    close(dfn.all_reduce(loss.detach(), op=Op.AVG), ref_loss)
graph = train_step._last.captured.graph
assert sum(op.prim.name == "all_reduce" for op in graph.ops) == len(ddp._buckets), graph
assert train_step.traces == 2, train_step.history  # the first made momentum buffers
# that one-shot first call ran on NumPy, its collectives through MPI, not compiled for its
# one call (Note [one-shot traces])
assert str(train_step.history[0]["background"]).startswith("not compiled"), train_step.history
# each bucket's all-reduce starts after the segment making its gradients (Note [segments])
assert sum(bool(h) for h in train_step._last.module.plan.host) == len(ddp._buckets)

assert "run as 5 compiled segments with 3 collective(s) on the host" in train_step.explanation()

# dynamic=True: one compile serves every batch size, segments and collectives alike (the
# last batch of an epoch is shorter)
ddp_dyn, ref_dyn = DDP(net(seed=20 + rank), bucket_cap_mb=2**-11), net(seed=20)
opt_dyn = optim.SGD(ddp_dyn.parameters(), lr=0.1)
ref_opt_dyn = optim.SGD(ref_dyn.parameters(), lr=0.1)


@staged.compile(dynamic=True)
def dynamic_step(x, y):
    opt_dyn.zero_grad()
    loss = loss_fn(ddp_dyn(x), y)
    loss.backward()
    opt_dyn.step()
    return loss


def rows(t, r, k):  # rank r's first k rows
    return t[r * PER_RANK : (r + 1) * PER_RANK][:k]


for i, k in enumerate((4, 3, 2, 4, 1)):
    x, y = batch(10 + i)
    loss = dynamic_step(rows(x, rank, k), rows(y, rank, k))
    # each rank's gradient is its own rows' mean; DDP averages them over the ranks
    ref_opt_dyn.zero_grad()
    halves = [(rows(x, r, k), rows(y, r, k)) for r in range(world)]
    ref_loss = sum(loss_fn(ref_dyn(a), b) for a, b in halves) / world
    ref_loss.backward()
    ref_opt_dyn.step()
    close(dfn.all_reduce(loss.detach(), op=Op.AVG), ref_loss)
    for p, q in zip(ddp_dyn.module.parameters(), ref_dyn.parameters()):
        close(p, q)
assert dynamic_step.traces == 2, dynamic_step.history  # the first set the .grads
assert len(dynamic_step._last.module.plan.segments) > 1

# saved with its segments and collectives, loaded, it trains on as the live step
names = {p: k for k, p in ddp.state_dict(keep_vars=True).items()}
deployed = staged.runtime.load(train_step.save(f"{sys.argv[1]}/rank{rank}", names=names))
assert len(deployed.manifest["program"]["segments"]) > 1, deployed.manifest
for i in range(5, 8):
    x, y = batch(i)
    loss = deployed(mine(x).numpy(), y=mine(y))
    close(dfn.all_reduce(loss, op=Op.AVG), reference_step(x, y))
    state = deployed.state_dict()
    same_parameters(((n, state[f"module.{n}"]) for n, _ in ref.named_parameters()), i)

dist.destroy_process_group()
print(f"rank {rank} of {world}: compiled ok", flush=True)
