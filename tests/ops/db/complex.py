"""Op database entries with complex samples (complex64/complex128), for the math ops whose
complex gradients PyTorch defines; real-only math lives in ``math.py``."""

from __future__ import annotations

import torch

import staged
from tests.ops.db.math import binary_samples, unary_samples
from tests.ops.opinfo import OpInfo, Sample, Skip, arr

COMPLEX = ("complex64", "complex128")


def _unary(name, fn, tfn=None, low=0.3, high=1.5, **kw):
    return OpInfo(f"complex_{name}", fn, tfn or fn, unary_samples(low, high), dtypes=COMPLEX, **kw)


def _method(name):
    return lambda x: getattr(x, name)()


def _reduce_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4), 0.3, 1.2)
    return [Sample((x,), name="all"), Sample((x, 1), name="dim")]


# view_as_real/view_as_complex: no empty sample, as torch.tensor gives an empty array
# all-zero strides, which torch's view_as_complex (and view_as_real's backward) rejects
_SHAPES = (((3, 4), "matrix"), ((), "scalar"))
_REAL_TO_COMPLEX = "real in, complex out: tests/test_view_as_real.py runs gradcheck on it"


_REAL_PARTS = "real parts in, complex out: tests/eager/test_torch_names.py runs gradcheck"


def _parts_samples(low):
    """Two real parts (the first in [low, 2)), broadcast, 0-d and empty."""

    def samples(d, rng):
        return [
            Sample((arr(rng, d, a, low), arr(rng, d, b, -3.0, 3.0)), name=n)
            for a, b, n in [
                ((3, 4), (3, 4), ""),
                ((2, 1, 4), (3, 1), "broadcast"),
                ((), (), "scalar"),
                ((0, 2), (0, 2), "empty"),
            ]
        ]

    return samples


ENTRIES = [
    *(
        _unary(n, _method(n))
        for n in (
            "abs",
            "angle",
            "sgn",
            "conj",
            "exp",
            "log",
            "sqrt",
            "tanh",
            "sigmoid",
            "sin",
            "cos",
            "tan",
            "sinh",
            "cosh",
            "log2",
            "log10",
            "exp2",
            "square",
            "reciprocal",
            "rsqrt",
        )
    ),
    _unary("real", lambda x: x.real * 1),
    _unary("imag", lambda x: x.imag * 1),
    OpInfo(
        "complex_view_as_real",
        staged.view_as_real,
        torch.view_as_real,
        lambda d, rng: [Sample((arr(rng, d, s),), name=n) for s, n in _SHAPES],
        dtypes=COMPLEX,
    ),
    OpInfo(
        "view_as_complex",
        staged.view_as_complex,
        torch.view_as_complex,
        lambda d, rng: [Sample((arr(rng, d, s + (2,)),), name=n) for s, n in _SHAPES],
        skips=[Skip(check, _REAL_TO_COMPLEX) for check in ("fd", "gradgrad")],
    ),
    *(
        OpInfo(
            name,
            getattr(staged, name),
            getattr(torch, name),
            _parts_samples(low),
            skips=[Skip(check, _REAL_PARTS) for check in ("fd", "gradgrad")],
        )
        # polar's modulus positive: torch's gradient for a negative one is -1 times the
        # derivative (its docs leave negative moduli undefined)
        for name, low in (("complex", -2.0), ("polar", 0.3))
    ),
    OpInfo(
        "complex_mul",
        lambda x, y: x * y,
        lambda x, y: x * y,
        binary_samples(0.3, 1.5),
        dtypes=COMPLEX,
    ),
    OpInfo(
        "complex_div",
        lambda x, y: x / y,
        lambda x, y: x / y,
        binary_samples(0.3, 1.5),
        dtypes=COMPLEX,
    ),
    OpInfo(
        "complex_pow",
        lambda x, y: x**y,
        lambda x, y: x**y,
        binary_samples(0.3, 1.5),
        dtypes=COMPLEX,
    ),
    OpInfo("complex_prod", staged.prod, torch.prod, _reduce_samples, dtypes=COMPLEX),
    OpInfo(
        "complex_cumsum",
        staged.cumsum,
        torch.cumsum,
        lambda d, rng: _reduce_samples(d, rng)[1:],
        dtypes=COMPLEX,
    ),
    OpInfo(
        "complex_norm",
        lambda x, *a: staged.norm(x, dim=a[0] if a else None),
        lambda x, *a: torch.norm(x, dim=a[0] if a else None),
        _reduce_samples,
        dtypes=COMPLEX,
    ),
]
