"""``torch.distributed._composable``: where torch 2.4-2.5 kept ``fully_shard``."""
