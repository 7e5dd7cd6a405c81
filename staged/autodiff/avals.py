"""Abstract values (shape + dtype; a size may be a ``Sym``) and the shape rules they share."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import dtypes as dt
from .._where import at_user


class Aval(NamedTuple):
    """What is known of a value without its data: its shape and dtype."""

    shape: tuple
    dtype: dt.DType

    def __repr__(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    @property
    def ndim(self) -> int:
        return len(self.shape)


class DynamicError(ValueError):
    """Something in the graph depends on a dynamic dimension in a way that cannot be
    expressed with symbolic sizes."""


class EagerOnlyError(NotImplementedError):
    """An op staged runs eagerly only (no composition of it to trace): raised when a
    compiled step, capture, forward-mode AD or vmap reaches it."""


class Sym:
    """A dimension known only at run time: ``k`` times the dynamic dimension ``name``."""

    __slots__ = ("name", "k")

    def __init__(self, name: str, k: int = 1):
        self.name, self.k = name, k

    def __eq__(self, other):
        return isinstance(other, Sym) and (self.name, self.k) == (other.name, other.k)

    def __hash__(self):
        return hash((self.name, self.k))

    def __mul__(self, other):
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            return Sym(self.name, self.k * int(other)) if other else 0
        raise DynamicError(
            f"{self} * {other}: a size cannot be the product of two dynamic dimensions"
        )

    __rmul__ = __mul__

    def __add__(self, other):
        if isinstance(other, (int, np.integer)) and other == 0:
            return self
        if isinstance(other, Sym) and other.name == self.name:
            return Sym(self.name, self.k + other.k)
        raise DynamicError(f"{self} + {other}: only multiples of a dynamic dimension can be sizes")

    __radd__ = __add__

    def __str__(self) -> str:
        return self.name if self.k == 1 else f"{self.k}*{self.name}"

    __repr__ = __str__


class ShapeError(RuntimeError):
    """A primitive was bound to operands its shape rule rejects; the message starts with
    the user's ``file:line`` (docs/errors.md)."""

    def __init__(self, message: str = ""):
        super().__init__(at_user(message))


def same_shape(name, *avals):
    """Elementwise primitives are shape- and dtype-strict; broadcasting happens above."""
    a = avals[0]
    for b in avals[1:]:
        if b.shape != a.shape or b.dtype is not a.dtype:
            raise ShapeError(
                f"{name}: operands must have equal shapes and dtypes "
                f"(broadcasting is done by the public op), got {a} and {b}"
            )
    return a


def wrap_dim(dim: int, ndim: int) -> int:
    """``dim`` as a non-negative index for ``ndim`` dims (a 0-d tensor takes 0 and -1), or
    PyTorch's IndexError."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n


def normalize_dims(dims, ndim: int) -> tuple:
    """Dims as a sorted tuple of non-negative ints; None means all dims."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, (int, np.integer)):  # (a NumPy int too, as torch takes one)
        dims = (dims,)
    out = [wrap_dim(int(d), ndim) for d in dims]
    if len(set(out)) != len(out):
        d = next(d for d in out if out.count(d) > 1)
        raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return tuple(sorted(out)) if ndim else ()


def reduced_shape(shape, dims, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)
