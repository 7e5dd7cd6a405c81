"""torch's memory formats (``staged.contiguous_format``, ``channels_last`` ...).

Note [memory formats]: a new tensor made like another (``zeros_like``, ``empty_like``,
``rand_like`` ...), by ``empty(..., memory_format=)`` or by ``clone`` is laid out as torch
lays it out: ``preserve_format`` (the default of the ``_like`` factories and ``clone``)
keeps a dense input's strides (``zeros_like(x.t()).stride() == (1, 3)``) and a strided
one's order of dims (``like_strides``), ``channels_last`` gives NHWC strides. Op results
and conversions (``x.contiguous(memory_format=staged.channels_last)``, ``to``) are
row-major: the same values as torch, with ``stride()`` and ``is_contiguous()`` reporting
the layout staged has, not the one torch would make. ``is_contiguous(memory_format=...)``
reads the strides as torch does.
"""

from __future__ import annotations

import numpy as np

# the formats and the strides of new tensors live with the factories (which cannot import
# this package); ops read them from here
from ..factories import (  # noqa: F401
    MemoryFormat,
    channels_last,
    channels_last_3d,
    check_format as check,
    contiguous_format,
    like_strides,
    preserve_format,
    strided_array,
)
from ..factories import _check_format_type as _check_type
from ..meta import Meta
from ..strides import dense_strides


def is_contiguous(x, memory_format=None) -> bool:
    """Whether ``x``'s layout is that of ``memory_format`` (default: row-major), as torch
    reads strides: dims of size 1 have any stride."""
    if memory_format is not None:
        _check_type(memory_format)
    p, rank = x._payload, None if memory_format is None else memory_format._rank
    if type(p) is np.ndarray or type(p) is Meta:
        if rank is None:
            return bool(p.flags.c_contiguous)
    elif getattr(p, "order", None) is not None:
        pass  # a traced value laid out as eager's (Note [traced layouts] in tracing/capture.py)
    elif not _batched(p):
        return rank is None  # a compiled step's: row-major
    elif rank is not None:
        raise RuntimeError(
            "NYI: querying is_contiguous inside of vmap for memory_format other than "
            "torch.contiguous_format"
        )
    if rank is not None and x.ndim != rank:
        return False
    expected, strides = 1, x.stride()
    for d in range(x.ndim - 1, -1, -1) if rank is None else memory_format._order:
        if x.shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= x.shape[d]
    return True


def laid_out_like(x, r, fmt=None):
    """``r`` (a new tensor of ``x``'s shape) laid out as torch lays out a tensor made like
    ``x`` in format ``fmt`` (``clone``'s ``preserve_format``): its payload copied into that
    layout where it is not row-major."""
    p, q = x._payload, r._payload
    if type(q) is not np.ndarray and _batched(q):  # inside vmap: the physical value's
        if fmt is contiguous_format:
            _batch_first(r)
        elif fmt is None or fmt is preserve_format:
            laid_out_like(p.value, q.value, fmt)  # a copy keeps x's batch dim (its rule)
        return r
    st = like_strides(x, fmt)
    if st is not None and type(r._payload) is Meta:
        r._payload = Meta(r._payload.shape, r._payload.dtype, st)
    elif st is not None and type(r._payload) is np.ndarray:
        a = strided_array(r._payload.shape, st, r._payload.dtype)
        a[...] = r._payload
        r._payload = a
    return r


def _batched(p) -> bool:
    """Whether ``p`` is vmap's Batched payload (Note [batched payloads] in
    ``autograd/vmap.py``): its strides are the physical value's (``Tensor.stride``)."""
    return hasattr(p, "bdim")


def _batch_first(t) -> None:
    """Lay out the physical value of ``t`` (batched, a new tensor) as torch's clone inside
    vmap does with ``contiguous_format``: its batch dims outermost (the outer level's
    first), then ``t``'s dims row-major."""
    dims, p, holder = list(range(t.ndim)), t._payload, t
    while _batched(p):
        if p.bdim is not None:
            dims.insert(p.bdim, -p.level)
        holder, p = p.value, p.value._payload
    if type(p) is np.ndarray:
        slowest = sorted(range(p.ndim), key=lambda a: (dims[a] >= 0, abs(dims[a])))
        a = strided_array(p.shape, dense_strides(p.shape, slowest[::-1]), p.dtype)
        a[...] = p
        holder._payload = a
