"""``DataLoader`` as in ``torch.utils.data.dataloader``, loading in the calling process.

``num_workers > 0`` is accepted and loads in this process too: no worker processes are
started, so ``worker_init_fn``, ``timeout`` and ``multiprocessing_context`` are checked as
torch checks them and otherwise unused, and ``get_worker_info()`` is ``None`` (an
``IterableDataset`` that shards itself by worker yields each sample once). What the main
process of torch's does is kept: the sampler is read ``prefetch_factor * num_workers``
batches ahead (so its random draws come in torch's order), and ``persistent_workers``
keeps one iterator, reset each epoch without drawing a new worker seed.
``pin_memory`` is accepted and ignored: tensors live in host memory already.
"""

from __future__ import annotations

import collections
import itertools
import math
import multiprocessing
import warnings
from typing import Generic, TypeVar

from . import _random
from ._collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

_T_co = TypeVar("_T_co", covariant=True)
_FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


def get_worker_info():
    """``None``: there are no worker processes (this module's docstring)."""
    return None


class _InfiniteConstantSampler(Sampler):
    """``None`` forever: the sampler of an ``IterableDataset``, which draws no indices."""

    def __iter__(self):
        return itertools.repeat(None)


class DataLoader(Generic[_T_co]):
    """Batches of ``dataset``'s samples, in the order of ``sampler`` (or ``shuffle``d anew each
    epoch), collated by ``collate_fn``; PyTorch's arguments, defaults and errors.

    Example:
        >>> ds = TensorDataset(staged.arange(10.0).reshape(5, 2), staged.arange(5))
        >>> [y.tolist() for _, y in DataLoader(ds, batch_size=2)]
        [[0, 1], [2, 3], [4]]
    """

    _IterableDataset_len_called: int | None

    def __init__(
        self,
        dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler=None,
        batch_sampler=None,
        num_workers: int = 0,
        collate_fn=None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        if num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; "
                "use num_workers=0 to disable multiprocessing."
            )
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing."
                "let num_workers > 0 to enable multiprocessing, otherwise set "
                "prefetch_factor to None."
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in {False, None}:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified shuffle "
                    f"option, but got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified sampler "
                    f"option, but got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified "
                    f"batch_sampler option, but got batch_sampler={batch_sampler}"
                )
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, "
                    "shuffle, sampler, and drop_last"
                )
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually "
                "exclusive with drop_last"
            )
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._IterableDataset_len_called = None
        self._iterator: _DataLoaderIter | None = None
        self._initialized = True

    def __setattr__(self, attr, val) -> None:
        if self.__dict__.get("_initialized") and attr in _FROZEN:
            raise ValueError(
                f"{attr} attribute should not be set after {type(self).__name__} is initialized"
            )
        super().__setattr__(attr, val)

    @property
    def multiprocessing_context(self):
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context) -> None:
        """A start method's name made its context, as torch checks it (never used here)."""
        if context is not None and self.num_workers == 0:
            raise ValueError(
                "multiprocessing_context can only be used with multi-process "
                f"loading (num_workers > 0), but got num_workers={self.num_workers}"
            )
        if isinstance(context, str):
            methods = multiprocessing.get_all_start_methods()
            if context not in methods:
                raise ValueError(
                    f"multiprocessing_context option should specify a valid start method in "
                    f"{methods!r}, but got multiprocessing_context={context!r}"
                )
            context = multiprocessing.get_context(context)
        if context is not None and not isinstance(context, multiprocessing.context.BaseContext):
            raise TypeError(
                "multiprocessing_context option should be a valid context object or a string "
                f"specifying the start method, but got multiprocessing_context={context}"
            )
        self._multiprocessing_context = context

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> _DataLoaderIter:
        if not (self.persistent_workers and self.num_workers > 0):
            return _DataLoaderIter(self)
        if self._iterator is None:
            self._iterator = _DataLoaderIter(self)
        else:
            self._iterator._reset(self)
        return self._iterator

    def __len__(self) -> int:
        if not self._iterable:
            return len(self._index_sampler)
        length = self._IterableDataset_len_called = len(self.dataset)
        if self.batch_size is not None:
            length = (
                length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
            )
        return length


class _DataLoaderIter:
    """One pass over a ``DataLoader`` (torch's ``_SingleProcessDataLoaderIter``)."""

    def __init__(self, loader: DataLoader) -> None:
        if loader.timeout != 0 and loader.num_workers == 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        # torch draws its workers' base seed here, workers or not; so do we, so that the
        # generator is where torch's is after each iter()
        _random.seed(loader.generator)
        self._reset(loader)

    def _reset(self, loader: DataLoader) -> None:
        """Start a pass, reading the first ``prefetch_factor * num_workers`` batches of
        indices ahead, as torch's main process hands them to its workers."""
        self._loader = loader
        self._sampler_iter = iter(loader._index_sampler)
        self._dataset_iter = iter(loader.dataset) if loader._iterable else None
        self._len_called = loader._IterableDataset_len_called
        self._num_yielded = 0
        self._ahead: collections.deque = collections.deque()
        self._read_ahead((loader.prefetch_factor or 0) * loader.num_workers)

    def _read_ahead(self, n: int) -> None:
        self._ahead.extend(itertools.islice(self._sampler_iter, n))

    def __iter__(self) -> _DataLoaderIter:
        return self

    def __len__(self) -> int:
        return len(self._loader._index_sampler)

    def __next__(self):
        index = self._ahead.popleft() if self._ahead else next(self._sampler_iter)
        loader = self._loader
        data = self._fetch_iterable(index) if loader._iterable else self._fetch_map(index)
        if loader.num_workers:
            self._read_ahead(1)
        self._num_yielded += 1
        if self._len_called is not None and self._num_yielded > self._len_called:
            warnings.warn(
                f"Length of IterableDataset {loader.dataset} was reported to be "
                f"{self._len_called}(when accessing len(dataloader)), but "
                f"{self._num_yielded} samples have been fetched. ",
                stacklevel=2,
            )
        return data

    def _fetch_map(self, index):
        loader = self._loader
        if not loader._auto_collation:
            return loader.collate_fn(loader.dataset[index])
        if getattr(loader.dataset, "__getitems__", None):
            return loader.collate_fn(loader.dataset.__getitems__(index))
        return loader.collate_fn([loader.dataset[i] for i in index])

    def _fetch_iterable(self, index):
        loader = self._loader
        if self._dataset_iter is None:  # ended
            raise StopIteration
        if not loader._auto_collation:
            return loader.collate_fn(next(self._dataset_iter))
        data = list(itertools.islice(self._dataset_iter, len(index)))
        if len(data) < len(index):
            self._dataset_iter = None
        if not data or (loader.drop_last and len(data) < len(index)):
            raise StopIteration
        return loader.collate_fn(data)
