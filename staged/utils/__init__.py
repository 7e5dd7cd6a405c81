"""``staged.utils``: as ``torch.utils``; so far ``data`` (datasets, samplers, DataLoader),
``benchmark`` (Timer, Measurement, Compare), ``checkpoint`` (activation checkpointing),
``dlpack`` (``to_dlpack``, ``from_dlpack``) and ``hooks.RemovableHandle``."""

from . import benchmark, checkpoint, data, dlpack, hooks  # noqa: F401
