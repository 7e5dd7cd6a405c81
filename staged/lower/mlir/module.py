"""Graph -> MLIR text (linalg on tensors), verified with the bindings shipped in iree.compiler.

Each primitive has one emitter in ``LOWERINGS`` (keyed by the ``Primitive``); an emitter
gets the ``Emitter``, the ``Op`` and the SSA names of its operands, and returns the SSA
name of its result. Every emitted op carries ``loc("<prim>"("<file>":<line>:0))`` so
verifier and compiler diagnostics point at the user's line.

Sizes may be dynamic (``Sym``, from ``staged.autodiff.avals``): their types print ``?``
and emitters pass every size through ``Emitter.index``/``mixed``/``window``/``empty``,
which give a literal for an int and an SSA ``index`` value (``tensor.dim`` of the input
carrying it, read once at the top of the function) for a ``Sym``.
"""
from __future__ import annotations

import math
import re
import threading

import numpy as np

from ... import dtypes as dt
from ...autodiff.avals import Sym
from ..table import LoweringError, Table, dclass  # noqa: F401  (re-exported)

TABLE = Table("MLIR")      # Primitive -> emitter(e, op, *operands) -> result SSA name
LOWERINGS = TABLE.lowerings
UNSUPPORTED = TABLE.reasons  # primitive name -> {dtype class or name: why it has no lowering}
lowering, unsupported = TABLE.lowering, TABLE.unsupported


# --- types ------------------------------------------------------------------------------
_ELEM = {dt.bool_: "i1", dt.uint8: "i8", dt.int8: "i8", dt.int16: "i16", dt.int32: "i32",
         dt.int64: "i64", dt.float16: "f16", dt.float32: "f32", dt.float64: "f64",
         dt.complex64: "complex<f32>", dt.complex128: "complex<f64>"}
if dt.bfloat16 is not None:
    _ELEM[dt.bfloat16] = "bf16"


def elem_type(d) -> str:
    return _ELEM[d]


def tensor_type(shape, d) -> str:
    return "tensor<" + "".join("?x" if isinstance(s, Sym) else f"{s}x" for s in shape) + \
        _ELEM[d] + ">"


def bits(d) -> int:
    return 1 if d is dt.bool_ else d.itemsize * 8


def affine_map(rank: int, results) -> str:
    """Results are loop dims (ints) or affine expressions over ``d<i>`` (strings)."""
    dims = ", ".join(f"d{i}" for i in range(rank))
    exprs = ", ".join(r if isinstance(r, str) else f"d{r}" for r in results)
    return f"affine_map<({dims}) -> ({exprs})>"


def _scalar_literal(value, d) -> str:
    a = np.asarray(value, dtype=d.np)
    if d is dt.bool_:
        return "1" if a else "0"
    if d.is_floating_point:
        return f"0x{a.view(f'u{d.itemsize}').item():X}"
    return str(a.view(f'i{d.itemsize}').item())


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- the emitter ----------------------------------------------------------------------
class Emitter:
    """Accumulates the body of one func.func; names SSA values uniquely."""

    def __init__(self):
        self.lines: list = []
        self.line_ops: list = []  # the graph op each line was emitted for
        self.names: dict = {}     # Value.id -> SSA name
        self.op = None
        self._n = 0
        self.prologue: list = []  # index values of sizes, at the top of the function
        self.sources: dict = {}   # dynamic dim name -> (SSA of an input, its type, axis, k)
        self._sizes: dict = {}    # int or Sym -> SSA index value

    def fresh(self, prefix="v") -> str:
        self._n += 1
        return f"%{prefix}{self._n}"

    @property
    def loc(self) -> str:
        if self.op is None:
            return "loc(unknown)"
        name = _quote(self.op.prim.name)
        file, _, line = self.op.loc.rpartition(":")
        if file and line.isdigit():
            return f"loc({name}({_quote(file)}:{line}:0))"
        return f"loc({name})"

    def raw(self, line: str) -> None:
        self.lines.append(line)
        self.line_ops.append(self.op)

    def emit(self, rhs: str, results: int = 1) -> str:
        """Emit ``%r = rhs loc(...)``; returns ``%r`` (``%r:n`` results are ``%r#i``)."""
        r = self.fresh()
        self.raw(f"{r}{f':{results}' if results > 1 else ''} = {rhs} {self.loc}")
        return r

    def fail(self, reason: str, d=None):
        op = self.op
        what = op.prim.name + (f" on {d.name}" if d is not None else "")
        where = f" at {op.loc}" if op.loc else ""
        raise LoweringError(f"{what}{where}: {reason}")

    def need(self, table: dict, d, what=None):
        """``table[dclass(d)]``, or a LoweringError with the reason the table records
        (for ``d`` itself, a gap of one dtype, or for its class)."""
        name, c = what or self.op.prim.name, dclass(d)
        gap = UNSUPPORTED.get(name, {}).get(d.name)
        if gap or c not in table:
            reason = gap or TABLE.reason(name, d) or f"not defined for {c} tensors"
            self.fail(f"no MLIR lowering: {reason}", d)
        return table[c]

    # sizes
    def index(self, s) -> str:
        """An SSA ``index`` value holding size ``s`` (an int or a ``Sym``)."""
        r = self._sizes.get(s)
        if r is not None:
            return r
        r = self.fresh("c" if not isinstance(s, Sym) else "n")
        if not isinstance(s, Sym):
            self.prologue.append(f"{r} = arith.constant {int(s)} : index")
        else:
            if s.name not in self.sources:
                raise LoweringError(f"dynamic dim {s.name!r} is not a dimension of any "
                                    "argument, so its size cannot be read at run time")
            x, ty, axis, k = self.sources[s.name]
            base = self._sizes.get(Sym(s.name))
            if base is None:
                base = self.fresh("n")
                self.prologue.append(f"{base} = tensor.dim {x}, {self.index(axis)} : {ty}")
                if k != 1:  # the input holds k * n
                    whole, base = base, self.fresh("n")
                    self.prologue.append(f"{base} = arith.divui {whole}, {self.index(k)} "
                                         ": index")
                self._sizes[Sym(s.name)] = base
            if s.k == 1:
                return base
            self.prologue.append(f"{r} = arith.muli {base}, {self.index(s.k)} : index")
        self._sizes[s] = r
        return r

    def mixed(self, sizes) -> str:
        """``a, b, c`` for a static-or-dynamic list (ints literal, Syms SSA values)."""
        return ", ".join(self.index(s) if isinstance(s, Sym) else str(int(s)) for s in sizes)

    def window(self, offsets, sizes, strides) -> str:
        """``[offsets][sizes][strides]`` of tensor.extract_slice/insert_slice."""
        return "".join(f"[{self.mixed(v)}]" for v in (offsets, sizes, strides))

    # scalars
    def select(self, c: str, a: str, b: str, d) -> str:
        """``c ? a : b`` on scalars of dtype ``d``; complex values part by part (SPIR-V
        cannot select a complex value)."""
        t = _ELEM[d]
        if not d.is_complex:
            return self.emit(f"arith.select {c}, {a}, {b} : {t}")
        pt = _ELEM[d.to_real()]
        re_, im_ = (self.emit(f"arith.select {c}, {self.emit(f'complex.{p} {a} : {t}')}, "
                              f"{self.emit(f'complex.{p} {b} : {t}')} : {pt}")
                    for p in ("re", "im"))
        return self.emit(f"complex.create {re_}, {im_} : {t}")

    def copysign(self, a: str, b: str, d) -> str:
        """``|a|`` with the sign of ``b`` (float ``d``); 16-bit floats go through f32, as
        SPIR-V has no 16-bit copysign."""
        t = _ELEM[d]
        if d.itemsize != 2:
            return self.emit(f"math.copysign {a}, {b} : {t}")
        wide = [self.emit(f"arith.extf {v} : {t} to f32") for v in (a, b)]
        r = self.emit(f"math.copysign {wide[0]}, {wide[1]} : f32")
        return self.emit(f"arith.truncf {r} : f32 to {t}")

    def const(self, value, d) -> str:
        if d.is_complex:
            part = d.to_real()
            lits = ", ".join(f"{_scalar_literal(v, part)} : {_ELEM[part]}"
                             for v in (np.real(value), np.imag(value)))
            return self.emit(f"complex.constant [{lits}] : {_ELEM[d]}")
        return self.emit(f"arith.constant {_scalar_literal(value, d)} : {_ELEM[d]}")

    # tensors
    def dense(self, array: np.ndarray, aval) -> str:
        t = tensor_type(aval.shape, aval.dtype)
        if array.size == 0:
            return self.emit(f"tensor.empty() : {t}")
        a = np.ascontiguousarray(array, dtype=aval.dtype.np)
        flat = a.reshape(-1)
        if (flat == flat[0]).all() or (flat != flat).all():
            flat = flat[:1]  # one element's bytes is a splat
        return self.emit(f'arith.constant dense<"0x{flat.tobytes().hex().upper()}"> : {t}')

    def empty(self, shape, d) -> str:
        dyn = ", ".join(self.index(s) for s in shape if isinstance(s, Sym))
        return self.emit(f"tensor.empty({dyn}) : {tensor_type(shape, d)}")

    def full(self, shape, d, value) -> str:
        c, init, t = self.const(value, d), self.empty(shape, d), tensor_type(shape, d)
        return self.emit(f"linalg.fill ins({c} : {_ELEM[d]}) outs({init} : {t}) -> {t}")

    def generic(self, ins, outs, maps, iterators, body) -> str:
        """A linalg.generic. ``ins``: [(ssa, aval)]; ``outs``: [(init ssa, aval)];
        ``maps``: result dims per operand; ``body(*scalars)`` returns the yielded scalar
        SSA name(s). Returns the SSA name (``%r#i`` for several outputs)."""
        rank = len(iterators)
        args = [self.fresh("a") for _ in ins + outs]
        attrs = (f"{{indexing_maps = [{', '.join(affine_map(rank, m) for m in maps)}], "
                 f"iterator_types = [{', '.join(f'{chr(34)}{i}{chr(34)}' for i in iterators)}]}}")
        ins_s = f"ins({', '.join(s for s, _ in ins)} : " \
                f"{', '.join(tensor_type(a.shape, a.dtype) for _, a in ins)}) " if ins else ""
        out_types = [tensor_type(a.shape, a.dtype) for _, a in outs]
        r = self.fresh()
        head = f"{r}{f':{len(outs)}' if len(outs) > 1 else ''} = linalg.generic {attrs} " \
               f"{ins_s}outs({', '.join(s for s, _ in outs)} : {', '.join(out_types)}) {{"
        self.raw(head)
        self.raw("^bb0(" + ", ".join(f"{n}: {_ELEM[a.dtype]}"
                                     for n, (_, a) in zip(args, ins + outs)) + "):")
        ys = body(*args)
        ys = ys if isinstance(ys, tuple) else (ys,)
        self.raw(f"  linalg.yield {', '.join(ys)} : {', '.join(_ELEM[a.dtype] for _, a in outs)}")
        res = out_types[0] if len(outs) == 1 else f"({', '.join(out_types)})"
        self.raw(f"}} -> {res} {self.loc}")
        return r

    def map(self, xs, in_avals, out_aval, body) -> str:
        """An elementwise generic over operands of the output's shape."""
        rank = len(out_aval.shape)
        ident = tuple(range(rank))
        return self.generic(list(zip(xs, in_avals)), [(self.empty(out_aval.shape, out_aval.dtype),
                                                     out_aval)],
                            [ident] * (len(xs) + 1), ["parallel"] * rank,
                            lambda *a: body(*a[:len(xs)]))

    def reshape(self, x: str, src, dst, d) -> str:
        """Reshape with collapse_shape/expand_shape (sizes may be dynamic: at most one
        ``Sym`` per group)."""
        src, dst = tuple(src), tuple(dst)
        if src == dst:
            return x
        mid, gs, gd = _reassociation(src, dst)
        if mid != src:
            x = self.emit(f"tensor.collapse_shape {x} {_groups(gs)} : {tensor_type(src, d)} "
                          f"into {tensor_type(mid, d)}")
        if mid != dst:
            x = self.emit(f"tensor.expand_shape {x} {_groups(gd)} output_shape "
                          f"[{self.mixed(dst)}] : {tensor_type(mid, d)} "
                          f"into {tensor_type(dst, d)}")
        return x


def _groups(groups) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"


_BIG = 1_000_003  # a prime standing in for dynamic sizes: a k*n matches only k*n


def _num(s) -> int:
    return s.k * _BIG if isinstance(s, Sym) else s


def _reassociation(src, dst):
    """(intermediate shape, src groups, dst groups): collapse src by groups to the
    intermediate, then expand it by groups to dst. Dynamic sizes group as a large prime
    times their factor would, so a ``Sym`` only ever matches a product holding it."""
    if not src or not dst:  # to/from 0-d: every dim of the other side is 1
        return (), [], []
    if 0 in src:
        return (0,), [list(range(len(src)))], [list(range(len(dst)))]
    sym, src, dst = src, tuple(map(_num, src)), tuple(map(_num, dst))
    gs, gd, i, j = [], [], 0, 0
    while i < len(src) and j < len(dst):
        a, b, g, h = src[i], dst[j], [i], [j]
        i, j = i + 1, j + 1
        while a != b:
            if a < b:
                a *= src[i]
                g.append(i)
                i += 1
            else:
                b *= dst[j]
                h.append(j)
                j += 1
        gs.append(g)
        gd.append(h)
    gs[-1].extend(range(i, len(src)))  # trailing size-1 dims join the last group
    gd[-1].extend(range(j, len(dst)))
    return tuple(math.prod(sym[k] for k in g) for g in gs), gs, gd


# --- module ---------------------------------------------------------------------------
def to_mlir(graph, name: str = "main", *, state_as_globals: bool = False,
            scope: str = "model", boundary=None) -> str:
    """The MLIR text of ``graph`` as ``func.func @name(inputs...) -> (outputs...)``,
    verified; raises LoweringError naming the primitive and the user's file:line.

    With ``state_as_globals`` (deployable steps), state inputs are instead mutable
    ``util.global``s initialised from the parameter archive scope ``scope`` under their
    input names; the function takes only the arguments, stores new state values into the
    globals, and returns only the ``out`` outputs; a second function ``@<name>_state``
    returns the globals' current values (in input order).

    ``boundary`` (``{dtype name: wider dtype name}``) gives the type values of a dtype
    have where they cross the module's edge (parameters, results, globals); inside they
    are converted. Targets that store only 32-bit words (Vulkan's baseline) bind a tensor
    by its byte size, so the last word of a bool or 8/16-bit tensor whose size is not a
    multiple of 4 bytes would be read as zeros and never written.
    """
    e = Emitter()
    wide = {dt.as_dtype(a): dt.as_dtype(b) for a, b in (boundary or {}).items()}

    def edge_type(aval):
        return tensor_type(aval.shape, wide.get(aval.dtype, aval.dtype))

    params, globals_ = [], {}
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
            params.append(f"%arg{len(params)}: {ty}")
            for axis, s in enumerate(v.aval.shape):
                if isinstance(s, Sym) and (s.name not in e.sources or s.k < e.sources[s.name][3]):
                    e.sources[s.name] = (e.names[v.id], ty, axis, s.k)
    for inp in graph.inputs:
        v = inp.value
        if v.aval.dtype in wide:
            e.names[v.id] = _convert(e, e.names[v.id], v.aval, wide[v.aval.dtype], v.aval.dtype)
    for v, array in graph.consts:
        spec = graph.sym_consts.get(v.id)
        e.names[v.id] = e.dense(np.asarray(array), v.aval) if spec is None else \
            _sym_const(e, spec, v.aval)
    for op in graph.ops:
        e.op = op
        emitter = LOWERINGS.get(op.prim)
        if emitter is None:
            reasons = UNSUPPORTED.get(op.prim.name)
            e.fail(f"no MLIR lowering{': ' + '; '.join(reasons.values()) if reasons else ''}")
        e.names[op.out.id] = _without_data(e, op) or emitter(
            e, op, *(e.names[v.id] for v in op.inputs))
    e.op = None
    outs = graph.outputs

    def at_edge(v):
        d = v.aval.dtype
        return _convert(e, e.names[v.id], v.aval, d, wide[d]) if d in wide else e.names[v.id]
    if state_as_globals:
        for o in outs:
            if o.kind == "state":
                e.lines.append(f"util.global.store {at_edge(o.value)}, {globals_[o.name]} "
                               f": {edge_type(o.value.aval)}")
                e.line_ops.append(None)
        outs = [o for o in outs if o.kind == "out"]
    outs = [o.value for o in outs]
    results = [at_edge(v) for v in outs]
    types = [edge_type(v.aval) for v in outs]
    head = [f"util.global private mutable {sym} = #stream.parameter.named<"
            f"{_quote(scope)}::{_quote(n)}> : {edge_type(i.value.aval)}"
            for i in graph.inputs for n, sym in globals_.items() if i.name == n]
    head.append(f"func.func @{name}({', '.join(params)}) -> ({', '.join(types)}) {{")
    ret = f"return {', '.join(results)} : {', '.join(types)}" if outs else "return"
    body = ["  " + line for line in e.prologue + e.lines] + [f"  {ret}", "}"]
    if globals_:
        body += _state_getter(name, graph, globals_, edge_type)
    text = "\n".join(head + body) + "\n"
    verify(text, [None] * (len(head) + len(e.prologue)) + e.line_ops)
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
            r = np.asarray(op.prim.impl(*(np.zeros(tuple(
                s if isinstance(s, int) else 1 for s in v.aval.shape), v.aval.dtype.np)
                for v in op.inputs), **op.params))
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
    n = e.emit(f"arith.uitofp {e.emit(f'arith.index_cast {e.index(spec.sym)} : index to i64')}"
               f" : i64 to {t}")
    if spec.kind == "ratio":  # scale * n / (n + offset)
        m = e.emit(f"arith.addf {n}, {e.const(spec.offset, d)} : {t}")
        r = e.emit(f"arith.mulf {e.const(spec.scale, d)}, "
                   f"{e.emit(f'arith.divf {n}, {m} : {t}')} : {t}")
        return e.emit(f"tensor.from_elements {r} : {tensor_type(aval.shape, d)}")
    if spec.offset:
        n = e.emit(f"arith.addf {n}, {e.const(spec.offset, d)} : {t}")
    if spec.offset < 0:  # a count: max(n + offset, 0)
        n = e.emit(f"arith.maximumf {n}, {e.const(0, d)} : {t}")
    r = e.emit(f"arith.{'mulf' if spec.kind == 'mul' else 'divf'} {e.const(spec.scale, d)}, "
               f"{n} : {t}")
    return e.emit(f"tensor.from_elements {r} : {tensor_type(aval.shape, d)}")


def _convert(e, x: str, aval, src, dst) -> str:
    """Tensor ``x`` of ``aval``'s shape from dtype ``src`` to ``dst`` (NumPy's astype)."""
    from ...autodiff import Aval
    from .elementwise import cast_scalar
    return e.map((x,), [Aval(aval.shape, src)], Aval(aval.shape, dst),
                 lambda a: cast_scalar(e, a, src, dst))


def _state_getter(name, graph, globals_, edge_type) -> list:
    state = [i for i in graph.inputs if i.name in globals_]
    types = [edge_type(i.value.aval) for i in state]
    lines = [f"func.func @{name}_state() -> ({', '.join(types)}) {{"]
    lines += [f"  %g{k} = util.global.load {globals_[i.name]} : {t}"
              for k, (i, t) in enumerate(zip(state, types))]
    lines += [f"  return {', '.join(f'%g{k}' for k in range(len(state)))} : "
              f"{', '.join(types)}", "}"]
    return lines


def _symbol(name: str) -> str:
    """A valid MLIR symbol for a state name (``0.weight`` -> ``s_0_weight``)."""
    return "s_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


_NAME_LOC = re.compile(r'loc\("([^"]*)"(?:\("((?:[^"\\]|\\.)*)":(\d+):\d+\))?\)')
_TEXT_LOC = re.compile(r':(\d+):\d+')


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
                where = (f"{op.prim.name}" + (f" at {op.loc}" if op.loc else "")) if op \
                    else f"MLIR line {n + 1}"
                where += f" (`{lines[n].strip()}`)"
        out.append(f"{where or loc}: {d.message}")
    return "\n".join(out) or "MLIR verification failed"
