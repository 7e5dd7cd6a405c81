"""torch's ``_foreach_*`` functions: one op over each tensor of a list (EMA updates,
optimizers' multi-tensor paths). torch fuses each into few kernels; here each tensor's op is
the op itself, so values, gradients and traces are the per-tensor op's.

An argument after the tensors is per tensor where it is a list or tuple (of tensors or of
scalars, as many as the tensors) and the same for every tensor otherwise (a number, a
0-d tensor); ``addcmul``/``addcdiv`` also take their per-tensor scalars as a 1-d tensor,
as torch does. The in-place forms return their list, as torch's do; the others a tuple.
"""

from __future__ import annotations

from .eager.tensor import Tensor
from .linalg import vector_norm

_UNARY = (
    *("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1"),
    *("floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal"),
    *("round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc"),
)
_BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "clamp_min", "clamp_max")
_TERNARY = ("lerp", "addcmul", "addcdiv")


def _tensors(tensors, name: str) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(
            f"_foreach_{name}(): argument 'self' must be a list or tuple of tensors, not "
            f"{type(tensors).__name__}"
        )
    if not tensors:
        raise RuntimeError("Tensor list must have at least one tensor.")
    return list(tensors)


def _each(arg, n: int, scalars: bool = False) -> list:
    """``arg`` as ``n`` per-tensor values (``scalars``: a 1-d tensor holds one each)."""
    if scalars and isinstance(arg, Tensor) and arg.ndim == 1:
        arg = arg.tolist()
    if isinstance(arg, (list, tuple)):
        if len(arg) != n:
            kind = "tensor" if arg and isinstance(arg[0], Tensor) else "scalar"
            raise RuntimeError(f"Tensor list must have same number of elements as {kind} list.")
        return list(arg)
    return [arg] * n


def _apply(name: str, inplace: bool, tensors, args: tuple, kwargs: dict):
    ts = _tensors(tensors, name)
    per = [_each(a, len(ts)) for a in args]
    values = [kwargs] * len(ts)
    if name in ("addcmul", "addcdiv") and len(per) == 3:  # per-tensor ``scalars``
        values = [{**kwargs, "value": v} for v in _each(args[2], len(ts), scalars=True)]
        per = per[:2]
    if inplace:
        for t, kw, *a in zip(ts, values, *per):
            write = getattr(t, name + "_", None)  # (no ``maximum_``: its result copied in)
            write(*a, **kw) if write is not None else t.copy_(getattr(t, name)(*a, **kw))
        return tensors
    return tuple(getattr(t, name)(*a, **kw) for t, kw, *a in zip(ts, values, *per))


def _make(name: str, inplace: bool, doc: str):
    def fn(self, *args, **kwargs):
        return _apply(name, inplace, self, args, kwargs)

    fn.__name__ = fn.__qualname__ = f"_foreach_{name}{'_' if inplace else ''}"
    fn.__doc__ = doc
    return fn


def _foreach_pow(self, exponent):
    """``pow`` of each tensor, or of one number to each tensor (``_foreach_pow(2.0, xs)``)."""
    if isinstance(self, (list, tuple)):
        return _apply("pow", False, self, (exponent,), {})
    return tuple(self**e for e in _tensors(exponent, "pow"))


def _foreach_norm(self, ord=2, dtype=None):
    """``linalg.vector_norm`` of each tensor."""
    return tuple(vector_norm(t, ord, dtype=dtype) for t in _tensors(self, "norm"))


def _foreach_powsum(self, ord=2):
    """``sum(|x| ** ord)`` of each tensor."""
    return tuple(t.abs().pow(ord).sum() for t in _tensors(self, "powsum"))


def _foreach_max(self):
    """``max()`` of each tensor."""
    return tuple(t.max() for t in _tensors(self, "max"))


def _foreach_mm(self, mat2):
    """``mm`` of each pair."""
    return _apply("mm", False, self, (mat2,), {})


def _foreach_clone(self, *, memory_format=None):
    """``clone`` of each tensor."""
    kw = {} if memory_format is None else {"memory_format": memory_format}
    return _apply("clone", False, self, (), kw)


def _foreach_copy_(self, src, non_blocking=False):
    """``copy_`` of each source into each tensor."""
    return _apply("copy", True, self, (src,), {"non_blocking": non_blocking})


def _foreach_zero_(self):
    """``zero_`` of each tensor."""
    return _apply("zero", True, self, (), {})


_FUNCTIONS = {
    f"_foreach_{name}{suffix}": _make(
        name,
        suffix == "_",
        f"``{name}{suffix}`` of each tensor (module docstring: how arguments pair up).",
    )
    for name in (*_UNARY, *_BINARY, *_TERNARY)
    for suffix in ("", "_")
    if not (name == "pow" and suffix == "")
}
_FUNCTIONS.update(
    (f.__name__, f)
    for f in (
        _foreach_pow,
        _foreach_norm,
        _foreach_powsum,
        _foreach_max,
        _foreach_mm,
        _foreach_clone,
        _foreach_copy_,
        _foreach_zero_,
    )
)
globals().update(_FUNCTIONS)
__all__ = sorted(_FUNCTIONS)
