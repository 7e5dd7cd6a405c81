"""Note [int64 held in int32]: the vulkan-spirv backend holds int64 in int32 (IREE demotes
i64 to i32: the baseline SPIR-V target has no Int64), so inside a step int64 arithmetic
wraps at 32 bits where eager and llvm-cpu give int64's answer. Rather than be silently
wrong, such a module checks each op whose int32 result can differ from the int64 one, with
the test of its class (the MLIR is written in i64 and tests the demoted i32 values):
add/sub/cumsum the sign bits of operands and result, mul ``arith.mulsi_extended``'s high
word against the low word's sign, neg/abs INT32_MIN, floor_divide INT32_MIN // -1, a left
shift that loses bits, a float cast out of int32's range, sum an exact two-word total
(whose low word is then the sum), prod a high word at each step (a zero factor clears
it). pow, matmul, scatter_add and scatter_reduce are not checked. Each check reduces to a key (``len - i`` for the i-th checked op,
0 where fine); the largest becomes one more entry of the step's index-check report
(Note [index checks]: its row holds one message per op), and where it is not 0 the state
outputs keep their old values. Everything here is emitted only where ``to_mlir`` is told
int64 is held in int32, so other backends' modules are unchanged."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ... import dtypes as dt
from ...autodiff.avals import Aval
from ...autodiff.blocked import levels
from .emitter import elem_type
from .indexing import fence, insert_slice
from .reduction import keep_dims

_I64 = dt.int64
_ELEMENTWISE = {"add", "sub", "mul", "neg", "abs", "bitwise_left_shift", "floor_divide", "cumsum"}
_REDUCTIONS = {"reduce_sum", "reduce_prod"}
_BITS = 32  # of the int32 int64 is held in


def checked_ops(graph) -> list:
    """The ops of ``graph`` to check: those whose int64 result can wrap, unless it reaches
    the outputs only through an index check's report (whose keys are computed from
    values within int32's range: ``eager/checks.py``)."""
    needed = {o.value.id for o in graph.outputs}
    for op in reversed(graph.ops):
        if op.out.id in needed and op.prim.name != "check":
            needed.update(v.id for v in op.inputs)
    made = {op.out.id: op for op in graph.ops}
    return [op for op in graph.ops if op.out.id in needed and _wraps(op, made)]


def _wraps(op, made: dict) -> bool:
    """Whether ``op``'s int64 result can wrap where int64 is held in int32: not a sum of
    too few values cast from a type of at most 16 bits (counting with ``(a == b).sum()``)."""
    if op.out.aval.dtype is not _I64:
        return False
    name = op.prim.name
    if name in _REDUCTIONS and 0 in [op.inputs[0].aval.shape[i] for i in op.params["dims"]]:
        return False  # over no entries: 0 or 1 (IREE crashed compiling its two-word check)
    cast = made.get(op.inputs[0].id)
    if name == "reduce_sum" and cast is not None and cast.prim.name == "cast":
        src, shape = cast.inputs[0].aval.dtype, op.inputs[0].aval.shape
        sizes = [shape[i] for i in op.params["dims"]]
        if src.np.kind in "biu" and src.itemsize <= 2 and all(isinstance(n, int) for n in sizes):
            top = 1 if src is dt.bool_ else max(-int(np.iinfo(src.np).min), np.iinfo(src.np).max)
            return math.prod(sizes) * top >= 2 ** (_BITS - 1)
    if name == "cast":
        src = op.inputs[0].aval.dtype
        return src.is_floating_point and not src.is_complex
    return name in _ELEMENTWISE or name in _REDUCTIONS


def overflow_row(graph) -> tuple | None:
    """The index-check row of ``graph``'s overflow checks, or None without any: one message
    per checked op, the key ``len - i`` of the i-th picking ``messages[-key]``."""
    ops = checked_ops(graph)
    if not ops:
        return None
    messages = [
        f"{op.prim.name}{' at ' + op.loc if op.loc else ''}: its int64 result left int32's "
        "range, and the vulkan-spirv backend holds int64 in int32 (its baseline SPIR-V "
        "target has no 64-bit integers), so it wrapped; keep int64 values within int32's "
        "range (int32 inputs), or use the llvm-cpu backend"
        for op in ops
    ]
    return ("OverflowError", messages, 0, 0)


class Overflows:
    """The keys of one module's checks, as ``to_mlir`` emits them."""

    def __init__(self, ops):
        self.ops = {id(op) for op in ops}
        self.keys: list = []  # 0-d int64 tensors

    def finish(self, e, graph, check) -> tuple:
        """Keep the state where a check failed; the ``check`` output with this module's
        report after it: (SSA name, aval)."""
        report = self.report(e)
        self.keep_state(e, graph, report)
        return self.merge(e, e.names[check.value.id], check.value.aval, report)

    def add(self, e, op, names: list, result: str) -> str | None:
        """Emit ``op``'s check (if it has one) of operands ``names`` and ``result``; a sum's
        result computed anew (``_total``), or None."""
        if id(op) not in self.ops:
            return None
        key = e.const(len(self.ops) - len(self.keys), _I64)
        name = op.prim.name
        if name in _REDUCTIONS:
            bad, result = _reduction(e, op, names[0], key)
            self.keys.append(bad)
            return result
        avals = [v.aval for v in op.inputs] + [op.out.aval]
        test = _TESTS[name]
        src = op.inputs[0].aval.dtype
        self.keys.append(_any(e, [*names, result], avals, lambda *xs: test(e, src, *xs), key))
        return None

    def report(self, e) -> str:
        """The largest key, as a (1,) int64 tensor; a barrier every 16 keys, as capture's
        maxima have, so no dispatch binds more buffers than Vulkan devices allow."""
        worst = None
        for i, k in enumerate(self.keys):
            if i and i % 16 == 0:
                worst = fence(e, worst, Aval((), _I64))
            worst = k if worst is None else _map(e, [worst, k], (), _max(e))
        return e.reshape(worst, (), (1,), _I64)

    def keep_state(self, e, graph, report: str) -> None:
        """Where the report is not 0, each state output is its old value."""
        ok = _map(
            e,
            [report],
            (1,),
            lambda k: e.emit(f"arith.cmpi eq, {k}, {e.const(0, _I64)} : i64"),
            dt.bool_,
        )
        ok = e.reshape(ok, (1,), (), dt.bool_)
        old = {i.name: i.value for i in graph.inputs if i.kind == "state"}
        for o in graph.outputs:
            if o.kind == "state" and o.name in old:
                a = o.value.aval
                e.names[o.value.id] = e.generic(
                    [
                        (ok, Aval((), dt.bool_)),
                        (e.names[o.value.id], a),
                        (e.names[old[o.name].id], a),
                    ],
                    [(e.empty(a.shape, a.dtype), a)],
                    [(), *[tuple(range(len(a.shape)))] * 3],
                    ["parallel"] * len(a.shape),
                    lambda c, n, p, _, d=a.dtype: e.select(c, n, p, d),
                )

    def merge(self, e, checks: str, aval, report: str) -> tuple:
        """The step's index-check report ``checks`` (aval ``aval``) with ``report`` after
        it: (SSA name, aval)."""
        (k,) = aval.shape
        both = Aval((k + 1,), _I64)
        r = insert_slice(e, checks, aval, e.empty(both.shape, _I64), both, (0,), (k,), (1,))
        one = Aval((1,), _I64)
        return insert_slice(e, report, one, r, both, (k,), (k + 1,), (1,)), both


def _max(e):
    return lambda a, b: e.emit(f"arith.maxsi {a}, {b} : i64")


def _map(e, xs, shape, body, d=_I64) -> str:
    """An elementwise generic of int64 operands of ``shape``, of results of dtype ``d``."""
    return e.map(xs, [Aval(shape, _I64)] * len(xs), Aval(shape, d), body)


def _any(e, xs, avals, bad, key) -> str:
    """0-d int64: ``key`` where ``bad(*entries)`` holds for some entry of ``xs``, else 0."""
    a = avals[-1]
    rank = len(a.shape)
    return e.generic(
        list(zip(xs, avals)),
        [(e.full((), _I64, 0), Aval((), _I64))],
        [tuple(range(rank))] * len(xs) + [()],
        ["reduction"] * rank,
        lambda *s: e.emit(f"arith.select {bad(*s[:-1])}, {key}, {s[-1]} : i64"),
    )


def _i(e, op, *xs) -> str:
    return e.emit(f"arith.{op} {', '.join(xs)} : i64")


def _neg(e, x) -> str:  # x < 0
    return e.emit(f"arith.cmpi slt, {x}, {e.const(0, _I64)} : i64")


def _add(e, _, a, b, r):  # both operands' signs differ from the result's
    return _neg(e, _i(e, "andi", _i(e, "xori", a, r), _i(e, "xori", b, r)))


def _sub(e, _, a, b, r):  # a = r + b
    return _neg(e, _i(e, "andi", _i(e, "xori", a, b), _i(e, "xori", a, r)))


def _cumsum(e, _, x, r):  # the previous total r - x plus x
    return _add(e, _, _i(e, "subi", r, x), x, r)


def _high(e, lo, hi) -> str:
    """The high word of a product is not the low word's sign: it needs more than 32 bits."""
    sign = _i(e, "shrsi", lo, e.const(_BITS - 1, _I64))
    return e.emit(f"arith.cmpi ne, {hi}, {sign} : i64")


def _mul(e, _, a, b, r):
    p = e.emit(f"arith.mulsi_extended {a}, {b} : i64", results=2)
    return _high(e, f"{p}#0", f"{p}#1")


def _negate(e, _, a, r):  # -INT32_MIN is INT32_MIN: both negative
    return _neg(e, _i(e, "andi", a, r))


def _abs(e, _, a, r):
    return _neg(e, r)


def _floor_divide(e, _, a, b, r):  # INT32_MIN // -1
    low = e.emit(f"arith.cmpi eq, {a}, {e.const(-(2 ** (_BITS - 1)), _I64)} : i64")
    return e.emit(
        f"arith.andi {low}, {e.emit(f'arith.cmpi eq, {b}, {e.const(-1, _I64)} : i64')} : i1"
    )


def _shift(e, _, a, s, r):
    """Bits shifted out: a shift past the word of a non-zero value, or one that the same
    arithmetic shift back does not undo."""
    zero = e.const(0, _I64)
    far = e.emit(f"arith.cmpi uge, {s}, {e.const(_BITS, _I64)} : i64")
    back = _i(e, "shrsi", r, e.emit(f"arith.select {far}, {zero}, {s} : i64"))
    lost = e.emit(f"arith.ori {far}, {e.emit(f'arith.cmpi ne, {back}, {a} : i64')} : i1")
    nonzero = e.emit(f"arith.cmpi ne, {a}, {zero} : i64")
    return e.emit(f"arith.andi {lost}, {nonzero} : i1")


def _cast(e, src, x, r):
    """A float outside [-2**31, 2**31), or NaN (eager gives INT64_MIN)."""
    t = elem_type(src)
    hi = e.emit(f"arith.cmpf uge, {x}, {e.const(2.0**31, src)} : {t}")
    lo = e.emit(f"arith.cmpf ult, {x}, {e.const(-(2.0**31), src)} : {t}")
    return e.emit(f"arith.ori {hi}, {lo} : i1")


_TESTS: dict[str, Callable] = {  # (e, the operand's dtype, *operands, result) -> i1
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "neg": _negate,
    "abs": _abs,
    "bitwise_left_shift": _shift,
    "floor_divide": _floor_divide,
    "cumsum": _cumsum,
    "cast": _cast,
}


def _kept(a, dims) -> tuple:
    return tuple(s for i, s in enumerate(a.shape) if i not in dims)


def _words(e, a, words, dims) -> list:
    """(low, high) int64 words of aval ``a`` summed over ``dims`` in two words."""
    rank, out = len(a.shape), Aval(_kept(a, dims), _I64)

    def add(lv, hv, lo, hi):
        s = _i(e, "addi", lo, lv)
        carry = e.emit(f"arith.extui {e.emit(f'arith.cmpi ult, {s}, {lo} : i64')} : i1 to i64")
        return s, _i(e, "addi", _i(e, "addi", hi, hv), carry)

    kept = tuple(i for i in range(rank) if i not in dims)
    r = e.generic(
        [(w, a) for w in words],
        [(e.full(out.shape, _I64, 0), out)] * 2,
        [tuple(range(rank))] * 2 + [kept] * 2,
        ["reduction" if i in dims else "parallel" for i in range(rank)],
        add,
    )
    return [f"{r}#0", f"{r}#1"]


def _total(e, op, x) -> list:
    """The exact total of a sum, as (low, high) words of the result's shape (not kept
    dims), in levels as ``reduction._blocked``: a reduction over more than 65535 entries
    in one kernel went wrong on lavapipe, and IREE put its whole input in workgroup memory."""
    a, dims = op.inputs[0].aval, op.params["dims"]
    shape = list(a.shape)
    words = [x, _map(e, [x], a.shape, lambda v: _i(e, "shrsi", v, e.const(_BITS - 1, _I64)))]
    for i, s, k in levels(a.shape, dims):
        now = Aval(tuple(shape), _I64)
        padded = Aval(tuple(shape[:i] + [s] + shape[i + 1 :]), _I64)
        if s != shape[i]:  # zero padding up to a multiple of the block
            zero = (0,) * len(shape)
            words = [
                insert_slice(
                    e, w, now, e.full(padded.shape, _I64, 0), padded, zero, None, (1,) * len(shape)
                )
                for w in words
            ]
        split = Aval(tuple(shape[:i] + [s // k, k] + shape[i + 1 :]), _I64)
        words = [e.reshape(w, padded.shape, split.shape, _I64) for w in words]
        words = _words(e, split, words, (i + 1,))
        shape[i] = s // k
    return _words(e, Aval(tuple(shape), _I64), words, dims)


def _reduction(e, op, x, key) -> tuple:
    """(key where an entry of a sum or product needs more than 32 bits, the sum's result
    computed exactly or None). A product's high word is tested at each step, but for a zero
    factor, which makes the product 0 in either width."""
    a, dims = op.inputs[0].aval, op.params["dims"]
    shape, zero = _kept(a, dims), e.const(0, _I64)
    out = Aval(shape, _I64)
    if op.prim.name == "reduce_sum":
        lo, hi = _total(e, op, x)
        bad = _any(e, [lo, hi], [out, out], lambda lo, hi: _high(e, lo, hi), key)
        return bad, keep_dims(e, op, lo, dims)

    def product(v, p, bad):
        m = e.emit(f"arith.mulsi_extended {p}, {v} : i64", results=2)
        over = e.emit(f"arith.extui {_high(e, f'{m}#0', f'{m}#1')} : i1 to i64")
        z = e.emit(f"arith.cmpi eq, {v}, {zero} : i64")
        return f"{m}#0", e.emit(f"arith.select {z}, {zero}, {_i(e, 'ori', bad, over)} : i64")

    rank = len(a.shape)
    kept = tuple(i for i in range(rank) if i not in dims)
    r = e.generic(
        [(x, a)],
        [(e.full(shape, _I64, 1), out), (e.full(shape, _I64, 0), out)],
        [tuple(range(rank)), kept, kept],
        ["reduction" if i in dims else "parallel" for i in range(rank)],
        product,
    )
    test = lambda bad: e.emit(f"arith.cmpi ne, {bad}, {zero} : i64")  # noqa: E731
    return _any(e, [f"{r}#1"], [out], test, key), None
