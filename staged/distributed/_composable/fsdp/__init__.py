"""``torch.distributed._composable.fsdp``: ``staged.distributed.fsdp``'s names, as torch
2.6+ keeps them at their old place."""

from ...fsdp import (  # noqa: F401
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
)
