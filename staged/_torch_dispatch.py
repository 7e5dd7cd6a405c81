"""torch's ``__torch_dispatch__``: Tensor subclasses that take every operator called on
their instances, as aten operators (``torch.ops.aten``), and ``Tensor._make_wrapper_subclass``
to make instances that hold no data of their own (PyTorch Geometric's ``Index``,
``EdgeIndex`` and ``HashTensor``).

Note [torch dispatch]
~~~~~~~~~~~~~~~~~~~~~
torch calls a subclass's ``__torch_dispatch__`` below autograd, with the aten operators its
public functions run. staged hands over a public function, method or operator called on
such an instance, after the ``__torch_function__`` protocol (the subclass's own is usually
disabled), as the aten overload of its name that its arguments bind to (``x + y`` as
``aten.add.Tensor``, ``torch.cat`` as ``aten.cat.default``), with the arguments as the
schema binds them; indexing is decomposed as torch decomposes it (``aten.select.int``,
``aten.slice.Tensor``, ``aten.index.Tensor``, ``aten.unsqueeze.default``). What is handed
over differs from torch where torch decomposes a function that staged has an aten
operator for (``reshape``, ``narrow``: the subclass sees the composite operator; its
fallback, which runs the operator on the data it wraps, gives the same values). Methods
that read only metadata (``size``, ``dim``, ``numel``...) run themselves, as torch's
do; a function with no aten operator runs itself too, and where that would read the
wrapper's data it raises instead (a wrapper's payload is a meta tensor's: shape, dtype and
strides, no data). ``to`` and the casts (``x.long()``) are handed over as torch's
composite ``to`` runs them: ``aten._to_copy`` where the dtype or device changes, else
``x`` itself. Autograd: torch records the graph above ``__torch_dispatch__``; staged hands a
call over only where no argument requires grad (or grad mode is off), and otherwise runs
its own kernel, which records the graph, on the wrappers' data (their ``aten.view``, which
a subclass that treats unhandled operators as plain ones answers with a plain tensor); a
wrapper that itself requires grad is refused.
"""

from __future__ import annotations

import numpy as np

from . import _custom_ops
from . import _torch_function as _tf
from . import dtypes as dt
from ._aten import packet
from .eager.grad_mode import _state as _grad, no_grad
from .eager.meta import Meta
from .eager.tensor import Tensor, strided
from .nn.module import to_arguments

# torch's methods that read metadata only (its TensorImpl's): they never reach
# ``__torch_dispatch__``, so they run themselves here too
METADATA = frozenset(
    {
        *("size", "dim", "ndimension", "stride", "numel", "nelement", "element_size"),
        *("storage_offset", "is_contiguous", "is_floating_point", "is_complex", "is_signed"),
        *("get_device", "is_same_size", "is_inference", "is_conj", "is_neg", "is_pinned"),
        *("requires_grad_", "retain_grad", "data_ptr", "__len__", "dim_order", "type"),
    }
)


def make_wrapper_subclass(
    cls,
    size,
    strides=None,
    storage_offset=None,
    memory_format=None,
    dtype=None,
    layout=strided,
    device=None,
    pin_memory=False,
    requires_grad=False,
    dispatch_sizes_strides_policy=None,
    dispatch_device=False,
    dispatch_layout=False,
    _extra_dispatch_keys=None,
    storage_size=None,
):
    """torch's ``Tensor._make_wrapper_subclass``: a ``cls`` instance of this size, strides and
    dtype holding no data (its operators go to ``cls.__torch_dispatch__``)."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"_make_wrapper_subclass: expected a Tensor subclass, got {cls!r}")
    npd = dt.as_dtype(dtype if dtype is not None else dt.get_default_dtype()).np
    t = object.__new__(cls)
    Tensor._init(t, Meta(tuple(size), npd, None if strides is None else tuple(strides)), False)
    t.__dict__["_wrapper_device"] = device
    if requires_grad:
        t.requires_grad_()
    return t


_METHODS: dict = {}  # a Tensor method's function -> its name on Tensor


def _name(func) -> str:
    """The name ``func`` has as a public function or Tensor method (``Tensor.to`` is the
    function ``_to``)."""
    name = getattr(func, "__name__", "")
    if vars(Tensor).get(name) is func:
        return name
    if not _METHODS:
        _METHODS.update((f, n) for n, f in vars(Tensor).items() if callable(f) and n[:1] != "_")
    return _METHODS.get(func, name)


def _aten(func, args, kwargs):
    """The aten overload ``func``'s call is handed over as, and its arguments as the schema
    binds them; None where staged has no aten operator of its name."""
    name = _name(func)
    found = packet(name) if name and name not in METADATA else None
    if found is None:
        return None
    if kwargs and "input" in kwargs:  # torch's Python name of the schema's ``self``
        kwargs = {("self" if k == "input" else k): v for k, v in kwargs.items()}
    overloads = list(found._overloads.values())
    for op in overloads:
        try:
            a, k = _custom_ops.bind(op, _listed(op, args), kwargs or {})
        except RuntimeError:
            if op is overloads[-1]:
                raise
            continue
        return op, a, k
    return None


def _call(op, wrappers, args, kwargs):
    """``op`` handed to the ``__torch_dispatch__`` of the ``wrappers`` among its arguments,
    in turn, until one does not return ``NotImplemented``; where another argument requires
    grad, ``op`` run by staged on the wrappers' data instead (``_differentiated``)."""
    if _grad.grad_enabled and any(t.requires_grad for t in _custom_ops._tensors(args, kwargs)):
        return _differentiated(op, wrappers, args, kwargs)
    types = tuple(dict.fromkeys(type(w) for w in wrappers))
    for w in wrappers:
        out = type(w).__torch_dispatch__(op, types, args, kwargs)
        if out is not NotImplemented:
            return out
    raise TypeError(
        f"Multiple dispatch failed for '{op}': all __torch_dispatch__ handlers returned "
        f"NotImplemented: {[t.__qualname__ for t in types]}"
    )


def _step(op, args):
    """``op(*args)``: handed to ``__torch_dispatch__`` where its tensor (``args[0]``, or the
    index tensors) takes part, else run."""
    tensors = [args[0], *(args[1] if op is _custom_ops.ops.aten.index.Tensor else ())]
    wrappers = _tf.overloaded(tensors, None, _tf.dispatches)
    return _call(op, wrappers, args, {}) if wrappers else op(*args)


def _differentiated(op, wrappers, args, kwargs):
    """``op`` where an argument requires grad: staged's kernel, which records the graph, run
    on the wrappers' data (what their ``__torch_dispatch__`` gives for ``aten.view`` of
    their own shape, a plain tensor where the subclass treats the operator as a plain
    one's). A wrapper that requires grad, or whose view is not plain data, is refused: the
    graph torch records above ``__torch_dispatch__`` staged does not record."""
    if any(w.requires_grad for w in wrappers):
        raise NotImplementedError(
            f"{op}: a {type(wrappers[0]).__name__} that requires grad: staged runs "
            "__torch_dispatch__ below autograd only for tensors that do not (torch records "
            "the graph above it); call it under torch.no_grad() or detach it"
        )
    data = {}
    with no_grad():
        for w in wrappers:
            view = _call(_custom_ops.ops.aten.view.default, [w], (w, list(w.shape)), {})
            if _tf.dispatches(type(view)):
                raise NotImplementedError(
                    f"{op}: differentiating through a {type(w).__name__}, whose view is not "
                    "plain data: staged runs __torch_dispatch__ below autograd only where "
                    "no argument requires grad; call it under torch.no_grad()"
                )
            data[id(w)] = view

    def plain(a):
        if isinstance(a, (list, tuple)):
            return type(a)(plain(b) for b in a)
        return data.get(id(a), a)

    return op(*plain(args), **{k: plain(v) for k, v in kwargs.items()})


def _index(x, index):
    """``x[index]`` as torch's indexing runs it: one aten operator per index, dims left to
    right (ints select, slices slice, None unsqueezes, tensors gather together last)."""
    items = index if isinstance(index, tuple) else (index,)
    aten = _custom_ops.ops.aten
    if any(i is Ellipsis for i in items):
        at = items.index(Ellipsis)
        used = sum(1 for i in items if i is not None and i is not Ellipsis)
        items = items[:at] + (slice(None),) * (x.dim() - used) + items[at + 1 :]
    dim, tensors = 0, []
    out = x
    for i in items:
        if i is None:
            out = _step(aten.unsqueeze.default, (out, dim))
            dim += 1
        elif isinstance(i, slice):
            if i != slice(None):
                step = 1 if i.step is None else i.step
                out = _step(aten.slice.Tensor, (out, dim, i.start, i.stop, step))
            tensors.append(None)
            dim += 1
        elif isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            out = _step(aten.select.int, (out, dim, int(i)))
        else:
            tensors.append(i if isinstance(i, Tensor) else Tensor._wrap(np.asarray(i)))
            dim += 1
    if any(t is not None for t in tensors):
        while tensors and tensors[-1] is None:
            tensors.pop()
        return _step(aten.index.Tensor, (out, tensors))
    return _step(aten.alias.default, (x,)) if out is x else out


_CASTS = {
    "to": None,
    **dict(float=dt.float32, double=dt.float64, half=dt.float16, bfloat16=dt.bfloat16),
    **dict(long=dt.int64, int=dt.int32, short=dt.int16, char=dt.int8, byte=dt.uint8),
    **dict(bool=dt.bool_, cfloat=dt.complex64, cdouble=dt.complex128),
}


def _to(x, wrappers, dtype, args, kwargs):
    """``x.to(...)`` (or a cast to ``dtype``) as torch's composite ``to``: ``x`` itself where
    nothing changes, else ``aten._to_copy``."""
    device, to_dtype, non_blocking, memory_format = (
        (None, dtype, False, None) if dtype is not None else to_arguments(args, kwargs)
    )
    copy = bool(kwargs.get("copy", False)) or (len(args) > 2 and args[2] is True)
    changes = {}
    if to_dtype is not None and dt.as_dtype(to_dtype) is not x.dtype:
        changes["dtype"] = dt.as_dtype(to_dtype)
    if device is not None and str(device) != str(x.device):
        changes["device"] = device
    if not changes and not copy:
        return x
    if memory_format is not None:
        changes["memory_format"] = memory_format
    return _call(_custom_ops.ops.aten._to_copy.default, wrappers, (x,), changes)


def _listed(op, args: tuple) -> tuple:
    """``args`` as torch's argument parser gives them to ``op``: the ints a method takes as
    varargs (``x.view(2, 6)``, ``x.flip(0)``) as the list its schema's first int-list
    argument is."""
    params = [a for a in op._schema.arguments if not a.kwarg_only]
    if (
        len(params) < 2
        or len(args) < 2
        or params[1].type.rstrip("?").split("[")[0]
        not in (
            "int",
            "SymInt",
        )
        or "[" not in params[1].type
    ):
        return args
    ints = 1
    while 1 + ints < len(args) and isinstance(args[1 + ints], int):
        ints += 1
    if isinstance(args[1], int) and (ints > 1 or len(params) == 2 or len(args) == 2):
        return (args[0], list(args[1 : 1 + ints]), *args[1 + ints :])
    return args


def handle(func, wrappers, args, kwargs):
    """A call of ``func`` with arguments whose classes define ``__torch_dispatch__``
    (``wrappers``): Note [torch dispatch]."""
    name = _name(func)
    if name in ("__getitem__", "getitem"):
        return _index(args[0], args[1])
    if name in _CASTS and args:
        return _to(args[0], wrappers, _CASTS[name], args[1:], kwargs)
    found = _aten(func, args, kwargs)
    if found is not None:
        op, a, k = found
        return _call(op, wrappers, a, k)
    out = getattr(func, "__wrapped__", func)(*args, **kwargs)  # itself, its calls handed on
    if any(
        type(t._payload) is Meta and not _tf.dispatches(type(t))
        for t in _custom_ops._tensors((out,), {})
    ):
        raise NotImplementedError(
            f"{name or func!r} of a {type(wrappers[0]).__name__}: staged has no aten operator "
            "of this name to hand to __torch_dispatch__, and running it reads data the "
            "tensor does not hold; call it on the data it wraps"
        )
    return out


_tf.DISPATCH.append(handle)
Tensor._make_wrapper_subclass = staticmethod(make_wrapper_subclass)  # type: ignore[attr-defined]
Tensor.__torch_dispatch__ = classmethod(_tf._disabled_torch_dispatch_impl)  # type: ignore[method-assign, assignment]
