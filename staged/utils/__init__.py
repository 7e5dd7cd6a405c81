"""``staged.utils``: as ``torch.utils``; so far ``data`` (datasets, samplers, DataLoader),
``benchmark`` (Timer, Measurement, Compare)
and ``checkpoint`` (activation checkpointing); ``hooks.RemovableHandle``."""

from . import benchmark, checkpoint, data, hooks  # noqa: F401
