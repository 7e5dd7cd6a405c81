"""``torch.distributed.constants``: the collectives' default timeout."""

from .distributed_c10d import default_pg_timeout

__all__ = ["default_pg_timeout"]
