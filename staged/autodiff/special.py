"""Special functions NumPy lacks (erf, erfinv, lgamma, i0 ...), written once for NumPy,
MLIR and ONNX.

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
* erfcx: Cody's rationals for exp(x^2) erfc(x) (erfc's, without its exp(-x^2) factor);
  2 exp(x^2) - erfcx(-x) below 0 with x^2 split as erfc's (within an ulp of mpmath where
  torch's Faddeeva code is 5e-14 off, at x = -24).
* ndtri, i0, i0e, i1, i1e: the Cephes Math Library (S. Moshier), as torch's
  ``aten/src/ATen/native/Math.h``: within 2 float64 ulp of SciPy (torch's float64 kernels
  are 4-5 ulp off near x = 8); k0, k1, k0e, k1e, j0, j1, y0, y1 likewise (torch's j0,
  j1, y0 and y1 are up to 9e-7 off near x = 5).
* zeta: Cephes' Hurwitz zeta, its loops unrolled to fixed bounds: bit for bit torch's
  (and SciPy's) for q > -23.
* airy_ai: Cephes' airy (Ai only), the series unrolled likewise: SciPy's to the bit on
  (-2.09, 2.09), where torch's CPU kernel is up to 32 ulp off; torch's within 6 ulp
  beyond (below -2.09, within an eps of the envelope 1 / (sqrt(pi) |x|^1/4); Cephes'
  asymptotic form is 155 such eps off mpmath there, torch's too).
"""

from __future__ import annotations

import functools
import inspect
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
    pow = np.power
    floor, round, sin, cos = np.floor, np.rint, np.sin, np.cos
    copysign, isnan, both, either = np.copysign, np.isnan, np.logical_and, np.logical_or
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
    """``fn(m, x, ..., **params)`` as a primitive's NumPy impl (its operands named as
    ``fn``'s, of one shape): computed in float64, in ``x``'s dtype, a cache-sized slice at
    a time."""

    def impl(*xs, **params):
        xs64 = [np.asarray(x, np.float64) for x in xs]
        size, dtype = xs64[0].size, xs[0].dtype
        with np.errstate(all="ignore"):  # each branch is computed everywhere, then selected
            if size <= _SLICE:
                return fn(NUMPY, *xs64, **params).astype(dtype, copy=False)
            flat, out = [x.reshape(-1) for x in xs64], np.empty(size, dtype)
            for i in range(0, size, _SLICE):
                out[i : i + _SLICE] = fn(NUMPY, *(x[i : i + _SLICE] for x in flat), **params)
            return out.reshape(xs64[0].shape)

    sig = inspect.signature(fn)
    impl.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])
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


def _erfcx_big(m, y):
    """exp(y^2) erfc(y) for y > 0.46875: Cody's rationals in y to 4, in 1/y^2 beyond."""
    z = m.div(m.c(1.0), m.mul(y, y))
    far = m.div(m.sub(m.c(_SQRPI), m.mul(z, _ratio(m, _P, _Q, z, 5))), y)
    return m.sel(m.cmp("ole", y, m.c(4.0)), _ratio(m, _C, _D, y, 8), far)


def _exp_sq(m, y, sign: float):
    """exp(sign y^2), y^2 split at y rounded down to 1/16 so its rounding error is not
    multiplied up by the exponential (Cody's)."""
    ysq = m.div(m.trunc(m.mul(y, m.c(16.0))), m.c(16.0))
    split = m.mul(m.sub(y, ysq), m.add(y, ysq))
    return m.mul(m.exp(m.mul(m.c(sign), m.mul(ysq, ysq))), m.exp(m.mul(m.c(sign), split)))


def _erfc_big(m, y):
    """erfc(y) for y > 0.46875, keeping its relative accuracy."""
    out = m.mul(_exp_sq(m, y, -1.0), _erfcx_big(m, y))
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


def _erf32_big(x):
    """erf(x) above the split: 1 - exp(-|x| + |x| q(|x|)) with the sign of x."""
    t = np.abs(x)
    s = t * t
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
    return np.copysign(big, x, out=big)


def _erf32(x):
    """erf of a float64 array of float32 values (NumPy, in place where it can); the branch
    above the split (its exp the costliest pass) computed only where it is taken."""
    shape, x = x.shape, x.reshape(-1)  # 1-D: NumPy makes scalars of 0-d results
    s = x * x
    small = s * _ERF32_SMALL[0]
    small += _ERF32_SMALL[1]
    for c in _ERF32_SMALL[2:]:
        small *= s
        small += c
    small *= x
    small += x
    far = np.flatnonzero(np.abs(x) > _ERF32_SPLIT)
    if far.size:
        small[far] = _erf32_big(x[far])
    return small.reshape(shape)


def erf_float32(x):
    """erf of a float32, float16 or bfloat16 array, in its dtype (eager only: the lowerings
    use math.erf and ONNX's Erf for these dtypes). Whole, not in ``numpy_impl``'s slices:
    its 25 passes cost less than the slices' Python (65536 float32s: 478 -> 362 µs)."""
    with np.errstate(all="ignore"):
        return _erf32(np.asarray(x, np.float64)).astype(x.dtype, copy=False)


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


# --- Cephes: entr, erfcx, ndtri, i0, i0e, i1, i1e -----------------------------------------
def entr(m, x):
    """-x log x: 0 at 0, -inf below, NaN at NaN (as torch.special.entr)."""
    pos = m.sel(m.cmp("ogt", x, m.c(0.0)), m.neg(m.mul(x, m.log(x))), x)
    return m.sel(m.cmp("olt", x, m.c(0.0)), m.c(-np.inf), pos)


_ERFCX_INF = 26.7  # 2 exp(x^2) overflows below -26.7 (torch's cut, from Faddeeva's erfcx)


def erfcx(m, x):
    """exp(x^2) erfc(x) by Cody's erfc without its exp(-x^2) factor (the rationals alone
    past 0.46875); 2 exp(x^2) - erfcx(-x) below -0.46875, inf below -26.7."""
    y = m.abs(x)
    tail = _erfcx_big(m, y)
    small = m.mul(_exp_sq(m, y, 1.0), m.sub(m.c(1.0), _erf_small(m, x)))
    neg = m.sub(m.mul(m.c(2.0), _exp_sq(m, y, 1.0)), tail)
    neg = m.sel(m.cmp("ogt", y, m.c(_ERFCX_INF)), m.c(np.inf), neg)
    big = m.sel(m.cmp("olt", x, m.c(0.0)), neg, tail)
    return m.sel(m.cmp("ole", y, m.c(_SMALL)), small, big)


# Cephes ndtri's rationals (highest degree first): |y - 1/2| <= 1/2 - exp(-2), then the
# tails in z = 1/sqrt(-2 log y) for sqrt(-2 log y) below 8 and beyond
_NDTRI_P0 = (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
             1.39312609387279679503e1, -1.23916583867381258016e0)  # fmt: skip
_NDTRI_Q0 = (1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
             -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
             1.59056225126211695515e1, -1.18331621121330003142e0)  # fmt: skip
_NDTRI_P1 = (4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
             4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
             -1.40256079171354495875e-1, -3.50424626827848203418e-2, -8.57456785154685413611e-4)  # fmt: skip
_NDTRI_Q1 = (1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
             1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
             -3.80806407691578277194e-2, -9.33259480895457427372e-4)  # fmt: skip
_NDTRI_P2 = (3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
             1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
             3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)  # fmt: skip
_NDTRI_Q2 = (1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
             2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
             2.89247864745380683936e-6, 6.79019408009981274425e-9)  # fmt: skip
_EXP_M2 = 0.13533528323661269189  # exp(-2)


def _polevl(m, x, coeffs):
    """Cephes' polevl: the polynomial with ``coeffs`` highest degree first."""
    return _poly(m, x, coeffs[::-1])


def ndtri(m, y):
    """The standard normal quantile, Cephes' ndtri: -inf at 0, inf at 1, NaN outside."""
    one = m.c(1.0)
    upper = m.cmp("ogt", y, m.c(1.0 - _EXP_M2))
    t = m.sel(upper, m.sub(one, y), y)
    c = m.sub(t, m.c(0.5))
    c2 = m.mul(c, c)
    central = m.mul(
        m.add(c, m.mul(c, m.div(m.mul(c2, _polevl(m, c2, _NDTRI_P0)), _polevl(m, c2, _NDTRI_Q0)))),
        m.c(np.sqrt(2 * np.pi)),
    )
    r = m.sqrt(m.mul(m.c(-2.0), m.log(t)))
    z = m.div(one, r)
    near = m.div(_polevl(m, z, _NDTRI_P1), _polevl(m, z, _NDTRI_Q1))
    far = m.div(_polevl(m, z, _NDTRI_P2), _polevl(m, z, _NDTRI_Q2))
    x1 = m.mul(z, m.sel(m.cmp("olt", r, m.c(8.0)), near, far))
    tail = m.sub(m.sub(r, m.div(m.log(r), r)), x1)
    tail = m.sel(upper, tail, m.neg(tail))
    out = m.sel(m.cmp("ogt", t, m.c(_EXP_M2)), central, tail)
    out = m.sel(m.cmp("oeq", y, m.c(0.0)), m.c(-np.inf), out)
    out = m.sel(m.cmp("oeq", y, one), m.c(np.inf), out)
    out_of_range = m.cmp("olt", m.mul(y, m.sub(one, y)), m.c(0.0))  # y < 0 or y > 1
    return m.sel(out_of_range, m.c(np.nan), out)


def _chbevl(m, x, coeffs):
    """Cephes' chbevl: sum of coeffs[i] T_i(x / 2), the zeroth-order term last (Clenshaw)."""
    b0, b1, b2 = m.c(coeffs[0]), m.c(0.0), m.c(0.0)
    for a in coeffs[1:]:
        b2, b1 = b1, b0
        b0 = m.add(m.sub(m.mul(x, b1), b2), m.c(a))
    return m.mul(m.c(0.5), m.sub(b0, b2))


# Cephes' Chebyshev coefficients of exp(-x) I0(x) on [0, 8] and of exp(-x) sqrt(x) I0(x)
# on [8, inf) in 32/x; the same for I1 (exp(-x) I1(x) / x on [0, 8])
_I0E = (
    (-4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
     1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
     -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
     9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
     -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
     1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
     -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
     1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
     -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
     1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1),
    (-7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
     3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
     1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
     -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
     7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
     -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
     3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
     2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
     8.04490411014108831608e-1),
)  # fmt: skip
_I1E = (
    (2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
     -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
     3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
     -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
     9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
     -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
     4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
     -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
     2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
     -1.76416518357834055153e-1, 2.52587186443633654823e-1),
    (7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
     -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
     -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
     4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
     -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
     3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
     -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
     -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
     7.78576235018280120474e-1),
)  # fmt: skip


def _bessel_ie(m, x, n: int):
    """(|x|, exp(-|x|) I_n(|x|)) for n = 0, 1: Cephes' i0e and i1e, a Chebyshev series
    in |x| / 2 - 2 to 8, in 32 / |x| - 2 over sqrt(|x|) beyond."""
    a, b = _I1E if n else _I0E
    ax = m.abs(x)
    near = _chbevl(m, m.sub(m.mul(ax, m.c(0.5)), m.c(2.0)), a)
    near = m.mul(near, ax) if n else near
    far = m.div(_chbevl(m, m.sub(m.div(m.c(32.0), ax), m.c(2.0)), b), m.sqrt(ax))
    return ax, m.sel(m.cmp("ole", ax, m.c(8.0)), near, far)


def i0e(m, x):
    """exp(-|x|) I0(x), Cephes' i0e."""
    return _bessel_ie(m, x, 0)[1]


def i0(m, x):
    """The modified Bessel function I0, Cephes' i0: exp(|x|) i0e(x)."""
    ax, r = _bessel_ie(m, x, 0)
    return m.mul(m.exp(ax), r)


def i1e(m, x):
    """exp(-|x|) I1(x), Cephes' i1e (odd)."""
    return m.copysign(_bessel_ie(m, x, 1)[1], x)


def i1(m, x):
    """The modified Bessel function I1, Cephes' i1: exp(|x|) i1e(x)."""
    ax, r = _bessel_ie(m, x, 1)
    return m.copysign(m.mul(m.exp(ax), r), x)


# --- Cephes: Bessel functions (torch defines no derivatives for these) --------------------
# Chebyshev coefficients of K0 and K1: in x^2 - 2 (with the log(x / 2) I_n(x) term) on
# (0, 2], of exp(x) sqrt(x) K_n(x) in 8 / x - 2 beyond
_K0 = (
    (1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
     1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
     1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
     -5.35327393233902768720e-01),
    (5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17,
     -1.67823109680541210385e-16, 5.51205597852431940784e-16, -1.84859337734377901440e-15,
     6.34007647740507060557e-15, -2.22751332699166985548e-14, 8.03289077536357521100e-14,
     -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
     1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10,
     -1.69753450938905987466e-09, 8.57403401741422608519e-09, -4.66048989768794782956e-08,
     2.76681363944501510342e-07, -1.83175552271911948767e-06, 1.39498137188764993662e-05,
     -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
     2.44030308206595545468e00),
)  # fmt: skip
_K1 = (
    (-7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
     -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
     -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
     -3.53155960776544875667e-01, 1.52530022733894777053e00),
    (-5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17,
     1.83809354436663880070e-16, -6.05704724837331885336e-16, 2.03870316562433424052e-15,
     -7.01983709041831346144e-15, 2.47715442448130437068e-14, -8.97670518232499435011e-14,
     3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
     -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10,
     2.01504975519703286596e-09, -1.03457624656780970260e-08, 5.74108412545004946722e-08,
     -3.50196060308781257119e-07, 2.40648494783721712015e-06, -1.93619797416608296024e-05,
     1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
     2.72062619048444266945e00),
)  # fmt: skip


def _bessel_k(m, x, n: int, scaled: bool):
    """Cephes' k0 and k1 (k0e and k1e if ``scaled``): inf at 0, NaN below."""
    a, b = _K1 if n else _K0
    i_n = m.mul(m.exp(x), _bessel_ie(m, x, n)[1])
    c = _chbevl(m, m.sub(m.mul(x, x), m.c(2.0)), a)
    log_i = m.mul(m.log(m.mul(x, m.c(0.5))), i_n)
    near = m.add(log_i, m.div(c, x)) if n else m.sub(c, log_i)
    far = m.div(_chbevl(m, m.sub(m.div(m.c(8.0), x), m.c(2.0)), b), m.sqrt(x))
    near, far = (m.mul(near, m.exp(x)), far) if scaled else (near, m.mul(far, m.exp(m.neg(x))))
    out = m.sel(m.cmp("ole", x, m.c(2.0)), near, far)
    out = m.sel(m.cmp("oeq", x, m.c(0.0)), m.c(np.inf), out)
    return m.sel(m.cmp("olt", x, m.c(0.0)), m.c(np.nan), out)


def modified_bessel_k0(m, x):
    """The modified Bessel function of the second kind K0 (Cephes' k0)."""
    return _bessel_k(m, x, 0, False)


def modified_bessel_k1(m, x):
    """The modified Bessel function of the second kind K1 (Cephes' k1)."""
    return _bessel_k(m, x, 1, False)


def scaled_modified_bessel_k0(m, x):
    """exp(x) K0(x) (Cephes' k0e)."""
    return _bessel_k(m, x, 0, True)


def scaled_modified_bessel_k1(m, x):
    """exp(x) K1(x) (Cephes' k1e)."""
    return _bessel_k(m, x, 1, True)


# Cephes j0.c and j1.c: the rationals P/Q of the modulus and phase in 25 / x^2 beyond 5
# (Q's leading 1 implicit), and J_n, Y_n's rationals in x^2 to 5 with J_n's first zeros
_JY_FAR = (
    ((7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e00,
      5.44725003058768775090e00, 8.74716500199817011941e00, 5.30324038235394892183e00,
      9.99999999999999997821e-01),
     (9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e00,
      5.47097740330417105182e00, 8.76190883237069594232e00, 5.30605288235394617618e00,
      1.00000000000000000218e00),
     (-1.13663838898469149931e-02, -1.28252718670509318512e00, -1.95539544257735972385e01,
      -9.32060152123768231369e01, -1.77681167980488050595e02, -1.47077505154951170175e02,
      -5.14105326766599330220e01, -6.05014350600728481186e00),
     (6.43178256118178023184e01, 8.56430025976980587198e02, 3.88240183605401609683e03,
      7.24046774195652478189e03, 5.93072701187316984827e03, 2.06209331660327847417e03,
      2.42005740240291393179e02)),
    ((7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e00,
      5.11207951146807644818e00, 8.42404590141772420927e00, 5.21451598682361504063e00,
      1.00000000000000000254e00),
     (5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e00,
      5.07386386128601488557e00, 8.39985554327604159757e00, 5.20982848682361821619e00,
      9.99999999999999997461e-01),
     (5.10862594750176621635e-02, 4.98213872951233449420e00, 7.58238284132545283818e01,
      3.66779609360150777800e02, 7.10856304998926107277e02, 5.97489612400613639965e02,
      2.11688757100572135698e02, 2.52070205858023719784e01),
     (7.42373277035675149943e01, 1.05644886038262816351e03, 4.98641058337653607651e03,
      9.56231892404756170795e03, 7.99704160447350683650e03, 2.82619278517639096600e03,
      3.36093607810698293419e02)),
)  # fmt: skip
_J_NEAR = (
    ((-4.79443220978201773821e09, 1.95617491946556577543e12, -2.49248344360967716204e14,
      9.70862251047306323952e15),
     (4.99563147152651017219e02, 1.73785401676374683123e05, 4.84409658339962045305e07,
      1.11855537045356834862e10, 2.11277520115489217587e12, 3.10518229857422583814e14,
      3.18121955943204943306e16, 1.71086294081043136091e18),
     (5.78318596294678452118e00, 3.04712623436620863991e01)),
    ((-8.99971225705559398224e08, 4.52228297998194034323e11, -7.27494245221818276015e13,
      3.68295732863852883286e15),
     (6.20836478118054335476e02, 2.56987256757748830383e05, 8.35146791431949253037e07,
      2.21511595479792499675e10, 4.74914122079991414898e12, 7.84369607876235854894e14,
      8.95222336184627338078e16, 5.32278620332680085395e18),
     (1.46819706421238932572e01, 4.92184563216946036703e01)),
)  # fmt: skip
_Y_NEAR = (
    ((1.55924367855235737965e04, -1.46639295903971606143e07, 5.43526477051876500413e09,
      -9.82136065717911466409e11, 8.75906394395366999549e13, -3.46628303384729719441e15,
      4.42733268572569800351e16, -1.84950800436986690637e16),
     (1.04128353664259848412e03, 6.26107330137134956842e05, 2.68919633393814121987e08,
      8.64002487103935000337e10, 2.02979612750105546709e13, 3.17157752842975028269e15,
      2.50596256172653059228e17)),
    ((1.26320474790178026440e09, -6.47355876379160291031e11, 1.14509511541823727583e14,
      -8.12770255501325109621e15, 2.02439475713594898196e17, -7.78877196265950026825e17),
     (5.94301592346128195359e02, 2.35564092943068577943e05, 7.34811944459721705660e07,
      1.87601316108706159478e10, 3.88231277496238566008e12, 6.20557727146953693363e14,
      6.87141087355300489866e16, 3.97270608116560655612e18)),
)  # fmt: skip


def _p1evl(m, x, coeffs):
    """Cephes' p1evl: polevl with a leading coefficient 1."""
    return _polevl(m, x, (1.0,) + coeffs)


def _jy_far(m, x, n: int, y: bool):
    """J_n(x) (Y_n(x) if ``y``) for x > 5, n = 0, 1: Hankel's asymptotic form."""
    pp, pq, qp, qq = _JY_FAR[n]
    z = m.div(m.c(25.0), m.mul(x, x))
    p = m.div(_polevl(m, z, pp), _polevl(m, z, pq))
    q = m.mul(m.div(m.c(5.0), x), m.div(_polevl(m, z, qp), _p1evl(m, z, qq)))
    xn = m.sub(x, m.c(np.pi / 4 if n == 0 else 3 * np.pi / 4))
    s, c = m.sin(xn), m.cos(xn)
    r = m.add(m.mul(p, s), m.mul(q, c)) if y else m.sub(m.mul(p, c), m.mul(q, s))
    return m.div(m.mul(r, m.c(np.sqrt(2 / np.pi))), m.sqrt(x))


def _j_near(m, x, n: int):
    """J_n(x) for 0 <= x <= 5: (x^2 - z1)(x^2 - z2) R(x^2) (times x for n = 1)."""
    rp, rq, (z1, z2) = _J_NEAR[n]
    z = m.mul(x, x)
    r = m.div(m.mul(m.sub(z, m.c(z1)), m.sub(z, m.c(z2))), _p1evl(m, z, rq))
    r = m.mul(r, _polevl(m, z, rp))
    return m.mul(r, x) if n else r


def _bessel_j(m, x, n: int):
    """J_n(|x|) (Cephes' j0, j1)."""
    ax = m.abs(x)
    return m.sel(m.cmp("ole", ax, m.c(5.0)), _j_near(m, ax, n), _jy_far(m, ax, n, False))


def bessel_j0(m, x):
    """The Bessel function of the first kind J0 (Cephes' j0)."""
    return _bessel_j(m, x, 0)


def bessel_j1(m, x):
    """The Bessel function of the first kind J1 (Cephes' j1; odd)."""
    r = _bessel_j(m, x, 1)
    return m.sel(m.cmp("olt", x, m.c(0.0)), m.neg(r), r)


def _bessel_y(m, x, n: int):
    """Y_n(x) (Cephes' y0, y1): -inf at 0, NaN below."""
    yp, yq = _Y_NEAR[n]
    r = m.div(_polevl(m, m.mul(x, x), yp), _p1evl(m, m.mul(x, x), yq))
    j_log = m.mul(_bessel_j(m, x, n), m.log(x))
    if n:
        r, j_log = m.mul(r, x), m.sub(j_log, m.div(m.c(1.0), x))
    near = m.add(r, m.mul(m.c(2 / np.pi), j_log))
    out = m.sel(m.cmp("ole", x, m.c(5.0)), near, _jy_far(m, x, n, True))
    out = m.sel(m.cmp("oeq", x, m.c(0.0)), m.c(-np.inf), out)
    return m.sel(m.cmp("olt", x, m.c(0.0)), m.c(np.nan), out)


def bessel_y0(m, x):
    """The Bessel function of the second kind Y0 (Cephes' y0)."""
    return _bessel_y(m, x, 0)


def bessel_y1(m, x):
    """The Bessel function of the second kind Y1 (Cephes' y1)."""
    return _bessel_y(m, x, 1)


def spherical_bessel_j0(m, x):
    """sin(x) / x, by its Taylor series below 1/2 (as torch); 0 at +-inf."""
    z = m.mul(x, x)
    series = m.add(
        m.c(1.0), m.mul(z, _poly(m, z, [(-1) ** (k + 1) / factorial(2 * k + 3) for k in range(6)]))
    )
    out = m.sel(m.cmp("olt", m.abs(x), m.c(0.5)), series, m.div(m.sin(x), x))
    return m.sel(m.cmp("oeq", m.abs(x), m.c(np.inf)), m.c(0.0), out)


# --- Cephes: the Hurwitz zeta function ------------------------------------------------------
_MACHEP = 1.11022302462515654042e-16  # Cephes' (and torch's) convergence threshold
# Euler-Maclaurin's divisors (2j)! / B_2j, Cephes zeta's A[]
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
           7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
           -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)  # fmt: skip
# The direct sum runs at most this long: torch's runs 9 terms and on while q + k <= 9, so
# this covers q > -23; below, where torch sums |q| terms, the result is NaN
_ZETA_TERMS = 32


def zeta(m, x, q):
    """The Hurwitz zeta function, sum over k >= 0 of (q + k)^-x, as Cephes' zeta (torch's
    Math.h): the direct sum until its terms fall below MACHEP times it, or else up to
    q + k > 9 (9 terms at least) and Euler-Maclaurin's tail (12 terms at most). Its loops
    are unrolled to their bounds, each step selected while its loop would still run; inf
    at x = 1 and at q = 0, -1, ...; NaN for x < 1 and for q < 0 with x non-integral."""
    one, zero, nine = m.c(1.0), m.c(0.0), m.c(9.0)
    s, a, b, done = m.pow(q, m.neg(x)), q, zero, None
    for i in range(_ZETA_TERMS):
        a1 = m.add(a, one)
        b1 = m.pow(a1, m.neg(x))
        s1 = m.add(s, b1)
        tol = m.mul(m.c(_MACHEP), s1)
        conv = m.both(m.cmp("olt", m.neg(tol), b1), m.cmp("olt", b1, tol))
        if i >= 9:  # the loop runs on while a <= 9
            runs = m.cmp("ole", a, nine)
            a1, b1, s1 = (m.sel(runs, new, old) for new, old in ((a1, a), (b1, b), (s1, s)))
            conv = m.both(runs, conv)
        if done is not None:
            a1, b1, s1 = (m.sel(done, old, new) for new, old in ((a1, a), (b1, b), (s1, s)))
        a, b, s = a1, b1, s1
        done = conv if done is None else m.either(done, conv)
    w, xm1 = a, m.sub(x, one)
    s = m.sel(done, s, m.sub(m.add(s, m.div(m.mul(b, w), xm1)), m.mul(m.c(0.5), b)))
    a, k = one, zero
    for coef in _ZETA_A:
        a = m.mul(a, m.add(x, k))
        b = m.div(b, w)
        t = m.div(m.mul(a, b), m.c(coef))
        s = m.sel(done, s, m.add(s, t))
        done = m.either(done, m.cmp("olt", m.abs(m.div(t, s)), m.c(_MACHEP)))
        k = m.add(k, one)
        a = m.mul(a, m.add(x, k))
        b = m.div(b, w)
        k = m.add(k, one)
    neg_q = m.cmp("ole", q, zero)
    out = m.sel(m.both(m.cmp("olt", q, m.c(-_ZETA_TERMS + 9.0)), neg_q), m.c(np.nan), s)
    out = m.sel(neg_q, m.sel(m.cmp("oeq", x, m.floor(x)), out, m.c(np.nan)), out)
    out = m.sel(m.both(neg_q, m.cmp("oeq", q, m.floor(q))), m.c(np.inf), out)
    out = m.sel(m.cmp("olt", x, one), m.c(np.nan), out)
    return m.sel(m.cmp("oeq", x, one), m.c(np.inf), out)


# --- Cephes: the Airy function Ai -----------------------------------------------------------
# Cephes airy's rationals (highest degree first): Ai(x) for x >= 2.09 in 1/zeta, and the
# modulus and phase corrections below -2.09 in z^2, z = 1 / zeta, zeta = 2/3 |x|^(3/2)
_AIRY_AN = (3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
            1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
            1.40264691163389668864e+01, 9.99999999999999995305e-01)  # fmt: skip
_AIRY_AD = (5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
            1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
            1.40959135607834029598e+01, 1.00000000000000000470e+00)  # fmt: skip
_AIRY_AFN = (-1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
             -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
             -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08)  # fmt: skip
_AIRY_AFD = (1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
             9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
             4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07)  # fmt: skip
_AIRY_AGN = (1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
             9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
             5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
             8.11789239554389293311e-08, 3.41551784765923618484e-10)  # fmt: skip
_AIRY_AGD = (9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
             5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
             4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
             4.91834570062930015649e-09)  # fmt: skip
_AIRY_TERMS = 12  # the Maclaurin series' terms z^j / (3j)! fall below MACHEP by j = 9 at |x| = 2.09


def airy_ai(m, x):
    """Ai(x), Cephes' airy as torch's: the Maclaurin series on (-2.09, 2.09) (its loop
    unrolled, each step selected while torch's would still run), asymptotic rationals
    beyond; 0 past 103.892, NaN at +-inf."""
    one = m.c(1.0)
    ax = m.abs(x)
    zeta = m.div(m.mul(m.mul(m.c(2.0), ax), m.sqrt(ax)), m.c(3.0))
    # x <= -2.09: the modulus and phase (torch's polevl loops start from 0: the zero term
    # is harmless, Horner's from the leading coefficient is the same sum)
    z = m.div(one, zeta)
    z2 = m.mul(z, z)
    f = m.add(one, m.div(m.mul(z2, _polevl(m, z2, _AIRY_AFN)), _polevl(m, z2, _AIRY_AFD)))
    g = m.div(m.mul(z, _polevl(m, z2, _AIRY_AGN)), _polevl(m, z2, _AIRY_AGD))
    t = m.add(zeta, m.c(0.25 * np.pi))
    amp = m.div(m.c(_SQRPI), m.sqrt(m.sqrt(ax)))
    neg = m.mul(amp, m.sub(m.mul(m.sin(t), f), m.mul(m.cos(t), g)))
    # x >= 2.09
    ratio = m.div(_polevl(m, z, _AIRY_AN), _polevl(m, z, _AIRY_AD))
    pos = m.div(m.mul(m.c(_SQRPI), ratio), m.mul(m.mul(m.c(2.0), m.sqrt(m.sqrt(x))), m.exp(zeta)))
    # |x| < 2.09: Ai = c1 f - c2 g, f and g the series in x^3
    f, g, k, a, b, t = one, x, one, one, x, one
    cube = m.mul(m.mul(x, x), x)
    for _ in range(_AIRY_TERMS):
        runs = m.cmp("ogt", t, m.c(_MACHEP))
        a1 = m.div(m.div(m.mul(a, cube), m.add(k, one)), m.add(k, m.c(2.0)))
        b1 = m.div(m.div(m.mul(b, cube), m.add(k, m.c(2.0))), m.add(k, m.c(3.0)))
        f1, g1 = m.add(f, a1), m.add(g, b1)
        a, b, f, g = (m.sel(runs, new, old) for new, old in ((a1, a), (b1, b), (f1, f), (g1, g)))
        k = m.add(k, m.c(3.0))
        t = m.sel(runs, m.abs(m.div(a, f)), t)
    series = m.sub(m.mul(m.c(0.355028053887817239260), f), m.mul(m.c(0.258819403792806798405), g))
    out = m.sel(m.cmp("olt", x, m.c(-2.09)), neg, series)
    out = m.sel(m.cmp("ole", m.c(2.09), x), pos, out)
    out = m.sel(m.cmp("ogt", x, m.c(103.892)), m.c(0.0), out)
    return m.sel(m.cmp("oeq", ax, m.c(np.inf)), m.c(np.nan), out)
