"""Public shape ops: -1 inference, negative dims, rank changes, all over three primitives."""
from __future__ import annotations

import math

from ... import autodiff as ad
from ...autodiff.avals import normalize_dims
from ._operands import expand_to


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def reshape(x, *shape):
    shape = list(_shape_arg(shape))
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        n = x.numel()
        if known == 0 or n % known:
            raise RuntimeError(f"shape '{shape}' is invalid for input of size {n}")
        shape[shape.index(-1)] = n // known
    shape = tuple(int(s) for s in shape)
    return x if shape == tuple(x._payload.shape) else ad.reshape(x, shape=shape)


view = reshape


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return reshape(x, 1)
    s, e = start_dim % x.ndim, end_dim % x.ndim
    shape = x._payload.shape
    return reshape(x, tuple(shape[:s]) + (math.prod(shape[s:e + 1]),) + tuple(shape[e + 1:]))


def unsqueeze(x, dim):
    n = x.ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    dim %= n
    shape = list(x._payload.shape)
    shape.insert(dim, 1)
    return ad.reshape(x, shape=tuple(shape))


def squeeze(x, dim=None):
    shape = x._payload.shape
    dims = normalize_dims(dim, x.ndim)
    new = tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1))
    return x if new == tuple(shape) else ad.reshape(x, shape=new)


def permute(x, *dims):
    dims = tuple(d % x.ndim if x.ndim else d for d in _shape_arg(dims))
    return x if dims == tuple(range(x.ndim)) else ad.permute(x, perm=dims)


def transpose(x, dim0, dim1):
    if x.ndim < 2 and dim0 in (0, -1) and dim1 in (0, -1):
        return x
    perm = list(range(x.ndim))
    a, b = dim0 % x.ndim, dim1 % x.ndim
    perm[a], perm[b] = perm[b], perm[a]
    return permute(x, perm)


def t(x):
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return transpose(x, 0, 1) if x.ndim == 2 else x


def mT(x):
    if x.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {x.ndim}-D tensor.")
    return transpose(x, -2, -1)


def T(x):
    return permute(x, tuple(range(x.ndim))[::-1])


def expand(x, *sizes):
    sizes = _shape_arg(sizes)
    if len(sizes) < x.ndim:
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be "
                           f"greater or equal to the number of dimensions in the tensor "
                           f"({x.ndim})")
    lead = len(sizes) - x.ndim
    shape = tuple(x._payload.shape[i - lead] if s == -1 else s for i, s in enumerate(sizes))
    return expand_to(x, shape)


def broadcast_to(x, shape):
    return expand(x, tuple(shape))
