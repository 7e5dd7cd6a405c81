"""Writing values into parts of a tensor, out of place (the ``_`` methods write the result
in): index_copy, index_reduce, masked_scatter, put, and the scatters that invert a view
(slice_scatter, select_scatter, diagonal_scatter), fill_diagonal_. Each is a composite of
the scatter, gather and slice primitives: differentiable, and it captures and compiles."""

from __future__ import annotations

import math

import numpy as np

from ... import autodiff as ad
from ... import dtypes as dt
from ...autodiff import lax
from ...autodiff.avals import wrap_dim
from ..checks import check_range, require
from ..tensor import Tensor
from ._operands import broadcast_shapes, expand_to, scalar_tensor, to_dtype
from .elementwise import where
from .indexing import _scatter_part, scatter_reduce, spread_index, take_index
from .inplace import apply_inplace
from .reduction import cumsum
from .reduction import sum as sum_
from .shape import permute, reshape


def _long_index(name, index):
    if not isinstance(index, Tensor) or index.dtype is not dt.int64:
        got = index.dtype.title if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got {got}")


def _same_dtype(name, x, source):
    if source.dtype is not x.dtype:
        raise RuntimeError(
            f"{name}(): self and source expected to have the same dtype, but got (self) "
            f"{x.dtype.title} and (source) {source.dtype.title}"
        )


def index_copy(x, dim, index, source):
    """``x`` with slice ``i`` of ``source`` along ``dim`` in slice ``index[i]`` (of indices
    that repeat, which one lands is unspecified, as in torch)."""
    _long_index("index_copy_", index)
    if index.ndim > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim})")
    _same_dtype("index_copy_", x, source)
    if x.ndim == 0:
        return reshape(index_copy(reshape(x, 1), 0, reshape(index, 1), reshape(source, 1)), ())
    d = wrap_dim(dim, x.ndim)
    xs, ss = tuple(x._payload.shape), tuple(source._payload.shape)
    if len(ss) != len(xs) and source.ndim:
        raise IndexError(
            "index_copy_(): When source and destination are not scalars, their "
            f"dimensionality must match. Source dimensionality ({len(ss)}), destination "
            f"dimensionality ({len(xs)})"
        )
    slices = [(a, b) for k, (a, b) in enumerate(zip(xs, ss)) if k != d]
    for k, (a, b) in enumerate(slices):
        if a != b:
            raise RuntimeError(
                "index_copy_(): Source/destination tensor must have same slice shapes. "
                f"Destination slice shape: {a} at dimension {k} and source slice shape: "
                f"{b} at dimension {k}."
            )
    n = index.numel()
    if (ss[d] if ss else 1) != n:
        raise IndexError(
            f"index_copy_(): Number of indices ({n}) should be equal to source.size(dim) "
            f"({ss[d] if ss else 1})"
        )
    size = xs[d]
    check_range(
        index,
        0,
        size,
        IndexError,
        f"index_copy_(): index {{}} is out of bounds for dimension {d} with size {size}",
    )
    source = reshape(source, tuple(n if k == d else s for k, s in enumerate(xs)))
    spread = reshape(index, tuple(n if k == d else 1 for k in range(len(xs))))
    return _scatter_part(ad.scatter, x, d, expand_to(spread, tuple(source.shape)), source)


_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def index_reduce(x, dim, index, source, reduce, *, include_self=True):
    """``x`` with slice ``i`` of ``source`` along ``dim`` reduced (``reduce``: ``"prod"``,
    ``"mean"``, ``"amax"`` or ``"amin"``) into slice ``index[i]`` (``include_self=False``:
    the slices hit start from what ``source`` brings alone), as torch's ``index_reduce``,
    through ``scatter_reduce``."""
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(
            "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got "
            f"{reduce}."
        )
    if isinstance(source, Tensor) and source.dtype is not x.dtype:
        raise RuntimeError(
            f"index_reduce_(): self ({x.dtype.title}) and source ({source.dtype.title}) must "
            "have the same scalar type"
        )
    d, spread = spread_index("index_reduce_", x, dim, index, source)
    n = x._payload.shape[d] if x.ndim else 1
    check_range(spread, 0, n, IndexError, "index out of range in self")
    return scatter_reduce(x, d, spread, source, reduce, include_self=include_self)


def masked_scatter(x, mask, source):
    """``x`` (broadcast with ``mask``) with the entries of ``source``, in order, where
    ``mask`` holds: the k-th True entry takes ``source``'s k-th (row-major) entry."""
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        got = mask.dtype.title if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(
            f"masked_scatter_ only supports boolean masks, but got mask with dtype {got}"
        )
    if source.dtype is not x.dtype:
        raise RuntimeError(
            "masked_scatter: expected self and source to have same dtypes but got"
            f"{x.dtype.title} and {source.dtype.title}"
        )
    shape = broadcast_shapes(tuple(x._payload.shape), tuple(mask._payload.shape))
    n = math.prod(shape)
    m = reshape(expand_to(mask, shape), n)
    flat = reshape(expand_to(x, shape), n)
    ones = sum_(m.to(dt.int64))
    require(
        ones <= source.numel(),
        RuntimeError,
        "Number of elements of source < number of ones in mask",
    )
    if source.numel() == 0 or n == 0:
        return reshape(ad.copy(flat), shape)
    at = where(m, cumsum(m.to(dt.int64), 0) - 1, scalar_tensor(0, dt.int64))
    taken = take_index(reshape(source, source.numel()), at, 0)
    return reshape(where(m, taken, flat), shape)


def put(x, index, source, accumulate=False):
    """``x`` with the entries of ``source`` at the positions ``index`` of its flattened
    entries (negative ones count from the end); ``accumulate`` adds them instead."""
    _long_index("put_", index)
    if index.numel() != source.numel():
        raise IndexError(
            "put_(): Expected source and index to have the same number of elements, but got "
            f"source.numel() = {source.numel()}, index.numel() = {index.numel()}"
        )
    if source.dtype is not x.dtype:
        raise RuntimeError(
            "put_(): self and source expected to have the same dtype, but got self.dtype = "
            f"{x.dtype.title} and source.dtype = {source.dtype.title}"
        )
    n, k = x.numel(), index.numel()
    check_range(
        index,
        -n,
        n,
        IndexError,
        f"out of range: tried to access index {{}} on a tensor of {n} elements.",
    )
    if k == 0:
        return ad.copy(x)
    flat_index = reshape(index, k)
    wrapped = lax.where(lax.lt(flat_index, 0), lax.add(flat_index, n), flat_index)
    prim = ad.scatter_add if accumulate else ad.scatter
    return reshape(prim(reshape(x, n), wrapped, reshape(source, k), dim=0), tuple(x.shape))


# --- the scatters that invert views -----------------------------------------------------------
def _fits(src, want):
    if tuple(src._payload.shape) != tuple(want):
        raise RuntimeError(
            "expected src to have a size equal to the slice of self. src size = "
            f"{list(src.shape)}, slice size = {list(want)}"
        )


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """``input`` with ``src`` in its slice ``start:end:step`` along ``dim``."""
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    shape = tuple(input._payload.shape)
    d = wrap_dim(dim, input.ndim)
    lo, hi, _ = slice(start, end, step).indices(shape[d])
    hi = max(hi, lo)
    want = tuple(len(range(lo, hi, step)) if k == d else s for k, s in enumerate(shape))
    _fits(src, want)
    return ad.slice_scatter(
        input,
        to_dtype(src, input.dtype),
        starts=tuple(lo if k == d else 0 for k in range(len(shape))),
        stops=tuple(hi if k == d else s for k, s in enumerate(shape)),
        steps=tuple(step if k == d else 1 for k in range(len(shape))),
    )


def select_scatter(input, src, dim, index):
    """``input`` with ``src`` in its slice at ``index`` along ``dim``."""
    shape = tuple(input._payload.shape)
    d = wrap_dim(dim, input.ndim)
    if not -shape[d] <= index < shape[d]:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(shape)} at "
            f"dimension {d}"
        )
    _fits(src, shape[:d] + shape[d + 1 :])
    i = index % shape[d]
    return slice_scatter(input, reshape(src, shape[:d] + (1,) + shape[d + 1 :]), d, i, i + 1)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """``input`` with ``src`` on its diagonal ``offset`` of the (``dim1``, ``dim2``)
    matrices (``src`` shaped as ``input.diagonal(offset, dim1, dim2)``)."""
    d1, d2 = wrap_dim(dim1, input.ndim), wrap_dim(dim2, input.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    rest = tuple(i for i in range(input.ndim) if i not in (d1, d2))
    perm = rest + (d1, d2)
    y = permute(input, perm)
    *batch, n, m = y._payload.shape
    r0, c0 = max(-offset, 0), max(offset, 0)
    length = max(min(n - r0, m - c0), 0)
    _fits(src, (*batch, length))
    at = np.arange(length, dtype=np.int64) * (m + 1) + (r0 * m + c0)
    index = expand_to(Tensor._wrap(at.reshape((1,) * len(batch) + (length,))), (*batch, length))
    flat = ad.scatter(
        reshape(y, (*batch, n * m)), index, to_dtype(src, input.dtype), dim=len(batch)
    )
    return permute(reshape(flat, (*batch, n, m)), tuple(int(i) for i in np.argsort(perm)))


def fill_diagonal_(x, fill_value, wrap=False):
    """``x`` with ``fill_value`` on its main diagonal, in place (a matrix, or a tensor whose
    dims are all equal); ``wrap``: in a tall matrix the diagonal starts again every
    ``cols + 1`` rows, as NumPy's ``fill_diagonal``."""
    shape = tuple(x._payload.shape)
    if len(shape) < 2:
        raise RuntimeError("dimensions must larger than 1")
    if len(shape) > 2 and len(set(shape)) > 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(shape, bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    fill = scalar_tensor(fill_value, x.dtype)
    return apply_inplace(x, lambda t: where(Tensor._wrap(mask), fill, t))
