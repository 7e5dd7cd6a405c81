"""Order statistics from a sort: median, nanmedian, quantile and nanquantile, with
torch's ranks (NaN sorts last; ``median`` takes the lower middle, and propagates NaN where
``nanmedian`` skips it) and torch's gradients: through the sort's gather to the entries
chosen, split evenly among ties for the whole-tensor medians."""

from __future__ import annotations

import builtins
import functools
import math
from collections import namedtuple
from typing import Any

import numpy as np

from ... import autodiff as ad
from ... import dtypes as dt
from ...autodiff.avals import wrap_dim
from ..checks import require
from ..tensor import Tensor
from ._operands import expand_to, scalar_tensor
from .elementwise import isfinite, isnan, lerp, logical_and, logical_or, minimum, ne, where
from .reduction import _sorted, amax, amin, argmax, cumsum, sum
from .shape import cat, movedim, narrow, unsqueeze

MedianResult = namedtuple("median", ["values", "indices"], module="staged.return_types")  # type: ignore[name-match]
NanmedianResult = namedtuple("nanmedian", ["values", "indices"], module="staged.return_types")  # type: ignore[name-match]
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _lower_middle(x, dim, skip_nan):
    """(values, indices) of the lower middle entry along ``dim`` (kept as a size-1 dim):
    of the non-NaN entries with ``skip_nan``, else the first NaN where there is one; of
    all-NaN entries, the one torch's ``std::nth_element`` leaves first (``_first_of_equals``)."""
    n = x._payload.shape[dim]
    values, indices = _sorted(x.detach(), dim, False, n)
    numbers = sum(~isnan(values), dim, keepdim=True)
    if skip_nan:
        at = where(numbers > 0, (numbers - 1) // 2, scalar_tensor(_first_of_equals(n), dt.int64))
    else:
        at = where(numbers < n, numbers, scalar_tensor((n - 1) // 2, dt.int64))
    return ad.gather(values, at, dim=dim), ad.gather(indices, at, dim=dim)


@functools.lru_cache(maxsize=64)
def _first_of_equals(n: int) -> int:
    """The position of the entry that libstdc++'s ``std::nth_element(first, first, last)``
    leaves first among ``n`` equivalent ones (torch's nanmedian of an all-NaN row asks for
    the 0th): each round of its introselect swaps the middle entry to the front (the
    median of three equals), reverses the rest (the unguarded partition's swaps) and keeps
    the front half; three or fewer are insertion-sorted, which keeps their order."""
    order, last = list(range(n)), n
    while last > 3:
        mid = last // 2
        order[0], order[mid] = order[mid], order[0]
        order[1:last] = order[last - 1 : 0 : -1]
        last = 1 + (last - 1) // 2
    return order[0]


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
    _not_bool(x, "median_cpu" if dim is None else "median_out")
    return _median(x, dim, keepdim, False, MedianResult)


def nanmedian(x, dim=None, keepdim=False) -> Any:
    """``median`` of the entries that are not NaN (NaN where all are)."""
    _not_bool(x, "median_cpu" if dim is None else "median_out")
    return _median(x, dim, keepdim, True, NanmedianResult)


def _not_bool(x, kernel):
    if x.dtype is dt.bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


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
    values = unsqueeze(movedim(_sorted(x, d, False, x._payload.shape[d], "sort")[0], d, -1), -2)
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


# --- the k-th smallest and the most frequent value along a dim ------------------------------
KthvalueResult = namedtuple("kthvalue", ["values", "indices"], module="staged.return_types")  # type: ignore[name-match]
ModeResult = namedtuple("mode", ["values", "indices"], module="staged.return_types")  # type: ignore[name-match]


def _ordered(name, x):
    if x.dtype.is_complex or x.dtype is dt.bool_ and name == "kthvalue":
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{x.dtype.title}'")


def _picked(x, idx, d, keepdim, result):
    """``result(values, indices)`` of the entries of ``x`` at ``idx`` (a size-1 dim ``d``):
    the gradient goes to the entry chosen."""
    values = ad.gather(x, idx, dim=d)
    if not keepdim:
        values, idx = (ad.reshape(t, shape=t.shape[:d] + t.shape[d + 1 :]) for t in (values, idx))
    return result(values, idx)


def kthvalue(x, k, dim=-1, keepdim=False) -> Any:
    """``(values, indices)`` of the ``k``-th smallest entry along ``dim`` (NaN sorts last).
    Of tied entries, the one torch's CPU quickselect picks (Note [torch's order of ties];
    a compiled step picks the ``k``-th of a stable sort)."""
    _ordered("kthvalue", x)
    d = wrap_dim(dim, x.ndim) if x.ndim else 0
    n = x._payload.shape[d] if x.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if not x.ndim:
        return KthvalueResult(ad.copy(x), scalar_tensor(0, dt.int64))
    _, order = _sorted(x.detach(), d, False, k, "kth")
    return _picked(x, narrow(order, d, k - 1, 1), d, keepdim, KthvalueResult)


def mode(x, dim=-1, keepdim=False) -> Any:
    """``(values, indices)`` of the most frequent entry along ``dim``: of equally frequent
    ones the smallest, at the index torch's CPU kernel gives: the last of its run in the
    order ``std::sort`` leaves (Note [torch's order of ties]; compiled, its last
    occurrence). From a sort, each run of equal entries counted: it captures and compiles."""
    _ordered("mode", x)
    if not x.ndim:
        return ModeResult(ad.copy(x), scalar_tensor(0, dt.int64))
    d = wrap_dim(dim, x.ndim)
    n = x._payload.shape[d]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    key = movedim(x.detach(), d, -1)
    if key.dtype is dt.bool_:
        key = key.to(dt.uint8)
    last = key.ndim - 1
    values, order = _sorted(key, last, False, n, "sort")
    starts = ne(narrow(values, last, 1, n - 1), narrow(values, last, 0, n - 1))
    starts = cat([expand_to(scalar_tensor(True, dt.bool_), (*values.shape[:-1], 1)), starts], last)
    run = cumsum(starts.to(dt.int64), last) - 1  # which run of equal values each entry is in
    ones = expand_to(scalar_tensor(1, dt.int64), tuple(run.shape))
    counts = ad.scatter_add(ones * 0, run, ones, dim=last)
    count = ad.gather(counts, run, dim=last)
    best = amax(count, last, keepdim=True)
    first = argmax((count == best).to(dt.int64), last, keepdim=True)  # the smallest value
    idx = ad.gather(order, first + best - 1, dim=last)  # the last of its run
    return _picked(x, movedim(idx, -1, d), d, keepdim, ModeResult)


# --- histograms (not differentiable, as torch's) --------------------------------------------
_C_NAMES = {"float32": "float", "float64": "double", "int64": "long int", "int32": "int"}
HistogramResult = namedtuple("histogram", ["hist", "bin_edges"], module="staged.return_types")  # type: ignore[name-match]


def _real_floats(name, x):
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}\" not implemented for '{x.dtype.title}'")
    return x.detach().reshape(-1)


def _check_finite(lo, hi, message):
    """``message`` (formatted with the range) unless both ends of the range are finite;
    recorded in the graph under capture."""
    if type(lo._payload) is np.ndarray and type(hi._payload) is np.ndarray:
        a, b = float(lo._payload), float(hi._payload)
        if not (np.isfinite(a) and np.isfinite(b)):
            raise RuntimeError(message.format(f"{a:g}", f"{b:g}"))
    else:
        require(isfinite(lo) & isfinite(hi), RuntimeError, message.format("min", "max"))


def _data_range(x, lo, hi, widen):
    """The range ``[lo, hi]`` as 0-d tensors, the data's own where ``lo == hi``; widened by
    ``widen`` on each side where it is a single point (torch: 1 for histc, 0.5 for
    histogram)."""
    if lo == hi and x.numel():
        lo_t, hi_t = amin(x, 0), amax(x, 0)
    else:
        lo_t, hi_t = scalar_tensor(lo, x.dtype), scalar_tensor(hi, x.dtype)
    same = lo_t == hi_t
    return where(same, lo_t - widen, lo_t), where(same, hi_t + widen, hi_t)


def _count(pos, inside, bins, weight, dtype):
    """How many entries (or how much ``weight``) fall in each of ``bins`` bins: ``pos`` the
    bin of each entry, ``inside`` whether it falls in any."""
    ones = expand_to(scalar_tensor(1, dtype), tuple(pos.shape)) if weight is None else weight
    slot = where(inside, pos, scalar_tensor(bins, dt.int64))  # one more bin, dropped after
    zeros = expand_to(scalar_tensor(0, dtype), (bins + 1,))
    counts = ad.scatter_add(zeros, slot, ones.to(dtype), dim=0)
    return ad.copy(narrow(counts, 0, 0, bins))  # (memory of its own, as torch's)


def _linear_bin(x, lo, hi, bins):
    """torch's linear interpolation: floor((x - lo) * bins / (hi - lo)), ``hi`` in the last
    bin, NaN and entries outside [lo, hi] in none."""
    inside = (x >= lo) & (x <= hi)
    at = ((where(inside, x, lo) - lo) * bins / (hi - lo)).floor().to(dt.int64)
    return minimum(at, scalar_tensor(bins - 1, dt.int64)), inside


def histc(input, bins=100, min=0, max=0):
    """How many entries fall in each of ``bins`` equal bins over [``min``, ``max``] (the
    data's range where they are equal; entries outside it are not counted), in
    ``input``'s dtype."""
    x = _real_floats("histogram_cpu", input)
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    lo, hi = _data_range(x, min, max, 1)
    _check_finite(lo, hi, "torch.histc: range of [{}, {}] is not finite")
    if min > max:
        raise RuntimeError("torch.histc: max must be larger than min")
    pos, inside = _linear_bin(x, lo, hi, bins)
    return _count(pos, inside, bins, None, x.dtype)


def _linspace(lo, hi, steps):
    """torch's linspace of 0-d tensor ends: from ``lo`` up to the middle, from ``hi`` back
    down after it (so both ends are exact)."""
    i = Tensor._wrap(np.arange(steps, dtype=np.int64)).to(lo.dtype)
    step = (hi - lo) / (steps - 1)
    return where(i < steps // 2, lo + step * i, hi - step * (steps - 1 - i))


def histogram(input, bins=100, *, range=None, weight=None, density=False) -> Any:
    """``(hist, bin_edges)``: how many entries (or how much ``weight``, of ``input``'s
    shape) fall in each bin. ``bins`` is a number of equal bins over ``range`` (the data's
    range by default) or a 1-D tensor of increasing bin edges; the last bin includes its
    right edge. ``density`` divides by the total and the bin widths."""
    x = _real_floats("histogramdd", input).reshape(-1, 1)
    same = weight is not None and tuple(weight.shape) == tuple(input.shape)
    hist, (edges,) = _histogramdd(
        x, [bins], range, weight.reshape(-1) if same else None, density, weight, [x.shape[0], 1]
    )
    return HistogramResult(hist, edges)


def histogramdd(input, bins=10, *, range=None, weight=None, density=False) -> Any:
    """``(hist, bin_edges)`` of the points in ``input``'s last dim (``D`` coordinates each):
    ``histogram`` along each coordinate at once, ``bins`` one number for every dim, one per
    dim, or one tensor of edges per dim; ``range`` ``[lo_0, hi_0, lo_1, ...]``; ``hist``
    of shape ``(bins_0, ..., bins_{D-1})``, ``bin_edges`` a tuple of ``D`` edge tensors."""
    if input.ndim < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    D = input.shape[-1]
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{input.dtype.title}'")
    x = input.detach().reshape(-1, D)
    if isinstance(bins, (int, np.integer)):
        bins = [int(bins)] * D
    elif len(bins) != D:
        if isinstance(bins[0], Tensor):
            raise RuntimeError(
                f"torch.histogramdd: expected {D} sequences of bin edges for a {D}-dimensional "
                f"histogram but got {len(bins)}"
            )
        raise RuntimeError(
            "histogramdd: The size of bins must be equal to the innermost dimension of the input."
        )
    same = weight is not None and tuple(weight.shape) == tuple(input.shape[:-1])
    w = weight.reshape(-1) if same else None  # (another shape: refused with torch's error)
    hist, edges = _histogramdd(x, list(bins), range, w, density, weight, list(input.shape))
    return HistogramddResult(hist, tuple(edges))


HistogramddResult = namedtuple(  # type: ignore[name-match]
    "histogramdd", ["hist", "bin_edges"], module="staged.return_types"
)


def _histogramdd(x, bins, range, w, density, weight, shape):
    """``(hist, [edges per dim])`` of the ``(N, D)`` points ``x`` (detached), ``w`` the
    flat weights (``weight`` and the input's ``shape``, as given, for the error)."""
    N, D = x.shape
    if weight is not None and (w is None or tuple(w.shape) != (N,)):
        raise RuntimeError(
            "torch.histogramdd: if weight tensor is provided it should have the same shape as "
            f"the input tensor excluding its innermost dimension, but got input with shape "
            f"{shape} and weight with shape {list(weight.shape)}"
        )
    if range is not None and len(range) != 2 * D:
        raise RuntimeError(
            f"torch.histogramdd: for a {D}-dimensional histogram range should have {2 * D} "
            f"elements, but got {len(range)}"
        )
    w = None if w is None else w.detach()
    flat, inside, sizes, edges = None, None, [], []
    for d in builtins.range(D):
        lo_hi = None if range is None else range[2 * d : 2 * d + 2]
        pos, ins, n, e = _bins_along(x[:, d], bins[d], lo_hi, d)
        flat = pos if flat is None else flat * n + pos
        inside = ins if inside is None else inside & ins
        sizes.append(n)
        edges.append(e)
    total = math.prod(sizes)
    hist = _count(flat, inside, total, w, x.dtype).reshape(sizes)
    if density:
        volume = None
        for d, (n, e) in enumerate(zip(sizes, edges)):
            width = (narrow(e, 0, 1, n) - narrow(e, 0, 0, n)).reshape(
                [n if k == d else 1 for k in builtins.range(D)]
            )
            volume = width if volume is None else volume * width
        hist = hist / (hist.sum() * volume)
    return hist, edges


def _bins_along(x, bins, range, d):
    """(the bin of each entry of the 1-D ``x``, whether it falls in one, the number of
    bins, their edges) along dimension ``d`` of a histogram: ``bins`` edges or a count
    over ``range`` (the data's where None)."""
    if isinstance(bins, Tensor):
        if bins.ndim != 1:
            raise RuntimeError(
                "torch.histogramdd: bins tensor should have one dimension, but got "
                f"{bins.ndim} dimensions in the bins tensor for dimension {d}"
            )
        if bins.dtype is not x.dtype:
            raise RuntimeError(
                "torch.histogramdd: input tensor and bins tensors should have the same dtype, "
                f"but got input with dtype {_C_NAMES.get(x.dtype.name, x.dtype.name)} and bins "
                f"for dimension {d} with dtype "
                f"{_C_NAMES.get(bins.dtype.name, bins.dtype.name)}"
            )
        edges = ad.copy(bins.detach())  # the result's bin_edges: a copy, as torch's
        n = edges.numel() - 1
        inside = (x >= edges[0]) & (x <= edges[-1])
        pos = minimum(searchsorted(edges, x, right=True) - 1, scalar_tensor(n - 1, dt.int64))
        return pos, inside, n, edges
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension {d}")
    lo, hi = (0, 0) if range is None else range
    if lo > hi:
        raise RuntimeError(
            f"torch.histogramdd: min should not exceed max, but got min {lo:g} max {hi:g} "
            f"for dimension {d}"
        )
    if range is None and not x.numel():
        lo, hi = 0, 1
    lo_t, hi_t = _data_range(x, lo, hi, 0.5)
    _check_finite(
        lo_t, hi_t, f"torch.histogramdd: dimension {d}'s range [{{}}, {{}}] is not finite"
    )
    edges = _linspace(lo_t, hi_t, bins + 1)
    guess, inside = _linear_bin(x, lo_t, hi_t, bins)
    # torch's local search: the guess moved to the bin its edges say (floats round)
    below = x < ad.gather(edges, guess, dim=0)
    above = (x >= ad.gather(edges, guess + 1, dim=0)) & (guess < bins - 1)
    return guess - below.to(dt.int64) + above.to(dt.int64), inside, bins, edges
