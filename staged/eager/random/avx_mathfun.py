"""``log256_ps`` and ``sincos256_ps`` of avx_mathfun (Cephes polynomials, public domain) as
torch 2.13's AVX2 build compiled them into ``NormalFill16<float, true>``: float32
arithmetic with fused multiply-adds where GCC put ``vfmadd``/``vfnmadd``/``vfmsub``
(read from ``objdump -d libtorch_cpu.so``; a plain multiply-add changes about 1% of the
normals). Written for the inputs that kernel gives: ``log`` of ``1 - u`` in ``(0, 1]``,
``sincos`` of ``2 pi u`` in ``[0, 2 pi)``.
"""

from __future__ import annotations

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
