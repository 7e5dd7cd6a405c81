"""``staged.utils.data`` against ``torch.utils.data``: the same script under both libraries
gives the same batches, collated structures, dtypes and errors. Shuffled orders are not
compared with torch's (only their properties: permutations, reproducible, fresh each epoch)."""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest
import torch

import staged
from staged.utils import data
from tests.checks import assert_close, both, raises_like_torch

Point = collections.namedtuple("Point", ["x", "y"])


def _same(ours, theirs):
    """Same structure, container types, leaf types, tensor dtypes and values."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, staged.Tensor), type(ours)
        assert_close(ours, theirs, rtol=0, atol=0)
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs)
        for k in theirs:
            _same(ours[k], theirs[k])
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), (ours, theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
    else:
        assert type(ours) is type(theirs) and ours == theirs, (ours, theirs)


def _tensors(ns, n=10):
    return ns.utils.data.TensorDataset(ns.arange(2.0 * n).reshape(n, 2), ns.arange(n))


# --- batching ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "batch_size,drop_last", [(1, False), (3, False), (3, True), (5, True), (20, False), (20, True)]
)
def test_batches_and_len(batch_size, drop_last):
    def run(ns):
        loader = ns.utils.data.DataLoader(_tensors(ns), batch_size=batch_size, drop_last=drop_last)
        return len(loader), list(loader)

    (n, ours), (m, theirs) = both(run)
    assert n == m == len(theirs)
    _same(ours, theirs)


def test_no_batching_converts_samples():
    def run(ns):
        ds = [(np.arange(3) + i, float(i), "s") for i in range(4)]
        return list(ns.utils.data.DataLoader(ds, batch_size=None))

    _same(*both(run))


def test_custom_sampler_batch_sampler_and_collate_fn():
    def run(ns):
        ds, utils = _tensors(ns), ns.utils.data
        by_sampler = list(utils.DataLoader(ds, batch_size=2, sampler=[9, 0, 4]))
        by_batches = list(utils.DataLoader(ds, batch_sampler=[[3, 1], [7]]))
        sums = list(utils.DataLoader(ds, batch_size=4, collate_fn=lambda b: len(b)))
        subset = list(utils.DataLoader(utils.Subset(ds, [5, 6, 7]), batch_size=2))
        return by_sampler, by_batches, sums, subset, len(utils.DataLoader(ds, batch_size=4))

    _same(*both(run))


def test_workers_start_once_per_pass_or_once_when_persistent():
    """Workers run in this process: ``worker_init_fn`` runs for each worker when a pass
    starts them (once for persistent workers), and the batches are those of no workers."""

    def batches(loader):
        return [[x.tolist(), y.tolist()] for x, y in loader]

    ds = _tensors(staged)
    expected = batches(data.DataLoader(ds, batch_size=4))
    started = []
    for persistent in (False, True):
        loader = data.DataLoader(
            ds,
            batch_size=4,
            num_workers=3,
            pin_memory=True,
            persistent_workers=persistent,
            prefetch_factor=4,
            worker_init_fn=started.append,
            timeout=5,
        )
        assert batches(loader) == batches(loader) == expected
    assert started == [0, 1, 2] * 3
    assert data.get_worker_info() is None


@pytest.mark.parametrize(
    "options",
    [
        {"pin_memory": True},
        {"pin_memory": True, "pin_memory_device": "cuda"},
        {"pin_memory": True, "num_workers": 2},
        {"pin_memory": True, "num_workers": 2, "persistent_workers": True},
        {},
    ],
    ids=["pin", "pin-device", "workers", "persistent", "none"],
)
def test_pin_memory_warns_at_each_new_iterator_as_torchs(options):
    """torch warns that no accelerator pins the memory, at each iterator it makes (once for
    persistent workers); makemore's loader (pin_memory=True) warned in torch only."""

    def warned(lib):
        utils = torch.utils.data if lib is torch else data
        loader = utils.DataLoader(utils.TensorDataset(lib.arange(10.0)), batch_size=4, **options)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for _ in range(2):
                list(loader)
        if lib is staged:  # at the user's line
            assert {x.filename for x in w} <= {__file__}, [x.filename for x in w]
        return [(x.category, str(x.message)) for x in w]

    ours, theirs = both(warned)
    assert ours == theirs


# --- collation -----------------------------------------------------------------------------
def _sample(ns, i):
    return {
        "t": ns.full((2, 3), float(i)),
        "i": ns.tensor([i, -i]),
        "np": np.full((2,), i, np.int32),
        "f": i + 0.1,
        "n": i,
        "b": i % 2 == 0,
        "s": f"s{i}",
        "by": b"x",
        "np_scalars": [np.float32(i), np.float64(i), np.int16(i), np.bool_(i)],
        "pt": Point(ns.tensor(float(i)), (i, [i, i + 1])),
        "nested": [{"a": (i, 2.5)}, ()],
    }


def test_default_collate_matches_torch():
    _same(*both(lambda ns: ns.utils.data.default_collate([_sample(ns, i) for i in range(3)])))


def test_default_collate_dtypes():
    out = data.default_collate([_sample(staged, i) for i in range(2)])
    assert out["f"].dtype == staged.float64 and out["n"].dtype == staged.int64
    assert out["b"].dtype == staged.bool and out["np"].dtype == staged.int32
    assert out["f"].tolist() == [0.1, 1.1]  # float64 all the way, not through float32
    assert out["s"] == ["s0", "s1"] and isinstance(out["pt"], Point)
    assert [t.dtype for t in out["np_scalars"]] == [
        staged.float32,
        staged.float64,
        staged.int16,
        staged.bool,
    ]


def test_default_convert_matches_torch():
    _same(
        *both(
            lambda ns: ns.utils.data.default_convert(
                [
                    np.arange(3.0),
                    np.float32(2),
                    (np.int64(1), "a"),
                    {"k": np.ones(2)},
                    Point(np.zeros(1), 3),
                    np.array(["s"]),
                    7,
                ]
            )
        )
    )


@pytest.mark.parametrize(
    "batch,fragment",
    [
        (lambda ns: [ns.ones(2), ns.ones(3)], "stack expects each tensor to be equal size"),
        (lambda ns: [[1, 2], [1]], "each element in list of batch should be of equal size"),
        (lambda ns: [object()], "batch must contain tensors, numpy arrays, numbers"),
        (lambda ns: [np.array(["a"])], "batch must contain tensors, numpy arrays, numbers"),
    ],
    ids=["sizes", "lengths", "object", "strings"],
)
def test_collate_errors(batch, fragment):
    raises_like_torch(lambda ns: ns.utils.data.default_collate(batch(ns)), fragment)


# --- DataLoader options ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs",
    [
        {"shuffle": True, "sampler": [0]},
        {"batch_sampler": [[0]], "batch_size": 2},
        {"batch_sampler": [[0]], "drop_last": True},
        {"batch_size": None, "drop_last": True},
        {"num_workers": -1},
        {"timeout": -1},
        {"prefetch_factor": 2},
        {"persistent_workers": True},
    ],
    ids=str,
)
def test_option_errors(kwargs):
    msg = raises_like_torch(lambda ns: ns.utils.data.DataLoader(_tensors(ns), **kwargs))
    with pytest.raises(ValueError) as theirs:
        torch.utils.data.DataLoader(_tensors(torch), **kwargs)
    assert msg == str(theirs.value)


def test_attributes_frozen_after_init_and_timeout_without_workers():
    raises_like_torch(
        lambda ns: setattr(ns.utils.data.DataLoader(_tensors(ns)), "batch_size", 2),
        "batch_size attribute should not be set",
    )
    raises_like_torch(
        lambda ns: iter(ns.utils.data.DataLoader(_tensors(ns), timeout=1)), "requires timeout == 0"
    )


# --- randomness ----------------------------------------------------------------------------
def _epochs(loader, n=3):
    return [[i for _, y in loader for i in y.tolist()] for _ in range(n)]


def test_shuffle_permutes_reproducibly_and_freshly_each_epoch():
    loader = data.DataLoader(_tensors(staged, 50), batch_size=8, shuffle=True)
    staged.manual_seed(7)
    epochs = _epochs(loader)
    assert all(sorted(e) == list(range(50)) for e in epochs)
    assert len({tuple(e) for e in epochs} | {tuple(range(50))}) == 4
    staged.manual_seed(7)
    assert _epochs(loader) == epochs
    staged.manual_seed(8)
    assert _epochs(loader) != epochs


def test_orders_are_torchs_after_the_same_seed():
    """Shuffled epochs, a generator's epochs, random_split, samplers with replacement and
    WeightedRandomSampler draw torch's numbers in torch's order."""

    def orders(ns):
        ns.manual_seed(7)
        d = ns.utils.data
        out = _epochs(d.DataLoader(_tensors(ns, 50), batch_size=8, shuffle=True))
        g = ns.Generator().manual_seed(3)
        out += _epochs(d.DataLoader(_tensors(ns, 20), batch_size=8, shuffle=True, generator=g), 2)
        out.append([list(s.indices) for s in d.random_split(range(30), [0.5, 0.3, 0.2])])
        out.append(list(d.RandomSampler(range(5), replacement=True, num_samples=40)))
        out.append(list(d.SubsetRandomSampler([5, 9, 11, 2])))
        out.append(list(d.WeightedRandomSampler([1.0, 0.0, 2.0, 7.0], 30)))
        out.append(list(d.WeightedRandomSampler([1.0, 3.0, 2.0, 7.0], 3, replacement=False)))
        return out

    assert orders(staged) == orders(torch)


def test_random_sampler_with_replacement_and_num_samples():
    s = data.RandomSampler(range(5), replacement=True, num_samples=70)
    drawn = list(s)
    assert len(s) == len(drawn) == 70 and set(drawn) == set(range(5))
    s = data.RandomSampler(range(5), num_samples=12)
    drawn = list(s)
    assert len(drawn) == 12 and sorted(drawn[:10]) == sorted(2 * list(range(5)))
    raises_like_torch(
        lambda ns: ns.utils.data.RandomSampler(range(3), replacement=1),
        "replacement should be a boolean value",
    )
    raises_like_torch(
        lambda ns: ns.utils.data.RandomSampler(range(3), num_samples=0),
        "num_samples should be a positive integer value",
    )


def test_weighted_random_sampler_counts():
    weights = [1.0, 0.0, 2.0, 7.0]
    counts = np.bincount(list(data.WeightedRandomSampler(weights, 20000)), minlength=4)
    p = np.array(weights) / 10
    sd = np.sqrt(20000 * p * (1 - p))
    assert counts[1] == 0 and np.all(np.abs(counts - 20000 * p) <= 5 * sd + 1e-9), counts
    drawn = list(data.WeightedRandomSampler([5.0, 0.0, 1.0, 1.0], 3, replacement=False))
    assert sorted(drawn) == [0, 2, 3]
    assert data.WeightedRandomSampler([1, 2], 3).weights.dtype == staged.float64


@pytest.mark.parametrize(
    "weights,n,replacement",
    [
        ([1.0, -1.0], 1, True),
        ([0.0, 0.0], 1, True),
        ([1.0, 2.0], 3, False),
        ([float("nan"), 1.0], 1, True),
    ],
    ids=["negative", "zero-sum", "too-many", "nan"],
)
def test_weighted_random_sampler_errors(weights, n, replacement):
    raises_like_torch(lambda ns: list(ns.utils.data.WeightedRandomSampler(weights, n, replacement)))


def test_weighted_random_sampler_argument_errors():
    raises_like_torch(lambda ns: ns.utils.data.WeightedRandomSampler([[1.0]], 1), "1d sequence")
    raises_like_torch(
        lambda ns: ns.utils.data.WeightedRandomSampler([1.0], 0),
        "num_samples should be a positive integer",
    )


@pytest.mark.parametrize(
    "lengths", [[3, 7], [0.3, 0.3, 0.4], [0.5, 0.5], [0.34, 0.33, 0.33]], ids=str
)
def test_random_split(lengths):
    ours = data.random_split(range(10, 20), lengths)
    theirs = torch.utils.data.random_split(range(10, 20), lengths)
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    items = [x for s in ours for x in s]
    assert sorted(items) == list(range(10, 20))
    assert all(isinstance(s, data.Subset) for s in ours)


def test_random_split_errors_and_warning():
    raises_like_torch(
        lambda ns: ns.utils.data.random_split(range(10), [3, 3]),
        "Sum of input lengths does not equal",
    )
    raises_like_torch(
        lambda ns: ns.utils.data.random_split(range(10), [1.5, -0.5]),
        "Fraction at index 0 is not between 0 and 1",
    )
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        data.random_split(range(2), [1.0, 0.0])


# --- datasets and samplers -------------------------------------------------------------------
def test_datasets_match_torch():
    def run(ns):
        utils = ns.utils.data
        a, b = _tensors(ns, 3), _tensors(ns, 4)
        cat = a + b
        stacked = utils.StackDataset(a, ns.arange(3))
        named = utils.StackDataset(x=ns.arange(3), y=[7, 8, 9])
        return (
            len(cat),
            cat.cumulative_sizes,
            cat[3],
            cat[-1],
            len(utils.Subset(b, [0, 2])),
            utils.Subset(b, [3, 1])[1],
            stacked[2],
            named[0],
            len(named),
        )

    _same(*both(run))


def test_dataset_errors():
    raises_like_torch(
        lambda ns: ns.utils.data.TensorDataset(ns.ones(3), ns.ones(4)),
        "Size mismatch between tensors",
    )
    raises_like_torch(lambda ns: ns.utils.data.Dataset()[0], "should implement __getitem__")
    raises_like_torch(lambda ns: ns.utils.data.ConcatDataset([]), "should not be an empty")
    raises_like_torch(
        lambda ns: (_tensors(ns, 3) + _tensors(ns, 2))[-6],
        "absolute value of index should not exceed dataset length",
    )
    raises_like_torch(lambda ns: len(ns.utils.data.Sampler()), "has no len()")


def test_batch_sampler_matches_torch():
    def run(ns):
        s = ns.utils.data
        return [
            (
                list(s.BatchSampler(s.SequentialSampler(range(7)), 3, d)),
                len(s.BatchSampler(range(7), 3, d)),
            )
            for d in (False, True)
        ]

    _same(*both(run))
    raises_like_torch(
        lambda ns: ns.utils.data.BatchSampler(range(3), 0, False),
        "batch_size should be a positive integer value",
    )
    raises_like_torch(
        lambda ns: ns.utils.data.BatchSampler(range(3), 2, None),
        "drop_last should be a boolean value",
    )


def test_user_subclasses_of_generic_bases():
    class Squares(data.Dataset[int]):
        def __getitem__(self, i):
            return i * i

        def __len__(self):
            return 4

    class Reversed(data.Sampler[int]):
        def __iter__(self):
            return iter(range(3, -1, -1))

        def __len__(self):
            return 4

    loader = data.DataLoader(Squares(), batch_size=3, sampler=Reversed())
    assert [b.tolist() for b in loader] == [[9, 4, 1], [0]] and len(loader) == 2


# --- IterableDataset ---------------------------------------------------------------------------
def _stream(ns, n=7):
    class Stream(ns.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(n))

        def __len__(self):
            return n

    return Stream()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_size": 3},
        {"batch_size": 3, "drop_last": True},
        {"batch_size": None},
        {"batch_size": 7},
    ],
    ids=str,
)
def test_iterable_dataset(kwargs):
    def run(ns):
        loader = ns.utils.data.DataLoader(_stream(ns), **kwargs)
        return len(loader), list(loader), list(loader)

    _same(*both(run))


def test_iterable_dataset_errors_chain_and_len_warning():
    raises_like_torch(
        lambda ns: ns.utils.data.DataLoader(_stream(ns), shuffle=True),
        "expected unspecified shuffle option",
    )
    raises_like_torch(
        lambda ns: ns.utils.data.DataLoader(_stream(ns), sampler=[0]),
        "expected unspecified sampler option",
    )
    _same(
        *both(
            lambda ns: list(ns.utils.data.DataLoader(_stream(ns, 2) + _stream(ns, 3), batch_size=2))
        )
    )
    raises_like_torch(
        lambda ns: ns.utils.data.ConcatDataset([_stream(ns)]),
        "ConcatDataset does not support IterableDataset",
    )

    class Liar(data.IterableDataset):
        def __iter__(self):
            return iter(range(5))

        def __len__(self):
            return 2

    loader = data.DataLoader(Liar(), batch_size=None)
    assert len(loader) == 2
    with pytest.warns(UserWarning, match="was reported to be 2"):
        assert list(loader) == [0, 1, 2, 3, 4]


def test_iterable_dataset_with_workers_yields_it_once_per_worker_as_torch():
    """Not sharded (no ``get_worker_info()`` in its ``__iter__``), each worker yields every
    sample: torch's duplicates, interleaved."""
    _same(
        *both(
            lambda ns: list(ns.utils.data.DataLoader(_stream(ns), batch_size=None, num_workers=2))
        )
    )


# --- training ----------------------------------------------------------------------------------
def _train(ns):
    """An ordinary PyTorch training script, unchanged but for the module it is given."""
    ns.manual_seed(0)
    x = ns.randn(96, 3)
    y = x @ ns.tensor([[1.5], [-2.0], [0.5]]) + 0.3
    loader = ns.utils.data.DataLoader(
        ns.utils.data.TensorDataset(x, y), batch_size=16, shuffle=True
    )
    model = ns.nn.Linear(3, 1)
    opt = ns.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(4):
        total = 0.0
        for xb, yb in loader:
            opt.zero_grad()
            loss = ns.nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(xb)
        losses.append(total / len(loader.dataset))
    return losses


def test_training_loop_reduces_loss():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours, theirs = both(_train)
    for losses in (ours, theirs):
        assert losses[-1] < 0.05 * losses[0], losses
