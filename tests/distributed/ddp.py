"""Run by test_distributed.py through ``python -m staged.distributed.run``, in the style of
PyTorch's DDP examples: DDP training from different per-rank initialisations equals
single-process training on the concatenated batch; no_sync; buffers; unused parameters."""

import os

import numpy as np

import staged
import staged.distributed as dist
from staged import nn, optim
from staged.nn.parallel import DistributedDataParallel as DDP
from training import PER_RANK, batch, mine, net  # beside this script

local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group(backend="gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert (int(os.environ["RANK"]), local_rank) == (rank, rank)
assert int(os.environ["WORLD_SIZE"]) == int(os.environ["LOCAL_WORLD_SIZE"]) == world


def assert_same(ddp, ref):
    for (name, p), q in zip(ddp.module.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(
            p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-7, err_msg=name
        )


loss_fn = nn.MSELoss()
# three buckets (of 512 B) and different per-rank initialisations, of which rank 0's wins
ddp, ref = DDP(net(seed=10 + rank), bucket_cap_mb=2**-11), net(seed=10)
assert len(ddp._buckets) > 2
assert list(ddp.state_dict()) == ["module." + k for k in ref.state_dict()]
assert_same(ddp, ref)
started = []  # buckets started when backward ends: all of them, each as its grads arrived
ddp._finish = lambda finish=ddp._finish: (started.append(ddp._next), finish())[1]
opt = optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
ref_opt = optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
for step in range(5):
    x, y = batch(step)
    opt.zero_grad()
    loss_fn(ddp(mine(x)), mine(y)).backward()
    opt.step()
    ref_opt.zero_grad()
    loss_fn(ref(x), y).backward()
    ref_opt.step()
    assert_same(ddp, ref)
assert started == [len(ddp._buckets)] * 5

# no_sync: gradients accumulate locally, the next synced backward averages the sum
(x1, y1), (x2, y2) = batch(10), batch(11)
opt.zero_grad()
ref_opt.zero_grad()
with ddp.no_sync():
    loss_fn(ddp(mine(x1)), mine(y1)).backward()
local = ddp.module[0].bias.grad.clone()
rows = [staged.zeros_like(local) for _ in range(world)]
dist.all_gather(rows, local)
assert not np.allclose(rows[0].numpy(), rows[1].numpy())  # not reduced
loss_fn(ddp(mine(x2)), mine(y2)).backward()
loss_fn(ref(x1), y1).backward()
loss_fn(ref(x2), y2).backward()
for p, q in zip(ddp.parameters(), ref.parameters()):
    np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)

# buffers are broadcast from rank 0; a rank with another batch shape is reported
bn = DDP(nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4)))
with staged.no_grad():
    bn.module[1].running_mean.fill_(rank)
bn(staged.randn(PER_RANK, 5))
assert bn.module[1].running_mean.numpy().max() < 0.5  # rank 0's zeros, updated once
try:
    bn(staged.randn(PER_RANK, 5, 1 + (rank == 1)))
except RuntimeError as e:
    assert "rank 1: a batch of shape ['N', 5, 2]" in str(e), e
else:
    raise AssertionError("a rank's different batch shape was not reported")


# unused parameters: an error at the next forward, or averaged with find_unused_parameters
class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.used, self.unused = nn.Linear(5, 3), nn.Linear(5, 3)

    def forward(self, x):
        return self.used(x)


for find in (False, True):
    model = DDP(Branchy(), find_unused_parameters=find)
    for _ in range(2):
        try:
            model(mine(x1)).sum().backward()
        except RuntimeError as e:
            assert not find and "unused.weight" in str(e), e
            break
    else:
        assert find and model.module.used.weight.grad is not None
dist.destroy_process_group()
print(f"rank {rank} of {world}: ddp ok", flush=True)
