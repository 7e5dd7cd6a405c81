"""Graph -> ONNX ModelProto with standard ``ai.onnx`` ops only.

Each primitive has one lowering in ``LOWERINGS`` (keyed by the ``Primitive``): a function
``fn(b, op, *names) -> name`` that gets the ``Builder``, the graph ``Op`` and the ONNX
names of its operands and returns the name of its result. Every node carries the user's
``file:line`` in its doc string. A dimension may be a ``Sym`` (``k`` times a named dynamic
dimension, e.g. the batch): shapes built with ``Builder.shape`` then read it at run time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ... import dtypes as dt
from ...autodiff.avals import Sym
from ..mlir.invariants import splats
from ..table import LoweringError, Table

TABLE = Table("ONNX")  # Primitive -> fn(builder, op, *names) -> name
LOWERINGS = TABLE.lowerings
lowering, unsupported = TABLE.lowering, TABLE.unsupported
OPSETS = range(18, 27)  # the ai.onnx opsets accepted (onnxruntime 1.31 runs up to 26)
DEFAULT_OPSET = 21
EXTERNAL_MIN_BYTES = 1024  # tensors this large go to external data when a model must
NO_COMPLEX = "onnxruntime has no complex tensors (and ONNX's operators take none but a few)"


class ExportError(LoweringError, ValueError):
    """The graph cannot be written as ONNX (checked before any file is written)."""


# --- types and kernels ------------------------------------------------------------------
def onnx_type(d) -> int:
    if d is dt.bfloat16:
        return TensorProto.BFLOAT16
    return helper.np_dtype_to_tensor_dtype(d.np)


_F = ("float32", "float64")
_I = ("int32", "int64")
_SMALL = ("uint8", "int8")
# Element types onnxruntime 1.31's CPU kernels accept, per ONNX op (probed); ops missing
# here take every type. Other types run on a carrier type (Builder.kernel). Few ops have
# float16 kernels: onnxruntime runs the others in float32 between Casts it inserts, and
# then drops the graph's own Cast pairs float32 -> float16 -> float32 around them, so a
# float16 result was never rounded ((x.half() * 1000).float() gave 50000 for 50; torch,
# 49984); a float32 carrier's Casts are the graph's own and stay.
KERNELS = {
    **dict.fromkeys(
        (
            "Add",
            "Sub",
            "Mul",
            "Div",
            "Less",
            "LessOrEqual",
            "Greater",
            "GreaterOrEqual",
            "Abs",
        ),
        _F + _I + _SMALL + ("int16",),
    ),
    "Sign": ("float16",) + _F + _I + _SMALL + ("int16",),
    "Neg": _F + _I + ("int8", "int16"),
    **dict.fromkeys(("Max", "Min"), ("float16",) + _F + _I + _SMALL),
    **dict.fromkeys(("ArgMax", "ArgMin", "Where"), _F + _I + _SMALL),
    **dict.fromkeys(("ReduceMax", "ReduceMin"), _F + _I + _SMALL + ("bool",)),
    **dict.fromkeys(("Pow", "MatMul", "ReduceSum"), _F + _I),
    "Relu": _F + ("int8", "int32"),
    **dict.fromkeys(("CumSum", "TopK"), _F + _I),
    **dict.fromkeys(
        (
            "Exp",
            "Log",
            "Sqrt",
            "Tanh",
            "Sin",
            "Cos",
            "Sigmoid",
            "Reciprocal",
            "Floor",
            "Ceil",
        ),
        _F,
    ),
    **dict.fromkeys(("IsNaN", "IsInf", "Round"), ("float16",) + _F),
    **dict.fromkeys(("Tan", "Sinh", "Cosh", "Asin", "Acos", "Atan", "Erf"), ("float32",)),
    **dict.fromkeys(("Not", "And", "Or", "Xor"), ("bool",)),
    # ScatterElements by its reduction (carrier("ScatterElements add", d))
    **dict.fromkeys(
        ("ScatterElements add", "ScatterElements mul"), _F + _I + _SMALL + ("int16", "bool")
    ),
    **dict.fromkeys(
        ("ScatterElements max", "ScatterElements min"), ("float16",) + _F + _I + _SMALL + ("int16",)
    ),
}


def carrier(op_type: str, d):
    """The dtype ``op_type`` computes ``d`` in: ``d`` itself when a kernel exists, else the
    narrowest supported type that holds every value of ``d``."""
    ok = KERNELS.get(op_type)
    if ok is None or d.name in ok:
        return d
    for c in (
        (dt.float32, dt.float64)
        if d.is_floating_point
        else (dt.int32, dt.int64, dt.float32, dt.float64)
    ):
        if c.name in ok:
            return c
    raise ExportError(f"no onnxruntime kernel for {op_type} on {d.name}")


# --- the builder ------------------------------------------------------------------------
class Builder:
    """Accumulates nodes, initializers and value types of one ONNX graph."""

    def __init__(self, sources: dict):
        self.nodes: list = []
        self.consts: list = []  # [(name, np.ndarray)]
        self.names: dict = {}  # Value.id -> ONNX name
        self.sources = sources  # dynamic dim name -> (input name, axis)
        self.op = None
        self.known: dict = {}  # value id -> the number its every entry is (``splats``)
        self._taken: set = set()
        self._cache: dict = {}

    def fresh(self, hint: str) -> str:
        name, k = hint, 0
        while name in self._taken:
            k += 1
            name = f"{hint}_{k}"
        self._taken.add(name)
        return name

    def node(self, op_type: str, inputs, n_out: int = 1, **attrs):
        """Append a node; returns its output name (a list when ``n_out`` > 1)."""
        prefix = self.op.prim.name if self.op is not None else op_type.lower()
        outs = [self.fresh(f"{prefix}_{len(self.nodes)}") for _ in range(n_out)]
        doc = f"{self.op.prim.name} at {self.op.loc}" if self.op is not None and self.op.loc else ""
        self.nodes.append(
            helper.make_node(op_type, list(inputs), outs, name=outs[0], doc_string=doc, **attrs)
        )
        return outs[0] if n_out == 1 else outs

    def const(self, array, d=None) -> str:
        """An initializer holding ``array`` (as dtype ``d`` when given); small ones are shared."""
        a = np.asarray(array, dtype=None if d is None else d.np)
        key = (a.dtype.str, a.shape, a.tobytes()) if a.size <= 16 else None
        if key is not None and key in self._cache:
            return self._cache[key]
        name = self.fresh(f"const_{len(self.consts)}")
        self.consts.append((name, a))
        if key is not None:
            self._cache[key] = name
        return name

    def cast(self, x: str, src, dst) -> str:
        return x if src is dst else self.node("Cast", [x], to=onnx_type(dst))

    def kernel(self, op_type: str, xs, d, *, out=None, pre=(), post=(), **attrs) -> str:
        """``op_type`` on operands ``xs`` of dtype ``d`` (``pre``/``post``: operands of
        other types, placed before/after), run on a carrier type where onnxruntime has no
        kernel for ``d``; the result is cast back to ``d``, or has dtype ``out`` when given."""
        c = carrier(op_type, d)
        r = self.node(op_type, [*pre, *(self.cast(x, d, c) for x in xs), *post], **attrs)
        return r if out is not None else self.cast(r, c, d)

    def dim(self, s) -> str:
        """A 1-element int64 tensor holding dimension ``s`` (an int or a ``Sym``)."""
        if not isinstance(s, Sym):
            return self.const(np.array([s], np.int64))
        key = ("dim", s)
        if key not in self._cache:
            src, axis = self.sources[s.name]
            base = self._cache.get(("dim", Sym(s.name)))
            if base is None:
                base = self._cache[("dim", Sym(s.name))] = self.node(
                    "Shape", [src], start=axis, end=axis + 1
                )
            self._cache[key] = (
                base
                if s.k == 1
                else self.node("Mul", [base, self.const(np.array([s.k], np.int64))])
            )
        return self._cache[key]

    def shape(self, dims) -> str:
        """A 1-D int64 tensor holding ``dims``; dynamic ones are read from the inputs."""
        dims = tuple(dims)
        if not any(isinstance(s, Sym) for s in dims):
            return self.const(np.array(dims, np.int64).reshape(len(dims)))
        parts: list[Any] = []
        run: list[Any] = []
        for s in dims:
            if isinstance(s, Sym):
                if run:
                    parts.append(self.const(np.array(run, np.int64)))
                    run = []
                parts.append(self.dim(s))
            else:
                run.append(s)
        if run:
            parts.append(self.const(np.array(run, np.int64)))
        return self.node("Concat", parts, axis=0)

    def scalar(self, s, d) -> str:
        """A 0-d tensor of dtype ``d`` holding ``s`` (an int or a ``Sym``)."""
        if not isinstance(s, Sym):
            return self.const(np.array(s, d.np))
        return self.node(
            "Reshape", [self.cast(self.dim(s), dt.int64, d), self.const(np.zeros(0, np.int64))]
        )


def value_info(name: str, aval):
    dims = [str(s) if isinstance(s, Sym) else int(s) for s in aval.shape]
    return helper.make_tensor_value_info(name, onnx_type(aval.dtype), dims)


# --- the graph --------------------------------------------------------------------------
def check_opset(opset) -> int:
    if not isinstance(opset, int) or opset not in OPSETS:
        raise ExportError(
            f"opset {opset!r} is not supported: choose an ai.onnx opset from "
            f"{OPSETS.start} to {OPSETS.stop - 1} (default {DEFAULT_OPSET})"
        )
    return opset


def missing_lowerings(graph) -> list:
    """``"prim (dtype) at file:line: reason"`` for every op that has no ONNX lowering."""
    out = []
    for op in graph.ops:
        avals = [v.aval for v in (*op.inputs, op.out)]
        d = next((a.dtype for a in avals if TABLE.reason(op.prim.name, a.dtype)), avals[0].dtype)
        reason = TABLE.reason(op.prim.name, d)
        if any(a.dtype.is_complex for a in avals):
            reason = NO_COMPLEX
        if op.prim not in LOWERINGS and reason is None:
            reason = "no ONNX lowering"
        if reason is not None:
            where = f" at {op.loc}" if op.loc else ""
            out.append(f"{op.prim.name} ({d.name}){where}: {reason}")
    return out


def check_names(names) -> None:
    seen, dup = set(), []
    for n in names:
        if n in seen and n not in dup:
            dup.append(n)
        seen.add(n)
    if dup:
        raise ExportError(f"duplicate ONNX input/output names: {', '.join(map(repr, dup))}")


def check_graph(graph, opset, input_names, output_names) -> None:
    """Everything that would make ``to_onnx`` fail, raised before any work is done."""
    check_opset(opset)
    missing = missing_lowerings(graph)
    if missing:
        raise ExportError("these ops have no ONNX lowering:\n  " + "\n  ".join(missing))
    check_names(list(input_names) + list(output_names))


def to_onnx(
    graph,
    *,
    opset: int = DEFAULT_OPSET,
    input_names=None,
    output_names=None,
    sources=None,
    batch_consts=None,
    external=None,
    name="staged",
    doc="",
    output_docs=None,
):
    """The ONNX model of ``graph``.

    ``input_names``/``output_names`` name the graph's inputs and outputs (default: the
    graph's own names); ``sources`` maps each dynamic dim name used in a ``Sym`` to the
    (input name, axis) it is read from; ``batch_consts`` maps a constant's ``Value.id`` to
    the ``SymConst`` that computes it from the run-time sizes (``Graph.sym_consts``).
    With ``external`` (a file name), constants of at least ``EXTERNAL_MIN_BYTES`` are
    referenced as external data in that file; returns ``(model, [(offset, array)])``
    then, the bytes for the caller to write; otherwise the model alone.
    """
    input_names = list(input_names or [i.name for i in graph.inputs])
    output_names = list(output_names or [o.name for o in graph.outputs])
    check_graph(graph, opset, input_names, output_names)
    b = Builder(sources or {})
    b._taken.update(input_names + output_names)
    for inp, n in zip(graph.inputs, input_names):
        b.names[inp.value.id] = n
    named_by_output = {}
    for o, n in zip(graph.outputs, output_names):
        if o.value.id not in named_by_output and any(op.out is o.value for op in graph.ops):
            named_by_output[o.value.id] = n
    batch_consts = batch_consts or getattr(graph, "sym_consts", {})
    for v, array in graph.consts:
        spec = batch_consts.get(v.id)
        if spec is None:
            b.names[v.id] = b.const(array)
        elif spec.kind == "fill":
            b.names[v.id] = b.node(
                "Expand", [b.const(np.array(spec.scale, v.aval.dtype.np)), b.shape(v.aval.shape)]
            )
        else:
            d = v.aval.dtype
            dim = num = b.scalar(spec.sym, d)
            if spec.offset:
                dim = b.node("Add", [dim, b.const(np.array(spec.offset, d.np))])
            if spec.offset < 0 and spec.kind != "ratio":  # a count: max(n + offset, 0)
                dim = b.node("Max", [dim, b.const(np.array(0, d.np))])
            k = b.const(np.array(spec.scale, d.np))
            if spec.kind == "ratio":  # scale * n / (n + offset)
                k = b.node("Mul", [k, num])
            r = b.node("Div" if spec.kind in ("div", "ratio") else "Mul", [k, dim])
            b.names[v.id] = b.node("Reshape", [r, b.shape(v.aval.shape)]) if v.aval.shape else r
    infos = []
    b.known = splats(graph)
    for op in graph.ops:
        b.op = op
        r = LOWERINGS[op.prim](b, op, *(b.names[v.id] for v in op.inputs))
        final = named_by_output.get(op.out.id)
        if final is not None:
            r = _rename(b, r, final)
        else:
            infos.append(value_info(r, op.out.aval))
        b.names[op.out.id] = r
    b.op = None
    outputs = []
    for o, n in zip(graph.outputs, output_names):
        if b.names[o.value.id] != n:
            b.nodes.append(helper.make_node("Identity", [b.names[o.value.id]], [n], name=n))
        vi = value_info(n, o.value.aval)
        if output_docs and n in output_docs:
            vi.doc_string = output_docs[n]
        outputs.append(vi)
    inputs = [value_info(n, i.value.aval) for i, n in zip(graph.inputs, input_names)]
    inits, blobs = _initializers(b.consts, external)
    g = helper.make_graph(
        b.nodes, name, inputs, outputs, initializer=inits, doc_string=doc, value_info=infos
    )
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(
        g, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets)
    )
    return (model, blobs) if external is not None else model


def _rename(b: Builder, r: str, final: str) -> str:
    """Make the last node's output ``r`` be called ``final`` (or add an Identity). Nodes
    come in order, so no node reads ``r`` yet where the last one makes it: only values of
    the graph may (the scan of every node's inputs made a 600-output graph's export 13 s)."""
    last = b.nodes[-1] if b.nodes else None  # none yet: ``r`` is an input or a constant
    if last is not None and r in last.output and r not in b.names.values():
        last.output[list(last.output).index(r)] = final
        return final
    b.nodes.append(helper.make_node("Identity", [r], [final], name=final))
    return final


def _initializers(consts, external):
    inits, blobs, offset = [], [], 0
    for name, a in consts:
        if external is None or a.nbytes < EXTERNAL_MIN_BYTES:
            inits.append(numpy_helper.from_array(a, name))
            continue
        t = TensorProto(name=name, dims=a.shape, data_type=onnx_type(dt.from_numpy_dtype(a.dtype)))
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", external), ("offset", str(offset)), ("length", str(a.nbytes))):
            t.external_data.add(key=k, value=v)
        blobs.append((offset, a))
        offset += -(-a.nbytes // 4096) * 4096  # page-aligned, so readers may mmap
        inits.append(t)
    return inits, blobs
