"""Run by test_distributed.py under ``mpiexec -n N``: a conv net with SyncBatchNorm (made
by convert_sync_batchnorm), each rank on its rows of a global batch (uneven on 3 ranks),
equals the net with BatchNorm on the whole batch in one process: outputs, input
gradients, parameter gradients summed over ranks and running statistics, over three
steps, eagerly and as a compiled step."""

from datetime import timedelta

import numpy as np

import staged
import staged.distributed as dist
from staged import nn

dist.init_process_group("gloo", timeout=timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
ROWS = [3, 2, 4][:world] if world == 3 else [3] * world
START = np.cumsum([0] + ROWS)


def net():
    staged.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.BatchNorm2d(4))


def step(model, x, w):
    x = x.detach().requires_grad_()
    model.zero_grad()
    out = model(x)
    (out * w).sum().backward()
    return out.detach(), x.grad, [p.grad for p in model.parameters()]


rng = np.random.default_rng(5)
whole = nn.Sequential(*net())
mine = nn.SyncBatchNorm.convert_sync_batchnorm(net())
assert isinstance(mine[1], nn.SyncBatchNorm) and isinstance(mine[3], nn.SyncBatchNorm)
for compiled in (False, True):
    run = staged.compile(step) if compiled else step
    for _ in range(3):
        x = rng.standard_normal((START[-1], 3, 6, 5)).astype(np.float32) * 2 + 1
        w = rng.standard_normal((START[-1], 4, 4, 3)).astype(np.float32)
        rows = slice(START[rank], START[rank + 1])
        out, gx, grads = step(whole, staged.tensor(x), staged.tensor(w))
        o, g, gs = run(mine, staged.tensor(x[rows]), staged.tensor(w[rows]))
        np.testing.assert_allclose(o.numpy(), out.numpy()[rows], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(g.numpy(), gx.numpy()[rows], rtol=1e-4, atol=1e-5)
        for p, q in zip(gs, grads):
            dist.all_reduce(p)
            np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-4, atol=1e-4)
        for name, b in whole.named_buffers():
            theirs = dict(mine.named_buffers())[name]
            np.testing.assert_allclose(theirs.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
mine.eval()
x = staged.tensor(rng.standard_normal((2, 3, 6, 5)).astype(np.float32))
with staged.no_grad():
    np.testing.assert_allclose(mine(x).numpy(), whole.eval()(x).numpy(), rtol=1e-5, atol=1e-6)
try:
    mine.train()(staged.randn(1, 3, 3, 3) if rank == 0 else staged.randn(0, 3, 3, 3))
except ValueError as e:
    assert "Expected more than 1 value per channel when training, got input size 1" in str(e)
else:
    raise AssertionError("one value per channel in the global batch was accepted")
print("sync batch norm ok", flush=True)
