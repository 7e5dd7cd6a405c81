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


def normalize_dims(dims, ndim: int) -> tuple:
    """Dims as a sorted tuple of non-negative ints; None means all dims."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = (dims,)
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {d})")
        out.append(d % max(ndim, 1))
    return tuple(sorted(set(out))) if ndim else ()


def reduced_shape(shape, dims, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)
