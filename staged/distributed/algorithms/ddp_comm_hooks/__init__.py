"""``torch.distributed.algorithms.ddp_comm_hooks``: torch's DDP communication hooks as
names that raise when used: staged's DDP averages its gradient buckets over MPI and has no
``register_comm_hook``. The modules exist for the libraries that import them (accelerate,
Lightning)."""

from . import default_hooks, post_localSGD_hook, powerSGD_hook  # noqa: F401
