"""``staged.utils``: as ``torch.utils``; so far ``data`` (datasets, samplers, DataLoader)
and ``checkpoint`` (activation checkpointing)."""

from . import checkpoint, data  # noqa: F401
