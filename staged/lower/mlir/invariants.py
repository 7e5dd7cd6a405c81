"""Reductions of values known whatever the data, evaluated at lowering time.

Note [invariant reductions]: IREE 3.13 miscompiles a sum or product over values it has
folded to one number independent of the data inside a dispatch (llvm-cpu and the
initializers its constant evaluation runs): ``(x * 0 + 1).sum()`` over 10 int64 entries
gave 3, ``where(x == x, 1., 0.).sum()`` 2.0, the mean of such a row 0.4. Sums of constant
tensors and of values IREE cannot fold are right. So the lowering evaluates these
reductions itself: ``splats`` finds, in one pass over the graph, the values whose every
entry is one known number (constants, their broadcasts and reshapes, elementwise ops of
such values, and the integer identities IREE folds: x - x, x == x, x * 0, x & 0 ...), and
``invariant_reduction`` emits a reduction of one as the constant NumPy computes.
"""

from __future__ import annotations

import numpy as np

from .elementwise import BINARY, UNARY

_MOVES = {"expand", "reshape", "permute", "copy", "slice"}  # every entry stays the same
_ELEMENTWISE = {*UNARY, *BINARY, "cast", "where"}
_SAME = {"sub": 0, "bitwise_xor": 0, "eq": True, "le": True, "ge": True}
_SAME.update(ne=False, lt=False, gt=False)
_ABSORBING = {"mul": 0, "bitwise_and": 0, "logical_and": False, "logical_or": True}
_REDUCTIONS = {"reduce_sum", "reduce_prod"}
_UNKNOWN = object()


def splats(graph) -> dict:
    """``{value id: the number every entry of it is}`` for the values known at compile time."""
    known: dict = {}
    for v, array in graph.consts:
        a = np.asarray(array)
        if a.size and (a == a.flat[0]).all():
            known[v.id] = a.flat[0]
    for op in graph.ops:
        name, ins = op.prim.name, op.inputs
        ks = [known.get(v.id, _UNKNOWN) for v in ins]
        if name in _MOVES and ks[0] is not _UNKNOWN:
            known[op.out.id] = ks[0]
        elif name not in _ELEMENTWISE:
            continue
        elif _UNKNOWN not in ks:
            scalars = [np.asarray(k, v.aval.dtype.np) for k, v in zip(ks, ins)]
            known[op.out.id] = np.asarray(op.prim.impl(*scalars, **op.params)).item()
        elif name == "where" and ks[0] is not _UNKNOWN:
            branch = ks[1] if ks[0] else ks[2]
            if branch is not _UNKNOWN:
                known[op.out.id] = branch
        elif not (ins[0].aval.dtype.is_floating_point or ins[0].aval.dtype.is_complex):
            # integer and bool identities (with floats, NaN makes x - x and x == x vary)
            if name in _SAME and ins[0] is ins[1]:
                known[op.out.id] = _SAME[name]
            elif name in _ABSORBING and any(
                k is not _UNKNOWN and k == _ABSORBING[name] for k in ks
            ):
                known[op.out.id] = _ABSORBING[name]
    return known


def invariant_reduction(e, op, known):
    """The SSA name of ``op``'s result as a constant when ``op`` is a sum or product of a
    known value of static shape (Note [invariant reductions]), else None."""
    if op.prim.name not in _REDUCTIONS:
        return None
    x = op.inputs[0]
    k = known.get(x.id, _UNKNOWN)
    if k is _UNKNOWN or not all(isinstance(s, int) for s in x.aval.shape):
        return None
    out = op.prim.impl(np.full(x.aval.shape, k, x.aval.dtype.np), **op.params)
    return e.dense(np.asarray(out), op.out.aval)
