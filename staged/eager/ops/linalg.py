"""matmul with PyTorch's rank rules (1-D operands, broadcast batch dims) over the strict
batched primitive."""
from __future__ import annotations

from ... import autodiff as ad
from ._operands import broadcast_shapes, expand_to


def _matmul(a, b):
    """The strict primitive, with PyTorch's errors on mismatched shapes or dtypes."""
    pa, pb = a._payload, b._payload
    if pa.shape[-1] != pb.shape[-2] or pa.shape[:-2] != pb.shape[:-2] or pa.dtype != pb.dtype:
        ad.matmul.abstract_eval(a._aval(), b._aval())  # raises the error
    return ad.matmul(a, b)


def matmul(a, b):
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
    if a.ndim == 1 and b.ndim == 1:
        if a._payload.shape != b._payload.shape:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and "
                               f"src [{b.shape[0]}] to have the same number of elements, but "
                               f"got {a.shape[0]} and {b.shape[0]} elements respectively")
        n = a._payload.shape[0]
        return ad.reshape(_matmul(ad.reshape(a, shape=(1, n)), ad.reshape(b, shape=(n, 1))),
                          shape=())
    squeeze_a = a.ndim == 1
    squeeze_b = b.ndim == 1
    if squeeze_a:
        a = ad.reshape(a, shape=(1,) + tuple(a._payload.shape))
    if squeeze_b:
        b = ad.reshape(b, shape=tuple(b._payload.shape) + (1,))
    sa, sb = a._payload.shape, b._payload.shape
    if sa[:-2] != sb[:-2]:
        batch = broadcast_shapes(sa[:-2], sb[:-2])
        a = expand_to(a, tuple(batch) + tuple(sa[-2:]))
        b = expand_to(b, tuple(batch) + tuple(sb[-2:]))
    out = _matmul(a, b)
    if squeeze_a or squeeze_b:
        s = tuple(out._payload.shape)
        s = s[:-2] + ((s[-2],) if not squeeze_a else ()) + ((s[-1],) if not squeeze_b else ())
        out = ad.reshape(out, shape=s)
    return out


def mm(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2D tensors, got {a.ndim}D and {b.ndim}D")
    return _matmul(a, b)


def bmm(a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3D tensors, got {a.ndim}D and {b.ndim}D")
    return _matmul(a, b)
