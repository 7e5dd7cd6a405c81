"""The public ops, and the Tensor methods and operators that call them."""

from __future__ import annotations

import numpy as np

from ... import autodiff as ad
from ... import dtypes as dt
from ..._where import sited
from .. import autocast as _autocast
from .. import devices as _device
from .. import factories, legacy_types
from ..views import named
from ..dispatch import finish
from ..meta import NO_DATA, Meta
from ..storage import typed_storage, untyped_storage
from ..tensor import Tensor, type_label
from . import composite, elementwise, indexing, inplace, linalg, memory_formats, metadata
from . import shape, table
from .elementwise import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .reduction import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403

globals().update(table.exports())


def _to(self, *args, dtype=None, device=None, copy=False, non_blocking=False, **_):
    """``t.to(dtype)``, ``t.to(device, dtype)``, ``t.to(other)``: a device must be the CPU
    or meta (Note [devices]); the result is ``self`` when nothing changes and not
    ``copy``."""
    flags = []
    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, bool):
            flags.append(a)  # to(dtype, non_blocking, copy)
        elif isinstance(a, (str, _device.device, int)):
            device = a
        elif a is not None:
            dtype = a
    if len(flags) > 1:
        copy = flags[1]
    if device is not None and _device.on_meta(device) != (type(self._payload) is Meta):
        self = _moved(self)
    if dtype is None:
        return self.clone() if copy else self
    d = dt.as_dtype(dtype)
    if d is self.dtype:
        return self.clone() if copy else self
    if not (d.is_floating_point or d.is_complex):
        self = self.detach()  # integer and bool results are not differentiable
    return ad.cast(self, dtype=d)


def _moved(t: Tensor) -> Tensor:
    """``t`` on the other device: a CPU tensor's metadata on meta (in the graph, as torch's
    copy), or torch's error for data out of a meta tensor."""
    if type(t._payload) is Meta:
        raise NotImplementedError(NO_DATA)
    meta = Meta(tuple(t.shape), t._payload.dtype, factories.like_strides(t))
    return finish(ad.copy, (t,), {}, meta)


def alias_view(self):
    """torch's ``aten.alias``: a view of all of ``self`` sharing its data, version counter
    and autograd history (grad_fn ``AliasBackward0``)."""
    return named(shape.alias(self), "AliasBackward0")


def _as_subclass(self, cls):
    """``self`` as an instance of the Tensor subclass ``cls``: torch's alias."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"as_subclass: cls must be a subclass of torch.Tensor, got {cls!r}")
    out = alias_view(self)
    try:
        out.__class__ = cls
    except TypeError:  # a subclass with slots of its own: another object layout
        raise TypeError(
            f"as_subclass: {cls.__name__} declares __slots__ of its own, which staged's "
            "tensors cannot take on; drop them (its attributes live in __dict__)"
        ) from None
    return out


def _type(self, dtype=None, non_blocking=False, **_):
    """``t.type()``: ``'torch.FloatTensor'``-style name; ``t.type(dtype, legacy type such as
    staged.DoubleTensor, or its name)``: cast."""
    if dtype is None:
        return legacy_types.type_name(self.dtype)
    return _to(self, legacy_types.dtype_of(dtype))


def _invert(self):
    """``~t``: bitwise not of integers, logical not of bools (torch's TypeError otherwise)."""
    if self.dtype.is_floating_point or self.dtype.is_complex:
        raise TypeError(
            "~ (operator.invert) is only implemented on integer and Boolean-type tensors"
        )
    return elementwise.bitwise_not(self)


def _cuda(self, device=None, non_blocking=False, **_):
    """Raises, as in a CPU-only torch build (Note [devices])."""
    if device is not None and not isinstance(device, int) and not str(device).startswith("cuda"):
        raise RuntimeError("Invalid device, must be cuda device")
    _device.check("cuda" if device is None else device)


# Note [operators and other types]: torch's binary operators turn a TypeError into
# ``NotImplemented`` (``TypeError_to_NotImplemented_``), so Python asks the other operand:
# ``t * array`` is NumPy's product (of ``t.__array__()``) wrapped back into a tensor by
# ``__array_wrap__``, ``t += array`` rebinds ``t`` to that new tensor, ``t == None`` is
# False, and ``array * t`` and ``t * "a"`` raise Python's "unsupported operand type(s)".
# Only a raising call pays for the ``try``.


def _operator(op):
    def method(self, other):
        try:
            return op(self, other)
        except TypeError:
            return NotImplemented

    method.__wrapped__ = op  # type: ignore[attr-defined]  # (autocast's test finds its hook)
    return method


def _eq(self, other):
    """``==``: torch's also takes a NumPy array, as a tensor (its ``!=`` does not)."""
    if isinstance(other, np.ndarray):
        other = factories.tensor(other)
    return elementwise.eq(self, other)


def _tensor_arg(method, other):
    """``other``, a Tensor, or torch's TypeError for ``Tensor.<method>(other)``."""
    if not isinstance(other, Tensor):
        raise TypeError(
            f"{method}(): argument 'other' (position 1) must be Tensor, not {type_label(other)}"
        )
    return other


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    if isinstance(data, Tensor):
        factories.copy_construct_warning("tensor.new_tensor")
    dtype, device = dtype or self.dtype, device or self.device
    return factories.copied(data, dtype, requires_grad, device)


def _rev(op):
    def method(self, other):
        try:
            return op(other, self)
        except TypeError:
            return NotImplemented

    return method


# Tensor methods outside the op table: operators, conversions, data access
def _polygamma(self, n):
    """``Tensor.polygamma(n)``: ``polygamma(n, self)``."""
    return elementwise.polygamma(n, self)


def _split(self, split_size, dim=0):
    """``Tensor.split``: ``split``, its sizes named ``split_size`` as torch's method names
    them (``x.split(split_size=[2, 4], dim=-1)``)."""
    return shape.split(self, split_size, dim)


_split.__qualname__ = "Tensor.split"  # torch's name in a TypeError of its arguments


def _over(other, x):
    """``other / x`` as torch's ``Tensor.__rtruediv__``: ``x.reciprocal() * other``, two
    roundings (``1.7 / x`` differs from ``div(1.7, x)`` in the last bit for a third of
    float32 inputs)."""
    return elementwise.mul(elementwise.reciprocal(x), other)


# ``+`` and ``-`` take no ``alpha``: add and sub without its check (one call less)
_OPERATORS = {
    "add": elementwise._add,
    "sub": elementwise._sub,
    "mul": elementwise.mul,
    "pow": elementwise.pow,
}
_METHODS = {
    **{f"__{n}__": _operator(op) for n, op in _OPERATORS.items()},
    **{f"__r{n}__": _rev(op) for n, op in _OPERATORS.items()},
    "__truediv__": _operator(elementwise.div),
    "__rtruediv__": _rev(_over),
    "__matmul__": _operator(_autocast.sited(linalg.matmul, "matmul", site=False)),
    "__rmatmul__": _rev(_autocast.sited(linalg.matmul, "matmul", site=False)),
    "__neg__": elementwise.neg,
    "__pos__": composite.positive,
    "__abs__": elementwise.abs,
    "__eq__": _operator(_eq),
    **{f"__{n}__": _operator(getattr(elementwise, n)) for n in ("ne", "lt", "le", "gt", "ge")},
    **{f"__{n}__": _operator(getattr(elementwise, f"bitwise_{n}")) for n in ("and", "or", "xor")},
    **{f"__r{n}__": _rev(getattr(elementwise, f"bitwise_{n}")) for n in ("and", "or", "xor")},
    "__lshift__": _operator(elementwise.bitwise_left_shift),
    "__rlshift__": _rev(elementwise.bitwise_left_shift),
    "__rshift__": _operator(elementwise.bitwise_right_shift),
    "__rrshift__": _rev(elementwise.bitwise_right_shift),
    "__invert__": _invert,
    "__mod__": _operator(elementwise.remainder),
    "__rmod__": _rev(elementwise.remainder),
    "__floordiv__": _operator(elementwise.floor_divide),
    "__rfloordiv__": _rev(elementwise.floor_divide),
    "__getitem__": indexing.getitem,
    "__setitem__": indexing.setitem,
    "where": lambda self, condition, other: elementwise.where(condition, self, other),
    "polygamma": _polygamma,
    "split": _autocast.sited(_split, "split"),
    "polygamma_": inplace.inplace_method(_polygamma),
    "is_contiguous": memory_formats.is_contiguous,
    "to": _to,
    "float": lambda self: _to(self, dt.float32),
    "double": lambda self: _to(self, dt.float64),
    "long": lambda self: _to(self, dt.int64),
    "int": lambda self: _to(self, dt.int32),
    "bool": lambda self: _to(self, dt.bool_),
    "half": lambda self: _to(self, dt.float16),
    "bfloat16": lambda self: _to(self, dt.bfloat16),
    "short": lambda self: _to(self, dt.int16),
    "char": lambda self: _to(self, dt.int8),
    "byte": lambda self: _to(self, dt.uint8),
    "cfloat": lambda self: _to(self, dt.complex64),
    "cdouble": lambda self: _to(self, dt.complex128),
    "type_as": lambda self, other: _to(self, _tensor_arg("type_as", other).dtype),
    "as_subclass": _as_subclass,
    "type": _type,
    "nelement": Tensor.numel,
    "cpu": lambda self, memory_format=None: _to(self, "cpu"),
    "cuda": _cuda,
    "get_device": lambda self: -1,
    "is_pinned": lambda self, device=None: False,
    "new_ones": shape.new_ones,
    "new_empty": shape.new_empty,
    "new_full": lambda self, size, fill_value, dtype=None, device=None, requires_grad=False: (
        factories.full(
            size,
            fill_value,
            dtype=dtype or self.dtype,
            device=device or self.device,
            requires_grad=requires_grad,
        )
    ),
    "new_tensor": _new_tensor,
    "untyped_storage": untyped_storage,
    "storage": typed_storage,
    "set_": metadata.set_,
    "equal": lambda self, other: bool(
        self.shape == _tensor_arg("equal", other).shape and (self == other).all()
    ),
}
# their errors name the user's line, as the table's methods' (the operators site inline)
_UNSITED = {"is_contiguous", "nelement", "get_device", "is_pinned"}  # raise nothing
_METHODS.update(
    {
        n: sited(f)
        for n, f in _METHODS.items()
        if not (n.startswith("__") or n in _UNSITED or getattr(f, "sited", False))
    }
)
# attached at import time; Tensor declares them for type checkers (its TYPE_CHECKING block),
# hence the ignores on the assignments below
# named as torch's (what a subclass's __torch_function__ is handed: staged/eager/subclasses.py)
_OWN = (indexing.getitem, indexing.setitem, _invert)  # (Tensor's alone)
for _name, _fn in {**table.methods(), **_METHODS}.items():
    if getattr(_fn, "__name__", None) in ("method", "<lambda>") or _fn in _OWN:
        _fn.__name__, _fn.__qualname__ = _name, f"Tensor.{_name}"
    setattr(Tensor, _name, _fn)
_IN_PLACE = {
    "add": "add_",
    "sub": "sub_",
    "mul": "mul_",
    "truediv": "div_",
    "floordiv": "floor_divide_",
    "mod": "remainder_",
    "pow": "pow_",
    "and": "bitwise_and_",
    "or": "bitwise_or_",
    "xor": "bitwise_xor_",
    "lshift": "bitwise_left_shift_",
    "rshift": "bitwise_right_shift_",
}
for _name, _method in _IN_PLACE.items():
    _fn = _operator(getattr(Tensor, _method))
    _fn.__name__, _fn.__qualname__ = f"__i{_name}__", f"Tensor.__i{_name}__"
    setattr(Tensor, _fn.__name__, _fn)

Tensor.T = property(shape.T)  # type: ignore[method-assign, assignment]
Tensor.mT = property(shape.mT)  # type: ignore[method-assign, assignment]
Tensor.mH = property(shape.mH)  # type: ignore[method-assign, assignment]
Tensor.H = property(metadata.H)  # type: ignore[method-assign, assignment]
Tensor.output_nr = property(metadata.output_nr)  # type: ignore[method-assign, assignment]
Tensor.real = property(elementwise.real)  # type: ignore[method-assign, assignment]
Tensor.imag = property(elementwise.imag)  # type: ignore[method-assign, assignment]
# Note [devices]: strided tensors on the CPU, or meta ones (Note [meta tensors])
Tensor.device = property(  # type: ignore[method-assign, assignment]
    lambda self: _device.META if type(self._payload) is Meta else _device.CPU
)
Tensor.is_meta = property(lambda self: type(self._payload) is Meta)  # type: ignore[method-assign, assignment]
Tensor.is_cpu = property(lambda self: type(self._payload) is not Meta)  # type: ignore[method-assign, assignment]
Tensor.is_cuda = property(lambda self: False)  # type: ignore[method-assign, assignment]
for _flag in ("is_xpu", "is_mps", "is_sparse", "is_sparse_csr", "is_quantized"):
    setattr(Tensor, _flag, property(lambda self: False))
