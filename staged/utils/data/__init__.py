"""``staged.utils.data``: ``torch.utils.data``'s datasets, samplers, collation and
``DataLoader`` (its workers run in this process in turn, with torch's
results: ``dataloader.py``); ``DistributedSampler`` shards a dataset over ``staged.distributed``'s
ranks. Not here: DataPipes.

Example:
    >>> ds = TensorDataset(staged.randn(100, 3), staged.randn(100, 1))
    >>> for x, y in DataLoader(ds, batch_size=32, shuffle=True):
    ...     pass
"""

from . import _utils  # noqa: F401  (torch's module path of the collate functions)
from ._collate import default_collate, default_convert
from .dataloader import DataLoader, get_worker_info
from .distributed import DistributedSampler
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "StackDataset",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
]
