"""The public ops, and the Tensor methods and operators that call them."""
from __future__ import annotations

from ... import autodiff as ad
from ... import dtypes as dt
from ..tensor import Tensor
from . import composite, elementwise, indexing, inplace, linalg, reduction, shape
from .composite import gelu, log_softmax, silu, softmax, softplus  # noqa: F401
from .elementwise import *  # noqa: F401,F403
from .elementwise import add, div, mul, pow, sub
from .indexing import *  # noqa: F401,F403
from .inplace import *  # noqa: F401,F403
from .linalg import bmm, matmul, mm  # noqa: F401
from .reduction import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403


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


_METHODS = {
    # arithmetic operators
    "__add__": add, "__radd__": _rev(add), "__sub__": sub, "__rsub__": _rev(sub),
    "__mul__": mul, "__rmul__": _rev(mul), "__truediv__": div, "__rtruediv__": _rev(div),
    "__pow__": pow, "__rpow__": _rev(pow), "__matmul__": matmul, "__rmatmul__": _rev(matmul),
    "__neg__": elementwise.neg, "__abs__": elementwise.abs,
    "__eq__": elementwise.eq, "__ne__": elementwise.ne, "__lt__": elementwise.lt,
    "__le__": elementwise.le, "__gt__": elementwise.gt, "__ge__": elementwise.ge,
    "__and__": elementwise.logical_and, "__or__": elementwise.logical_or,
    "__invert__": elementwise.logical_not,
    "__iadd__": inplace.add_, "__isub__": inplace.sub_, "__imul__": inplace.mul_,
    "__itruediv__": inplace.div_,
    # methods named as in PyTorch
    "add": add, "sub": sub, "mul": mul, "div": div, "pow": pow, "matmul": matmul,
    "mm": linalg.mm, "bmm": linalg.bmm, "neg": elementwise.neg, "abs": elementwise.abs,
    "exp": elementwise.exp, "log": elementwise.log, "log1p": elementwise.log1p,
    "expm1": elementwise.expm1, "sqrt": elementwise.sqrt, "rsqrt": elementwise.rsqrt,
    "tanh": elementwise.tanh, "sigmoid": elementwise.sigmoid, "sin": elementwise.sin,
    "cos": elementwise.cos, "relu": elementwise.relu, "sign": elementwise.sign,
    "conj": elementwise.conj, "clamp": elementwise.clamp, "clone": elementwise.clone,
    "maximum": elementwise.maximum, "minimum": elementwise.minimum,
    "eq": elementwise.eq, "ne": elementwise.ne, "lt": elementwise.lt, "le": elementwise.le,
    "gt": elementwise.gt, "ge": elementwise.ge, "logical_not": elementwise.logical_not,
    "logical_and": elementwise.logical_and, "logical_or": elementwise.logical_or,
    "where": lambda self, condition, other: elementwise.where(condition, self, other),
    "sum": reduction.sum, "mean": reduction.mean, "var": reduction.var, "std": reduction.std,
    "amax": reduction.amax, "amin": reduction.amin, "max": reduction.max, "min": reduction.min,
    "argmax": reduction.argmax, "argmin": reduction.argmin, "logsumexp": reduction.logsumexp,
    "softmax": composite.softmax, "log_softmax": composite.log_softmax,
    "reshape": shape.reshape, "view": shape.view, "flatten": shape.flatten,
    "squeeze": shape.squeeze, "unsqueeze": shape.unsqueeze, "permute": shape.permute,
    "transpose": shape.transpose, "t": shape.t, "expand": shape.expand,
    "broadcast_to": shape.broadcast_to, "contiguous": shape.contiguous,
    "is_contiguous": lambda self: bool(getattr(self._payload, "flags", None) is None
                                       or self._payload.flags.c_contiguous),
    "to": _to, "float": lambda self: _to(self, dt.float32),
    "double": lambda self: _to(self, dt.float64), "long": lambda self: _to(self, dt.int64),
    "int": lambda self: _to(self, dt.int32), "bool": lambda self: _to(self, dt.bool_),
    "type_as": lambda self, other: _to(self, other.dtype),
    "cpu": lambda self: self,
    "equal": lambda self, other: bool(self.shape == other.shape and (self == other).all()),
    "all": lambda self: Tensor._wrap(self._host().all()),
    "any": lambda self: Tensor._wrap(self._host().any()),
    "norm": reduction.norm,
    # math (elementwise, reductions, scans, sorting)
    "__mod__": elementwise.remainder, "__rmod__": _rev(elementwise.remainder),
    "__floordiv__": elementwise.floor_divide, "__rfloordiv__": _rev(elementwise.floor_divide),
    **{n: getattr(elementwise, n) for n in (
        "tan", "sinh", "cosh", "asin", "acos", "atan", "atan2", "log2", "log10", "exp2", "erf",
        "floor", "ceil", "round", "trunc", "sgn", "angle", "isnan", "isinf", "isfinite",
        "square", "reciprocal", "remainder", "fmod", "clamp_min", "clamp_max", "lerp",
        "addcmul", "addcdiv", "floor_divide")},
    "arcsin": elementwise.asin, "arccos": elementwise.acos, "arctan": elementwise.atan,
    "arctan2": elementwise.atan2, "clip": elementwise.clamp, "absolute": elementwise.abs,
    **{n: getattr(reduction, n) for n in ("prod", "cumsum", "sort", "argsort", "topk")},
    # indexing and joining
    "__getitem__": indexing.getitem, "__setitem__": indexing.setitem,
    "index_select": indexing.index_select, "gather": indexing.gather,
    "scatter_add": indexing.scatter_add, "masked_fill": indexing.masked_fill,
    "take_along_dim": indexing.take_along_dim, "split": shape.split, "chunk": shape.chunk,
    "new_zeros": shape.new_zeros, "masked_fill_": indexing.masked_fill_,
    "scatter_add_": indexing.scatter_add_,
}
for _name in ("add_", "sub_", "mul_", "div_", "pow_", "clamp_", "exp_", "log_", "sin_", "cos_",
              "tanh_", "relu_", "sigmoid_", "neg_", "sqrt_", "abs_", "fill_", "zero_",
              "copy_"):
    _METHODS[_name] = getattr(inplace, _name)

for _name in ("tan", "sinh", "cosh", "asin", "acos", "atan", "log2", "log10", "exp2", "erf",
              "floor", "ceil", "round", "trunc", "sgn", "square", "reciprocal", "remainder",
              "fmod", "clamp_min", "clamp_max", "lerp", "addcmul", "addcdiv", "atan2",
              "floor_divide"):
    _METHODS[_name + "_"] = inplace._inplace(_METHODS[_name])
_METHODS["__ifloordiv__"] = _METHODS["floor_divide_"]

for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)

Tensor.T = property(shape.T)
Tensor.mT = property(shape.mT)
Tensor.real = property(elementwise.real)
Tensor.imag = property(elementwise.imag)
