"""Indexing primitives: slice and slice_scatter are tensor.extract_slice/insert_slice;
gather is a linalg.generic over the index reading the source with tensor.extract;
scatter_add and scatter_reduce are an iree_linalg_ext.scatter of each source element into
its destination (an index out of range hits nothing); scatter keeps the last source that
hits instead, a linalg.generic over the destination with a reduction over the index's
scattered dim (a reduction runs in order); check is the identity, barrier
util.optimization_barrier."""

from __future__ import annotations

from ... import dtypes as dt
from ...autodiff import REGISTRY, Aval
from ...autodiff.avals import Sym
from .elementwise import BINARY
from .emitter import elem_type, lowering, tensor_type


def insert_slice(e, src, src_aval, dst, dst_aval, starts, stops, steps) -> str:
    """``dst`` with ``src`` written into the strided window (shared with concat); the
    window's sizes are ``src``'s (they may be dynamic, where ``stops`` can't say them)."""
    window = e.window(starts, src_aval.shape, steps)
    return e.emit(
        f"tensor.insert_slice {src} into {dst}{window} : "
        f"{tensor_type(src_aval.shape, src_aval.dtype)} into "
        f"{tensor_type(dst_aval.shape, dst_aval.dtype)}"
    )


@lowering(REGISTRY["slice"])
def _slice(e, op, x):
    a, out, p = op.inputs[0].aval, op.out.aval, op.params
    if out.shape == a.shape:  # whole dims with step 1 (or a 0-d tensor)
        return x
    return e.emit(
        f"tensor.extract_slice {x}{e.window(p['starts'], out.shape, p['steps'])} : "
        f"{tensor_type(a.shape, a.dtype)} to {tensor_type(out.shape, out.dtype)}"
    )


@lowering(REGISTRY["slice_scatter"])
def _slice_scatter(e, op, x, src):
    a, s, p = op.inputs[0].aval, op.inputs[1].aval, op.params
    if s.shape == a.shape:
        return src
    return insert_slice(e, src, s, x, a, p["starts"], p["stops"], p["steps"])


def _indices(e, rank, dim, idx, n):
    """SSA ``index`` values of the current iteration, with ``idx`` (i64) clamped to
    ``[0, n)`` at ``dim``: an index out of range (reported by its check, Note [index
    checks]) must never read out of bounds."""
    out = []
    for d in range(rank):
        if d == dim:
            i = e.emit(f"arith.index_cast {idx} : i64 to index")
            last = e.emit(f"arith.subi {e.index(n)}, {e.index(1)} : index")
            i = e.emit(
                f"arith.minsi {e.emit(f'arith.maxsi {i}, {e.index(0)} : index')}, {last} : index"
            )
            out.append(i)
        else:
            out.append(e.emit(f"linalg.index {d} : index"))
    return ", ".join(out)


@lowering(REGISTRY["gather"])
def _gather(e, op, x, index):
    a, ia, out, dim = op.inputs[0].aval, op.inputs[1].aval, op.out.aval, op.params["dim"]
    rank = len(out.shape)
    ident = tuple(range(rank))
    if a.shape[dim] == 0:  # nothing to read: every index is out of range (and reported)
        return e.full(out.shape, out.dtype, 0)

    def body(i, _):
        return e.emit(
            f"tensor.extract {x}[{_indices(e, rank, dim, i, a.shape[dim])}] : "
            f"{tensor_type(a.shape, a.dtype)}"
        )

    return e.generic(
        [(index, ia)],
        [(e.empty(out.shape, out.dtype), out)],
        [ident, ident],
        ["parallel"] * rank,
        body,
    )


def _scatter_combine(e, op, x, index, src, combine: str):
    """``x`` combined (``BINARY[combine]``) with every source whose index hits it
    (``_scatter_into``); a 0-d ``x`` is one element along dim 0."""
    # mypy cannot count a starred generator
    a, ia, sa, dim = (*(v.aval for v in op.inputs), op.params["dim"])  # type: ignore[misc]
    if 0 in ia.shape:  # nothing hits
        return x
    fn = e.need(BINARY[combine], a.dtype)
    if a.shape:
        return _scatter_into(e, x, index, src, a, ia, dim, fn)
    x, index, src = (e.reshape(v, (), (1,), w.dtype) for v, w in ((x, a), (index, ia), (src, sa)))
    r = _scatter_into(e, x, index, src, Aval((1,), a.dtype), Aval((1,), ia.dtype), 0, fn)
    return e.reshape(r, (1,), (), a.dtype)


def _scatter_into(e, x, index, src, a, ia, dim, fn):
    """``x`` (of ``a``) combined by ``fn`` with each ``src`` element whose ``index`` (of
    ``ia``, ``src``'s shape) hits it: an iree_linalg_ext.scatter, O(sources), where a generic
    over the destination reducing over the index's dim cost destination x index length (an
    embedding's gradient: vocab x tokens x width). Each source element goes to its own
    coordinates with the one at ``dim`` replaced by its index, or by ``n`` where that is out
    of range: ``x`` is padded by one there and sliced after, so such an index hits nothing
    and the kernel never writes out of bounds. The combines are commutative and associative
    (arith's maximumf/minimumf order -0.0 below 0.0 and propagate NaN), so the order the
    sources arrive in changes only the rounding of floating sums and products, and no
    identity is needed (no extreme constant for Vulkan's 32-bit int64 to wrap). IREE 3.13
    runs a scatter whose indices may repeat in one thread on GPUs (serially, in order)."""
    d, rank, n = a.dtype, len(a.shape), a.shape[dim]
    coords = Aval((*ia.shape, rank), dt.int64)

    def coordinate(i, _):
        # loop ``rank`` picks the coordinate: the index at ``dim`` (n where out of range),
        # the source's own elsewhere
        end = e.emit(f"arith.index_cast {e.index(n)} : index to i64")
        inside = e.emit(
            f"arith.andi {e.emit(f'arith.cmpi sge, {i}, {e.const(0, dt.int64)} : i64')}, "
            f"{e.emit(f'arith.cmpi slt, {i}, {end} : i64')} : i1"
        )
        v = e.select(inside, i, end, dt.int64)
        k = e.emit(f"linalg.index {rank} : index")
        for j in range(rank):
            if j != dim:
                own = e.emit(
                    f"arith.index_cast {e.emit(f'linalg.index {j} : index')} : index to i64"
                )
                v = e.select(e.emit(f"arith.cmpi eq, {k}, {e.index(j)} : index"), own, v, dt.int64)
        return v

    where = e.generic(
        [(index, ia)],
        [(e.empty(coords.shape, dt.int64), coords)],
        [tuple(range(rank)), tuple(range(rank + 1))],
        ["parallel"] * (rank + 1),
        coordinate,
    )
    # x padded by one along dim (not tensor.pad: IREE 3.13 crashed on a complex one); a
    # dynamic n + 1 prints "?" as n does
    padded = Aval((*a.shape[:dim], n + 1 if isinstance(n, int) else n, *a.shape[dim + 1 :]), d)
    pt = tensor_type(padded.shape, d)
    dynamic = [
        e.emit(f"arith.addi {e.index(s)}, {e.index(1)} : index") if k == dim else e.index(s)
        for k, s in enumerate(padded.shape)
        if isinstance(s, Sym)
    ]
    empty = e.emit(f"tensor.empty({', '.join(dynamic)}) : {pt}")
    fill = e.emit(f"linalg.fill ins({e.const(0, d)} : {elem_type(d)}) outs({empty} : {pt}) -> {pt}")
    into = insert_slice(e, x, a, fill, padded, (0,) * rank, a.shape, (1,) * rank)
    u, cur, r = e.fresh("a"), e.fresh("a"), e.fresh()
    e.raw(
        f"{r} = iree_linalg_ext.scatter dimension_map = [{', '.join(map(str, range(rank)))}] "
        f"unique_indices(false) ins({src}, {where} : {tensor_type(ia.shape, d)}, "
        f"{tensor_type(coords.shape, dt.int64)}) outs({into} : {pt}) {{"
    )
    e.raw(f"^bb0({u}: {elem_type(d)}, {cur}: {elem_type(d)}):")
    e.raw(f"  iree_linalg_ext.yield {fn(e, d, cur, u)} : {elem_type(d)}")
    e.raw(f"}} -> {pt} {e.loc}")
    return e.emit(
        f"tensor.extract_slice {r}{e.window((0,) * rank, a.shape, (1,) * rank)} : {pt} to "
        f"{tensor_type(a.shape, d)}"
    )


@lowering(REGISTRY["scatter_add"])
def _scatter_add(e, op, x, index, src):
    return _scatter_combine(e, op, x, index, src, "add")


@lowering(REGISTRY["scatter_reduce"])
def _scatter_reduce(e, op, x, index, src):
    reduce = op.params["reduce"]
    combine = {"prod": "mul", "amax": "maximum", "amin": "minimum"}[reduce]
    return _scatter_combine(e, op, x, index, src, combine)


@lowering(REGISTRY["scatter"])
def _scatter(e, op, x, index, src):
    # mypy cannot count a starred generator
    a, ia, sa, dim = (*(v.aval for v in op.inputs), op.params["dim"])  # type: ignore[misc]
    if 0 in ia.shape:  # nothing written (the generic below crashes IREE with SIGFPE)
        return x
    d, rank = a.dtype, len(a.shape)
    hits = Aval(a.shape, dt.bool_)
    scattered = tuple(rank if k == dim else k for k in range(rank))

    def body(i, s, acc, was_hit):
        here = e.emit(f"arith.index_cast {e.emit(f'linalg.index {dim} : index')} : index to i64")
        hit = e.emit(f"arith.cmpi eq, {i}, {here} : i64")
        return e.select(hit, s, acc, d), e.emit(f"arith.ori {hit}, {was_hit} : i1")

    # the last source that hits, and whether one did, then x where none did (not reduced
    # into x itself: that failed to compile (IREE 3.13, llvm-cpu) where x was a slice of
    # another tensor)
    r = e.generic(
        [(index, ia), (src, sa)],
        [(e.full(a.shape, d, 0), a), (e.full(a.shape, dt.bool_, False), hits)],
        [scattered, scattered, tuple(range(rank)), tuple(range(rank))],
        ["parallel"] * rank + ["reduction"],
        body,
    )
    return e.map((f"{r}#1", f"{r}#0", x), [hits, a, a], a, lambda h, u, v: e.select(h, u, v, d))


@lowering(REGISTRY["check"])
def _check(e, op, report):
    return report  # the runtime reads the report (Note [index checks])


@lowering(REGISTRY["barrier"])
def _barrier(e, op, x):
    return fence(e, x, op.inputs[0].aval)


def fence(e, x, a):
    """``x`` (aval ``a``) behind a ``util.optimization_barrier``: IREE fuses nothing
    across it. IREE cannot see through the barrier to a dynamic dim of its result (a
    ``tensor.dim`` of it failed to compile): they are tied to the sizes again."""
    t = tensor_type(a.shape, a.dtype)
    r = e.emit(f"util.optimization_barrier {x} : {t}")
    dims = [e.index(s) for s in a.shape if isinstance(s, Sym)]
    return e.emit(f"flow.tensor.tie_shape {r} : {t}{{{', '.join(dims)}}}") if dims else r
