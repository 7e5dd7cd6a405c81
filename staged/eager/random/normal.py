"""torch's normal draws (``normal_kernel`` in ATen/native/cpu/DistributionTemplates.h).

A contiguous tensor of 16 or more elements takes the block path: all its uniforms first,
then Box-Muller on blocks of 16 (lanes 0-7 ``u1``, lanes 8-15 ``u2``; cosines to the first
half, sines to the second); when 16 does not divide the size, 16 fresh uniforms redo the
last 16 elements. float32 runs avx_mathfun's polynomials, float64 the C library's.
Anything else draws serially: pairs of float64 uniforms, the cosine returned and the sine
cached in the generator for the next serial draw, whatever its tensor.
"""

from __future__ import annotations

import math

import numpy as np

from . import avx_mathfun, libm
from .fma import fma32, fma64

_TWO_PI32 = np.float32(2 * math.pi)
CHUNK = 4096  # blocks of 16 computed at once


def _fill16_float32(u, mean, std):
    r = np.sqrt(np.float32(-2) * avx_mathfun.log(np.float32(1) - u[:, 0]))
    sin, cos = avx_mathfun.sincos(_TWO_PI32 * u[:, 1])
    mean, std = np.float32(mean), np.float32(std)
    return np.stack([fma32(r * cos, std, mean), fma32(r * sin, std, mean)], axis=1)


def _fill16_float64(u, mean, std):
    r = np.sqrt(-2 * libm.log(1 - u[:, 0]))
    theta = 2 * math.pi * u[:, 1]
    return np.stack(
        [fma64(r * libm.cos(theta), std, mean), fma64(r * libm.sin(theta), std, mean)], axis=1
    )


def block(gen, n: int, dtype, mean: float, std: float) -> np.ndarray:
    """``n >= 16`` normals of a contiguous tensor: float64, or float32 (float16 and bfloat16
    too, rounded at the end; they draw each block's uniforms in turn, so only whole blocks
    before the last 16)."""
    d = np.dtype(dtype)
    wide = np.float64 if d == np.float64 else np.float32
    fill16 = _fill16_float64 if wide is np.float64 else _fill16_float32
    whole = n // 16 * 16
    u = gen.uniform(n if d == wide else whole, wide)[:whole].reshape(-1, 2, 8)
    out = np.empty(n, wide)
    for i in range(0, len(u), CHUNK):  # blocks that stay in cache: several times faster
        out[16 * i : 16 * (i + len(u[i : i + CHUNK]))] = fill16(u[i : i + CHUNK], mean, std).ravel()
    if n != whole:
        out[n - 16 :] = fill16(gen.uniform(16, wide).reshape(1, 2, 8), mean, std).ravel()
    return out.astype(d, copy=False)


def serial(gen, n: int, mean: float, std: float) -> np.ndarray:
    """``n`` float64 normals from ``at::normal_distribution<double>``, using and leaving the
    generator's cached sine."""
    cached = [] if gen.normal_cache is None else [gen.normal_cache]
    pairs = max(n - len(cached) + 1, 0) // 2
    u = gen.uniform(2 * pairs, np.float64).reshape(pairs, 2)
    theta = 2 * math.pi * u[:, 0]
    r = np.sqrt(-2 * libm.log1p(-u[:, 1]))
    z = np.concatenate(
        [cached, np.stack([r * libm.cos(theta), r * libm.sin(theta)], axis=1).ravel()]
    )
    gen.normal_cache = z[n] if len(z) > n else None
    return fma64(z[:n], std, mean)
