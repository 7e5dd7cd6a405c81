"""``staged.utils``: as ``torch.utils``; so far ``data`` (datasets, samplers, DataLoader),
``benchmark`` (Timer, Measurement, Compare)
and ``checkpoint`` (activation checkpointing)."""

from . import benchmark, checkpoint, data  # noqa: F401
