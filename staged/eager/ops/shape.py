"""Public shape ops: -1 inference, negative dims, rank changes, cat/stack/split/chunk, all
over the reshape, expand, permute, slice and concat primitives."""
from __future__ import annotations

import math

import numpy as np

from ... import autodiff as ad
from ... import dtypes as dt
from ...autodiff.avals import normalize_dims, wrap_dim
from ..tensor import Tensor
from ._operands import expand_to, promote_types, to_dtype


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


def view(x, *shape):
    """``reshape`` that must share memory: a view (``x.t()``, ``x.expand(..)``) whose layout
    only a copy could give raises, as in PyTorch. A tensor that is no view and has none is
    contiguous in PyTorch whatever layout NumPy gave its payload here (``a.t() + 0``), so
    it gets a C-contiguous payload the view then shares (a copy would drop writes)."""
    out = reshape(x, *shape)
    p = out._payload
    if out is not x and type(p) is np.ndarray and p.size and not np.may_share_memory(
            p, x._payload):
        if x._base is not None or (x._vc is not None and len(x._vc) > 1):
            raise RuntimeError("view size is not compatible with input tensor's size and "
                               "stride (at least one dimension spans across two contiguous "
                               "subspaces). Use .reshape(...) instead.")
        x._payload = np.ascontiguousarray(x._payload)
        out = reshape(x, *shape)
    return out


def contiguous(x):
    """``x`` itself if it is C-contiguous, else a C-contiguous copy (part of the graph)."""
    p = x._payload
    return ad.copy(x) if type(p) is np.ndarray and not p.flags.c_contiguous else x


def flatten(x, start_dim=0, end_dim=-1):
    s, e = wrap_dim(start_dim, x.ndim), wrap_dim(end_dim, x.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if x.ndim == 0:
        return reshape(x, 1)
    shape = x._payload.shape
    return reshape(x, tuple(shape[:s]) + (math.prod(shape[s:e + 1]),) + tuple(shape[e + 1:]))


def unsqueeze(x, dim):
    dim = wrap_dim(dim, x.ndim + 1)
    shape = list(x._payload.shape)
    shape.insert(dim, 1)
    return ad.reshape(x, shape=tuple(shape))


def squeeze(x, dim=None):
    shape = x._payload.shape
    dims = normalize_dims(dim, x.ndim)
    new = tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1))
    return x if new == tuple(shape) else ad.reshape(x, shape=new)


def permute(x, *dims):
    dims = _shape_arg(dims)
    if len(dims) != x.ndim:
        raise RuntimeError(f"permute(): number of dimensions in the tensor input does not "
                           f"match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {x.ndim} is not equal to len(dims) = {len(dims)}")
    dims = tuple(wrap_dim(d, x.ndim) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return x if dims == tuple(range(x.ndim)) else ad.permute(x, perm=dims)


def transpose(x, dim0, dim1):
    a, b = wrap_dim(dim0, x.ndim), wrap_dim(dim1, x.ndim)
    if x.ndim < 2:
        return x
    perm = list(range(x.ndim))
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


def cat(tensors, dim=0):
    """Concatenate along ``dim`` (dtypes promoted; legacy 1-D empty tensors skipped)."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    d = promote_types(*tensors)
    parts = [to_dtype(t, d) for t in tensors if not (t.ndim == 1 and t._payload.shape[0] == 0)]
    if not parts:
        return to_dtype(tensors[0], d)
    ref = parts[0]
    if ref.ndim == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    dim = wrap_dim(dim, ref.ndim)
    shape = tuple(ref._payload.shape)
    for i, t in enumerate(parts):
        s = tuple(t._payload.shape)
        if len(s) != len(shape):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(shape)} "
                               f"and {len(s)}")
        for k, (a, b) in enumerate(zip(shape, s)):
            if k != dim and a != b:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {dim}. "
                                   f"Expected size {a} but got size {b} for tensor number {i} "
                                   f"in the list.")
    if len(parts) == 1:
        return ad.copy(parts[0])
    return ad.concat(*parts, dim=dim, sizes=tuple(t._payload.shape[dim] for t in parts))


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tuple(tensors[0]._payload.shape)
    for i, t in enumerate(tensors):
        if tuple(t._payload.shape) != shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(shape)} at entry 0 and {list(t.shape)} at entry {i}")
    return cat([unsqueeze(t, dim) for t in tensors], dim)


def _narrow(x, dim, start, length):
    shape = tuple(x._payload.shape)
    return ad.slice(x, starts=tuple(start if d == dim else 0 for d in range(len(shape))),
                    stops=tuple(start + length if d == dim else s for d, s in enumerate(shape)),
                    steps=(1,) * len(shape))


def split(x, split_size_or_sections, dim=0):
    """Views of consecutive pieces along ``dim``: of one size (the last may be smaller) or
    of the given sizes."""
    if x.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    dim = wrap_dim(dim, x.ndim)
    n = x._payload.shape[dim]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size < 0 or (size == 0 and n != 0):
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}")
        sizes = [size] * (n // size) + ([n % size] if n % size else []) if size else [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {dim}), but got "
                               f"split_sizes={sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(_narrow(x, dim, start, s))
        start += s
    return tuple(out)


def chunk(x, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    n = x._payload.shape[wrap_dim(dim, x.ndim)] if x.ndim else 0
    return split(x, -(-n // chunks), dim)


def new_zeros(x, *size, dtype=None, requires_grad=False):
    """Zeros of ``size`` with ``x``'s dtype (or ``dtype``), as ``Tensor.new_zeros``."""
    d = x.dtype if dtype is None else dt.as_dtype(dtype)
    t = Tensor._wrap(np.zeros(_shape_arg(size), d.np))
    return t.requires_grad_(True) if requires_grad else t
