"""Shape primitives: Reshape, Expand, Transpose, strided (a Gather); target shapes may hold
dynamic dims."""

from __future__ import annotations

import numpy as np

from ...autodiff import REGISTRY
from ...autodiff.primitive import CLASSES
from ...autodiff.shape import strided_index
from .model import NO_COMPLEX, lowering, unsupported


@lowering(REGISTRY["reshape"])
def _reshape(b, op, x):
    shape = op.params["shape"]
    return b.node("Reshape", [x, b.shape(shape)], allowzero=int(0 in shape))


@lowering(REGISTRY["expand"])
def _expand(b, op, x):
    shape = op.params["shape"]
    if 0 in shape and all(isinstance(s, int) for s in shape):
        # nothing to read: an empty constant, for onnxruntime 1.32's ExpandElimination
        # removes an Expand of [2,1,1] to [2,1,0] (the next Reshape then fails)
        return b.const(np.zeros(shape, op.out.aval.dtype.np))
    return b.node("Expand", [x, b.shape(shape)])


@lowering(REGISTRY["permute"])
def _permute(b, op, x):
    return b.node("Transpose", [x], perm=list(op.params["perm"]))


@lowering(REGISTRY["concat"])
def _concat(b, op, *xs):
    return b.node("Concat", xs, axis=op.params["dim"])


# a complex tensor on one side or the other
unsupported("view_as_real", {"complex": NO_COMPLEX})
unsupported("view_as_complex", {"float": NO_COMPLEX})


@lowering(REGISTRY["strided"])
def _strided(b, op, x):
    """A Gather from the flattened input at the positions the view reads."""
    p, out = op.params, op.out.aval
    if 0 in out.shape:
        return b.const(np.zeros(out.shape, out.dtype.np))
    index = strided_index(out.shape, p["strides"], p["offset"])
    return b.node("Gather", [b.node("Reshape", [x, b.shape((-1,))]), b.const(index)], axis=0)


unsupported(
    "view_dtype", dict.fromkeys(CLASSES, "x.view(dtype) of another dtype runs eagerly only")
)
