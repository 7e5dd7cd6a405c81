"""``DataLoader`` as in ``torch.utils.data.dataloader``.

``num_workers > 0`` gives torch's batches, random draws and generator states without
worker processes: each worker runs in this process in turn, with its own random states,
``get_worker_info()`` and dataset copy (Note [workers in this process] in
``_workers.py``), while the main process's side is torch's: the sampler read
``prefetch_factor * num_workers`` batches ahead and one more per batch, batches handed to
the workers in turn, and ``persistent_workers`` keeping one iterator (and its workers)
across epochs, reset each epoch without a new worker seed. Loading is not parallel;
``timeout`` and ``multiprocessing_context`` are checked as torch checks them and otherwise
unused. ``pin_memory`` is accepted and ignored, with torch's warning at each new iterator
that no accelerator pins memory: tensors live in host memory already.
"""

from __future__ import annotations

import collections
import itertools
import math
import multiprocessing
import warnings
from typing import Generic, TypeVar

from ..._where import warn_user
from . import _random
from ._collate import default_collate, default_convert
from ._fetch import Fetcher
from ._workers import Worker, get_worker_info  # noqa: F401 - torch's name here too
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

_T_co = TypeVar("_T_co", covariant=True)
_FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


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
        self._iterator: _WorkersIter | None = None
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
        if not self.num_workers:
            return _DataLoaderIter(self)
        if not self.persistent_workers:
            return _WorkersIter(self)
        if self._iterator is None:
            self._iterator = _WorkersIter(self)
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


def _warn_pinning(loader: DataLoader) -> None:
    """torch's warnings at a new iterator of a loader asked to pin memory (a CPU build's)."""
    if loader.pin_memory and loader.pin_memory_device:
        warn_user(
            "pin_memory_device is deprecated, the current accelerator will be used as the "
            f"device,ignore pin_memory_device='{loader.pin_memory_device}'."
        )
    if loader.pin_memory:
        warn_user(
            "'pin_memory' argument is set as true but no accelerator is found, then device "
            "pinned memory won't be used."
        )


class _DataLoaderIter:
    """One pass over a ``DataLoader`` without workers (torch's
    ``_SingleProcessDataLoaderIter``)."""

    def __init__(self, loader: DataLoader) -> None:
        _warn_pinning(loader)
        if loader.timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        # torch draws its workers' base seed here, workers or not; so do we, so that the
        # generator is where torch's is after each iter()
        self._base_seed = _random.seed(loader.generator)
        self._reset(loader)

    def _reset(self, loader: DataLoader) -> None:
        self._start(loader)
        self._fetcher = Fetcher(loader, loader.dataset)

    def _start(self, loader: DataLoader) -> None:
        """What each pass starts from: the sampler read anew, nothing yielded yet."""
        self._loader = loader
        self._sampler_iter = iter(loader._index_sampler)
        self._len_called = loader._IterableDataset_len_called
        self._num_yielded = 0

    def __iter__(self) -> _DataLoaderIter:
        return self

    def __len__(self) -> int:
        return len(self._loader._index_sampler)

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        if self._len_called is not None and self._num_yielded > self._len_called:
            warnings.warn(
                f"Length of IterableDataset {self._loader.dataset} was reported to be "
                f"{self._len_called}(when accessing len(dataloader)), but "
                f"{self._num_yielded} samples have been fetched. ",
                stacklevel=2,
            )
        return data

    def _next_data(self):
        return self._fetcher.fetch(next(self._sampler_iter))


class _WorkersIter(_DataLoaderIter):
    """One pass over a ``DataLoader`` with workers (torch's
    ``_MultiProcessingDataLoaderIter``), each run in this process in turn (Note [workers in
    this process] in ``_workers.py``). As torch's main process: ``prefetch_factor`` batches
    of indices per worker are handed out at the start and one more per batch read, to the
    workers in turn, skipping those whose iterable dataset has ended; batches come back in
    the order handed out."""

    def __init__(self, loader: DataLoader) -> None:
        _warn_pinning(loader)
        self._base_seed = _random.seed(loader.generator)
        self._workers = [Worker(loader, self._base_seed, i) for i in range(loader.num_workers)]
        self._tasks: collections.deque = collections.deque()
        self._reset(loader, first=True)

    def _reset(self, loader: DataLoader, first: bool = False) -> None:
        if not first:  # a persistent worker fetched every batch handed to it, read or not
            self._drain()
            for w in self._workers:
                w.resume(loader)
        self._start(loader)
        self._active = [True] * len(self._workers)
        self._turn = itertools.cycle(range(len(self._workers)))
        for _ in range((loader.prefetch_factor or 0) * len(self._workers)):
            self._hand_out()

    def _hand_out(self) -> None:
        """Read the next batch of indices and hand it to the next worker still active (it
        is dropped if there is none, as torch's ``_try_put_index`` drops it)."""
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in self._workers:
            w = next(self._turn)
            if self._active[w]:
                self._tasks.append((w, index))
                return

    def _next_data(self):
        while self._tasks:
            w, index = self._tasks.popleft()
            if not self._active[w]:  # its iterable dataset has ended
                continue
            try:  # one batch handed out per batch read, or raised, or ended (torch's)
                data = self._workers[w].fetch(index)
            except StopIteration:
                if not self._loader._iterable:
                    raise
                self._active[w] = False
                continue
            finally:
                self._hand_out()
            return data
        raise StopIteration

    def _shutdown_workers(self) -> None:
        """End this pass: the batches handed out and not read are dropped, as torch's
        workers' are when they are shut down (Lightning calls it before a new pass)."""
        self._tasks.clear()
        self._active = [False] * len(self._workers)

    def _drain(self) -> None:
        """Fetch, and drop, the batches handed out and not read."""
        while self._tasks:
            w, index = self._tasks.popleft()
            if self._active[w]:
                try:
                    self._workers[w].fetch(index)
                except StopIteration:
                    self._active[w] = False
                except Exception:  # noqa: BLE001, S110 - torch's main process drops them too
                    pass


# torch's names of the iterators, which libraries check with isinstance (Lightning)
_BaseDataLoaderIter = _SingleProcessDataLoaderIter = _DataLoaderIter
_MultiProcessingDataLoaderIter = _WorkersIter
