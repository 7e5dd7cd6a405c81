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
import sys
import threading

import numpy as np

from . import avx_mathfun, libm
from ...autodiff.fma import fma32, fma64

CHUNK = 4096  # blocks of 16 computed at once: fewer NumPy calls, work arrays near cache
_MASK24 = np.array(0x00FFFFFF00FFFFFF, np.uint64)  # a float32 uniform's 24 bits, twice
_FIRST = int(sys.byteorder == "little")  # where random64()'s first draw lies in its words
_TWO24 = np.array(2**24, np.float32)
_MINUS_TWO = np.array(-2.0, np.float32)
_VOID32 = np.dtype((np.void, 32))  # the 8 lanes of a block's half, moved as one item
_work = threading.local()


def block(gen, n: int, dtype, mean: float, std: float) -> np.ndarray:
    """``n >= 16`` normals of a contiguous tensor: float64, or float32 (float16 and bfloat16
    too, rounded at the end; they draw each block's uniforms in turn, so only whole blocks
    before the last 16)."""
    d = np.dtype(dtype)
    wide = np.float64 if d == np.float64 else np.float32
    fill = _fill_float64 if wide is np.float64 else _fill_float32
    whole = n // 16 * 16
    out = np.empty(n, wide)
    # a chunk of blocks at a time, its uniforms drawn for it (the same stream): all its
    # temporaries stay in cache, and none is as large as the tensor (several times faster)
    fill(gen, out[:whole].reshape(-1, 2, 8), mean, std)
    if n != whole:
        if d == wide:
            gen.uniform(n - whole, wide)  # drawn with the rest, then redrawn below
        fill(gen, out[n - 16 :].reshape(1, 2, 8), mean, std)
    return out.astype(d, copy=False)


def _fill_float32(gen, blocks: np.ndarray, mean: float, std: float) -> None:
    """Blocks of 16 float32 normals into ``blocks`` (``(k, 2, 8)``: cosines, then sines)
    with avx_mathfun's polynomials (Note [fused kernels] in avx_mathfun.py), a chunk at a
    time in this thread's work arrays (about 2 MB, kept for the next call)."""
    full = getattr(_work, "full", None)
    if full is None or full.k != CHUNK:
        full = _work.full = avx_mathfun.Work(CHUNK)
    std32, mean32 = np.float32(std), np.float32(mean)
    plain = std32 == 1 and mean32 == 0  # randn: Note [fmaf(x, 1, 0)]
    plus_zero = not np.signbit(mean32)
    for i in range(0, len(blocks), CHUNK):
        b = blocks[i : i + CHUNK]
        work = full if len(b) == CHUNK else full.view(len(b))
        _counts(gen, work)
        w, kk = work.lanes
        np.subtract(_TWO24, w, w)  # 1 - u, times 2**24
        r = avx_mathfun.log_of_count(w, work)
        np.multiply(r, _MINUS_TWO, r)
        np.sqrt(r, r)
        affine = not plain or (plus_zero and r.min() == 0)
        trig, flip = avx_mathfun.sincos_of_count(kk, work)
        r_bits = r.view(np.int32)
        np.bitwise_xor(r_bits, flip, r_bits)  # (c ^ s) * r = c * (r ^ s): sign bits s
        np.multiply(trig, r, trig)
        if affine:
            _affine32(trig, std32, mean32, trig)
        halves = b.view(_VOID32).reshape(-1, 2)
        for h, row in enumerate(trig.view(_VOID32)):  # a 1-D copy each: a 2-D one loops on pairs
            np.copyto(halves[:, h], row)


def _counts(gen, work) -> None:
    """The chunk's uniforms as float32 counts ``u * 2**24`` into ``work.lanes`` by lane half.
    ``random64()`` is two ``random()`` draws in one call of the bit generator (several
    times faster than ``random()``'s one each), the first in the high half: each pair of
    words is swapped back as the counts are converted."""
    w = gen.random64(work.n)
    words, lanes = work.ints, work.lanes
    np.copyto(words.view(_VOID32).reshape(2, -1), w.view(_VOID32).reshape(-1, 2).T)
    np.bitwise_and(words.view(np.uint64), _MASK24, words.view(np.uint64))  # aligned there
    np.copyto(lanes[:, 0::2], words[:, _FIRST::2], casting="unsafe")
    np.copyto(lanes[:, 1::2], words[:, 1 - _FIRST :: 2], casting="unsafe")


# Note [fmaf(x, 1, 0)]: randn's affine step, fmaf(x, 1, 0) = x + 0, only turns -0 into +0
# (and x + -0 is x itself). A cosine or sine times r is 0 only where r is 0: the only zero
# cosine or sine, over all inputs, is the sine of the count 0, +0, with a + sign. So that
# pass runs only for a chunk where some r is 0.


def _affine32(x, std, mean, out):
    """``out[...] = fmaf(x, std, mean)`` (float32 ``std`` and ``mean``): with ``std`` 1 that
    is ``x + mean`` rounded once, a float32 sum (which turns -0 into +0 for ``mean`` 0)."""
    if std == 1:
        np.add(x, np.array(mean), out)
    else:
        out[...] = fma32(x, std, mean)


def _fill_float64(gen, blocks: np.ndarray, mean: float, std: float) -> None:
    """``_fill_float32`` in float64, with the C library's functions."""
    for i in range(0, len(blocks), CHUNK):
        b = blocks[i : i + CHUNK]
        u = gen.uniform(16 * len(b), np.float64).reshape(-1, 2, 8)
        r = np.sqrt(-2 * libm.log(1 - u[:, 0]))
        theta = 2 * math.pi * u[:, 1]
        b[:, 0] = fma64(r * libm.cos(theta), std, mean)
        b[:, 1] = fma64(r * libm.sin(theta), std, mean)


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
