"""Ops whose output shape depends on their input's values (nonzero, unique): eager only,
since a captured graph has static shapes."""

from __future__ import annotations

from typing import Any

import numpy as np

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


__all__ = ["argwhere", "nonzero", "unique"]
