"""Reductions of values known whatever the data, evaluated at lowering time.

Note [invariant reductions]: IREE 3.13 miscompiles a sum or product over values it has
folded to one number independent of the data inside a dispatch (llvm-cpu and the
initializers its constant evaluation runs): ``(x * 0 + 1).sum()`` over 10 int64 entries
gave 3, ``where(x == x, 1., 0.).sum()`` 2.0, the mean of such a row 0.4. Sums of constant
tensors and of values IREE cannot fold are right. So the lowering evaluates these
reductions itself: ``splats`` finds, in one pass over the graph, the values whose every
entry is one known number (constants, their broadcasts and reshapes, elementwise ops of
such values, gathers, maxima and minima of them, concatenations and writes of one such
value, and the integer identities IREE folds: x - x, x == x, x * 0, x & 0 ...), and
``invariant_reduction`` emits a reduction of one as the constant NumPy computes.

Note [splat constants]: IREE 3.13 also miscompiles a broadcast of a constant (which it
turns into a splat) that is both a result of the step and the destination of an insert
(``x.clone().zero_()`` returned, and a clone of it written with ``v[0] = y``): the insert
lands in the returned splat's buffer too, so the step returned the written copy twice
(found by the llvm-cpu fuzzer; with a dynamic batch too). A splat constant
(``arith.constant dense<0.0>``) or a ``linalg.fill`` is copied before it is written, so
``known_splat`` emits every value ``splats`` knows as one: a constant for a static shape, a
fill for a dynamic one. Entries are compared bit for bit (``_same``): with ``==`` a splat of
NaN was not known, reached IREE as a select of constants that IREE folded into a splat
itself, and the step came back wrong the same way (found by the fuzzer on llvm-cpu and
vulkan-spirv); and 0.0 and -0.0 are not one value.

Note [constant destinations]: IREE 3.13 also loses a read of a value computed from
constants only (a dispatch with no operands) when a ``tensor.insert_slice`` writes into the
same value: ``g = (c + 1).reshape(3, 4)`` with ``c`` a constant, then ``g[1:] = 0`` and a
read of ``g[1:]`` read the zeros (with ``--iree-opt-const-eval=false`` and at ``O0`` too;
found by the llvm-cpu fuzzer's setitem regression: the gradient of a step whose
cotangents are constants). Writing into a literal constant is right, so
``constant_destinations`` evaluates, with NumPy, each ``slice_scatter`` destination that
depends on constants only, and the lowering writes into that literal instead.
"""

from __future__ import annotations

import numpy as np

from .elementwise import ELEMENTWISE

_MOVES = {"expand", "reshape", "permute", "copy", "slice"}  # every entry stays the same
_SAME = {"sub": 0, "bitwise_xor": 0, "eq": True, "le": True, "ge": True}
_SAME.update(ne=False, lt=False, gt=False)
_ABSORBING = {"mul": 0, "bitwise_and": 0, "logical_and": False, "logical_or": True}
_REDUCTIONS = {"reduce_sum", "reduce_prod"}
_SELECTIONS = {"gather", "reduce_max", "reduce_min"}
_WRITES = {"slice_scatter", "scatter"}  # (destination, ..., source)
_UNKNOWN = object()
# ops whose result is not their NumPy impl of constants (checks, draws, collectives)
_EFFECTS = frozenset("check barrier uniform all_reduce all_gather reduce_scatter broadcast".split())


def _nonempty(v) -> bool:
    return all(isinstance(s, int) and s > 0 for s in v.aval.shape)


def _same(a, b) -> bool:
    """Whether two known entries are one value: NaN is NaN, and 0.0 is not -0.0."""
    if a != a or b != b:
        return bool(a != a and b != b)
    return (
        bool(a == b)
        and np.signbit(np.real(a)) == np.signbit(np.real(b))
        and np.signbit(np.imag(a)) == np.signbit(np.imag(b))
    )


def _same_known(ks) -> bool:
    return _UNKNOWN not in ks and all(_same(k, ks[0]) for k in ks)


def splats(graph) -> dict:
    """``{value id: the number every entry of it is}`` for the values known at compile time."""
    known: dict = {}
    for v, array in graph.consts:
        a = np.asarray(array)
        if v.id in graph.sym_consts:  # computed from a dynamic size at each call
            continue
        # bit for bit: a constant of NaNs is one (Note [splat constants]), of 0.0 and -0.0 not
        if a.size and np.ascontiguousarray(a).tobytes() == np.full_like(a, a.flat[0]).tobytes():
            known[v.id] = a.flat[0]
    for op in graph.ops:
        name, ins = op.prim.name, op.inputs
        ks = [known.get(v.id, _UNKNOWN) for v in ins]
        if name in _MOVES and ks[0] is not _UNKNOWN:
            known[op.out.id] = ks[0]
        elif name in _SELECTIONS and ks[0] is not _UNKNOWN and _nonempty(ins[0]):
            known[op.out.id] = ks[0]  # entries of a splat (a gather's indices are clamped)
        elif name in _WRITES and _same_known([ks[0], ks[-1]]):
            known[op.out.id] = ks[0]  # a splat written with its own value
        elif name == "concat" and _same_known(ks):
            known[op.out.id] = ks[0]
        elif name not in ELEMENTWISE:
            continue
        elif _UNKNOWN not in ks:
            scalars = [np.asarray(k, v.aval.dtype.np) for k, v in zip(ks, ins)]
            with np.errstate(all="ignore"):  # (a constant's 1 / 0 is inf, as the step's)
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


def known_splat(e, op, known):
    """The SSA name of ``op``'s result as a splat constant (a fill for a dynamic shape) when
    every entry of it is known (Note [splat constants]), else None."""
    k = known.get(op.out.id, _UNKNOWN)
    shape = op.out.aval.shape
    if k is _UNKNOWN or op.prim.name in _REDUCTIONS:
        return None
    if all(isinstance(s, int) for s in shape):
        return e.dense(np.full(shape, k, op.out.aval.dtype.np), op.out.aval)
    return e.full(shape, op.out.aval.dtype, k)


def constant_destinations(graph) -> dict:
    """``{value id: its NumPy value}`` for each ``slice_scatter`` destination of static shape
    computed from constants only (Note [constant destinations])."""
    values = {v.id: np.asarray(a) for v, a in graph.consts if v.id not in graph.sym_consts}
    made: dict = {}  # value id -> the op computing it from constants only
    wanted = set()
    for op in graph.ops:
        ins = op.inputs
        if (
            ins
            and op.prim.name not in _EFFECTS
            and all(isinstance(s, int) for s in op.out.aval.shape)
            and all(v.id in values or v.id in made for v in ins)
        ):
            made[op.out.id] = op
        if op.prim.name == "slice_scatter" and ins[0].id in made:
            wanted.add(ins[0].id)
    needed, stack = set(), list(wanted)
    while stack:
        i = stack.pop()
        if i in made and i not in needed:
            needed.add(i)
            stack.extend(v.id for v in made[i].inputs)
    for i, op in made.items():  # in graph order
        if i in needed:
            args = (values[v.id] for v in op.inputs)
            values[i] = np.asarray(op.prim.impl(*args, **op.params), op.out.aval.dtype.np)
    return {i: values[i] for i in wanted}
