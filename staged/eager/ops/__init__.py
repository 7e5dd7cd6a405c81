"""The public ops, and the Tensor methods and operators that call them."""
from __future__ import annotations

from ... import autodiff as ad
from ... import dtypes as dt
from ..tensor import Tensor
from . import elementwise, indexing, linalg, shape, table
from .elementwise import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .reduction import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403

globals().update(table.exports())


def _to(self, *args, dtype=None, copy=False, **_):
    """``t.to(dtype)``; device arguments are accepted and ignored (host only)."""
    for a in args:
        if isinstance(a, (dt.DType, type)) or hasattr(a, "kind"):
            dtype = a
    if dtype is None:
        return self
    d = dt.as_dtype(dtype)
    if d is self.dtype and not copy:
        return self
    if not (d.is_floating_point or d.is_complex):
        self = self.detach()  # integer and bool results are not differentiable
    return ad.cast(self, dtype=d)


def _rev(op):
    return lambda self, other: op(other, self)


# Tensor methods outside the op table: operators, conversions, data access
_METHODS = {
    **{f"__{n}__": getattr(elementwise, n) for n in ("add", "sub", "mul", "pow")},
    **{f"__r{n}__": _rev(getattr(elementwise, n)) for n in ("add", "sub", "mul", "pow")},
    "__truediv__": elementwise.div, "__rtruediv__": _rev(elementwise.div),
    "__matmul__": linalg.matmul, "__rmatmul__": _rev(linalg.matmul),
    "__neg__": elementwise.neg, "__abs__": elementwise.abs,
    "__eq__": elementwise.eq, "__ne__": elementwise.ne, "__lt__": elementwise.lt,
    "__le__": elementwise.le, "__gt__": elementwise.gt, "__ge__": elementwise.ge,
    "__and__": elementwise.logical_and, "__or__": elementwise.logical_or,
    "__invert__": elementwise.logical_not,
    "__mod__": elementwise.remainder, "__rmod__": _rev(elementwise.remainder),
    "__floordiv__": elementwise.floor_divide, "__rfloordiv__": _rev(elementwise.floor_divide),
    "__getitem__": indexing.getitem, "__setitem__": indexing.setitem,
    "where": lambda self, condition, other: elementwise.where(condition, self, other),
    "is_contiguous": lambda self: bool(getattr(self._payload, "flags", None) is None
                                       or self._payload.flags.c_contiguous),
    "to": _to, "float": lambda self: _to(self, dt.float32),
    "double": lambda self: _to(self, dt.float64), "long": lambda self: _to(self, dt.int64),
    "int": lambda self: _to(self, dt.int32), "bool": lambda self: _to(self, dt.bool_),
    "type_as": lambda self, other: _to(self, other.dtype),
    "nelement": Tensor.numel, "cpu": lambda self: self,
    "equal": lambda self, other: bool(self.shape == other.shape and (self == other).all()),
    "all": lambda self: Tensor._wrap(self._host().all()),
    "any": lambda self: Tensor._wrap(self._host().any()),
}
for _name, _fn in {**table.methods(), **_METHODS}.items():
    setattr(Tensor, _name, _fn)
Tensor.__iadd__, Tensor.__isub__, Tensor.__imul__ = Tensor.add_, Tensor.sub_, Tensor.mul_
Tensor.__itruediv__, Tensor.__ifloordiv__ = Tensor.div_, Tensor.floor_divide_

Tensor.T = property(shape.T)
Tensor.mT = property(shape.mT)
Tensor.real = property(elementwise.real)
Tensor.imag = property(elementwise.imag)
