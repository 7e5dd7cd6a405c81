"""Public reductions: dim handling, dtype rules, (values, indices) results."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ... import autodiff as ad
from ... import dtypes as dt
from ...autodiff.avals import normalize_dims
from ..tensor import Tensor
from ._operands import scalar_tensor

MaxResult = namedtuple("max", ["values", "indices"])
MinResult = namedtuple("min", ["values", "indices"])


def sum(x, dim=None, keepdim=False, *, dtype=None):
    dims = normalize_dims(dim, x.ndim)
    if dtype is not None:
        x = ad.cast(x, dtype=dt.as_dtype(dtype)) if x.dtype is not dt.as_dtype(dtype) else x
    elif not (x.dtype.is_floating_point or x.dtype.is_complex) and x.dtype is not dt.int64:
        x = ad.cast(x, dtype=dt.int64)  # PyTorch sums integers and bools in int64
    return ad.reduce_sum(x, dims=dims, keepdim=keepdim)


def mean(x, dim=None, keepdim=False, *, dtype=None):
    if dtype is None and not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either "
                           f"a floating point or complex dtype. Got: {x.dtype.name}")
    dims = normalize_dims(dim, x.ndim)
    n = 1
    for d in dims:
        n *= x._payload.shape[d]
    return sum(x, dim, keepdim, dtype=dtype) / n


def var(x, dim=None, *, correction=1, keepdim=False, unbiased=None):
    if unbiased is not None:
        correction = int(unbiased)
    dims = normalize_dims(dim, x.ndim)
    n = 1
    for d in dims:
        n *= x._payload.shape[d]
    centered = x - mean(x, dims, keepdim=True)
    sq = (centered * centered.conj()).real if x.dtype.is_complex else centered * centered
    return sum(sq, dims, keepdim) / (n - correction if n > correction else 0)  # builtin max is shadowed here


def std(x, dim=None, *, correction=1, keepdim=False, unbiased=None):
    return var(x, dim, correction=correction, keepdim=keepdim, unbiased=unbiased).sqrt()


def amax(x, dim=(), keepdim=False):
    return ad.reduce_max(x, dims=normalize_dims(dim if dim != () else None, x.ndim),
                         keepdim=keepdim)


def amin(x, dim=(), keepdim=False):
    return ad.reduce_min(x, dims=normalize_dims(dim if dim != () else None, x.ndim),
                         keepdim=keepdim)


def argmax(x, dim=None, keepdim=False):
    if dim is None:
        return ad.argmax(ad.reshape(x, shape=(x.numel(),)), dim=0, keepdim=False)
    return ad.argmax(x, dim=normalize_dims(dim, x.ndim)[0] if x.ndim else 0, keepdim=keepdim)


def argmin(x, dim=None, keepdim=False):
    if dim is None:
        return ad.argmin(ad.reshape(x, shape=(x.numel(),)), dim=0, keepdim=False)
    return ad.argmin(x, dim=normalize_dims(dim, x.ndim)[0] if x.ndim else 0, keepdim=keepdim)


def _select_along(x, idx, dim, keepdim):
    """x at ``idx`` along ``dim``: the gradient goes to the chosen element only."""
    from .elementwise import eq, where
    from .shape import unsqueeze
    shape = [1] * x.ndim
    shape[dim] = x._payload.shape[dim]
    iota = Tensor._wrap(np.arange(shape[dim], dtype=np.int64).reshape(shape), False)
    onehot = eq(iota, unsqueeze(idx, dim) if not keepdim else idx)
    return sum(where(onehot, x, scalar_tensor(0, x.dtype)), dim, keepdim)


def _extremum(reduce, arg, result, x, dim, keepdim, other):
    if isinstance(dim, Tensor):
        dim, other = None, dim
    if other is not None:
        from .elementwise import maximum, minimum
        return (maximum if reduce is ad.reduce_max else minimum)(x, other)
    if dim is None:
        return reduce(x, dims=normalize_dims(None, x.ndim), keepdim=False)
    d = normalize_dims(dim, x.ndim)[0] if x.ndim else 0
    idx = arg(x, dim=d, keepdim=keepdim)
    return result(_select_along(x, idx, d, keepdim) if x.ndim else x, idx)


def max(x, dim=None, keepdim=False, *, other=None):
    """Full max, ``(values, indices)`` along ``dim``, or elementwise max with a tensor."""
    return _extremum(ad.reduce_max, ad.argmax, MaxResult, x, dim, keepdim, other)


def min(x, dim=None, keepdim=False, *, other=None):
    return _extremum(ad.reduce_min, ad.argmin, MinResult, x, dim, keepdim, other)


def logsumexp(x, dim, keepdim=False):
    from .elementwise import where
    dims = normalize_dims(dim, x.ndim)
    m = amax(x, dims, keepdim=True).detach()
    m = where(m.abs() == float("inf"), scalar_tensor(0, m.dtype), m)
    out = sum((x - m).exp(), dims, keepdim=True).log() + m
    return out if keepdim else ad.reshape(out, shape=tuple(
        s for i, s in enumerate(out._payload.shape) if i not in dims))
