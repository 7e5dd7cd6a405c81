"""Data loading against torch 2.13 (the fifteenth trust probe): the same orders, batches,
values and types from the same seed. ``DataLoader`` (shuffle on and off, ``drop_last``,
``batch_size=None``, ``sampler=``/``batch_sampler=``, an explicit ``generator``, a new
order each epoch, the global generator's state after an epoch, ``len()``, workers),
``RandomSampler`` (replacement, ``num_samples``, generator), ``SequentialSampler``,
``SubsetRandomSampler``, ``WeightedRandomSampler``, ``BatchSampler``, ``random_split``
(counts and fractions), ``Subset``, ``ConcatDataset``, ``ChainDataset``, ``TensorDataset``,
``IterableDataset``, ``default_collate`` of nested containers (result types and dtypes),
``collate_fn``, and the errors of bad arguments by type and message."""

from __future__ import annotations

import collections
import random
import re
import warnings

import numpy as np
import pytest
import torch

import staged

Point = collections.namedtuple("Point", ["x", "y"])


def _plain(x):
    """``x`` as nested plain Python values, with each node's type (tensor dtypes included)."""
    if isinstance(x, (torch.Tensor, staged.Tensor)):
        return ("tensor", str(x.dtype).split(".")[-1], tuple(x.shape), x.tolist())
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.tolist())
    if isinstance(x, dict):
        return (type(x).__name__, {k: _plain(v) for k, v in x.items()})
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_plain(v) for v in x])
    return (type(x).__name__, x)


def _both(fn):
    """``_plain(fn(torch))`` and ``_plain(fn(staged))``, each ``(error type, message)`` if
    it raised, the library's name in the message made neutral and staged's ``file:line: ``
    prefix (its errors about tensor data name the user's line) dropped."""
    out = []
    for L in (torch, staged):
        try:
            out.append(_plain(fn(L)))
        except Exception as e:
            message = re.sub(r"^\S+\.py:\d+: ", "", str(e))
            out.append(("raised", type(e).__name__, message.replace(L.__name__, "L")))
    return out


def _same(fn):
    got = _both(fn)
    assert got[0] == got[1]
    return got[0]


def _ds(L, n=10):
    return L.utils.data.TensorDataset(L.arange(n), L.arange(n, dtype=L.float64) * 0.5)


def _epochs(L, loader, epochs=2):
    """Every batch of ``epochs`` passes, then a draw from the global generator."""
    return [list(loader) for _ in range(epochs)], L.rand(3)


class _Batched:
    """A dataset (of either library) whose ``__getitems__`` differs from ``__getitem__``."""

    def __getitem__(self, i):
        return i * 10

    def __getitems__(self, idx):
        return [("many", i) for i in idx]

    def __len__(self):
        return 5


# --- DataLoader ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"batch_size": 3},
        {"batch_size": 3, "shuffle": True},
        {"batch_size": 3, "shuffle": True, "drop_last": True},
        {"batch_size": 4, "shuffle": False, "drop_last": True},
        {"batch_size": None},
        {"batch_size": None, "shuffle": True},
        {"batch_size": 20, "shuffle": True},
    ],
    ids=repr,
)
@pytest.mark.parametrize("seed", [0, 1234])
def test_loader_batches_each_epoch_and_global_state_match_torch(kw, seed):
    def run(L):
        L.manual_seed(seed)
        loader = L.utils.data.DataLoader(_ds(L), **kw)
        return len(loader), _epochs(L, loader)

    got = _same(run)
    if kw.get("shuffle"):  # a new order in the second epoch
        assert got[1][1][1][1][0] != got[1][1][1][1][1]


@pytest.mark.parametrize("shuffle", [True, False])
def test_loader_explicit_generator_matches_torch(shuffle):
    def run(L):
        L.manual_seed(3)
        g = L.Generator().manual_seed(7)
        loader = L.utils.data.DataLoader(_ds(L), batch_size=4, shuffle=shuffle, generator=g)
        return _epochs(L, loader, 3), L.rand(2, generator=g)

    _same(run)


def test_loader_sampler_and_batch_sampler_arguments_match_torch():
    def run(L):
        D = L.utils.data
        L.manual_seed(11)
        ds = _ds(L, 12)
        rs = D.RandomSampler(ds, replacement=True, num_samples=7)
        a = D.DataLoader(ds, batch_size=3, sampler=rs)
        bs = D.BatchSampler(D.RandomSampler(ds), batch_size=5, drop_last=False)
        b = D.DataLoader(ds, batch_sampler=bs)
        c = D.DataLoader(ds, batch_size=None, sampler=D.SubsetRandomSampler([1, 5, 9]))
        return [(len(x), _epochs(L, x)) for x in (a, b, c)]

    _same(run)


def test_loader_collate_fn_and_getitems_match_torch():
    def run(L):
        L.manual_seed(0)
        D = L.utils.data
        a = D.DataLoader(_ds(L, 7), batch_size=3, shuffle=True, collate_fn=lambda b: b)
        b = D.DataLoader(_Batched(), batch_size=3, collate_fn=lambda b: b)
        c = D.DataLoader(list(range(5)), batch_size=None, collate_fn=lambda s: -s)
        return list(a), list(b), list(c)

    _same(run)


def _range(L, n):
    """An ``IterableDataset`` (of either library) over ``range(start, n, step)``, from 0 by 1
    unless a ``worker_init_fn`` shards it."""

    class R(L.utils.data.IterableDataset):
        start, step = 0, 1

        def __iter__(self):
            return iter(range(self.start, n, self.step))

        def __len__(self):
            return n

    return R()


@pytest.mark.parametrize(
    "kw",
    [{"batch_size": 3}, {"batch_size": 3, "drop_last": True}, {"batch_size": None}],
    ids=repr,
)
def test_iterable_dataset_single_process_matches_torch(kw):
    def run(L):
        L.manual_seed(5)
        loader = L.utils.data.DataLoader(_range(L, 8), **kw)
        return len(loader), _epochs(L, loader)

    _same(run)


def test_chain_and_iterable_add_match_torch():
    def run(L):
        D = L.utils.data
        chain = D.ChainDataset([_range(L, 3), _range(L, 2)])
        added = _range(L, 2) + _range(L, 1)
        return list(chain), len(chain), type(added).__name__, list(added)

    _same(run)


@pytest.mark.parametrize("persistent", [False, True], ids=["fresh", "persistent"])
def test_workers_map_style_order_and_global_state_match_torch(persistent):
    """Persistent workers: one iterator, reset each epoch (no new worker base seed drawn)."""

    def run(L):
        L.manual_seed(2)
        loader = L.utils.data.DataLoader(
            _ds(L), batch_size=3, shuffle=True, num_workers=2, persistent_workers=persistent
        )
        first = iter(loader)
        return _epochs(L, loader, 2), iter(loader) is first, list(_range(L, 2))

    _same(run)


def test_workers_read_the_sampler_ahead_as_torch():
    """torch's main process hands ``prefetch_factor * num_workers`` batches of indices to its
    workers at ``iter()`` and one more per batch: the sampler's draws come in that order."""

    def run(L):
        D = L.utils.data
        L.manual_seed(0)
        g = L.Generator().manual_seed(3)
        sampler = D.RandomSampler(range(50), replacement=True, num_samples=80, generator=g)
        loader = D.DataLoader(_ds(L, 50), batch_size=4, sampler=sampler, num_workers=2)
        it = iter(loader)
        out = [L.rand(1)]
        for batch in it:
            out.append((batch, L.rand(1, generator=g)))
        shuffled = iter(D.DataLoader(_ds(L), shuffle=True, num_workers=1, prefetch_factor=3))
        return out, L.rand(1), next(shuffled), L.rand(1)

    _same(run)


def test_workers_iterable_sharding_and_worker_init_fn_match_torch():
    def run(L):
        def shard(worker_id):
            info = L.utils.data.get_worker_info()
            info.dataset.start, info.dataset.step = worker_id, info.num_workers

        loader = L.utils.data.DataLoader(
            _range(L, 10), batch_size=2, num_workers=2, worker_init_fn=shard
        )
        return list(loader)

    _same(run)


@pytest.mark.parametrize("workers", [0, 2])
def test_tensor_dataset_batches_match_torch(workers):
    """A TensorDataset's batches (Note [a TensorDataset's batches] in staged's
    ``_fetch.py``: indexed at once, not row by row): values, dtypes, shapes and strides of
    non-contiguous, 1-D, half and bool tensors; a subclass's own ``__getitem__``; an index
    out of range, by type and message."""

    def run(L):
        L.manual_seed(4)
        x = L.arange(40.0).reshape(4, 10).t().to(L.float16)  # 10 x 4, column-major
        ds = L.utils.data.TensorDataset(x, L.arange(10), L.arange(10) % 3 == 0)

        class Doubled(L.utils.data.TensorDataset):
            def __getitem__(self, i):
                return tuple(t[i] * 2 for t in self.tensors[:2])

        out = []
        for d in (ds, Doubled(*ds.tensors)):
            loader = L.utils.data.DataLoader(
                d, batch_size=4, shuffle=True, drop_last=d is ds, num_workers=workers
            )
            out += [[(t, t.stride()) for t in b] for b in loader]
        try:
            list(L.utils.data.DataLoader(ds, batch_sampler=[[1, 10]], num_workers=workers))
        except IndexError as e:  # (torch's worker adds where it was caught and a traceback)
            out.append(str(e).strip().splitlines()[-1].removeprefix("IndexError: "))
        return out

    _same(run)


def test_workers_random_draws_in_getitem_match_torch():
    def run(L):
        class Noisy(L.utils.data.Dataset):
            def __getitem__(self, i):
                return L.rand(1)

            def __len__(self):
                return 6

        L.manual_seed(0)
        return list(L.utils.data.DataLoader(Noisy(), batch_size=2, num_workers=2))

    _same(run)


def _augmenting(L):
    """A map-style dataset (of either library) drawing from each random source a worker
    seeds (torch's, NumPy's and Python's global ones), from generators of its own (which
    each forked worker copies), and reading ``get_worker_info()`` and ``self.epoch``."""

    class Augmenting(L.utils.data.Dataset):
        def __init__(self):
            self.rng, self.g, self.epoch = np.random.default_rng(5), L.Generator(), 0
            self.g.manual_seed(3)

        def __getitem__(self, i):
            info = L.utils.data.get_worker_info()
            who = (info.id, info.num_workers, info.seed) if info else None
            own = (self.rng.random(), L.rand(1, generator=self.g))
            return L.rand(2), np.random.rand(), random.random(), own, who, self.epoch, i

        def __len__(self):
            return 11

    return Augmenting()


@pytest.mark.parametrize("persistent", [False, True], ids=["fresh", "persistent"])
def test_workers_random_sources_and_epochs_match_torch(persistent):
    """Each worker's draws (global generators seeded from the loader's base seed, the
    dataset's own generators copied), the dataset as each worker copied it (persistent
    workers keep their first epoch's copy), an epoch left after two batches (a persistent
    worker fetched what was handed to it anyway), and every main-process generator after."""

    def run(L):
        L.manual_seed(0), np.random.seed(1), random.seed(2)
        ds = _augmenting(L)
        loader = L.utils.data.DataLoader(
            ds, batch_size=2, shuffle=True, num_workers=2, persistent_workers=persistent
        )
        out = []
        for epoch in range(3):
            ds.epoch = epoch
            for k, batch in enumerate(loader):
                out.append(batch)
                if epoch == 0 and k == 1:
                    break
        mains = (L.rand(1), np.random.rand(), random.random(), ds.rng.random())
        return out, mains, L.rand(1, generator=ds.g)

    _same(run)


@pytest.mark.parametrize(
    "kw",
    [{"batch_size": 2}, {"batch_size": 2, "drop_last": True}, {"batch_size": None}],
    ids=repr,
)
def test_workers_uneven_iterable_shards_interleave_as_torch(kw):
    """Workers take batches in turn until each one's stream ends (each batches its own
    stream, so short and dropped batches come per worker); no sharding: each worker
    yields the whole dataset."""

    def run(L):
        class Uneven(L.utils.data.IterableDataset):
            def __iter__(self):
                w = L.utils.data.get_worker_info().id
                return iter(range(100 * w, 100 * w + 3 + 3 * w))

        sharded = list(L.utils.data.DataLoader(Uneven(), num_workers=3, **kw))
        return sharded, list(L.utils.data.DataLoader(_range(L, 3), num_workers=2, **kw))

    _same(run)


def test_worker_init_fn_error_and_worker_info_match_torch():
    """An error in ``worker_init_fn`` is raised at that worker's first batch (the other
    workers' batches before it come back); ``WorkerInfo`` is read-only; no worker: None."""

    def run(L):
        def init(worker_id):
            if worker_id == 1:
                try:
                    L.utils.data.get_worker_info().id = 5
                except AttributeError as e:  # dataclasses.FrozenInstanceError
                    raise ValueError(f"worker 1 refuses: {e}") from e

        it = iter(L.utils.data.DataLoader(_ds(L), batch_size=2, num_workers=2, worker_init_fn=init))
        first = next(it)
        try:
            next(it)
        except ValueError as e:
            second = type(e).__name__, "refuses: cannot assign to field 'id'" in str(e)
        return first, second, L.utils.data.get_worker_info()

    _same(run)


# --- samplers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda L: L.utils.data.RandomSampler(range(70000)),
        lambda L: L.utils.data.RandomSampler(range(70000), replacement=True, num_samples=100),
        lambda L: L.utils.data.RandomSampler(range(2**40), replacement=True, num_samples=40),
        lambda L: L.utils.data.WeightedRandomSampler(np.linspace(0, 1, 3000), 100, False),
        lambda L: L.utils.data.WeightedRandomSampler(np.linspace(0, 1, 3000), 100),
        lambda L: L.utils.data.WeightedRandomSampler([1.0, 0.0, 2.0], 3, replacement=False),
    ],
    ids=["perm-70000", "randint-70000", "randint-2**40", "wrs-3000", "wrs-3000-repl", "wrs-0"],
)
def test_large_samplers_match_torch(make):
    def run(L):
        L.manual_seed(1)
        s = make(L)
        return list(s)[-60:], L.rand(1)

    _same(run)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"replacement": True},
        {"replacement": True, "num_samples": 70},
        {"num_samples": 25},
        {"num_samples": 4},
    ],
    ids=repr,
)
@pytest.mark.parametrize("explicit", [False, True], ids=["global", "generator"])
def test_random_sampler_matches_torch(kw, explicit):
    def run(L):
        L.manual_seed(21)
        g = L.Generator().manual_seed(99) if explicit else None
        s = L.utils.data.RandomSampler(range(10), generator=g, **kw)
        return len(s), list(s), list(s), L.rand(2)

    _same(run)


def test_sequential_and_subset_random_samplers_match_torch():
    def run(L):
        D = L.utils.data
        L.manual_seed(4)
        seq = D.SequentialSampler(range(6))
        sub = D.SubsetRandomSampler([3, 8, 1, 0, 42])
        subg = D.SubsetRandomSampler([3, 8, 1], generator=L.Generator().manual_seed(1))
        return list(seq), len(seq), list(sub), list(sub), len(sub), list(subg), L.rand(2)

    _same(run)


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("explicit", [False, True], ids=["global", "generator"])
def test_weighted_random_sampler_matches_torch(replacement, explicit):
    def run(L):
        L.manual_seed(8)
        g = L.Generator().manual_seed(5) if explicit else None
        w = [0.1, 2.0, 0.0, 1.5, 3.0, 0.4]
        s = L.utils.data.WeightedRandomSampler(w, 5, replacement=replacement, generator=g)
        big = L.utils.data.WeightedRandomSampler(L.tensor(w), 40, generator=g)
        return len(s), list(s), list(s), list(big), L.rand(2)

    _same(run)


@pytest.mark.parametrize("drop_last", [True, False])
def test_batch_sampler_matches_torch(drop_last):
    def run(L):
        D = L.utils.data
        L.manual_seed(6)
        out = []
        for n, bs in [(10, 3), (9, 3), (2, 5)]:
            s = D.BatchSampler(D.RandomSampler(range(n)), bs, drop_last)
            out.append((len(s), list(s)))
        return out

    _same(run)


def test_distributed_sampler_shards_match_torch():
    def run(L):
        out = []
        for n, reps, drop_last, shuffle in [
            (10, 3, False, True),
            (10, 3, True, True),
            (2, 5, False, True),
            (11, 4, False, False),
            (7, 2, True, False),
        ]:
            for rank in range(reps):
                s = L.utils.data.DistributedSampler(
                    range(n), reps, rank, shuffle=shuffle, seed=5, drop_last=drop_last
                )
                s.set_epoch(3)
                out.append((len(s), list(s)))
        return out

    _same(run)


# --- datasets ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lengths",
    [[3, 7], [0.5, 0.3, 0.2], [0.33, 0.33, 0.34], [0.6, 0.4, 0.0], [10]],
    ids=repr,
)
@pytest.mark.parametrize("explicit", [False, True], ids=["global", "generator"])
def test_random_split_matches_torch(lengths, explicit):
    def run(L):
        L.manual_seed(13)
        g = L.Generator().manual_seed(42) if explicit else None
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            parts = L.utils.data.random_split(range(10), lengths, generator=g)
        return [list(p) for p in parts], [p.indices for p in parts], [str(x.message) for x in w]

    _same(run)


def test_subset_concat_tensor_datasets_match_torch():
    def run(L):
        D = L.utils.data
        ds = _ds(L, 5)
        sub = D.Subset(ds, [4, 0, 2])
        cat = D.ConcatDataset([ds, sub, D.TensorDataset(L.ones(2, dtype=L.int64) * 7, L.zeros(2))])
        added = ds + sub
        return (
            [sub[i] for i in range(len(sub))],
            len(cat),
            cat.cumulative_sizes,
            [cat[i] for i in (0, 4, 5, 7, 8, 9, -1, -10)],
            type(added).__name__,
            len(added),
            ds[1:3],
        )

    _same(run)


def test_stack_dataset_uses_getitems_as_torch():
    def run(L):
        D = L.utils.data
        t = D.StackDataset(_Batched(), list(range(5)))
        d = D.StackDataset(a=_Batched(), b=_ds(L, 5))
        return (
            list(D.DataLoader(t, batch_size=2)),
            list(D.DataLoader(d, batch_size=3, collate_fn=lambda b: b)),
            t[1],
            t.__getitems__([]),
        )

    _same(run)


def test_stack_dataset_checks_nested_batch_size_as_torch():
    class Short(_Batched):
        def __getitems__(self, idx):
            return idx[1:]

    def run(L):
        return L.utils.data.StackDataset(Short(), list(range(5))).__getitems__([0, 1])

    got = _same(run)
    assert got == (
        "raised",
        "ValueError",
        "Nested dataset's output size mismatch. Expected 2, got 1",
    )


# --- collation -----------------------------------------------------------------------------


def test_default_collate_nested_types_and_dtypes_match_torch():
    def run(L):
        batch = [
            {
                "f": 1.5,
                "i": 3,
                "b": True,
                "s": "a",
                "by": b"x",
                "t": (L.tensor([1, 2]), [2.5, 3]),
                "p": Point(np.float32(0.5), np.array([1, 2], dtype=np.int16)),
                "n": {"u8": np.uint8(4), "f16": np.array(1.0, dtype=np.float16)},
                "l": [1.0 / 3, 2],
            },
            {
                "f": 0.1,
                "i": -4,
                "b": False,
                "s": "bc",
                "by": b"yz",
                "t": (L.tensor([3, 4]), [4.5, 5]),
                "p": Point(np.float32(1.25), np.array([3, 4], dtype=np.int16)),
                "n": {"u8": np.uint8(250), "f16": np.array(2.5, dtype=np.float16)},
                "l": [2.0 / 3, 5],
            },
        ]
        out = L.utils.data.default_collate(batch)
        return out, type(out["p"]).__name__

    _same(run)


def test_default_collate_and_convert_leaves_match_torch():
    def run(L):
        D = L.utils.data
        return (
            D.default_collate([1, 2, 3]),
            D.default_collate([np.float64(1.0), np.float64(2.0)]),
            D.default_collate([np.array([1.0, 2.0], dtype=np.float32)] * 2),
            D.default_collate([L.tensor(1.5), L.tensor(2.5)]),
            D.default_collate([(1, "a"), (2, "b")]),
            D.default_convert([np.array([1, 2]), (np.int32(3), "s"), {"k": np.float32(1)}]),
        )

    _same(run)


@pytest.mark.parametrize(
    "batch",
    [
        [1, 2.5],
        [1.0, 2],
        [True, False],
        [np.bool_(True), np.bool_(False)],
        [np.float16(1.5), np.float16(2)],
        [np.array(1.5), np.array(2.0)],
        [np.complex64(1 + 2j)] * 2,
        [np.zeros(2, np.int8), np.zeros(2, np.float32)],
        [np.str_("a"), np.str_("b")],
        [[1, 2], [3, 4]],
        [collections.OrderedDict(a=1, b=2.0)] * 2,
        [collections.defaultdict(int, a=1)] * 2,
        [{"a": 1}, {"b": 2}],
        [],
    ],
    ids=repr,
)
def test_default_collate_leaf_types_match_torch(batch):
    _same(lambda L: L.utils.data.default_collate(batch))


def test_default_collate_int_overflow_matches_torch():
    _same(lambda L: L.utils.data.default_collate([2**63, 1]))


@pytest.mark.parametrize(
    "data",
    [2**63, [2**63, 1], [2**64], -(2**63) - 1, [[1, 2**63], [3, 4]], [1.5, 2**63], [2**63 - 1]],
)
def test_python_ints_past_int64_raise_as_torchs(data):
    """NumPy makes them uint64, float64 or objects; torch's int64 cannot hold them (a
    float among them makes a float tensor in both)."""
    _same(lambda L: L.tensor(data))


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32], ids=["uint16", "uint32"])
def test_default_collate_wide_unsigned_matches_torch(dtype):
    _same(lambda L: L.utils.data.default_collate([np.array([1], dtype)] * 2))


@pytest.mark.parametrize(
    "batch",
    [
        [[1, 2], [3]],
        [object(), object()],
        [np.array(["a", "b"]), np.array(["c", "d"])],
        [None, None],
    ],
    ids=["ragged", "object", "str-array", "none"],
)
def test_default_collate_errors_match_torch(batch):
    got = _both(lambda L: L.utils.data.default_collate(batch))
    assert got[0][0] == "raised"
    assert got[0][:2] == got[1][:2]
    # the message names the element's type the same way
    assert got[0][2].replace("torch", "L") == got[1][2].replace("staged", "L")


# --- errors and lengths --------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda L: L.utils.data.DataLoader(_ds(L), batch_size=0),
        lambda L: L.utils.data.DataLoader(_ds(L), batch_size=-1),
        lambda L: L.utils.data.DataLoader(_ds(L), batch_size=2.0),
        lambda L: L.utils.data.DataLoader(
            _ds(L), shuffle=True, sampler=L.utils.data.SequentialSampler(range(10))
        ),
        lambda L: L.utils.data.DataLoader(_ds(L), drop_last=True, batch_sampler=[[0, 1], [2]]),
        lambda L: L.utils.data.DataLoader(_ds(L), batch_size=2, batch_sampler=[[0, 1]]),
        lambda L: L.utils.data.DataLoader(_ds(L), batch_size=None, drop_last=True),
        lambda L: L.utils.data.DataLoader(_ds(L), num_workers=-1),
        lambda L: L.utils.data.DataLoader(_ds(L), prefetch_factor=2),
        lambda L: L.utils.data.DataLoader(_range(L, 3), shuffle=True),
        lambda L: L.utils.data.random_split(range(10), [3, 3]),
        lambda L: L.utils.data.random_split(range(10), [0.5, 0.6]),
        lambda L: L.utils.data.random_split(range(10), [1.5, -0.5]),
        lambda L: L.utils.data.RandomSampler(range(3), replacement=1),
        lambda L: L.utils.data.RandomSampler(range(3), num_samples=0),
        lambda L: L.utils.data.RandomSampler([], num_samples=None),
        lambda L: L.utils.data.WeightedRandomSampler([1.0, 2.0], 0),
        lambda L: L.utils.data.WeightedRandomSampler([[1.0, 2.0]], 2),
        lambda L: list(L.utils.data.WeightedRandomSampler([1.0, 2.0], 3, replacement=False)),
        lambda L: list(L.utils.data.WeightedRandomSampler([1.0, -2.0], 1)),
        lambda L: L.utils.data.BatchSampler(range(3), 0, False),
        lambda L: L.utils.data.BatchSampler(range(3), 2, None),
        lambda L: L.utils.data.TensorDataset(L.zeros(2), L.zeros(3)),
        lambda L: L.utils.data.ConcatDataset([]),
        lambda L: L.utils.data.ConcatDataset([_ds(L)])[-11],
        lambda L: _ds(L)[10],
        lambda L: L.utils.data.DataLoader(_ds(L), persistent_workers=True),
        lambda L: L.utils.data.DataLoader(_ds(L), multiprocessing_context="fork"),
        lambda L: L.utils.data.DataLoader(_ds(L), num_workers=1, prefetch_factor=-1),
        lambda L: L.utils.data.DataLoader(_ds(L), num_workers=1, multiprocessing_context="no"),
        lambda L: L.utils.data.DataLoader(_ds(L), num_workers=1, multiprocessing_context=3),
        lambda L: list(L.utils.data.DataLoader(_ds(L), timeout=1)),
        lambda L: L.utils.data.DataLoader(_range(L, 3), sampler=[0]),
        lambda L: L.utils.data.DataLoader(_range(L, 3), batch_sampler=[[0]]),
        lambda L: len(L.utils.data.DataLoader(_ds(L), sampler=iter([3, 1]))),
        lambda L: L.utils.data.ConcatDataset([_ds(L), _range(L, 2)]),
        lambda L: list(L.utils.data.ChainDataset([_ds(L)])),
        lambda L: len(L.utils.data.ChainDataset([_ds(L)])),
        lambda L: L.utils.data.StackDataset(_ds(L, 4), _ds(L, 3)),
        lambda L: L.utils.data.StackDataset(_ds(L), b=_ds(L)),
        lambda L: L.utils.data.StackDataset(),
        lambda L: len(L.utils.data.Sampler()),
        lambda L: L.utils.data.Dataset()[0],
        lambda L: L.utils.data.IterableDataset(),
        lambda L: L.utils.data.BatchSampler(range(3), 2.0, False),
        lambda L: L.utils.data.RandomSampler(range(3), num_samples=2.0),
        lambda L: L.utils.data.WeightedRandomSampler([1.0], 1, replacement="no"),
        lambda L: list(L.utils.data.WeightedRandomSampler([1.0, float("nan")], 1)),
        lambda L: list(L.utils.data.WeightedRandomSampler([0.0, 0.0], 1)),
    ],
)
def test_bad_arguments_raise_as_torch(make):
    got = _both(make)
    assert got[0][0] == "raised"
    assert got[0] == got[1]


def test_multiprocessing_context_and_renamed_attributes_match_torch():
    def run(L):
        D = L.utils.data
        loader = D.DataLoader(_ds(L), num_workers=1, multiprocessing_context="spawn")
        with pytest.warns(FutureWarning, match="renamed to `cumulative_sizes`"):
            sizes = D.ConcatDataset([_ds(L), _ds(L, 3)]).cummulative_sizes
        return type(loader.multiprocessing_context).__name__, sizes

    assert _same(run) == ("tuple", [("str", "SpawnContext"), ("list", [("int", 10), ("int", 13)])])


def test_frozen_loader_attributes_and_lengths_match_torch():
    def run(L):
        D = L.utils.data
        loader = D.DataLoader(_ds(L, 11), batch_size=4)
        try:
            loader.batch_size = 2
        except ValueError as e:
            err = str(e)
        lens = [
            len(D.DataLoader(_ds(L, 11), batch_size=4, drop_last=dl, shuffle=sh))
            for dl in (True, False)
            for sh in (True, False)
        ]
        it = iter(loader)
        return err, lens, len(it), len(D.DataLoader(_ds(L, 11), batch_size=None))

    _same(run)
