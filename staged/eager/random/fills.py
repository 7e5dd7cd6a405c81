"""A tensor's worth of draws: a distribution's values in the order torch fills the tensor
(a strided tensor in memory order, as TensorIterator walks it; complex ones through their
real view), laid out in its shape. ``p`` is the array to fill like: the tensor's payload
(``like(t)``), or ``New(shape, dtype)`` (or an empty array) standing for a new tensor.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as dt
from ..._where import warn_user
from . import distributions as D


def check_floating(d, kernel: str) -> None:
    """The error torch's dispatch gives ``kernel`` for a dtype ``d`` outside its float types."""
    if not (d.is_floating_point or d.is_complex):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{d.title}'")


DIGITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}  # mantissa digits


def update_bound(v: int, step: int, d) -> int:
    """torch's update_from (``step=1``) and update_to (``step=-1``): a bound moved to the
    nearest int64 that stays inside the range once cast to the float dtype ``d``."""
    cast = float(d.np.type(v + step))
    if not math.isfinite(cast):
        return v  # out of the dtype's range: check_range says so
    cast = int(cast)
    if (cast < v) if step > 0 else (cast >= v):
        n = abs(v + step).bit_length() - 1
        return cast + step * (1 << (n - DIGITS[d.name] + 1))
    return v


def int_range(low: int, high: int, d) -> tuple[int, int]:
    """The bounds ``random_(low, high)`` draws a tensor of dtype ``d`` in, with torch's
    checks: moved inside what a float dtype holds (``update_bound``)."""
    low, high = int(low), int(high)
    if not low < high:
        raise RuntimeError(
            f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
        )
    if d.is_floating_point:
        low, high = update_bound(low, 1, d), update_bound(high, -1, d)
    check_range(low, high - 1, d)
    return low, high


def check_range(low: int, top: int, d) -> None:
    """torch's ``check_from_to_in_range`` for ``random_``'s draws in [``low``, ``top``] of
    dtype ``d`` (empty tensors too): both must fit the dtype; a float dtype warns past
    2**digits, where not every integer has a value."""
    if d.is_floating_point:
        lo, hi = -float(dt.finfo(d).max), float(dt.finfo(d).max)
    elif d is dt.bool_:
        lo, hi = 0, 1
    else:
        lo, hi = dt.iinfo(d).min, dt.iinfo(d).max
    for v, name in ((low, "from"), (top, "to - 1")):
        if not lo <= v <= hi:
            raise RuntimeError(f"{name} is out of bounds for {d.type_meta}")
    if d.is_floating_point:
        digits = DIGITS[d.name]
        for v, name in ((low, "from"), (top, "to - 1")):
            if not -(2**digits) <= v <= 2**digits:
                warn_user(
                    f"{name} is out of bounds [-(2^{digits}), 2^{digits}]. Due to precision "
                    f"limitations {d.type_meta} can support discrete uniform distribution "
                    "only within this range. This warning will become an error in version "
                    "1.7 release, please fix the code in advance"
                )


def like(t) -> np.ndarray:
    """The array a fill of tensor ``t`` follows: its payload, or an empty one where that
    is on a device (contiguous) or symbolic (under capture: laid out as eager's, Note
    [traced layouts] in tracing/capture.py)."""
    p = t._payload
    if isinstance(p, np.ndarray):
        return p
    order = getattr(p, "order", None)
    if order is None:
        return np.empty(tuple(t.shape), t.dtype.np)
    return np.empty([t.shape[d] for d in order], t.dtype.np).transpose(np.argsort(order))


class New:
    """Stands for a new C-contiguous array of ``shape`` and ``dtype`` in a fill: what the
    fill reads of the array it fills like, with no memory behind it (allocating an unused
    array per draw costs a large one its page faults)."""

    __slots__ = ("shape", "dtype", "size", "ndim")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.size, self.ndim = math.prod(self.shape), len(self.shape)


def contiguous(p) -> bool:
    return isinstance(p, New) or p.flags.c_contiguous


def _order(p) -> list:
    """``p``'s axes from outermost to innermost in memory."""
    axes = list(range(p.ndim))
    return axes if contiguous(p) else sorted(axes, key=lambda a: -abs(p.strides[a]))


def shaped(p, flat: np.ndarray) -> np.ndarray:
    """``flat``, values in ``p``'s fill order, as an array of ``p``'s shape."""
    order = _order(p)
    return flat.reshape([p.shape[a] for a in order]).transpose(np.argsort(order))


def ordered(p, a: np.ndarray) -> np.ndarray:
    """The elements of ``a`` (an array of ``p``'s shape) in ``p``'s fill order."""
    return np.transpose(a, _order(p)).ravel()


def _fill(p, draw) -> np.ndarray:
    """``draw(n, dtype)``'s ``n`` values (floats of a complex ``p``'s real view) shaped."""
    d, n = p.dtype, p.size
    if d.kind == "c":
        return shaped(p, draw(2 * n, np.dtype(f"f{d.itemsize // 2}")).view(d))
    v = draw(n, d)
    if d.itemsize == 2 and d.kind not in "iu":  # torch rounds to half through float
        v = v.astype(np.float32)
    return shaped(p, v.astype(d, copy=False))


def uniform(gen, p, low=0.0, high=1.0) -> np.ndarray:
    return _fill(p, lambda n, d: D.uniform(gen, n, d, low, high))


def normal(gen, p, mean=0.0, std=1.0) -> np.ndarray:
    """``normal_``; a complex tensor's parts get ``std / sqrt(2)``."""
    if p.dtype.kind == "c":
        std = std / math.sqrt(2)
    return _fill(p, lambda n, d: D.normals(gen, n, d, mean, std, contiguous(p)))


def integers(gen, p, low: int, high: int) -> np.ndarray:
    return _fill(p, lambda n, d: D.integers(gen, n, low, high))


def random_bits(gen, p) -> np.ndarray:
    return _fill(p, lambda n, d: D.random_bits(gen, n, d))


def bernoulli(gen, p, prob) -> np.ndarray:
    """``bernoulli_(prob)``: a float, or an array broadcast to ``p``'s shape."""
    if isinstance(prob, np.ndarray):
        prob = ordered(p, np.broadcast_to(prob, p.shape))
        return _fill(p, lambda n, d: D.bernoulli(gen, prob))
    return _fill(p, lambda n, d: D.bernoulli_scalar(gen, n, prob))


def exponential(gen, p, lambd: float) -> np.ndarray:
    return _fill(p, lambda n, d: D.exponential(gen, n, lambd))


def geometric(gen, p, prob: float) -> np.ndarray:
    return _fill(p, lambda n, d: D.geometric(gen, n, prob))


def cauchy(gen, p, median: float, sigma: float) -> np.ndarray:
    return _fill(p, lambda n, d: D.cauchy(gen, n, median, sigma))


def log_normal(gen, p, mean: float, std: float) -> np.ndarray:
    return _fill(p, lambda n, d: D.log_normal(gen, n, mean, std))
