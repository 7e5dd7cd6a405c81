"""torch's CPU distributions (ATen/core/DistributionsHelper.h, TransformationHelper.h and
the kernels of ATen/native/cpu) drawn from a ``Generator``: each returns a tensor's values
in the order torch fills them, as a flat NumPy array (shared/notes/RNG.md).
"""

from __future__ import annotations

import math

import numpy as np

from . import libm, normal
from ...autodiff.fma import fma32, fma32_plain, fma64

U64 = np.uint64


def uniform(gen, n: int, dtype, low=0.0, high=1.0) -> np.ndarray:
    """``uniform_(low, high)``: ``fma(u, high - low, low)`` in the dtype (float16 in float32),
    a value that rounds up to ``high`` replaced by ``low``."""
    d = np.dtype(dtype)
    wide = np.float64 if d == np.float64 else np.float32
    u = gen.uniform(n, wide)
    lo, hi = wide(low), wide(high)
    fma = (
        (lambda a, b, c: a)
        if (low, high) == (0.0, 1.0)
        else fma64
        if wide is np.float64
        else _fma32_exact
        if _exact32(hi - lo, lo)
        else fma32_plain
        if _exact_sum(hi - lo, lo)
        else fma32
    )  # u * 1 + 0 is u
    top = fma(np.array([_TOP[wide]], wide), hi - lo, lo).astype(d)[0]  # the largest value
    for i in range(0, n, _CHUNK):  # in place, a chunk at a time: its temporaries in cache
        u[i : i + _CHUNK] = fma(u[i : i + _CHUNK], hi - lo, lo)
    out = u.astype(d, copy=False)
    if top == d.type(high):  # monotone in u: only then can any value round up to high
        out[out == d.type(high)] = d.type(low)
    return out


_TOP = {np.float32: np.float32(1 - 2**-24), np.float64: 1 - 2**-53}  # the largest u
_CHUNK = 1 << 16


def _exact32(width, low) -> bool:
    """Whether ``u * width + low`` is exact in float32 for every float32 uniform ``u`` (so
    plain float32 arithmetic is ``fmaf``): ``width`` a power of two makes the product
    exact, and the sums are multiples of the smaller last bit (``u * width``'s or
    ``low``'s) no larger than the larger end of the range, which 24 bits hold."""
    m, ew = math.frexp(float(width))
    if m != 0.5 or not math.isfinite(low):
        return False
    step = ew - 1 - 24  # u * width: a multiple of 2**step
    if low:
        ml, el = math.frexp(float(low))
        bits = int(abs(ml) * 2**24)
        step = min(step, el - 24 + (bits & -bits).bit_length() - 1)
    top = math.frexp(max(abs(float(low)), abs(float(low) + float(width) * (1 - 2**-24))))[1]
    return top - step <= 24


def _fma32_exact(u, width, low):
    """``fmaf(u, width, low)`` where float32 arithmetic is exact (``_exact32``)."""
    u = u * width
    u += low
    return u


def _exact_sum(width, low) -> bool:
    """Whether every ``u * width + low`` (``u`` a float32 uniform: a multiple of 2**-24)
    is exact in float64, so that rounding it to float32 is ``fmaf``: its bits lie between
    ``width``'s last bit times 2**-24 (or ``low``'s last bit) and one above the larger's
    top bit (a carry)."""
    if low == 0:
        return True
    ew, el = (math.frexp(float(v))[1] for v in (width, low))  # top bits: 2**(e - 1)
    return max(ew, el) + 1 - min(ew - 48, el - 24) <= 53


def normals(gen, n: int, dtype, mean=0.0, std=1.0, contiguous=True) -> np.ndarray:
    """``normal_(mean, std)`` of a tensor of ``n`` elements (Note in normal.py)."""
    if contiguous and n >= 16:
        return normal.block(gen, n, dtype, mean, std)
    return normal.serial(gen, n, mean, std).astype(dtype, copy=False)


def integers(gen, n: int, low: int, high: int) -> np.ndarray:
    """``random_(low, high)`` as int64: ``random64() % range + low`` for ranges of 2**28
    or more (the 2.13 binary's threshold), ``random() % range + low`` below; a range of
    2**64 takes ``random64()`` whole."""
    span = high - low
    if span == 2**64:
        return gen.random64(n).view(np.int64)
    v = gen.random64(n) if span >= 2**28 else gen.random(n).astype(U64)
    return (v % U64(span) + U64(low % 2**64)).view(np.int64)


def random_bits(gen, n: int, dtype) -> np.ndarray:
    """``random_()`` without bounds: ``[0, 2**digits]`` for floats, ``[0, max]`` for
    integers, random64 for int64 and float64, random otherwise."""
    d = np.dtype(dtype)
    v = gen.random64(n) if d in (np.int64, np.float64) else gen.random(n).astype(U64)
    if d == np.bool_:
        return (v & U64(1)).astype(d)
    floats = {"float16": 2**11 + 1, "bfloat16": 2**8 + 1, "float32": 2**24 + 1}
    top = floats.get(d.name, 2**53 + 1) if d.kind in "fV" else int(np.iinfo(d).max) + 1
    return (v % U64(top)).astype(d)


def randperm(gen, n: int) -> np.ndarray:
    """``randperm(n)``: ``for i < n - 1: swap(a[i], a[i + random() % (n - i)])`` on
    ``a = arange(n)``, resolved without a loop. Step ``i`` moves to ``i`` the value its
    target ``j[i]`` holds then: the value that the last earlier step with the same target
    moved there, which is what that step's own position held at its turn, and so on back
    to a position no earlier step targeted, whose value is its own index."""
    if n >= 2**32 // 20:
        raise NotImplementedError("randperm: n >= 214748364 takes torch's other algorithm")
    i = np.arange(n, dtype=np.int64)
    if n < 2:
        return i
    j = i.copy()
    j[:-1] += (gen.random(n - 1) % np.arange(n, 1, -1, dtype=np.uint32)).astype(np.int64)
    key = np.sort(j * n + i)  # steps by target, then by turn
    target = key // n
    turn = key - target * n
    same = np.empty(n, bool)
    same[0], same[1:] = False, target[1:] == target[:-1]
    prev = np.empty(n, np.int64)  # the last earlier step with the same target, or -1
    prev[turn] = np.where(same, np.roll(turn, 1), -1)
    hits = np.bincount(j, minlength=n)
    last = turn[np.cumsum(hits) - 1]  # the last step that targets each position
    src = np.where(hits == 0, -1, np.where(last == i, prev, last))  # ... before its turn
    root = np.where(src < 0, i, src)
    moving = np.flatnonzero(src >= 0)
    while moving.size:  # pointer jumping to the first step of each chain
        nxt = root[root[moving]]
        moved = nxt != root[moving]
        root[moving] = nxt
        moving = moving[moved]
    return np.where(prev < 0, j, root[np.maximum(prev, 0)])


def bernoulli(gen, p: np.ndarray) -> np.ndarray:
    """``bernoulli_(p)`` for an array ``p`` (flat, in fill order): ``u < p``, float64
    uniforms for float64 ``p``, float32 ones otherwise."""
    if p.dtype == np.float64:
        return gen.uniform(p.size, np.float64) < p.ravel()
    return gen.uniform(p.size, np.float32) < p.astype(np.float32).ravel()


def bernoulli_scalar(gen, n: int, p: float) -> np.ndarray:
    """``n`` draws of ``bernoulli_(p)`` for a float ``p`` in [0, 1]: ``u_double < p``,
    compared as integers: ``u`` is ``m * 2**-53`` for the low 53 bits ``m`` of
    ``random64()``, so ``u < p`` is ``m < ceil(p * 2**53)`` (scaling by a power of two is
    exact), without converting ``m`` to float."""
    m = gen.random64(n)
    m &= U64(2**53 - 1)
    return m < U64(math.ceil(float(p) * 2**53))


def exponential(gen, n: int, lambd: float) -> np.ndarray:
    """``exponential_(lambd)``: ``(-1 / lambd) * log1p(-u)`` in float64."""
    return (-1.0 / lambd) * libm.log1p(-gen.uniform(n, np.float64))


def geometric(gen, n: int, p: float) -> np.ndarray:
    """``geometric_(p)``: ``ceil(log(u) / log1p(-p))`` in float64."""
    with np.errstate(divide="ignore"):
        return np.ceil(libm.log(gen.uniform(n, np.float64)) / math.log1p(-p))


def cauchy(gen, n: int, median: float, sigma: float) -> np.ndarray:
    """``cauchy_(median, sigma)``: ``median + sigma * tan(pi * (u - 0.5))`` in float64."""
    t = libm.tan(math.pi * (gen.uniform(n, np.float64) - 0.5))
    return fma64(np.float64(sigma), t, np.float64(median))


def log_normal(gen, n: int, mean: float, std: float) -> np.ndarray:
    """``log_normal_(mean, std)``: ``exp`` of serial float64 normals."""
    return libm.exp(normal.serial(gen, n, mean, std))
