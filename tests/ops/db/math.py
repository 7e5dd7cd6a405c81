"""Op database entries for elementwise math, reductions, scans and sorting."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as TF

import staged
from tests.ops.opinfo import OpInfo, Sample, Skip, arr, distinct

FLOATS = ("float32", "float64")
HALF = ("float16", "float32", "float64")


def away_from_zero(rng, dtype, shape, low=0.2, high=2.0):
    a = arr(rng, dtype, shape, 1 if np.dtype(dtype).kind in "iu" else low, high)
    return np.asarray(a * np.where(rng.random(shape) < 0.5, 1, -1).astype(a.dtype))


def unary_samples(low=-2.0, high=2.0, gen=None):
    """Broadcast-free unary samples: a matrix, a scalar (0-d) and an empty tensor."""

    def samples(dtype, rng):
        def make(shape):
            return np.asarray(
                gen(rng, dtype, shape) if gen else arr(rng, dtype, shape, low, high), dtype
            )

        return [
            Sample((make((3, 4)),), name="matrix"),
            Sample((make(()),), name="scalar"),
            Sample((make((0, 3)),), name="empty"),
        ]

    return samples


def binary_samples(low=-2.0, high=2.0, y_gen=None):
    """Same shapes, broadcasting (3,1) with (4,), 0-d with a matrix, empty."""

    def samples(dtype, rng):
        x = lambda s: arr(rng, dtype, s, low, high)  # noqa: E731
        y = (lambda s: y_gen(rng, dtype, s)) if y_gen else x
        return [
            Sample((x((2, 3)), y((2, 3))), name="same"),
            Sample((x((3, 1)), y((4,))), name="broadcast"),
            Sample((x(()), y((2, 2))), name="scalar"),
            Sample((x((0,)), y((0,))), name="empty"),
        ]

    return samples


def _unary(name, op=None, torch_op=None, low=-2.0, high=2.0, gen=None, dtypes=HALF, **kw):
    return OpInfo(
        name,
        op or getattr(staged, name),
        torch_op or getattr(torch, name),
        unary_samples(low, high, gen),
        dtypes=dtypes,
        **kw,
    )


def _zero_grad_kinks(rng, dtype, shape):
    """Values away from the integers and half-integers where floor/round jump."""
    return np.asarray(rng.integers(-3, 3, shape) + rng.uniform(0.1, 0.4, shape), dtype)


def _negative_non_integers(rng, dtype, shape):
    """Values in (-4, 0) at least 0.1 from the integers, where lgamma and digamma have poles."""
    return np.asarray(-rng.integers(0, 4, shape) - rng.uniform(0.1, 0.9, shape), dtype)


def _polygamma(n, name=None, low=0.1, high=5.0, gen=None):
    return _unary(
        name or f"polygamma_{n}",
        lambda x: staged.polygamma(n, x),
        lambda x: torch.polygamma(n, x),
        low=low,
        high=high,
        gen=gen,
    )


_ZETA_NO_JVP = Skip(
    "jvp", "torch has no forward-mode derivative for zeta (NotImplementedError); ours is q's"
)
_ZETA_DETACHED = [
    Skip(c, "x is detached (torch has no derivative for it), but finite differences move it")
    for c in ("fd", "gradgrad")
]


def _zeta_q(rng, dtype, shape):
    return arr(rng, dtype, shape, 0.3, 4.0)


def _zeta_negative_q(dtype, rng):
    """q < 0 needs an integral x (NaN otherwise)."""
    x = np.array([2.0, 3.0, 4.0, 5.0], dtype)
    return [Sample((x, _negative_non_integers(rng, dtype, (4,))))]


def _dim_samples(dtype, rng, with_keepdim=True):
    x = arr(rng, dtype, (3, 4))
    out = [
        Sample((x,), name="all"),
        Sample((x, 1), name="dim1"),
        Sample((arr(rng, dtype, (2, 3, 4)), 0), name="dim0"),
    ]
    if with_keepdim:
        out.append(Sample((x, -1, True), name="keepdim"))
    return out


def _prod_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4), 0.5, 1.5)
    one_zero = x.copy()
    one_zero[1, 2] = 0
    two_zeros = x.copy()
    two_zeros[0, :2] = 0
    return [
        Sample((x,), name="all"),
        Sample((x, 1), name="dim"),
        Sample((x, 0, True), name="keepdim"),
        Sample((one_zero, 1), name="one zero"),
        Sample((two_zeros, 1), name="two zeros"),
        Sample((one_zero,), name="all one zero"),
        Sample((arr(rng, dtype, ()),), name="scalar"),
    ]


def _cumprod_samples(dtype, rng):
    zeros = arr(rng, dtype, (2, 5))
    zeros[0, 1] = zeros[1, 1] = zeros[1, 3] = 0
    return [
        Sample((arr(rng, dtype, (3, 7)), 1), name="dim"),
        Sample((zeros, -1), name="zeros"),
        Sample((arr(rng, dtype, ()), 0), name="scalar"),
    ]


def _diff_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x,), name="last"),
        Sample(
            (x, 2, 0, arr(rng, dtype, (1, 4)), arr(rng, dtype, (2, 4))), name="n=2, prepend, append"
        ),
        Sample((arr(rng, dtype, (3,)), 4), name="n > size"),
    ]


def _specials(dtype):
    return np.array([np.nan, np.inf, -np.inf, 1.5, -0.5], dtype)


def _values(fn):
    """``fn``'s values where it returns ``(values, indices)``."""
    return lambda *a, **k: r[0] if isinstance(r := fn(*a, **k), tuple) else r


def _indices(fn):
    return lambda *a, **k: fn(*a, **k).indices


def _median_samples(dtype, rng):
    x = distinct(rng, dtype, (3, 5))
    return [
        Sample((x,), name="all"),
        Sample((x, 1), name="dim1"),
        Sample((distinct(rng, dtype, (4, 3)), 0, True), name="even, keepdim"),
        Sample((x, -1), name="dim-1"),
    ]


def _quantile_samples(dtype, rng):
    x = distinct(rng, dtype, (3, 5))
    q = np.asarray([0.1, 0.55, 0.95], dtype)  # no integer rank: no kink under finite differences
    return (
        [Sample((x, 0.3), name="all")]
        + [
            Sample((x, q, 1, keepdim), {"interpolation": how}, name=f"{how} keepdim={keepdim}")
            for how in ("linear", "lower", "higher", "midpoint", "nearest")
            for keepdim in (False, True)
        ]
        + [Sample((x, np.asarray(0.25, dtype), 0), name="0-d q")]
    )


def _scan_samples(dtype, rng):
    x = distinct(rng, dtype, (3, 5))
    return [
        Sample((x, 1), name="dim1"),
        Sample((x, 0), name="dim0"),
        Sample((arr(rng, dtype, ()), 0), name="scalar"),
    ]


def _searchsorted_samples(dtype, rng):
    seq = np.sort(distinct(rng, dtype, (6,)))
    rows = np.sort(distinct(rng, dtype, (2, 5)), -1)
    values = np.concatenate([seq[[0, 2]], distinct(rng, dtype, (4,)) + 0.125]).astype(dtype)
    return [
        Sample((seq, values), name="1-d"),
        Sample((seq, values), {"right": True}, name="right"),
        Sample(
            (rows, np.stack([rows[0, [1, 3]], rows[1, [0, 4]]])), {"side": "right"}, name="rows"
        ),
        Sample((seq, values.reshape(2, 3)), {"out_int32": True}, name="int32"),
    ]


def _bucketize_samples(dtype, rng):
    edges = np.sort(distinct(rng, dtype, (5,)))
    x = np.concatenate([edges[[1, 4]], distinct(rng, dtype, (4,)) + 0.125]).astype(dtype)
    return [Sample((x.reshape(2, 3), edges)), Sample((x, edges), {"right": True}, name="right")]


def _sort_samples(dtype, rng):
    x = distinct(rng, dtype, (3, 5))
    return [
        Sample((x,), name="last"),
        Sample((x, 0), name="dim0"),
        Sample((x, 1, True), name="descending"),
    ]


def _topk_samples(dtype, rng):
    x = distinct(rng, dtype, (3, 5))
    return [
        Sample((x, 2), name="largest"),
        Sample((x, 3, 0), name="dim0"),
        Sample((x, 2, -1, False), name="smallest"),
        Sample((x, 0), name="k=0"),
    ]


def _norm_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x,), name="all"),
        Sample((x,), {"dim": 1}, name="dim"),
        Sample((x,), {"dim": 0, "keepdim": True}, name="keepdim"),
        Sample((x,), {"p": 1, "dim": 1}, name="p=1"),
        Sample((x,), {"p": float("inf"), "dim": 1}, name="p=inf"),
        Sample((x,), {"p": 3.0}, name="p=3"),
    ]


def _vector_norm_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    x[1, 2] = 0  # a zero entry: gradient 0 there for every ord
    return [
        Sample((x,), {"ord": o, "dim": d}, name=f"ord={o}")
        for o, d in (
            (2, None),
            (1, 1),
            (math.inf, 0),
            (-math.inf, 1),
            (0, 1),
            (3.5, 1),
            (-1.5, None),
            (0.5, 1),
        )
    ] + [Sample((arr(rng, dtype, (2, 3, 2)),), {"dim": (0, 2), "keepdim": True}, name="dims")]


def _matrix_norm_samples(dtype, rng):
    a = arr(rng, dtype, (2, 3, 4))
    return [
        Sample((a,), {"ord": o}, name=f"ord={o}") for o in ("fro", 1, -1, math.inf, -math.inf)
    ] + [Sample((a,), {"ord": 1, "dim": (2, 0), "keepdim": True}, name="dims")]


def _linalg_norm_samples(dtype, rng):
    v, m, t = arr(rng, dtype, (4,)), arr(rng, dtype, (3, 4)), arr(rng, dtype, (2, 3, 4))
    return [
        Sample((t,), name="flattened"),
        Sample((v,), {"ord": 3}, name="vector"),
        Sample((m,), {"ord": math.inf}, name="matrix"),
        Sample((t,), {"dim": 1}, name="int dim"),
        Sample((t,), {"ord": -1, "dim": (0, 1)}, name="dim pair"),
    ]


def _spd(rng, dtype, shape):
    a = arr(rng, dtype, shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def _triangular(rng, dtype, shape, upper):
    a = arr(rng, dtype, shape, 0.5, 1.5)
    return (np.triu(a) if upper else np.tril(a)) + np.eye(shape[-1], dtype=dtype)


def _solve_triangular_samples(dtype, rng):
    b = arr(rng, dtype, (3, 2))
    return [
        Sample((_triangular(rng, dtype, (3, 3), False), b), {"upper": False}, name="lower"),
        Sample((_triangular(rng, dtype, (2, 3, 3), True), b), {"upper": True}, name="upper"),
        Sample(
            (_triangular(rng, dtype, (3, 3), False), arr(rng, dtype, (2, 3))),
            {"upper": False, "left": False},
            name="right",
        ),
        Sample(
            (_triangular(rng, dtype, (3, 3), True), b),
            {"upper": True, "unitriangular": True},
            name="unit",
        ),
    ]


def _well_conditioned(rng, dtype, shape):
    return (arr(rng, dtype, shape) + 3 * np.eye(shape[-1])).astype(dtype)


# eager runs LAPACK, a captured graph Gaussian elimination: they round differently (a few
# ulp times the condition number, below 10 for these samples)
_LAPACK_VS_ELIMINATION = (1e-5, 1e-6)


def _solve_samples(dtype, rng):
    a, a2 = _well_conditioned(rng, dtype, (3, 3)), _well_conditioned(rng, dtype, (2, 3, 3))
    return [
        Sample((a, arr(rng, dtype, (3, 2))), name="matrix"),
        Sample((a, arr(rng, dtype, (3,))), name="vector"),
        Sample((a2, arr(rng, dtype, (2, 3))), name="batch of vectors"),
        Sample((a2, arr(rng, dtype, (3, 4))), name="broadcast"),
        Sample((a, arr(rng, dtype, (2, 3))), {"left": False}, name="right"),
    ]


def _square_samples(dtype, rng):
    # a pivot below the diagonal in the first column (row swaps), and a batch
    a = arr(rng, dtype, (3, 3))
    a[2, 0] = 5
    return [
        Sample((a,)),
        Sample((_well_conditioned(rng, dtype, (2, 4, 4)) - 3 * np.eye(4, dtype=dtype),)),
    ]


def _clamp_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    lo, hi = arr(rng, dtype, (3, 4), -1.5, -0.1), arr(rng, dtype, (4,), 0.1, 1.5)
    return [
        Sample((x,), {"min": -0.5, "max": 0.5}, name="numbers"),
        Sample((x,), {"min": lo}, name="tensor min"),
        Sample((x,), {"min": lo, "max": hi}, name="tensor bounds, broadcast"),
        Sample((x,), {"max": hi}, name="tensor max"),
    ]


def _ternary_samples(third_low=-2.0):
    def samples(dtype, rng):
        a = lambda s, low=-2.0: arr(rng, dtype, s, low)  # noqa: E731
        return [
            Sample((a((2, 3)), a((2, 3)), a((2, 3), third_low)), name="same"),
            Sample((a((3,)), a((2, 3)), a((2, 1), third_low)), name="broadcast"),
            Sample((a((2, 3)), a((2, 3)), a((2, 3), third_low)), {"value": 0.5}, name="value"),
        ]

    return samples


def _lerp_samples(dtype, rng):
    a = lambda s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a((2, 3)), a((2, 3)), a((2, 3))), name="tensor weight"),
        Sample((a((2, 3)), a((3,)), 0.3), name="number weight, broadcast"),
    ]


def _softplus_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4), -5, 5)
    big = np.array([30.0, -30.0, 19.0, 21.0, 0.0], dtype)
    return [
        Sample((x,)),
        Sample((x,), {"beta": 2.0, "threshold": 3.0}, name="beta"),
        Sample((big,), name="threshold"),
    ]


# the gradient w.r.t. the divisor is -floor(x/y) (or trunc): in float16 the quotient
# rounds differently from torch's half kernel when x/y is within an ulp of an integer
HALF_QUOTIENT = [
    Skip(
        c,
        "float16 quotient x/y rounds differently from torch's half kernel "
        "near integers, so the divisor's gradient differs by one step",
        dtypes=("float16",),
    )
    for c in ("vjp", "jvp")
]


ENTRIES = [
    _unary("erf", low=-3, high=3),
    _unary("erfc", low=-3, high=3),
    _unary("erfinv", low=-0.95, high=0.95),
    _unary("lgamma", low=0.1, high=6),
    _unary("lgamma_negative", staged.lgamma, torch.lgamma, gen=_negative_non_integers),
    _unary("digamma", low=0.1, high=6),
    _unary("digamma_negative", staged.digamma, torch.digamma, gen=_negative_non_integers),
    # torch's trigamma is 5e-10 off below 6 (tests/eager/test_math_ops.py checks ours there)
    _polygamma(1, "polygamma", low=6, high=12),
    _polygamma(0),
    _polygamma(2),
    _polygamma(3, low=0.5, high=12),
    _polygamma(2, "polygamma_2_negative", gen=_negative_non_integers),
    _unary("tan", low=-1.2, high=1.2),
    _unary("sinh"),
    _unary("cosh"),
    _unary("atan"),
    _unary("asin", low=-0.9, high=0.9),
    _unary("acos", low=-0.9, high=0.9),
    _unary("atanh", low=-0.9, high=0.9),
    _unary("asinh", low=-3, high=3),
    _unary("acosh", low=1.1, high=4),
    _unary("log2", low=0.1, high=3),
    _unary("log10", low=0.1, high=3),
    _unary("exp2"),
    _unary("square", dtypes=HALF + ("int64", "bool")),  # bool squares in int64, as torch
    _unary("reciprocal", gen=away_from_zero),
    _unary("floor", gen=_zero_grad_kinks),
    _unary("ceil", gen=_zero_grad_kinks),
    _unary("trunc", gen=_zero_grad_kinks),
    _unary("round", gen=_zero_grad_kinks),
    # + 0 * x: torch answers sgn's zero gradient with a ZeroTensor, which has no numpy()
    # (not for bool, which + 0 * x would promote; the fuzzer draws bools too), with NaN
    # and inf made finite first so that the term stays 0 (sgn(NaN) is 0)
    _unary(
        "sgn",
        torch_op=lambda x: (
            torch.sgn(x) + 0 * x.nan_to_num() if x.is_floating_point() else torch.sgn(x)
        ),
        gen=away_from_zero,
    ),
    _unary("angle", gen=away_from_zero),
    _unary("isnan", differentiable=False),
    _unary("isinf", differentiable=False),
    _unary("isfinite", differentiable=False),
    _unary("silu", torch_op=TF.silu),
    _unary("gelu", torch_op=TF.gelu, low=-3, high=3),
    _unary(
        "gelu_tanh",
        lambda x: staged.gelu(x, approximate="tanh"),
        lambda x: TF.gelu(x, approximate="tanh"),
        low=-3,
        high=3,
    ),
    OpInfo("softplus", staged.softplus, TF.softplus, _softplus_samples, dtypes=HALF),
    OpInfo("atan2", staged.atan2, torch.atan2, binary_samples(y_gen=away_from_zero), dtypes=HALF),
    OpInfo("hypot", staged.hypot, torch.hypot, binary_samples(), dtypes=HALF),
    OpInfo(
        "remainder",
        staged.remainder,
        torch.remainder,
        binary_samples(-5, 5, y_gen=away_from_zero),
        dtypes=HALF + ("int64",),
        rtol=1e-5,
        atol=1e-5,
        skips=HALF_QUOTIENT,
    ),
    OpInfo(
        "fmod",
        staged.fmod,
        torch.fmod,
        binary_samples(-5, 5, y_gen=away_from_zero),
        dtypes=HALF + ("int64",),
        rtol=1e-5,
        atol=1e-5,
        skips=HALF_QUOTIENT,
    ),
    OpInfo(
        "floor_divide",
        staged.floor_divide,
        torch.floor_divide,
        binary_samples(-5, 5, y_gen=lambda rng, d, s: away_from_zero(rng, d, s, high=4.0)),
        dtypes=("float32", "float64", "int64", "int32"),
        differentiable=False,
    ),
    *(
        OpInfo(
            f"bitwise_{n}",
            getattr(staged, f"bitwise_{n}"),
            getattr(torch, f"bitwise_{n}"),
            binary_samples(-100, 100),
            dtypes=("int64", "int32", "uint8", "bool"),
            differentiable=False,
        )
        for n in ("and", "or", "xor")
    ),
    _unary(
        "bitwise_not",
        low=-100,
        high=100,
        dtypes=("int64", "int8", "uint8", "bool"),
        differentiable=False,
    ),
    *(
        OpInfo(
            name,
            getattr(staged, name),
            getattr(torch, name),
            # amounts past the width and negative ones: torch's 0 or sign, never poison
            binary_samples(-100, 100, y_gen=lambda rng, d, s: arr(rng, d, s, -2, 70)),
            dtypes=("int64", "int32", "int8", "uint8"),
            differentiable=False,
        )
        for name in ("bitwise_left_shift", "bitwise_right_shift")
    ),
    OpInfo("clamp", staged.clamp, torch.clamp, _clamp_samples, dtypes=HALF),
    OpInfo(
        "clamp_min",
        staged.clamp_min,
        torch.clamp_min,
        lambda d, rng: [Sample((arr(rng, d, (3, 4)), 0.5))],
        dtypes=FLOATS,
    ),
    OpInfo(
        "clamp_max",
        staged.clamp_max,
        torch.clamp_max,
        lambda d, rng: [Sample((arr(rng, d, (3, 4)), 0.5))],
        dtypes=FLOATS,
    ),
    OpInfo("lerp", staged.lerp, torch.lerp, _lerp_samples, dtypes=FLOATS),
    OpInfo("addcmul", staged.addcmul, torch.addcmul, _ternary_samples(), dtypes=HALF),
    OpInfo("addcdiv", staged.addcdiv, torch.addcdiv, _ternary_samples(0.5), dtypes=HALF),
    OpInfo("prod", staged.prod, torch.prod, _prod_samples, dtypes=HALF + ("int64",)),
    OpInfo(
        "cumsum",
        staged.cumsum,
        torch.cumsum,
        lambda d, rng: _dim_samples(d, rng, with_keepdim=False)[1:],
        dtypes=HALF + ("int64",),
    ),
    OpInfo("cumprod", staged.cumprod, torch.cumprod, _cumprod_samples, dtypes=FLOATS + ("int64",)),
    OpInfo("diff", staged.diff, torch.diff, _diff_samples, dtypes=FLOATS + ("int64",)),
    OpInfo(
        "nan_to_num",
        staged.nan_to_num,
        torch.nan_to_num,
        lambda d, rng: [Sample((_specials(d), 1.0, 2.0, -3.0)), Sample((arr(rng, d, (3, 4)),))],
        dtypes=FLOATS,
    ),
    OpInfo(
        "nan_to_num_defaults",
        staged.nan_to_num,
        torch.nan_to_num,
        lambda d, rng: [Sample((_specials(d),))],
        dtypes=FLOATS,
        skips=[
            Skip(
                "fd",
                "infinities become the dtype's largest values, whose finite "
                "differences cancel to 0 (the VJP is checked against torch)",
            )
        ],
    ),
    OpInfo(
        "sort",
        lambda *a: staged.sort(*a).values,
        lambda *a: torch.sort(*a).values,
        _sort_samples,
        dtypes=HALF,
    ),
    OpInfo(
        "sort_indices",
        lambda *a: staged.sort(*a).indices,
        lambda *a: torch.sort(*a).indices,
        _sort_samples,
        dtypes=FLOATS,
        differentiable=False,
    ),
    OpInfo(
        "argsort", staged.argsort, torch.argsort, _sort_samples, dtypes=FLOATS, differentiable=False
    ),
    *(
        OpInfo(
            n,
            _values(getattr(staged, n)),
            _values(getattr(torch, n)),
            _median_samples,
            dtypes=FLOATS + ("int64",),
        )
        for n in ("median", "nanmedian")
    ),
    *(
        OpInfo(
            f"{n}_indices",
            _indices(getattr(staged, n)),
            _indices(getattr(torch, n)),
            lambda d, rng: _median_samples(d, rng)[1:],
            dtypes=FLOATS,
            differentiable=False,
        )
        for n in ("median", "nanmedian")
    ),
    *(
        OpInfo(
            f"{n}_indices",
            _indices(getattr(staged, n)),
            _indices(getattr(torch, n)),
            _scan_samples,
            dtypes=FLOATS,
            differentiable=False,
        )
        for n in ("cummax", "cummin")
    ),
    *(
        OpInfo(n, getattr(staged, n), getattr(torch, n), _quantile_samples, dtypes=FLOATS)
        for n in ("quantile", "nanquantile")
    ),
    *(
        OpInfo(
            n,
            _values(getattr(staged, n)),
            _values(getattr(torch, n)),
            _scan_samples,
            dtypes=FLOATS + ("int64",),
        )
        for n in ("cummax", "cummin")
    ),
    OpInfo(
        "logcumsumexp",
        staged.logcumsumexp,
        torch.logcumsumexp,
        _scan_samples,
        dtypes=FLOATS + ("complex64", "complex128"),
    ),
    OpInfo(
        "searchsorted",
        staged.searchsorted,
        torch.searchsorted,
        _searchsorted_samples,
        dtypes=FLOATS + ("int64",),
        differentiable=False,
    ),
    OpInfo(
        "bucketize",
        staged.bucketize,
        torch.bucketize,
        _bucketize_samples,
        dtypes=FLOATS + ("int64",),
        differentiable=False,
    ),
    OpInfo(
        "topk",
        lambda *a: staged.topk(*a).values,
        lambda *a: torch.topk(*a).values,
        _topk_samples,
        dtypes=FLOATS,
    ),
    OpInfo(
        "topk_indices",
        lambda *a: staged.topk(*a).indices,
        lambda *a: torch.topk(*a).indices,
        _topk_samples,
        dtypes=FLOATS,
        differentiable=False,
    ),
    OpInfo("norm", staged.norm, torch.norm, _norm_samples, dtypes=FLOATS),
    OpInfo(
        "linalg_vector_norm",
        staged.linalg.vector_norm,
        torch.linalg.vector_norm,
        _vector_norm_samples,
        dtypes=FLOATS,
        skips=[Skip("fd", "ord=0 and the zero entry are kinks (the VJP is checked against torch)")],
    ),
    OpInfo(
        "linalg_matrix_norm",
        staged.linalg.matrix_norm,
        torch.linalg.matrix_norm,
        _matrix_norm_samples,
        dtypes=FLOATS,
    ),
    OpInfo(
        "linalg_norm", staged.linalg.norm, torch.linalg.norm, _linalg_norm_samples, dtypes=FLOATS
    ),
    OpInfo(
        "linalg_vecdot",
        staged.linalg.vecdot,
        torch.linalg.vecdot,
        lambda d, rng: [Sample((arr(rng, d, (2, 3)), arr(rng, d, (3,))), {"dim": -1})],
        dtypes=FLOATS + ("complex64",),
    ),
    OpInfo(
        "linalg_multi_dot",
        lambda *ts: staged.linalg.multi_dot(ts),
        lambda *ts: torch.linalg.multi_dot(ts),
        lambda d, rng: [
            Sample((arr(rng, d, (3,)), arr(rng, d, (3, 4)), arr(rng, d, (4, 2)))),
            Sample((arr(rng, d, (2, 3)), arr(rng, d, (3, 4)), arr(rng, d, (4,)))),
        ],
        dtypes=FLOATS,
    ),
    OpInfo(
        "linalg_matrix_power",
        staged.linalg.matrix_power,
        torch.linalg.matrix_power,
        lambda d, rng: [
            Sample((_well_conditioned(rng, d, (2, 3, 3)) / 2, n), name=f"n={n}")
            for n in (0, 1, 5, -2)
        ],
        dtypes=FLOATS,
        capture_tol=_LAPACK_VS_ELIMINATION,  # n < 0: inv
    ),
    OpInfo(
        "linalg_cholesky",
        staged.linalg.cholesky,
        torch.linalg.cholesky,
        lambda d, rng: [
            Sample((_spd(rng, d, (3, 3)),)),
            Sample((_spd(rng, d, (2, 4, 4)),), {"upper": True}),
        ],
        dtypes=FLOATS,
        skips=[
            Skip(
                "jvp",
                "torch's tangent is L Phi(L^-1 dA L^-T) of the whole dA, its gradient that of "
                "the symmetric part; staged's both follow the symmetric part (the tangents "
                "agree for a symmetric dA)",
            )
        ],
    ),
    OpInfo(
        "linalg_solve_triangular",
        staged.linalg.solve_triangular,
        torch.linalg.solve_triangular,
        _solve_triangular_samples,
        dtypes=FLOATS,
    ),
    *(
        OpInfo(
            f"linalg_{n}",
            getattr(staged.linalg, n),
            getattr(torch.linalg, n),
            _solve_samples if n == "solve" else _square_samples,
            dtypes=FLOATS,
            capture_tol=_LAPACK_VS_ELIMINATION,
        )
        for n in ("solve", "inv", "det")
    ),
    *(  # slogdet's two results apart: the math tests take one result per op
        OpInfo(
            f"linalg_slogdet_{part}",
            lambda a, part=part: getattr(staged.linalg.slogdet(a), part),
            lambda a, part=part: getattr(torch.linalg.slogdet(a), part),
            _square_samples,
            dtypes=FLOATS,
            capture_tol=_LAPACK_VS_ELIMINATION,
        )
        for part in ("sign", "logabsdet")
    ),
    OpInfo(
        "norm_at_zero",
        staged.norm,
        torch.norm,
        lambda d, rng: [
            Sample((np.array([[0, 0], [0, 1.5], [-2, 0.5]], d),), {"p": p, "dim": 1}, name=f"p={p}")
            for p in (3.0, 0.5, -1.0)
        ],
        dtypes=FLOATS,
        skips=[
            Skip("fd", "zero entries and zero norms are kinks (the VJP is checked against torch)")
        ],
    ),
    OpInfo(
        "log2_exact",
        staged.log2,
        torch.log2,
        lambda d, rng: [Sample((np.array([1, 2, 8, 1024, 0.5, 2**-20], d),))],
        dtypes=FLOATS,
        rtol=0,
        atol=0,
        skips=[
            Skip("fd", "checks exact values only (powers of two)"),
        ],
    ),
    _unary(
        "round_decimals",
        lambda x: staged.round(x, decimals=2),
        lambda x: torch.round(x, decimals=2),
        dtypes=FLOATS,
    ),
    _unary(
        "erfc_far",
        staged.erfc,
        torch.erfc,
        gen=lambda rng, d, s: arr(rng, d, s, 3.0, 9.0),
        dtypes=FLOATS,
    ),
    _unary(
        "erf_far",
        staged.erf,
        torch.erf,
        gen=lambda rng, d, s: arr(rng, d, s, 3.0, 7.0) * math.copysign(1, rng.random() - 0.5),
        dtypes=FLOATS,
    ),
    # torch.special's Cephes functions
    *(
        _unary(
            n,
            getattr(staged.special, n),
            getattr(torch.special, n),
            lo,
            hi,
            **{"dtypes": FLOATS, **kw},
        )
        for n, lo, hi, kw in (
            ("entr", 0.1, 3.0, {"dtypes": HALF}),
            ("erfcx", -3.0, 5.0, {}),
            ("log_ndtr", -10.0, 5.0, {}),
            ("ndtri", 0.02, 0.98, {}),
            ("i0", -10.0, 10.0, {"dtypes": HALF}),
            ("i0e", -10.0, 10.0, {}),
            ("i1", -10.0, 10.0, {}),
            ("i1e", -10.0, 10.0, {}),
        )
    ),
    _unary(
        "erfcx_far",
        staged.special.erfcx,
        torch.special.erfcx,
        gen=lambda rng, d, s: arr(rng, d, s, 5.0, 25.0) * math.copysign(1, rng.random() - 0.4),
        dtypes=("float64",),
    ),
    _unary(
        "ndtri_tail",
        staged.special.ndtri,
        torch.special.ndtri,
        gen=lambda rng, d, s: np.exp(arr(rng, "float64", s, -40.0, -3.0)).astype(d),
        dtypes=("float64",),
        skips=[
            Skip(c, "the finite-difference step exceeds the smallest samples (4e-18)")
            for c in ("fd", "gradgrad")
        ],
    ),
    *(
        OpInfo(
            f"{n}_at_zero",
            getattr(staged.special, n),
            getattr(torch.special, n),
            lambda d, rng: [Sample((np.array([0.0, 1e-30, -0.5, 3.0], d),))],
        )
        for n in ("i1", "i1e")
    ),
    *(
        _unary(
            f"mvlgamma_{p}" if p > 1 else "mvlgamma",
            lambda x, p=p: staged.mvlgamma(x, p),
            lambda x, p=p: torch.mvlgamma(x, p),
            low=(p - 1) / 2 + 0.2,
            high=6.0,
        )
        for p in (1, 3)
    ),
    # torch.special's Bessel functions, which torch does not differentiate; its j0, j1, y0
    # and y1 are up to 9e-7 off near x = 5 (ours: tests/eager/test_math_ops.py)
    *(
        _unary(
            n,
            getattr(staged.special, n),
            getattr(torch.special, n),
            lo,
            10.0,
            dtypes=FLOATS,
            differentiable=False,
            **({"rtol": 1e-6, "atol": 1e-6} if n.startswith("bessel") else {}),
        )
        for n, lo in (
            *(("bessel_j0", -10.0), ("bessel_j1", -10.0), ("bessel_y0", 0.1), ("bessel_y1", 0.1)),
            *(("spherical_bessel_j0", -10.0), ("modified_bessel_i0", -10.0)),
            *(("modified_bessel_i1", -10.0), ("modified_bessel_k0", 0.1)),
            *(("modified_bessel_k1", 0.1), ("scaled_modified_bessel_k0", 0.1)),
            ("scaled_modified_bessel_k1", 0.1),
            ("airy_ai", -10.0),
        )
    ),
    # torch.special.zeta: torch has no derivative for x (tests/eager/test_math_ops.py)
    *(
        OpInfo(
            name,
            lambda x, q: staged.special.zeta(x.detach(), q),
            lambda x, q: torch.special.zeta(x.detach(), q),
            samples,
            dtypes=dtypes,
            skips=[_ZETA_NO_JVP, *_ZETA_DETACHED],
        )
        for name, samples, dtypes in (
            ("zeta", binary_samples(1.5, 6.0, y_gen=_zeta_q), FLOATS),
            ("zeta_negative_q", _zeta_negative_q, ("float64",)),
        )
    ),
    _unary(
        "zeta_scalar_x",
        lambda q: staged.special.zeta(3.0, q),
        lambda q: torch.special.zeta(3.0, q),
        low=0.5,
        high=20.0,
        dtypes=FLOATS,
        skips=[_ZETA_NO_JVP],
    ),
]


# torch.special.gammainc / gammaincc (torch.igamma / igammac): torch differentiates x
# only, and has no forward mode for either (ours raises as torch's); edge cases and
# every branch of the algorithm in tests/eager/test_math_ops.py
_IGAMMA_SKIPS = [
    Skip("jvp", "torch has no forward-mode derivative for igamma/igammac: ours raises as torch's"),
    *(
        Skip(c, "a is detached (torch has no derivative for it), but finite differences move it")
        for c in ("fd", "gradgrad")
    ),
]


def _igamma_samples(dtype, rng):
    """a in [0.5, 5), x in [0.2, 8): the power series, its complement and the continued
    fraction; broadcasting and a 0-d a."""
    a = lambda s: arr(rng, dtype, s, 0.5, 5.0)  # noqa: E731
    x = lambda s: arr(rng, dtype, s, 0.2, 8.0)  # noqa: E731
    return [
        Sample((a((2, 3)), x((2, 3))), name="same"),
        Sample((a((3, 1)), x((4,))), name="broadcast"),
        Sample((a(()), x((2, 2))), name="scalar"),
    ]


ENTRIES += [
    OpInfo(
        "igamma",
        lambda a, x: staged.special.gammainc(a.detach(), x),
        lambda a, x: torch.special.gammainc(a.detach(), x),
        _igamma_samples,
        skips=_IGAMMA_SKIPS,
    ),
    OpInfo(
        "igammac",
        lambda a, x: a.detach().igammac(x),
        lambda a, x: a.detach().igammac(x),
        _igamma_samples,
        skips=[
            *_IGAMMA_SKIPS,
            # its loops are igamma's, compiled in the sweep above; the two cost a minute of
            # CPU per backend, and test_incomplete_gamma_compiled_as_eager compiles both
            *(
                Skip(b, "igamma's lowering, branch for branch: checked by the igamma entry")
                for b in ("llvm-cpu", "vulkan-spirv")
            ),
        ],
    ),
]


# torch.special's orthogonal polynomials, of x and a tensor n (whole and not, negative, past
# the trigonometric forms' thresholds): torch defines no derivatives for them. Their edges
# (x = +-1, 0, NaN, inf; n huge, NaN; a Python n) are tests/eager/test_math_ops.py's
def _polynomial_samples(dtype, rng):
    n = lambda s: np.asarray(rng.integers(-1, 12, s) + (rng.random(s) < 0.2) * 0.5, dtype)  # noqa: E731
    return [
        Sample((arr(rng, dtype, (2, 3), -1.5, 1.5), n((2, 3))), name="same"),
        Sample((arr(rng, dtype, (3, 1), -1.5, 1.5), n((4,))), name="broadcast"),
    ]


ENTRIES += [
    OpInfo(
        name,
        getattr(staged.special, name),
        getattr(torch.special, name),
        _polynomial_samples,
        dtypes=FLOATS,
        differentiable=False,
    )
    for name in (
        *("chebyshev_polynomial_t", "chebyshev_polynomial_u"),
        *("chebyshev_polynomial_v", "chebyshev_polynomial_w"),
        *("shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u"),
        *("shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w"),
        *("hermite_polynomial_h", "hermite_polynomial_he"),
        *("laguerre_polynomial_l", "legendre_polynomial_p"),
    )
]
