"""``torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook``: its hooks and state,
which raise when used (``_refused``)."""

from ._refused import refused

powerSGD_hook = refused("powerSGD_hook")
batched_powerSGD_hook = refused("batched_powerSGD_hook")
PowerSGDState = refused("PowerSGDState")
