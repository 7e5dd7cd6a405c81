"""Graph -> MLIR module text (linalg on tensors), verified with the bindings shipped in
iree.compiler; the ops come from the emitters registered in ``emitter.LOWERINGS``."""

from __future__ import annotations

import re
import threading
from typing import Any

import numpy as np

from ... import dtypes as dt
from ...autodiff.avals import Aval, Sym
from .elementwise import cast_scalar
from .emitter import _ELEM, LOWERINGS, TABLE, Emitter, LoweringError, _quote, tensor_type
from .flat import Flat, flat_values
from .indexing import fence
from .in_place import plan as in_place_plan
from .invariants import constant_destinations, invariant_reduction, known_splat, splats
from .linalg import fenced_operands
from .overflow import Overflows, checked_ops

# Note [constants by value]: a trace makes one graph constant per host array it reads, and
# whether two reads of a number share an array depends on caches (eager's arrays of
# Python numbers, say), so two traces of the same computation may hold a value once or
# several times: a GCN step re-traced after ``model.eval()`` held Adam's ``step + 1`` as
# four constants instead of one, its text changed, and IREE compiled the same module
# again. Equal constants (dtype, shape and bytes) are emitted once, so equal computations
# lower to equal text and the compile cache serves the second.


_WRITTEN = ("slice_scatter", "scatter")  # (destination, ...): Note [written results]


def to_mlir(
    graph,
    name: str = "main",
    *,
    state_as_globals: bool = False,
    scope: str = "model",
    boundary=None,
    fence_reductions: bool = False,
    fence_batched_matmuls: bool = False,
    int64_checks: bool = False,
    flat_updates: bool = False,
    in_place: bool = False,
    check: bool = True,
) -> str:
    """The MLIR text of ``graph`` as ``func.func @name(inputs...) -> (outputs...)``,
    verified; raises LoweringError naming the primitive and the user's file:line. With
    ``check=False`` the text (a ``MlirText``) is verified by ``checked(text)`` instead,
    which a compile calls only when its cache misses: parsing loads MLIR's libraries
    (~60 MB resident, tens of ms) that a step loaded from the cache never needs.

    With ``state_as_globals`` (deployable steps), state inputs are instead mutable
    ``util.global``s initialised from the parameter archive scope ``scope`` under their
    input names; the function takes only the arguments, stores new state values into the
    globals, and returns only the ``out`` outputs (and the ``check`` report, Note [index
    checks]); a second function ``@<name>_state``
    returns the globals' current values (in input order).

    ``boundary`` (``{dtype name: wider dtype name}``) gives the type values of a dtype
    have where they cross the module's edge (parameters, results, globals); inside they
    are converted. Targets that store only 32-bit words (Vulkan's baseline) bind a tensor
    by its byte size, so the last word of a bool or 8/16-bit tensor whose size is not a
    multiple of 4 bytes would be read as zeros and never written.

    ``fence_reductions`` puts each reduction's result behind an optimization barrier
    (Note [fenced reductions] in ``reduction.py``); ``fence_batched_matmuls`` puts the
    batched matmul operands that data tiling would fuse compute into behind one (Note
    [data tiling] in runtime/compiler.py).

    ``int64_checks`` (where int64 is held in int32) adds the checks of Note [int64 held in
    int32] (``overflow.py``) to the graph's ``check`` output, if it has one.

    ``flat_updates`` lowers the elementwise updates of state over one dynamic size (Note
    [flat updates] in ``flat.py``).

    ``in_place`` writes the new values of the state it can into the state inputs' own
    buffers (Note [state in place] in ``in_place.py``); the text's ``in_place`` attribute
    lists their input names (a ``MlirText``'s, empty where none is).
    """
    e = Emitter()
    e.wide = wide = {dt.as_dtype(a): dt.as_dtype(b) for a, b in (boundary or {}).items()}
    e.fence_reductions = fence_reductions
    if fence_batched_matmuls:
        e.fenced_operands = fenced_operands(graph)

    def edge_type(aval):
        return tensor_type(aval.shape, wide.get(aval.dtype, aval.dtype))

    wide_values = {o.value.id for o in graph.outputs if o.value.aval.dtype in wide}
    destinations = {op.inputs[0].id for op in graph.ops if op.prim.name in _WRITTEN}
    plan = (
        in_place_plan(graph, excluded=destinations | wide_values)
        if in_place and not state_as_globals
        else None
    )
    params: list[Any] = []
    position: dict = {}  # input value id -> its parameter's index
    globals_: dict[Any, Any] = {}
    for inp in graph.inputs:
        v = inp.value
        ty = edge_type(v.aval)
        if state_as_globals and inp.kind == "state":
            sym = globals_[inp.name] = "@" + _symbol(inp.name)
            e.names[v.id] = e.fresh()
            e.lines.append(f"{e.names[v.id]} = util.global.load {sym} : {ty}")
            e.line_ops.append(None)
        else:
            e.names[v.id] = f"%arg{len(params)}"
            position[v.id] = len(params)
            params.append(f"%arg{len(params)}: {ty}")
            for axis, s in enumerate(v.aval.shape):
                if isinstance(s, Sym) and (s.name not in e.sources or s.k < e.sources[s.name][3]):
                    e.sources[s.name] = (e.names[v.id], ty, axis, s.k)
    for inp in graph.inputs:
        v = inp.value
        if v.aval.dtype in wide:
            e.names[v.id] = _convert(e, e.names[v.id], v.aval, wide[v.aval.dtype], v.aval.dtype)
    by_value: dict[tuple, str] = {}  # Note [constants by value]
    for v, array in graph.consts:
        spec = graph.sym_consts.get(v.id)
        d = v.aval.dtype
        if spec is not None:
            e.names[v.id] = _sym_const(e, spec, v.aval)
        elif d in wide and d.np.itemsize < 4:  # held wide, as inputs are: stored narrow,
            # its dispatches wrote bytes of shared 32-bit words, and lavapipe lost some
            e.names[v.id] = _convert(
                e, e.dense(np.asarray(array), Aval(v.aval.shape, wide[d])), v.aval, wide[d], d
            )
        else:
            a = np.asarray(array)
            key = (d, a.shape, a.tobytes())
            if key not in by_value:
                by_value[key] = e.dense(a, v.aval)
            e.names[v.id] = by_value[key]
    known = e.known = splats(graph)  # Note [invariant reductions]
    literal = constant_destinations(graph)  # Note [constant destinations]
    report = [o for o in graph.outputs if o.kind == "check"]
    ops = checked_ops(graph) if int64_checks and report else None
    over = Overflows(ops) if ops else None
    flat = Flat(e, flat_values(graph, known) if flat_updates and over is None else {})
    for op in graph.ops if plan is None else plan.order:
        if plan is not None and id(op) in plan.first:
            _hold_back(e, flat, *plan.gated[plan.first[id(op)]])
        e.op = op
        emitter = LOWERINGS.get(op.prim)
        if emitter is None:
            reasons = dict.fromkeys(TABLE.gaps(op.prim.name).values())  # each reason once
            e.fail(f"no MLIR lowering{': ' + '; '.join(reasons) if reasons else ''}")
        if op.out.id in flat.sizes:
            flat.lower(emitter, op)
            continue
        for v in op.inputs:
            if v.id in flat.sizes:
                flat.static(v)
        e.names[op.out.id] = (
            _without_data(e, op)
            or invariant_reduction(e, op, known)
            or (known_splat(e, op, known) if op.out.aval.dtype not in wide else None)
            or emitter(e, op, *_operands(e, op, literal))
        )
        if over is not None:  # a sum's result computed anew, exactly
            names = [e.names[v.id] for v in op.inputs]
            e.names[op.out.id] = over.add(e, op, names, e.names[op.out.id]) or e.names[op.out.id]
    e.op = None
    edge = {}  # output -> (SSA name, aval) where the overflow checks replace it
    if over is not None:
        edge[id(report[0])] = over.finish(e, graph, report[0])
    outs = graph.outputs
    for o in outs:
        if o.value.id in flat.sizes:
            flat.static(o.value)

    # Note [written results]: IREE 3.13 also lets a tensor.insert_slice write into the
    # buffer of a result that is its destination's value (``v = x[None, 1:3]`` returned,
    # ``w = v.clone(); w[:, 0] = 5`` returned too, beside a result computed from constants,
    # the gradient ``autograd.grad(v, x, c)``): ``v`` came back as ``w``. A result that is
    # the destination of a write in the step (a copy is its value itself) is returned from
    # behind an optimization barrier, which gives it a buffer of its own. (A value held wide
    # at the edge is converted there, a new value already: no barrier, which would store a
    # narrow bool that lavapipe loses bytes of.)
    written = {e.names[op.inputs[0].id] for op in graph.ops if op.prim.name in _WRITTEN}
    fenced: dict = {}

    def at_edge(o):
        x, a = edge.get(id(o)) or (e.names[o.value.id], o.value.aval)
        if x in written and id(o) not in edge and a.dtype not in wide:
            if x not in fenced:
                fenced[x] = fence(e, x, a)
            x = fenced[x]
        return (_convert(e, x, a, a.dtype, wide[a.dtype]) if a.dtype in wide else x), a

    if state_as_globals:
        for o in outs:
            if o.kind == "state":
                e.lines.append(
                    f"util.global.store {at_edge(o)[0]}, {globals_[o.name]} "
                    f": {edge_type(o.value.aval)}"
                )
                e.line_ops.append(None)
        outs = [o for o in outs if o.kind in ("out", "check")]
    results = [at_edge(o) for o in outs]
    types = [edge_type(a) for _, a in results]
    text_in_place = []
    if plan is not None:
        names = [x for x, _ in results]
        args = {f"%arg{k}" for k in range(len(params))}
        for inp in graph.inputs:
            k = plan.outputs.get(inp.value.id)
            # the new value is a result of its own (no other result, nor an input, is it)
            if k is not None and names.count(names[k]) == 1 and names[k] not in args:
                params[position[inp.value.id]] += f" {{iree.abi.output = {k} : index}}"
                text_in_place.append(inp.name)
    head = [
        f"util.global private mutable {sym} = #stream.parameter.named<"
        f"{_quote(scope)}::{_quote(n)}> : {edge_type(i.value.aval)}"
        for i in graph.inputs
        for n, sym in globals_.items()
        if i.name == n
    ]
    head.append(f"func.func @{name}({', '.join(params)}) -> ({', '.join(types)}) {{")
    ret = f"return {', '.join(x for x, _ in results)} : {', '.join(types)}" if outs else "return"
    tail = ["}", *(_state_getter(name, graph, globals_, edge_type) if globals_ else ()), ""]
    # the body's lines indented as they are joined, in one expression so no joined string
    # outlives its use: the text is MBs for a large step, and each copy raised the peak
    lines = e.prologue + e.lines + [ret]
    text = MlirText("".join(("\n".join(head), "\n  ", "\n  ".join(lines), "\n", "\n".join(tail))))
    text.in_place = tuple(text_in_place)
    text.line_ops = [None] * (len(head) + len(e.prologue)) + e.line_ops
    return checked(text) if check else text


def _hold_back(e, flat, leaves, readers) -> None:
    """One ``util.optimization_barrier`` over a group's operands ``leaves`` and the
    results of the readers it must wait for (Values); the group reads the operands
    from behind it (Note [state in place] in ``in_place.py``)."""
    gated = [*leaves, *readers]
    if not gated:
        return
    names = [flat.static(v) if v.id in flat.sizes else e.names[v.id] for v in gated]
    types = [tensor_type(v.aval.shape, v.aval.dtype) for v in gated]
    r = e.emit(f"util.optimization_barrier {', '.join(names)} : {', '.join(types)}", len(gated))
    for k, v in enumerate(leaves):
        e.names[v.id] = f"{r}#{k}" if len(gated) > 1 else r
        flat.names.pop(v.id, None)


def _operands(e, op, literal) -> list:
    """The SSA names of ``op``'s operands; a slice_scatter's destination computed from
    constants only as a literal of its value (Note [constant destinations])."""
    names = [e.names[v.id] for v in op.inputs]
    if op.prim.name == "slice_scatter" and op.inputs[0].id in literal:
        names[0] = e.dense(literal[op.inputs[0].id], op.inputs[0].aval)
    return names


class MlirText(str):
    """MLIR text with the staged op of each line (``line_ops``), for ``checked``, and the
    state inputs written in place (``in_place``, Note [state in place])."""

    line_ops: list
    in_place: tuple = ()


def checked(text: str) -> str:
    """``text``, verified (LoweringError naming the primitive and user line otherwise)."""
    verify(text, getattr(text, "line_ops", None))
    return text


def _without_data(e, op):
    """The SSA name of ``op``'s result computed here when an input of every operand is
    zero-size (it then depends on shapes only), or None. IREE's compiler dies of SIGFPE on
    a contraction over a zero-size dimension ((2, 0) @ (0, 3)). A dynamic result is a fill
    of the value computed at size 1 for every dynamic size."""
    if not op.inputs or any(0 not in v.aval.shape for v in op.inputs):
        return None
    try:
        with np.errstate(all="ignore"):  # e.g. the mean of nothing is NaN, as eagerly
            r = np.asarray(
                op.prim.impl(
                    *(
                        np.zeros(
                            tuple(s if isinstance(s, int) else 1 for s in v.aval.shape),
                            v.aval.dtype.np,
                        )
                        for v in op.inputs
                    ),
                    **op.params,
                )
            )
    except Exception:  # a parameter holds a dynamic size: lowered as usual
        return None
    out = op.out.aval
    if all(isinstance(s, int) for s in out.shape):
        return e.dense(r, out)
    flat = r.reshape(-1)
    if flat.size and not ((flat == flat[0]).all() or (flat != flat).all()):  # one value
        return None
    return e.full(out.shape, out.dtype, flat[0] if flat.size else 0)


def _sym_const(e, spec, aval) -> str:
    """A constant computed from a dynamic size (``SymConst``): a fill of a dynamic shape,
    or ``scale * (n + offset)``, ``scale / (n + offset)`` (``n + offset`` clamped at 0) or
    ``scale * n / (n + offset)``, in the constant's float type."""
    d = aval.dtype
    if spec.kind == "fill":
        return e.full(aval.shape, d, spec.scale)
    if not d.is_floating_point or d.is_complex:
        e.fail(f"a {d.name} constant computed from a dynamic size is not supported")
    t = _ELEM[d]
    n = e.emit(
        f"arith.uitofp {e.emit(f'arith.index_cast {e.index(spec.sym)} : index to i64')}"
        f" : i64 to {t}"
    )
    if spec.kind == "ratio":  # scale * n / (n + offset)
        m = e.emit(f"arith.addf {n}, {e.const(spec.offset, d)} : {t}")
        r = e.emit(
            f"arith.mulf {e.const(spec.scale, d)}, {e.emit(f'arith.divf {n}, {m} : {t}')} : {t}"
        )
        return e.emit(f"tensor.from_elements {r} : {tensor_type(aval.shape, d)}")
    if spec.offset:
        n = e.emit(f"arith.addf {n}, {e.const(spec.offset, d)} : {t}")
    if spec.offset < 0:  # a count: max(n + offset, 0)
        n = e.emit(f"arith.maximumf {n}, {e.const(0, d)} : {t}")
    r = e.emit(
        f"arith.{'mulf' if spec.kind == 'mul' else 'divf'} {e.const(spec.scale, d)}, {n} : {t}"
    )
    return e.emit(f"tensor.from_elements {r} : {tensor_type(aval.shape, d)}")


def _convert(e, x: str, aval, src, dst) -> str:
    """Tensor ``x`` of ``aval``'s shape from dtype ``src`` to ``dst`` (NumPy's astype)."""
    return e.map(
        (x,), [Aval(aval.shape, src)], Aval(aval.shape, dst), lambda a: cast_scalar(e, a, src, dst)
    )


def _state_getter(name, graph, globals_, edge_type) -> list:
    state = [i for i in graph.inputs if i.name in globals_]
    types = [edge_type(i.value.aval) for i in state]
    lines = [f"func.func @{name}_state() -> ({', '.join(types)}) {{"]
    lines += [
        f"  %g{k} = util.global.load {globals_[i.name]} : {t}"
        for k, (i, t) in enumerate(zip(state, types))
    ]
    lines += [
        f"  return {', '.join(f'%g{k}' for k in range(len(state)))} : {', '.join(types)}",
        "}",
    ]
    return lines


def _symbol(name: str) -> str:
    """A valid MLIR symbol for a state name (``0.weight`` -> ``s_0_weight``)."""
    return "s_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


_NAME_LOC = re.compile(r'loc\("([^"]*)"(?:\("((?:[^"\\]|\\.)*)":(\d+):\d+\))?\)')
_TEXT_LOC = re.compile(r":(\d+):\d+")


_local = threading.local()
_CONTEXT_BUDGET = 64 << 20  # bytes of text parsed before a fresh context (frees attributes)


def _context():
    """A per-thread MLIR context, reused: creating one and loading dialects costs ~50 ms."""
    from iree.compiler import ir

    if getattr(_local, "ctx", None) is None or _local.used > _CONTEXT_BUDGET:
        _local.ctx, _local.used = ir.Context(), 0
    return _local.ctx


def verify(text: str, line_ops=None) -> None:
    """Parse and verify MLIR text; failures become LoweringError naming the staged
    primitive and the user's file:line (from the op's location, or the text line)."""
    from iree.compiler import ir

    ctx = _context()
    _local.used += len(text)
    with ctx:
        try:
            ir.Module.parse(text).operation.verify()
        except ir.MLIRError as err:
            raise LoweringError(describe(err.error_diagnostics, text, line_ops)) from None


def describe(diagnostics, text: str, line_ops=None) -> str:
    """A message for MLIR diagnostics: 'prim at file:line: message' per diagnostic."""
    lines = text.splitlines()
    out = []
    for d in diagnostics:
        loc, where = str(d.location), ""
        m = _NAME_LOC.search(loc)
        if m:
            where = m.group(1) + (f" at {m.group(2)}:{m.group(3)}" if m.group(2) else "")
        else:
            t = _TEXT_LOC.search(loc)
            n = int(t.group(1)) - 1 if t else -1
            if 0 <= n < len(lines):
                op = line_ops[n] if line_ops and n < len(line_ops) else None
                where = (
                    (f"{op.prim.name}" + (f" at {op.loc}" if op.loc else ""))
                    if op
                    else f"MLIR line {n + 1}"
                )
                where += f" (`{lines[n].strip()}`)"
        out.append(f"{where or loc}: {d.message}")
    return "\n".join(out) or "MLIR verification failed"
