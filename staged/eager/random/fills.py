"""A tensor's worth of draws: a distribution's values in the order torch fills the tensor
(a strided tensor in memory order, as TensorIterator walks it; complex ones through their
real view), laid out in its shape. ``p`` is the array to fill like: the tensor's payload
(``like(t)``), or ``New(shape, dtype)`` (or an empty array) standing for a new tensor.
"""

from __future__ import annotations

import math

import numpy as np

from . import distributions as D


def check_floating(d, kernel: str) -> None:
    """The error torch's dispatch gives ``kernel`` for a dtype ``d`` outside its float types."""
    if not (d.is_floating_point or d.is_complex):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{d.title}'")


def like(t) -> np.ndarray:
    """The array a fill of tensor ``t`` follows: its payload, or an empty contiguous one
    where that is symbolic (under capture) or on a device."""
    p = t._payload
    return p if isinstance(p, np.ndarray) else np.empty(tuple(t.shape), t.dtype.np)


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
