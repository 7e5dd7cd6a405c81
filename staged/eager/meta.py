"""Meta tensors: shape, dtype and strides, no data (torch's ``device='meta'``).

Note [meta tensors]: a meta tensor's payload is a ``Meta``, which answers what eager code
asks of a payload (``shape``, ``dtype``, ``strides``, Note [payloads] in ``tensor.py``)
and holds nothing else. ``dispatch.apply`` binds a primitive with a meta operand by its
shape rule, the abstract evaluation a capture runs (``evaluate``): the public ops'
checks, promotion and broadcasting are the CPU's, so the errors for bad shapes are too,
and autograd records Nodes as for any result, so ``backward`` runs the same rules on meta
gradients. Strides are torch's for the views (``_VIEW_STRIDES``) and for elementwise
results (the layout of a dense operand); other results (and ``copy``'s, as its impl's)
are row-major. A write into a meta tensor has no data to change; data read out of one
raises torch's errors. Constants beside meta operands are meta (``like``). A CPU operand
may join meta ones at a public elementwise op only 0-d, as in torch (``operands`` checks
before it broadcasts), or of an integer or bool dtype, where torch raises: the index and
mask constants that composites build on the CPU pass (``same_device``). Nothing here
runs for CPU tensors: ``apply`` looks for a ``Meta`` only among payloads that are not
NumPy arrays.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import dtypes as dt
from ..autodiff import Aval
from .strides import inferred, non_overlapping_and_dense, row_major

NO_DATA = "Cannot copy out of meta tensor; no data!"


class Meta:
    """A meta tensor's payload: ``shape``, NumPy ``dtype`` and ``strides`` (in bytes, as
    NumPy's) of data that does not exist."""

    __slots__ = ("shape", "dtype", "strides")

    def __init__(self, shape, dtype, strides=None):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        if strides is None:
            strides = row_major(self.shape)
        self.strides = tuple(s * self.dtype.itemsize for s in strides)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def elements(self) -> tuple:
        """The strides in elements."""
        return tuple(s // self.dtype.itemsize for s in self.strides)

    @property
    def flags(self) -> _Flags:
        """NumPy's ``flags.c_contiguous``: row-major, dims of size 1 having any stride."""
        ok = self.size == 0 or all(
            n == 1 or s == r for n, s, r in zip(self.shape, self.elements(), row_major(self.shape))
        )
        return _Flags(ok)

    def astype(self, dtype) -> Meta:
        return Meta(self.shape, dtype, self.elements())

    def __array__(self, dtype=None, copy=None):
        raise NotImplementedError(NO_DATA)

    def __setitem__(self, index, value) -> None:
        """A write: no data to change (torch's meta kernels only check)."""

    def __repr__(self) -> str:
        return f"Meta({self.dtype.name}{list(self.shape)})"


class _Flags(NamedTuple):
    c_contiguous: bool


def like(array: np.ndarray, payload):
    """``array``, a constant to combine with ``payload``: its metadata where that is meta."""
    return Meta(array.shape, array.dtype) if type(payload) is Meta else array


def among(payloads) -> bool:
    """Whether a payload is meta."""
    return any(type(p) is Meta for p in payloads)


def evaluate(prim, payloads, params) -> Meta:
    """The result of ``prim`` on ``payloads`` (some of them ``Meta``): its shape rule's
    shape and dtype, and the strides torch gives it (Note [meta tensors])."""
    same_device(payloads)
    avals = [Aval(tuple(p.shape), dt.from_numpy_dtype(p.dtype)) for p in payloads]
    out = prim.shape_rule(*avals, **params)
    rule = _VIEW_STRIDES.get(prim.name) if prim.view else None
    strides = rule(payloads[0].elements(), avals[0].shape, out.shape, params) if rule else None
    if strides is None and prim.name != "copy" and all(a.shape == out.shape for a in avals):
        strides = _dense_layout(out.shape, payloads)
    return Meta(out.shape, out.dtype.np, strides)


def same_device(payloads, joins=None) -> None:
    """torch's error where ``payloads`` mix meta and CPU tensors; the first that ``joins``
    does not let pass sets the device expected of the others. A primitive's CPU operand
    may join meta ones broadcast (0-d, or a stride 0: a scalar), or of an integer or bool
    dtype (indices and masks: the constants composites build, as ``arange(c) == target``
    in ``cross_entropy``); a public elementwise op's (``joins=public_operand``), before it
    is broadcast, only 0-d (a CPU scalar, as TensorIterator's rule) or integer or bool."""
    joins = joins or _constant
    expected = None
    for p in payloads:
        if joins(p):
            continue
        on_meta = type(p) is Meta
        if expected is None:
            expected = on_meta
        elif on_meta != expected:
            devices = ("meta", "cpu") if on_meta else ("cpu", "meta")
            raise RuntimeError(
                "Tensor on device {} is not on the expected device {}!".format(*devices)
            )


def _constant(p) -> bool:
    return type(p) is np.ndarray and (0 in p.strides or not p.shape or p.dtype.kind in "biu")


def public_operand(p) -> bool:
    return type(p) is np.ndarray and (not p.shape or p.dtype.kind in "biu")


def _dense_layout(shape, payloads) -> tuple | None:
    """An elementwise result's strides: the layout of its first operand of that shape
    whose elements fill a block (torch's TensorIterator keeps it), else row-major."""
    for p in payloads:
        if type(p) is Meta and tuple(p.shape) == shape:
            strides = p.elements()
            if non_overlapping_and_dense(shape, strides):
                return inferred(shape, strides)
    return None


def _view(old_shape, old_strides, new_shape) -> tuple | None:
    """torch's ``computeStride``: the strides of ``new_shape`` viewing memory laid out as
    ``old_strides``, or None where only a copy has that shape."""
    if not old_shape:
        return (1,) * len(new_shape)
    if math.prod(old_shape) == 0:
        return old_strides if tuple(old_shape) == tuple(new_shape) else row_major(new_shape)
    out = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    base = old_strides[-1]
    tensor_n = view_n = 1
    for d in range(len(old_shape) - 1, -1, -1):
        tensor_n *= old_shape[d]
        if d == 0 or (old_shape[d - 1] != 1 and old_strides[d - 1] != tensor_n * base):
            while view_d >= 0 and (view_n < tensor_n or new_shape[view_d] == 1):
                out[view_d] = view_n * base
                view_n *= new_shape[view_d]
                view_d -= 1
            if view_n != tensor_n:
                return None
            if d > 0:
                base, tensor_n, view_n = old_strides[d - 1], 1, 1
    return tuple(out) if view_d == -1 else None


# the strides (elements) of a view primitive's result: fn(input strides, input shape,
# result shape, params), None for row-major
_VIEW_STRIDES = {
    "reshape": lambda st, shape, out, p: _view(shape, st, out),
    "permute": lambda st, shape, out, p: tuple(st[d] for d in p["perm"]),
    "expand": lambda st, shape, out, p: tuple(
        s if a == b else 0 for s, a, b in zip(st, shape, out)
    ),
    "slice": lambda st, shape, out, p: tuple(s * k for s, k in zip(st, p["steps"])),
    # strided's strides count the input's row-major entries: memory strides if it is
    "strided": lambda st, shape, out, p: tuple(p["strides"]) if st == row_major(shape) else None,
    "real": lambda st, shape, out, p: tuple(2 * s for s in st),
    "imag": lambda st, shape, out, p: tuple(2 * s for s in st),
    "view_as_real": lambda st, shape, out, p: tuple(2 * s for s in st) + (1,),
    "view_as_complex": lambda st, shape, out, p: tuple(s // 2 for s in st[:-1]),
}
