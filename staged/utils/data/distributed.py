"""``DistributedSampler``: each rank's share of a dataset, in torch's order."""

from __future__ import annotations

import math
from collections.abc import Iterator

from ... import distributed as dist
from . import _random
from .sampler import Sampler


class DistributedSampler(Sampler[int]):
    """The indices of ``dataset`` that rank ``rank`` of ``num_replicas`` loads: every
    ``num_replicas``-th one of a permutation drawn from seed ``seed + epoch`` (torch's
    ``randperm``, so the same shards as torch's sampler), padded by repeating indices to
    a multiple of ``num_replicas`` (or cut, with ``drop_last``). Call ``set_epoch(e)`` at
    the start of each epoch for a new order.

    Example:
        >>> sampler = DistributedSampler(dataset)
        >>> loader = DataLoader(dataset, batch_size=32, sampler=sampler)
        >>> for epoch in range(3):
        ...     sampler.set_epoch(epoch)
    """

    def __init__(
        self,
        dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None:
            num_replicas = dist.get_world_size()
        if rank is None:
            rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.drop_last, self.shuffle, self.seed = 0, drop_last, shuffle, seed
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            indices = _random.randperm(n, _random.new_generator(self.seed + self.epoch))
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[: self.total_size]
        else:
            pad = self.total_size - n
            indices += (indices * math.ceil(pad / n))[:pad] if pad > n else indices[:pad]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
