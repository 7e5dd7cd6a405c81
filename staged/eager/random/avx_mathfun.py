"""``log256_ps`` and ``sincos256_ps`` of avx_mathfun (Cephes polynomials, public domain) as
torch 2.13's AVX2 build compiled them into ``NormalFill16<float, true>``: float32
arithmetic with fused multiply-adds where GCC put ``vfmadd``/``vfnmadd``/``vfmsub``
(read from ``objdump -d libtorch_cpu.so``; a plain multiply-add changes about 1% of the
normals). Written for the inputs that kernel gives: ``log`` of ``1 - u`` in ``(0, 1]``,
``sincos`` of ``2 pi u`` in ``[0, 2 pi)``.
"""

from __future__ import annotations

import math

import numpy as np

from ...autodiff.fma import fma32_plain as fma32

f32, f64 = np.float32, np.float64
LOG_P = tuple(
    f32(np.uint32(b).view(f32))
    for b in (
        0x3D9021BB,
        0xBDEBD1B8,
        0x3DEF251A,
        0xBDFE5D4F,
        0x3E11E9BF,
        0xBE2AAE50,
        0x3E4CCEAC,
        0xBE7FFFFC,
        0x3EAAAAAA,
    )
)
LOG_Q1, LOG_Q2 = f32(-2.12194440e-4), f32(0.693359375)
SQRTHF = f32(0.707106781186547524)
_CARRY = 0x800000 - int(SQRTHF.view(np.int32) & 0x7FFFFF)  # see Note [log's exponent by a carry]
FOPI = f32(1.27323954473516)  # 4 / pi
MINUS_DP = (f32(-0.78515625), f32(-2.4187564849853515625e-4), f32(-3.77489497744594108e-8))
COSCOF = (f32(2.443315711809948e-5), f32(-1.388731625493765e-3), f32(4.166664568298827e-2))
SINCOF = (f32(-1.9515295891e-4), f32(8.3321608736e-3), f32(-1.6666654611e-1))
ONE, HALF = f32(1.0), f32(0.5)


def log(x: np.ndarray) -> np.ndarray:
    """``log256_ps`` of positive normal float32 ``x``."""
    e, x = _reduce(x)
    z = x * x
    y = _horner(x.astype(f64), LOG_P)
    y = fma32(y * x, z, e * LOG_Q1)
    # the last two fused multiply-adds have exact products: plain float32 rounds the same
    y -= z * HALF
    y += x
    e *= LOG_Q2
    y += e
    return y


def _reduce(x: np.ndarray) -> tuple:
    """``log256_ps``'s ``x = 2**e * (1 + f)`` with ``1 + f`` in ``[sqrt(1/2), sqrt(2))``:
    ``(e, f)``, float32, both exact.

    Note [log's exponent by a carry]: avx_mathfun takes the mantissa ``m`` in ``[0.5, 1)``
    and the exponent plus one, then subtracts 1 from the exponent and doubles ``m`` where
    ``m < SQRTHF``. Adding ``0x800000`` less SQRTHF's mantissa bits to the bits carries
    into the exponent field exactly where the mantissa bits are SQRTHF's or more, so one
    shift gives that ``e``; subtracting ``e`` from the exponent field then gives
    ``x / 2**e``."""
    bits = x.view(np.int32)
    e = bits + _CARRY
    e >>= 23
    e -= 127
    m = e << 23
    np.subtract(bits, m, out=m)
    f = m.view(f32)
    f -= ONE
    return e.astype(f32), f


def _horner(x64: np.ndarray, coefs) -> np.ndarray:
    """``fma(...fma(fma(c0, x, c1), x, c2)..., x, cn)`` for float32 ``x`` given in
    float64, each step ``fma32``'s arithmetic in two reused buffers: the float64 product
    (exact), the sum, rounded to float32 and back (no fresh arrays per step)."""
    y = x64 * f64(coefs[0])
    y32 = np.empty(y.shape, f32)
    for c in coefs[1:-1]:
        y += c
        np.copyto(y32, y, casting="unsafe")  # the step's rounding
        np.copyto(y, y32)
        y *= x64
    y += coefs[-1]
    np.copyto(y32, y, casting="unsafe")
    return y32


def sincos(x: np.ndarray) -> tuple:
    """``sincos256_ps`` of non-negative float32 ``x``: ``(sin, cos)``."""
    j = (((x * FOPI).astype(np.int32) + 1) & ~1).view(np.uint32)  # an even octant
    y = j.view(np.int32).astype(f32)
    sin_sign = (j & 4) << 29
    cos_sign = (~(j - 2) & 4) << 29
    x = (x + y * MINUS_DP[0]) + y * MINUS_DP[1]  # exact products (j < 9): fused or not
    x = fma32(y, MINUS_DP[2], x)
    z = x * x
    z64 = z.astype(f64)
    c = fma32(z, z * _horner(z64, COSCOF), -(z * HALF))
    c += ONE
    s = fma32(x, z * _horner(z64, SINCOF), x)
    sin_poly = ((j >> 1) & 1) - 1  # all ones where sin takes the sine polynomial
    ysin2 = (s.view(np.uint32) & sin_poly).view(f32)
    ysin1 = (c.view(np.uint32) & ~sin_poly).view(f32)
    sin = ysin2 + ysin1
    cos = (s - ysin2) + (c - ysin1)
    return ((sin.view(np.uint32) ^ sin_sign).view(f32), (cos.view(np.uint32) ^ cos_sign).view(f32))


# --- the fused kernels: the same numbers for normal.py's float32 block, in fewer passes ---
#
# Note [fused kernels]: ``log`` and ``sincos`` above transcribe the kernel plainly (they
# are the specification the tests hold these to); ``log_of_count`` and ``sincos_of_count``
# compute the same bits in fewer passes over memory and with no allocation: every array
# lives in ``Work`` buffers reused chunk after chunk (aligned to cache lines), each NumPy
# call writes in place where it can (an in-place pass costs about half what a pass into
# another array does) with a positional ``out`` and its constants as 0-d arrays of the
# operands' dtype (the cheapest calls),
# float32 arithmetic stays in float32, and a fused multiply-add ``fmaf(a, b, c)`` of
# float32s is ``a * b`` in float64 (exact), plus ``c`` (rounded to float64), rounded to
# float32 by one of:
#
# - Note [rounding by a magic constant]: adding ``M = 1.5 * 2**(e + 28)``, whose float64
#   last bit is float32's in the binade ``[2**(e-1), 2**e)``, rounds a sum to float32's
#   grid there in one step, ties to even (``M`` is an even number of those last bits, so
#   the parities agree), and subtracting ``M`` back is exact. ``c + M`` is exact too
#   (``c`` lies on that grid), so ``a * b + (c + M)`` rounds the exact ``a * b + c`` once:
#   ``fmaf`` itself, wherever the result stays in that binade, as it does for every input
#   of the steps that use it (``_STEP``). One pass fewer than the next.
# - Note [rounding by the bits]: adding ``2**28`` to a float64's bits and clearing the 29
#   low ones rounds its magnitude to 24 significant bits, ties away from zero (a carry out
#   of the mantissa moves to the next binade): float64 -> float32 -> float64 in two
#   in-place integer passes, for results that cross binades: the log polynomial's steps,
#   and sincos256_ps's float32 products ``z * (polynomial)`` (exact in float64 first).
#   It differs from the casts on a float64 exactly halfway between two float32s: over all
#   inputs, 29 of the log polynomial's steps and 14 of those products round such a tie
#   the other way, and every one of those inputs still ends with the same logarithm,
#   cosine and sine (the next steps round the difference away).
# - Note [one product for fmaf(a, b, c a)]: sincos256_ps ends with ``fmaf(z, h, -z / 2)``
#   and ``fmaf(x, h, x)``, which are ``z * (h - 1/2)`` and ``x * (h + 1)``. In float64
#   ``h - 1/2`` and ``h + 1`` are exact unless ``|h| < 2**-29``, and then the one product
#   rounds to the float64 of ``a * b + c`` above (below that, it still rounds to the same
#   float32): one pass fewer than the multiply and the add.
# - Note [the octant in one sum]: sincos256_ps's even octant is ``2k`` with
#   ``k = (int(t) + 1) >> 1``, ``t = x * 4/pi``: ``floor(t / 2 + 1/2)``, where ``t / 2`` is
#   exact and adding 1/2 rounds only for ``t < 1``, up to 1 only from ``t = 1 - 2**-24``,
#   which no input reaches.
#
# All this holds for every input a kernel can get, as checked: each kernel is elementwise
# in one 24-bit count, and for all 2**24 counts its bits equal ``log``'s and ``sincos``'s
# (whose own fused multiply-adds are exact for them: see the tests, which check every
# 251st count).

_U64, _I32, _U32 = np.uint64, np.int32, np.uint32
_ADD_HALF, _TO_24_BITS = np.array(1 << 28, _U64), np.array(2**64 - 2**29, _U64)


def _magic(e: int) -> float:
    """Note [rounding by a magic constant]'s ``M`` for results in ``[2**(e-1), 2**e)``."""
    return 1.5 * 2.0 ** (e + 28)


def _c(v, dtype=f32) -> np.ndarray:
    return np.array(v, dtype)


# the binade exponent (``frexp``'s) of each magic-rounded step's result, for every input
_STEP = {"log 8": -1, "cos 1": -9, "cos 2": -4, "sin 1": -6, "sin 2": -2}
_LOG_P64 = [_c(c, f64) for c in LOG_P[:-1]]
_LOG_P8 = (_c(float(LOG_P[-1]) + _magic(_STEP["log 8"]), f64), _c(_magic(_STEP["log 8"]), f64))


def _rows(cos_v, sin_v) -> np.ndarray:
    """A float64 column for the stacked polynomials: the cosine's row, then the sine's."""
    return np.array([[cos_v], [sin_v]], f64)


_TRIG0 = _rows(COSCOF[0], SINCOF[0])
_TRIG = [  # steps 1 and 2: (coefficient + M, M)
    (_rows(COSCOF[i], SINCOF[i]) + m, m)
    for i in (1, 2)
    for m in [_rows(_magic(_STEP[f"cos {i}"]), _magic(_STEP[f"sin {i}"]))]
]
# ``x = w * 2**-24`` (``w`` the count of ``1 - u``): its exponent is ``w``'s less 24
_BIAS, _MBIAS = _c(_CARRY - (151 << 23), _I32), _c(0x3F800000 - _CARRY, _I32)
_LOW23, _I23, _I31 = (_c(v, _I32) for v in (0x7FFFFF, 23, 31))
_ONE, _HALF32, _Q1 = _c(1.0), _c(0.5), _c(LOG_Q1)
_TWO_PI_PER_COUNT = _c(2 * np.pi * 2.0**-24)  # float32(2 pi) * 2**-24
_HALF_FOPI = _c(FOPI * HALF)
# octant j = 2k: y * DP_i = k * (2 DP_i), exact
_DP2 = (_c(2 * MINUS_DP[0]), _c(2 * MINUS_DP[1]), _c(2 * float(MINUS_DP[2]), f64))
_FMA_SHIFT = _rows(-0.5, 1.0)  # fmaf(z, h, -z / 2) = z (h - 1/2), fmaf(x, h, x) = x (h + 1)
_SIGN = _c(-(2**31), _I32)
_Q2_HALF = np.array([[LOG_Q2], [HALF]], f32)  # e * q2 and z / 2 at once
_TO_SIGN_BIT = np.array([[31], [30]], _U32)  # k's bit 0, and bits 1 and 0, to bits 31 and 30


def aligned(shape, dtype) -> np.ndarray:
    """An empty array whose data starts on a 64-byte boundary: a cache line, and an
    AVX-512 vector. NumPy's large arrays start 16 bytes past one, so that every vector of
    a pass straddles two lines (passes over such arrays run 10-25 % slower)."""
    d = np.dtype(dtype)
    size = math.prod(shape) * d.itemsize
    raw = np.empty(size + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start : start + size].view(d).reshape(shape)


class Work:
    """Scratch arrays for ``k`` blocks of 16 lanes (``n = 8k`` per lane half) and the views
    the kernels use; ``view(k)`` gives a smaller chunk's views of the same buffers."""

    def __init__(self, k: int, base: Work | None = None):
        n = 8 * k
        self.k, self.n = k, n
        if base is None:
            self._f64 = aligned((4, n), f64)
            self._f32 = aligned((7, n), f32)
            self._i32 = aligned((2, n), _I32)
            self._last: Work | None = None  # the last smaller chunk's views
        b = base or self
        f64s, f32s, i32s = b._f64[:, :n], b._f32[:, :n], b._i32[:, :n]
        # the views each chunk uses, made once (each costs about a NumPy call)
        self.H, self.A = f64s[:2], f64s[2:]  # float64 pairs of rows
        self.h, self.a = tuple(self.H), tuple(self.A)  # their rows
        self.H_bits, self.y_bits = self.H.view(_U64), self.h[1].view(_U64)
        self.lanes = f32s[:2]  # the uniforms' counts: [u1 lanes, u2 lanes]
        self.F = f32s[2:4]  # [cosine, sine] results
        self.F_bits = self.F.view(_I32)
        self.f_bits = tuple(self.F_bits)
        self.t = tuple(f32s[4:7])
        self.t_low, self.t_pair = f32s[4:6], f32s[5:7]  # t[0:2] and t[1:3]
        self.signs = self.t_low.view(_U32)  # _octants' sign bits
        self.sign_rows = tuple(self.t_low.view(_I32))
        self.odd = self.t[2].view(_I32)
        self.ints = i32s
        self.i = tuple(i32s)
        self.x = self.i[0].view(f32)  # log_of_count's reduced argument
        self.k_u32 = self.i[1].view(_U32)  # the octants

    def view(self, k: int) -> Work:
        if self._last is None or self._last.k != k:
            self._last = Work(k, self)
        return self._last


def log_of_count(w: np.ndarray, work: Work) -> np.ndarray:
    """``log256_ps(w * 2**-24)`` (``log`` of ``1 - u``) for float32 integers ``w`` in
    ``[1, 2**24]``, written over ``w``."""
    x64, y = work.h
    bits, e_bits = work.i
    e, z, eq = work.t
    np.add(w.view(_I32), _BIAS, bits)  # Note [log's exponent by a carry]
    np.right_shift(bits, _I23, e_bits)
    np.copyto(e, e_bits, casting="unsafe")
    np.bitwise_and(bits, _LOW23, bits)
    np.add(bits, _MBIAS, bits)
    x = work.x
    np.subtract(x, _ONE, x)
    np.copyto(x64, x)
    np.multiply(x64, _LOG_P64[0], y)
    ybits = work.y_bits
    for c in _LOG_P64[1:]:  # Horner's rule, each step rounded by the bits
        np.add(y, c, y)
        np.add(ybits, _ADD_HALF, ybits)
        np.bitwise_and(ybits, _TO_24_BITS, ybits)
        np.multiply(y, x64, y)
    np.add(y, _LOG_P8[0], y)  # the last step rounded by a magic constant
    np.subtract(y, _LOG_P8[1], y)
    p = w
    np.copyto(p, y, casting="unsafe")  # exact
    np.multiply(p, x, p)
    np.multiply(x, x, z)
    np.multiply(e, _Q1, eq)
    z64, eq64 = work.a
    np.copyto(y, p)
    np.copyto(work.A, work.t_pair)
    np.multiply(y, z64, y)
    np.add(y, eq64, y)
    np.copyto(p, y, casting="unsafe")  # fmaf(p, z, e * q1), as fma32_plain
    np.multiply(work.t_low, _Q2_HALF, work.t_low)  # e * q2, z / 2
    # the last two fused multiply-adds have exact products: plain float32 rounds the same
    np.subtract(p, z, p)
    np.add(p, x, p)
    np.add(p, e, p)
    return p


def sincos_of_count(kk: np.ndarray, work: Work) -> tuple:
    """``sincos256_ps`` of ``float32(2 pi) * (kk * 2**-24)`` for float32 integers ``kk`` in
    ``[0, 2**24)`` (clobbered): ``work.F``, the cosines then the sines, and the sign bits
    (int32) to flip in both (``_octants``)."""
    t, kf, xx = work.t
    j = work.i[1]
    x = kk
    np.multiply(x, _TWO_PI_PER_COUNT, x)  # a power of two's scaling commutes with the rounding
    np.multiply(x, _HALF_FOPI, kf)  # x * 4/pi, halved: exact
    np.add(kf, _HALF32, kf)
    np.floor(kf, kf)  # Note [the octant in one sum]
    np.copyto(j, kf, casting="unsafe")
    np.multiply(kf, _DP2[0], xx)
    np.add(xx, x, xx)  # exact (Sterbenz: x and k * 2 DP0 are within a factor of 2)
    np.multiply(kf, _DP2[1], t)
    np.add(xx, t, xx)
    A = work.A
    z64, xx64 = work.a
    np.copyto(A, work.t_pair)  # k, xx
    np.multiply(z64, _DP2[2], z64)
    np.add(xx64, z64, xx64)
    np.copyto(xx, xx64, casting="unsafe")  # fmaf(y, dp3, x), as fma32_plain
    np.copyto(xx64, xx)
    z = t
    np.multiply(xx, xx, z)
    np.copyto(z64, z)
    H, F = work.H, work.F
    np.multiply(z64, _TRIG0, H)  # both polynomials at once, their steps magic-rounded
    np.add(H, _TRIG[0][0], H)
    np.subtract(H, _TRIG[0][1], H)
    np.multiply(H, z64, H)
    np.add(H, _TRIG[1][0], H)
    np.subtract(H, _TRIG[1][1], H)
    np.multiply(H, z64, H)  # z * (the polynomial), rounded by the bits
    hbits = work.H_bits
    np.add(hbits, _ADD_HALF, hbits)
    np.bitwise_and(hbits, _TO_24_BITS, hbits)
    np.add(H, _FMA_SHIFT, H)
    np.multiply(H, A, H)  # Note [one product for fmaf(a, b, c a)]
    np.copyto(F, H, casting="unsafe")
    c = F[0]
    np.add(c, _ONE, c)
    return F, _octants(j, work)


def _octants(k: np.ndarray, work: Work) -> np.ndarray:
    """Turn ``work.F``'s polynomials ``(c, s)`` by ``k`` (``work.i[1]``, clobbered) quarter
    turns, the octant ``2k``'s cosines and sines: a quarter turn where ``k`` is odd,
    ``(-s, c)``, done in ``F``; the half turn where ``k`` has bit 1 set, ``(-c, -s)``,
    returned as sign bits to flip in whatever multiplies both. sincos256_ps adds 0 to the polynomial it picks first, which
    would turn a -0 into +0: neither polynomial is -0 for any input, so that is left out."""
    np.left_shift(work.k_u32, _TO_SIGN_BIT, work.signs)
    odd_sign, half = work.sign_rows  # k's bit 0 at the sign bit; its bit 1 there once masked
    np.bitwise_and(half, _SIGN, half)
    odd = work.odd
    np.right_shift(odd_sign, _I31, odd)  # all ones where k is odd
    c, s = work.f_bits
    swap = k
    np.bitwise_xor(c, s, swap)
    np.bitwise_and(swap, odd, swap)
    np.bitwise_xor(work.F_bits, swap, work.F_bits)
    np.bitwise_xor(c, odd_sign, c)
    return half
