"""Indexing primitives: slice and slice_scatter are tensor.extract_slice/insert_slice;
gather is a linalg.generic over the index reading the source with tensor.extract;
scatter_add is a linalg.generic over the destination with a reduction over the index's
scattered dim (each destination element sums the sources whose index hits it)."""
from __future__ import annotations

from ...autodiff import REGISTRY
from .elementwise import BINARY
from .emitter import elem_type, lowering, tensor_type


def insert_slice(e, src, src_aval, dst, dst_aval, starts, stops, steps) -> str:
    """``dst`` with ``src`` written into the strided window (shared with concat); the
    window's sizes are ``src``'s (they may be dynamic, where ``stops`` can't say them)."""
    window = e.window(starts, src_aval.shape, steps)
    return e.emit(f"tensor.insert_slice {src} into {dst}{window} : "
                  f"{tensor_type(src_aval.shape, src_aval.dtype)} into "
                  f"{tensor_type(dst_aval.shape, dst_aval.dtype)}")


@lowering(REGISTRY["slice"])
def _slice(e, op, x):
    a, out, p = op.inputs[0].aval, op.out.aval, op.params
    if out.shape == a.shape:  # whole dims with step 1 (or a 0-d tensor)
        return x
    return e.emit(f"tensor.extract_slice {x}{e.window(p['starts'], out.shape, p['steps'])} : "
                  f"{tensor_type(a.shape, a.dtype)} to {tensor_type(out.shape, out.dtype)}")


@lowering(REGISTRY["slice_scatter"])
def _slice_scatter(e, op, x, src):
    a, s, p = op.inputs[0].aval, op.inputs[1].aval, op.params
    if s.shape == a.shape:
        return src
    return insert_slice(e, src, s, x, a, p["starts"], p["stops"], p["steps"])


def _indices(e, rank, dim, idx):
    """SSA ``index`` values of the current iteration, with ``idx`` (i64) at ``dim``."""
    out = []
    for d in range(rank):
        if d == dim:
            out.append(e.emit(f"arith.index_cast {idx} : i64 to index"))
        else:
            out.append(e.emit(f"linalg.index {d} : index"))
    return ", ".join(out)


@lowering(REGISTRY["gather"])
def _gather(e, op, x, index):
    a, ia, out, dim = op.inputs[0].aval, op.inputs[1].aval, op.out.aval, op.params["dim"]
    rank = len(out.shape)
    ident = tuple(range(rank))

    def body(i, _):
        return e.emit(f"tensor.extract {x}[{_indices(e, rank, dim, i)}] : "
                      f"{tensor_type(a.shape, a.dtype)}")
    return e.generic([(index, ia)], [(e.empty(out.shape, out.dtype), out)], [ident, ident],
                     ["parallel"] * rank, body)


@lowering(REGISTRY["scatter_add"])
def _scatter_add(e, op, x, index, src):
    a, ia, sa, dim = (*(v.aval for v in op.inputs), op.params["dim"])
    d, rank = a.dtype, len(a.shape)
    add = e.need(BINARY["add"], d)
    scattered = tuple(rank if k == dim else k for k in range(rank))  # dim -> the reduction

    def body(i, s, acc):
        here = e.emit(f"arith.index_cast {e.emit(f'linalg.index {dim} : index')} : index to i64")
        hit = e.emit(f"arith.cmpi eq, {i}, {here} : i64")
        return e.select(hit, add(e, d, acc, s), acc, d)
    # summed into zeros, then added to x: reducing into x itself as the init failed to
    # compile (IREE 3.13, llvm-cpu) when x was a slice of another tensor
    summed = e.generic([(index, ia), (src, sa)], [(e.full(a.shape, d, 0), a)],
                       [scattered, scattered, tuple(range(rank))],
                       ["parallel"] * rank + ["reduction"], body)
    return e.map((x, summed), [a, a], a, lambda u, v: add(e, d, u, v))
