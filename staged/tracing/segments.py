"""Splitting a captured graph at the ops the host must run (collectives): ``split``.

Note [segments]: IREE's CPU and Vulkan drivers have no collective channel, so a compiled
step with collectives runs as compiled *segments* with the collectives between them on the
host (``staged/runtime/segmented.py``). Each op gets a *stage*: the latest stage of its
inputs (graph inputs and constants are at stage 0), plus one for a host op. Segment ``k``
holds the compiled ops of stage ``k``; the host ops whose inputs are ready at stage ``k``
(``host[k]``, independent of each other, in graph order, so every rank runs them in the
same order) run after it, all started before any is waited for; segment ``k + 1`` starts
when their results arrive. Ops that do not depend on a collective are thus all in the
first segment however late the trace issued them, and the number of segments is one more
than the longest chain of collectives. A segment is an ordinary ``Graph`` (the original
ops and values, unchanged) whose inputs are the values it reads from the caller, earlier
segments or the host, and whose outputs are what later segments, the host or the step's
results need (the first also returns the constants the host reads or the step returns, so
that a runner needs nothing but the segments' results: a saved step has no graph). A pure transform of the IR: nothing here knows about MLIR or MPI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .ir import Graph, Input, Output


@dataclass(eq=False)
class Segment:
    graph: Graph  # its inputs and outputs are all "arg"/"out"
    inputs: list = field(default_factory=list)  # Values of the whole graph it reads
    outputs: list = field(default_factory=list)  # Values of the whole graph it returns


@dataclass(eq=False)
class Split:
    segments: list  # [Segment], in the order they run
    host: list  # host[k]: the host ops run after segments[k] ([Op])


def split(graph: Graph, on_host) -> Split:
    """``graph`` cut at each op for which ``on_host(op)`` is true (Note [segments])."""
    stage = {i.value.id: 0 for i in graph.inputs}
    stage.update((v.id, 0) for v, _ in graph.consts)
    compute: list[list[Any]] = [[]]
    host: list[list[Any]] = [[]]
    for op in graph.ops:
        s = max((stage[v.id] for v in op.inputs), default=0)
        if on_host(op):
            host[s].append(op)
            s += 1
        else:
            compute[s].append(op)
        stage[op.out.id] = s
        while len(compute) <= s:
            compute.append([])
            host.append([])
    # what is read after each segment: by later segments, the host, the step's results
    defined = {op.out.id: k for k, ops in enumerate(compute) for op in ops}
    needed: list[set[int]] = [set() for _ in compute]
    for k in range(len(compute)):
        for ops, latest in ((compute[k], k - 1), (host[k], k)):
            for op in ops:
                for v in op.inputs:
                    d = defined.get(v.id)
                    if d is not None and d <= latest:
                        needed[d].add(v.id)
    for o in graph.outputs:
        d = defined.get(o.value.id)
        if d is not None:
            needed[d].add(o.value.id)
    consts = {v.id: (v, a) for v, a in graph.consts}
    # constants the host reads or the step returns: the first segment returns them
    read = [v.id for ops in host for op in ops for v in op.inputs]
    early = [c for c in dict.fromkeys(read + [o.value.id for o in graph.outputs]) if c in consts]
    segments = []
    for k, ops in enumerate(compute):
        seg, seen = Segment(Graph()), set()
        extra = [consts[c][0] for c in early] if k == 0 else []
        for v in [w for op in ops for w in op.inputs] + extra:
            if defined.get(v.id) != k and v.id not in seen:
                seen.add(v.id)
                _read(graph, seg, v, consts)
        seg.graph.ops = list(ops)
        seg.outputs = [op.out for op in ops if op.out.id in needed[k]] + extra
        seg.graph.outputs = [Output(v, "out", f"%{v.id}") for v in seg.outputs]
        seg.graph._next = graph._next
        segments.append(seg)
    return Split(segments, host)


def _read(graph: Graph, seg: Segment, v, consts: dict) -> None:
    """Make ``v`` (of ``graph``, made outside ``seg``) available in ``seg``: a constant of
    its graph, or an input."""
    g = seg.graph
    if v.id in consts:
        g.consts.append(consts[v.id])
        if v.id in graph.sym_consts:
            g.sym_consts[v.id] = graph.sym_consts[v.id]
    else:
        g.inputs.append(Input(v, "arg", f"%{v.id}"))
        seg.inputs.append(v)
