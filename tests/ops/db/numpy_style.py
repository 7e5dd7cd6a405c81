"""Op database entries for torch's NumPy-style names (the compatibility issue): elementwise
composites, reductions, stacking and grids, ``take``/``select``/``masked_select``."""

from __future__ import annotations

import numpy as np
import torch

import staged
from tests.ops.db.core import FLOATS, INTS, _many, binary, unary
from tests.ops.opinfo import OpInfo, Sample, Skip, arr

HALF = ("float16",) + FLOATS
DATA_DEPENDENT = Skip(
    "capture", "gives a data-dependent shape, which a static-shape graph cannot hold: eager only"
)
PYTHON_BOOL = Skip("capture", "returns a Python bool, not a tensor: nothing to capture")


def _named(name, samples, dtypes=FLOATS, **kw):
    return OpInfo(name, getattr(staged, name), getattr(torch, name), samples, dtypes=dtypes, **kw)


def _with_nan(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    if np.dtype(dtype).kind == "f":
        x[0, 1] = x[2, 3] = np.nan
    return x


def _pairs(dtype, rng):
    x = arr(rng, dtype, (2, 3))
    near = np.asarray(x + np.asarray(1e-9, dtype), dtype)
    far = np.asarray(x + np.asarray(0.5, dtype), dtype)
    return [
        Sample((x, near)),
        Sample((x, far)),
        Sample((x, near), {"rtol": 0.0, "atol": 0.0}),
        Sample((_with_nan(dtype, rng), _with_nan(dtype, rng)), {"equal_nan": True}),
    ]


def _list_samples(*shape_lists):
    def samples(dtype, rng):
        return [Sample(([arr(rng, dtype, s) for s in shapes],)) for shapes in shape_lists]

    return samples


def _vararg_samples(*shape_lists, **kwargs):
    def samples(dtype, rng):
        return [Sample(tuple(arr(rng, dtype, s) for s in shapes), kwargs) for shapes in shape_lists]

    return samples


def _take_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, np.array([[0, 11], [-1, -12]], np.int64))),
        Sample((x, np.array(5, np.int64))),
        Sample((arr(rng, dtype, (5,)), np.zeros((0,), np.int64))),
    ]


def _masked_select_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [Sample((x, x > 0)), Sample((x, np.array([True, False, True, True])))]


def _fmax_samples(dtype, rng):
    x, y = _with_nan(dtype, rng), arr(rng, dtype, (3, 4))
    y[0, 1] = np.nan  # NaN on both sides too
    return [Sample((x, y)), Sample((arr(rng, dtype, (3, 1)), arr(rng, dtype, (4,))))]


def _xlogy_samples(dtype, rng):
    x = arr(rng, dtype, (2, 3), 0.5, 2.0)
    x[0, 0] = 0
    y = arr(rng, dtype, (2, 3), 0.5, 2.0)
    return [Sample((x, y)), Sample((x, 1.5)), Sample((2.0, y))]


def _tensordot_samples(dtype, rng):
    a, b = arr(rng, dtype, (2, 3, 4)), arr(rng, dtype, (4, 3, 5))
    return [
        Sample((a, b), dict(dims=([1, 2], [1, 0]))),
        Sample((a, arr(rng, dtype, (3, 4, 2))), dict(dims=2)),
        Sample((arr(rng, dtype, (3,)), arr(rng, dtype, (2,))), dict(dims=0)),
    ]


def _block_diag_samples(dtype, rng):
    return [
        Sample((arr(rng, dtype, (2, 3)), arr(rng, dtype, (3,)), arr(rng, dtype, ()))),
        Sample((arr(rng, dtype, (1, 2)),)),
    ]


def _index_fill_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, 1, np.array([0, 2]), -1.5)),
        Sample((x, 0, np.array(1), 2.0)),
        Sample((x, -1, np.zeros((0,), np.int64), 0.0)),
    ]


ENTRIES = [
    # elementwise
    *(_named(n, unary(), dtypes=HALF) for n in ("deg2rad", "rad2deg")),
    _named("frac", unary(low=-3.0, high=3.0, kink=0.1), dtypes=HALF),
    _named("logit", unary(low=0.1, high=0.9), dtypes=HALF),
    OpInfo(
        "logit_eps",
        lambda x: staged.logit(x, eps=0.2),
        lambda x: torch.logit(x, eps=0.2),
        unary(low=0.25, high=0.75),
    ),
    *(_named(n, binary(scalar=None)) for n in ("logaddexp", "logaddexp2")),
    _named("xlogy", _xlogy_samples),
    _named("sinc", unary(low=-3.0, high=3.0), dtypes=HALF),
    # torch.special's own
    *(
        OpInfo(n, getattr(staged.special, n), getattr(torch.special, n), samples)
        for n, samples in (("ndtr", unary(low=-6.0, high=4.0)), ("xlog1py", _xlogy_samples))
    ),
    *(
        _named(
            n,
            _fmax_samples,
            skips=[
                Skip(c, "the NaN entries of the sample have no finite difference", ("float64",))
                for c in ("fd", "gradgrad")
            ],
        )
        for n in ("fmax", "fmin")
    ),
    _named("positive", unary(), dtypes=INTS),
    _named("float_power", binary(low=0.5, high=2.0, scalar=2.5)),
    _named("isclose", _pairs, dtypes=INTS, differentiable=False),
    _named("allclose", _pairs, differentiable=False, skips=[PYTHON_BOOL]),
    # reductions
    _named(
        "count_nonzero",
        _many(((3, 4),), ((3, 4), 1), ((2, 3, 4), (0, 2))),
        dtypes=INTS,
        differentiable=False,
    ),
    *(
        _named(n, _many(((3, 4),), ((3, 4), 1), ((2, 3, 4), (0, 2), True)), dtypes=INTS)
        for n in ("any", "all")
    ),
    *(
        _named(n, lambda d, rng: [Sample((_with_nan(d, rng),)), Sample((_with_nan(d, rng), 1))])
        for n in ("nansum", "nanmean")
    ),
    _named("trace", _many(((3, 4),), ((4, 4),)), dtypes=INTS),
    *(
        _named(n, _many(((3, 4),), ((3, 4), 1), ((2, 3, 4), (0, 2), True)))
        for n in ("var_mean", "std_mean")
    ),
    # shapes
    _named(
        "movedim",
        _many(((2, 3, 4), 0, -1), ((2, 3, 4), (0, 1), (2, 0)), ((2, 3), 1, 1)),
        dtypes=INTS,
    ),
    _named("tile", _many(((2, 3), (2,)), ((2, 3), (2, 1, 2)), ((), (3,))), dtypes=INTS),
    _named("select", _many(((3, 4), 0, 2), ((3, 4), -1, -1), ((2, 3, 4), 1, 0)), dtypes=INTS),
    *(
        _named(n, _list_samples([(3,), (3,)], [(2, 3), (2, 3)], [(), ()]), dtypes=INTS)
        for n in ("hstack", "vstack", "dstack")
    ),
    _named("column_stack", _list_samples([(3,), (3, 2)], [(), ()]), dtypes=INTS),
    *(
        _named(n, _vararg_samples([()], [(3,)], [(2, 3)], [(2, 3, 4)]), dtypes=INTS)
        for n in ("atleast_1d", "atleast_2d", "atleast_3d")
    ),
    _named("meshgrid", _vararg_samples([(2,), (3,)], [(2,), (), (4,)], indexing="ij")),
    OpInfo(
        "meshgrid_xy",
        lambda *ts: staged.meshgrid(*ts, indexing="xy"),
        lambda *ts: torch.meshgrid(*ts, indexing="xy"),
        _vararg_samples([(2,), (3,)], [(2,), (3,), (4,)]),
    ),
    _named("broadcast_tensors", _vararg_samples([(3, 1), (4,)], [(), (2, 3)]), dtypes=INTS),
    # linear algebra and products
    _named("tensordot", _tensordot_samples, dtypes=INTS),
    _named("kron", _vararg_samples([(2, 3), (2, 2)], [(3,), (2, 1, 2)]), dtypes=INTS),
    _named(
        "cross",
        lambda d, rng: [
            Sample((arr(rng, d, (4, 3)), arr(rng, d, (4, 3))), dict(dim=1)),
            Sample((arr(rng, d, (3, 2)), arr(rng, d, (3, 1))), dict(dim=0)),
        ],
        dtypes=INTS,
    ),
    _named(
        "cdist",
        lambda d, rng: [
            Sample((arr(rng, d, (4, 3)), arr(rng, d, (5, 3)))),
            Sample((arr(rng, d, (2, 4, 3)), arr(rng, d, (2, 2, 3))), dict(p=1.0)),
        ],
        skips=[Skip("jvp", "torch 2.13 has no forward-mode rule for cdist: no oracle")],
    ),
    _named("cartesian_prod", _vararg_samples([(3,), (2,)], [(2,), (2,), (3,)]), dtypes=INTS),
    _named("block_diag", _block_diag_samples, dtypes=INTS),
    _named(
        "heaviside",
        lambda d, rng: [Sample((np.array([-1.0, 0.0, 2.0, 0.0], d), arr(rng, d, (4,))))],
        differentiable=False,
    ),
    # indexing
    _named("index_fill", _index_fill_samples, dtypes=INTS),
    OpInfo(
        "index_fill_",
        lambda x, *a: x.clone().index_fill_(*a),
        lambda x, *a: x.clone().index_fill_(*a),
        _index_fill_samples,
    ),
    _named("take", _take_samples, dtypes=INTS),
    _named("masked_select", _masked_select_samples, dtypes=INTS, skips=[DATA_DEPENDENT]),
]
