"""``torch._segment_reduce``: reductions over consecutive segments of a tensor's first dim
(PyTorch Geometric's CSR aggregations), composed of staged's scatter ops, so it
differentiates as they do."""

from __future__ import annotations

import math

import numpy as np

from ..factories import full
from ..tensor import Tensor
from .data_dependent import host_data

_FILL = {"sum": 0.0, "mean": 0.0, "max": -math.inf, "min": math.inf, "prod": 1.0}
_SCATTER = {"max": "amax", "min": "amin", "prod": "prod"}
_ALIASES = {"amax": "max", "amin": "min"}


def _segment_reduce(
    data,
    reduce,
    *,
    lengths=None,
    indices=None,
    offsets=None,
    axis=0,
    unsafe=False,
    initial=None,
) -> Tensor:
    """``out[i]`` reduces ``data[start_i:end_i]`` (the segments given by ``lengths`` or
    ``offsets``), ``initial`` taking part where given (a segment without entries is
    ``initial``, else 0 for sum, NaN for mean, -inf/inf for max/min, 1 for prod), as
    torch's. The segments are read now (host data) and always checked."""
    reduce = _ALIASES.get(reduce, reduce)
    if reduce not in _FILL:
        raise RuntimeError(f"segment_reduce(): unsupported reduction {reduce!r}")
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if (lengths is None) == (offsets is None):
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined")
    given = lengths if lengths is not None else offsets
    bounds = host_data(given, "segment_reduce()'s segments").astype(np.int64)
    if bounds.ndim != 1:
        raise NotImplementedError(
            "segment_reduce(): staged takes 1-D lengths or offsets (one dim of segments)"
        )
    if axis != 0:
        raise RuntimeError(
            f"segment_reduce(): Expected axis to be the last dimension of lengths but got {axis}."
        )
    counts = bounds if lengths is not None else np.diff(bounds)
    n = data.shape[0]
    if (
        np.any(counts < 0)
        or counts.sum() != n
        or (offsets is not None and (len(bounds) == 0 or bounds[0] != 0))
    ):
        raise RuntimeError(
            "segment_reduce(): Expected all rows of lengths along axis to sum to "
            f"data.size(0) = {n} (offsets to start at 0 and never decrease)"
        )
    segment = Tensor._wrap(np.repeat(np.arange(len(counts)), counts))
    where = segment.reshape(-1, *(1,) * (data.ndim - 1)).expand(*data.shape)
    out_shape = (len(counts), *data.shape[1:])
    fill = _FILL[reduce] if initial is None else initial
    out = full(out_shape, fill, dtype=data.dtype)
    if reduce in ("sum", "mean"):
        out = out.scatter_add(0, where, data)
        if reduce == "mean":
            size = Tensor._wrap(counts.astype(np.float64)).to(data.dtype)
            size = size.reshape(-1, *(1,) * (data.ndim - 1))
            empty = math.nan if initial is None else initial
            out = (out / size.clamp(min=1)).where(size > 0, full((), empty, dtype=data.dtype))
        return out
    return out.scatter_reduce(0, where, data, _SCATTER[reduce], include_self=initial is not None)
