"""Order statistics from a sort: median, nanmedian, quantile and nanquantile, with
torch's ranks (NaN sorts last; ``median`` takes the lower middle, and propagates NaN where
``nanmedian`` skips it) and torch's gradients: through the sort's gather to the entries
chosen, split evenly among ties for the whole-tensor medians."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from ... import autodiff as ad
from ... import dtypes as dt
from ...autodiff.avals import wrap_dim
from ..checks import require
from ..tensor import Tensor
from ._operands import scalar_tensor
from .elementwise import isnan, lerp, logical_and, logical_or, where
from .reduction import _sorted, sum
from .shape import movedim, unsqueeze

MedianResult = namedtuple("median", ["values", "indices"])  # type: ignore[name-match]
NanmedianResult = namedtuple("nanmedian", ["values", "indices"])  # type: ignore[name-match]
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _lower_middle(x, dim, skip_nan):
    """(values, indices) of the lower middle entry along ``dim`` (kept as a size-1 dim):
    of the non-NaN entries with ``skip_nan``, else the first NaN where there is one."""
    values, indices = _sorted(x.detach(), dim, False, x._payload.shape[dim])
    numbers = sum(~isnan(values), dim, keepdim=True)
    if skip_nan:
        at = (numbers - 1).clamp_min(0) // 2
    else:
        n = x._payload.shape[dim]
        at = where(numbers < n, numbers, scalar_tensor((n - 1) // 2, dt.int64))
    return ad.gather(values, at, dim=dim), ad.gather(indices, at, dim=dim)


def _median(x, dim, keepdim, skip_nan, result) -> Any:
    if dim is None:
        if x.numel() == 0:
            return scalar_tensor(float("nan"), x.dtype)
        flat = ad.reshape(x, shape=(x.numel(),))
        v = ad.reshape(_lower_middle(flat, 0, skip_nan)[0], shape=())
        if not x.dtype.is_floating_point:
            return v
        # torch's evenly_distribute_backward: every entry equal to the median (or every
        # NaN, for a NaN median) gets an equal share of the gradient
        tied = logical_or(x == v, logical_and(isnan(x), isnan(v)))
        return v + sum(where(tied, x - v, 0)) / sum(tied)
    d = wrap_dim(dim, x.ndim) if x.ndim else 0
    if not x.ndim:
        return result(ad.copy(x), scalar_tensor(0, dt.int64))
    if x._payload.shape[d] == 0:
        raise IndexError(f"{result.__name__}(): Expected reduction dim {d} to have non-zero size.")
    _, idx = _lower_middle(x, d, skip_nan)
    values = ad.gather(x, idx, dim=d)  # the gradient goes to the entry chosen
    if not keepdim:
        values, idx = (ad.reshape(t, shape=t.shape[:d] + t.shape[d + 1 :]) for t in (values, idx))
    return result(values, idx)


def median(x, dim=None, keepdim=False) -> Any:
    """The lower median of all entries, or ``(values, indices)`` along ``dim``; NaN where
    there is one."""
    return _median(x, dim, keepdim, False, MedianResult)


def nanmedian(x, dim=None, keepdim=False) -> Any:
    """``median`` of the entries that are not NaN (NaN where all are)."""
    return _median(x, dim, keepdim, True, NanmedianResult)


def _quantile(name, x, q, dim, keepdim, interpolation, skip_nan):
    if not x.dtype.is_floating_point or x.dtype.itemsize < 4:
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if x.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(
            f"{name}() interpolation must be one of linear, lower, higher, midpoint or "
            f"nearest, but got {interpolation}"
        )
    scalar_q = not isinstance(q, Tensor) or q.ndim == 0
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q.dtype is not x.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        if q.numel():
            require(
                (q >= 0) & (q <= 1), RuntimeError, f"{name}() q values must be in the range [0, 1]"
            )
    else:
        if not 0 <= q <= 1:
            raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
        q = scalar_tensor(q, x.dtype)
    q = ad.reshape(q, shape=(q.numel(),))
    if dim is None:
        x, d = ad.reshape(x, shape=(x.numel(),)), 0
        kept = (1,) * x.ndim if keepdim else ()
    else:
        d = wrap_dim(dim, x.ndim) if x.ndim else 0
        if not x.ndim:
            x = ad.reshape(x, shape=(1,))
        shape = tuple(x._payload.shape)
        kept = shape[:d] + ((1,) if keepdim else ()) + shape[d + 1 :]
    # the reduced dim last, a size-1 dim for q before it: sorted is (..., 1, n)
    values = unsqueeze(movedim(_sorted(x, d, False, x._payload.shape[d])[0], d, -1), -2)
    n = values._payload.shape[-1]
    numbers = sum(~isnan(values), -1, keepdim=True)  # (..., 1, 1)
    q = ad.reshape(q, shape=(1,) * (values.ndim - 2) + (q.numel(), 1))
    if skip_nan:
        ranks = (q * (numbers - 1)).clamp_min(0)
    else:
        ranks = where(numbers < n, scalar_tensor(n - 1, x.dtype), q * (n - 1))
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()  # half to even, as torch
    below = ranks.long()
    out = values.take_along_dim(below, -1)
    if interpolation in ("linear", "midpoint"):
        weight = scalar_tensor(0.5, x.dtype) if interpolation == "midpoint" else ranks - below
        out = lerp(out, values.take_along_dim(ranks.ceil().long(), -1), weight)
    # (..., q, 1) -> q first, then the kept dims
    out = movedim(ad.reshape(out, shape=tuple(out.shape[:-1])), -1, 0)
    return ad.reshape(out, shape=(() if scalar_q else (q.numel(),)) + kept)


def quantile(x, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The ``q``-th quantiles (a number, or a 1-D tensor whose quantiles make the first
    dim of the result) of all entries or along ``dim``; NaN where there is one."""
    return _quantile("quantile", x, q, dim, keepdim, interpolation, False)


def nanquantile(x, q, dim=None, keepdim=False, *, interpolation="linear"):
    """``quantile`` of the entries that are not NaN (NaN where all are)."""
    return _quantile("nanquantile", x, q, dim, keepdim, interpolation, True)


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    """Where ``values`` would go in ``sorted_sequence`` (sorted along its last dim; its
    leading dims are ``values``'): the number of entries before each value (``right``:
    also those equal to it), counted as torch's binary search compares (NaN values go
    last). O(values x sequence) compares, no search: it captures and compiles."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(
                f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}"
            )
        if right and side == "left":
            raise RuntimeError(
                "torch.searchsorted(): side and right can't be set to opposites, got side "
                "of left while right was True"
            )
        right = side == "right"
    seq = sorted_sequence
    if sorter is not None:
        seq = seq.gather(-1, sorter)
    scalar = not isinstance(values, Tensor)
    v = scalar_tensor(values, seq.dtype) if scalar else values
    lead, vlead = tuple(seq.shape[:-1]), tuple(v.shape[:-1])
    if seq.ndim > 1 and (v.ndim == 0 or lead != vlead):
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            "dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(seq.shape)} and input value tensor {list(v.shape)}"
        )
    if seq.ndim > 1:  # (..., N, 1) against (..., 1, M)
        a, b = unsqueeze(seq, -2), unsqueeze(v, -1)
    else:
        a, b = seq, unsqueeze(v, -1)
    before = ~(a > b) if right else ~(a >= b)  # torch's tests: NaN values go last
    out = sum(before, -1)
    return out.to(dt.int32) if out_int32 else out


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each entry of ``input`` among the 1-D sorted ``boundaries``: index
    ``i`` with ``boundaries[i-1] < x <= boundaries[i]`` (``right``: ``<=`` and ``<``)."""
    if not isinstance(boundaries, Tensor) or boundaries.ndim != 1:
        got = boundaries.ndim if isinstance(boundaries, Tensor) else type(boundaries).__name__
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({got})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)
