"""Run a Graph with each primitive's NumPy impl: the reference for lowering tests."""

from __future__ import annotations

import numpy as np

from .ir import Graph


def interpret(graph: Graph, *inputs) -> list:
    """Evaluate ``graph`` on NumPy arrays given in ``graph.inputs`` order; returns the
    arrays of ``graph.outputs`` in order."""
    if len(inputs) != len(graph.inputs):
        raise TypeError(f"graph takes {len(graph.inputs)} inputs, got {len(inputs)}")
    env = {}
    for inp, a in zip(graph.inputs, inputs):
        a = np.asarray(a)
        if a.shape != inp.value.aval.shape or a.dtype != inp.value.aval.dtype.np:
            raise TypeError(
                f"input {inp.name}: expected {inp.value.aval}, got {a.dtype}{list(a.shape)}"
            )
        env[inp.value.id] = a
    for v, a in graph.consts:
        env[v.id] = a
    for op in graph.ops:
        out = op.prim.impl(*(env[v.id] for v in op.inputs), **op.params)
        env[op.out.id] = np.asarray(out)
    return [env[o.value.id] for o in graph.outputs]
