"""Elementwise updates of state lowered over one dynamic 1-D size (Note [flat updates]).

Note [flat updates]: a cold compile is nearly all IREE's, and IREE's is nearly all per
executable (Note [compile time] in runtime/compiler.py). An optimizer's update of each
parameter (and the index checks' ``where(ok, new, old)`` of each state and ``.grad``
output, Note [index checks]) is a chain of elementwise ops of that parameter's shape, so a
model whose parameters have many shapes got a few executables per shape, each compiled
anew: a 12-layer MLP of 12 widths with Adam made 134 executables, 69 of them updates and
selections (three per bias, two per weight). IREE deduplicates executables whose bodies
are equal, and an elementwise dispatch over a dynamic size takes that size as an
argument: so those ops are lowered over ``tensor<?xT>``, their size an ``index`` constant
behind ``util.optimization_barrier`` (which IREE cannot fold back into the static size),
their operands and results moved between the static and the flat form by
``flow.tensor.reshape`` (metadata only). Every parameter's update then runs one of a few
executables (that MLP: 65 executables, 181 dispatches as before, iree-compile 22.0 ->
14.2 CPU s); the ops, their order and each element's arithmetic are the same, so results
are bit-identical.

Which ops: from the state and ``.grad`` outputs back to the first op that is not
elementwise (or a broadcast of one element), is the backward's, is dynamic or has one
element (IREE gathers 0-d ops into scalar dispatches anyway), or is a known constant
(``splats``); and only where the ops so found, grouped by the values they share, write two
outputs or more (Adam's parameter, moments and ``.grad``; SGD's with momentum). A lone
``p - lr * g`` (plain SGD, as bench/compiled_steps.py's steps) IREE fuses into the
dispatch that makes ``g``; lowered flat it became a dispatch of its own (the MLP, CNN and
transformer steps: 24/54/86 dispatches -> 30/60/98) for no fewer executables, so it stays
static, and those steps' modules are unchanged.
"""

from __future__ import annotations

import math

from ...autodiff.avals import Aval, Sym
from ...tracing.ir import Op, Value
from .elementwise import ELEMENTWISE
from .emitter import tensor_type

_ROOTS = ("state", "grad")  # the outputs whose elementwise producers are lowered flat
_MANY = 2  # outputs written by a group of ops lowered flat, at least


def flat_values(graph, known) -> dict:
    """``{value id: element count}`` of the op results ``to_mlir`` lowers flat: the
    elementwise ops (and broadcasts of one element) that lead to a state or ``.grad``
    output, outside the backward pass, static and of two elements or more, not in
    ``known`` (``splats``: those are constants), where the ops joined by the values they
    share (not by broadcasts) write two such outputs or more."""
    made = {op.out.id: op for op in graph.ops}
    flat: dict = {}
    todo = [o.value for o in graph.outputs if o.kind in _ROOTS]
    while todo:
        v = todo.pop()
        op = made.get(v.id)
        if op is None or v.id in flat or v.id in known or not _flat(op):
            continue
        flat[v.id] = math.prod(v.aval.shape)
        todo.extend(op.inputs)
    group = _Groups()
    for i in flat:
        if made[i].prim.name != "expand":
            for v in made[i].inputs:
                if v.id not in flat or made[v.id].prim.name != "expand":
                    group.join(i, v.id)
    roots: dict = {}
    for o in graph.outputs:
        if o.kind in _ROOTS and o.value.id in flat:
            r = group.find(o.value.id)
            roots[r] = roots.get(r, 0) + 1
    kept = {i for i in flat if roots.get(group.find(i), 0) >= _MANY}
    kept |= {v.id for i in kept for v in made[i].inputs if v.id in flat}  # their broadcasts
    return {i: flat[i] for i in kept}


class _Groups:
    """Union-find over value ids."""

    def __init__(self):
        self.up: dict = {}

    def find(self, i):
        while self.up.get(i, i) != i:
            i = self.up[i]
        return i

    def join(self, a, b) -> None:
        self.up[self.find(a)] = self.find(b)


def _flat(op) -> bool:
    shape = op.out.aval.shape
    if op.phase == "backward" or not all(isinstance(s, int) for s in shape):
        return False
    if math.prod(shape) < 2:
        return False
    if op.prim.name == "expand":
        return all(isinstance(s, int) for s in op.inputs[0].aval.shape) and (
            math.prod(op.inputs[0].aval.shape) == 1
        )
    return op.prim.name in ELEMENTWISE and all(v.aval.shape == shape for v in op.inputs)


class Flat:
    """The flat forms of ``to_mlir``'s values (``flat_values``) in emitter ``e``."""

    def __init__(self, e, sizes: dict):
        self.e, self.sizes = e, sizes
        self.names: dict = {}  # value id -> SSA name of its flat form

    def size(self, n: int) -> Sym:
        """The dynamic size standing for ``n`` elements: an opaque ``index`` value."""
        s = Sym(f"flat{n}")
        if s not in self.e._sizes:
            r = self.e.fresh("n")
            self.e.prologue.append(f"{r} = util.optimization_barrier {self.e.index(n)} : index")
            self.e._sizes[s] = r
        return s

    def aval(self, v) -> Aval:
        """The flat aval of ``v`` (static)."""
        return Aval((self.size(math.prod(v.aval.shape)),), v.aval.dtype)

    def operand(self, v) -> str:
        """Value ``v`` (of a flat op's shape) in flat form."""
        r = self.names.get(v.id)
        if r is None:
            r = self.names[v.id] = self._reshape(self.e.names[v.id], v.aval, self.aval(v))
        return r

    def lower(self, emitter, op) -> None:
        """Lower ``op`` over its flat size: operands of its shape flat, others as they are."""
        ins = tuple(
            Value(v.id, self.aval(v)) if v.aval.shape == op.out.aval.shape else v for v in op.inputs
        )
        names = [
            self.operand(v) if w is not v else self.e.names[v.id] for v, w in zip(op.inputs, ins)
        ]
        out = Value(op.out.id, self.aval(op.out))
        shadow = Op(op.prim, ins, op.params, out, op.loc, op.phase, op.hook, op.ranges)
        self.names[op.out.id] = emitter(self.e, shadow, *names)

    def static(self, v) -> str:
        """The static form of flat value ``v``, made once."""
        r = self.e.names.get(v.id)
        if r is None:
            r = self.e.names[v.id] = self._reshape(self.names[v.id], self.aval(v), v.aval)
        return r

    def _reshape(self, x: str, src, dst) -> str:
        dyn = [s for s in (*src.shape, *dst.shape) if isinstance(s, Sym)]
        t_src, t_dst = tensor_type(src.shape, src.dtype), tensor_type(dst.shape, dst.dtype)
        sizes = f"{{{self.e.index(dyn[0])}}}"
        if isinstance(src.shape[0] if src.shape else None, Sym):
            return self.e.emit(f"flow.tensor.reshape {x} : {t_src}{sizes} -> {t_dst}")
        return self.e.emit(f"flow.tensor.reshape {x} : {t_src} -> {t_dst}{sizes}")
