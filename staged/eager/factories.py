"""Tensor factories, the random ones drawing torch's streams (``staged/eager/random``)."""

from __future__ import annotations

import math
import operator
import sys
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from .. import autodiff as ad
from .. import dtypes as dt
from .._where import warn_user
from .checks import require
from .devices import META, _default, on_meta
from .meta import Meta
from .strides import dense_strides, inferred, non_overlapping_and_dense, row_major
from .grad_mode import _state as _grad_state
from .interceptor import current_interceptor
from .random import counter, distributions, fills
from .random.generator import drawn
from .scalars import fill_array
from .storage import UntypedStorage
from .tensor import Layout, Tensor, _ragged, as_payload, check_array, first_leaf, strided
from .views import named

if TYPE_CHECKING:
    # a size: ints (zeros(2, 3)) or one tuple or list of them (zeros((2, 3)), zeros(t.shape))
    _Dim: TypeAlias = int | np.integer
    _SizeArg: TypeAlias = _Dim | tuple[_Dim, ...] | list[_Dim]

__all__ = [
    "tensor",
    "from_numpy",
    "from_dlpack",
    "frombuffer",
    "as_tensor",
    "asarray",
    "zeros",
    "ones",
    "empty",
    "empty_strided",
    "full",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "arange",
    "linspace",
    "logspace",
    "eye",
    "rand",
    "randn",
    "randint",
    "randperm",
    "rand_like",
    "randn_like",
    "randint_like",
    "normal",
    "bernoulli",
    "multinomial",
]


def _new(payload, requires_grad, meta=False):
    """A new leaf of ``payload``, or with ``meta`` of its shape and dtype on the meta
    device (Note [meta tensors])."""
    if meta and type(payload) is not Meta:
        payload = Meta(payload.shape, payload.dtype)
    t = Tensor._wrap(payload, False)
    if _grad_state.inference:
        t._vc = None  # made in inference_mode: an inference tensor
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, dtype=None, requires_grad=False, device=None) -> Tensor:
    """A new leaf tensor holding a copy of ``data``.

    Example:
        >>> staged.tensor([1.0, 2.0], requires_grad=True)
        tensor([1., 2.], requires_grad=True)
    """
    if isinstance(data, Tensor):
        copy_construct_warning("staged.tensor")
    return copied(data, dtype, requires_grad, device)


def copy_construct_warning(name: str) -> None:
    """torch's warning for ``tensor(t)`` and ``x.new_tensor(t)`` of a tensor ``t``."""
    warn_user(
        "To copy construct from a tensor, it is recommended to use sourceTensor.detach()."
        "clone() or sourceTensor.detach().clone().requires_grad_(True), rather than "
        f"{name}(sourceTensor)."
    )


def copied(data, dtype=None, requires_grad=False, device=None) -> Tensor:
    """``tensor(data)`` without its warning for a tensor ``data``."""
    meta = _options(device, None)
    if isinstance(data, (list, tuple)) and _holds_tensor(data):
        return _new(_from_items(data, dtype)._payload, requires_grad, meta)
    if isinstance(data, Tensor) and current_interceptor() is not None:  # a traced copy
        x = data.detach().to(data.dtype if dtype is None else dtype)
        return _new(ad.copy(x)._payload, requires_grad)
    return _new(as_payload(data, dtype), requires_grad, meta)


# Note [tensors from tensors]: ``tensor([t, u])`` of one-element tensors is torch's: the
# items' values, detached (the result is a leaf, not requiring grad, as torch's; stack the
# tensors instead to differentiate through them), of the dtype promoted from the items'
# dtypes (int32 items make an int32 tensor, a float64 one makes float64). Under
# staged.compile the items are traced values, or state a later call changes: the result
# is built from them by ops (a reshape and a concat, as torch.compile builds it), never
# from their data at trace time. Eagerly, NumPy builds it from their data.


def _holds_tensor(data) -> bool:
    """``data`` (nested lists and tuples) holds a tensor: anywhere under capture (where
    NumPy cannot read a traced one), else as its first item (a Python walk of every
    item would cost 4-6x NumPy's conversion of a long list; the others reach NumPy as
    arrays)."""
    if current_interceptor() is not None:
        return any(
            isinstance(x, Tensor) or (isinstance(x, (list, tuple)) and _holds_tensor(x))
            for x in data
        )
    return isinstance(first_leaf(data), Tensor)


def _from_items(data, dtype) -> Tensor:
    """A new tensor of the numbers and one-element tensors in the nested lists ``data``
    (Note [tensors from tensors])."""
    error = _ragged(data)
    if error is not None:
        raise error
    d = _item_dtype(data) if dtype is None else dt.as_dtype(dtype)
    if current_interceptor() is None:
        return Tensor._wrap(np.array(_host_items(data, d.np), dtype=d.np), False)
    return ad.copy(_traced_items(data, d))


def _item_dtype(data) -> dt.DType:
    """torch's dtype for ``tensor(data)``: a tensor's own, the promotion of a list's."""
    if isinstance(data, Tensor):
        return data.dtype
    if isinstance(data, (list, tuple)):
        if not data:
            return dt.get_default_dtype()
        return dt.result_type([_item_dtype(x) for x in data], ())
    return dt.from_numpy_dtype(as_payload(data).dtype)


def _item(t: Tensor) -> Tensor:
    if t.numel() != 1:
        raise ValueError("only one element tensors can be converted to Python scalars")
    return t


def _host_items(data, np_dtype):
    """``data`` with each tensor replaced by its value as a 0-d array of ``np_dtype``."""
    if isinstance(data, Tensor):
        return np.asarray(_item(data)._host()).reshape(()).astype(np_dtype)
    if isinstance(data, (list, tuple)):
        return [_host_items(x, np_dtype) for x in data]
    return data


def _traced_items(data, d: dt.DType) -> Tensor:
    """``data`` as a tensor of dtype ``d`` made by ops from its tensors' values."""
    if isinstance(data, Tensor):
        return ad.reshape(_item(data).detach().to(d), shape=())
    if not isinstance(data, (list, tuple)):
        return Tensor._wrap(as_payload(data, d), False)
    if not data:
        return Tensor._wrap(np.empty((0,), d.np), False)
    parts = [_traced_items(x, d) for x in data]
    parts = [ad.reshape(p, shape=(1, *p.shape)) for p in parts]
    return ad.concat(*parts, dim=0, sizes=(1,) * len(parts))


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` itself where it is a tensor of ``dtype`` (converted where it is of
    another), else a new tensor of it, as ``tensor`` makes; a NumPy array of a supported
    dtype is shared, not copied. On the meta device: a meta tensor of its shape."""
    if _options(device, None) and not (isinstance(data, Tensor) and data.is_meta):
        return tensor(data, dtype, device=META)
    if isinstance(data, Tensor):
        return data if dtype is None or dt.as_dtype(dtype) is data.dtype else data.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or dt.as_dtype(dtype).np == data.dtype):
        return from_numpy(data)  # shared, as torch's, where no conversion is asked
    return tensor(data, dtype)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=None) -> Tensor:
    """``obj`` as a tensor, as ``torch.asarray``: a tensor itself, a NumPy array shared
    where ``dtype`` is theirs and ``copy`` is not True, a copy otherwise (``copy=False``
    refuses to copy). ``requires_grad`` unset keeps a tensor's, else sets it as torch
    does: on the result where that is a leaf (``obj`` itself when shared), by detaching
    otherwise. On the meta device: a meta tensor of its shape."""
    if _options(device, None) and not (isinstance(obj, Tensor) and obj.is_meta):
        return tensor(obj, dtype, requires_grad=bool(requires_grad), device=META)
    d = None if dtype is None else dt.as_dtype(dtype)
    if isinstance(obj, UntypedStorage):  # its bytes as elements of ``dtype``, shared
        obj = obj._bytes().view((d or dt.uint8).np)
    if isinstance(obj, np.ndarray):
        obj = from_numpy(obj)
    if isinstance(obj, Tensor):
        if d is None or d is obj.dtype:
            r = obj.clone() if copy else obj
        elif copy is False:
            raise ValueError(
                f"can't alias tensor with dtype '{obj.dtype.title}' into dtype '{d.title}'."
            )
        else:
            r = obj.to(d)
    elif copy is False:
        raise ValueError("can't alias arbitrary sequence into a tensor.")
    else:
        r = tensor(obj, d)
    if requires_grad is None:
        return r
    return r.requires_grad_(requires_grad) if r.is_leaf else r if requires_grad else r.detach()


def from_numpy(a: np.ndarray) -> Tensor:
    """A tensor sharing memory with the NumPy array ``a``. A read-only array gives torch's
    warning and is written through all the same where NumPy lets a view of it be
    writable (its memory is), as torch's tensor writes it."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(a).__name__})")
    if not a.flags.writeable:
        warn_user(
            "The given NumPy array is not writable, and PyTorch does not support non-writable "
            "tensors. This means writing to this tensor will result in undefined behavior. You "
            "may want to copy the array to protect its data or make it writable before "
            "converting it to a tensor."
        )
        a = _writable(a)
    return _over(a)


def _over(a: np.ndarray) -> Tensor:
    """A tensor over ``a``'s memory, once its dtype and layout are checked."""
    check_array(a)
    dt.from_numpy_dtype(a.dtype)
    return Tensor._wrap(a, False)


def from_dlpack(ext_tensor, *, device=None, copy=None) -> Tensor:
    """A tensor over the memory of ``ext_tensor``, an object with ``__dlpack__`` (a NumPy
    array, a JAX or torch CPU array) or a DLPack capsule (``utils.dlpack.to_dlpack``'s), as
    torch's; ``copy=True`` copies it, ``copy=False`` refuses to."""
    if device is not None and str(device) != "cpu":
        raise RuntimeError(f"from_dlpack: staged's tensors live on the CPU, not {device}")
    if type(ext_tensor).__name__ == "PyCapsule":
        ext_tensor = _Capsule(ext_tensor)
    if not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(
            f"from_dlpack expects an object with __dlpack__ (a NumPy, JAX or torch array) or a "
            f"DLPack capsule, got {type(ext_tensor).__name__}"
        )
    try:
        a = np.from_dlpack(ext_tensor, copy=copy)
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        raise RuntimeError(
            f"from_dlpack could not take the {type(ext_tensor).__name__}: {e} (a CPU array of "
            "a dtype NumPy has is needed: bfloat16 is not one; a capsule can be taken once)"
        ) from None
    # a legacy capsule (torch's to_dlpack) has no read-only flag: NumPy takes it read-only
    return _over(a if a.flags.writeable else _writable(a))


class _Capsule:
    """A DLPack capsule as NumPy's ``from_dlpack`` takes it: an object with ``__dlpack__``."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0


def _writable(a: np.ndarray) -> np.ndarray:
    """A writable view of ``a`` where NumPy allows one (its memory is writable), else
    ``a`` (then a write into the tensor raises)."""
    v = a.view()
    try:
        v.flags.writeable = True
    except ValueError:
        return a
    return v


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False) -> Tensor:
    """A 1-D tensor over the bytes of ``buffer`` (anything with the buffer protocol) from
    byte ``offset``: ``count`` elements, or all that fit; it shares a writable buffer's
    memory, as torch's, and copies a read-only one (with torch's warning)."""
    d = dt.as_dtype(dtype)
    view = memoryview(buffer).cast("B")
    size, item = view.nbytes, d.itemsize
    if size == 0 or count == 0:
        raise ValueError(f"both buffer length ({size}) and count ({count}) must not be 0")
    if not 0 <= offset < size:
        raise ValueError(
            f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
            f"({size} bytes) minus 1"
        )
    if count < 0:
        if (size - offset) % item:
            raise ValueError(
                f"buffer length ({size - offset} bytes) after offset ({offset} bytes) must be "
                f"a multiple of element size ({item})"
            )
        count = (size - offset) // item
    elif offset + count * item > size:
        raise ValueError(
            f"requested buffer length ({count} * {item} bytes) after offset ({offset} bytes) "
            f"must not be greater than actual buffer length ({size} bytes)"
        )
    a = np.frombuffer(view, d.np, count, offset)
    if view.readonly:
        warn_user(
            "The given buffer is not writable, and PyTorch does not support non-writable "
            "tensors: staged copies it, so writes to the tensor leave the buffer as it was."
        )
        a = a.copy()
    return Tensor._wrap(a, False).requires_grad_(requires_grad)


def _options(device, layout, like=None) -> bool:
    """torch's checks of a factory's ``device=`` and ``layout=`` (staged's factories make
    strided tensors only), and whether the tensor is a meta one: ``device`` is meta, or
    where it is None, ``like``'s device (a ``*_like`` factory's) or the default one."""
    if device is not None:
        meta = on_meta(device)
    elif like is not None:
        meta = type(like._payload) is Meta
    else:
        meta = _default[-1] is META
    if layout is not None and layout is not strided:
        op = sys._getframe(1).f_code.co_name  # the factory: only on this error path
        if not isinstance(layout, Layout):
            raise TypeError(
                f"{op}(): argument 'layout' must be torch.layout, not {type(layout).__name__}"
            )
        raise RuntimeError(
            f"{op}(): layout={layout} is not supported: staged's factories make strided "
            "tensors (staged.sparse_coo_tensor makes a sparse one)"
        )
    return meta


# Memory formats and the layout of new tensors (Note [memory formats] in
# ops/memory_formats.py, which re-exports these: this module cannot import that package)


class MemoryFormat:
    """A memory format: ``staged.contiguous_format``, ``preserve_format``, ``channels_last``
    or ``channels_last_3d`` (Note [memory formats])."""

    def __init__(self, name: str, rank: int | None = None, order: tuple = ()):
        self.name, self._rank, self._order = name, rank, order

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self):
        return self.name


contiguous_format = MemoryFormat("contiguous_format")
preserve_format = MemoryFormat("preserve_format")
# the dims from fastest to slowest varying: NHWC, NDHWC
channels_last = MemoryFormat("channels_last", 4, (1, 3, 2, 0))
channels_last_3d = MemoryFormat("channels_last_3d", 5, (1, 4, 3, 2, 0))


def check_format(x, fmt) -> None:
    """torch's checks of a format asked for ``x`` (``channels_last`` needs 4-D)."""
    if fmt is None:
        return
    _check_format_type(fmt)
    if fmt._rank is not None and x.ndim != fmt._rank:
        raise RuntimeError(f"required rank {fmt._rank} tensor to use {fmt.name} format")


def _check_format_type(fmt) -> None:
    if not isinstance(fmt, MemoryFormat):
        raise TypeError(f"memory_format must be a torch.memory_format, not {type(fmt).__name__}")


def like_strides(x, fmt=None) -> tuple | None:
    """The strides (in elements) torch gives a new tensor made like ``x`` in format ``fmt``
    (``preserve_format`` where None), or None where that is row-major."""
    check_format(x, fmt)
    if fmt is contiguous_format:
        return None
    shape = tuple(x.shape)
    if fmt is not None and fmt._rank is not None:
        return dense_strides(shape, fmt._order)
    p = x._payload
    if type(p) is Meta:
        pass  # its strides, as an array's
    elif getattr(p, "order", None) is not None:
        pass  # a traced value laid out as eager's (Note [traced layouts] in tracing/capture.py)
    elif type(p) is not np.ndarray or (p.flags.c_contiguous and 1 not in shape):
        return None  # row-major (a dim of size 1 may have any stride)
    strides = x.stride()
    if not non_overlapping_and_dense(shape, strides):
        strides = inferred(shape, strides)
    return None if strides == row_major(shape) else strides


def format_strides(shape, fmt) -> tuple | None:
    """The strides of a new tensor of ``shape`` in format ``fmt`` (``empty``'s
    ``memory_format=``), or None where that is row-major."""
    if fmt is None:
        return None
    _check_format_type(fmt)
    if fmt is preserve_format:
        raise RuntimeError("unsupported memory format Preserve")
    if fmt._rank is not None and len(shape) != fmt._rank:
        raise RuntimeError(f"required rank {fmt._rank} tensor to use {fmt.name} format")
    return None if fmt._rank is None else dense_strides(tuple(shape), fmt._order)


def strided_array(shape, strides, np_dtype) -> np.ndarray:
    """A new (uninitialized) array of ``shape`` whose strides in elements are ``strides``
    (row-major where None)."""
    if strides is None:
        return np.empty(shape, np_dtype)
    need = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    buf = np.empty(need, np_dtype)
    return np.lib.stride_tricks.as_strided(buf, shape, tuple(s * buf.itemsize for s in strides))


def _size(size, keyword=None):
    """The shape from a factory's ``*size`` or its ``size=`` keyword (torch takes either)."""
    if keyword is not None:
        if size:
            op = sys._getframe(1).f_code.co_name
            raise TypeError(f"{op}() got multiple values for argument 'size'")
        size = (keyword,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for i, s in enumerate(size):
        if not isinstance(s, (int, np.integer)) and not _integer_scalar(s):
            op = sys._getframe(1).f_code.co_name  # the factory: only on this error path
            raise TypeError(
                f"{op}(): argument 'size' failed to unpack the object at pos {i + 1} with "
                f'error "type must be tuple of ints,but got {type(s).__name__}"'
            )
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
    return tuple(int(s) for s in size)


def _integer_scalar(s) -> bool:
    """Whether ``s`` is a 0-d integer tensor, which torch takes as a size (its ``__index__``)."""
    return isinstance(s, Tensor) and s.ndim == 0 and s._payload.dtype.kind in "iu"


def _dtype(dtype, default=None):
    return dt.as_dtype(dtype) if dtype is not None else (default or dt.get_default_dtype())


def zeros(
    *sizes: _SizeArg, size=None, dtype=None, requires_grad=False, device=None, layout=None
) -> Tensor:
    meta, shape, d = _options(device, layout), _size(sizes, size), _dtype(dtype).np
    return _new(Meta(shape, d) if meta else np.zeros(shape, d), requires_grad)


def ones(
    *sizes: _SizeArg, size=None, dtype=None, requires_grad=False, device=None, layout=None
) -> Tensor:
    meta, shape, d = _options(device, layout), _size(sizes, size), _dtype(dtype).np
    return _new(Meta(shape, d) if meta else np.ones(shape, d), requires_grad)


def empty(
    *sizes: _SizeArg,
    size=None,
    dtype=None,
    requires_grad=False,
    device=None,
    layout=None,
    memory_format=None,
) -> Tensor:
    """An uninitialized tensor, laid out in ``memory_format`` (Note [memory formats])."""
    meta, shape = _options(device, layout), _size(sizes, size)
    strides, d = format_strides(shape, memory_format), _dtype(dtype).np
    return _new(
        Meta(shape, d, strides) if meta else strided_array(shape, strides, d), requires_grad
    )


def empty_strided(
    size, stride, *, dtype=None, layout=None, device=None, requires_grad=False
) -> Tensor:
    """An uninitialized tensor of ``size`` whose ``stride()`` is ``stride``."""
    meta, size, stride = _options(device, layout), _size((size,)), tuple(stride)
    if len(size) != len(stride):
        raise RuntimeError(
            f"dimensionality of sizes ({len(size)}) must match dimensionality of strides "
            f"({len(stride)})"
        )
    d = _dtype(dtype).np
    return _new(Meta(size, d, stride) if meta else strided_array(size, stride, d), requires_grad)


def _filled(fill_value, dtype, size) -> tuple[np.ndarray, tuple]:
    """``full``'s ``fill_value`` checked and cast, and its ``size`` checked as a shape (in
    torch's order); a float16 or bfloat16 value beyond range saturates only for a shape of
    one element (see fill_array)."""
    if isinstance(fill_value, Tensor) and fill_value.ndim == 0:
        fill_value = fill_value.item()
    if not isinstance(fill_value, (bool, int, float, complex, np.number)):
        raise TypeError(
            "full(): argument 'fill_value' (position 2) must be Number, not "
            f"{type(fill_value).__name__}"
        )
    if dtype is None:
        dtype = dt.result_type([], [], [fill_value])
    shape = _size((size,))
    return fill_array(fill_value, _dtype(dtype), check_half=math.prod(shape) != 1), shape


def full(size, fill_value, dtype=None, requires_grad=False, device=None, layout=None) -> Tensor:
    meta = _options(device, layout)
    value, shape = _filled(fill_value, dtype, size)
    return _new(
        Meta(shape, value.dtype) if meta else np.full(shape, value, value.dtype), requires_grad
    )


def _new_like(t, dtype, requires_grad, device, layout, memory_format, fill=None) -> Tensor:
    """A new tensor of ``t``'s shape laid out as torch lays it out (``preserve_format`` by
    default, Note [memory formats]), holding ``fill`` (uninitialized where None)."""
    meta = _options(device, layout, t)
    strides, d = like_strides(t, memory_format), _dtype(dtype, t.dtype).np
    if meta:
        return _new(Meta(tuple(t.shape), d, strides), requires_grad)
    a = strided_array(tuple(t.shape), strides, d)
    if fill is not None:
        a[...] = fill
    return _new(a, requires_grad)


def zeros_like(
    t, dtype=None, requires_grad=False, device=None, layout=None, memory_format=None
) -> Tensor:
    return _new_like(t, dtype, requires_grad, device, layout, memory_format, 0)


def ones_like(
    t, dtype=None, requires_grad=False, device=None, layout=None, memory_format=None
) -> Tensor:
    return _new_like(t, dtype, requires_grad, device, layout, memory_format, 1)


def full_like(
    t, fill_value, dtype=None, requires_grad=False, device=None, layout=None, memory_format=None
) -> Tensor:
    value, _ = _filled(fill_value, dtype or t.dtype, tuple(t.shape))
    return _new_like(t, dtype, requires_grad, device, layout, memory_format, value)


def empty_like(
    t, dtype=None, requires_grad=False, device=None, layout=None, memory_format=None
) -> Tensor:
    return _new_like(t, dtype, requires_grad, device, layout, memory_format)


def _sticky(x, err):
    """``x`` rounded to odd where ``err`` (what rounding ``x`` lost) is not zero: ``x``'s
    neighbour toward ``err`` where ``x``'s last bit is even, so that rounding it again to a
    narrower precision rounds the exact value (round-to-odd)."""
    even = (x.view(np.int64) & 1) == 0
    return np.where((err != 0) & even, np.nextafter(x, np.where(err > 0, np.inf, -np.inf)), x)


def _two_sum(a, b):
    """``a + b`` rounded and what the rounding lost (Knuth's TwoSum: exact)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a):
    """``a`` as two halves of 26 bits (Veltkamp's split)."""
    c = 134217729.0 * a
    hi = c - (c - a)
    return hi, a - hi


def _fma(c, a, b, dtype):
    """``c + a * b`` in float64 arrays, rounded once to ``dtype`` (float32 or float64), as a
    fused multiply-add rounds."""
    if dtype == np.float32:  # the product of two float32s is exact in float64
        return _sticky(*_two_sum(c, a * b)).astype(np.float32)
    p = a * b
    (ah, al), (bh, bl) = _split(a), _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # Dekker: a * b == p + e exactly
    s, t1 = _two_sum(c, p)
    return s + _sticky(*_two_sum(t1, e))


def _arange(start, end, step, np_dtype) -> np.ndarray:
    """torch 2.13's CPU kernel for float32 and float64 (its AVX2 build, on one thread): in
    blocks of one 256-bit vector, two blocks at a time, a block's base is ``start + step *
    i`` and its values ``base + k * step``, the rest ``start + step * i``, each a fused
    multiply-add in float64 rounded to the dtype."""
    if np.dtype(np_dtype).kind in "iu":
        return _arange_integers(start, end, step, np_dtype)
    values = np.arange(start, end, step)
    if np.dtype(np_dtype) not in (np.float32, np.float64):
        return values.astype(np_dtype)
    exact = 2.0 ** (np.finfo(np_dtype).nmant + 1)  # integers below it: every way is exact
    if all(float(v).is_integer() and abs(v) < exact for v in (start, end, step)):
        return values.astype(np_dtype)
    n, width = len(values), 32 // np.dtype(np_dtype).itemsize
    i = np.arange(n, dtype=np.float64)
    first = i - i % width  # each vector's first index
    c, a = np.full(n, float(start)), np.full(n, float(step))
    base = _fma(c, a, first, np.float64).astype(np_dtype).astype(np.float64)
    vector = _fma(base, a, i - first, np.float64)
    scalar = _fma(c, a, i, np.float64)
    return np.where(i < n - n % (2 * width), vector, scalar).astype(np_dtype)


def _arange_integers(start, end, step, np_dtype) -> np.ndarray:
    """torch's integer kernel: the bounds and step truncated to integers (a fractional step
    too), their values ``start + i * step``; the count from the truncated ones for int64,
    from the given ones (``ceil((end - start) / step)``) for the narrower types."""
    xs, xe, xt = (int(v) for v in (start, end, step))  # (int(): C++'s truncation)
    if np.dtype(np_dtype) == np.int64:
        if xt == 0:
            raise ValueError("step must be nonzero")
        span = xe - xs + xt - (1 if xt > 0 else -1)
        n = abs(span) // abs(xt) * (1 if (span >= 0) == (xt > 0) else -1)  # C++'s division
    else:
        n = math.ceil((end - start) / step)
    return (xs + np.arange(max(n, 0), dtype=np.int64) * xt).astype(np_dtype)


def arange(
    start, end=None, step=1, dtype=None, requires_grad=False, device=None, layout=None
) -> Tensor:
    meta = _options(device, layout)
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        dtype = dt.result_type([], [], [start, end, step])
    _no_bool("arange_cpu", _dtype(dtype))
    return _new(_arange(start, end, step, _dtype(dtype).np), requires_grad, meta)


def _no_bool(kernel: str, d: dt.DType) -> None:
    """torch's refusal of a bool range (``arange``, ``linspace``... of ``dtype=bool`` or
    into a bool ``out``)."""
    if d is dt.bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def _linspace(start, end, steps: int, np_dtype) -> np.ndarray:
    """torch 2.13's CPU kernel: ``step = (end - start) / (steps - 1)`` in the dtype (in
    float64 for integers), the first half ``start + step * i``, the second ``end - step *
    (steps - 1 - i)``, each one fused multiply-add (as torch's AVX2 and AVX-512 builds
    compile it), so its rounding is torch's to the bit; float16 and bfloat16 round each
    operation (c10's Half arithmetic)."""
    if steps == 1:
        return np.full(1, start).astype(np_dtype)
    kind = np.dtype(np_dtype)
    i = np.arange(steps)
    first = i < steps // 2
    k = np.where(first, i, steps - 1 - i)
    if kind.kind == "c":
        return np.linspace(start, end, steps).astype(np_dtype)
    if kind.itemsize == 2 and kind.kind == "f" or kind.name == "bfloat16":
        t = kind.type
        s, e = t(start), t(end)
        step = t(t(e - s) / t(steps - 1))
        return np.where(first, s + step * k.astype(kind), e - step * k.astype(kind)).astype(kind)
    work = np.float32 if kind == np.float32 else np.float64
    s, e = (work(float(np.asarray(v).astype(np_dtype))) for v in (start, end))
    step = (e - s) / work(steps - 1)
    c = np.where(first, s, e).astype(np.float64)
    step_k = np.where(first, step, -step).astype(np.float64)
    values = _fma(c, step_k, k.astype(work).astype(np.float64), work)
    return values.astype(np_dtype) if kind.kind == "f" else np.trunc(values).astype(np_dtype)


def linspace(
    start, end, steps, dtype=None, requires_grad=False, device=None, layout=None
) -> Tensor:
    """``steps`` values from ``start`` to ``end``, evenly spaced, equal to the bit to
    torch's (``_linspace``)."""
    meta = _options(device, layout)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    _no_bool("linspace_cpu", _dtype(dtype))
    return _new(_linspace(start, end, int(steps), _dtype(dtype).np), requires_grad, meta)


def logspace(
    start, end, steps, base=10.0, dtype=None, requires_grad=False, device=None, layout=None
) -> Tensor:
    """``steps`` values from ``base ** start`` to ``base ** end``, evenly spaced in the
    exponent (computed in float64, then cast, as torch's CPU kernel)."""
    meta = _options(device, layout)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    _no_bool("logspace_cpu", _dtype(dtype))
    values = np.power(float(base), np.linspace(start, end, steps))
    return _new(values.astype(_dtype(dtype).np), requires_grad, meta)


def eye(n, m=None, dtype=None, requires_grad=False, device=None, layout=None) -> Tensor:
    meta = _options(device, layout)
    for what, k in (("n", n), ("m", m)):
        if k is not None and k < 0:
            raise RuntimeError(f"{what} must be greater or equal to 0, got {k}")
    d = _dtype(dtype).np
    return _new(
        Meta((n, n if m is None else m), d) if meta else np.eye(n, m, dtype=d), requires_grad
    )


def _random(name, fill, size, dtype, requires_grad, generator, meta=False):
    """A new tensor of ``size`` filled by ``fill(gen, fills.New(...))`` (``fill`` must hold no
    tensor: under capture it outlives the trace, Note [host draws]); with ``meta``, a meta
    tensor, drawing nothing."""
    if meta:
        return _new(Meta(size, dtype.np), requires_grad)
    t = drawn(
        generator,
        f"staged.{name}",
        size,
        dtype,
        lambda gen, shape: fill(gen, fills.New(shape, dtype.np)),
        _in_graph(fill, size, dtype),
    )
    return _new(t._payload, requires_grad)


# Note [draws in traced steps]: inside a trace, every draw from a generator is made on the
# host at each compiled call, from torch's stream, as eager code would (Note [host draws]
# in tracing/draws.py). Traced with rng="counter" (deployed steps, ONNX export), rand/randn
# (and their _like forms) from the default generator draw from the counter-based stream in
# the graph instead (as dropout does), new numbers at every call but not torch's; other
# draws are then frozen at trace time, with a warning.
_IN_GRAPH = {fills.uniform: counter.rand_uniform, fills.normal: counter.rand_normal}


def _in_graph(fill, size, dtype):
    """The draw in the graph (``rng="counter"``), where the counter stream has one."""
    make = _IN_GRAPH.get(fill)
    return None if make is None else lambda: make(size, dtype)


def rand(
    *sizes: _SizeArg,
    size=None,
    generator=None,
    dtype=None,
    requires_grad=False,
    device=None,
    layout=None,
) -> Tensor:
    """Uniform on [0, 1), torch's values after the same seed."""
    meta = _options(device, layout)
    return _random(
        "rand",
        fills.uniform,
        _size(sizes, size),
        _floating(dtype, "check_uniform_bounds"),
        requires_grad,
        generator,
        meta,
    )


def randn(
    *sizes: _SizeArg,
    size=None,
    generator=None,
    dtype=None,
    requires_grad=False,
    device=None,
    layout=None,
) -> Tensor:
    """Standard normal, torch's values after the same seed."""
    meta = _options(device, layout)
    return _random(
        "randn",
        fills.normal,
        _size(sizes, size),
        _floating(dtype, "normal_kernel_cpu"),
        requires_grad,
        generator,
        meta,
    )


def randint(
    low=None,
    high=None,
    size=None,
    *,
    generator=None,
    dtype=None,
    requires_grad=False,
    device=None,
    layout=None,
) -> Tensor:
    """Integers in [low, high) (``randint(high, size)`` or ``randint(low, high, size)``)."""
    meta = _options(device, layout)
    pair = low is not None and high is not None and size is not None  # (low, high, size)
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:  # randint(high, size=size)
        low, high = 0, low
    elif low is None:  # randint(high=high, size=size)
        low = 0
    if high is None or size is None:
        raise TypeError(
            "randint() received an invalid combination of arguments - got (int), but "
            "expected one of: (high, size), (low, high, size)"
        )
    _int_bounds(low, high, size, pair)
    d = _dtype(dtype, dt.int64)
    low, high = fills.int_range(low, high, d)
    return _random(
        "randint",
        lambda gen, p: fills.integers(gen, p, low, high),
        _size((size,)),
        d,
        requires_grad,
        generator,
        meta,
    )


def _int_bounds(low, high, size, pair: bool) -> None:
    """torch's TypeError where ``randint``'s bounds are not integers (a float, a bool);
    ``pair``: both were given."""

    def integer(v) -> bool:
        if isinstance(v, (bool, np.bool_)):
            return False
        try:
            operator.index(v)
        except TypeError:
            return False
        return True

    def name(v) -> str:
        t = type(v)
        plain = t.__module__ == "builtins" or isinstance(v, Tensor)  # torch's own names
        return t.__name__ if plain else f"{t.__module__}.{t.__name__}"

    if not pair and not integer(high):
        raise TypeError(f"randint(): argument 'high' (position 1) must be int, not {name(high)}")
    if pair and not (integer(low) and integer(high)):
        raise TypeError(
            f"randint() received an invalid combination of arguments - got ({name(low)}, "
            f"{name(high)}, {name(size)}), but expected one of: (high, size), (low, high, size)"
        )


def randperm(
    n, *, generator=None, dtype=None, requires_grad=False, device=None, layout=None
) -> Tensor:
    """A random permutation of ``range(n)`` (torch's swap sequence)."""
    meta = _options(device, layout)
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    d = _dtype(dtype, dt.int64)
    if meta:
        return _new(Meta((int(n),), d.np), requires_grad)
    t = drawn(
        generator,
        "staged.randperm",
        (int(n),),
        d,
        # under vmap(randomness="different") the batch dims lead: a permutation each
        lambda gen, shape: np.array(
            [distributions.randperm(gen, shape[-1]) for _ in range(math.prod(shape[:-1]))],
            d.np,
        ).reshape(shape),
    )
    return _new(t._payload, requires_grad)


def _like(name, fill, t, dtype, requires_grad, generator, memory_format, meta):
    """A new tensor laid out as torch lays out one like ``t`` (Note [memory formats])
    filled by ``fill`` (a meta tensor, drawing nothing, with ``meta``)."""
    d, shape = _dtype(dtype, t.dtype), tuple(t.shape)
    strides = like_strides(t, memory_format)
    if meta:
        return _new(Meta(shape, d.np, strides), requires_grad)
    into = None if strides is None else strided_array(shape, strides, d.np)

    def laid_out(gen, s):  # a strided layout (or the draw hook's array): in memory order
        if type(s) is np.ndarray:
            return fill(gen, s)
        return fill(gen, into if into is not None and s == into.shape else fills.New(s, d.np))

    r = drawn(generator, f"staged.{name}", shape, d, laid_out, _in_graph(fill, shape, d), t)
    p = r._payload
    if into is not None and type(p) is np.ndarray and p.strides != into.strides:
        into[...] = p  # the draws' order gave the layout, but not a size-1 dim's stride
        p = into
    return _new(p, requires_grad)


def rand_like(
    t,
    *,
    generator=None,
    dtype=None,
    requires_grad=False,
    device=None,
    layout=None,
    memory_format=None,
) -> Tensor:
    meta = _options(device, layout, t)
    fills.check_floating(_dtype(dtype, t.dtype), "check_uniform_bounds")
    return _like(
        "rand_like", fills.uniform, t, dtype, requires_grad, generator, memory_format, meta
    )


def randn_like(
    t,
    *,
    generator=None,
    dtype=None,
    requires_grad=False,
    device=None,
    layout=None,
    memory_format=None,
) -> Tensor:
    meta = _options(device, layout, t)
    fills.check_floating(_dtype(dtype, t.dtype), "normal_kernel_cpu")
    return _like(
        "randn_like", fills.normal, t, dtype, requires_grad, generator, memory_format, meta
    )


def randint_like(
    t,
    low=0,
    high=None,
    *,
    generator=None,
    dtype=None,
    requires_grad=False,
    device=None,
    layout=None,
    memory_format=None,
) -> Tensor:
    meta = _options(device, layout, t)
    if high is None:
        low, high = 0, low
    low, high = fills.int_range(low, high, _dtype(dtype, t.dtype))
    return _like(
        "randint_like",
        lambda gen, p: fills.integers(gen, p, low, high),
        t,
        dtype,
        requires_grad,
        generator,
        memory_format,
        meta,
    )


def normal(
    mean,
    std=1.0,
    size=None,
    *,
    generator=None,
    dtype=None,
    requires_grad=False,
    device=None,
    layout=None,
) -> Tensor:
    """``normal(mean, std)`` with either a tensor (``std`` >= 0), or floats and ``size``:
    torch's draws of N(0, std) then ``+ mean``, or of N(0, 1) then ``* std + mean``."""
    meta = _options(device, layout)
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        if size is None:
            raise TypeError(
                "normal() received an invalid combination of arguments: floats "
                "mean and std need a size"
            )
        _check_std(std)
        return _random(
            "normal",
            lambda gen, p: fills.normal(gen, p, mean, std),
            _size((size,)),
            _floating(dtype, "normal_kernel_cpu"),
            requires_grad,
            generator,
            meta,
        )
    if size is not None:
        raise TypeError(
            "normal() received an invalid combination of arguments - a tensor mean or std "
            "takes no size"
        )
    if isinstance(mean, Tensor) and isinstance(std, Tensor):
        shape, d = np.broadcast_shapes(tuple(mean.shape), tuple(std.shape)), mean.dtype
    else:
        like = mean if isinstance(mean, Tensor) else std
        shape, d = tuple(like.shape), like.dtype
    out = _new(normal_tensors(mean, std, tuple(shape), d, generator)._payload, requires_grad)
    tracked = [isinstance(t, Tensor) and t._requires_grad for t in (mean, std)]
    return _zero_gradient(out, mean, std, tracked) if any(tracked) else out


def _zero_gradient(out: Tensor, mean, std, tracked: list) -> Tensor:
    """``out`` with a grad_fn giving ``mean`` and ``std`` zero gradients, torch's
    ``NormalBackward1/2/3`` (of a tensor mean, std or both): a sample does not depend
    differentiably on its parameters. Where grad mode is off, ``out``."""
    if not _grad_state.grad_enabled:
        return out
    shape, d = tuple(out._payload.shape), out.dtype
    parts = []
    for t, keep in zip((mean, std), tracked):
        if keep:
            t = t if t.dtype is d else ad.cast(t, dtype=d)
            if t._payload.shape != shape:
                t = ad.expand(
                    ad.reshape(t, shape=(1,) * (len(shape) - t.ndim) + tuple(t.shape)), shape=shape
                )
            parts.append(t)
    other = parts[0] if len(parts) == 1 else ad.add(*parts)
    everywhere = Tensor._wrap(np.ones(shape, np.bool_))
    y = ad.where(everywhere, out, other)
    return named(y, "NormalBackward" + ("3" if all(tracked) else "1" if tracked[0] else "2"))


def normal_tensors(mean, std, shape, dtype, generator) -> Tensor:
    """``normal(mean, std)`` with a tensor ``mean`` or ``std``, of ``shape`` and ``dtype``
    (the result's, or an ``out=``'s): as torch's ``normal_out_impl``, N(0, std) drawn in
    ``dtype`` then ``add_(mean)``, or N(0, 1) then ``mul_(std).add_(mean)``, each in-place
    step computed in the promoted dtype and rounded to ``dtype`` (a float32 result of
    float64 ``std`` is rounded twice)."""
    fills.check_floating(dtype, "normal_kernel_cpu")
    if not isinstance(std, Tensor):
        _check_std(std)
        z = _random(
            "normal", lambda gen, p: fills.normal(gen, p, 0.0, std), shape, dtype, False, generator
        )
    else:
        std = std.detach()
        require(std >= 0, RuntimeError, "normal expects all elements of std >= 0.0")
        z = _random("normal", fills.normal, shape, dtype, False, generator)
        z = (z * std).to(dtype)
    return (z + (mean.detach() if isinstance(mean, Tensor) else mean)).to(dtype)


def _check_std(std):
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")  # C++'s <<


def bernoulli(input, p=None, *, generator=None) -> Tensor:
    """1 with probability ``p`` (the elements of ``input`` when ``p`` is None), else 0, in
    ``input``'s dtype."""
    if p is None:
        return bernoulli_mask(generator, "staged.bernoulli", tuple(input.shape), input).to(
            input.dtype
        )
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    return _random(
        "bernoulli",
        lambda gen, a: fills.bernoulli(gen, a, p),
        tuple(input.shape),
        input.dtype,
        False,
        generator,
    )


def bernoulli_mask(generator, what: str, shape, p: Tensor) -> Tensor:
    """``u < p`` of ``shape`` (``p`` broadcast to it), torch's ``bernoulli_`` of a
    probability tensor: float32 uniforms (float64 ones for float64 ``p``) in a
    contiguous tensor's order. Under capture the uniforms are drawn on the host at each
    call and the comparison (with the check that ``p`` lies in [0, 1]) is in the graph."""
    fills.check_floating(p.dtype, "bernoulli_tensor_cpu_p_")
    p = p.detach()
    require(
        (p >= 0) & (p <= 1),
        RuntimeError,
        "Expected p_in >= 0 && p_in <= 1 to be true, but got false.",
    )
    wide = dt.float64 if p.dtype is dt.float64 else dt.float32
    u = drawn(
        generator, what, shape, wide, lambda gen, s: gen.uniform(math.prod(s), wide.np).reshape(s)
    )
    return u < p.to(wide)


def multinomial(input, num_samples, replacement=False, *, generator=None) -> Tensor:
    """``num_samples`` indices per row of the 1-D or 2-D ``input``'s weights, as torch's CPU
    kernel draws them. Without replacement (or one sample): the top ``num_samples`` of
    ``w / q``, ``q`` from ``exponential_(1)`` in ``w``'s dtype (ties keep their order). With
    replacement: per row, the cumulative sum over its total (the last entry 1), and for
    each sample a float64 uniform's place in it (the first entry not below it). Under
    capture the draws are made on the host and the rest is in the graph."""
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"multinomial only supports floating-point dtypes for input, got: {input.dtype.title}"
        )
    k, cols = int(num_samples), input.shape[-1]
    if k <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and k > cols:
        raise RuntimeError(
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement"
        )
    w = input.detach().reshape(-1, cols)
    require(
        w.isfinite() & (w >= 0),
        RuntimeError,
        "probability tensor contains either `inf`, `nan` or element < 0",
    )
    require(
        w.sum(1) > 0, RuntimeError, "invalid multinomial distribution (sum of probabilities <= 0)"
    )
    rows, d = w.shape[0], w.dtype.np
    if not replacement or k == 1:
        q = drawn(
            generator,
            "staged.multinomial",
            (rows, cols),
            w.dtype,
            lambda gen, s: distributions.exponential(gen, math.prod(s), 1.0).astype(d).reshape(s),
        )
        out = ad.argsort(-(w / q), dim=1, descending=False, k=k)
    else:
        cdf = ad.cumsum(w, dim=1, reverse=False)
        cdf = (cdf / cdf[:, -1:]).where(tensor(np.arange(cols) < cols - 1), 1.0)
        u = drawn(
            generator,
            "staged.multinomial",
            (rows, k),
            dt.float64,
            lambda gen, s: gen.uniform(math.prod(s), np.float64).reshape(s),
        )
        out = (cdf.double()[:, None, :] < u[:, :, None]).sum(2)
    return out.reshape(*input.shape[:-1], k)


def _floating(dtype, kernel):
    d = _dtype(dtype)
    fills.check_floating(d, kernel)
    return d


_RANGE_DEPRECATED = (
    "torch.range is deprecated and will be removed in a future release because its behavior "
    "is inconsistent with Python's range builtin. Instead, use torch.arange, which produces "
    "values in [start, end)."
)


def deprecated_range(
    start, end, step=1, dtype=None, requires_grad=False, device=None, layout=None
) -> Tensor:
    """Deprecated: ``start, start + step, ...`` up to ``end`` inclusive, of the default
    dtype unless ``dtype`` says (``arange`` stops before ``end``); the bounds are first
    cast to the dtype's kind (integers for an integer dtype), values computed in float64
    or int64 as torch's CPU kernel does."""
    warn_user(_RANGE_DEPRECATED)
    meta = _options(device, layout)
    d = _dtype(dtype)
    kind = float if d.is_floating_point or d.is_complex else int
    start, end, step = (kind(v.item() if isinstance(v, Tensor) else v) for v in (start, end, step))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    n = int((end - start) / step + 1) if kind is float else (end - start) // step + 1
    values = start + np.arange(n, dtype=np.float64 if kind is float else np.int64) * step
    return _new(values.astype(d.np), requires_grad, meta)
