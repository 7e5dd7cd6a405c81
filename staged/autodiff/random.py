"""A counter-based random number primitive, bit-identical in NumPy and in compiled code.

Note [counter-based RNG]: ``uniform(state)`` is a pure function of a generator state
``(seed, counter)`` (an int64 tensor of shape (2,)) and of each element's flat index: a
32-bit integer hash (two rounds of Wellons' ``lowbias32`` keyed by seed and counter) of
the index, scaled to ``[0, 1)``. Nothing hidden: the caller advances the counter in place
after each draw, so a captured step reads the state as a state input and writes the
advanced counter back (Note [state] in ``tracing/capture.py``). Eager and compiled runs
from the same seed therefore draw the same numbers, and every call draws new ones.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .avals import Aval, ShapeError
from .primitive import Primitive

GOLDEN = 0x9E3779B9
MIX = (16, 0x7FEB352D, 15, 0x846CA68B, 16)  # shift, multiply, shift, multiply, shift


def mix(x):
    """Wellons' lowbias32 on uint32 arrays (wrapping arithmetic)."""
    s1, m1, s2, m2, s3 = MIX
    x = x ^ (x >> np.uint32(s1))
    x = x * np.uint32(m1)
    x = x ^ (x >> np.uint32(s2))
    x = x * np.uint32(m2)
    return x ^ (x >> np.uint32(s3))


def keys(seed_lo, seed_hi, ctr_lo, ctr_hi, xor, mix):
    """The two 32-bit round keys of a stream, written once for both NumPy and MLIR."""
    k0 = mix(xor(seed_lo, mix(xor(seed_hi, GOLDEN))))
    return k0, mix(xor(ctr_lo, mix(xor(ctr_hi, k0))))


def element(index, k0, k1, xor, add, mix):
    """The 32 random bits of element ``index``."""
    return mix(add(mix(xor(index, k1)), k0))


def mantissa_bits(d) -> int:
    """Bits of randomness a float of dtype ``d`` holds exactly in [0, 1)."""
    return {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 32}[d.name]


def _uniform(state, *, shape, dtype):
    words = np.asarray(state).view(np.uint64)
    lo, hi = (words & 0xFFFFFFFF).astype(np.uint32), (words >> 32).astype(np.uint32)
    u32 = np.uint32
    k0, k1 = keys(lo[:1], hi[:1], lo[1:], hi[1:], np.bitwise_xor, mix)
    index = np.arange(int(np.prod(shape)), dtype=u32)
    bits = mantissa_bits(dtype)
    h = element(index, k0, k1, np.bitwise_xor, np.add, mix) >> u32(32 - bits)
    return (h.astype(dtype.np) * dtype.np.type(2.0**-bits)).reshape(shape)


def _uniform_rule(state, *, shape, dtype):
    if state.shape != (2,) or state.dtype is not dt.int64:
        raise ShapeError(
            f"uniform: the generator state must be int64[2] (seed, counter), got {state}"
        )
    if not dtype.is_floating_point:
        raise ShapeError(f"uniform: a floating dtype is needed, got {dtype.name}")
    return Aval(tuple(shape), dtype)


uniform = Primitive("uniform", _uniform, _uniform_rule)
