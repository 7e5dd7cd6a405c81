"""float64 math from arithmetic, for IREE's llvm-cpu backend.

IREE approximates math.sin/cos/atan/... with polynomials in f32 only; in f64 it leaves them
as calls to libm's ``sin``, ``atan2``, ``fmod``…, which its embedded ELF linker cannot
resolve (``--iree-llvmcpu-link-embedded=false`` links a system shared library against the
host's libm instead, but needs a system linker at compile time and gives up the portable
executable format; ``--iree-link-bitcode`` links bitcode one supplies, but IREE ships no
libm bitcode and building one needs clang). f64 ``math.exp``,
``math.log``, ``math.sqrt``, ``math.fma`` and rounding do compile (within 1 ulp), so these
functions are written with them, branch-free (selects), in the body of one linalg.generic:

* sin, cos, tan: Cody-Waite reduction by pi/2 split in three doubles (n from x 2/pi as a
  double-double, the first product exact through an FMA, the second as a double-double),
  then fdlibm's kernel polynomials. Within 1 ulp of NumPy (tan: 2) for |x| < 2**52; NaN
  from 2**52 on, where n no longer fits a double (that needs Payne-Hanek reduction with
  ~1100 bits of 2/pi, not implemented): never a wrong number.
* atan (fdlibm's, reduced over five intervals), atan2 (atan of |y/x| and the quadrant, with
  IEEE's signed zeros and infinities), asin and acos (fdlibm's rational approximations).
* fmod, remainder: exact (IREE's CPU code flushes subnormals to 0 in every op: a subnormal
  operand or result reads as 0). One FMA step ``r - q * y`` is exact while the
  quotient is below 2**52 (q is then the floor or one more, and the result fits in a
  double); 42 such steps by ``y * 2**(52 k)``, largest first, cover any exponent gap.
* expm1, log1p: Kahan's and Goldberg's corrections of exp/log (IREE expands them as
  ``exp(x) - 1`` and ``log(1 + x)``, a thousand ulp off near 0); sinh through expm1 near 0.
* complex128 exp, expm1, log, log1p, sqrt, rsqrt, sin, cos, tan, tanh, sinh, cosh and
  angle from these, for the complex dialect's forms lower to the same f64 libm calls.

Each function is ``fn(e, d, *xs) -> scalar`` like the tables of ``elementwise.py``, for
``d`` of 64 bits (callers dispatch by width).
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from .emitter import elem_type

_PIO2 = (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33)  # pi/2 split
_TWO_OVER_PI = (0.6366197723675814, -3.935735335036497e-17)
_TRIG_MAX = 2.0**52  # sin/cos/tan of larger |x| (where n no longer fits) are NaN
_TINY = 2.0**-27  # below this sin(x) == x, tan(x) == x, atan(x) == x in double


class Scalar:
    """Emit f64 scalar arithmetic in the current body: ``s.add(a, b)`` etc. return SSA names."""

    def __init__(self, e, d):
        self.e, self.d, self.t = e, d, elem_type(d)

    def c(self, v) -> str:
        return self.e.const(v, self.d)

    def _f(self, op, *xs) -> str:
        return self.e.emit(f"{op} {', '.join(xs)} : {self.t}")

    def add(self, a, b):
        return self._f("arith.addf", a, b)  # noqa: E704

    def sub(self, a, b):
        return self._f("arith.subf", a, b)  # noqa: E704

    def mul(self, a, b):
        return self._f("arith.mulf", a, b)  # noqa: E704

    def div(self, a, b):
        return self._f("arith.divf", a, b)  # noqa: E704

    def fma(self, a, b, c):
        return self._f("math.fma", a, b, c)  # noqa: E704

    def neg(self, a):
        return self._f("arith.negf", a)  # noqa: E704

    def abs(self, a):
        return self._f("math.absf", a)  # noqa: E704

    def sqrt(self, a):
        return self._f("math.sqrt", a)  # noqa: E704

    def exp(self, a):
        return self._f("math.exp", a)  # noqa: E704

    def log(self, a):
        return self._f("math.log", a)  # noqa: E704

    def cosh(self, a):
        return self._f("math.cosh", a)  # noqa: E704

    def trunc(self, a):
        return self._f("math.trunc", a)  # noqa: E704

    def floor(self, a):
        return self._f("math.floor", a)  # noqa: E704

    def round(self, a):
        return self._f("math.roundeven", a)  # noqa: E704

    def copysign(self, a, b):
        return self._f("math.copysign", a, b)  # noqa: E704

    def max(self, a, b):
        return self._f("arith.maximumf", a, b)  # noqa: E704

    def cmp(self, pred, a, b) -> str:
        return self.e.emit(f"arith.cmpf {pred}, {a}, {b} : {self.t}")

    def isnan(self, a) -> str:
        return self.cmp("uno", a, a)

    def sel(self, cond, a, b) -> str:
        return self.e.emit(f"arith.select {cond}, {a}, {b} : {self.t}")

    def both(self, a, b) -> str:
        return self.e.emit(f"arith.andi {a}, {b} : i1")

    def either(self, a, b) -> str:
        return self.e.emit(f"arith.ori {a}, {b} : i1")

    def not_(self, a) -> str:
        return self.e.emit(f"arith.xori {a}, {self.e.emit('arith.constant true')} : i1")

    def signbit(self, a) -> str:
        """The sign bit of ``a`` as i1 (true for -0.0 and negative NaNs too)."""
        bits = self.e.emit(f"arith.bitcast {a} : {self.t} to i64")
        return self.e.emit(f"arith.cmpi slt, {bits}, {self.e.const(0, dt.int64)} : i64")

    def high_word(self, a) -> str:
        """``a`` with its low 32 bits cleared (fdlibm's SET_LOW_WORD(a, 0))."""
        bits = self.e.emit(f"arith.bitcast {a} : {self.t} to i64")
        hi = self.e.emit(f"arith.andi {bits}, {self.e.const(-(1 << 32), dt.int64)} : i64")
        return self.e.emit(f"arith.bitcast {hi} : i64 to {self.t}")

    def poly(self, x, coeffs) -> str:
        """coeffs[0] + x * (coeffs[1] + x * (...)) by Horner's rule with FMAs."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

    def pick(self, conds_values, default) -> str:
        """The value of the first true condition, else ``default`` (nested selects)."""
        out = default
        for cond, v in reversed(conds_values):
            out = self.sel(cond, v, out)
        return out


# --- sin, cos, tan ---------------------------------------------------------------------
_S = (
    -1.66666666666666324348e-01,
    8.33333333332248946124e-03,
    -1.98412698298579493134e-04,
    2.75573137070700676789e-06,
    -2.50507602534068634195e-08,
    1.58969099521155010221e-10,
)
_C = (
    4.16666666666666019037e-02,
    -1.38888888888741095749e-03,
    2.48015872894767294178e-05,
    -2.75573143513906633035e-07,
    2.08757232129817482790e-09,
    -1.13596475577881948265e-11,
)


def _reduce_pio2(s: Scalar, x):
    """(r_hi, r_lo, n mod 4 as a double): x = n pi/2 + r, |r| <~ pi/4, r as a double-double."""
    p = s.mul(x, s.c(_TWO_OVER_PI[0]))  # x 2/pi == p + p_lo, nearly exactly
    p_lo = s.fma(x, s.c(_TWO_OVER_PI[1]), s.fma(x, s.c(_TWO_OVER_PI[0]), s.neg(p)))
    n = s.round(p)
    n = s.add(n, s.round(s.add(s.sub(p, n), p_lo)))  # the nearest integer, past 2**40 too
    r1 = s.fma(s.neg(n), s.c(_PIO2[0]), x)  # exact: both are multiples of 2**-52
    t_hi = s.mul(n, s.c(_PIO2[1]))
    t_lo = s.fma(n, s.c(_PIO2[1]), s.neg(t_hi))  # n * P2 == t_hi + t_lo exactly
    y = s.sub(r1, t_hi)  # two-sum: r1 - t_hi == y + err
    bb = s.sub(y, r1)
    err = s.add(s.sub(r1, s.sub(y, bb)), s.neg(s.add(t_hi, bb)))
    tail = s.sub(s.sub(err, t_lo), s.mul(n, s.c(_PIO2[2])))
    hi = s.add(y, tail)
    lo = s.sub(tail, s.sub(hi, y))
    q = s.sub(n, s.mul(s.c(4.0), s.floor(s.mul(n, s.c(0.25)))))
    return hi, lo, q


def _k_sin(s: Scalar, x, y):
    """fdlibm's __kernel_sin(x, y, 1): sin(x + y) for |x| <= pi/4, y the tail of x."""
    z = s.mul(x, x)
    v = s.mul(z, x)
    r = s.poly(z, _S[1:])
    inner = s.sub(s.mul(z, s.sub(s.mul(s.c(0.5), y), s.mul(v, r))), y)
    return s.sub(x, s.sub(inner, s.mul(v, s.c(_S[0]))))


def _k_cos(s: Scalar, x, y):
    """FreeBSD's __kernel_cos(x, y): cos(x + y) for |x| <= pi/4."""
    z = s.mul(x, x)
    w = s.mul(z, z)
    r = s.add(s.mul(z, s.poly(z, _C[:3])), s.mul(s.mul(w, w), s.poly(z, _C[3:])))
    hz = s.mul(s.c(0.5), z)
    w = s.sub(s.c(1.0), hz)
    return s.add(w, s.add(s.sub(s.sub(s.c(1.0), w), hz), s.sub(s.mul(z, r), s.mul(x, y))))


def sincos(e, d, x):
    """(sin x, cos x) sharing one argument reduction."""
    s = Scalar(e, d)
    hi, lo, q = _reduce_pio2(s, x)
    sn, cs = _k_sin(s, hi, lo), _k_cos(s, hi, lo)
    quad = [s.cmp("oeq", q, s.c(k)) for k in (1.0, 2.0, 3.0)]
    sin = s.pick(list(zip(quad, (cs, s.neg(sn), s.neg(cs)))), sn)
    cos = s.pick(list(zip(quad, (s.neg(sn), s.neg(cs), sn))), cs)
    tiny = s.cmp("olt", s.abs(x), s.c(_TINY))  # keeps -0.0 and subnormals exact
    big = s.cmp("uge", s.abs(x), s.c(_TRIG_MAX))
    sin, cos = s.sel(big, s.c(np.nan), sin), s.sel(big, s.c(np.nan), cos)
    return s.sel(tiny, x, sin), s.sel(tiny, s.c(1.0), cos)


def sin(e, d, x):
    return sincos(e, d, x)[0]


def cos(e, d, x):
    return sincos(e, d, x)[1]


def tan(e, d, x):
    s = Scalar(e, d)
    hi, lo, q = _reduce_pio2(s, x)
    sn, cs = _k_sin(s, hi, lo), _k_cos(s, hi, lo)
    odd = s.either(s.cmp("oeq", q, s.c(1.0)), s.cmp("oeq", q, s.c(3.0)))
    t = s.sel(odd, s.neg(s.div(cs, sn)), s.div(sn, cs))
    t = s.sel(s.cmp("uge", s.abs(x), s.c(_TRIG_MAX)), s.c(np.nan), t)
    return s.sel(s.cmp("olt", s.abs(x), s.c(_TINY)), x, t)


# --- atan, atan2, asin, acos -------------------------------------------------------------
_ATAN_HI = (
    4.63647609000806093515e-01,
    7.85398163397448278999e-01,
    9.82793723247329054082e-01,
    1.57079632679489655800e00,
)
_ATAN_LO = (
    2.26987774529616870924e-17,
    3.06161699786838301793e-17,
    1.39033110312309984516e-17,
    6.12323399573676603587e-17,
)
_AT = (
    3.33333333333329318027e-01,
    -1.99999999998764832476e-01,
    1.42857142725034663711e-01,
    -1.11111104054623557880e-01,
    9.09088713343650656196e-02,
    -7.69187620504482999495e-02,
    6.66107313738753120669e-02,
    -5.83357013379057348645e-02,
    4.97687799461593236017e-02,
    -3.65315727442169155270e-02,
    1.62858201153657823623e-02,
)
_PI_LO = 1.2246467991473532e-16  # pi - float(pi)


def _atan_abs(s: Scalar, a):
    """fdlibm's atan for a >= 0 (or NaN): atan(a) = hi + atan(t), t reduced over 5 ranges."""
    one = s.c(1.0)
    ranges = [s.cmp("olt", a, s.c(b)) for b in (0.4375, 0.6875, 1.1875, 2.4375)]
    num = s.pick(
        list(zip(ranges, (a, s.fma(s.c(2.0), a, s.c(-1.0)), s.sub(a, one), s.sub(a, s.c(1.5))))),
        s.c(-1.0),
    )
    den = s.pick(
        list(zip(ranges, (one, s.add(s.c(2.0), a), s.add(a, one), s.fma(s.c(1.5), a, one)))), a
    )
    t = s.div(num, den)
    hi = s.pick(list(zip(ranges, (s.c(0.0), *map(s.c, _ATAN_HI[:3])))), s.c(_ATAN_HI[3]))
    lo = s.pick(list(zip(ranges, (s.c(0.0), *map(s.c, _ATAN_LO[:3])))), s.c(_ATAN_LO[3]))
    z = s.mul(t, t)
    w = s.mul(z, z)
    s1 = s.mul(z, s.poly(w, _AT[0::2]))
    s2 = s.mul(w, s.poly(w, _AT[1::2]))
    return s.sub(hi, s.sub(s.sub(s.mul(t, s.add(s1, s2)), lo), t))


def atan(e, d, x):
    s = Scalar(e, d)
    ax = s.abs(x)
    r = s.copysign(_atan_abs(s, ax), x)
    return s.sel(s.cmp("olt", ax, s.c(_TINY)), x, r)


def atan2(e, d, y, x):
    """atan2 with C99's special values: signed zeros, infinities, NaN."""
    s = Scalar(e, d)
    ax, ay = s.abs(x), s.abs(y)
    inf = s.c(np.inf)
    z = _atan_abs(s, s.div(ay, ax))
    both_zero = s.both(s.cmp("oeq", ax, s.c(0.0)), s.cmp("oeq", ay, s.c(0.0)))
    both_inf = s.both(s.cmp("oeq", ax, inf), s.cmp("oeq", ay, inf))
    z = s.pick([(both_zero, s.c(0.0)), (both_inf, s.c(np.pi / 4))], z)
    z = s.sel(s.signbit(x), s.sub(s.c(np.pi), s.sub(z, s.c(_PI_LO))), z)
    upright = s.either(
        s.both(s.cmp("oeq", ax, s.c(0.0)), s.cmp("one", ay, s.c(0.0))),
        s.both(s.cmp("oeq", ay, inf), s.cmp("one", ax, inf)),
    )
    z = s.sel(upright, s.c(np.pi / 2), z)  # exactly, whatever x's sign
    r = s.copysign(z, y)
    return s.sel(s.either(s.isnan(x), s.isnan(y)), s.add(x, y), r)


_PS = (
    1.66666666666666657415e-01,
    -3.25565818622400915405e-01,
    2.01212532134862925881e-01,
    -4.00555345006794114027e-02,
    7.91534994289814532176e-04,
    3.47933107596021167570e-05,
)
_QS = (
    1.0,
    -2.40339491173441421878e00,
    2.02094576023350569471e00,
    -6.88283971605453293030e-01,
    7.70381505559019352791e-02,
)
_PIO2_HI, _PIO2_LO, _PIO4_HI = (
    1.57079632679489655800e00,
    6.12323399573676603587e-17,
    7.85398163397448278999e-01,
)


def _asin_r(s: Scalar, t):
    """fdlibm's R(t) = (asin(sqrt t) / sqrt t - 1) / t, a rational function."""
    return s.div(s.mul(t, s.poly(t, _PS)), s.poly(t, _QS))


def asin(e, d, x):
    s = Scalar(e, d)
    ax = s.abs(x)
    small = s.cmp("olt", ax, s.c(0.5))
    t = s.sel(small, s.mul(x, x), s.mul(s.sub(s.c(1.0), ax), s.c(0.5)))  # NaN beyond 1
    r = _asin_r(s, t)
    near = s.fma(x, r, x)  # |x| < 0.5
    sq = s.sqrt(t)
    far = s.sub(s.c(_PIO2_HI), s.sub(s.mul(s.c(2.0), s.fma(sq, r, sq)), s.c(_PIO2_LO)))
    w = s.high_word(sq)  # 0.5 <= |x| < 0.975
    c = s.div(s.sub(t, s.mul(w, w)), s.add(sq, w))
    p = s.sub(s.mul(s.mul(s.c(2.0), sq), r), s.sub(s.c(_PIO2_LO), s.mul(s.c(2.0), c)))
    q = s.sub(s.c(_PIO4_HI), s.mul(s.c(2.0), w))
    mid = s.sub(s.c(_PIO4_HI), s.sub(p, q))
    big = s.copysign(s.sel(s.cmp("oge", ax, s.c(0.975)), far, mid), x)
    return s.pick([(s.cmp("olt", ax, s.c(_TINY)), x), (small, near)], big)


def acos(e, d, x):
    s = Scalar(e, d)
    ax = s.abs(x)
    small = s.cmp("olt", ax, s.c(0.5))
    z = s.sel(small, s.mul(x, x), s.mul(s.sub(s.c(1.0), ax), s.c(0.5)))
    r = _asin_r(s, z)
    near = s.sub(s.c(_PIO2_HI), s.sub(x, s.sub(s.c(_PIO2_LO), s.mul(x, r))))
    sq = s.sqrt(z)
    neg = s.sub(s.c(np.pi), s.mul(s.c(2.0), s.add(sq, s.sub(s.mul(r, sq), s.c(_PIO2_LO)))))
    df = s.high_word(sq)
    c = s.div(s.sub(z, s.mul(df, df)), s.add(sq, df))
    pos = s.mul(s.c(2.0), s.add(df, s.fma(r, sq, c)))
    pos = s.sel(s.cmp("oeq", x, s.c(1.0)), s.c(0.0), pos)  # c would be 0/0
    return s.pick([(small, near), (s.cmp("olt", x, s.c(0.0)), neg)], pos)


# --- fmod --------------------------------------------------------------------------------
_FMOD_STEP = 52  # bits of quotient one exact FMA step removes
_FMOD_STEPS = 42  # 42 * 52 > 2098, the widest exponent gap of two finite doubles


def _fmod_scaled(s: Scalar, x, y):
    """(|fmod(x, y)| * scale, scale, NaN cases as i1), exact. The last step works on r and
    |y| scaled by 2**54 when |y| is within 2**54 of the subnormals: IREE's CPU code flushes
    subnormal results to 0, and r - q y may be one."""
    ax, ay = s.abs(x), s.abs(y)
    scales = [ay]
    for _ in range(_FMOD_STEPS - 1):  # ay * 2**(52 k): exact, or inf (then never used)
        scales.append(s.mul(scales[-1], s.c(2.0**_FMOD_STEP)))
    scale = s.sel(s.cmp("olt", ay, s.c(2.0**-968)), s.c(2.0**54), s.c(1.0))
    scales[0] = s.mul(ay, scale)
    r = ax
    for k in reversed(range(_FMOD_STEPS)):  # invariant: r < ys * 2**52
        ys = scales[k]
        if k == 0:
            r = s.mul(r, scale)
        q = s.trunc(s.div(r, ys))  # the floor of r / ys, or one more
        rr = s.fma(s.neg(q), ys, r)  # exact: a multiple of ulp(ys) below ys in size
        rr = s.sel(s.cmp("olt", rr, s.c(0.0)), s.add(rr, ys), rr)
        r = s.sel(s.cmp("ole", ys, r), rr, r)
    bad = s.either(s.cmp("oeq", ay, s.c(0.0)), s.cmp("oeq", ax, s.c(np.inf)))
    return r, scale, s.either(bad, s.either(s.isnan(x), s.isnan(y)))


def fmod(e, d, x, y):
    """C's fmod, exact: x - n y with n = trunc(x / y), the sign of x."""
    s = Scalar(e, d)
    r, scale, bad = _fmod_scaled(s, x, y)
    return s.sel(bad, s.c(np.nan), s.copysign(s.div(r, scale), x))


def remainder(e, d, x, y):
    """PyTorch's remainder (the sign of y): fmod, plus y where that is non-zero and its sign
    differs from y's (added before unscaling, so a subnormal fmod is not lost)."""
    s = Scalar(e, d)
    r, scale, bad = _fmod_scaled(s, x, y)
    r = s.copysign(r, x)
    differ = s.e.emit(f"arith.xori {s.signbit(r)}, {s.signbit(y)} : i1")
    fix = s.both(s.cmp("une", r, s.c(0.0)), differ)
    r = s.sel(fix, s.add(r, s.mul(y, scale)), r)
    return s.sel(bad, s.c(np.nan), s.div(r, scale))


# --- expm1, log1p ------------------------------------------------------------------------
def expm1(e, d, x):
    """Kahan: (u - 1) * x / log(u) for u = exp(x) rounded; x where u == 1, -1 where u == 0."""
    s = Scalar(e, d)
    u = s.exp(x)
    um1 = s.sub(u, s.c(1.0))
    r = s.mul(um1, s.div(x, s.log(u)))
    r = s.pick(
        [
            (s.cmp("oeq", u, s.c(1.0)), x),
            (s.cmp("oeq", um1, s.c(-1.0)), s.c(-1.0)),
            (s.cmp("oeq", u, s.c(np.inf)), u),
        ],
        r,
    )
    return r


def log1p(e, d, x):
    """Goldberg: log(u) * x / (u - 1) for u = 1 + x rounded; x where u == 1."""
    s = Scalar(e, d)
    u = s.add(s.c(1.0), x)
    r = s.mul(s.log(u), s.div(x, s.sub(u, s.c(1.0))))
    return s.pick([(s.cmp("oeq", u, s.c(1.0)), x), (s.cmp("oeq", u, s.c(np.inf)), u)], r)


def sinh(e, d, x):
    """(u + u / (u + 1)) / 2 for u = expm1(|x|) below 1, (E - 1 / E) / 2 for E = exp|x|
    above (E * E / 2 for E = exp(|x| / 2) past 709, where exp|x| overflows first); the sign
    of x (IREE expands sinh as (exp(x) - exp(-x)) / 2, thousands of ulp off near 0)."""
    s = Scalar(e, d)
    ax, half = s.abs(x), s.c(0.5)
    u = expm1(e, d, ax)
    near = s.mul(half, s.add(u, s.div(u, s.add(u, s.c(1.0)))))
    big = s.exp(ax)
    far = s.mul(half, s.sub(big, s.div(s.c(1.0), big)))
    root = s.exp(s.mul(ax, half))
    huge = s.mul(s.mul(half, root), root)
    r = s.pick([(s.cmp("olt", ax, s.c(1.0)), near), (s.cmp("olt", ax, s.c(709.0)), far)], huge)
    return s.copysign(r, x)


# --- complex128 --------------------------------------------------------------------------
# The complex dialect's exp, log, sqrt, sin... lower to the f64 math ops above; these build
# them from the real functions instead (d is complex128, s works on its float64 parts).
def _parts(e, d, z):
    return tuple(e.emit(f"complex.{p} {z} : {elem_type(d)}") for p in ("re", "im"))


def _make(e, d, re, im):
    return e.emit(f"complex.create {re}, {im} : {elem_type(d)}")


def _cabs(e, d, z):
    return e.emit(f"complex.abs {z} : {elem_type(d)}")


def cexp(e, d, z):
    s, (a, b) = Scalar(e, d.to_real()), _parts(e, d, z)
    ea = s.exp(a)
    sn, cs = sincos(e, d.to_real(), b)
    im = s.sel(s.cmp("oeq", b, s.c(0.0)), b, s.mul(ea, sn))  # exp(x + 0j) is real
    return _make(e, d, s.mul(ea, cs), im)


def cexpm1(e, d, z):
    """exp(z) - 1 with the real part expm1(a) cos b - 2 sin(b/2)**2 (no cancellation)."""
    s, r, (a, b) = Scalar(e, d.to_real()), d.to_real(), _parts(e, d, z)
    sn, cs = sincos(e, r, b)
    h = sin(e, r, s.mul(b, s.c(0.5)))
    re = s.sub(s.mul(expm1(e, r, a), cs), s.mul(s.c(2.0), s.mul(h, h)))
    im = s.sel(s.cmp("oeq", b, s.c(0.0)), b, s.mul(s.exp(a), sn))
    return _make(e, d, re, im)


def clog(e, d, z):
    """(log|z|, atan2(b, a)); near |z| == 1 the real part is log1p(a**2 - 1 + b**2) / 2."""
    s, r, (a, b) = Scalar(e, d.to_real()), d.to_real(), _parts(e, d, z)
    m = _cabs(e, d, z)
    near = s.mul(s.c(0.5), log1p(e, r, s.fma(b, b, s.fma(a, a, s.c(-1.0)))))
    ring = s.both(s.cmp("ogt", m, s.c(0.5)), s.cmp("olt", m, s.c(2.0)))
    return _make(e, d, s.sel(ring, near, s.log(m)), atan2(e, r, b, a))


def clog1p(e, d, z):
    """log(1 + z); the real part as log1p(2a + a**2 + b**2) / 2 near 0."""
    s, r, (a, b) = Scalar(e, d.to_real()), d.to_real(), _parts(e, d, z)
    a1 = s.add(a, s.c(1.0))
    near = s.mul(s.c(0.5), log1p(e, r, s.fma(a, s.add(a, s.c(2.0)), s.mul(b, b))))
    far = s.log(_cabs(e, d, _make(e, d, a1, b)))
    small = s.both(s.cmp("olt", s.abs(a), s.c(0.5)), s.cmp("olt", s.abs(b), s.c(0.5)))
    return _make(e, d, s.sel(small, near, far), atan2(e, r, b, a1))


def csqrt(e, d, z):
    """t = sqrt((|a| + |z|) / 2), then (t, b / 2t) for a >= 0 and (|b| / 2t, +-t) below."""
    s, (a, b) = Scalar(e, d.to_real()), _parts(e, d, z)
    t = s.sqrt(s.mul(s.add(s.abs(a), _cabs(e, d, z)), s.c(0.5)))
    other = s.div(b, s.mul(s.c(2.0), t))
    neg = s.cmp("olt", a, s.c(0.0))
    re = s.sel(neg, s.abs(other), t)
    im = s.sel(neg, s.copysign(t, b), other)
    zero = s.both(s.cmp("oeq", a, s.c(0.0)), s.cmp("oeq", b, s.c(0.0)))
    return _make(e, d, s.sel(zero, s.c(0.0), re), s.sel(zero, b, im))


def crsqrt(e, d, z):
    return e.emit(f"complex.div {e.const(1, d)}, {csqrt(e, d, z)} : {elem_type(d)}")


def _sin_cos_h(e, d, z, cos_: bool):
    """sin(a + ib) = (sin a cosh b, cos a sinh b); cos = (cos a cosh b, -sin a sinh b)."""
    s, r, (a, b) = Scalar(e, d.to_real()), d.to_real(), _parts(e, d, z)
    sn, cs = sincos(e, r, a)
    ch, sh = s.cosh(b), sinh(e, r, b)
    if cos_:
        return _make(e, d, s.mul(cs, ch), s.neg(s.mul(sn, sh)))
    return _make(e, d, s.mul(sn, ch), s.mul(cs, sh))


def _hyperbolic(e, d, z, cosh_: bool):
    """sinh(a + ib) = (sinh a cos b, cosh a sin b); cosh = (cosh a cos b, sinh a sin b)."""
    s, r, (a, b) = Scalar(e, d.to_real()), d.to_real(), _parts(e, d, z)
    sn, cs = sincos(e, r, b)
    ch, sh = s.cosh(a), sinh(e, r, a)
    im = s.mul(sh if cosh_ else ch, sn)
    im = s.sel(s.cmp("oeq", b, s.c(0.0)), s.mul(b, sh if cosh_ else s.c(1.0)), im)
    return _make(e, d, s.mul(ch if cosh_ else sh, cs), im)


def csinh(e, d, z):
    return _hyperbolic(e, d, z, False)


def ccosh(e, d, z):
    return _hyperbolic(e, d, z, True)


def csin(e, d, z):
    return _sin_cos_h(e, d, z, False)


def ccos(e, d, z):
    return _sin_cos_h(e, d, z, True)


def _tanh_parts(e, d, a, b):
    """Kahan's tanh(a + ib) on float64 parts: (beta rho s + i t) / (1 + beta s**2) with
    t = tan b, beta = 1 + t**2, s = sinh a, rho = sqrt(1 + s**2); past |a| = 22 the real
    part is +-1 and the imaginary 4 sin b cos b exp(-2|a|)."""
    s = Scalar(e, d)
    t, sh = tan(e, d, b), sinh(e, d, a)
    beta = s.fma(t, t, s.c(1.0))
    rho = s.sqrt(s.fma(sh, sh, s.c(1.0)))
    den = s.fma(s.mul(beta, sh), sh, s.c(1.0))
    re, im = s.div(s.mul(s.mul(beta, rho), sh), den), s.div(t, den)
    sn, cs = sincos(e, d, b)
    em = s.exp(s.neg(s.abs(a)))
    far = s.cmp("oge", s.abs(a), s.c(22.0))
    re = s.sel(far, s.copysign(s.c(1.0), a), re)
    im = s.sel(far, s.mul(s.mul(s.c(4.0), s.mul(sn, cs)), s.mul(em, em)), im)
    return re, im


def ctanh(e, d, z):
    a, b = _parts(e, d, z)
    return _make(e, d, *_tanh_parts(e, d.to_real(), a, b))


def ctan(e, d, z):
    """tan z = -i tanh(iz)."""
    s, (a, b) = Scalar(e, d.to_real()), _parts(e, d, z)
    re, im = _tanh_parts(e, d.to_real(), s.neg(b), a)
    return _make(e, d, im, s.neg(re))


def cangle(e, d, z):
    a, b = _parts(e, d, z)
    return atan2(e, d.to_real(), b, a)
