"""The MLIR emitter: element and tensor types, the lowering table and ``Emitter``, which
each primitive's lowering writes into (``module.py`` assembles the module).

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
from typing import NoReturn

import numpy as np

from ... import dtypes as dt
from ...autodiff.avals import Sym
from ..table import LoweringError, Table  # noqa: F401  (re-exported)

TABLE = Table("MLIR")  # Primitive -> emitter(e, op, *operands) -> result SSA name
LOWERINGS = TABLE.lowerings
lowering, unsupported = TABLE.lowering, TABLE.unsupported


# --- types ------------------------------------------------------------------------------
_ELEM = {
    dt.bool_: "i1",
    dt.uint8: "i8",
    dt.uint16: "i16",
    dt.uint32: "i32",
    dt.uint64: "i64",
    dt.int8: "i8",
    dt.int16: "i16",
    dt.int32: "i32",
    dt.int64: "i64",
    dt.float16: "f16",
    dt.float32: "f32",
    dt.float64: "f64",
    dt.complex64: "complex<f32>",
    dt.complex128: "complex<f64>",
}
_ELEM[dt.bfloat16] = "bf16"


def elem_type(d) -> str:
    try:
        return _ELEM[d]
    except KeyError:  # the float8s: IREE's CPU code has no arithmetic on them
        raise LoweringError(
            f"compiled steps take no {d.name} tensors: convert them (x.float()) before the "
            "compiled call, or run the step eagerly"
        ) from None


def tensor_type(shape, d) -> str:
    return (
        "tensor<"
        + "".join("?x" if isinstance(s, Sym) else f"{s}x" for s in shape)
        + elem_type(d)
        + ">"
    )


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
    return str(a.view(f"i{d.itemsize}").item())


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- the emitter ----------------------------------------------------------------------
class Emitter:
    """Accumulates the body of one func.func; names SSA values uniquely."""

    def __init__(self):
        self.lines: list = []
        self.line_ops: list = []  # the graph op each line was emitted for
        self.names: dict = {}  # Value.id -> SSA name
        self.op = None
        self._n = 0
        self.prologue: list = []  # index values of sizes, at the top of the function
        self.sources: dict = {}  # dynamic dim name -> (SSA of an input, its type, axis, k)
        self._sizes: dict = {}  # int or Sym -> SSA index value
        self.wide: dict = {}  # dtype -> the dtype it is held in (``to_mlir``'s boundary)
        self.fence_reductions = False  # Note [fenced reductions] in reduction.py
        self.fenced_operands: set = set()  # Note [data tiling] in runtime/compiler.py
        self.known: dict = {}  # value id -> the number its every entry is (``splats``)

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

    def fail(self, reason: str, d=None) -> NoReturn:
        op = self.op
        what = op.prim.name + (f" on {d.name}" if d is not None else "")
        where = f" at {op.loc}" if op.loc else ""
        raise LoweringError(f"{what}{where}: {reason}")

    def need(self, table: dict, d, what=None):
        """``table[d.dclass]``, or a LoweringError with the reason ``TABLE`` gives (the
        primitive's domain, a gap of ``d`` itself, or of its class)."""
        name, c = what or self.op.prim.name, d.dclass
        reason = TABLE.reason(name, d)
        if reason or c not in table:
            self.fail(f"no MLIR lowering: {reason or f'not defined for {c} tensors'}", d)
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
                raise LoweringError(
                    f"dynamic dim {s.name!r} is not a dimension of any "
                    "argument, so its size cannot be read at run time"
                )
            x, ty, axis, k = self.sources[s.name]
            base = self._sizes.get(Sym(s.name))
            if base is None:
                base = self.fresh("n")
                self.prologue.append(f"{base} = tensor.dim {x}, {self.index(axis)} : {ty}")
                if k != 1:  # the input holds k * n
                    whole, base = base, self.fresh("n")
                    self.prologue.append(f"{base} = arith.divui {whole}, {self.index(k)} : index")
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
        """``[offsets][sizes][strides]`` of tensor.extract_slice/insert_slice; an empty
        window starts at 0 (MLIR rejects an offset at the dim's end, as ``x[1:]`` of a
        size-1 dim has), and a window one wide steps by 1 (the same window: IREE 3.13's
        copy dispatch of a unit slice stepping by more than 1 failed to compile)."""
        offsets = [0 if s == 0 else o for o, s in zip(offsets, sizes)]
        strides = [1 if isinstance(s, int) and s == 1 else st for s, st in zip(sizes, strides)]
        return "".join(f"[{self.mixed(v)}]" for v in (offsets, sizes, strides))

    # scalars
    def select(self, c: str, a: str, b: str, d) -> str:
        """``c ? a : b`` on scalars of dtype ``d``; complex values part by part (SPIR-V
        cannot select a complex value)."""
        t = _ELEM[d]
        if not d.is_complex:
            return self.emit(f"arith.select {c}, {a}, {b} : {t}")
        pt = _ELEM[d.to_real()]
        re_, im_ = (
            self.emit(
                f"arith.select {c}, {self.emit(f'complex.{p} {a} : {t}')}, "
                f"{self.emit(f'complex.{p} {b} : {t}')} : {pt}"
            )
            for p in ("re", "im")
        )
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
            lits = ", ".join(
                f"{_scalar_literal(v, part)} : {_ELEM[part]}"
                for v in (np.real(value), np.imag(value))
            )
            return self.emit(f"complex.constant [{lits}] : {_ELEM[d]}")
        return self.emit(f"arith.constant {_scalar_literal(value, d)} : {_ELEM[d]}")

    # tensors
    def dense(self, array: np.ndarray, aval) -> str:
        t = tensor_type(aval.shape, aval.dtype)
        if array.size == 0:
            return self.emit(f"tensor.empty() : {t}")
        a = np.ascontiguousarray(array, dtype=aval.dtype.np)
        flat = a.reshape(-1)
        if aval.dtype == dt.complex128:
            # IREE 3.13 crashes packing complex<f64> constants, and splats them as i128,
            # which its stream dialect refuses: the parts' constant, bitcast
            pairs = type(aval)((*aval.shape, 2), dt.float64)
            parts = self.dense(np.stack([a.real, a.imag], -1), pairs)
            return self.emit(
                f"flow.tensor.bitcast {parts} : {tensor_type(pairs.shape, pairs.dtype)} -> {t}"
            )
        splat = (flat == flat[0]).all() or (flat != flat).all()
        if aval.dtype.is_complex and splat:
            # IREE 3.13 folds a complex splat constant into a scalar ``arith.constant``
            # it cannot build ("failed to satisfy constraint: TypedAttr"): a fill instead
            return self.full(aval.shape, aval.dtype, complex(flat[0]))
        if splat:
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
        attrs = (
            f"{{indexing_maps = [{', '.join(affine_map(rank, m) for m in maps)}], "
            f"iterator_types = [{', '.join(f'{chr(34)}{i}{chr(34)}' for i in iterators)}]}}"
        )
        ins_s = (
            f"ins({', '.join(s for s, _ in ins)} : "
            f"{', '.join(tensor_type(a.shape, a.dtype) for _, a in ins)}) "
            if ins
            else ""
        )
        out_types = [tensor_type(a.shape, a.dtype) for _, a in outs]
        r = self.fresh()
        head = (
            f"{r}{f':{len(outs)}' if len(outs) > 1 else ''} = linalg.generic {attrs} "
            f"{ins_s}outs({', '.join(s for s, _ in outs)} : {', '.join(out_types)}) {{"
        )
        self.raw(head)
        self.raw(
            "^bb0("
            + ", ".join(f"{n}: {_ELEM[a.dtype]}" for n, (_, a) in zip(args, ins + outs))
            + "):"
        )
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
        return self.generic(
            list(zip(xs, in_avals)),
            [(self.empty(out_aval.shape, out_aval.dtype), out_aval)],
            [ident] * (len(xs) + 1),
            ["parallel"] * rank,
            lambda *a: body(*a[: len(xs)]),
        )

    def reshape(self, x: str, src, dst, d) -> str:
        """Reshape with collapse_shape/expand_shape (sizes may be dynamic: at most one
        ``Sym`` per group)."""
        src, dst = tuple(src), tuple(dst)
        if src == dst:
            return x
        if 0 < len(src) < len(dst) and all(s == 1 for s in src + dst):
            # one element to more unit dims: IREE 3.13 turns an expand_shape of a slice
            # into an invalid extract_slice when the result is returned and used again
            # ("expected rank to be smaller or equal"; fuzz, session 10); tensor.reshape
            # to a constant shape compiles (not from rank 0: SPIR-V cannot legalize the
            # memref.reshape of a 0-d workgroup value it becomes)
            shape = f"tensor<{len(dst)}xindex>"
            ones = self.emit(f"arith.constant dense<1> : {shape}")
            return self.emit(
                f"tensor.reshape {x}({ones}) : ({tensor_type(src, d)}, {shape}) -> "
                f"{tensor_type(dst, d)}"
            )
        mid, gs, gd = _reassociation(src, dst)
        if mid != src:
            x = self.emit(
                f"tensor.collapse_shape {x} {_groups(gs)} : {tensor_type(src, d)} "
                f"into {tensor_type(mid, d)}"
            )
        if mid != dst:
            x = self.emit(
                f"tensor.expand_shape {x} {_groups(gd)} output_shape "
                f"[{self.mixed(dst)}] : {tensor_type(mid, d)} "
                f"into {tensor_type(dst, d)}"
            )
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
