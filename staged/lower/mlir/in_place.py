"""State written into its own buffers (Note [state in place]).

Note [state in place]: a training step returns new values of the state it writes
(parameters, optimizer moments). Each is a fresh buffer, so at the end of a call the old
state and the new one are both alive: for a 2-layer transformer of width 768, 54 MB of
parameters twice, where torch's optimizer writes in place. IREE can write a result into
the buffer of an argument (``{iree.abi.output = k}`` on the argument: the result's
dispatch is placed in that buffer), but IREE 3.13 does not order the argument's other
readers before that write: a matmul reading ``W`` that nothing ties to ``W``'s update
(the backward's ``g @ W``, whose result feeds earlier layers, not ``W``'s gradient) read
the new ``W`` in 50 of 50 runs, and an output that is the argument itself came back
holding the new values. So a state input ``W`` is written in place only where the graph
shows it safe, and ordered where it must be:

- the new value is made by a cluster of elementwise ops of ``W``'s shape (with the
  broadcasts, reshapes and slices feeding them), the optimizer's update, which reads
  ``W`` (and other state written in place) only element by element: no layout change or
  slice lies between them and the new value, whatever ops come before it (IREE fuses
  ``w += 0.1 * (2 * w).T`` into one dispatch that reads ``w`` transposed while writing
  it, and ``w -= w[0:1]`` one that reads the first row after writing it);
- no reader of ``W`` depends on the cluster: it would read the new value; and neither
  ``W``, an alias of it, a reader's result (a slice IREE could return as part of ``W``'s
  buffer) nor the new value is another output. The readers are found through the ops
  that lower to ``W`` itself (layout changes, copies) and through those IREE clones into
  every dispatch that reads them (slices, widening casts): a matmul reading ``W[n:]``
  reads ``W``'s buffer, whatever copy of the slice exists elsewhere;
- where a reader of ``W`` is not an ancestor of the cluster (nothing orders it first), or
  is one whose result the cluster reads (IREE could fuse it into the writing dispatch),
  the cluster reads ``W`` (and those results) from behind one ``util.optimization_barrier``
  that also takes the other readers' results: the dispatch that reads ``W`` there and
  writes it starts after every other read. A cluster that does not read ``W`` (``p.copy_``)
  has nothing to hold back, and is not written in place. Holding back ``W`` itself keeps
  the update fused into the dispatch that makes its gradient (barriers on the gradients
  made each one a buffer of its own: the 2-layer transformer of width 768 then saved 27 of
  its 54 MB).

Clusters that share ops (Adam's parameter and moments) are one group. All groups read
their state from behind one barrier, which waits for every group's readers, where the
graph's ops have an order that puts it after them (else each group has a barrier of its
own, and where no order exists, nothing is written in place): a barrier splits IREE's
schedule, and one per parameter made the transformer's step 1.17x slower (17 barriers;
one: 1.02x, within the noise, against writing nothing in place, quiet 2-core machine).
One barrier holds the readers' results a little longer: that step peaked at 164-184 MB
(one per group: 160; not in place: 269; torch eager 189-195).

What it costs at run time (``runtime/compiled.py``): a call, once enqueued, cannot be
taken back. A failed index check of an earlier call that drops the next one is therefore
asked for before the next is enqueued, not after; and a call that fails on the device
leaves the tensors it was writing holding a ``LostValue`` (``runtime/device.py``), which
raises when read or stepped on until a write of the whole tensor (``load_state_dict``)
replaces it, where other steps put the old state back. So only steps that write
``compiler.IN_PLACE_MIN_BYTES`` of state or more, for which the second copy matters,
write in place; the rest keep it and their rollback.
"""

from __future__ import annotations

import heapq
from collections import defaultdict

from ...autodiff.avals import Sym
from .elementwise import ELEMENTWISE
from .linalg import LAYOUT


class InPlace:
    """The plan ``plan`` makes: ``outputs`` {input value id: the output position its
    new value is written from}; ``order`` the ops in emission order; ``first`` {id() of
    the first op of a group with a barrier: its number}; ``gated`` per such group the
    values it reads from behind its barrier and the readers' results the barrier waits
    for."""

    def __init__(self, outputs: dict, order: list, groups: list):
        self.outputs, self.order = outputs, order
        self.first: dict = {}
        self.gated: list = []
        for k, (ops, gated) in enumerate(groups):
            first = next(op for op in order if id(op) in ops)
            self.first[id(first)] = k
            self.gated.append(gated)


def plan(graph, excluded=frozenset()) -> InPlace | None:
    """Which state inputs of ``graph`` its module writes in place, and how (``InPlace``);
    None where none can be. ``excluded``: output value ids that may not be (returned
    from behind a barrier, converted at the module's edge)."""
    made = {op.out.id: op for op in graph.ops}
    users = defaultdict(list)
    for op in graph.ops:
        for v in op.inputs:
            users[v.id].append(op)
    outs: dict = defaultdict(int)
    for o in graph.outputs:
        outs[o.value.id] += 1
    state = {i.name: i.value for i in graph.inputs if i.kind == "state"}
    made_inputs = {v.id: v for v in state.values()}
    candidates = {}  # input value id -> (output position, new value)
    for k, o in enumerate(graph.outputs):
        w = state.get(o.name) if o.kind == "state" else None
        root = made.get(o.value.id)
        if (
            w is None
            or root is None
            or root.prim.name not in ELEMENTWISE
            or outs[o.value.id] > 1
            or o.value.id in excluded
            or o.value.aval != w.aval
            or not _static(w.aval.shape)
        ):
            continue
        candidates[w.id] = (k, o.value)
    clusters = {}
    for wid, (_, new) in candidates.items():
        views, readers = _readers(wid, users)
        cluster = _cluster(new, made, candidates)
        if cluster is None:
            continue
        readers = [r for r in readers if id(r) not in cluster]
        if (views | {r.out.id for r in readers}) & outs.keys():
            continue  # an output that IREE could give as (a view of) the state's buffer
        clusters[wid] = (cluster, {id(r): r for r in readers})
    groups = _merge(clusters)
    kept: list = []
    extra: dict = {}
    for wids, ops in groups:
        before = _ancestors(ops, made)
        waits = {k: r for w in wids for k, r in clusters[w][1].items()}
        if _descendants(ops, users) & waits.keys():
            continue  # a reader of the old value that needs the new one
        operands = {v.id for op in ops.values() for v in op.inputs}
        # readers whose result the group reads (IREE could fuse them into its dispatch),
        # and those that are not its ancestors (nothing orders them before it)
        fused = [r.out for r in waits.values() if r.out.id in operands]
        waited = [r.out for k, r in waits.items() if k not in before and r.out.id not in operands]
        if fused or waited:
            held = [made_inputs[w] for w in wids] + fused
            if not all(_reads(clusters[w][0], w) for w in wids):
                continue  # an update that does not read its state: nothing to hold back
            if not all(_static(v.aval.shape) for v in held + waited):
                continue
            kept.append((wids, ops, (held, waited)))
            for op in ops.values():
                extra[id(op)] = [made[v.id] for v in fused + waited]
        else:
            kept.append((wids, ops, None))
    if not kept:
        return None
    gated = [(ops, g) for _, ops, g in kept if g]
    outputs = {w: candidates[w][0] for wids, _, _ in kept for w in wids}
    if len(gated) > 1:  # one barrier for all, where an order allows it (Note above)
        ops = {k: op for o, _ in gated for k, op in o.items()}
        held = [v for _, g in gated for v in g[0]]
        waited = list({v.id: v for _, g in gated for v in g[1]}.values())
        first = [made[v.id] for v in waited] + [made[v.id] for v in held if v.id in made]
        order = _ordered(graph.ops, made, {k: first for k in ops})
        if order is not None:
            return InPlace(outputs, order, [(ops, (held, waited))])
    order = _ordered(graph.ops, made, extra)
    if order is None:
        return None
    return InPlace(outputs, order, gated)


def _reads(cluster: dict, wid) -> bool:
    """Whether an op of ``cluster`` reads value ``wid``."""
    return any(v.id == wid for op in cluster.values() for v in op.inputs)


def _static(shape) -> bool:
    return not any(isinstance(s, Sym) for s in shape)


# ops that read their operand at other positions than they write
_MOVES = LAYOUT | {"slice"}
# ops that lower to their operand itself (a copy; a slice of all of it) or that IREE
# clones into every dispatch that reads them (tensor.extract_slice, widening casts): a
# dispatch reading their result may read the state's buffer itself
_ALIASES = _MOVES | {"copy", "finite_grad", "cast"}


def _readers(wid, users) -> tuple[set, list]:
    """The values that are ``wid`` or aliases of it (``_ALIASES``), and the other ops that
    read those."""
    views, readers, todo = {wid}, [], [wid]
    while todo:
        for op in users[todo.pop()]:
            if op.prim.name in _ALIASES:
                if op.out.id not in views:
                    views.add(op.out.id)
                    todo.append(op.out.id)
            else:
                readers.append(op)
    return views, readers


def _cluster(new, made, written) -> dict | None:
    """{id(op): op} of the elementwise ops of ``new``'s shape that make it, and the
    aliases feeding them; None where state written in place reaches ``new`` through an op
    that reads other positions than it writes (``_MOVES``: ``w += (2 * w).T`` would read
    ``w`` transposed in the dispatch that writes it)."""
    cluster, todo = {}, [new]
    while todo:
        op = made.get(todo.pop().id)
        if op is None or id(op) in cluster:
            continue
        if op.prim.name not in _ALIASES and (
            op.prim.name not in ELEMENTWISE or op.out.aval.shape != new.aval.shape
        ):
            continue
        cluster[id(op)] = op
        todo.extend(op.inputs)
    users = defaultdict(list)
    for op in cluster.values():
        for v in op.inputs:
            users[v.id].append(op)
    carried, todo = set(written), list(written)  # values carrying written state
    while todo:
        for op in users[todo.pop()]:
            if op.prim.name in _MOVES:
                return None
            if op.out.id not in carried:
                carried.add(op.out.id)
                todo.append(op.out.id)
    return cluster


def _merge(clusters: dict) -> list:
    """Clusters that share an op, joined: [(state input ids, {id(op): op})]."""
    groups: list = []
    for wid, (ops, _) in clusters.items():
        wids, merged = [wid], dict(ops)
        for g in [g for g in groups if g[1].keys() & ops.keys()]:
            groups.remove(g)
            wids += g[0]
            merged.update(g[1])
        groups.append((wids, merged))
    return groups


def _ancestors(ops: dict, made) -> set:
    """id()s of the ops whose results ``ops`` read, transitively (not ``ops``)."""
    seen: set = set()
    todo = [v for op in ops.values() for v in op.inputs]
    while todo:
        op = made.get(todo.pop().id)
        if op is not None and id(op) not in seen and id(op) not in ops:
            seen.add(id(op))
            todo.extend(op.inputs)
    return seen


def _descendants(ops: dict, users) -> set:
    """id()s of the ops that read the results of ``ops``, transitively (not ``ops``)."""
    seen: set = set()
    todo = [op.out.id for op in ops.values()]
    while todo:
        for op in users[todo.pop()]:
            if id(op) not in seen and id(op) not in ops:
                seen.add(id(op))
                todo.append(op.out.id)
    return seen


def _ordered(ops: list, made: dict, extra: dict) -> list | None:
    """``ops`` in a topological order that also puts each op after the ops ``extra``
    names for it, keeping the graph's order where it can; None on a cycle."""
    after = defaultdict(list)
    waiting = {}
    for op in ops:
        deps = {id(made[v.id]) for v in op.inputs if v.id in made}
        deps |= {id(r) for r in extra.get(id(op), ())}
        waiting[id(op)] = len(deps)
        for d in deps:
            after[d].append(op)
    position = {id(op): k for k, op in enumerate(ops)}
    ready = [position[id(op)] for op in ops if not waiting[id(op)]]
    order: list = []
    while ready:
        op = ops[heapq.heappop(ready)]
        order.append(op)
        for nxt in after[id(op)]:
            waiting[id(nxt)] -= 1
            if not waiting[id(nxt)]:
                heapq.heappush(ready, position[id(nxt)])
    return order if len(order) == len(ops) else None
