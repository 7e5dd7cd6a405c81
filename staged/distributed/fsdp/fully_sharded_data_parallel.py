"""``torch.distributed.fsdp.fully_sharded_data_parallel``: the wrapper's class, which
accelerate's ``unwrap_model`` checks models against, and its option enums, as torch's.
staged shards no parameters: making the wrapper raises (``staged.distributed.fsdp``)."""

from __future__ import annotations

import enum

from ...nn.module import Module
from ..device_mesh import no_distributed_tensors

__all__ = ["BackwardPrefetch", "FullyShardedDataParallel", "ShardingStrategy", "StateDictType"]


class ShardingStrategy(enum.Enum):
    FULL_SHARD = 1
    SHARD_GRAD_OP = 2
    NO_SHARD = 3
    HYBRID_SHARD = 4
    _HYBRID_SHARD_ZERO2 = 5


class StateDictType(enum.Enum):
    FULL_STATE_DICT = 1
    LOCAL_STATE_DICT = 2
    SHARDED_STATE_DICT = 3


class BackwardPrefetch(enum.Enum):
    BACKWARD_PRE = 1
    BACKWARD_POST = 2


class FullyShardedDataParallel(Module):
    """torch's parameter-sharding wrapper: none can be made in staged."""

    def __init__(self, *args, **kwargs):
        raise no_distributed_tensors("FullyShardedDataParallel")
