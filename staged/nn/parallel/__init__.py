"""``torch.nn.parallel``: ``DataParallel`` and ``DistributedDataParallel``."""

from .data_parallel import DataParallel  # noqa: F401
from .distributed import DistributedDataParallel  # noqa: F401
