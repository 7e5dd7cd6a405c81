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
for _name in ("reduce_max", "reduce_min", "argmax", "argmin"):
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
