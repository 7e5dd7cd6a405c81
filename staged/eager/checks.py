"""Checks of tensor data that torch makes before an op runs (indices in range, probabilities
in [0, 1], ...): raised at once for data, recorded in the graph under capture, where a
compiled step raises them when its results are read (Note [index checks])."""

from __future__ import annotations

import math

import numpy as np

from .. import autodiff as ad
from .. import dtypes as dt
from .._where import at_user
from ..autodiff import lax
from ..autodiff.indexing import KEY_CAP
from .tensor import Tensor


def _record(keys: Tensor, error, message: str, lo: int = 0, hi: int = 0) -> None:
    """The in-graph check of the 1-D int64 ``keys`` (0: fine; else ``report_value``'s key
    of the bad value furthest out)."""
    ad.check(
        ad.reduce_max(keys, dims=(0,), keepdim=True),
        error=error.__name__,
        message=message,
        lo=lo,
        hi=hi,
    )


def _flat(t: Tensor):
    n = math.prod(t._payload.shape)
    return (lax.reshape(t, (n,)) if tuple(t._payload.shape) != (n,) else t), n


def _data(t: Tensor):
    """``t``'s values, or None without data (under capture). Under vmap these are the
    physical values, batch and all: a check holds value by value, so it runs on them at
    once instead of being recorded for the graph."""
    p = t._payload
    while type(p) is not np.ndarray:
        v = getattr(p, "value", None)  # vmap's Batched payload holds its physical Tensor
        if not isinstance(v, Tensor):
            return None
        p = v._payload
    return p


def check_range(index: Tensor, lo: int, hi: int, error, message: str, skip=None) -> None:
    """Raise ``error(message.format(v))`` for the first entry ``v`` of the int64 ``index``
    outside ``[lo, hi)`` (entries equal to ``skip`` are fine). Without data (under
    capture) the check is recorded instead, of a report that is 0 or stands for the bad
    entry furthest out."""
    p = _data(index)
    if p is not None:
        bad = (p < lo) | (p >= hi)
        if skip is not None:
            bad &= p != skip
        if bad.any():
            raise error(at_user(message).format(p[bad].flat[0]))
        return
    message = at_user(message)  # the user's line, also in a compiled step's report
    flat, n = _flat(index)
    if n == 0:
        return

    def key(d, odd):  # 2 min(d, cap) + 1 + odd (report_value in autodiff/indexing.py)
        return lax.add(lax.mul(ad.minimum(d, lax.full_like(d, KEY_CAP)), 2), 2 - odd)

    zero = lax.full_like(flat, 0)
    above = lax.where(lax.ge(flat, hi), key(lax.sub(flat, hi), 0), zero)
    keys = lax.where(lax.lt(flat, lo), key(lax.sub(lo - 1, flat), 1), above)
    if skip is not None:
        keys = lax.where(lax.eq(flat, skip), zero, keys)
    _record(keys, error, message, lo, hi)


def require(ok: Tensor, error, message: str) -> None:
    """Raise ``error(message)`` unless the bool ``ok`` holds everywhere; under capture, the
    check is recorded instead."""
    p = _data(ok)
    if p is not None:
        if not p.all():
            raise error(at_user(message))
        return
    flat, n = _flat(ok)
    if n:
        _record(lax.mul(lax.cast(lax.logical_not(flat), dt.int64), 2), error, at_user(message))
