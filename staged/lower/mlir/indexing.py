"""Indexing primitives: slice and slice_scatter are tensor.extract_slice/insert_slice;
gather is a linalg.generic over the index reading the source with tensor.extract;
scatter_add and scatter_reduce are a linalg.generic over the destination with a reduction
over the index's scattered dim (each destination element sums, multiplies or takes the
extreme of the sources whose index hits it, so an index out of range hits nothing);
scatter keeps the last source that hits instead (a reduction
runs in order); check is the identity, barrier util.optimization_barrier."""

from __future__ import annotations

from ... import dtypes as dt
from ...autodiff import REGISTRY, Aval
from .elementwise import BINARY
from .emitter import lowering, tensor_type


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


def _scatter_combine(e, op, x, index, src, combine: str, identity=None):
    """``x`` combined (``BINARY[combine]``) with every source whose index hits it: a
    reduction over the index's scattered dim, then combined with ``x``. The reduction starts
    from ``identity``, or (None: max, min) from the first source that hits, with a flag of
    whether one did: no extreme constant, which Vulkan's 32-bit int64 would wrap."""
    # mypy cannot count a starred generator
    a, ia, sa, dim = (*(v.aval for v in op.inputs), op.params["dim"])  # type: ignore[misc]
    d, rank = a.dtype, len(a.shape)
    fn = e.need(BINARY[combine], d)
    scattered = tuple(rank if k == dim else k for k in range(rank))  # dim -> the reduction
    ident = tuple(range(rank))

    def hits(i):
        here = e.emit(f"arith.index_cast {e.emit(f'linalg.index {dim} : index')} : index to i64")
        return e.emit(f"arith.cmpi eq, {i}, {here} : i64")

    if 0 in ia.shape:  # nothing hits (an empty reduction crashes IREE 3.13's vectorizer)
        return x
    # reduced apart, then combined with x: reducing into x itself as the init failed to
    # compile (IREE 3.13, llvm-cpu) when x was a slice of another tensor
    if identity is not None:
        reduced = e.generic(
            [(index, ia), (src, sa)],
            [(e.full(a.shape, d, identity), a)],
            [scattered, scattered, ident],
            ["parallel"] * rank + ["reduction"],
            lambda i, s, acc: e.select(hits(i), fn(e, d, acc, s), acc, d),
        )
        return e.map((x, reduced), [a, a], a, lambda u, v: fn(e, d, u, v))

    def body(i, s, acc, was_hit):
        hit = hits(i)
        new = e.select(was_hit, fn(e, d, acc, s), s, d)
        return e.select(hit, new, acc, d), e.emit(f"arith.ori {hit}, {was_hit} : i1")

    flags = Aval(a.shape, dt.bool_)
    r = e.generic(
        [(index, ia), (src, sa)],
        [(e.full(a.shape, d, 0), a), (e.full(a.shape, dt.bool_, False), flags)],
        [scattered, scattered, ident, ident],
        ["parallel"] * rank + ["reduction"],
        body,
    )
    return e.map(
        (f"{r}#1", f"{r}#0", x),
        [flags, a, a],
        a,
        lambda h, u, v: e.select(h, fn(e, d, v, u), v, d),
    )


@lowering(REGISTRY["scatter_add"])
def _scatter_add(e, op, x, index, src):
    return _scatter_combine(e, op, x, index, src, "add", 0)


@lowering(REGISTRY["scatter_reduce"])
def _scatter_reduce(e, op, x, index, src):
    reduce = op.params["reduce"]
    if reduce == "prod":
        return _scatter_combine(e, op, x, index, src, "mul", 1)
    return _scatter_combine(e, op, x, index, src, "maximum" if reduce == "amax" else "minimum")


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
    # into x itself: see scatter_add)
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
    a = op.inputs[0].aval
    return e.emit(f"util.optimization_barrier {x} : {tensor_type(a.shape, a.dtype)}")
