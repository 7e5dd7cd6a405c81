"""Reductions: a linalg.generic with reduction iterators into a filled init; keepdim is an
expand_shape of the result. argmax/argmin reduce (value, index) pairs."""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...autodiff import REGISTRY
from ...autodiff.blocked import levels
from .elementwise import BINARY, CMP
from .indexing import _indices, fence, insert_slice
from .emitter import elem_type, lowering, tensor_type


def _extreme(e, d, high: bool):
    """The identity of max (high=False gives the lowest value) or min. Where the module
    holds int64 as int32 (Vulkan's baseline: IREE demotes i64 to i32), int32's: int64's
    limits truncate to 0 and -1, and the max of [-5, -3] was 0."""
    if d is dt.bool_:
        return high
    if d.is_floating_point:
        return np.inf if high else -np.inf
    info = np.iinfo(e.wide.get(d, d).np if d is dt.int64 else d.np)
    return info.max if high else info.min


def _reduce(e, a, x, dims, init, combine_fn):
    """Reduce ``x`` (aval ``a``) over ``dims`` into outputs initialised by ``init``; returns
    the SSA name(s) of the (not kept-dim) results."""
    kept = [i for i in range(len(a.shape)) if i not in dims]
    shape = tuple(a.shape[i] for i in kept)
    outs = [(e.full(shape, d, v), type(a)(shape, d)) for d, v in init]
    iterators = ["reduction" if i in dims else "parallel" for i in range(len(a.shape))]
    r = e.generic(
        [(x, a)], outs, [tuple(range(len(a.shape)))] + [kept] * len(outs), iterators, combine_fn
    )
    return [r] if len(outs) == 1 else [f"{r}#{i}" for i in range(len(outs))]


def _padded(e, x, a, dim, s, value):
    """``x`` (aval ``a``) padded at the end of ``dim`` up to size ``s`` with ``value``."""
    shape = list(a.shape)
    if s == shape[dim]:
        return x
    padded = type(a)(tuple(shape[:dim] + [s] + shape[dim + 1 :]), a.dtype)
    full = e.full(padded.shape, a.dtype, value)
    return insert_slice(e, x, a, full, padded, (0,) * len(shape), None, (1,) * len(shape))


def _blocked(e, a, x, dims, combine_fn, identity=0):
    """``x`` (aval ``a``) reduced over ``dims`` level by level (Note [blocked sums] in
    ``autodiff/blocked.py``) down to at most BLOCK elements, padding with ``identity``;
    returns them and their aval."""
    shape, d = list(a.shape), a.dtype
    for i, s, k in levels(a.shape, dims):
        x = _padded(e, x, type(a)(tuple(shape), d), i, s, identity)
        split = tuple(shape[:i] + [s // k, k] + shape[i + 1 :])
        x = e.reshape(x, tuple(shape[:i] + [s] + shape[i + 1 :]), split, d)
        (x,) = _reduce(e, type(a)(split, d), x, (i + 1,), [(d, identity)], combine_fn)
        shape[i] = s // k
    return x, type(a)(tuple(shape), d)


# Note [long reductions on lavapipe]: on vulkan-spirv (lavapipe), a reduction or scan
# over more than 65535 entries in one kernel came out wrong, silently (the int32 amax of
# 70000 entries was 6, not 100; the last running sum was the last entry), likely IREE's
# SPIR-V distribution meeting Vulkan's 65535 workgroup-count limit. Where reductions
# are fenced (Note [fenced reductions]), every reduction runs in levels as the blocked
# sums (padding with its identity), and a long scan scans blocks, then the blocks'
# totals, and combines each block with the total before it (``_scan``).
def _long(e, a, x, dims, combine_fn, identity):
    """``_blocked`` where reductions are fenced (Note [long reductions on lavapipe])."""
    return _blocked(e, a, x, dims, combine_fn, identity) if e.fence_reductions else (x, a)


# Note [fenced reductions]: IREE 3.13's SPIR-V code for a reduction fused with a consumer
# that broadcasts its result back against the input (``x - x.amax(0, keepdim=True)`` of a
# 2x3x4 tensor; sum, amax and amin over dim 0 or 1 of a 2x3x4x5 one; softmax and
# normalize over dim 0) left part of the output unwritten on lavapipe, silently, and not
# the same part every run; over two dims of a 4-d tensor too (24 of 108 cases went wrong;
# reductions to a scalar never did). Where ``to_mlir`` is told to (``fence_reductions``,
# the vulkan-spirv backend: compiler.lowering_options), a reduction's result that keeps a
# dim goes through an optimization barrier, so it is computed by dispatches of its own;
# none of those cases went wrong with it. Scalars are not fenced: a step's index checks
# are many scalar reductions that IREE combines in one dispatch, and fenced, that
# dispatch bound more buffers (143) than Vulkan devices allow (32).
def keep_dims(e, op, r, dims):
    a, out = op.inputs[0].aval, op.out.aval
    shape = tuple(s for i, s in enumerate(a.shape) if i not in dims)
    if e.fence_reductions and shape:
        r = fence(e, r, type(out)(shape, out.dtype))
    return e.reshape(r, shape, out.shape, out.dtype)


def _reduction(combine, init):
    def emit(e, op, x):
        d, dims = op.inputs[0].aval.dtype, op.params["dims"]
        fn = e.need(BINARY[combine], d, op.prim.name)
        combine_fn = lambda v, acc: fn(e, d, v, acc)  # noqa: E731
        a = op.inputs[0].aval
        if combine == "add" and (d.is_floating_point or d.is_complex):
            x, a = _blocked(e, a, x, dims, combine_fn)
        else:
            x, a = _long(e, a, x, dims, combine_fn, init(e, d))
        kept = [n for i, n in enumerate(a.shape) if i not in dims]
        static = all(isinstance(n, int) for n in a.shape)
        if combine == "add" and static and len(a.shape) >= 2 and all(n == 1 for n in kept):
            # Note [sums to a scalar]: IREE 3.13 fuses a product with a broadcast operand
            # and its sum over every dim into one contraction that its CPU vectorizer
            # rejects ("'vector.contract' op invalid accumulator/result vector shape":
            # (w * x).sum() with w of shape (3,), x (2, 3)); summing the flattened product
            # compiles (after _blocked, at most BLOCK elements are left to sum)
            flat = (int(np.prod(a.shape)),)
            x = e.reshape(x, a.shape, flat, d)
            (r,) = _reduce(e, type(a)(flat, d), x, (0,), [(d, init(e, d))], combine_fn)
            return e.reshape(r, (), op.out.aval.shape, d)
        (r,) = _reduce(e, a, x, dims, [(d, init(e, d))], combine_fn)
        return keep_dims(e, op, r, dims)

    return emit


lowering(REGISTRY["reduce_sum"])(_reduction("add", lambda e, d: 0))
lowering(REGISTRY["reduce_max"])(_reduction("maximum", lambda e, d: _extreme(e, d, False)))
lowering(REGISTRY["reduce_min"])(_reduction("minimum", lambda e, d: _extreme(e, d, True)))
lowering(REGISTRY["reduce_prod"])(_reduction("mul", lambda e, d: 1))


def _arg(extreme: str):
    """First index of the extremum, NaN winning as in NumPy: the extremum (NaN-propagating
    maximum/minimum), then the least index holding it. Two single-result reductions
    vectorize where one reduction of (value, index) pairs ran scalar: a compiled CNN step
    spent 10% of its time in the max-pool argmax over 27648 windows of 4."""

    def emit(e, op, x):
        a, dim = op.inputs[0].aval, op.params["dim"]
        d, rank = a.dtype, len(a.shape)
        fn = e.need(BINARY[extreme], d, op.prim.name)
        combine_fn = lambda v, acc: fn(e, d, v, acc)  # noqa: E731
        worst = _extreme(e, d, extreme == "minimum")
        xb, ab = _long(e, a, x, (dim,), combine_fn, worst)
        (m,) = _reduce(e, ab, xb, (dim,), [(d, worst)], combine_fn)
        kept = tuple(i for i in range(rank) if i != dim)
        shape = tuple(a.shape[i] for i in kept)
        t, n = elem_type(d), e.const(a.shape[dim], dt.int64)
        eq = CMP["eq"][d.dclass]

        def position(v, best):  # the loop's index where v is the extremum, else n
            hit = eq(e, d, v, best)
            if d.dclass == "float":  # NaN is the extremum wherever there is one
                both_nan = e.emit(
                    f"arith.andi {e.emit(f'arith.cmpf uno, {v}, {v} : {t}')}, "
                    f"{e.emit(f'arith.cmpf uno, {best}, {best} : {t}')} : i1"
                )
                hit = e.emit(f"arith.ori {hit}, {both_nan} : i1")
            i = e.emit(f"arith.index_cast {e.emit(f'linalg.index {dim} : index')} : index to i64")
            return e.emit(f"arith.select {hit}, {i}, {n} : i64")

        if e.fence_reductions and levels(a.shape, (dim,)):  # Note [long reductions on lavapipe]
            ia = type(a)(a.shape, dt.int64)
            full = tuple(range(rank))
            hits = e.generic(
                [(x, a), (m, type(a)(shape, d))],
                [(e.empty(a.shape, dt.int64), ia)],
                [full, kept, full],
                ["parallel"] * rank,
                lambda v, best, _: position(v, best),
            )
            low = e.need(BINARY["minimum"], dt.int64)
            low_fn = lambda v, acc: low(e, dt.int64, v, acc)  # noqa: E731
            hits, ia = _blocked(e, ia, hits, (dim,), low_fn, a.shape[dim])
            (r,) = _reduce(e, ia, hits, (dim,), [(dt.int64, a.shape[dim])], low_fn)
            return keep_dims(e, op, r, (dim,))

        def first(v, best, idx):
            return e.emit(f"arith.minsi {idx}, {position(v, best)} : i64")

        r = e.generic(
            [(x, a), (m, type(a)(shape, d))],
            [(e.full(shape, dt.int64, a.shape[dim]), type(a)(shape, dt.int64))],
            [tuple(range(rank)), kept, kept],
            ["reduction" if i == dim else "parallel" for i in range(rank)],
            first,
        )
        return keep_dims(e, op, r, (dim,))

    return emit


lowering(REGISTRY["argmax"])(_arg("maximum"))
lowering(REGISTRY["argmin"])(_arg("minimum"))


# --- scans and sorting ---------------------------------------------------------------
def _index(e, loop):
    return e.emit(f"linalg.index {loop} : index")


def _index_i64(e, loop):
    return e.emit(f"arith.index_cast {_index(e, loop)} : index to i64")


def _along(rank, dim, loop):
    """The identity map with ``dim`` replaced by loop ``loop``."""
    return tuple(loop if i == dim else i for i in range(rank))


def _flip(e, x, a, dim):
    """``x`` reversed along ``dim``: a gather of ``n - 1 - i`` (IREE's CPU tiling rejects a
    reversing indexing map)."""
    rank = len(a.shape)

    def body(_):
        i = e.emit(f"arith.subi {e.const(a.shape[dim] - 1, dt.int64)}, {_index_i64(e, dim)} : i64")
        return e.emit(
            f"tensor.extract {x}[{_indices(e, rank, dim, i, a.shape[dim])}] : "
            f"{tensor_type(a.shape, a.dtype)}"
        )

    return e.generic(
        [], [(e.empty(a.shape, a.dtype), a)], [tuple(range(rank))], ["parallel"] * rank, body
    )


@lowering(REGISTRY["cumsum"])
def _cumsum(e, op, x):
    """iree_linalg_ext.scan (O(n), on CPU and GPU); reverse sums scan the flipped input."""
    a, dim, reverse = op.inputs[0].aval, op.params["dim"], op.params["reverse"]
    if reverse:
        x = _flip(e, x, a, dim)
    r = _scan(e, x, a, dim)
    return _flip(e, r, a, dim) if reverse else r


def _scan(e, x, a, dim):
    """Running sums of ``x`` (aval ``a``) along ``dim``; in blocks where a long scan goes
    wrong (Note [long reductions on lavapipe])."""
    plan = levels(a.shape, (dim,)) if e.fence_reductions else []
    if not plan:
        return _scan_kernel(e, x, a, dim)
    (_, s, k), d, rank = plan[0], a.dtype, len(a.shape)
    shape = a.shape[:dim] + (s,) + a.shape[dim + 1 :]
    split = type(a)(a.shape[:dim] + (s // k, k) + a.shape[dim + 1 :], d)
    x = e.reshape(_padded(e, x, a, dim, s, 0), shape, split.shape, d)
    y = _scan_kernel(e, x, split, dim + 1)
    # each block's total is its last running sum (the scan's own total output of a 4-d
    # tensor came out wrong on lavapipe: a 2x5000x3 cumsum(1) ended at 75, not 14995)
    ta = type(a)(a.shape[:dim] + (s // k,) + a.shape[dim + 1 :], d)
    last = split.shape[: dim + 1] + (1,) + split.shape[dim + 2 :]
    start = (0,) * (dim + 1) + (k - 1,) + (0,) * (rank - dim - 1)
    totals = e.reshape(_window(e, y, split, start, last), last, ta.shape, d)
    before = _scan(e, totals, ta, dim)  # the running total up to each block's end
    add = e.need(BINARY["add"], d)

    def body(v, _):  # v plus the running total up to the previous block's end
        j = _index_i64(e, dim)
        prev = e.emit(f"arith.subi {j}, {e.const(1, dt.int64)} : i64")
        at = [_index(e, i + (i > dim)) for i in range(rank)]
        at[dim] = e.emit(f"arith.index_cast {prev} : i64 to index")
        at[dim] = e.emit(f"arith.maxsi {at[dim]}, {e.index(0)} : index")
        t = e.emit(f"tensor.extract {before}[{', '.join(at)}] : {tensor_type(ta.shape, d)}")
        first = e.emit(f"arith.cmpi eq, {j}, {e.const(0, dt.int64)} : i64")
        return e.emit(f"arith.select {first}, {v}, {add(e, d, v, t)} : {elem_type(d)}")

    full = tuple(range(rank + 1))
    y = e.generic(
        [(y, split)],
        [(e.empty(split.shape, d), split)],
        [full] * 2,
        ["parallel"] * (rank + 1),
        body,
    )
    y = e.reshape(y, split.shape, shape, d)
    if s == a.shape[dim]:
        return y
    return _window(e, y, type(a)(shape, d), (0,) * rank, a.shape)


def _window(e, x, a, start, sizes):
    """The window of ``x`` (aval ``a``) at ``start`` of ``sizes``, step 1."""
    return e.emit(
        f"tensor.extract_slice {x}{e.window(start, sizes, (1,) * len(sizes))} : "
        f"{tensor_type(a.shape, a.dtype)} to {tensor_type(sizes, a.dtype)}"
    )


def _scan_kernel(e, x, a, dim):
    """iree_linalg_ext.scan of ``x`` (aval ``a``) along ``dim``: the running sums."""
    d, t = a.dtype, tensor_type(a.shape, a.dtype)
    add = e.need(BINARY["add"], d)
    rest = tuple(s for i, s in enumerate(a.shape) if i != dim)
    lhs, rhs = e.fresh("a"), e.fresh("a")
    r = e.fresh()
    e.raw(
        f"{r}:2 = iree_linalg_ext.scan dimension({dim}) inclusive(true) ins({x} : {t}) "
        f"outs({e.full(a.shape, d, 0)}, {e.full(rest, d, 0)} : {t}, "
        f"{tensor_type(rest, d)}) {{"
    )
    e.raw(f"^bb0({lhs}: {elem_type(d)}, {rhs}: {elem_type(d)}):")
    e.raw(f"  iree_linalg_ext.yield {add(e, d, lhs, rhs)} : {elem_type(d)}")
    e.raw(f"}} -> {t}, {tensor_type(rest, d)} {e.loc}")
    return f"{r}#0"


def _before(e, d, xj, xi, descending):
    """(xj sorts before xi, xj ties with xi) as i1; NaN sorts above every number."""
    c = d.dclass
    lt = CMP["gt" if descending else "lt"][c](e, d, xj, xi)
    same = CMP["eq"][c](e, d, xj, xi)
    if c != "float":
        return lt, same
    t = elem_type(d)
    ni, nj = (e.emit(f"arith.cmpf uno, {v}, {v} : {t}") for v in (xi, xj))
    true = e.const(True, dt.bool_)
    nan_first = e.emit(
        f"arith.andi {nj if descending else ni}, "
        f"{e.emit(f'arith.xori {ni if descending else nj}, {true} : i1')} : i1"
    )
    lt = e.emit(f"arith.ori {lt}, {nan_first} : i1")
    same = e.emit(f"arith.ori {same}, {e.emit(f'arith.andi {ni}, {nj} : i1')} : i1")
    return lt, same


# From this many elements along the sorted dim on, argsort merge-sorts: log2(n) dispatches,
# 4096 f32 compile in ~1 s and sort in 1.2 ms (9 ms for 8 rows) on 2 shared cores, against
# 0.4 s and 4.2 ms (34 ms) ranking by counting, which stays below it (2 dispatches, O(n**2)
# work, the quickest to compile; the two meet near 1024). IREE's own iree_linalg_ext.sort
# is a serial bubble sort on CPU (1.2 s for 8 x 4096) and needs a whole row in workgroup
# memory on Vulkan (more than 2048 f32 do not compile); a bitonic network sorted 4096 in
# 0.4 ms but took 19 s to compile (78 dispatches).
MERGE_MIN = 1024


@lowering(REGISTRY["argsort"])
def _argsort(e, op, x):
    e.need(CMP["lt"], op.inputs[0].aval.dtype)
    a, dim = op.inputs[0].aval, op.params["dim"]
    return (_argsort_merge if a.shape[dim] >= MERGE_MIN else _argsort_count)(e, op, x)


def _argsort_count(e, op, x):
    """rank[i] = #{j before i} (ties by index: stable); out[r] = the i with rank r < k."""
    a, out = op.inputs[0].aval, op.out.aval
    dim, descending = op.params["dim"], op.params["descending"]
    d, rank = a.dtype, len(a.shape)
    ranks_aval = type(a)(a.shape, dt.int64)

    def count(xi, xj, acc):
        lt, same = _before(e, d, xj, xi, descending)
        earlier = e.emit(f"arith.cmpi ult, {_index(e, rank)}, {_index(e, dim)} : index")
        tie = e.emit(f"arith.andi {same}, {earlier} : i1")
        hit = e.emit(f"arith.extui {e.emit(f'arith.ori {lt}, {tie} : i1')} : i1 to i64")
        return e.emit(f"arith.addi {acc}, {hit} : i64")

    ident = tuple(range(rank))
    ranks = e.generic(
        [(x, a), (x, a)],
        [(e.full(a.shape, dt.int64, 0), ranks_aval)],
        [ident, _along(rank, dim, rank), ident],
        ["parallel"] * rank + ["reduction"],
        count,
    )

    def pick(r_i, acc):
        hit = e.emit(f"arith.cmpi eq, {r_i}, {_index_i64(e, dim)} : i64")
        i = e.emit(f"arith.select {hit}, {_index_i64(e, rank)}, {e.const(0, dt.int64)} : i64")
        return e.emit(f"arith.addi {acc}, {i} : i64")

    return e.generic(
        [(ranks, ranks_aval)],
        [(e.full(out.shape, dt.int64, 0), out)],
        [_along(rank, dim, rank), ident],
        ["parallel"] * rank + ["reduction"],
        pick,
    )


def _argsort_merge(e, op, x):
    """Merge sort of (value, index) pairs along ``dim``, padded to a power of two (the
    padding sorts last); the index breaks ties, so the order is total and the sort stable.
    Pass ``m`` merges sorted runs of ``m`` into runs of ``2m``: output position ``q`` of a
    merged run finds how many of its first ``q`` come from the left run by a binary search
    along the merge path (tensor.extract reads), then takes the first of the two candidates.
    log2(n) elementwise generics, O(n log(n)**2) work."""
    a, out = op.inputs[0].aval, op.out.aval
    dim, descending = op.params["dim"], op.params["descending"]
    d, rank, n = a.dtype, len(a.shape), a.shape[dim]
    size = 1 << (n - 1).bit_length()
    shape = a.shape[:dim] + (size,) + a.shape[dim + 1 :]
    vals_aval, idx_aval = type(a)(shape, d), type(a)(shape, dt.int64)
    vals = (
        insert_slice(e, x, a, e.full(shape, d, 0), vals_aval, (0,) * rank, a.shape, (1,) * rank)
        if size != n
        else x
    )
    ident = tuple(range(rank))
    idx = e.generic(
        [],
        [(e.empty(shape, dt.int64), idx_aval)],
        [ident],
        ["parallel"] * rank,
        lambda _: _index_i64(e, dim),
    )
    c = lambda v: e.const(v, dt.int64)  # noqa: E731
    here = []

    def i64(op_, *xs):  # "cmpi slt," takes its predicate with the comma
        return e.emit(f"arith.{op_} {', '.join(xs)} : i64")

    def merge(vals, idx, m):
        def read(pos):  # loop indices come from `here` (linalg.index is not valid in scf.for)
            at = ", ".join(
                e.emit(f"arith.index_cast {pos} : i64 to index") if k == dim else here[k]
                for k in range(rank)
            )
            return (
                e.emit(f"tensor.extract {vals}[{at}] : {tensor_type(shape, d)}"),
                e.emit(f"tensor.extract {idx}[{at}] : {tensor_type(shape, dt.int64)}"),
            )

        def body(_v, _i):
            here[:] = [_index(e, k) for k in range(rank)]
            i = e.emit(f"arith.index_cast {here[dim]} : index to i64")
            base = i64("andi", i, c(~(2 * m - 1)))
            q = i64("subi", i, base)
            left, right = base, i64("addi", base, c(m))
            lo = i64("maxsi", i64("subi", q, c(m)), c(0))
            hi = i64("minsi", q, c(m))
            lo0, hi0 = lo, hi
            lo, hi = e.fresh("lo"), e.fresh("hi")
            step, res = e.fresh("k"), e.fresh()
            e.raw(
                f"{res}:2 = scf.for {step} = {e.emit('arith.constant 0 : index')} to "
                f"{e.emit(f'arith.constant {m.bit_length()} : index')} step "
                f"{e.emit('arith.constant 1 : index')} iter_args({lo} = {lo0}, {hi} = {hi0}) "
                f"-> (i64, i64) {{"
            )
            # t in [lo, hi] with left[t-1] before right[q-t]: a rolled loop (unrolled, the
            # vectorized gathers took 4x longer to compile for a 2x quicker sort)
            mid = i64("shrsi", i64("addi", i64("addi", lo, hi), c(1)), c(1))
            go = i64("cmpi slt,", lo, hi)
            ta = i64("maxsi", i64("subi", mid, c(1)), c(0))
            tb = i64("minsi", i64("subi", q, mid), c(m - 1))
            yes = _pair_before(
                e, d, read(i64("addi", left, ta)), read(i64("addi", right, tb)), descending, n
            )
            lo = e.emit(f"arith.select {e.emit(f'arith.andi {go}, {yes} : i1')}, {mid}, {lo} : i64")
            hi = e.emit(
                f"arith.select {e.emit(f'arith.andi {go}, {_not(e, yes)} : i1')}, "
                f"{i64('subi', mid, c(1))}, {hi} : i64"
            )
            e.raw(f"  scf.yield {lo}, {hi} : i64, i64")
            e.raw("}")
            ja = f"{res}#0"
            jb = i64("subi", q, ja)
            a_ok, b_ok = i64("cmpi slt,", ja, c(m)), i64("cmpi slt,", jb, c(m))
            va = read(i64("addi", left, i64("minsi", ja, c(m - 1))))
            vb = read(i64("addi", right, i64("minsi", jb, c(m - 1))))
            first = _pair_before(e, d, va, vb, descending, n)
            take_a = e.emit(
                f"arith.andi {a_ok}, {e.emit(f'arith.ori {_not(e, b_ok)}, {first} : i1')} : i1"
            )
            return (
                e.emit(f"arith.select {take_a}, {va[0]}, {vb[0]} : {elem_type(d)}"),
                e.emit(f"arith.select {take_a}, {va[1]}, {vb[1]} : i64"),
            )

        r = e.generic(
            [],
            [(e.empty(shape, d), vals_aval), (e.empty(shape, dt.int64), idx_aval)],
            [ident] * 2,
            ["parallel"] * rank,
            body,
        )
        return f"{r}#0", f"{r}#1"

    m = 1
    while m < size:
        vals, idx = merge(vals, idx, m)
        m *= 2
    if out.shape == idx_aval.shape:
        return idx
    return e.emit(
        f"tensor.extract_slice {idx}[{', '.join('0' * rank)}]"
        f"[{', '.join(map(str, out.shape))}][{', '.join('1' * rank)}] : "
        f"{tensor_type(shape, dt.int64)} to {tensor_type(out.shape, dt.int64)}"
    )


def _not(e, b):
    return e.emit(f"arith.xori {b}, {e.const(True, dt.bool_)} : i1")


def _pair_before(e, d, a, b, descending, n):
    """(value, index) pair ``a`` sorts before ``b``: padding (index >= n) last, then the
    value order, then the index."""
    (va, ia), (vb, ib) = a, b
    lt, same = _before(e, d, va, vb, descending)
    earlier = e.emit(f"arith.cmpi slt, {ia}, {ib} : i64")
    first = e.emit(f"arith.ori {lt}, {e.emit(f'arith.andi {same}, {earlier} : i1')} : i1")
    pad_a, pad_b = (e.emit(f"arith.cmpi sge, {v}, {e.const(n, dt.int64)} : i64") for v in (ia, ib))
    real_a = e.emit(f"arith.xori {pad_a}, {e.const(True, dt.bool_)} : i1")
    return e.emit(f"arith.andi {real_a}, {e.emit(f'arith.ori {pad_b}, {first} : i1')} : i1")
