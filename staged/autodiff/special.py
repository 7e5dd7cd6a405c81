"""Special functions NumPy lacks: erf, erfc, erfinv, written once for NumPy and MLIR.

Each algorithm is a function of ``m``, the arithmetic it runs on, and its operands:
``NUMPY`` here (float64 arrays; lower-precision inputs are computed in float64 and
rounded once) or the MLIR lowering's scalar emitter (``staged/lower/mlir``), which has
the same methods (``add``, ``mul``, ``exp``, ``cmp``, ``sel``, ``c`` for a constant...).
Branches are computed everywhere and selected (``sel``), as a compiled kernel must.

* erf, erfc: W. J. Cody, "Rational Chebyshev approximations for the error function",
  Math. Comp. 23 (1969), as in Netlib's specfun CALERF: erf on |x| <= 0.46875, erfc *
  exp(x^2) on (0.46875, 4] and beyond; erfc of negative x is 2 - erfc(-x), so erfc keeps
  its relative accuracy in the tail (relative error below 1e-16 in float64, checked
  against ``math.erf`` and torch in the tests).
* erfinv: Winitzki's closed form (within 2e-3) refined by three Halley steps on
  erf(x) - |y|, whose residual is taken as (1 - |y|) - erfc(x) past 0.46875 (exact, as
  1 - |y| is there), so the tail keeps its accuracy up to |y| = 1 - ulp.
"""

from __future__ import annotations

import numpy as np

_A = (
    3.16112374387056560e00,
    1.13864154151050156e02,
    3.77485237685302021e02,
    3.20937758913846947e03,
    1.85777706184603153e-1,
)
_B = (
    2.36012909523441209e01,
    2.44024637934444173e02,
    1.28261652607737228e03,
    2.84423683343917062e03,
)
_C = (
    5.64188496988670089e-1,
    8.88314979438837594e00,
    6.61191906371416295e01,
    2.98635138197400131e02,
    8.81952221241769090e02,
    1.71204761263407058e03,
    2.05107837782607147e03,
    1.23033935479799725e03,
    2.15311535474403846e-8,
)
_D = (
    1.57449261107098347e01,
    1.17693950891312499e02,
    5.37181101862009858e02,
    1.62138957456669019e03,
    3.29079923573345963e03,
    4.36261909014324716e03,
    3.43936767414372164e03,
    1.23033935480374942e03,
)
_P = (
    3.05326634961232344e-1,
    3.60344899949804439e-1,
    1.25781726111229246e-1,
    1.60837851487422766e-2,
    6.58749161529837803e-4,
    1.63153871373020978e-2,
)
_Q = (
    2.56852019228982242e00,
    1.87295284992346725e00,
    5.27905102951428412e-1,
    6.05183413124413191e-2,
    2.33520497626869185e-3,
)
_SQRPI = 5.6418958354775628695e-1  # 1 / sqrt(pi)


class _NumPy:
    """The arithmetic of the algorithms below on float64 NumPy arrays."""

    add, sub, mul, div, neg = np.add, np.subtract, np.multiply, np.divide, np.negative
    abs, sqrt, exp, log, log1p, trunc = np.abs, np.sqrt, np.exp, np.log, np.log1p, np.trunc
    copysign, isnan = np.copysign, np.isnan
    sel = staticmethod(np.where)
    _CMP = {"olt": np.less, "ole": np.less_equal, "ogt": np.greater, "oeq": np.equal}

    @staticmethod
    def c(v):
        return np.float64(v)

    def cmp(self, pred, a, b):
        return self._CMP[pred](a, b)


NUMPY = _NumPy()


def numpy_impl(fn):
    """``fn(m, x)`` as a primitive's NumPy impl: computed in float64, in ``x``'s dtype."""

    def impl(x):
        with np.errstate(all="ignore"):  # each branch is computed everywhere, then selected
            return fn(NUMPY, np.asarray(x, np.float64)).astype(x.dtype, copy=False)

    impl.__name__ = fn.__name__
    return impl


def _ratio(m, num, den, t, lead):
    """(num[lead] t^n + num[0] t^(n-1) + ... + num[-2]) / (t^n + den[0] t^(n-1) + ...)."""
    xnum, xden = m.mul(m.c(num[lead]), t), t
    for a, b in zip(num[: len(den) - 1], den[:-1]):
        xnum, xden = m.mul(m.add(xnum, m.c(a)), t), m.mul(m.add(xden, m.c(b)), t)
    return m.div(m.add(xnum, m.c(num[len(den) - 1])), m.add(xden, m.c(den[-1])))


_SMALL = 0.46875  # Cody's first interval: erf by a rational in x^2
_ERFC_ZERO = 27.3  # erfc is below float64's least subnormal beyond (inf - inf there)


def _erf_small(m, x):
    """erf(x) for |x| <= 0.46875."""
    return m.mul(x, _ratio(m, _A, _B, m.mul(x, x), 4))


def _erfc_big(m, y):
    """erfc(y) for y > 0.46875, with exp(-y^2) split to keep its relative accuracy."""
    z = m.div(m.c(1.0), m.mul(y, y))
    far = m.div(m.sub(m.c(_SQRPI), m.mul(z, _ratio(m, _P, _Q, z, 5))), y)
    r = m.sel(m.cmp("ole", y, m.c(4.0)), _ratio(m, _C, _D, y, 8), far)
    ysq = m.div(m.trunc(m.mul(y, m.c(16.0))), m.c(16.0))
    split = m.mul(m.sub(y, ysq), m.add(y, ysq))
    out = m.mul(m.mul(m.exp(m.neg(m.mul(ysq, ysq))), m.exp(m.neg(split))), r)
    return m.sel(m.cmp("ogt", y, m.c(_ERFC_ZERO)), m.c(0.0), out)


def erf(m, x):
    """The error function."""
    y = m.abs(x)
    big = m.copysign(m.sub(m.c(1.0), _erfc_big(m, y)), x)
    return m.sel(m.cmp("ole", y, m.c(_SMALL)), _erf_small(m, x), big)


def erfc(m, x):
    """1 - erf(x), keeping its relative accuracy for large x."""
    y = m.abs(x)
    tail = _erfc_big(m, y)
    big = m.sel(m.cmp("olt", x, m.c(0.0)), m.sub(m.c(2.0), tail), tail)
    return m.sel(m.cmp("ole", y, m.c(_SMALL)), m.sub(m.c(1.0), _erf_small(m, x)), big)


_WINITZKI = 0.147
_HALLEY_STEPS = 3  # from 2e-3, each cubes the error (times x^2, 35 at x = 5.9)


def erfinv(m, y):
    """The inverse error function: +-inf at +-1, NaN beyond."""
    a = m.abs(y)
    one = m.c(1.0)
    log_ = m.log(m.mul(m.sub(one, a), m.add(one, a)))  # log(1 - a^2)
    h = m.add(m.c(2 / (np.pi * _WINITZKI)), m.mul(log_, m.c(0.5)))
    q = m.div(m.neg(log_), m.c(_WINITZKI))
    x = m.sqrt(m.div(q, m.add(m.sqrt(m.add(m.mul(h, h), q)), h)))
    for _ in range(_HALLEY_STEPS):
        f = m.sel(
            m.cmp("ole", x, m.c(_SMALL)),
            m.sub(_erf_small(m, x), a),
            m.sub(m.sub(one, a), _erfc_big(m, x)),
        )
        u = m.div(f, m.mul(m.c(2 / np.sqrt(np.pi)), m.exp(m.neg(m.mul(x, x)))))
        x = m.sub(x, m.div(u, m.add(one, m.mul(x, u))))
    x = m.sel(m.cmp("oeq", a, one), m.c(np.inf), x)
    x = m.sel(m.cmp("ogt", a, one), m.c(np.nan), x)
    return m.copysign(x, y)
