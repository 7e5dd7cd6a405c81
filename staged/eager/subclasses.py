"""Tensor subclasses as torch's: ``Tensor.__torch_function__``, whose default runs a function
with subclasses off and makes its tensor results instances of the subclass (so
``MyTensor + 1`` is a ``MyTensor``), and the wrappers that hand a subclass's methods,
operators and tensor-valued properties to the protocol (Note [the torch function protocol]
in ``staged/_torch_function.py``). Plain tensors keep Tensor's own methods: the wrappers
live on the first class of a hierarchy that takes part."""

from __future__ import annotations

import functools

from .. import _torch_function as _tf
from . import devices as _devices
from .tensor import Tensor

# Tensor's attributes a subclass does not hand to the protocol: construction, attribute
# access, pickling and copying, identity, and iteration (torch's ``__iter__`` unbinds,
# which is handed over)
_KEPT = frozenset(
    {
        "__new__",
        "__init__",
        "__init_subclass__",
        "__torch_function__",
        "__getattribute__",
        "__getattr__",
        "__setattr__",
        "__delattr__",
        "__dir__",
        "__reduce__",
        "__reduce_ex__",
        "__getstate__",
        "__setstate__",
        "__copy__",
        "__deepcopy__",
        "__hash__",
        "__iter__",
        "__sizeof__",
        "__array__",
        "__array_wrap__",
        "__dlpack__",
        "__dlpack_device__",
        "as_subclass",  # run as itself: it is how results become the subclass
    }
)
# the properties handed over, as torch's (their results are tensors; torch hands over the
# metadata ones too, which subclasses such as torchvision's override to skip it)
_PROPERTIES = ("T", "mT", "mH", "H", "real", "imag", "data")


def _convert(out, cls):
    """``out`` with its tensors made ``cls`` instances (torch's ``_convert``): tensors,
    and the members of tuples and lists (named ones keep their type)."""
    if isinstance(out, Tensor) and not isinstance(out, cls):
        return out.as_subclass(cls)
    if isinstance(out, (tuple, list)):
        parts = [_convert(o, cls) for o in out]
        return out._make(parts) if hasattr(out, "_make") else type(out)(parts)
    return out


def torch_function(cls, func, types, args=(), kwargs=None):
    """torch's ``Tensor.__torch_function__``: ``func(*args, **kwargs)`` with subclasses
    off, its tensor results made ``cls`` instances (but ``.grad``'s); ``NotImplemented``
    where another type among ``types`` is not a superclass of ``cls``."""
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with _tf.DisableTorchFunctionSubclass():
        out = func(*args, **(kwargs or {}))
    return out if func in NOWRAP else _convert(out, cls)


NOWRAP = {Tensor.__dict__["grad"].__get__}  # torch's get_default_nowrap_functions()


# the operators torch hands over as the method they run (``x + y`` as ``Tensor.add``)
_HANDED = {
    "__add__": "add",
    "__radd__": "add",
    "__sub__": "sub",
    "__mul__": "mul",
    "__rmul__": "mul",
    "__truediv__": "div",
    "__matmul__": "matmul",
    "__pow__": "pow",
    "__ne__": "ne",
    "__lt__": "lt",
    "__le__": "le",
    "__gt__": "gt",
    "__ge__": "ge",
    "__neg__": "neg",
    "__abs__": "abs",
    "__pos__": "positive",
    "__mod__": "remainder",
    "__rand__": "bitwise_and",
    "__iadd__": "add_",
    "__isub__": "sub_",
    "__imul__": "mul_",
    "__itruediv__": "div_",
    "__ipow__": "pow_",
    "__ifloordiv__": "floor_divide_",
    "__imod__": "remainder_",
}


def _method(func, handed):
    """``func``, a Tensor method, as a subclass's: handed to the protocol as ``handed``."""

    @functools.wraps(func)
    def method(*args, **kwargs):
        out = _tf.dispatch(handed, args, kwargs)
        return func(*args, **kwargs) if out is _tf.NOT_HANDLED else out

    return method


def _property(prop):
    """``prop``, a Tensor property, as a subclass's: its getter handed to the protocol."""
    get = prop.__get__

    def getter(self):
        out = _tf.dispatch(get, (self,), None)
        return get(self) if out is _tf.NOT_HANDLED else out

    return property(getter, prop.fset, prop.fdel, prop.__doc__)


def _overrides(cls) -> dict:
    """The wrappers a subclass ``cls`` gets: one per Tensor method, operator and tensor
    property that no class between it and Tensor defines."""
    own = set().union(*(vars(c) for c in cls.__mro__[: cls.__mro__.index(Tensor)]))
    wrapped = {}
    for name, attr in vars(Tensor).items():
        if name in own or name in _KEPT or name.startswith("_") and not name.endswith("__"):
            continue
        if isinstance(attr, property):
            if name in _PROPERTIES:
                wrapped[name] = _property(attr)
        elif callable(attr) and not isinstance(attr, (type, classmethod, staticmethod)):
            wrapped[name] = _method(attr, vars(Tensor)[_HANDED[name]] if name in _HANDED else attr)
    return wrapped


def _subclassed(cls, **kwargs) -> None:
    """Tensor's ``__init_subclass__``: a subclass that takes part in the protocol gets the
    wrappers (unless a base already has them) and turns the public functions' look at
    their arguments on."""
    super(Tensor, cls).__init_subclass__(**kwargs)
    if not _tf.takes_part(cls):
        return
    if not any("_protocol_wrapped" in vars(c) for c in cls.__mro__[1:]):
        for name, wrapper in _overrides(cls).items():
            setattr(cls, name, wrapper)
        if _tf.dispatches(cls):
            for name, prop in _WRAPPER_DEVICE.items():
                if not any(name in vars(c) for c in cls.__mro__[: cls.__mro__.index(Tensor)]):
                    setattr(cls, name, prop)
        cls._protocol_wrapped = True
    _tf.take_part(cls)


def _wrapper_device(self):
    """The device a ``_make_wrapper_subclass`` instance was made for (its payload is a meta
    tensor's), else the tensor's own."""
    d = vars(self).get("_wrapper_device", _OWN)
    if d is _OWN:
        return Tensor.device.__get__(self)
    return _devices.CPU if d is None else _devices.device(d)


_OWN = object()
_WRAPPER_DEVICE = {
    "device": property(_wrapper_device),
    "is_meta": property(lambda self: _wrapper_device(self).type == "meta"),
    "is_cpu": property(lambda self: _wrapper_device(self).type == "cpu"),
}


def make_subclass(cls, data, require_grad=False, *args, **kwargs):
    """torch's ``Tensor._make_subclass(cls, data, require_grad)``: a ``cls`` instance that
    shares ``data``'s memory and version counter, a leaf that requires grad as asked."""
    t = object.__new__(cls)
    Tensor._init(t, data._payload, bool(require_grad))
    t._vc = data._vc
    return t


Tensor.__torch_function__ = classmethod(torch_function)  # type: ignore[method-assign, assignment]
Tensor.__init_subclass__ = classmethod(_subclassed)  # type: ignore[assignment, method-assign]
Tensor._make_subclass = staticmethod(make_subclass)  # type: ignore[attr-defined]
