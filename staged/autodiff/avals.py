"""Abstract values (shape + dtype) and the shape rules primitives share."""
from __future__ import annotations

from typing import NamedTuple

from .. import dtypes as dt


class Aval(NamedTuple):
    """What is known of a value without its data: its shape and dtype."""

    shape: tuple
    dtype: dt.DType

    def __repr__(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    @property
    def ndim(self) -> int:
        return len(self.shape)


class ShapeError(RuntimeError):
    """A primitive was bound to operands its shape rule rejects."""


def same_shape(name, *avals):
    """Elementwise primitives are shape- and dtype-strict; broadcasting happens above."""
    a = avals[0]
    for b in avals[1:]:
        if b.shape != a.shape or b.dtype is not a.dtype:
            raise ShapeError(f"{name}: operands must have equal shapes and dtypes "
                             f"(broadcasting is done by the public op), got {a} and {b}")
    return a


def wrap_dim(dim: int, ndim: int) -> int:
    """``dim`` as a non-negative index for ``ndim`` dims (a 0-d tensor takes 0 and -1), or
    PyTorch's IndexError."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n


def normalize_dims(dims, ndim: int) -> tuple:
    """Dims as a sorted tuple of non-negative ints; None means all dims."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = (dims,)
    out = [wrap_dim(d, ndim) for d in dims]
    if len(set(out)) != len(out):
        d = next(d for d in out if out.count(d) > 1)
        raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return tuple(sorted(out)) if ndim else ()


def reduced_shape(shape, dims, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)
