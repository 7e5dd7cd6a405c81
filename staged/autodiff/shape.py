"""Shape primitives. reshape, expand, permute, view_as_real, view_as_complex and strided
(diagonal, unfold, as_strided) return views of their input."""

from __future__ import annotations

import builtins
import math

import numpy as np

from . import indexing, lax
from .. import dtypes as dt
from .avals import Aval, ShapeError
from .primitive import LINEAR, Primitive, _constant, domain


def _reshape_rule(x, *, shape):
    if math.prod(shape) != math.prod(x.shape):
        raise ShapeError(f"shape '{list(shape)}' is invalid for input of size {math.prod(x.shape)}")
    return Aval(tuple(shape), x.dtype)


def _expand_rule(x, *, shape):
    if len(shape) != len(x.shape) or any(a != b and a != 1 for a, b in zip(x.shape, shape)):
        raise ShapeError(
            f"The expanded size of the tensor ({list(shape)}) must match the "
            f"existing size ({list(x.shape)}) at non-singleton dimensions "
            f"(expand is rank-strict; the public op adds leading dims)"
        )
    return Aval(tuple(shape), x.dtype)


def _permute_rule(x, *, perm):
    if sorted(perm) != list(range(len(x.shape))):
        raise ShapeError(
            f"permute(): dims {list(perm)} are not a permutation of {len(x.shape)} dims"
        )
    return Aval(tuple(x.shape[p] for p in perm), x.dtype)


def _expand(x, *, shape):
    """``np.broadcast_to(x, shape)``, a read-only view: for a C-contiguous ``x`` made
    directly (np.broadcast_to's Python costs 3.5 us, most of a small backward step)."""
    if not x.flags.c_contiguous or len(shape) != x.ndim:
        return np.broadcast_to(x, shape)
    strides = []
    for a, b, s in zip(x.shape, shape, x.strides):
        if a == b:
            strides.append(s)
        elif a == 1 and b >= 0:
            strides.append(0)
        else:
            return np.broadcast_to(x, shape)  # its error
    out = np.ndarray(shape, x.dtype, x, 0, tuple(strides))
    out.setflags(write=False)
    return out


def _expand_vjp(g, x_aval, shape):
    dims = tuple(i for i, (a, b) in enumerate(zip(x_aval.shape, shape)) if a == 1 and b != 1)
    return lax.sum(g, dims, keepdim=True) if dims else g  # float32 for halves


reshape: Primitive = Primitive(
    "reshape",
    lambda x, *, shape: x.reshape(shape),
    _reshape_rule,
    vjp=lambda g, x_aval: reshape(g, shape=x_aval.shape),
    jvp=LINEAR,
    view=True,
    node_name="ViewBackward0",
)
expand = Primitive(
    "expand",
    _expand,
    _expand_rule,
    vjp=_expand_vjp,
    jvp=LINEAR,
    view=True,
)
permute: Primitive = Primitive(
    "permute",
    lambda x, *, perm: np.transpose(x, perm),
    _permute_rule,
    vjp=lambda g, perm: permute(g, perm=lax.inverse_permutation(tuple(perm))),
    jvp=LINEAR,
    view=True,
)


def _concat_rule(*xs, dim, sizes):
    a = xs[0]
    if len(xs) != len(sizes) or not 0 <= dim < max(a.ndim, 1):
        raise ShapeError(f"concat: {len(xs)} operands, {len(sizes)} sizes, dim {dim}")
    for i, x in enumerate(xs):
        if (
            x.dtype is not a.dtype
            or x.ndim != a.ndim
            or x.shape[dim] != sizes[i]
            or any(s != t for d, (s, t) in enumerate(zip(x.shape, a.shape)) if d != dim)
        ):
            raise ShapeError(
                f"concat: operand {i} {x} does not match {a} apart from dim {dim} (size {sizes[i]})"
            )
    return Aval(a.shape[:dim] + (sum(sizes),) + a.shape[dim + 1 :], a.dtype)


def _concat_vjp(g, i, dim, sizes):
    start = sum(sizes[:i])
    shape = g.shape
    return indexing.slice(
        g,
        starts=tuple(start if d == dim else 0 for d in range(len(shape))),
        stops=tuple(start + sizes[i] if d == dim else s for d, s in enumerate(shape)),
        steps=(1,) * len(shape),
    )


def _concat_jvp(primals, tangents, out, *, dim, sizes):
    if all(t is None for t in tangents):
        return None
    return concat(
        *(lax.full_like(p, 0) if t is None else t for p, t in zip(primals, tangents)),
        dim=dim,
        sizes=sizes,
    )


# operands' sizes along ``dim`` are a parameter so that the backward can slice ``g``
concat = Primitive(
    "concat",
    lambda *xs, dim, sizes: np.concatenate(xs, axis=dim),
    _concat_rule,
    vjp=_concat_vjp,
    jvp=_concat_jvp,
    node_name="CatBackward0",
)


# --- complex tensors as pairs of reals: views of the same memory, as PyTorch's -------------
def _view_as_real_impl(x):
    return x[..., None].view(f"f{x.itemsize // 2}")  # any strides: a view


def _view_as_complex_impl(x):
    if x.strides[-1] != x.itemsize:  # only in rules (a broadcast cotangent): a copy
        x = np.ascontiguousarray(x)
    return x.view(f"c{2 * x.itemsize}")[..., 0]


def _view_as_complex_rule(x):
    if not x.shape or x.shape[-1] != 2 or x.dtype not in (dt.float32, dt.float64):
        raise ShapeError(f"view_as_complex: {x} is not float32 or float64 with a last dim of 2")
    return Aval(tuple(x.shape[:-1]), x.dtype.to_complex())


view_as_real: Primitive = Primitive(
    "view_as_real",
    _view_as_real_impl,
    lambda x: Aval(tuple(x.shape) + (2,), x.dtype.to_real()),
    vjp=lambda g: view_as_complex(g),
    jvp=LINEAR,
    view=True,
    domain=domain("complex", others="a real tensor has no parts to view (the public op raises)"),
)
view_as_complex: Primitive = Primitive(
    "view_as_complex",
    _view_as_complex_impl,
    _view_as_complex_rule,
    vjp=lambda g: view_as_real(g),
    jvp=LINEAR,
    view=True,
    domain=domain("float", others="only float pairs view as complex (the public op raises)"),
)


# --- a tensor's bits read as another dtype (``x.view(torch.int32)``), as torch's ------------
def _view_dtype_impl(x, *, dtype):
    if x.ndim == 0:  # (equal sizes: the public op checks)
        return x.reshape(1).view(dtype.np).reshape(())
    return x.view(dtype.np)  # a view: NumPy checks the last axis is contiguous


def _view_dtype_rule(x, *, dtype):
    """The last dim scaled by the ratio of the sizes (the public op checks it divides)."""
    if not x.shape:
        return Aval((), dtype)
    return Aval(tuple(x.shape[:-1]) + (x.shape[-1] * x.dtype.itemsize // dtype.itemsize,), dtype)


# not differentiable, as torch's (its output never requires grad)
view_dtype = Primitive("view_dtype", _view_dtype_impl, _view_dtype_rule, view=True)


# --- strided views: diagonal, unfold and as_strided ---------------------------------------
def strided_index(shape, strides, offset) -> np.ndarray:
    """The positions ``offset + sum(i_k * strides[k])`` a strided view of ``shape`` reads
    in its input's C-order flattening (int64, of ``shape``)."""
    at = np.array(offset, np.int64)
    for n, s in zip(shape, strides):  # one dim more each time: one full-size sum
        at = at[..., None] + np.arange(n, dtype=np.int64) * s
    return at


def even_steps(at: np.ndarray) -> tuple | None:
    """The steps ``s`` with ``at == at[0, ...] + strided_index(at.shape, s, 0)``, if any."""
    first = at.flat[0]
    unit = np.eye(at.ndim, dtype=np.intp)
    steps = tuple(int(at[tuple(u)] - first) if n > 1 else 0 for u, n in zip(unit, at.shape))
    return steps if np.array_equal(at, first + strided_index(at.shape, steps, 0)) else None


def _strided_rule(x, *, shape, strides, offset):
    n = math.prod(x.shape)
    last = offset + sum((a - 1) * s for a, s in zip(shape, strides))
    if len(shape) != len(strides) or min((*shape, *strides, offset), default=0) < 0:
        raise ShapeError(f"strided: sizes {shape}, strides {strides}, offset {offset}")
    if math.prod(shape) and last >= n:
        raise ShapeError(
            f"strided: sizes {shape}, strides {strides}, offset {offset} reach "
            f"past the {n} entries of {x}"
        )
    return Aval(tuple(shape), x.dtype)


def _strided(x, *, shape, strides, offset):
    """The view ``np.lib.stride_tricks.as_strided`` makes of ``x``'s memory where each
    step of the output is one step in memory (always for a C-contiguous ``x``, and for
    the diagonals and windows of any strided one); a copy where it is not."""
    if not math.prod(shape):
        return np.empty(shape, x.dtype)
    if x.flags.c_contiguous:
        start, steps = x.reshape(-1)[offset:], tuple(s * x.itemsize for s in strides)
    else:
        at = strided_index(shape, strides, offset)
        mem = sum(c * s for c, s in zip(np.unravel_index(at, x.shape), x.strides))
        steps = even_steps(mem)
        if steps is None:
            return x.reshape(-1)[at]
        start = x[tuple(builtins.slice(c, c + 1) for c in np.unravel_index(at.flat[0], x.shape))]
    return np.lib.stride_tricks.as_strided(start, shape, steps)


def _strided_vjp(g, x_aval, shape, strides, offset):
    """``g`` added into zeros at the positions it was read from (overlapping windows
    sum, as torch's as_strided backward)."""
    n = math.prod(x_aval.shape)
    index = _constant[0](strided_index(shape, strides, offset).reshape(-1))
    flat = indexing.scatter_add(
        lax.zeros_like(g, (n,)), index, reshape(g, shape=(math.prod(shape),)), dim=0
    )
    return reshape(flat, shape=x_aval.shape)


# out[i] = x.reshape(-1)[offset + sum(i_k * strides[k])]: strides count entries of the
# input's C-order flattening (its logical layout, whatever its memory's)
strided: Primitive = Primitive(
    "strided",
    _strided,
    _strided_rule,
    vjp=_strided_vjp,
    jvp=LINEAR,
    view=True,
    node_name="AsStridedBackward0",
)
