"""The model and data the DDP scripts (ddp.py, compiled.py) train: each rank takes its
``PER_RANK`` rows of a global batch that every rank draws alike."""

import numpy as np

import staged
import staged.distributed as dist
from staged import nn

PER_RANK = 4


def net(seed):
    staged.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(5, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3)
    )


def batch(step):
    rng = np.random.default_rng(step)
    n = dist.get_world_size() * PER_RANK
    return (
        staged.tensor(rng.standard_normal((n, 5)), dtype=staged.float32),
        staged.tensor(rng.standard_normal((n, 3)), dtype=staged.float32),
    )


def mine(t):
    rank = dist.get_rank()
    return t[rank * PER_RANK : (rank + 1) * PER_RANK]
