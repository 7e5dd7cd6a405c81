"""The graph IR: a flat SSA list of primitive applications.

A ``Graph`` has *inputs* (arguments the caller passes, then state the step reads),
*constants* (NumPy arrays baked in, or in ``sym_consts`` computed from dynamic sizes),
*ops* (one primitive each, static params, one output value, and the user's source line)
and *outputs* (values the function returns, then new values of state). It prints one op
a line. A size in an aval or a shape parameter may be a ``Sym`` (a dynamic dimension,
``staged/tracing/dynamic.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..autodiff import Aval, Primitive


class Value:
    """An SSA value: its number in the graph and its abstract value."""

    __slots__ = ("id", "aval")

    def __init__(self, id: int, aval: Aval):
        self.id = id
        self.aval = aval

    def __repr__(self) -> str:
        return f"%{self.id}"


@dataclass(eq=False)
class Op:
    prim: Primitive
    inputs: tuple
    params: dict
    out: Value
    loc: str = ""  # "file.py:12" of the user code that issued the op
    phase: str = "forward"  # "forward", "backward" or "optimizer" (Note [phases])
    hook: str = ""  # the user hook that issued it, if any
    ranges: tuple = ()  # the record_function blocks open around it, outermost first

    def __str__(self) -> str:
        params = "".join(f" {k}={_fmt(v)}" for k, v in self.params.items())
        args = ", ".join(map(repr, self.inputs))
        loc = f"  # {self.loc}" if self.loc else ""
        return f"{self.out!r}: {self.out.aval} = {self.prim.name}({args}){params}{loc}"


@dataclass(eq=False)
class Input:
    value: Value
    kind: str  # "arg" or "state"
    name: str


@dataclass(eq=False)
class Output:
    value: Value
    kind: str  # "out" or "state" (the new value of the state input `name`) or "grad"
    name: str


@dataclass(eq=False)
class Graph:
    inputs: list = field(default_factory=list)  # [Input]
    consts: list = field(default_factory=list)  # [(Value, np.ndarray)]
    ops: list = field(default_factory=list)  # [Op]
    outputs: list = field(default_factory=list)  # [Output]
    _next: int = 0
    # const Value.id -> SymConst: constants computed from dynamic sizes at run time
    # (tracing/dynamic.py); their arrays hold the values at the traced size
    sym_consts: dict = field(default_factory=dict)

    def new_value(self, aval: Aval) -> Value:
        v = Value(self._next, aval)
        self._next += 1
        return v

    def add_input(self, aval: Aval, kind: str, name: str) -> Value:
        v = self.new_value(aval)
        self.inputs.append(Input(v, kind, name))
        return v

    def add_const(self, array: np.ndarray, aval: Aval) -> Value:
        v = self.new_value(aval)
        self.consts.append((v, array))
        return v

    def add_op(
        self,
        prim: Primitive,
        inputs,
        params: dict,
        aval: Aval,
        loc: str = "",
        phase: str = "forward",
        hook: str = "",
        ranges: tuple = (),
    ) -> Value:
        v = self.new_value(aval)
        self.ops.append(Op(prim, tuple(inputs), params, v, loc, phase, hook, ranges))
        return v

    def __str__(self) -> str:
        lines = ["graph("]
        for i in self.inputs:
            lines.append(f"    {i.value!r}: {i.value.aval}  # {i.kind} {i.name}")
        lines.append("):")
        for v, a in self.consts:
            sym = self.sym_consts.get(v.id)
            lines.append(f"  {v!r}: {v.aval} = const {_fmt_array(a) if sym is None else sym}")
        lines.extend("  " + str(op) for op in self.ops)
        outs = ", ".join(f"{o.kind} {o.name}={o.value!r}" for o in self.outputs)
        lines.append(f"  return {outs}")
        return "\n".join(lines)


def _fmt(v) -> str:
    if isinstance(v, tuple):
        return "(" + ",".join(map(str, v)) + ")"
    return getattr(v, "name", None) or repr(v)


def _fmt_array(a: np.ndarray) -> str:
    if a.size <= 8:
        return np.array2string(a, separator=",").replace("\n", "")
    return f"<{a.size} values>"
