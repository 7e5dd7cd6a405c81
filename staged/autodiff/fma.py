"""Fused multiply-add, ``fma(a, b, c) = a * b + c`` rounded once, on NumPy arrays (torch's
random streams, and the special functions whose torch kernels are compiled with FMA).

torch's AVX2 kernels compute with FMA instructions: a multiply then an add rounds twice
and differs in the last bit about half the time. float32: ``a * b`` is exact in float64
and so, mostly, is the sum; rounding that to float32 is then right unless the float64 sum
was itself rounded onto a float32 halfway point, where its exact error breaks the tie.
float64: Boldo and Melquiond's emulation (2008): ``a * b = uh + ul`` and
``c + uh = th + tl`` exactly, ``v`` the sum ``tl + ul`` rounded to odd, ``th + v``.
"""

from __future__ import annotations

import numpy as np

_LOW29 = np.uint64(2**29 - 1)  # float64 bits below float32's last mantissa bit
_HALF29 = np.uint64(2**28)
_SPLIT = 134217729.0  # 2 ** 27 + 1: Veltkamp's splitter for float64


def _two_sum(a, b):
    """``s = a + b`` rounded and its exact error ``e`` (``a + b = s + e``)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _toward(s, e):
    """``s`` moved one float64 step toward ``s + e`` where ``e`` is not 0."""
    return np.where(e == 0, s, np.nextafter(s, np.copysign(np.inf, e)))


def _product64(a, b) -> np.ndarray:
    """``a * b`` in a new float64 array (exact for float32 operands, one of them of the
    result's shape): that one converted, then multiplied in place (cheaper than a ufunc
    casting both operands: up to 4x for 32K elements)."""
    if np.shape(a) != np.broadcast_shapes(np.shape(a), np.shape(b)):
        a, b = b, a
    s = np.asarray(a).astype(np.float64)
    s *= b
    return s


def fma32_plain(a, b, c) -> np.ndarray:
    """``a * b + c`` for float32 operands, summed in float64 and rounded to float32:
    ``fmaf`` wherever that sum is not an inexact float32 halfway point."""
    s = _product64(a, b)
    s += c
    return s.astype(np.float32)


def fma32(a, b, c) -> np.ndarray:
    """``fmaf(a, b, c)`` elementwise for float32 operands (arrays or scalars)."""
    s = _product64(a, b)
    s += c  # exact for c == 0, so no halfway point to fix (and -0 + 0 is +0, as fmaf)
    if np.ndim(c) or c != 0:
        tie = (s.view(np.uint64) & _LOW29) == _HALF29
        if tie.any():
            p = np.multiply(a, b, dtype=np.float64)
            cc = np.broadcast_to(c, s.shape)[tie].astype(np.float64)
            s[tie] = _toward(s[tie], _two_sum(np.broadcast_to(p, s.shape)[tie], cc)[1])
    return s.astype(np.float32)


def _two_product(a, b):
    """``p = a * b`` rounded and its exact error (Dekker, with Veltkamp's split)."""
    p = a * b
    t = a * _SPLIT
    ah = t - (t - a)
    t = b * _SPLIT
    bh = t - (t - b)
    al, bl = a - ah, b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def fma64(a, b, c) -> np.ndarray:
    """``fma(a, b, c)`` elementwise for float64 operands (finite, no underflow)."""
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    uh, ul = _two_product(a, b)
    th, tl = _two_sum(c, uh)
    v, e = _two_sum(tl, ul)
    even = (v.view(np.uint64) & np.uint64(1)) == 0
    v = np.where(even, _toward(v, e), v)  # rounded to odd
    return th + v


def fma64_total(a, b, c) -> np.ndarray:
    """``fma64`` where it is finite, ``a * b + c`` where not (an infinity or NaN among the
    operands or the result, which the error-free transformations turn into NaN)."""
    out = fma64(a, b, c)
    return np.where(np.isfinite(out), out, np.multiply(a, b) + c)
