"""Shape primitives: Reshape, Expand, Transpose; target shapes may hold dynamic dims."""
from __future__ import annotations

from ...autodiff import REGISTRY
from .model import lowering


@lowering(REGISTRY["reshape"])
def _reshape(b, op, x):
    shape = op.params["shape"]
    return b.node("Reshape", [x, b.shape(shape)], allowzero=int(0 in shape))


@lowering(REGISTRY["expand"])
def _expand(b, op, x):
    return b.node("Expand", [x, b.shape(op.params["shape"])])


@lowering(REGISTRY["permute"])
def _permute(b, op, x):
    return b.node("Transpose", [x], perm=list(op.params["perm"]))


@lowering(REGISTRY["concat"])
def _concat(b, op, *xs):
    return b.node("Concat", xs, axis=op.params["dim"])
