"""matmul: linalg.matmul, or linalg.batch_matmul with the batch dims collapsed to one."""

from __future__ import annotations

import math

from ...autodiff import REGISTRY
from .emitter import lowering, tensor_type


@lowering(REGISTRY["matmul"])
def _matmul(e, op, a, b):
    (sa, sb), so, d = (v.aval.shape for v in op.inputs), op.out.aval.shape, op.out.aval.dtype
    e.need(dict.fromkeys(("float", "int", "uint", "complex"), True), d)
    batch = so[:-2]
    n = math.prod(batch)
    shapes = [s[-2:] if not batch else (n,) + s[-2:] for s in (sa, sb, so)]
    a, b = (e.reshape(x, s, t, d) for x, s, t in ((a, sa, shapes[0]), (b, sb, shapes[1])))
    ta, tb, to = (tensor_type(s, d) for s in shapes)
    name = "linalg.batch_matmul" if batch else "linalg.matmul"
    r = e.emit(f"{name} ins({a}, {b} : {ta}, {tb}) outs({e.full(shapes[2], d, 0)} : {to}) -> {to}")
    return e.reshape(r, shapes[2], so, d)
