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

import functools
from fractions import Fraction
from math import comb, factorial

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
    floor, round, sin, cos = np.floor, np.rint, np.sin, np.cos
    copysign, isnan, both = np.copysign, np.isnan, np.logical_and
    sel = staticmethod(np.where)
    _CMP = {"olt": np.less, "ole": np.less_equal, "ogt": np.greater, "oeq": np.equal}

    @staticmethod
    def c(v):
        return np.float64(v)

    def cmp(self, pred, a, b):
        return self._CMP[pred](a, b)


NUMPY = _NumPy()


# Elements per slice of a large input: each of an algorithm's ~100 passes then runs on
# 64 KiB of float64 that stays in cache, and its temporaries reuse freed blocks instead of
# fresh pages (erf of 65536 float32s: 12.1 ms whole, 4.1 ms in slices of 8192).
_SLICE = 8192


def numpy_impl(fn):
    """``fn(m, x, **params)`` as a primitive's NumPy impl: computed in float64, in ``x``'s
    dtype, a cache-sized slice at a time."""

    def impl(x, **params):
        x64 = np.asarray(x, np.float64)
        with np.errstate(all="ignore"):  # each branch is computed everywhere, then selected
            if x64.size <= _SLICE:
                return fn(NUMPY, x64, **params).astype(x.dtype, copy=False)
            flat, out = x64.reshape(-1), np.empty(x64.size, x.dtype)
            for i in range(0, flat.size, _SLICE):
                out[i : i + _SLICE] = fn(NUMPY, flat[i : i + _SLICE], **params)
            return out.reshape(x64.shape)

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


# erf of 32-bit and narrower floats: N. Juffa's minimax approximations for single precision
# (Stack Overflow, "Efficient implementation of erf"; 0.99 ulp in float32 arithmetic):
# erf(x) = x + x p(x^2) below 0.927734375, 1 - exp(-|x| + |x| q(|x|)) with the sign of x
# above. Evaluated in float64 and rounded once they are within 0.86 ulp of erf (5M float32
# points, tests/autodiff/test_special.py); Cody's erf above computes float32 5x slower
_ERF32_SMALL = (
    -5.96761703e-4,
    4.99119423e-3,
    -2.67681349e-2,
    1.12819925e-1,
    -3.76125336e-1,
    1.28379166e-1,
)
_ERF32_BIG = (-1.06777877e-1, -6.34846687e-1, -1.28717512e-1)
_ERF32_SPLIT = 0.927734375


def _erf32(x):
    """erf of a float64 array of float32 values (NumPy, in place where it can)."""
    shape, x = x.shape, x.reshape(-1)  # 1-D: NumPy makes scalars of 0-d results
    t = np.abs(x)
    s = x * x
    big = t * -1.72853470e-5
    big += 3.83197126e-4
    u = t * -3.88396438e-3
    u += 2.42546219e-2
    big *= s
    big += u
    for c in _ERF32_BIG:
        big *= t
        big += c
    big *= t
    big -= t
    np.exp(big, out=big)
    np.subtract(1.0, big, out=big)
    np.copysign(big, x, out=big)
    small = s * _ERF32_SMALL[0]
    small += _ERF32_SMALL[1]
    for c in _ERF32_SMALL[2:]:
        small *= s
        small += c
    small *= x
    small += x
    np.copyto(small, big, where=t > _ERF32_SPLIT)
    return small.reshape(shape)


# erf of a float32, float16 or bfloat16 array, in its dtype (eager only: the lowerings use
# math.erf and ONNX's Erf for these dtypes)
erf_float32 = numpy_impl(lambda m, x: _erf32(x))


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


# --- lgamma, digamma, polygamma ---------------------------------------------------------
def _bernoulli(n: int) -> list:
    """B_0 ... B_n as exact fractions (B_1 = -1/2)."""
    b = [Fraction(1)]
    for m in range(1, n + 1):
        b.append(Fraction(-sum((comb(m + 1, k) * b[k] for k in range(m)), Fraction(0)), m + 1))
    return b


_BERN = _bernoulli(24)
_ASYMPTOTIC = 10.0  # Stirling's and the zeta tail's series start here (8 terms: 1e-17)
_EULER = 0.57721566490153286061  # Euler-Mascheroni
_LOG_PI = float(np.log(np.pi))
_HALF_LOG_2PI = float(np.log(2 * np.pi) / 2)


def _poly(m, x, coeffs):
    """coeffs[0] + x (coeffs[1] + x (...)), Horner's rule."""
    acc = m.c(coeffs[-1])
    for k in reversed(coeffs[:-1]):
        acc = m.add(m.mul(acc, x), m.c(k))
    return acc


def _ipow(m, x, n: int):
    """x ** n for a static n >= 1 by squaring."""
    out, base = None, x
    while n:
        if n & 1:
            out = base if out is None else m.mul(out, base)
        n >>= 1
        if n:
            base = m.mul(base, base)
    return out


def _shift(m, x, to: float, term):
    """(y, sum of term(x + k) over x + k < to): x raised by whole steps to y >= ``to``
    (for x > 0; ``to`` steps at most, each computed everywhere and selected)."""
    acc, y = m.c(0.0), x
    for k in range(int(to)):
        xk = m.add(x, m.c(float(k))) if k else x  # x itself: -0.0 + 0 would be +0.0
        below = m.cmp("olt", xk, m.c(to))
        acc = m.add(acc, m.sel(below, term(xk), m.c(0.0)))
        y = m.sel(below, m.add(x, m.c(float(k + 1))), y)
    return y, acc


def _sin_cos_pi(m, x):
    """(sin(pi r), cos(pi r)) for r = x - round(x) in [-1/2, 1/2] (the period taken out
    exactly), cos as sin(pi (1/2 - |r|)): both exact zeros, at the integers and halves."""
    r = m.sub(x, m.round(x))
    half = m.sub(m.c(0.5), m.abs(r))
    return m.sin(m.mul(r, m.c(np.pi))), m.sin(m.mul(half, m.c(np.pi)))


def _is_pole(m, x):
    """x <= 0 and whole (x == -inf too)."""
    return m.both(m.cmp("ole", x, m.c(0.0)), m.cmp("oeq", x, m.round(x)))


def _hurwitz_zeta(m, s: int, q):
    """zeta(s, q) = sum over k >= 0 of (q + k)^-s, for q > 0 and a static s >= 2: the sum
    up to q + k >= 10 + s, then Euler-Maclaurin's tail (12 Bernoulli terms)."""
    y, acc = _shift(m, q, _ASYMPTOTIC + s, lambda v: _ipow(m, m.div(m.c(1.0), v), s))
    rising, coeffs = Fraction(1), []
    for j in range(1, 13):  # B_2j / (2j)! * s (s + 1) ... (s + 2j - 2)
        rising *= (s + 2 * j - 2) if j == 1 else (s + 2 * j - 3) * (s + 2 * j - 2)
        coeffs.append(float(_BERN[2 * j] / factorial(2 * j) * rising))
    inv = m.div(m.c(1.0), y)
    tail = m.add(m.c(0.5), m.mul(inv, _poly(m, m.mul(inv, inv), coeffs)))
    tail = m.add(m.c(1.0 / (s - 1)), m.mul(inv, tail))  # times y^(1-s): 0 at y = inf
    return m.add(acc, m.mul(_ipow(m, inv, s - 1), tail))


@functools.cache
def _lgamma2() -> list:
    """lgamma(2 + e) = (1 - gamma) e + sum over k >= 2 of (-1)^k (zeta(k) - 1) / k e^k: the
    coefficients to k = 30 (|e| <= 1/2: truncation below 1e-17), made on first use."""
    zeta2 = [float(_hurwitz_zeta(NUMPY, k, np.float64(2.0))) for k in range(2, 31)]
    return [0.0, 1.0 - _EULER] + [(-1) ** k * z / k for k, z in enumerate(zeta2, 2)]


_STIRLING = [float(_BERN[2 * j] / (2 * j * (2 * j - 1))) for j in range(1, 9)]
_DIGAMMA = [float(-_BERN[2 * j] / (2 * j)) for j in range(1, 9)]


def _lgamma_positive(m, z):
    """lgamma(z) for z > 0: the series at 2 on [1.5, 2.5), reached by log z and log(z + 1)
    below (accurate near the zeros at 1 and 2) and by the product z - 1 ... z - n up to
    10; Stirling's series beyond."""
    one = m.c(1.0)
    n = m.floor(m.sub(z, m.c(1.5)))  # z - n in [1.5, 2.5) below 10
    e = m.sub(z, m.add(n, m.c(2.0)))  # exact
    prod = one
    for k in range(1, int(_ASYMPTOTIC) - 1):
        prod = m.mul(prod, m.sel(m.cmp("ole", m.c(float(k)), n), m.sub(z, m.c(float(k))), one))
    near = m.add(_poly(m, e, _lgamma2()), m.log(prod))
    below_one = m.cmp("olt", z, m.c(0.5))
    less = m.sel(below_one, m.add(m.log(z), m.log1p(z)), m.log1p(e))  # z(z + 1), or z
    near = m.sel(m.cmp("olt", z, m.c(1.5)), m.sub(near, less), near)
    inv = m.div(one, z)
    far = m.mul(m.sub(z, m.c(0.5)), m.sub(m.log(z), one))
    far = m.add(
        m.add(far, m.c(_HALF_LOG_2PI - 0.5)), m.mul(inv, _poly(m, m.mul(inv, inv), _STIRLING))
    )
    return m.sel(m.cmp("olt", z, m.c(_ASYMPTOTIC)), near, far)


def lgamma(m, x):
    """log |Gamma(x)|: +inf at 0, at the negative integers and at -inf (as torch)."""
    neg = m.cmp("olt", x, m.c(0.0))
    z = m.sel(neg, m.sub(m.c(1.0), x), x)
    pos = _lgamma_positive(m, z)
    sin, _ = _sin_cos_pi(m, x)
    refl = m.sub(m.sub(m.c(_LOG_PI), m.log(m.abs(sin))), pos)  # Gamma(x) Gamma(1 - x) = pi / sin
    out = m.sel(neg, refl, pos)
    return m.sel(m.cmp("oeq", x, m.c(-np.inf)), m.c(np.inf), out)


def _reflect(m, x):
    """(x < 0, 1 - x there else x, sin(pi x), cos(pi x)): for the reflection formulas."""
    neg = m.cmp("olt", x, m.c(0.0))
    sin, cos = _sin_cos_pi(m, x)
    return neg, m.sel(neg, m.sub(m.c(1.0), x), x), sin, cos


def digamma(m, x):
    """psi(x) = d/dx lgamma(x): -inf at +0, +inf at -0, NaN at the negative integers (as
    torch); shifted up to 10 for the asymptotic series, reflected below 0."""
    neg, z, sin, cos = _reflect(m, x)
    y, acc = _shift(m, z, _ASYMPTOTIC, lambda v: m.div(m.c(1.0), v))
    inv = m.div(m.c(1.0), y)
    series = m.mul(m.mul(inv, inv), _poly(m, m.mul(inv, inv), _DIGAMMA))
    pos = m.sub(m.add(m.sub(m.log(y), m.mul(m.c(0.5), inv)), series), acc)
    refl = m.sub(pos, m.div(m.mul(m.c(np.pi), cos), sin))  # psi(1 - x) - pi cot(pi x)
    out = m.sel(neg, refl, pos)
    return m.sel(m.both(neg, m.cmp("oeq", x, m.round(x))), m.c(np.nan), out)


def _cot_derivative(n: int) -> list:
    """Coefficients (in c) of P_n with d^n/dx^n cot(pi x) = pi^n P_n(cot(pi x))."""
    p = [0, 1]  # P_0 = c; P_k+1 = -(1 + c^2) P_k'
    for _ in range(n):
        d = [k * a for k, a in enumerate(p)][1:] or [0]
        q = [0] * (len(d) + 2)
        for k, a in enumerate(d):
            q[k] -= a
            q[k + 2] -= a
        p = q
    return p


def polygamma(m, x, n: int):
    """The n-th derivative of digamma, n >= 1 static: (-1)^(n+1) n! zeta(n + 1, x) for
    x > 0, reflected below 0; (-1)^(n+1) inf at 0 and the negative integers (as torch)."""
    neg, z, sin, cos = _reflect(m, x)
    sign = -1.0 if n % 2 == 0 else 1.0
    pos = m.mul(m.c(sign * factorial(n)), _hurwitz_zeta(m, n + 1, z))
    # psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) P_n(cot(pi x))
    cot = _poly(m, m.div(cos, sin), [float(a) * np.pi ** (n + 1) for a in _cot_derivative(n)])
    refl = m.sub(m.mul(m.c(-sign), pos), cot)
    out = m.sel(neg, refl, pos)
    pole = m.both(_is_pole(m, x), m.cmp("ogt", x, m.c(-np.inf)))  # -inf: NaN, as torch
    return m.sel(pole, m.c(sign * np.inf), out)
