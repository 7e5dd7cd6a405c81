"""Along one dim: cumulative sums and sorting (the permutation; values are gathered by
the public ops, so their gradient goes to the chosen positions)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .avals import Aval, ShapeError
from .primitive import LINEAR, ORDERED, Primitive


def _cumsum(x, *, dim, reverse):
    """Running sums; floating and complex ones accumulate in double, each sum rounded
    once to ``x``'s dtype, as torch's CPU kernel (its ``acc_type``) does."""
    kind = x.dtype.kind  # bfloat16's is "V"
    acc = x.dtype if kind in "biu" else np.complex128 if kind == "c" else np.float64
    if reverse:
        x = np.flip(x, dim)
    y = np.cumsum(x, axis=dim, dtype=acc).astype(x.dtype, copy=False)
    return np.flip(y, dim) if reverse else y


cumsum: Primitive = Primitive(
    "cumsum",
    _cumsum,
    lambda x, *, dim, reverse: x,
    vjp=lambda g, dim, reverse: cumsum(g, dim=dim, reverse=not reverse),
    jvp=LINEAR,
)


try:
    from ._torch_order import order as _torch_order
except ImportError:  # built without a C++ compiler: ties keep their order
    _torch_order = None  # type: ignore[assignment]

# the dtypes _torch_order sorts, and those it sorts as another that orders them alike
_ORDER_AS = {np.dtype(np.bool_): np.uint8, np.dtype(np.float16): np.float32}
_ORDER_AS[np.dtype(dt.bfloat16.np)] = np.float32


def _argsort(x, *, dim, descending, k, order="stable"):
    """Indices of the first ``k`` in sorted order, NaN sorting above every number as in
    PyTorch; of tied entries, in ``order``: "stable" (ties keep their order), or torch's
    CPU kernel's ("sort": ``sort(stable=False)``; "topk", "topk_unsorted": ``topk``'s,
    whose ``k`` entries come out unsorted; "kth": ``kthvalue``'s, the ``k``-th last of
    ``k``), where ``_torch_order`` is built (Note [torch's order of ties]); else stable."""
    if order != "stable" and _torch_order is not None and x.size:
        rows = np.ascontiguousarray(np.moveaxis(x, dim, -1), _ORDER_AS.get(x.dtype))
        return np.moveaxis(_torch_order(rows, order, k, descending), -1, dim)
    if 0 < 4 * k <= x.shape[dim] and x.dtype.kind == "f":
        idx = _first_k(np.moveaxis(x, dim, -1), descending, k)
        if idx is not None:
            return np.moveaxis(idx, -1, dim)
    if descending:  # stable descending: sort the reversed array, reverse, map back
        n = x.shape[dim]
        idx = np.flip(np.argsort(np.flip(x, dim), axis=dim, kind="stable"), dim)
        idx = n - 1 - idx
    else:
        idx = np.argsort(x, axis=dim, kind="stable")
    return np.take(idx, np.arange(k), axis=dim).astype(np.int64)


def _first_k(x, descending, k):
    """``_argsort`` along the last dim for a few ``k``: a partition and a sort of the
    ``k`` chosen (topk 8 of 256 x 256, forward and backward: 2.46 -> 0.62 ms), or None where
    it cannot say which of equal values at the boundary come first, or NaN is there."""
    if np.isnan(x).any():  # NaN sorts above every number: first when descending
        return None
    key = np.negative(x) if descending else x  # the k smallest keys
    part = np.argpartition(key, k - 1, axis=-1)[..., :k]
    bound = np.take_along_axis(key, part, -1).max(-1, keepdims=True)
    below = np.count_nonzero(key < bound, axis=-1)
    tied = np.count_nonzero(key == bound, axis=-1)
    if (below + tied > k).any():  # equal values across the boundary
        return None
    part.sort(axis=-1)  # index order, then a stable sort by key keeps it among ties
    order = np.argsort(np.take_along_axis(key, part, -1), axis=-1, kind="stable")
    return np.take_along_axis(part, order, -1).astype(np.int64)


def _argsort_rule(x, *, dim, descending, k, order="stable"):
    if not 0 <= k <= x.shape[dim]:
        raise ShapeError(f"selected index k out of range (k={k}, size {x.shape[dim]})")
    return Aval(x.shape[:dim] + (k,) + x.shape[dim + 1 :], dt.int64)


argsort = Primitive("argsort", _argsort, _argsort_rule, domain=ORDERED)
