"""Reductions: a linalg.generic with reduction iterators into a filled init; keepdim is an
expand_shape of the result. argmax/argmin reduce (value, index) pairs."""
from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...autodiff import REGISTRY
from .elementwise import BINARY, CMP
from .module import dclass, elem_type, lowering, unsupported


def _extreme(d, high: bool):
    """The identity of max (high=False gives the lowest value) or min."""
    if d is dt.bool_:
        return high
    if d.is_floating_point:
        return np.inf if high else -np.inf
    info = np.iinfo(d.np)
    return info.max if high else info.min


def _reduce(e, op, x, dims, init, combine_fn, outs_dtypes=None):
    """Reduce ``x`` over ``dims`` into outputs initialised by ``init``; returns the SSA
    name(s) of the (not kept-dim) results."""
    a = op.inputs[0].aval
    kept = [i for i in range(len(a.shape)) if i not in dims]
    shape = tuple(a.shape[i] for i in kept)
    outs = [(e.full(shape, d, v), type(a)(shape, d)) for d, v in init]
    iterators = ["reduction" if i in dims else "parallel" for i in range(len(a.shape))]
    r = e.generic([(x, a)], outs, [tuple(range(len(a.shape)))] + [kept] * len(outs),
                  iterators, combine_fn)
    return [r] if len(outs) == 1 else [f"{r}#{i}" for i in range(len(outs))]


def _keep(e, op, r, dims):
    a, out = op.inputs[0].aval, op.out.aval
    shape = tuple(s for i, s in enumerate(a.shape) if i not in dims)
    return e.reshape(r, shape, out.shape, out.dtype)


def _reduction(combine, init):
    def emit(e, op, x):
        d, dims = op.inputs[0].aval.dtype, op.params["dims"]
        fn = e.need(BINARY[combine], d, op.prim.name)
        (r,) = _reduce(e, op, x, dims, [(d, init(d))], lambda v, acc: fn(e, d, v, acc))
        return _keep(e, op, r, dims)
    return emit


lowering(REGISTRY["reduce_sum"])(_reduction("add", lambda d: 0))
lowering(REGISTRY["reduce_max"])(_reduction("maximum", lambda d: _extreme(d, False)))
lowering(REGISTRY["reduce_min"])(_reduction("minimum", lambda d: _extreme(d, True)))
lowering(REGISTRY["reduce_prod"])(_reduction("mul", lambda d: 1))
for _name in ("reduce_max", "reduce_min", "argmax", "argmin", "argsort"):
    unsupported(_name, {"complex": "complex numbers are not ordered"})


def _arg(strict: str):
    """First index of the extremum, NaN winning as in NumPy; order-independent combine."""
    def emit(e, op, x):
        d, dim = op.inputs[0].aval.dtype, op.params["dim"]
        better_fn = e.need(CMP[strict], d, op.prim.name)
        t = elem_type(d)

        def combine(v, best, idx):
            i = e.emit(f"arith.index_cast {e.emit(f'linalg.index {dim} : index')} : index to i64")
            better = better_fn(e, d, v, best)
            same = CMP["eq"][dclass(d)](e, d, v, best)
            if dclass(d) == "float":
                vn, bn = (e.emit(f"arith.cmpf uno, {s}, {s} : {t}") for s in (v, best))
                not_bn = e.emit(f"arith.xori {bn}, {e.const(True, dt.bool_)} : i1")
                better = e.emit(f"arith.ori {better}, {e.emit(f'arith.andi {vn}, {not_bn} : i1')} : i1")
                same = e.emit(f"arith.ori {same}, {e.emit(f'arith.andi {vn}, {bn} : i1')} : i1")
            first = e.emit(f"arith.cmpi slt, {i}, {idx} : i64")
            take = e.emit(f"arith.ori {better}, {e.emit(f'arith.andi {same}, {first} : i1')} : i1")
            return (e.emit(f"arith.select {take}, {v}, {best} : {t}"),
                    e.emit(f"arith.select {take}, {i}, {idx} : i64"))

        _, r = _reduce(e, op, x, (dim,), [(d, _extreme(d, strict == "lt")), (dt.int64, 0)],
                       combine)
        return _keep(e, op, r, (dim,))
    return emit


lowering(REGISTRY["argmax"])(_arg("gt"))
lowering(REGISTRY["argmin"])(_arg("lt"))


# --- scans and sorting: one extra reduction loop over the scanned dim (O(n^2) work) --------
def _index(e, loop):
    return e.emit(f"linalg.index {loop} : index")


def _index_i64(e, loop):
    return e.emit(f"arith.index_cast {_index(e, loop)} : index to i64")


def _along(rank, dim, loop):
    """The identity map with ``dim`` replaced by loop ``loop``."""
    return tuple(loop if i == dim else i for i in range(rank))


@lowering(REGISTRY["cumsum"])
def _cumsum(e, op, x):
    a, dim, reverse = op.inputs[0].aval, op.params["dim"], op.params["reverse"]
    d, rank = a.dtype, len(a.shape)
    add = e.need(BINARY["add"], d)

    def body(v, acc):
        pred = "uge" if reverse else "ule"
        take = e.emit(f"arith.cmpi {pred}, {_index(e, rank)}, {_index(e, dim)} : index")
        v = e.select(take, v, e.const(0, d), d)
        return add(e, d, acc, v)

    return e.generic([(x, a)], [(e.full(a.shape, d, 0), a)],
                     [_along(rank, dim, rank), tuple(range(rank))],
                     ["parallel"] * rank + ["reduction"], body)


def _before(e, d, xj, xi, descending):
    """(xj sorts before xi, xj ties with xi) as i1; NaN sorts above every number."""
    c = dclass(d)
    lt = CMP["gt" if descending else "lt"][c](e, d, xj, xi)
    same = CMP["eq"][c](e, d, xj, xi)
    if c != "float":
        return lt, same
    t = elem_type(d)
    ni, nj = (e.emit(f"arith.cmpf uno, {v}, {v} : {t}") for v in (xi, xj))
    true = e.const(True, dt.bool_)
    nan_first = e.emit(f"arith.andi {nj if descending else ni}, "
                       f"{e.emit(f'arith.xori {ni if descending else nj}, {true} : i1')} : i1")
    lt = e.emit(f"arith.ori {lt}, {nan_first} : i1")
    same = e.emit(f"arith.ori {same}, {e.emit(f'arith.andi {ni}, {nj} : i1')} : i1")
    return lt, same


@lowering(REGISTRY["argsort"])
def _argsort(e, op, x):
    """rank[i] = #{j before i} (ties by index: stable); out[r] = the i with rank r < k."""
    a, out = op.inputs[0].aval, op.out.aval
    dim, descending = op.params["dim"], op.params["descending"]
    d, rank = a.dtype, len(a.shape)
    e.need(CMP["lt"], d)
    ranks_aval = type(a)(a.shape, dt.int64)

    def count(xi, xj, acc):
        lt, same = _before(e, d, xj, xi, descending)
        earlier = e.emit(f"arith.cmpi ult, {_index(e, rank)}, {_index(e, dim)} : index")
        tie = e.emit(f"arith.andi {same}, {earlier} : i1")
        hit = e.emit(f"arith.extui {e.emit(f'arith.ori {lt}, {tie} : i1')} : i1 to i64")
        return e.emit(f"arith.addi {acc}, {hit} : i64")

    ident = tuple(range(rank))
    ranks = e.generic([(x, a), (x, a)], [(e.full(a.shape, dt.int64, 0), ranks_aval)],
                      [ident, _along(rank, dim, rank), ident],
                      ["parallel"] * rank + ["reduction"], count)

    def pick(r_i, acc):
        hit = e.emit(f"arith.cmpi eq, {r_i}, {_index_i64(e, dim)} : i64")
        i = e.emit(f"arith.select {hit}, {_index_i64(e, rank)}, {e.const(0, dt.int64)} : i64")
        return e.emit(f"arith.addi {acc}, {i} : i64")

    return e.generic([(ranks, ranks_aval)], [(e.full(out.shape, dt.int64, 0), out)],
                     [_along(rank, dim, rank), ident], ["parallel"] * rank + ["reduction"], pick)
