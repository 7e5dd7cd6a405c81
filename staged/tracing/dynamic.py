"""Dynamic dimensions: which shapes and constants of a captured graph follow a dimension
of its inputs (the batch), found by tracing again at another size and comparing.

A captured graph has static shapes. ``generalize`` re-traces with one dimension changed
(through a caller-supplied ``retrace(size) -> Graph``) and compares the two graphs op for
op: a shape entry or a shape parameter (reshape/expand targets, slice bounds, concat
sizes) that changes becomes a ``Sym`` (``k`` times the named dimension), and a constant
that changes becomes a ``SymConst``: computed from the run-time size (a mean's ``1/N``, a
variance's ``1/(N-1)``, a ``zeros(N, H)``). ``substitute`` then writes the result into a
copy of the graph (avals, params and ``Graph.sym_consts``), which the MLIR and ONNX
lowerings turn into ``?`` dims / ``Shape`` ops read at run time.

What cannot be made dynamic raises ``DynamicError`` naming the op and line that depends on
the size: a graph whose ops change with it (a Python branch on ``x.shape[0]``), a size that
is not a multiple of it (``x[:-1]``), a constant that changes in another way. Only the two
(or three) traced sizes are compared: code that branches on the size where neither traced
size would see it is not detected.

Shared by ``staged.compile(dynamic=True)`` (``staged/runtime``) and ``staged.onnx.export``
(``dynamic_axes``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

import numpy as np

from ..autodiff.avals import DynamicError, Sym
from ..eager.tensor import Tensor
from .ir import Graph, Input, Op, Output, Value


class SymConst(NamedTuple):
    """A constant computed at run time from a dynamic size ``n`` (the value of ``sym``):
    ``"mul"``: ``scale * m``; ``"div"``: ``scale / m`` (one-element constants), where
    ``m = n + offset`` is a count and so never negative: ``max(n + offset, 0)``, as
    PyTorch's var and std divide by ``max(0, N - correction)``; ``"ratio"``:
    ``scale * n / (n + offset)`` (BatchNorm's running variance takes ``N / (N - 1)``);
    ``"fill"``: every element is ``scale``, in the const's aval shape (which holds
    ``Sym``s)."""

    kind: str
    scale: float
    sym: Sym | None = None
    offset: float = 0.0

    def __str__(self) -> str:
        if self.kind == "fill":
            return f"fill {self.scale!r}"
        if self.kind == "ratio":
            return f"{self.scale:g}*{self.sym}/({self.sym}{self.offset:+g})"
        n = (
            f"max({self.sym}{self.offset:+g},0)"
            if self.offset < 0
            else f"({self.sym}{self.offset:+g})"
            if self.offset
            else str(self.sym)
        )
        return f"{self.scale:g}{'*' if self.kind == 'mul' else '/'}{n}"


def is_static(shape) -> bool:
    return not any(isinstance(s, Sym) for s in shape)


def resize(x, sizes: dict):
    """``x`` with the axes in ``sizes`` (``{axis: size}``) resized by repeating its entries
    cyclically (same dtype and requires_grad; an accumulated ``.grad`` is resized too)."""
    if not sizes:
        return x
    a = x.detach().numpy()
    for ax, n in sizes.items():
        if a.shape[ax] == 0:
            raise DynamicError(
                f"cannot trace at another size from an empty dimension "
                f"(axis {ax} has size 0): call it first with a non-empty one"
            )
        a = np.take(a, np.arange(n) % a.shape[ax], axis=ax)
    out = Tensor._wrap(np.ascontiguousarray(a), x.requires_grad)
    if x.requires_grad and x._grad is not None:
        out._grad = resize(x._grad, sizes)
    return out


def generalize(g0, n0: int, retrace, dim: str = "batch", subst=None, consts=None):
    """Find what of ``g0`` (traced with dimension ``dim`` of size ``n0``) follows ``dim``:
    ``retrace(n)`` must return the same computation traced with ``dim`` of size ``n``
    (called for ``n0 + 1``, and for ``2 * n0 + 3`` when a constant needs a third point).
    Records into ``subst`` (``("aval", value id)`` or ``("param", id(op), name)`` -> shape
    with ``Sym``s) and ``consts`` (const value id -> ``SymConst``), both returned, for
    ``substitute``. Several dims may be generalized in turn into the same dicts."""
    subst = {} if subst is None else subst
    consts = {} if consts is None else consts
    n1 = n0 + 1  # consecutive sizes: a parity or ``== n0`` branch shows up too
    g1 = retrace(n1)
    _same_structure(g0, g1, dim, n0, n1)
    for (v0, op), (v1, _) in zip(_values(g0), _values(g1)):
        if v0.aval.shape != v1.aval.shape:
            where = _where(op, f"value %{v0.id}")
            subst[("aval", v0.id)] = _gen(
                subst.get(("aval", v0.id), v0.aval.shape), v1.aval.shape, dim, n0, n1, where
            )
    for op0, op1 in zip(g0.ops, g1.ops):
        for k, p in op0.params.items():
            if p != op1.params[k]:
                if not isinstance(p, tuple):
                    raise DynamicError(
                        f"{_where(op0)}: parameter {k}={p!r} depends on the "
                        f"size of {dim!r} ({p!r} at {n0}, {op1.params[k]!r} "
                        f"at {n1})"
                    )
                key = ("param", id(op0), k)
                subst[key] = _gen(subst.get(key, p), op1.params[k], dim, n0, n1, _where(op0))
    changed = [
        (v0, a0, a1)
        for (v0, a0), (_, a1) in zip(g0.consts, g1.consts)
        if a0.shape != a1.shape or not np.array_equal(a0, a1, equal_nan=True)
    ]
    third = []
    for v0, a0, a1 in changed:
        if v0.id in consts:
            raise DynamicError(
                f"a constant ({a0.dtype}{list(a0.shape)}) depends on two "
                f"dynamic dims ({consts[v0.id].sym or 'a fill'} and {dim!r})"
            )
        if a0.shape != a1.shape:
            consts[v0.id] = _fill(v0, a0, a1, dim, n0, n1, subst)
            continue
        spec = _one_point(a0, a1, n0, n1, dim)
        if spec is None:
            third.append((v0, a0, a1))
        else:
            consts[v0.id] = spec
    if third:  # affine forms (a variance's N - 1) have two unknowns: a third size checks
        n2 = 2 * n0 + 3
        g2 = retrace(n2)
        _same_structure(g0, g2, dim, n0, n2)
        a2s = {v.id: a for v, a in g2.consts}
        for v0, a0, a1 in third:
            consts[v0.id] = _affine(a0, a1, a2s[v0.id], n0, n1, n2, dim)
    return subst, consts


def substitute(g, subst, consts=None) -> Graph:
    """A copy of ``g`` whose avals and shape parameters hold the generalized shapes and
    whose ``sym_consts`` hold the constants computed at run time."""
    if not subst and not consts:
        return g
    return _rebuild(
        g,
        lambda v: subst.get(("aval", v.id), v.aval.shape),
        lambda op, k, p: subst.get(("param", id(op), k), p),
        g.consts,
        {**g.sym_consts, **(consts or {})},
    )


def specialize(g, sizes: dict) -> Graph:
    """A static copy of the generalized graph ``g`` with its dynamic dims at ``sizes``
    (``{"batch": 32}``, every dim ``g`` uses): the shapes and shape parameters it has
    there, and its ``sym_consts`` computed as constants (in float64, then rounded to the
    constant's dtype)."""
    consts = [
        (v, np.asarray(_const_value(g, v, a, sizes)).astype(v.aval.dtype.np))
        if v.id in g.sym_consts
        else (v, a)
        for v, a in g.consts
    ]
    return _rebuild(
        g,
        lambda v: _at(tuple(v.aval.shape), sizes),
        lambda op, k, p: _at(p, sizes) if _has_sym(p) else p,  # a tuple of other kind stays
        consts,
        {},
    )


def _rebuild(g, shape_of, param_of, consts, sym_consts) -> Graph:
    """A copy of ``g`` with each value's shape ``shape_of(value)``, each op parameter
    ``param_of(op, name, value)``, the constants ``consts`` and ``sym_consts``."""
    new = {}

    def val(v):
        if v.id not in new:
            shape = shape_of(v)
            new[v.id] = v if shape == v.aval.shape else Value(v.id, v.aval._replace(shape=shape))
        return new[v.id]

    out = Graph(consts=[(val(v), a) for v, a in consts], _next=g._next, sym_consts=sym_consts)
    out.inputs = [Input(val(i.value), i.kind, i.name) for i in g.inputs]
    for op in g.ops:
        params = {k: param_of(op, k, p) for k, p in op.params.items()}
        out.ops.append(
            Op(
                op.prim,
                tuple(val(v) for v in op.inputs),
                params,
                val(op.out),
                op.loc,
                op.phase,
                op.hook,
                op.ranges,
            )
        )
    out.outputs = [Output(val(o.value), o.kind, o.name) for o in g.outputs]
    return out


def dynamic_dims(graph) -> set:
    """The names of the dynamic dims used in ``graph``'s avals."""
    names: set[str] = set()
    for v in (
        [i.value for i in graph.inputs]
        + [op.out for op in graph.ops]
        + [v for v, _ in graph.consts]
    ):
        names.update(s.name for s in v.aval.shape if isinstance(s, Sym))
    return names


def mismatch(general, g, sizes: dict) -> str | None:
    """Why ``g``, traced with the dynamic dims of the generalized graph ``general`` of
    ``sizes`` (``{"batch": 1}``), does not compute what ``general`` computes at those
    sizes; None where it does. Op for op, with the same operands, shapes, shape
    parameters and constant values (a trace may make one constant or one per use of a
    Python number), except that ``general`` may have an expand, reshape or slice that is
    the identity there, or a reduction over dims of size 1, which eager code skips or
    makes a reshape (an expand to ``(1, C)`` at batch size 1)."""
    where = ", ".join(f"{d} {n}" for d, n in sizes.items())
    counts = [(len(x.inputs), len(x.outputs)) for x in (general, g)]
    if counts[0] != counts[1]:
        return f"the inputs and outputs differ in number ({counts[1]} at {where})"
    ids = {}  # general's value ids -> g's
    for i0, i1 in zip(general.inputs, g.inputs):
        if i0.kind != i1.kind or _at(tuple(i0.value.aval.shape), sizes) != i1.value.aval.shape:
            return f"input {i1.name} is {i1.value.aval}"
        ids[i0.value.id] = i1.value.id
    consts0 = {v.id: _const_value(general, v, a, sizes) for v, a in general.consts}
    consts1 = {v.id: a for v, a in g.consts}
    why: list[str] = []  # the first constant that differs

    def same(v0, v1) -> bool:
        if v0.id not in consts0:
            return ids.get(v0.id) == v1.id
        a0, a1 = consts0[v0.id], consts1.get(v1.id)
        if a1 is not None and _same_const(a0, a1):
            return True
        if a1 is not None and not why:
            shown = f": {a1} where the graph has {a0}" if np.size(a1) == np.size(a0) == 1 else ""
            why.append(f"a constant ({np.asarray(a1).dtype}{list(np.shape(a1))}) differs{shown}")
        return False

    ops = iter(g.ops)
    op1 = next(ops, None)
    for op0 in general.ops:
        shape = _at(tuple(op0.out.aval.shape), sizes)
        if (
            op1 is not None
            and op1.prim is op0.prim
            and len(op1.inputs) == len(op0.inputs)
            and all(map(same, op0.inputs, op1.inputs))
            and op1.out.aval.shape == shape
            and _same_params(op0, op1, sizes)
        ):
            ids[op0.out.id] = op1.out.id
            op1 = next(ops, None)
        elif _moves_nothing(op0, sizes) and op0.inputs[0].aval.dtype == op0.out.aval.dtype:
            x = op0.inputs[0]
            if (
                op1 is not None
                and op1.prim.name == "reshape"
                and same(x, op1.inputs[0])
                and op1.out.aval.shape == shape
            ):  # eager code reshapes where the reduction is over size-1 dims only
                ids[op0.out.id] = op1.out.id
                op1 = next(ops, None)
            elif _at(tuple(x.aval.shape), sizes) == shape:
                if x.id in consts0:
                    consts0[op0.out.id] = consts0[x.id]
                else:
                    ids[op0.out.id] = ids.get(x.id)
            else:
                return why[0] if why else f"{_where(op0)} is {_where(op1, 'missing')} at {where}"
        else:
            return (
                why[0]
                if why
                else f"{_where(op0)} is {_where(op1, 'missing')} at {where} (does the code "
                "branch on the size?)"
            )
    if op1 is not None:
        return f"{_where(op1)} at {where} has no counterpart"
    for o0, o1 in zip(general.outputs, g.outputs):
        if o0.kind != o1.kind or not same(o0.value, o1.value):
            return why[0] if why else f"output {o1.name} differs"
    return None


def _const_value(general, v, a, sizes: dict):
    """The value of ``general``'s constant ``v`` (``a``) at the dynamic dims' ``sizes``."""
    spec = general.sym_consts.get(v.id)
    if spec is None:
        return a
    at = _const_at(spec, v.aval, sizes)
    return at if spec.kind == "fill" else np.full(np.shape(a), at)


def _same_const(a0, a1) -> bool:
    """Whether two constants are equal; floats to what a constant fitted on rounded ones
    (``SymConst``) can be off by, which is more than they are."""
    if np.shape(a0) != np.shape(a1):
        return False
    kind = np.asarray(a1).dtype
    if kind.kind in "fc":
        return np.allclose(a0, a1, rtol=min(1e3 * np.finfo(kind).eps, 1e-3), atol=0, equal_nan=True)
    return np.array_equal(a0, a1)


def _same_params(op0, op1, sizes: dict) -> bool:
    """``op0``'s parameters at the dynamic dims' ``sizes`` are ``op1``'s; a reduction's
    dims may differ by dims of size 1 (eager code leaves them out: a batch of 1)."""
    p0 = {k: _at(p, sizes) for k, p in op0.params.items()}
    p1 = dict(op1.params)
    if op0.prim.name in _REDUCTIONS and "dims" in p0:
        a = op1.inputs[0].aval.shape
        p0["dims"], p1["dims"] = ({d for d in p["dims"] if a[d] != 1} for p in (p0, p1))
    return p0 == p1


def _moves_nothing(op, sizes: dict) -> bool:
    """Whether ``op``'s result at the dynamic dims' ``sizes`` is its operand's entries in
    order: an expand, reshape or slice to the same shape, a reduction over dims of size 1."""
    a = _at(tuple(op.inputs[0].aval.shape), sizes)
    if op.prim.name in ("expand", "reshape", "slice"):
        return a == _at(tuple(op.out.aval.shape), sizes)
    return op.prim.name in _REDUCTIONS and all(a[d] == 1 for d in op.params["dims"])


_REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod"}


def _at(s, sizes: dict):
    """A shape or shape parameter of a generalized graph at the dynamic dims' ``sizes``."""
    if isinstance(s, Sym):
        return s.k * sizes[s.name]
    if isinstance(s, tuple):
        return tuple(_at(x, sizes) for x in s)
    return s


def _has_sym(p) -> bool:
    return isinstance(p, Sym) or (isinstance(p, tuple) and any(map(_has_sym, p)))


def _const_at(spec: SymConst, aval, sizes: dict):
    """The value ``spec`` computes at the dynamic dims' ``sizes`` (as the lowerings do)."""
    if spec.kind == "fill":
        return np.full(_at(tuple(aval.shape), sizes), spec.scale)
    m = float(_at(spec.sym, sizes))
    with np.errstate(divide="ignore", invalid="ignore"):
        if spec.kind == "ratio":
            return np.float64(spec.scale) * m / np.float64(m + spec.offset)
        m = max(m + spec.offset, 0.0) if spec.offset < 0 else m + spec.offset
        return np.float64(spec.scale) * m if spec.kind == "mul" else spec.scale / np.float64(m)


# --- comparing two traces ---------------------------------------------------------------
def _where(op, default=""):
    if op is None:
        return default
    return op.prim.name + (f" at {op.loc}" if op.loc else "")


def _values(g):
    """(value, the op that makes it or None) for inputs and op results, in order."""
    yield from ((i.value, None) for i in g.inputs)
    yield from ((op.out, op) for op in g.ops)


def _same_structure(g0, g1, dim, n0, n1):
    counts = [(len(g.inputs), len(g.consts), len(g.ops), len(g.outputs)) for g in (g0, g1)]
    for k, (a, b) in enumerate(zip(g0.ops, g1.ops)):
        if a.prim is not b.prim:
            raise DynamicError(
                f"the traced graph changes structure with the size of {dim!r}: op {k} is "
                f"{_where(a)} at {dim} {n0} but {_where(b)} at {dim} {n1} (does the code "
                f"branch on the size?)"
            )
    if counts[0] != counts[1]:
        what = ("inputs", "constants", "ops", "outputs")
        diff = ", ".join(f"{w} {a} vs {b}" for w, a, b in zip(what, *counts) if a != b)
        common = min(len(g0.ops), len(g1.ops))
        upto = f", up to {_where(g0.ops[common - 1])}" if common else ""
        raise DynamicError(
            f"the traced graph changes structure with the size of {dim!r} "
            f"({dim} {n0} vs {n1}: {diff}; the first {common} ops agree"
            f"{upto})"
        )
    for i0, i1 in zip(g0.inputs, g1.inputs):
        if i0.kind != i1.kind or len(i0.value.aval.shape) != len(i1.value.aval.shape):
            raise DynamicError(
                f"the traced graph changes structure with the size of {dim!r}"
                f": input {i0.name} differs ({i0.value.aval} vs "
                f"{i1.value.aval})"
            )


def _gen(s0, s1, dim, n0, n1, where):
    """Shape ``s0`` (at size ``n0``; may already hold Syms of other dims) generalized
    against ``s1`` (at ``n1``): entries that change must be ``k * dim``."""
    if len(s0) != len(s1):
        raise DynamicError(
            f"{where}: the rank changes with the size of {dim!r} "
            f"({tuple(s0)} at {n0}, {tuple(s1)} at {n1})"
        )
    out = []
    for a, b in zip(s0, s1):
        if a == b or isinstance(a, Sym):
            out.append(a)
        elif (
            isinstance(a, (int, np.integer))
            and isinstance(b, (int, np.integer))
            and a % n0 == 0
            and b % n1 == 0
            and a // n0 == b // n1
            and a
        ):
            out.append(Sym(dim, int(a // n0)))
        else:
            raise DynamicError(
                f"{where}: a size goes from {a} to {b} when {dim!r} goes from "
                f"{n0} to {n1}; only multiples of it can be dynamic"
            )
    return tuple(out)


def _fill(v0, a0, a1, dim, n0, n1, subst):
    """A constant whose shape follows ``dim``: expressible when every element is equal."""
    flat0, flat1 = a0.reshape(-1), a1.reshape(-1)
    if a0.size and a1.size and (flat0 == flat0[0]).all() and (flat1 == flat0[0]).all():
        subst[("aval", v0.id)] = _gen(
            subst.get(("aval", v0.id), v0.aval.shape),
            a1.shape,
            dim,
            n0,
            n1,
            f"a constant {a0.dtype}{list(a0.shape)}",
        )
        return SymConst("fill", flat0[0].item())
    raise DynamicError(
        f"a constant's shape {a0.shape} depends on the size of {dim!r} "
        f"({a1.shape} at {n1}) and its values differ: create it from the "
        "inputs (e.g. x.new_zeros / zeros_like) or make it a fill"
    )


def _scalar(a):
    return a.size == 1 and a.dtype.kind == "f"


def _one_point(a0, a1, n0, n1, dim):
    """``k * dim`` or ``k / dim`` (a mean's scale), checked by the second size."""
    if not _scalar(a0):
        raise DynamicError(
            f"a constant ({a0.dtype}{list(a0.shape)}) changes with the size "
            f"of {dim!r} in a way that cannot be expressed"
        )
    c0, c1 = a0.item(), a1.item()
    if np.isclose(c0 * n0, c1 * n1, rtol=1e-6):
        return SymConst("div", c0 * n0, Sym(dim))
    if np.isclose(c0 / n0, c1 / n1, rtol=1e-6):
        return SymConst("mul", c0 / n0, Sym(dim))
    return None


def _affine(a0, a1, a2, n0, n1, n2, dim):
    """``s * (n + b)``, ``s / (n + b)`` (a variance's ``1/(N-1)``) or ``s * n / (n + b)``
    (BatchNorm's ``N/(N-1)``, with ``N`` a multiple of ``n``): fitted on two sizes,
    checked on the third. Each form is affine in some transform: ``c``, ``1/c`` in ``n``,
    ``1/c`` in ``1/n``."""
    c0, c1, c2 = a0.item(), a1.item(), a2.item()
    forms = (
        ("mul", lambda c: c, lambda n: n),
        ("div", lambda c: 1 / c, lambda n: n),
        ("ratio", lambda c: 1 / c, lambda n: 1 / n),
    )
    for kind, f, g in forms:
        try:
            (y0, y1, y2), (x0, x1, x2) = map(f, (c0, c1, c2)), map(g, (n0, n1, n2))
        except ZeroDivisionError:
            continue
        slope = (y1 - y0) / (x1 - x0)
        if slope == 0 or not np.isclose(slope * x2 + y0 - slope * x0, y2, rtol=1e-5):
            continue
        if kind == "ratio":  # 1/c = a + b/n: c = (1/a) * n / (n + b/a)
            a = y0 - slope * x0
            if a == 0:
                continue
            return SymConst(kind, 1 / a, Sym(dim), _simple(slope / a))
        offset = _simple(y0 / slope - x0)
        return SymConst(kind, slope if kind == "mul" else 1 / slope, Sym(dim), offset)
    raise DynamicError(
        f"a constant ({a0.dtype} {c0!r} at {dim} {n0}, {c1!r} at {n1}, {c2!r} "
        f"at {n2}) changes with the size of {dim!r} in a way that cannot be "
        "expressed (only k*n, k/n, k*(n+b), k/(n+b) and k*n/(n+b) can)"
    )


def _simple(x: float) -> float:
    """``x`` snapped to a nearby fraction with a small denominator (fits of float32
    constants are off in the last digits: -1 for -0.99999994, -1/16 for -0.0625003)."""
    q = Fraction(x).limit_denominator(1024)
    return float(q) if np.isclose(float(q), x, rtol=1e-4, atol=1e-9) else x
