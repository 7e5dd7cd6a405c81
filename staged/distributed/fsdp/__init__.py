"""``torch.distributed.fsdp``: its names, so programs and libraries that import them run.
staged shards no parameters over processes: ``FullyShardedDataParallel`` and
``fully_shard`` raise ``NotImplementedError`` (train with ``DistributedDataParallel``),
no module is an ``FSDPModule``; the policies are torch's records."""

from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import DType
from ..device_mesh import no_distributed_tensors
from .fully_sharded_data_parallel import (
    BackwardPrefetch,
    FullyShardedDataParallel,
    ShardingStrategy,
    StateDictType,
)

__all__ = [
    "BackwardPrefetch",
    "CPUOffloadPolicy",
    "FSDPModule",
    "FullyShardedDataParallel",
    "MixedPrecisionPolicy",
    "OffloadPolicy",
    "ShardingStrategy",
    "StateDictType",
    "fully_shard",
]


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    """The dtypes ``fully_shard`` would compute, reduce gradients and return outputs in."""

    param_dtype: DType | None = None
    reduce_dtype: DType | None = None
    output_dtype: DType | None = None
    cast_forward_inputs: bool = True


@dataclass
class OffloadPolicy:
    """No offloading: ``fully_shard``'s default."""


@dataclass
class CPUOffloadPolicy(OffloadPolicy):
    """Parameters, gradients and optimizer state kept on the CPU between uses."""

    pin_memory: bool = True


class FSDPModule:
    """The class ``fully_shard`` mixes into a module: no module in staged is one."""


def fully_shard(*args, **kwargs):
    raise no_distributed_tensors("fully_shard")
