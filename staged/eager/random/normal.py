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
from ...autodiff.fma import fma32, fma64

_TWO_PI32 = np.float32(2 * math.pi)
CHUNK = 4096  # blocks of 16 computed at once


def _fill16_float32(u, out, mean, std):
    """Blocks of 16 normals into ``out`` (``(k, 2, 8)``: cosines, then sines) from their
    uniforms by lane half ``u`` (``_lanes``), with avx_mathfun's polynomials."""
    r = avx_mathfun.log(np.float32(1) - u[0])
    r *= np.float32(-2)
    np.sqrt(r, out=r)
    sin, cos = avx_mathfun.sincos(_TWO_PI32 * u[1])
    for half, trig in enumerate((cos, sin)):
        trig *= r
        _affine32(trig, std, mean, out[:, half])


def _affine32(x, std, mean, out):
    """``out[...] = fmaf(x, std, mean)``: with ``std`` 1 that is ``x + mean`` rounded once,
    a float32 sum (which turns -0 into +0 for ``mean`` 0, as ``fmaf``)."""
    std, mean = np.float32(std), np.float32(mean)
    if std == 1:
        np.add(x, mean, out=out)
    else:
        out[...] = fma32(x, std, mean)


def _fill16_float64(u, out, mean, std):
    """``_fill16_float32`` in float64, with the C library's functions."""
    r = np.sqrt(-2 * libm.log(1 - u[0]))
    theta = 2 * math.pi * u[1]
    out[:, 0] = fma64(r * libm.cos(theta), std, mean)
    out[:, 1] = fma64(r * libm.sin(theta), std, mean)


def block(gen, n: int, dtype, mean: float, std: float) -> np.ndarray:
    """``n >= 16`` normals of a contiguous tensor: float64, or float32 (float16 and bfloat16
    too, rounded at the end; they draw each block's uniforms in turn, so only whole blocks
    before the last 16)."""
    d = np.dtype(dtype)
    wide = np.float64 if d == np.float64 else np.float32
    fill16 = _fill16_float64 if wide is np.float64 else _fill16_float32
    whole = n // 16 * 16
    out = np.empty(n, wide)
    blocks = out[:whole].reshape(-1, 2, 8)
    # a chunk of blocks at a time, its uniforms drawn for it (the same stream): all its
    # temporaries stay in cache, and none is as large as the tensor (several times faster)
    for i in range(0, len(blocks), CHUNK):
        b = blocks[i : i + CHUNK]
        fill16(_lanes(gen, len(b), wide), b, mean, std)
    if n != whole:
        if d == wide:
            gen.uniform(n - whole, wide)  # drawn with the rest, then redrawn below
        fill16(_lanes(gen, 1, wide), out[n - 16 :].reshape(1, 2, 8), mean, std)
    return out.astype(d, copy=False)


def _lanes(gen, k: int, wide) -> np.ndarray:
    """The uniforms of ``k`` blocks by lane half, ``(2, k, 8)``: ``[0]`` the ``u1`` lanes,
    ``[1]`` the ``u2`` ones (float32 made contiguous as they are converted)."""
    if wide is np.float32:
        return gen.uniform32((k, 2, 8), (1, 0, 2))
    return gen.uniform(16 * k, wide).reshape(k, 2, 8).transpose(1, 0, 2)


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
