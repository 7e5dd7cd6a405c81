"""``staged.utils``: as ``torch.utils``; so far ``data`` (datasets, samplers, DataLoader),
``benchmark`` (Timer, Measurement, Compare), ``checkpoint`` (activation checkpointing),
``dlpack`` (``to_dlpack``, ``from_dlpack``), ``hooks.RemovableHandle`` and ``_pytree``
(torch's pytree API)."""

from . import _pytree, benchmark, checkpoint, data, dlpack, hooks  # noqa: F401
from . import flop_counter, module_tracker  # noqa: F401
