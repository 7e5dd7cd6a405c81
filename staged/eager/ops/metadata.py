"""A tensor's metadata and memory: the in-place view ops (``t_``, ``squeeze_`` ...),
``as_strided``, ``resize_``, ``Tensor.new``, Python callables over the values (``apply_``,
``map_``), shared memory, and torch's conjugate bit (a conj view's) and negative bit
(which staged never sets)."""

from __future__ import annotations

import math
import warnings
from multiprocessing.reduction import ForkingPickler

import numpy as np

from ... import autodiff as ad
from ... import dtypes as dt
from ..._where import at_user
from ...autodiff.shape import even_steps, strided_index
from ..devices import check as check_device
from ..factories import strided_array
from .. import shared_memory, views
from ..views import named
from ..interceptor import current_interceptor
from ..storage import UntypedStorage, untyped_storage
from ..strides import row_major
from ..tensor import Size, Tensor
from . import elementwise as ew
from . import shape
from .indexing import take_index
from .inplace import has_views, reshape_in_place, write


# --- the in-place view ops: the tensor takes the view's shape and grad_fn -------------------
# torch's grad_fn of an in-place view op is the out-of-place op's, numbered on: squeeze_'s
# three forms SqueezeBackward3/4/5 (squeeze's 0/1/2), UnsqueezeBackward1, TBackward1 ...
def _renumbered(y, after: int):
    if y.grad_fn is None:
        return y
    name = y.grad_fn.name()
    return named(y, name[:-1] + str(int(name[-1]) + after))


def squeeze_(x, dim=None):
    return reshape_in_place(x, _renumbered(shape.squeeze(x, dim), 3), "squeeze_", (dim,))


def unsqueeze_(x, dim):
    return reshape_in_place(x, _renumbered(shape.unsqueeze(x, dim), 1), "unsqueeze_", (dim,))


def t_(x):
    if x.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return reshape_in_place(x, _renumbered(shape.t(x), 1), "t_")


def transpose_(x, dim0, dim1):
    return reshape_in_place(
        x, _renumbered(shape.transpose(x, dim0, dim1), 1), "transpose_", (dim0, dim1)
    )


def _host(x, name, why):
    """``x``'s NumPy data, or under capture (where it has none) a ``RuntimeError``."""
    if type(x._payload) is not np.ndarray and current_interceptor() is not None:
        raise RuntimeError(
            at_user(f"{name}() {why}, which staged.compile/capture cannot trace: call it outside")
        )
    return x._host()


def as_strided(x, size, stride, storage_offset=None):
    """The entries of ``x``'s storage at ``storage_offset + sum(i_k * stride[k])`` in the
    layout ``x.stride()`` and ``x.storage_offset()`` report (the NumPy array's: torch's for
    contiguous tensors and their views): a view of ``x`` (the ``strided`` primitive, on
    ``x`` with its dims in memory order) where each step is one step through ``x``'s
    entries, else a copy gathered from ``x``; the storage it reads must be ``x``'s own
    entries (of a view, not the rest of its base). Under capture ``x`` must not be a view:
    its layout is then the contiguous one ``x.stride()`` reports."""
    if x._base is not None:
        _host(x, "as_strided", "of a view reads the view's memory layout")
    root = x._payload
    while isinstance(root, np.ndarray) and isinstance(root.base, np.ndarray):
        root = root.base
    storage = root.size if isinstance(root, np.ndarray) else x.numel()
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(
            f"mismatch in length of strides and shape: {len(size)} sizes, {len(stride)} strides"
        )
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: negative sizes or strides are not supported: {size}")
    offset = x.storage_offset() if storage_offset is None else int(storage_offset)
    need = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    if need > storage:
        item = x.element_size()
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, "
            f"and itemsize {item} requiring a storage size of {need * item} are "
            f"out of bounds for storage of size {storage * item}"
        )
    order = tuple(sorted(range(x.ndim), key=lambda k: -x.stride()[k]))
    y = shape.permute(x, order)
    own = x.storage_offset() + strided_index(y.shape, y.stride(), 0)
    where = np.full(storage, -1, np.int64)
    where[np.ravel(own)] = np.arange(own.size)
    index = where[strided_index(size, stride, offset)]
    if (index < 0).any():
        raise NotImplementedError(
            at_user(
                "as_strided: the strides reach storage outside this tensor's own entries "
                "(the rest of the tensor it is a view of), which staged's as_strided cannot "
                "read: call it on the base tensor"
            )
        )
    if not index.size:
        return ad.strided(y, shape=size, strides=(0,) * len(size), offset=0)
    steps = even_steps(index)
    if steps is not None:
        return ad.strided(y, shape=size, strides=steps, offset=int(index.flat[0]))
    out = take_index(shape.reshape(y, -1), Tensor._wrap(index.reshape(-1)), 0)
    return out if tuple(out._payload.shape) == size else shape.reshape(out, size)  # a copy


def resize_(x, *sizes, memory_format=None):
    """``x`` resized to ``sizes`` in place: its entries in memory order (as torch reads
    its storage), cut or continued. Entries past the old end are zeros (torch leaves them
    uninitialized). Shrinking keeps its memory, as torch; growing gives it new memory."""
    if not sizes:
        raise TypeError('resize_() missing 1 required positional arguments: "size"')
    size = shape._shape_arg(sizes)
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(size)}")
    if x._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    p = _host(x, "resize_", "changes a tensor's shape in place")
    if size == p.shape:
        return reshape_in_place(x, x, "resize_")
    if x._base is not None:
        raise NotImplementedError(
            at_user(
                "resize_() of a view: staged's views keep their base's shape; resize the "
                "base, or a copy (x = x.clone().resize_(...))"
            )
        )
    n, flat = math.prod(size), p.ravel(order="K")  # memory order (a view where p is dense)
    if n <= p.size:
        new = flat[:n].reshape(size)
    else:
        new = np.zeros(n, p.dtype)
        new[: p.size] = flat
        new = new.reshape(size)
    return reshape_in_place(x, Tensor._wrap(new), "resize_")


def resize_as_(x, other, *, memory_format=None):
    return resize_(x, *other.shape)


def set_(x, source=None, storage_offset=0, size=None, stride=None):
    """torch's ``set_``: ``x`` made a tensor over ``source``'s memory, sharing it (a tensor's
    as it is, or its storage's or an ``UntypedStorage``'s from ``storage_offset`` elements in,
    of ``size`` and ``stride`` in elements); no ``source``: ``x`` made empty."""
    if x._base is not None:
        raise NotImplementedError(
            at_user("set_() of a view: staged's views keep their base's shape; set the base")
        )
    if source is None:
        return reshape_in_place(x, Tensor._wrap(np.empty((0,), x.dtype.np)), "set_")
    if isinstance(source, Tensor):
        if source.dtype is not x.dtype:
            raise RuntimeError(
                f"Could not set tensor of type {source.dtype.type_meta} to a tensor of type "
                f"{x.dtype.type_meta}"
            )
        if source._requires_grad:
            raise NotImplementedError(
                at_user(
                    "set_() to a tensor that requires grad: staged records no gradient through "
                    "it; use x.set_(source.detach()), or x = source"
                )
            )
        p = _host(source, "set_", "makes a tensor share another's memory")
        if size is None:
            return reshape_in_place(x, Tensor._wrap(p), "set_")
        source = untyped_storage(source)
    if not isinstance(source, UntypedStorage):
        raise TypeError(
            "set_() received an invalid combination of arguments - got "
            f"({type(source).__name__}), but expected one of: (), (Storage source), "
            "(Storage source, int storage_offset, tuple of ints size, tuple of ints stride), "
            "(Tensor source), (Tensor source, int storage_offset, tuple of ints size, tuple of "
            "ints stride)"
        )
    flat = source._bytes().view(x.dtype.np)
    size = tuple(size if size is not None else (len(flat) - storage_offset,))
    stride = row_major(size) if stride is None else tuple(stride)
    need = storage_offset + (1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0)
    if need > len(flat):  # torch grows the storage; a NumPy array's memory cannot
        raise NotImplementedError(
            at_user(
                f"set_() of {need} elements over a storage of {len(flat)}: staged cannot grow "
                "a storage in place; set_() a larger tensor"
            )
        )
    strides = tuple(s * flat.itemsize for s in stride)
    new = np.lib.stride_tricks.as_strided(flat[storage_offset:], size, strides)
    return reshape_in_place(x, Tensor._wrap(new), "set_")


# --- new tensors like this one ----------------------------------------------------------------
def new(x, *args, device=None):
    """``x.new()``: an empty tensor of ``x``'s dtype; ``x.new(*sizes)`` (or a Size): one of
    that shape (zeros; torch's is uninitialized); ``x.new(data)``: a tensor of ``data`` in
    ``x``'s dtype; ``x.new(tensor)``: that tensor (of ``x``'s dtype), sharing its data."""
    if device is not None:
        check_device(device)
    d = x.dtype
    if not args:
        return Tensor._wrap(np.empty((0,), d.np))
    if len(args) == 1 and isinstance(args[0], Tensor):
        if args[0].dtype is not d:
            raise TypeError(
                f"expected {d} (got {args[0].dtype}): x.new(tensor) takes a tensor of x's dtype"
            )
        return args[0].detach()
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args) or (
        len(args) == 1 and isinstance(args[0], Size)
    ):
        return shape.new_zeros(x, *args)
    if len(args) > 1:
        raise TypeError(f"new(): expected sizes (ints) or one sequence of data, got {args}")
    return Tensor._wrap(np.array(args[0], d.np))


def new_empty_strided(x, size, stride, *, dtype=None, device=None, requires_grad=False, **_):
    """A tensor of ``size`` whose ``stride()`` is ``stride`` (zeros; torch's is
    uninitialized), of ``x``'s dtype unless ``dtype`` says."""
    if device is not None:
        check_device(device)
    d = x.dtype if dtype is None else dt.as_dtype(dtype)
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride):
        raise RuntimeError(
            f"mismatch in length of strides and shape: {len(size)} sizes, {len(stride)} strides"
        )
    t = Tensor._wrap(strided_array(size, stride, d.np))
    return t.requires_grad_(True) if requires_grad else t


# --- Python callables over the values (CPU tensors, as torch's) --------------------------------
def _values(x, name):
    if x._requires_grad:
        raise RuntimeError(
            f"Can't call {name}() on Variable that requires grad. Use var.detach().{name}() "
            "instead."
        )
    return _host(x, name, "calls a Python function on each value")


def apply_(x, callable):
    """Each entry of ``x`` replaced, in place, by ``callable(entry)`` (a Python number)."""
    a = _values(x, "apply_")
    out = np.array([callable(v) for v in a.reshape(-1).tolist()], a.dtype)
    return write(x, Tensor._wrap(out.reshape(a.shape)))


def map_(x, tensor, callable):
    """Each entry of ``x`` replaced, in place, by ``callable(entry, other)``, ``other``
    the entry of ``tensor`` (broadcast to ``x``'s shape) at the same place."""
    a = _values(x, "map_")
    b = _host(shape.expand(tensor, tuple(a.shape)), "map_", "calls a Python function")
    out = [callable(u, v) for u, v in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist())]
    return write(x, Tensor._wrap(np.array(out, a.dtype).reshape(a.shape)))


# --- shared memory (Note [shared memory] in eager/shared_memory.py) --------------------------
def is_shared(x) -> bool:
    """Whether ``x``'s memory is shared memory (``share_memory_``): other processes given
    ``x`` see its writes, and it theirs."""
    p = x._payload
    return type(p) is np.ndarray and shared_memory.pages_of(p) is not None


def share_memory_(x):
    """``x``'s data moved into shared memory, where processes forked afterwards, and
    processes ``x`` is sent to by ``multiprocessing`` (a ``Process``'s arguments, a
    queue), write into the same entries, as torch's ``share_memory_``; a no-op once
    shared. A view, or a tensor with views, cannot move (the views would keep the old
    memory): share the base first."""
    if is_shared(x):
        return x
    p = _host(x, "share_memory_", "moves the tensor's memory")
    if x._base is not None or has_views(x):
        raise NotImplementedError(
            at_user(
                "share_memory_() of a view or of a tensor that has views: staged cannot move "
                "their memory together. Call share_memory_() on the base before making views"
            )
        )
    a = shared_memory.allocate(p.nbytes, p.dtype, p.shape)
    a[...] = p
    x._payload = a
    sent_by_descriptor(type(x))
    return x


def _sent(x):
    """How ``multiprocessing`` pickles a tensor for another process (torch's
    ``reduce_tensor``): moved into shared memory first, so the two processes share its
    entries; a view, or a tensor with views, cannot move, and goes as a copy, warning."""
    if not is_shared(x):
        if x._base is None and not has_views(x) and type(x._payload) is np.ndarray:
            share_memory_(x)
        elif type(x._payload) is np.ndarray:
            warnings.warn(
                "a view, or a tensor with views, sent to another process goes as a copy "
                "(staged cannot move their memory into shared memory together), so its "
                "writes there are not seen here: call share_memory_() on the base before "
                "making views",
                stacklevel=2,
            )
    fn, args, *rest = x.__reduce_ex__(5)
    return (fn, shared_memory.by_descriptor(args), *rest)


def sent_by_descriptor(cls: type) -> None:
    """Have ``multiprocessing`` send tensors of ``cls`` as torch's are sent (``_sent``;
    its pickler looks reducers up by exact type)."""
    ForkingPickler.register(cls, _sent)


sent_by_descriptor(Tensor)


# --- conjugate and negative bits: a conj view counts as torch's conjugate bit --------------
def resolve_conj(x):
    """``x``, or for a conj view (Note [conj views] in ``eager/views.py``) a copy of it."""
    return ew.clone(x) if views.is_conj(x) else x


def resolve_neg(x):
    """``x``: staged's tensors never carry torch's lazy negative bit."""
    return x


def is_conj(x) -> bool:
    """Whether ``x`` is a conj view (an odd number of ``conj`` steps from its base): torch's
    conjugate bit."""
    return views.is_conj(x)


def is_neg(x) -> bool:
    """False: staged's tensors never carry torch's lazy negative bit."""
    return False


def conj_physical(x):
    """The complex conjugate, computed (``x`` itself for a real ``x``)."""
    return ad.conj(x) if x.dtype.is_complex else x


def H(x):
    """The conjugate transpose of a matrix (a 0-d tensor's conjugate)."""
    if x.ndim == 2 or x.ndim == 0:
        return shape.mH(x)
    extra = " For batches of matrices, consider using tensor.mH" if x.ndim > 2 else ""
    raise RuntimeError(
        f"tensor.H is only supported on matrices (2-D tensors). Got {x.ndim}-D tensor.{extra}"
    )


def output_nr(x) -> int:
    """Which output of the op that made ``x`` it is (0 for a leaf)."""
    return x._output_nr
