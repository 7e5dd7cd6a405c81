"""Broadcasting and type promotion, done once here so primitives can stay strict."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import autodiff as ad
from ... import dtypes as dt
from ..._where import at_user
from .. import meta
from ..loop_cache import LoopCache
from ..scalars import fill_array, int64_range, number_array
from ..tensor import Tensor

_SCALARS = (bool, int, float, complex, np.number, np.bool_)
_ndarray = np.ndarray
# a Python number of this type next to a tensor of these NumPy kinds takes its dtype
_KEEPS = {float: "fVc", int: "fVciu"}


def scalar_tensor(v, dtype: dt.DType, *, check_half: bool = True) -> Tensor:
    """``v`` as a 0-d tensor of ``dtype``, converted as torch's checked ``Scalar.to<T>()``
    (``scalars.fill_array``)."""
    return Tensor._wrap(fill_array(v, dtype, check_half=check_half), False)


def _wrapped(v, dtype: np.dtype, error: OverflowError) -> np.ndarray:
    """``v``, a number NumPy refused to convert to ``dtype``, as torch converts an operand
    of an arithmetic or comparison op: an int of int64 or uint64 range wraps modulo
    2**bits (``uint8 + 300`` adds 44, ``uint8 > -1`` compares with 255); ``error`` again
    for any other."""
    if type(v) is not int or dtype.kind not in "iu" or not int64_range(v):
        raise error
    bits = 8 * dtype.itemsize
    v %= 1 << bits
    return np.array(v - (1 << bits) if dtype.kind == "i" and v >> (bits - 1) else v, dtype)


def to_dtype(t: Tensor, dtype: dt.DType) -> Tensor:
    return t if t._payload.dtype == dtype.np else ad.cast(t, dtype=dtype)


def _broadcast2(a: tuple, b: tuple) -> tuple | None:
    """The broadcast shape of two shapes, or None where they don't broadcast (what
    np.broadcast_shapes computes, without its 3 us of Python)."""
    if len(a) < len(b):
        a, b = b, a
    n = len(a) - len(b)
    out = list(a)
    for i, y in enumerate(b):
        x = a[n + i]
        if x != y:
            if x == 1:
                out[n + i] = y
            elif y != 1:
                return None
    return tuple(out)


def broadcast_shapes(*shapes) -> tuple:
    if len(shapes) == 2:
        out = _broadcast2(tuple(shapes[0]), tuple(shapes[1]))
        if out is not None:
            return out
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        a, b = shapes[0], shapes[1]
        n = max(len(a), len(b))
        pa, pb = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
        for i in range(n - 1, -1, -1):
            if pa[i] != pb[i] and 1 not in (pa[i], pb[i]):
                raise RuntimeError(
                    at_user(
                        f"The size of tensor a ({pa[i]}) must match the size of tensor b "
                        f"({pb[i]}) at non-singleton dimension {i}"
                    )
                ) from None
        raise RuntimeError(at_user(f"shapes {list(a)} and {list(b)} cannot be broadcast")) from None


def _root(t: Tensor) -> Tensor:
    return t if t._base is None else t._base


def fresh(out: Tensor, *inputs: Tensor) -> Tensor:
    """``out`` as a tensor of its own: a copy where it is one of ``inputs`` or a view of
    one's memory. For ops that torch always writes anew (``repeat``, a pad by 0, a
    resize to the same size), whose compositions here are the input itself or a view of
    it at their edge sizes: a write to the result must not reach the input, nor raise
    for the expanded view's shared elements."""
    root = _root(out)
    return ad.copy(out) if any(root is _root(x) for x in inputs) else out


def expand_to(t: Tensor, shape: tuple) -> Tensor:
    s = tuple(t._payload.shape)
    if s == shape:
        return t
    if len(s) < len(shape):
        t = ad.reshape(t, shape=(1,) * (len(shape) - len(s)) + tuple(s))
    return ad.expand(t, shape=tuple(shape))


def promote_types(*vals) -> dt.DType:
    dims: list[dt.DType] = []
    zero: list[dt.DType] = []
    scalars: list[Any] = []
    for v in vals:
        if isinstance(v, Tensor):
            (dims if v._payload.shape else zero).append(v.dtype)
        elif isinstance(v, _SCALARS):
            scalars.append(v)
        else:
            raise TypeError(f"expected a Tensor or a Python number, got {type(v).__name__}")
    return dt.result_type(dims, zero, scalars)


def operands(*vals, dtype: dt.DType | None = None):
    """Tensors of one dtype (PyTorch's promotion, or ``dtype``) and one broadcast shape."""
    if dtype is None:
        if len(vals) == 2:  # fast paths: what promotion and broadcasting would leave as is
            x, y = vals
            if isinstance(x, Tensor):
                px = x._payload
                if isinstance(y, Tensor):
                    py = y._payload
                    if px.dtype == py.dtype and px.shape == py.shape and type(px) is type(py):
                        return vals
                elif px.dtype.kind in _KEEPS.get(type(y), ""):
                    return x, _number_beside(y, px)
            elif isinstance(y, Tensor):
                py = y._payload
                if py.dtype.kind in _KEEPS.get(type(x), ""):
                    return _number_beside(x, py), y
        dtype = promote_types(*vals)
    ts = [to_dtype(v, dtype) if isinstance(v, Tensor) else v for v in vals]
    shapes = [t._payload.shape for t in ts if isinstance(t, Tensor)]
    shape = (
        ()
        if not shapes
        else shapes[0]
        if all(s == shapes[0] for s in shapes)
        else broadcast_shapes(*shapes)
    )
    if all(type(t._payload) is _ndarray for t in ts if isinstance(t, Tensor)):
        # eager: a number becomes a broadcast view of the result shape, no ops recorded
        return [
            expand_to(t, shape) if isinstance(t, Tensor) else _number(t, dtype.np, shape)
            for t in ts
        ]
    # symbolic: a 0-d constant expanded in the graph (never a full-size constant); meta
    # beside meta tensors
    payloads = [t._payload for t in ts if isinstance(t, Tensor)]
    if meta.among(payloads):
        meta.same_device(payloads, meta.public_operand)
    like = payloads[0] if payloads else None
    return [
        expand_to(t if isinstance(t, Tensor) else _number(t, dtype.np, (), like), shape) for t in ts
    ]


def _number_beside(v, p) -> Tensor:
    """``v``, a Python number whose type keeps the dtype of payload ``p``, as the other
    operand: what ``operands`` makes of it after promotion, eagerly a broadcast view,
    under capture a 0-d constant expanded in the graph."""
    if type(p) is _ndarray:
        return _number(v, p.dtype, p.shape)
    return expand_to(_number(v, p.dtype, (), p), tuple(p.shape))


def _number(v, dtype: np.dtype, shape: tuple, like=None) -> Tensor:
    """``v`` as a read-only broadcast view of ``shape``: ``np.broadcast_to``'s array, made
    directly (a third of its time, on every op with a Python number); its metadata where
    ``like``, a payload, is meta. The arrays of ints and of nonzero, non-NaN floats are
    kept (``_NUMBERS``): ``x * 2`` in a loop makes one (read-only, its memory too, so no
    view of it is made writable)."""
    key = (type(v), v, dtype, shape)
    a = _NUMBERS.get(key) if like is None else None
    if a is None:
        try:
            with np.errstate(over="ignore"):  # a float beyond float16's range is inf, quietly
                if dtype.itemsize <= 2 and dtype.kind in "fV":  # Note [half through float32]
                    one = dt.narrowed(np.array(v), dtype)
                else:
                    one = np.array(v, dtype)
        except OverflowError as e:
            one = _wrapped(v, dtype, e)
        one = number_array(one, v)
        a = np.ndarray(shape, dtype, one, 0, (0,) * len(shape))
        a.flags.writeable = False
        if like is not None:
            return Tensor._wrap(meta.like(a, like))
        if type(v) is int or type(v) is float and v and v == v:  # (0.0 == -0.0 as keys)
            _NUMBERS.put(key, a)
    return Tensor._wrap(a)


_NUMBERS = LoopCache()  # (type, value, dtype, shape) -> _number's array


def float_operand(t: Tensor) -> Tensor:
    """Integer and bool inputs of float-valued ops become the default float dtype."""
    d = t.dtype
    return t if d.is_floating_point or d.is_complex else ad.cast(t, dtype=dt.get_default_dtype())


def half(*tensors) -> bool:
    """Whether ``tensors`` (None skipped) are all float16 or all bfloat16: torch's CPU
    matmul and convolution kernels multiply those in float32 and round the result once
    (``in_float32``)."""
    d = tensors[0]._payload.dtype
    return (
        d.itemsize == 2
        and d.kind in "fV"
        and all(t is None or t._payload.dtype == d for t in tensors[1:])
    )


def in_float32(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on float32 copies of the tensors among ``args``, its result
    rounded back to the first one's (half) dtype once."""
    d = args[0].dtype
    wide = [ad.cast(a, dtype=dt.float32) if isinstance(a, Tensor) else a for a in args]
    return ad.cast(fn(*wide, **kwargs), dtype=d)


def floating_kernel(name: str, x: Tensor) -> None:
    """torch's refusal of a non-floating ``x`` by a kernel written for floats only."""
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}\" not implemented for '{x.dtype.title}'")
