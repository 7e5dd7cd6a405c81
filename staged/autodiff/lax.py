"""The strict vocabulary VJP and JVP rules are written in (JAX's ``lax``).

Each function binds one primitive through the binding (``primitive._bind``: eager
NumPy, capture, forward AD, vmap and the profiler all sit behind it) on operands that
are already strict: one shape, one dtype. Nothing here promotes or broadcasts; a rule
says so with ``cast``, ``expand`` or ``broadcast_to``. A Python number is the one
convenience: it becomes a constant of the other operand's dtype and shape (``full_like``),
so ``sub(1, mul(out, out))`` is ``1 - out * out`` in ``out``'s dtype; a complex number
next to a real operand is an error (cast the operand first).

The public ops (``staged/eager/ops``) do PyTorch's promotion and broadcasting, worth
having once per user call but not on every term of every backward op, whose operands
never need it. The ops are primitives, with their own VJP and JVP rules, so rules written
here differentiate again (double backward) as before.

Primitives are found by name in the registry when first called, so every rule module
can use the whole vocabulary without importing another rule module (no import circles).
"""

from __future__ import annotations

import functools

import numpy as np

from .. import dtypes as dt
from .primitive import REGISTRY, _bind, _constant, _constant_like

_ndarray = np.ndarray
_SCALARS = (bool, int, float, complex, np.number, np.bool_)
_HALF_KINDS = "fV"  # float16 (f, itemsize 2) and bfloat16 (V)


def bind(name: str, *args, **params):
    """Bind the primitive ``name`` to the strict operands ``args``."""
    return _bind[0](REGISTRY[name], args, params)


# --- constants ------------------------------------------------------------------------------
def full_like(x, value, dtype: dt.DType | None = None):
    """``value`` in ``x``'s shape and dtype (or ``dtype``), never a full-size array: a
    broadcast view of one element eagerly, a 0-d constant expanded under capture or vmap."""
    p = x._payload
    npd = p.dtype if dtype is None else dtype.np
    if type(value) is complex and npd.kind != "c":
        raise TypeError(
            f"strict: the complex constant {value} next to a {npd} tensor "
            "(cast the tensor to a complex dtype first)"
        )
    shape = tuple(p.shape)
    one = np.array(value, npd)
    if type(p) is _ndarray:
        view = np.ndarray(shape, npd, one, 0, (0,) * len(shape))
        view.flags.writeable = False
        return _constant[0](view)
    c = _constant_like[0](one, p)
    if not shape:
        return c
    return bind("expand", bind("reshape", c, shape=(1,) * len(shape)), shape=shape)


def zeros_like(x, shape=None, dtype: dt.DType | None = None):
    """Zeros of ``x``'s shape (or ``shape``) and dtype (or ``dtype``), a new array of its
    own (as ``Tensor.new_zeros``): a gradient that may become a ``.grad`` and be added to."""
    p = x._payload
    npd = p.dtype if dtype is None else dtype.np
    zeros = np.zeros(tuple(p.shape) if shape is None else tuple(shape), npd)  # pages untouched
    return _constant[0](zeros) if type(p) is _ndarray else _constant_like[0](zeros, p)


def _strict(x, y):
    """``x`` and ``y`` with a number on either side made a constant like the other."""
    if isinstance(y, _SCALARS):
        return x, full_like(x, y)
    if isinstance(x, _SCALARS):
        return full_like(y, x), y
    return x, y


# --- dtypes ---------------------------------------------------------------------------------
def is_complex(x) -> bool:
    return x._payload.dtype.kind == "c"


def cast(x, dtype: dt.DType):
    """``x`` as ``dtype`` (itself where it has it); complex to real keeps the real part."""
    return x if x._payload.dtype == dtype.np else bind("cast", x, dtype=dtype)


def as_complex(x, like):
    """Real ``x`` cast to the complex dtype of ``like`` (``x`` itself if ``like`` is real)."""
    return (
        cast(x, dt.from_numpy_dtype(like._payload.dtype))
        if is_complex(like) and not is_complex(x)
        else x
    )


def conj(x):
    """The complex conjugate; a real tensor is its own (no op bound)."""
    return bind("conj", x) if x._payload.dtype.kind == "c" else x


def real(x):
    """The real part (a view); a real tensor is its own."""
    return bind("real", x) if x._payload.dtype.kind == "c" else x


def imag(x):
    return bind("imag", x)


# --- elementwise ----------------------------------------------------------------------------
def _unary(name):
    def op(x):
        return _bind[0](REGISTRY[name], (x,), {})

    op.__name__ = op.__qualname__ = name
    return op


def _binary(name):
    def op(x, y):
        if isinstance(y, _SCALARS) or isinstance(x, _SCALARS):
            x, y = _strict(x, y)
        return _bind[0](REGISTRY[name], (x, y), {})

    op.__name__ = op.__qualname__ = name
    return op


neg, exp, log, sqrt, sin, cos, sinh, cosh, abs, sgn, floor, trunc, logical_not = map(
    _unary,
    (
        "neg",
        "exp",
        "log",
        "sqrt",
        "sin",
        "cos",
        "sinh",
        "cosh",
        "abs",
        "sgn",
        "floor",
        "trunc",
        "logical_not",
    ),
)
add, sub, mul, div, pow, eq, ne, lt, le, gt, ge, logical_and = map(
    _binary, ("add", "sub", "mul", "div", "pow", "eq", "ne", "lt", "le", "gt", "ge", "logical_and")
)
COMPARE = {"eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge}


def where(c, x, y):
    """``x`` where the bool ``c`` holds, else ``y``; either branch may be a number."""
    if isinstance(x, _SCALARS):
        x = full_like(y, x)
    elif isinstance(y, _SCALARS):
        y = full_like(x, y)
    return _bind[0](REGISTRY["where"], (c, x, y), {})


def isfinite(x):
    """True where ``x`` is neither infinite nor NaN (float or complex ``x``)."""
    a = abs(x)
    return lt(a, float("inf"))


# --- shape ----------------------------------------------------------------------------------
def reshape(x, shape):
    shape = tuple(shape)
    return x if tuple(x._payload.shape) == shape else bind("reshape", x, shape=shape)


def expand(x, shape):
    """Rank-strict broadcast: dims of size 1 of ``x`` repeated to ``shape``."""
    shape = tuple(shape)
    return x if tuple(x._payload.shape) == shape else bind("expand", x, shape=shape)


def broadcast_to(x, shape, kept):
    """``x`` of a reduction's kept shape ``kept`` (its reduced dims gone or 1) broadcast
    back to ``shape``."""
    return expand(reshape(x, kept), shape)


def permute(x, perm):
    return bind("permute", x, perm=tuple(perm))


@functools.cache
def _swap_last(ndim: int) -> tuple:
    return tuple(range(ndim - 2)) + (ndim - 1, ndim - 2)


@functools.cache
def inverse_permutation(perm: tuple) -> tuple:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return tuple(out)


def mT(x):
    """The last two dims swapped (a view)."""
    return bind("permute", x, perm=_swap_last(len(x._payload.shape)))


# --- reductions and products ----------------------------------------------------------------
def sum(x, dims, keepdim=False):
    """``reduce_sum`` over ``dims``; half-precision floats add in float32 and round once,
    as the public sum (and PyTorch's CPU kernel)."""
    dims = tuple(dims)
    npd = x._payload.dtype
    if npd.kind in _HALF_KINDS and npd.itemsize < 4:
        wide = bind("reduce_sum", bind("cast", x, dtype=dt.float32), dims=dims, keepdim=keepdim)
        return bind("cast", wide, dtype=dt.from_numpy_dtype(npd))
    return bind("reduce_sum", x, dims=dims, keepdim=keepdim)


def matmul(a, b):
    return _bind[0](REGISTRY["matmul"], (a, b), {})
