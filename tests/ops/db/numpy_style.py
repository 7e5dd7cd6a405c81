"""Op database entries for torch's NumPy-style names (the compatibility issue): elementwise
composites, reductions, stacking and grids, ``take``/``select``/``masked_select``."""

from __future__ import annotations

import numpy as np
import torch

import staged
from tests.ops.db.core import FLOATS, INTS, _many, binary, unary
from tests.ops.db.indexing import _sparse
from tests.ops.db.math import _LAPACK_VS_ELIMINATION, _spd, _square_samples, _well_conditioned
from tests.ops.opinfo import OpInfo, Sample, Skip, arr, distinct

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


def _method(name, samples, label=None, **kw):
    """An entry for ``Tensor.<name>`` (torch has no function of that name)."""
    return OpInfo(
        label or name,
        lambda x, *a, **k: getattr(x, name)(*a, **k),
        lambda x, *a, **k: getattr(x, name)(*a, **k),
        samples,
        **kw,
    )


def _predicate(name, samples, dtypes=("float32", "int64")):
    """``is_nonzero``, ``is_same_size``...: a Python bool about a tensor."""
    return _named(name, samples, dtypes=dtypes, differentiable=False, skips=[PYTHON_BOOL])


COMPLEX = ("complex64",)
READS_INDICES = Skip(
    "capture", "reads its index tensor's values (the output's shape): a graph has none"
)


def _tensor_split_samples(dtype, rng):
    x = arr(rng, dtype, (3, 7))
    return [
        Sample((x, 3, 1)),
        Sample((x, [1, 4]), {"dim": -1}),
        Sample((arr(rng, dtype, (5, 2)), [-2, 0, 4, 9])),
        Sample((arr(rng, dtype, (2, 0)), 2, 1)),
    ]


def _tensor_split_tensor_samples(dtype, rng):
    x = arr(rng, dtype, (6, 2))
    return [Sample((x, np.array([1, 4]))), Sample((x, np.array(4)))]


def _rot90_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x,)),
        Sample((x, 2)),
        Sample((x, 3, (1, 0))),
        Sample((arr(rng, dtype, (2, 3, 4)), -1, [2, 0])),
        Sample((x, 4)),
    ]


def _sum_to_size_samples(dtype, rng):
    x = arr(rng, dtype, (2, 3, 4))
    return [Sample((x, 4)), Sample((x, (3, 1))), Sample((x, 2, 1, 4)), Sample((x, 2, 3, 4))]


def _signs(dtype, rng):
    """Zeros of both signs and infinities among random values (no NaN: a compiled graph
    does not read its sign, ``signbit``'s docstring; tests/ops/test_round24_ops.py checks
    it eagerly)."""
    x = arr(rng, dtype, (3, 4))
    if np.dtype(dtype).kind == "f":
        x[0, :4] = [-0.0, 0.0, -np.inf, np.inf]
    return x


def _magnitudes(dtype, rng):
    return unary(kink=0.1)(dtype, rng)[0].args[0]  # no zeros: |x| has a kink there


def _copysign_samples(dtype, rng):
    x = _magnitudes(dtype, rng)
    return [
        Sample((x, arr(rng, dtype, (3, 4)))),
        Sample((x, arr(rng, dtype, (4,)))),
        Sample((x, -0.0)),
        Sample((arr(rng, dtype, (), 0.5, 2.0), arr(rng, dtype, (2, 2)))),
    ]


def _isin_samples(dtype, rng):
    x = _sparse(rng, dtype, (3, 4)) * 2
    test = np.asarray([0, 2, 5], dtype)
    return [
        Sample((x, test)),
        Sample((x, test), {"invert": True}),
        Sample((x, np.asarray(-2, dtype))),
        Sample((x[0], test[:0])),
    ]


def _aminmax_samples(dtype, rng):
    x = distinct(rng, dtype, (3, 4))
    return [
        Sample((x,)),
        Sample((x,), {"dim": 1}),
        Sample((x,), {"dim": 0, "keepdim": True}),
        Sample((x,), {"keepdim": True}),
        Sample((np.asarray([[1.0, 3.0, 3.0], [2.0, 2.0, 0.5]], dtype),), {"dim": 1}),
    ]


def _cov_samples(dtype, rng):
    x = arr(rng, dtype, (3, 5))
    real = np.result_type(np.zeros((), dtype).real, np.float32)  # aweights are real floats
    fw, aw = np.array([1, 2, 0, 3, 1]), arr(rng, real, (5,), 0.5, 2.0)
    return [
        Sample((x,)),
        Sample((arr(rng, dtype, (6,)),), {"correction": 0}),
        Sample((x,), {"fweights": fw, "aweights": aw}),
        Sample((x,), {"aweights": aw, "correction": 2}),
        Sample((x,), {"fweights": fw}),
    ]


def _gradient_samples(dtype, rng):
    y = arr(rng, dtype, (3, 5))
    return [
        Sample((y,)),
        Sample((y,), {"spacing": 0.5, "dim": 1, "edge_order": 2}),
        Sample((y,), {"spacing": [2.0, 3.0]}),
        Sample((arr(rng, dtype, (4,)),), {"dim": 0, "edge_order": 2}),
    ]


def _trapezoid_samples(dtype, rng):
    y = arr(rng, dtype, (3, 5))
    return [
        Sample((y,)),
        Sample((y,), {"dx": 0.5, "dim": 0}),
        Sample((y, np.sort(arr(rng, dtype, (5,))))),
        Sample((y, arr(rng, dtype, (3, 5)))),
        Sample((y, np.sort(arr(rng, dtype, (3,)))), {"dim": 0}),
        Sample((arr(rng, dtype, (2, 0)),)),
    ]


def _addmv_samples(dtype, rng):
    m, v = arr(rng, dtype, (3, 2)), arr(rng, dtype, (2,))
    return [
        Sample((arr(rng, dtype, (3,)), m, v)),
        Sample((arr(rng, dtype, ()), m, v), {"beta": 2, "alpha": -3}),
        Sample((arr(rng, dtype, (1,)), m, v), {"beta": 0}),
    ]


def _addr_samples(dtype, rng):
    u, v = arr(rng, dtype, (3,)), arr(rng, dtype, (2,))
    return [
        Sample((arr(rng, dtype, (3, 2)), u, v)),
        Sample((arr(rng, dtype, (2,)), u, v), {"beta": 2, "alpha": -1}),
        Sample((arr(rng, dtype, ()), u, arr(rng, dtype, (0,)))),
    ]


def _cholesky_samples(dtype, rng):
    return [Sample((_spd(rng, dtype, (3, 3)),)), Sample((_spd(rng, dtype, (2, 4, 4)), True))]


CHOLESKY_JVP = Skip(
    "jvp",
    "torch's tangent is L Phi(L^-1 dA L^-T) of the whole dA, its gradient that of the "
    "symmetric part; staged's both follow the symmetric part (linalg_cholesky's entry)",
)


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
    _named("logaddexp", binary(scalar=None), dtypes=FLOATS + ("complex64", "complex128")),
    _named("logaddexp2", binary(scalar=None)),
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
        "combinations",
        lambda d, rng: [
            Sample((arr(rng, d, (4,)),)),
            Sample((arr(rng, d, (3,)), 3), dict(with_replacement=True)),
            Sample((arr(rng, d, (3,)),), dict(r=1)),
            Sample((arr(rng, d, (2,)), 3)),  # more than there are entries: (0, 3)
        ],
        dtypes=INTS,
    ),
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
    # splitting and reshaping
    _named("unbind", _many(((3, 4),), ((3, 4), 1), ((2, 0, 3), -1)), dtypes=INTS),
    _named("tensor_split", _tensor_split_samples, dtypes=INTS),
    OpInfo(
        "tensor_split_tensor",
        staged.tensor_split,
        torch.tensor_split,
        _tensor_split_tensor_samples,
        skips=[
            READS_INDICES,
            Skip(
                "jvp",
                "torch.func.jvp cannot run torch 2.13's tensor_split with a tensor of indices "
                "(it reads their data: 'Cannot access data pointer of Tensor that doesn't "
                "have storage'): no oracle",
            ),
        ],
    ),
    _named("hsplit", _many(((6,), 3), ((4, 6), 2), ((4, 6), [1, 5]))),
    _named("vsplit", _many(((4, 3), 2), ((4, 3), [1]))),
    _named("dsplit", _many(((2, 3, 4), 2), ((2, 3, 4), [1, 3]))),
    _named("ravel", _many(((3, 4),), ((),), ((2, 0),)), dtypes=INTS),
    _method(
        "reshape_as",
        lambda d, rng: [Sample((arr(rng, d, (3, 4)), arr(rng, d, (2, 6))))],
        dtypes=INTS,
    ),
    _method(
        "unfold",
        _many(((7,), 0, 3, 2), ((3, 5), 1, 2, 1), ((4, 3), 0, 4, 1), ((2, 3), -1, 0, 2)),
        label="tensor_unfold",  # "unfold" is nn.functional.unfold's
        dtypes=INTS,
    ),
    _method("sum_to_size", _sum_to_size_samples, dtypes=INTS),
    _named("rot90", _rot90_samples, dtypes=INTS),
    _named(
        "diag_embed",
        _many(((3,),), ((2, 3), 1), ((2, 3), -1, 0, 2), ((2, 3), 2, -1, 0), ((2, 0), 1)),
        dtypes=INTS,
    ),
    _named("diagflat", _many(((3,),), ((2, 2), -1), ((),), ((2, 3), 2)), dtypes=INTS),
    *(
        _named(
            n,
            lambda d, rng: [Sample((3, 4, 1)), Sample((4, 3), {"offset": -1}), Sample((0, 0))],
            dtypes=("int64",),
            differentiable=False,
        )
        for n in ("tril_indices", "triu_indices")
    ),
    _named("adjoint", _many(((3, 4),), ((2, 3, 4),)), dtypes=INTS + COMPLEX),
    OpInfo(
        "mH",
        lambda x: x.mH,
        lambda x: x.mH,
        _many(((3, 4),), ((2, 3, 4),)),
        dtypes=INTS + COMPLEX,
    ),
    # products, distances and statistics
    _named("inner", _vararg_samples([(2, 3), (4, 3)], [(3,), (3,)], [(), (2, 3)]), dtypes=INTS),
    _named("vdot", _vararg_samples([(3,), (3,)], [(0,), (0,)]), dtypes=INTS + COMPLEX),
    _named(
        "dist",
        lambda d, rng: [
            Sample((arr(rng, d, (2, 3)), arr(rng, d, (2, 3)))),
            Sample((arr(rng, d, (3, 1)), arr(rng, d, (4,))), {"p": 1}),
            Sample((arr(rng, d, (2, 3)), arr(rng, d, (3,))), {"p": 3.5}),
            Sample((arr(rng, d, (2, 3)), arr(rng, d, (2, 3))), {"p": float("inf")}),
        ],
        dtypes=FLOATS + COMPLEX,
    ),
    _named("addmv", _addmv_samples, dtypes=INTS),
    _named("addr", _addr_samples, dtypes=INTS),
    _named("cov", _cov_samples, dtypes=INTS + COMPLEX),
    _named(
        "corrcoef",
        _many(((3, 5),), ((6,),), ((2, 4),)),
        dtypes=INTS + COMPLEX,
        rtol=1e-4,  # float32: a covariance scaled by sqrt(var_i var_j), each a sum of 5
    ),
    *(_named(n, _trapezoid_samples, dtypes=INTS) for n in ("trapezoid", "cumulative_trapezoid")),
    _named("gradient", _gradient_samples, dtypes=INTS),
    _named("aminmax", _aminmax_samples, dtypes=INTS),
    _named("msort", lambda d, rng: [Sample((distinct(rng, d, s),)) for s in ((4, 3), (5,), ())]),
    _named(
        "argwhere",
        lambda d, rng: [Sample((_sparse(rng, d, (3, 4)),)), Sample((np.asarray(1, d),))],
        dtypes=("float32", "int64"),
        differentiable=False,
        skips=[DATA_DEPENDENT],
    ),
    # signs and membership
    _named("signbit", lambda d, rng: [Sample((_signs(d, rng),))], INTS, differentiable=False),
    _named("copysign", _copysign_samples, dtypes=INTS),
    OpInfo(
        "copysign_signed_zeros",
        staged.copysign,
        torch.copysign,
        lambda d, rng: [Sample((_magnitudes(d, rng), _signs(d, rng)))],
        skips=[
            Skip(c, "the sign jumps at the sample's zeros of `other`: no finite difference")
            for c in ("fd", "gradgrad")
        ],
    ),
    _named("rsub", binary(), dtypes=INTS),
    OpInfo(
        "rsub_alpha",
        lambda x, y: staged.rsub(x, y, alpha=2),
        lambda x, y: torch.rsub(x, y, alpha=2),
        binary(scalar=None),
    ),
    _named("logical_xor", binary(-1, 1, scalar=None), dtypes=INTS, differentiable=False),
    *(
        _named(n, lambda d, rng: [Sample((_signs(d, rng),))], INTS, differentiable=False)
        for n in ("isposinf", "isneginf")
    ),
    _named(
        "isreal",
        lambda d, rng: (
            [Sample((np.where(_sparse(rng, "int64", (3, 4)) > 0, 1j, 0.5).astype(d),))]
            if d.startswith("complex")
            else [Sample((arr(rng, d, (3, 4)),))]
        ),
        dtypes=INTS + COMPLEX,
        differentiable=False,
    ),
    _named("isin", _isin_samples, dtypes=INTS, differentiable=False),
    # Python bools
    _predicate("is_complex", lambda d, rng: [Sample((arr(rng, d, (2,)),))], INTS + COMPLEX),
    _predicate(
        "is_signed", lambda d, rng: [Sample((arr(rng, d, (2,)),))], INTS + ("uint8", "bool")
    ),
    _predicate(
        "is_nonzero",
        lambda d, rng: [Sample((np.zeros((1, 1), d),)), Sample((np.ones((), d),))],
    ),
    _predicate(
        "is_same_size",
        lambda d, rng: [
            Sample((arr(rng, d, (2, 3)), arr(rng, d, (2, 3)))),
            Sample((arr(rng, d, (2, 3)), arr(rng, d, (3, 2)))),
        ],
    ),
    # torch's names of linalg functions
    *(_named(n, _square_samples, capture_tol=_LAPACK_VS_ELIMINATION) for n in ("inverse", "det")),
    _named(
        "logdet",
        lambda d, rng: [Sample((_spd(rng, d, (3, 3)),)), Sample((_spd(rng, d, (2, 4, 4)),))],
        capture_tol=_LAPACK_VS_ELIMINATION,
    ),
    *(  # slogdet's two results apart, as linalg_slogdet's
        OpInfo(
            f"slogdet_{part}",
            lambda a, part=part: getattr(staged.slogdet(a), part),
            lambda a, part=part: getattr(torch.slogdet(a), part),
            _square_samples,
            capture_tol=_LAPACK_VS_ELIMINATION,
        )
        for part in ("sign", "logabsdet")
    ),
    _named(
        "matrix_power",
        lambda d, rng: [
            Sample((_well_conditioned(rng, d, (2, 3, 3)) / 2, n), name=f"n={n}") for n in (3, -1)
        ],
        capture_tol=_LAPACK_VS_ELIMINATION,  # n < 0: inv
    ),
    _named("cholesky", _cholesky_samples, skips=[CHOLESKY_JVP]),
]
