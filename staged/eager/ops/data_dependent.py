"""Ops whose output shape depends on their input's values (nonzero, unique): eager only,
since a captured graph has static shapes."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as dt
from ...autodiff.avals import wrap_dim
from ..._where import at_user
from ..interceptor import current_interceptor
from ..tensor import Tensor


def host_data(x: Tensor, what: str, remedy: str = "") -> np.ndarray:
    """``x``'s data, for ``what``, whose output shape depends on it: under capture (where
    ``x`` has none) a ``RuntimeError`` saying so."""
    if type(x._payload) is not np.ndarray and current_interceptor() is not None:
        raise RuntimeError(
            at_user(
                f"{what} has a data-dependent output shape (it depends on the values of its "
                f"input), which staged.compile/capture cannot trace: a compiled graph has "
                f"static shapes. Call it outside the compiled function{remedy}."
            )
        )
    return x._host()


def nonzero(x: Tensor, *, as_tuple=False) -> Any:
    """The indices of the non-zero entries: an int64 ``(count, ndim)`` tensor, or one 1-D
    tensor per dim (``as_tuple``; a 0-d ``x`` counts as 1-D)."""
    a = host_data(x, "nonzero()")
    if as_tuple:
        return tuple(Tensor._wrap(i.astype(np.int64)) for i in np.nonzero(np.atleast_1d(a)))
    return Tensor._wrap(np.argwhere(a).astype(np.int64))


def argwhere(x: Tensor) -> Tensor:
    """``nonzero(x)``: the indices of the non-zero entries, one row each."""
    return Tensor._wrap(np.argwhere(host_data(x, "argwhere()")).astype(np.int64))


def unique(x: Tensor, sorted=True, return_inverse=False, return_counts=False, dim=None) -> Any:
    """The distinct entries (or slices along ``dim``), sorted (as PyTorch's CPU kernel for
    either ``sorted``; NaNs stay distinct), with the inverse indices and the counts if
    asked for. Not differentiable."""
    a = host_data(x, "unique()")
    if dim is None:
        values, inverse, counts = np.unique(
            a.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False
        )
        inverse = inverse.reshape(a.shape)
    else:
        values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True, axis=dim)
        inverse = inverse.reshape(-1)
    out = [Tensor._wrap(values)]
    if return_inverse:
        out.append(Tensor._wrap(inverse.astype(np.int64)))
    if return_counts:
        out.append(Tensor._wrap(counts.astype(np.int64)))
    return tuple(out) if len(out) > 1 else out[0]


def unique_consecutive(x: Tensor, return_inverse=False, return_counts=False, dim=None) -> Any:
    """The entries (or slices along ``dim``) with each run of equal consecutive ones kept
    once, with the inverse indices (which run each entry is in) and the run lengths if
    asked for. Not differentiable."""
    a = host_data(x, "unique_consecutive()")
    if dim is None:
        rows = a.reshape(-1, 1)
    else:
        d = wrap_dim(dim, a.ndim)
        rows = np.moveaxis(a, d, 0).reshape(a.shape[d], -1)
    starts = np.ones(len(rows), bool)
    starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    first = np.flatnonzero(starts)
    if dim is None:
        values = a.reshape(-1)[first]
    else:
        values = np.take(a, first, axis=d)
    out = [Tensor._wrap(values)]
    if return_inverse:
        inverse = np.cumsum(starts) - 1
        out.append(Tensor._wrap(inverse.reshape(a.shape if dim is None else -1).astype(np.int64)))
    if return_counts:
        out.append(Tensor._wrap(np.diff(np.append(first, len(rows))).astype(np.int64)))
    return tuple(out) if len(out) > 1 else out[0]


def bincount(x: Tensor, weights=None, minlength=0) -> Tensor:
    """How often each value 0, 1, ... (up to the largest, at least ``minlength`` of them)
    occurs in the 1-D non-negative integers ``x``; with ``weights``, their sum for each
    (float64, or float32 for float32 weights). Not differentiable."""
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype is dt.bool_:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{x.dtype.title}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    a = host_data(x, "bincount()")
    if a.ndim != 1 or (a.size and a.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return Tensor._wrap(np.bincount(a, minlength=minlength).astype(np.int64))
    if weights.ndim != 1 or weights.shape[0] != a.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    w = weights.detach()._host()
    out = np.bincount(a, weights=w.astype(np.float64), minlength=minlength)
    return Tensor._wrap(out.astype(w.dtype if w.dtype in (np.float32, np.float64) else np.float64))


__all__ = ["argwhere", "nonzero", "unique"]
