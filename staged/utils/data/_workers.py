"""A ``DataLoader``'s workers, each run in this process in turn as torch's runs in its own.

Note [workers in this process]: what a torch worker process has of its own is what its
code can observe, and each ``_Worker`` keeps it and puts it in place while its code runs
(``_Worker.inside``): the random states torch's ``_worker_loop`` seeds (Python's
``random`` and staged's default generator from ``base_seed + id``, NumPy's global one
from ``_generate_state``), ``get_worker_info()``, and its copy of the dataset, which
``worker_init_fn`` may change (a shallow copy: a forked worker's copy is whole, so its
attributes' own contents are shared here but for random generators, which each worker
copies as a forked one does). The loader's main-process side (``dataloader.py``) hands
out the batches of indices in torch's order; a worker fetches each when the batch is
read, in its own states, so the batches, their random draws and the main process's
generators after them are torch's, without processes (or their parallel loading).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import random
import threading

import numpy as np

from ...eager.random import generator as _gen
from ._fetch import Fetcher

_local = threading.local()


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerInfo:
    """``get_worker_info()`` inside a worker, read-only (torch 2.13's dataclass): ``id``,
    ``num_workers``, ``seed`` and ``dataset`` (the worker's copy); ``rng`` and
    ``worker_method`` as torch's process workers have them."""

    id: int
    num_workers: int
    seed: int
    dataset: object
    rng: object = None
    worker_method: str | None = "multiprocessing"


def get_worker_info() -> WorkerInfo | None:
    """The running worker's ``WorkerInfo`` while a ``DataLoader`` worker's code runs
    (``worker_init_fn``, the dataset's ``__getitem__``/``__iter__``, ``collate_fn``);
    ``None`` elsewhere."""
    return getattr(_local, "info", None)


_RANDOM = (random.Random, np.random.Generator, np.random.RandomState, _gen.Generator)


def _copy(dataset):
    """A worker's copy of ``dataset`` (Note [workers in this process])."""
    try:
        mine = copy.copy(dataset)
    except Exception:  # noqa: BLE001 - an object that cannot be copied is shared
        return dataset
    attrs = getattr(mine, "__dict__", None)
    if attrs is not None and attrs is not getattr(dataset, "__dict__", None):
        for k, v in attrs.items():
            if isinstance(v, _RANDOM):
                attrs[k] = copy.deepcopy(v)
    return mine


def _generate_state(base_seed: int, worker_id: int) -> list:
    """NumPy's seed of worker ``worker_id`` (torch's ``_utils.worker._generate_state``: a
    SeedSequence-like hash of the base seed and the worker's id, four 32-bit words)."""
    mask = 0xFFFFFFFF
    shift = 16
    hash_a = 0x43B0D7E5

    def hashed(value: int) -> int:
        nonlocal hash_a
        value = (value ^ hash_a) & mask
        hash_a = (hash_a * 0x931E8875) & mask
        value = (value * hash_a) & mask
        return (value ^ (value >> shift)) & mask

    def mix(x: int, y: int) -> int:
        r = (((0xCA01F9DD * x) & mask) - ((0x4973F715 * y) & mask)) & mask
        return (r ^ (r >> shift)) & mask

    pool = [hashed(e) for e in (worker_id, base_seed & mask, base_seed >> 32, 0)]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                pool[dst] = mix(pool[dst], hashed(pool[src]))
    hash_b, state = 0x8B51F9DD, []
    for value in pool:
        value = (value ^ hash_b) & mask
        hash_b = (hash_b * 0x58F38DED) & mask
        value = (value * hash_b) & mask
        state.append((value ^ (value >> shift)) & mask)
    return state


class Worker:
    """Worker ``worker_id`` of ``loader``'s workers seeded from ``base_seed``, started as
    torch's ``_worker_loop`` starts: seeded, then ``worker_init_fn``, then its fetcher (an
    error there is raised at its batches, as torch's main process raises it)."""

    def __init__(self, loader, base_seed: int, worker_id: int) -> None:
        self.id, self.base_seed, self.seed = worker_id, base_seed, base_seed + worker_id
        dataset = _copy(loader.dataset)
        self.info = WorkerInfo(
            id=worker_id, num_workers=loader.num_workers, seed=self.seed, dataset=dataset
        )
        self.rng = _gen.new_process_state()  # staged's generators, seeded at the first ``inside``
        self.states: tuple | None = None  # then Python's and NumPy's
        self.error: Exception | None = None
        with self.inside():
            try:
                if loader.worker_init_fn is not None:
                    loader.worker_init_fn(worker_id)
                self.fetcher = Fetcher(loader, dataset)
            except Exception as e:  # noqa: BLE001 - torch's worker keeps it for its batches
                self.error = e

    def resume(self, loader) -> None:
        """A persistent worker's next pass: a new fetcher (an iterable dataset's iterator
        made anew), in the worker's states."""
        if self.error is None:
            with self.inside():
                self.fetcher = Fetcher(loader, self.info.dataset)

    def fetch(self, index):
        """The batch of ``index``, fetched as this worker."""
        if self.error is not None:
            raise self.error
        with self.inside():
            return self.fetcher.fetch(index)

    @contextlib.contextmanager
    def inside(self):
        """Run the block as this worker: its random states and ``get_worker_info()``,
        put back as they were after it."""
        info, self.rng = get_worker_info(), _gen.swap_process_state(self.rng)
        caller = random.getstate(), np.random.get_state()
        if self.states is None:
            random.seed(self.seed)
            _gen.manual_seed(self.seed)
            np.random.seed(_generate_state(self.base_seed, self.id))
        else:
            random.setstate(self.states[0])
            np.random.set_state(self.states[1])
        _local.info = self.info
        try:
            yield
        finally:
            self.states = random.getstate(), np.random.get_state()
            random.setstate(caller[0])
            np.random.set_state(caller[1])
            self.rng = _gen.swap_process_state(self.rng)
            _local.info = info
