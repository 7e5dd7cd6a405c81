"""Splitting a captured graph at the ops the host must run (collectives): ``split``.

Note [segments]: IREE's CPU and Vulkan drivers have no collective channel, so a compiled
step with collectives runs as compiled *segments* with the collectives between them on the
host (``staged/runtime/segmented.py``). Each op gets a *stage*: the latest stage of its
inputs (graph inputs and constants are at stage 0), plus one for a host op. The compiled
ops of a stage, in graph order, are then cut after the op that makes the last input of
each host op of the stage: segment ``k`` is one such run of ops, and ``host[k]`` the host
ops ready after it (independent of each other, in graph order, so every rank starts them
in the same order). A host op is started as soon as its inputs are ready, and the runner
enqueues the next segment first, so the compiled work that does not need the collective
(the rest of backward, after a DDP bucket's gradients) runs while MPI carries it; a
segment waits only for the collectives whose results it reads. Ops that do not depend on
a collective are thus all in the first stage however late the trace issued them, and the
number of stages is one more than the longest chain of collectives. A segment is an
ordinary ``Graph`` (the original ops and values, unchanged) whose inputs are the values it
reads from the caller, earlier segments or the host, and whose outputs are what later
segments, the host or the step's results need. Values made of constants alone are, as
constants are, computed in each segment that reads them; the first segment also returns
those the host reads, the last with work those the step returns, so that a runner needs
nothing but the segments' results (a saved step has no graph), and no segment is a
function of constants alone. A pure transform of the IR: nothing here knows about MLIR or
MPI.

A function IREE compiles to no work (its results constants, or views of its arguments:
reshapes) signals its fence as soon as it is called, ahead of the calls queued before it
on the module's timeline, which then fails ("semaphore already signaled past N", Note
[asynchronous steps]): hence constants' ops do not make a segment of their own, and a piece
of reshapes alone runs with a neighbouring piece of its stage. A stage whose only work is
reshapes (a step returning a collective's result reshaped) still makes such a function.
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
    made = {op.out.id: op for op in graph.ops}  # in graph order
    free = {v.id for v, _ in graph.consts}  # made of constants alone
    stage = {i.value.id: 0 for i in graph.inputs}
    compute: list[list[Any]] = [[]]
    host: list[list[Any]] = [[]]
    for op in graph.ops:
        if not on_host(op) and all(v.id in free for v in op.inputs):
            free.add(op.out.id)
            continue
        s = max((stage.get(v.id, 0) for v in op.inputs), default=0)
        if on_host(op):
            host[s].append(op)
            s += 1
        else:
            compute[s].append(op)
        stage[op.out.id] = s
        while len(compute) <= s:
            compute.append([])
            host.append([])
    compute, host = _cut(compute, host)
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
    # values of constants alone the host reads: the first segment's; that the step returns
    # (and the host does not read): the last segment's with work
    read = {v.id: v for ops in host for op in ops for v in op.inputs if v.id in free}
    returned = {o.value.id: o.value for o in graph.outputs if o.value.id in free}
    last = max((k for k, ops in enumerate(compute) if ops), default=0)
    extras = {0: list(read.values())}
    extras[last] = extras.get(last, []) + [v for i, v in returned.items() if i not in read]
    consts = {v.id: (v, a) for v, a in graph.consts}
    segments = []
    for k, ops in enumerate(compute):
        seg, seen = Segment(Graph()), set()
        extra = extras.get(k, [])
        recomputed: dict[int, Any] = {}
        for v in [w for op in ops for w in op.inputs] + extra:
            if defined.get(v.id) != k and v.id not in seen:
                seen.add(v.id)
                if v.id in consts:
                    _const(graph, seg.graph, consts[v.id])
                elif v.id in free:
                    _recompute(made, made[v.id], recomputed)
                else:
                    seg.graph.inputs.append(Input(v, "arg", f"%{v.id}"))
                    seg.inputs.append(v)
        for op in recomputed.values():
            for c in op.inputs:
                if c.id in consts and c.id not in seen:
                    seen.add(c.id)
                    _const(graph, seg.graph, consts[c.id])
        seg.graph.ops = [op for i, op in made.items() if i in recomputed] + list(ops)
        seg.outputs = [op.out for op in ops if op.out.id in needed[k]] + extra
        seg.graph.outputs = [Output(v, "out", f"%{v.id}") for v in seg.outputs]
        seg.graph._next = graph._next
        segments.append(seg)
    return Split(segments, host)


def _const(graph: Graph, g: Graph, const) -> None:
    g.consts.append(const)
    if const[0].id in graph.sym_consts:
        g.sym_consts[const[0].id] = graph.sym_consts[const[0].id]


def _recompute(made: dict, op, into: dict) -> None:
    """Add ``op``, made of constants alone, and the ops it reads to ``into`` (id -> op)."""
    if op.out.id not in into:
        into[op.out.id] = op
        for v in op.inputs:
            if v.id in made:
                _recompute(made, made[v.id], into)


def _cut(compute: list, host: list) -> tuple:
    """(segments' ops, host ops after each): each stage's ops cut after the op that makes
    the last input of each of its host ops (Note [segments]). A piece of reshapes alone
    runs with the next one (the last with the one before): a function with no work."""
    ops_out: list[list[Any]] = []
    host_out: list[list[Any]] = []
    for ops, hosts in zip(compute, host):
        at = {op.out.id: n + 1 for n, op in enumerate(ops)}
        ready = [max((at.get(v.id, 0) for v in h.inputs), default=0) for h in hosts]
        start, taken, first = 0, -1, len(ops_out)  # ops and host ops placed; the stage's first
        for cut in sorted({*ready, len(ops)}):
            piece = ops[start:cut]
            if all(op.prim.name == "reshape" for op in piece):
                if cut < len(ops):
                    continue
                if len(ops_out) > first:  # the stage's last piece: with the one before
                    ops_out[-1] += piece
                    host_out[-1] += [h for h, r in zip(hosts, ready) if taken < r]
                    break
            ops_out.append(piece)
            host_out.append([h for h, r in zip(hosts, ready) if taken < r <= cut])
            start = taken = cut
    return ops_out, host_out
