"""matmul: linalg.matmul, or linalg.batch_matmul with the batch dims collapsed to one; an
outer product (a contraction over one element) is one elementwise generic."""

from __future__ import annotations

import math

from ...autodiff import REGISTRY
from ...autodiff.avals import Aval
from .elementwise import BINARY
from .emitter import lowering, tensor_type
from .indexing import fence


@lowering(REGISTRY["matmul"])
def _matmul(e, op, a, b):
    (sa, sb), so, d = (v.aval.shape for v in op.inputs), op.out.aval.shape, op.out.aval.dtype
    e.need(dict.fromkeys(("float", "int", "uint", "complex"), True), d)
    batch = so[:-2]
    n = math.prod(batch)
    shapes = [s[-2:] if not batch else (n,) + s[-2:] for s in (sa, sb, so)]
    a, b = (e.reshape(x, s, t, d) for x, s, t in ((a, sa, shapes[0]), (b, sb, shapes[1])))
    if sa[-1] == 1:  # per-example weight gradients under vmap: a (batch_)matmul over one
        return e.reshape(_outer(e, a, b, shapes, d), shapes[2], so, d)  # element is 1.7x slower
    ta, tb, to = (tensor_type(s, d) for s in shapes)
    if batch and e.fenced_operands:  # Note [data tiling] in runtime/compiler.py
        a, b = (
            fence(e, x, Aval(s, d)) if v.id in e.fenced_operands else x
            for x, s, v in ((a, shapes[0], op.inputs[0]), (b, shapes[1], op.inputs[1]))
        )
    name = "linalg.batch_matmul" if batch else "linalg.matmul"
    r = e.emit(f"{name} ins({a}, {b} : {ta}, {tb}) outs({e.full(shapes[2], d, 0)} : {to}) -> {to}")
    return e.reshape(r, shapes[2], so, d)


def _outer(e, a, b, shapes, d):
    """``0 + a b`` elementwise over (batch, i, j), as the matmul accumulates (so a -0
    product gives +0, as in eager)."""
    (sa, sb, so), c = shapes, d.dclass
    i = len(so) - 2
    a, b = e.reshape(a, sa, sa[:-1], d), e.reshape(b, sb, sb[:-2] + sb[-1:], d)
    lead = tuple(range(i))
    return e.generic(
        [(a, Aval(sa[:-1], d)), (b, Aval(sb[:-2] + sb[-1:], d))],
        [(e.empty(so, d), Aval(so, d))],
        [lead + (i,), lead + (i + 1,), lead + (i, i + 1)],
        ["parallel"] * len(so),
        lambda x, y, _: BINARY["add"][c](e, d, e.const(0, d), BINARY["mul"][c](e, d, x, y)),
    )


LAYOUT = frozenset({"reshape", "permute", "expand", "broadcast"})


def fenced_operands(graph) -> set:
    """The ids of the batched matmul operands that IREE 3.13's data tiling would fuse
    compute into (Note [data tiling] in runtime/compiler.py): those not made, through
    layout changes alone, of an input or of a matmul's result. Fencing those too (a
    transpose of a projection, attention's q and k) cost 2x the step of a small
    transformer."""
    made = {op.out.id: op for op in graph.ops}
    fenced = set()
    for op in graph.ops:
        if op.prim.name == "matmul" and len(op.out.aval.shape) > 2:
            for v in op.inputs:
                p = made.get(v.id)
                while p is not None and p.prim.name in LAYOUT:
                    p = made.get(p.inputs[0].id)
                if p is not None and p.prim.name != "matmul":
                    fenced.add(v.id)
    return fenced
