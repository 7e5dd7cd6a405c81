"""Op database entries for indexing and joining: __getitem__ (basic and advanced),
__setitem__, gather, scatter_add, scatter, index_put, index_select, take_along_dim, masked_fill, nonzero,
unique, cat, stack, split, chunk."""

from __future__ import annotations

import numpy as np
import torch

import staged
from tests.ops.opinfo import OpInfo, Sample, Skip, arr, index

DTYPES = ("float32", "float64", "complex64", "int64")
MASK = Skip(
    "capture",
    "a boolean mask gives a data-dependent shape (its nonzero()), which "
    "a static-shape graph cannot hold; PyTorch's export rejects it too",
)

# basic index expressions, by sample number
BASIC = [
    (lambda: (0,)),
    (lambda: (slice(None), -1)),
    (lambda: (slice(1, None, 2),)),
    (lambda: (Ellipsis, slice(-3, -1))),
    (lambda: (None, 1, slice(None), None)),
    (lambda: (slice(None), slice(0, 0))),
    (lambda: (-2, Ellipsis, 3)),
]


def _basic_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4, 5))
    return [Sample((x, k)) for k in range(len(BASIC))]


def _basic(x, k):
    return x[BASIC[k]()]


def _advanced_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4, 5))
    return [
        Sample((x, index(rng, 3, (2,))), {"form": "i"}),
        Sample((x, np.asarray([-1, 0, 2], np.int64)), {"form": ":,i"}),
        Sample((x, index(rng, 3, (2, 2)), index(rng, 4, (2,))), {"form": "i,j"}),
        Sample((x, index(rng, 3, (3,)), index(rng, 5, (1,))), {"form": "i,:,j"}),
        Sample((x, index(rng, 4, (2, 3))), {"form": "...,i,:"}),
        Sample((x, np.asarray(1, np.int64)), {"form": "i"}),
        Sample((x, np.zeros(0, np.int64)), {"form": ":,i"}),
    ]


FORMS = {
    "i": lambda x, i: x[i],
    ":,i": lambda x, i: x[:, i],
    "i,j": lambda x, i, j: x[i, j],
    "i,:,j": lambda x, i, j: x[i, :, j],
    "...,i,:": lambda x, i: x[..., i, :],
}


def _advanced(x, *idx, form):
    return FORMS[form](x, *idx)


def _mask_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [Sample((x, arr(rng, "bool", (3, 4)))), Sample((x, arr(rng, "bool", (3,))))]


def _setitem(x, *rest, key):
    """``x.clone()`` with ``y[key] = value`` (a differentiable function of x and value)."""
    *idx, value = rest
    y = x.clone()
    k = {
        "slice": lambda: (slice(1, None), 0),
        "int": lambda: 1,
        "step": lambda: (Ellipsis, slice(None, None, 2)),
        "adv": lambda: (idx[0], slice(None)),
        "adv2": lambda: (idx[0], idx[1]),
        "mask": lambda: idx[0],
    }[key]()
    y[k] = value
    return y


def _setitem_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, arr(rng, dtype, (2,))), {"key": "slice"}),
        Sample((x, arr(rng, dtype, (4,))), {"key": "int"}),
        Sample((x, 2.5 if dtype != "int64" else 2), {"key": "int"}),
        Sample((x, arr(rng, dtype, (3, 1))), {"key": "step"}),
        Sample((x, np.asarray([2, 0], np.int64), arr(rng, dtype, (2, 4))), {"key": "adv"}),
        Sample(
            (x, np.asarray([2, 0], np.int64), np.asarray([1, 3], np.int64), arr(rng, dtype, ())),
            {"key": "adv2"},
        ),
        Sample((x, arr(rng, "bool", (3, 4)), arr(rng, dtype, ())), {"key": "mask"}),
    ]


def _gather_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, 1, index(rng, 4, (3, 2)))),
        Sample((x, 0, index(rng, 3, (5, 4)))),
        Sample((x, -1, index(rng, 4, (2, 3)))),
        Sample((arr(rng, dtype, (2, 3, 4)), 1, index(rng, 3, (2, 2, 4)))),
    ]


def _scatter_add_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, 1, index(rng, 4, (3, 6)), arr(rng, dtype, (3, 6)))),
        Sample((x, 0, index(rng, 3, (5, 4)), arr(rng, dtype, (5, 4)))),
        Sample((x, 0, index(rng, 3, (2, 2)), arr(rng, dtype, (2, 2)))),
    ]


def _scatter_reduce_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    with_zeros = arr(rng, dtype, (5, 4))
    with_zeros[[0, 2, 3], [1, 1, 2]] = 0  # prod's exact paths: one and two zeros in a place
    return [
        Sample((x, 0, index(rng, 3, (5, 4)), arr(rng, dtype, (5, 4)), reduce), {"include_self": s})
        for reduce in ("sum", "prod", "mean", "amax", "amin")
        for s in (True, False)
    ] + [
        Sample((x, 1, index(rng, 4, (3, 6)), arr(rng, dtype, (3, 6)), "amax")),
        Sample((x, 0, np.asarray([[0, 1, 0, 2]] * 5, np.int64), with_zeros, "prod")),
        Sample(
            (
                arr(rng, dtype, (2, 3, 4)),
                -1,
                index(rng, 4, (2, 2, 3)),
                arr(rng, dtype, (2, 2, 3)),
                "mean",
            )
        ),
    ]


def _index_add_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, 1, index(rng, 4, (6,)), arr(rng, dtype, (3, 6)))),
        Sample((x, 0, index(rng, 3, (2,)), arr(rng, dtype, (2, 4))), {"alpha": 2}),
        Sample((arr(rng, dtype, (5,)), -1, index(rng, 5, (3,)), arr(rng, dtype, (3,)))),
    ]


def _unique_rows(rng, n, shape):
    """An index of ``shape`` whose entries along dim 0 are distinct in [0, n) (scatter's
    result and gradients are then free of which-write-wins ties)."""
    cols = [rng.permutation(n)[: shape[0]] for _ in range(int(np.prod(shape[1:])))]
    return np.asarray(np.stack(cols, -1).reshape(shape), np.int64)


def _scatter_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    value = 2.5 if dtype != "int64" else 2
    return [
        Sample((x, 0, _unique_rows(rng, 3, (2, 4)), arr(rng, dtype, (2, 4)))),
        Sample((x, 0, _unique_rows(rng, 3, (3, 2)), arr(rng, dtype, (3, 2)))),
        Sample((x, 1, _unique_rows(rng, 4, (4, 3)).T.copy(), arr(rng, dtype, (3, 4)))),
        Sample((x, 0, _unique_rows(rng, 3, (2, 4)), value)),
        Sample((x, 0, index(rng, 3, (5, 4)), arr(rng, dtype, (5, 4))), {"reduce": "add"}),
        Sample(
            (
                arr(rng, dtype, (2, 3, 4)),
                -1,
                _unique_rows(rng, 4, (2, 2, 3)).transpose(1, 2, 0).copy(),
                arr(rng, dtype, (2, 3, 2)),
            )
        ),
    ]


def _index_put(x, *rest, accumulate=False):
    """``x.index_put(indices, values, accumulate)`` with the index tensors given one by one."""
    *idx, values = rest
    return x.index_put(tuple(idx), values, accumulate)


def _index_put_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, np.asarray([2, 0], np.int64), arr(rng, dtype, (2, 4)))),
        Sample(
            (
                x,
                np.asarray([2, 0, -1], np.int64),
                np.asarray([1, 3, 0], np.int64),
                arr(rng, dtype, ()),
            )
        ),
        Sample(
            (x, index(rng, 3, (4,)), index(rng, 4, (4,)), arr(rng, dtype, (4,))),
            {"accumulate": True},
        ),
        Sample((x, index(rng, 3, (5,)), arr(rng, dtype, (4,))), {"accumulate": True}),
    ]


# (a bool mask as index_put's index has a data-dependent shape: tests/ops/test_scatter_index_put)


def _index_select_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, 0, index(rng, 3, (5,)))),
        Sample((x, -1, index(rng, 4, (2,)))),
        Sample((x, 1, np.zeros(0, np.int64))),
        Sample((arr(rng, dtype, ()), 0, np.zeros((1,), np.int64))),
    ]


def _take_along_dim_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, index(rng, 4, (3, 2)), 1)),
        Sample((x, index(rng, 3, (2, 1)), 0)),
        Sample((x, index(rng, 12, (5,)))),
    ]


def _masked_fill_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    value = 0.5 if dtype != "int64" else 7
    return [
        Sample((x, arr(rng, "bool", (3, 4)), value)),
        Sample((x, arr(rng, "bool", (4,)), value)),
        Sample((arr(rng, dtype, (0, 4)), arr(rng, "bool", (4,)), value)),
    ]


def _sparse(rng, dtype, shape):
    """Small integers (many zeros and repeats) in ``dtype``."""
    return np.asarray(rng.integers(-1, 2, shape), dtype)


def _nonzero_samples(dtype, rng):
    return [
        Sample((_sparse(rng, dtype, (3, 4)),)),
        Sample((_sparse(rng, dtype, (3, 4)),), {"as_tuple": True}),
        Sample((np.asarray(1, dtype),)),
    ]


def _nonzero_static_samples(dtype, rng):
    x = _sparse(rng, dtype, (3, 4))
    return [
        Sample((x,), {"size": 8}),
        Sample((x,), {"size": 2, "fill_value": 5}),
        Sample((np.asarray(1, dtype),), {"size": 2}),
    ]


def _unique_samples(dtype, rng):
    x = _sparse(rng, dtype, (3, 4))
    return [
        Sample((x,)),
        Sample((x,), {"return_inverse": True, "return_counts": True}),
        Sample((x[[0, 1, 0]],), {"dim": 0, "return_inverse": True}),
    ]


def _cat_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample(([a(2, 3), a(1, 3), a(4, 3)],)),
        Sample(([a(2, 3), a(2, 1)], 1)),
        Sample(([a(2, 3), a(2, 0), a(2, 2)], -1)),
        Sample(([a(2, 3)],)),
        Sample(([a(3), a(0)],)),
    ]


def _stack_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample(([a(2, 3), a(2, 3)],)),
        Sample(([a(2, 3), a(2, 3), a(2, 3)], 2)),
        Sample(([a(), a()],)),
    ]


def _split_samples(dtype, rng):
    x = arr(rng, dtype, (5, 4))
    return [Sample((x, 2)), Sample((x, [1, 3], 1)), Sample((x, [0, 5])), Sample((x, 4, -1))]


def _chunk_samples(dtype, rng):
    x = arr(rng, dtype, (5, 4))
    return [Sample((x, 2)), Sample((x, 3, 1)), Sample((x, 5, 0))]


ENTRIES = [
    OpInfo("getitem_basic", _basic, _basic, _basic_samples, dtypes=DTYPES),
    OpInfo("getitem_advanced", _advanced, _advanced, _advanced_samples, dtypes=DTYPES),
    OpInfo(
        "getitem_mask",
        lambda x, m: x[m],
        lambda x, m: x[m],
        _mask_samples,
        dtypes=DTYPES,
        skips=[MASK],
    ),
    OpInfo("setitem", _setitem, _setitem, _setitem_samples, dtypes=DTYPES),
    OpInfo("gather", staged.gather, torch.gather, _gather_samples, dtypes=DTYPES),
    OpInfo(
        "scatter_add", staged.scatter_add, torch.scatter_add, _scatter_add_samples, dtypes=DTYPES
    ),
    OpInfo("scatter", staged.scatter, torch.scatter, _scatter_samples, dtypes=DTYPES),
    OpInfo(
        "scatter_reduce",
        staged.scatter_reduce,
        torch.scatter_reduce,
        _scatter_reduce_samples,
        dtypes=("float32", "float64", "int64"),
    ),
    OpInfo("index_add", staged.index_add, torch.index_add, _index_add_samples, dtypes=DTYPES),
    OpInfo("index_put", _index_put, _index_put, _index_put_samples, dtypes=DTYPES),
    OpInfo(
        "index_select",
        staged.index_select,
        torch.index_select,
        _index_select_samples,
        dtypes=DTYPES,
    ),
    OpInfo(
        "take_along_dim",
        staged.take_along_dim,
        torch.take_along_dim,
        _take_along_dim_samples,
        dtypes=DTYPES,
    ),
    OpInfo(
        "masked_fill", staged.masked_fill, torch.masked_fill, _masked_fill_samples, dtypes=DTYPES
    ),
    *(
        OpInfo(
            n,
            getattr(staged, n),
            getattr(torch, n),
            samples,
            differentiable=False,
            dtypes=("float32", "int64"),
            skips=[
                Skip(
                    "capture",
                    f"{n}() gives a data-dependent "
                    "shape, which a static-shape graph cannot "
                    "hold: eager only",
                )
            ],
        )
        for n, samples in (("nonzero", _nonzero_samples), ("unique", _unique_samples))
    ),
    OpInfo(
        "nonzero_static",
        staged.nonzero_static,
        torch.nonzero_static,
        _nonzero_static_samples,
        dtypes=DTYPES,
        differentiable=False,
    ),
    OpInfo("cat", staged.cat, torch.cat, _cat_samples, dtypes=DTYPES),
    OpInfo("stack", staged.stack, torch.stack, _stack_samples, dtypes=DTYPES),
    OpInfo("split", staged.split, torch.split, _split_samples, dtypes=DTYPES),
    OpInfo("chunk", staged.chunk, torch.chunk, _chunk_samples, dtypes=DTYPES),
]
