"""``torch.distributed.algorithms``: ``Join`` for training on uneven inputs."""

from .join import Join, Joinable, JoinHook  # noqa: F401
