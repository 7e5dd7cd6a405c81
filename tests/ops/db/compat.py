"""Op database entries for the torch names added for compatibility in round 24: order
statistics and histograms, floating-point bits and integer ops, the ops that write into
parts of a tensor (index_copy, masked_scatter, put, the view scatters), and the in-place
forms torch has of ops staged had (comparisons written as the tensor's dtype, the aliases'
``arccos_``, ``multiply_`` ..., the in-place view ops ``t_``, ``squeeze_`` ...)."""

from __future__ import annotations

import numpy as np
import torch

import staged
from tests.ops.db.core import FLOATS, INTS, binary, unary
from tests.ops.db.numpy_style import DATA_DEPENDENT, PYTHON_BOOL
from tests.ops.opinfo import OpInfo, Sample, Skip, arr, distinct, index

COMPLEX = FLOATS + ("complex64", "complex128")
INTEGERS = ("int64", "int32")
NO_TORCH_JVP = Skip(
    "jvp",
    "torch 2.13 has no forward-mode derivative of index_reduce to compare with (its "
    "scatter_reduce form is checked: scatter_reduce's entry)",
)
TIES_MOVE = Skip(
    "fd", "a mode is a value that repeats: finite differences part the repeats, moving it"
)


def _binary_inplace(dtype, rng):
    """An in-place binary op's samples: the other operand broadcast to the tensor, or a
    number."""
    x = arr(rng, dtype, (2, 3), -1, 1)
    return [Sample((x, arr(rng, dtype, (2, 3), -1, 1))), Sample((x, arr(rng, dtype, (3,), -1, 1)))]


def _named(name, samples, dtypes=FLOATS, **kw):
    return OpInfo(name, getattr(staged, name), getattr(torch, name), samples, dtypes=dtypes, **kw)


def _inplace(name, samples, dtypes=FLOATS, label=None, **kw):
    """``Tensor.<name>`` (an in-place form) on a clone of the first argument."""
    return OpInfo(
        label or name,
        lambda x, *a, **k: getattr(x.clone(), name)(*a, **k),
        lambda x, *a, **k: getattr(x.clone(), name)(*a, **k),
        samples,
        dtypes=dtypes,
        **kw,
    )


def _with(first, *rest, **kwargs):
    """One sample: a ``first``-shaped array (``(shape, low, high)``) and ``rest`` as given
    (callables of ``(rng, dtype)`` make arrays)."""
    shape, low, high = first if isinstance(first[0], tuple) else (first, -2.0, 2.0)

    def samples(dtype, rng):
        args = [arr(rng, dtype, shape, low, high)]
        args += [r(rng, dtype) if callable(r) else r for r in rest]
        return [Sample(tuple(args), kwargs)]

    return samples


# --- order statistics and histograms ----------------------------------------------------------
def _unique(rng, dtype, shape):
    """No two entries equal (so which of tied entries is chosen never matters)."""
    return distinct(rng, dtype, shape, 1.0 if np.dtype(dtype).kind in "iu" else 0.25)


def _kthvalue_samples(dtype, rng):
    x = _unique(rng, dtype, (3, 4))
    return [
        Sample((x, 2)),
        Sample((x, 1, 0)),
        Sample((_unique(rng, dtype, (2, 3, 4)), 3, 1, True)),
        Sample((arr(rng, dtype, ()), 1)),
    ]


def _mode_samples(dtype, rng):
    x = np.asarray(rng.integers(-1, 3, (3, 6)), dtype)
    return [
        Sample((x,)),
        Sample((x, 0)),
        Sample((np.asarray(rng.integers(0, 2, (2, 3, 5)), dtype), 1, True)),
        Sample((arr(rng, dtype, ()),)),
    ]


def _histc_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x,), {"bins": 5}),
        Sample((x, 4, -1.0, 1.0)),
        Sample((np.full((3,), 0.5, dtype), 3)),
        Sample((arr(rng, dtype, (0,)), 3)),
    ]


def _histogram_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    edges = np.asarray([-2.0, -0.5, 0.0, 1.5], dtype)
    return [
        Sample((x, 5)),
        Sample((x, 4), {"range": (-1.0, 1.0), "weight": arr(rng, dtype, (3, 4), 0.0, 1.0)}),
        Sample((x, edges), {"density": True}),
        Sample((np.full((3,), 0.5, dtype), 3)),
    ]


def _histogramdd_samples(dtype, rng):
    x = arr(rng, dtype, (2, 5, 2))
    edges = [np.asarray([-2.0, 0.0, 1.5], dtype), np.asarray([-1.0, 0.5, 1.0, 2.0], dtype)]
    return [
        Sample((x, 3)),
        Sample((x, [2, 4]), {"range": [-1.0, 1.0, 0.0, 2.0], "weight": arr(rng, dtype, (2, 5))}),
        Sample((x, edges), {"density": True}),
    ]


def _bincount_samples(dtype, rng):
    x = index(rng, 5, (9,)).astype(dtype)
    return [
        Sample((x,)),
        Sample((x,), {"weights": arr(rng, "float64", (9,))}),
        Sample((x,), {"weights": arr(rng, "float32", (9,)), "minlength": 8}),
        Sample((np.zeros((0,), dtype),), {"minlength": 2}),
    ]


def _unique_consecutive_samples(dtype, rng):
    x = np.asarray([1, 1, 2, 2, 2, 0, 1, 1], dtype)
    rows = np.asarray([[1, 2], [1, 2], [3, 0], [1, 2]], dtype)
    return [
        Sample((x,)),
        Sample((x.reshape(2, 4),), {"return_inverse": True, "return_counts": True}),
        Sample((rows,), {"dim": 0, "return_counts": True}),
        Sample((rows.T.copy(),), {"dim": 1, "return_inverse": True}),
    ]


# --- bits and integers ------------------------------------------------------------------------
def _ldexp_samples(dtype, rng):
    x = arr(rng, dtype, (2, 3))
    return [
        Sample((x, np.asarray(rng.integers(0, 5, (2, 3)), np.int64))),
        Sample((x, np.asarray(rng.integers(0, 5, (3,)), np.int32))),
        Sample((arr(rng, dtype, ()), arr(rng, dtype, (2,), -1.0, 1.0))),
    ]


def _integer_pairs(dtype, rng):
    x = np.asarray(rng.integers(-30, 31, (3, 4)), dtype)
    x[0, :2] = 0
    y = np.asarray(rng.integers(-30, 31, (3, 4)), dtype)
    y[0, 1] = y[1, 0] = 0
    return [
        Sample((x, y)),
        Sample((x, np.asarray(rng.integers(1, 40, (4,)), dtype))),
        Sample((np.asarray(12, dtype), y)),
        Sample((np.zeros((0, 4), dtype), y[:1])),
    ]


def _renorm_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    mixed = np.asarray([[0.1, 0.2, 0.1, 0.0], [1.0, 2.0, -2.0, 1.0], [0.3, -0.2, 0.1, 0.2]], dtype)
    return [
        Sample((x, 2, 0, 0.5)),
        Sample((x, 1, 1, 100.0)),
        Sample((mixed, 2, 0, 1.0)),
        Sample((arr(rng, dtype, (2, 3, 2)), 3, -1, 0.5)),
    ]


def _addbmm_samples(dtype, rng):
    b1, b2 = arr(rng, dtype, (4, 2, 5)), arr(rng, dtype, (4, 5, 3))
    return [
        Sample((arr(rng, dtype, (2, 3)), b1, b2)),
        Sample((arr(rng, dtype, (3,)), b1, b2), {"beta": 0.5, "alpha": -2.0}),
        Sample((arr(rng, dtype, (2, 3)), arr(rng, dtype, (0, 2, 5)), arr(rng, dtype, (0, 5, 3)))),
    ]


# --- writing into parts of a tensor ------------------------------------------------------------
def _index_copy_samples(dtype, rng):
    x = arr(rng, dtype, (4, 3))
    return [
        Sample((x, 0, np.asarray([2, 0]), arr(rng, dtype, (2, 3)))),
        Sample((x, 1, np.asarray([1]), arr(rng, dtype, (4, 1)))),
        Sample((x, -2, np.asarray(3), arr(rng, dtype, (1, 3)))),
        Sample((x, 0, np.zeros((0,), np.int64), arr(rng, dtype, (0, 3)))),
    ]


def _index_reduce_samples(dtype, rng):
    x = distinct(rng, dtype, (4, 3))
    src = np.asarray(distinct(rng, dtype, (3, 3)) + 0.1, dtype)  # no ties with x
    at = np.asarray([2, 0, 2])
    return [
        Sample((x, 0, at, src, "prod")),
        Sample((x, 0, at, src, "amax"), {"include_self": False}),
        Sample((x, 0, at, src, "amin")),
        Sample((x, 1, np.asarray([1, 1]), distinct(rng, dtype, (4, 2)), "mean")),
    ]


def _masked_scatter_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, arr(rng, "bool", (3, 4)), arr(rng, dtype, (12,)))),
        Sample((x, np.asarray([True, False, False, True]), arr(rng, dtype, (3, 5)))),
        Sample((arr(rng, dtype, (4,)), arr(rng, "bool", (2, 4)), arr(rng, dtype, (8,)))),
    ]


def _put_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, np.asarray([0, 5, -1]), arr(rng, dtype, (3,)))),
        Sample((x, np.asarray([[1, 1], [-12, 7]]), arr(rng, dtype, (2, 2)), True)),
        Sample((x, np.zeros((0,), np.int64), arr(rng, dtype, (0,)))),
    ]


def _slice_scatter_samples(dtype, rng):
    x = arr(rng, dtype, (4, 5))
    return [
        Sample((x, arr(rng, dtype, (2, 5)), 0, 1, None, 2)),
        Sample((x, arr(rng, dtype, (4, 2)), 1, -2)),
        Sample((x, arr(rng, dtype, (4, 5)))),
    ]


def _select_scatter_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [Sample((x, arr(rng, dtype, (4,)), 0, -1)), Sample((x, arr(rng, dtype, (3,)), 1, 2))]


def _diagonal_scatter_samples(dtype, rng):
    return [
        Sample((arr(rng, dtype, (3, 4)), arr(rng, dtype, (3,)))),
        Sample((arr(rng, dtype, (2, 3, 4)), arr(rng, dtype, (2, 3)), 1, 1, 2)),
        Sample((arr(rng, dtype, (3, 3)), arr(rng, dtype, (2,)), -1)),
    ]


def _as_strided_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, (2, 2), (1, 2), 1)),
        Sample((x, (4, 3), (2, 1))),  # overlapping windows: entries read twice
        Sample((x, (0, 3), (3, 1))),
    ]


ENTRIES = [
    _named("kthvalue", _kthvalue_samples, INTS),
    _named("mode", _mode_samples, INTS, skips=[TIES_MOVE]),
    _named("histc", _histc_samples, differentiable=False),
    _named("histogram", _histogram_samples, differentiable=False),
    _named("histogramdd", _histogramdd_samples, differentiable=False),
    _named("bincount", _bincount_samples, INTEGERS, differentiable=False, skips=[DATA_DEPENDENT]),
    _named(
        "unique_consecutive",
        _unique_consecutive_samples,
        ("float32", "int64"),
        differentiable=False,
        skips=[DATA_DEPENDENT],
    ),
    _named("frexp", unary(kink=0.05)),
    _named("ldexp", _ldexp_samples),
    *(_named(n, _integer_pairs, INTEGERS, differentiable=False) for n in ("gcd", "lcm")),
    _named("nextafter", binary(scalar=None)),
    _named("renorm", _renorm_samples),
    _named("addbmm", _addbmm_samples, COMPLEX),
    _named("index_copy", _index_copy_samples, INTS),
    _named("index_reduce", _index_reduce_samples, skips=[NO_TORCH_JVP]),
    _named("masked_scatter", _masked_scatter_samples, INTS),
    _named("put", _put_samples, INTS),
    _named("slice_scatter", _slice_scatter_samples, INTS),
    _named("select_scatter", _select_scatter_samples, INTS),
    _named("diagonal_scatter", _diagonal_scatter_samples, INTS),
    _named(
        "split_with_sizes",
        lambda d, rng: [
            Sample((arr(rng, d, (5, 3)), [2, 3])),
            Sample((arr(rng, d, (5, 3)), [1, 0, 2], 1)),
        ],
        INTS,
    ),
    _named("narrow_copy", _with((4, 5), 1, 1, 3), INTS),
    _named("as_strided", _as_strided_samples),
    *(_named(n, unary(), COMPLEX) for n in ("resolve_conj", "resolve_neg", "conj_physical")),
    *(
        _named(n, unary(), COMPLEX, differentiable=False, skips=[PYTHON_BOOL])
        for n in ("is_conj", "is_neg")
    ),
    # the in-place forms: comparisons (bools written as the tensor's dtype)
    *(
        _inplace(n, _binary_inplace, INTS, differentiable=False)
        for n in ("eq_", "ne_", "lt_", "le_", "gt_", "ge_")
    ),
    *(
        _inplace(n, _with((2, 3), lambda rng, d: arr(rng, d, (3,), -1, 1)), INTS)
        for n in ("greater_", "greater_equal_", "less_", "less_equal_", "not_equal_")
    ),
    # ... elementwise math and its aliases
    *(_inplace(n, _with(((2, 3), -0.9, 0.9))) for n in ("arcsin_", "arccos_")),
    *(_inplace(n, _with((2, 3))) for n in ("arctan_", "expm1_", "negative_")),
    # torch has no derivative of its in-place atanh, asinh, acosh: its out-of-place ones
    *(
        OpInfo(
            f"{n}_",
            lambda x, n=n: getattr(x.clone(), n + "_")(),
            lambda x, n=n: getattr(torch, n)(x),
            _with(((2, 3), low, high)),
        )
        for n, low, high in (("arctanh", -0.9, 0.9), ("arcsinh", -2, 2), ("arccosh", 1.2, 3))
    ),
    *(_inplace(n, _with(((2, 3), 0.2, 2.0))) for n in ("log1p_", "rsqrt_")),
    _inplace("absolute_", unary(kink=0.1)),
    _inplace("sign_", unary(kink=0.1), INTS),
    *(_inplace(n, _with(((2, 3), 0.1, 3.9))) for n in ("fix", "fix_")),
    _inplace("clip_", _with((2, 3), -0.5, 0.5)),
    *(_inplace(n, _with((2, 3), 0), INTS) for n in ("cumsum_", "cumprod_")),
    *(
        _inplace(n, _with((2, 3), lambda rng, d: arr(rng, d, (3,), 0.5, 2.0)))
        for n in ("divide_", "true_divide_", "multiply_", "subtract_", "arctan2_")
    ),
    _inplace("float_power_", _with((2, 3), 2.5), ("float64",)),
    _inplace(
        "heaviside_",
        _with((2, 3), lambda rng, d: np.asarray([0.5, 1.0, 0.0], d)),
        differentiable=False,
    ),
    _inplace("ldexp_", _with((2, 3), lambda rng, d: np.asarray([1, 2, 3]))),
    *(_inplace(n, _integer_pairs, INTEGERS, differentiable=False) for n in ("gcd_", "lcm_")),
    _inplace("nextafter_", _binary_inplace),
    _inplace("renorm_", _with((3, 4), 2, 0, 0.5)),
    _inplace("addbmm_", lambda d, rng: _addbmm_samples(d, rng)[:1]),
    _inplace("index_copy_", _index_copy_samples),
    _inplace("index_reduce_", _index_reduce_samples, skips=[NO_TORCH_JVP]),
    _inplace("masked_scatter_", lambda d, rng: _masked_scatter_samples(d, rng)[:2]),
    _inplace("put_", _put_samples),
    _inplace("conj_physical_", unary(), COMPLEX),
    _inplace("fill_diagonal_", _with((3, 3), 1.5)),
    _inplace("fill_diagonal_", _with((7, 3), -1.0, wrap=True), label="fill_diagonal__wrap"),
    # ... and the in-place view ops
    *(_inplace(n, _with((1, 3, 1), *a), INTS) for n, a in (("squeeze_", ()), ("unsqueeze_", (1,)))),
    _inplace("t_", _with((2, 3)), INTS),
    *(_inplace(n, _with((2, 3, 4), 0, 2), INTS) for n in ("transpose_", "swapaxes_", "swapdims_")),
]
