"""Shape primitives: reshape (collapse/expand_shape), expand (drop the broadcast unit dims,
then a broadcasting generic), permute (linalg.transpose), concat (insert_slice chain),
view_as_real and view_as_complex (slices of the pair dim and elementwise maps), strided
(a generic reading the flattened input with tensor.extract)."""

from __future__ import annotations

import math

from ...autodiff import REGISTRY
from ... import dtypes as dt
from .indexing import insert_slice
from .emitter import elem_type, lowering, tensor_type, unsupported


@lowering(REGISTRY["reshape"])
def _reshape(e, op, x):
    a = op.inputs[0].aval
    return e.reshape(x, a.shape, op.out.aval.shape, a.dtype)


@lowering(REGISTRY["expand"])
def _expand(e, op, x):
    a, out = op.inputs[0].aval, op.out.aval
    kept = [i for i, (s, t) in enumerate(zip(a.shape, out.shape)) if s == t]
    if len(kept) == len(a.shape):
        return x
    squeezed = type(a)(tuple(a.shape[i] for i in kept), a.dtype)
    x = e.reshape(x, a.shape, squeezed.shape, a.dtype)
    rank = len(out.shape)
    return e.generic(
        [(x, squeezed)],
        [(e.empty(out.shape, out.dtype), out)],
        [kept, tuple(range(rank))],
        ["parallel"] * rank,
        lambda v, _: v,
    )


@lowering(REGISTRY["permute"])
def _permute(e, op, x):
    a, out, perm = op.inputs[0].aval, op.out.aval, op.params["perm"]
    if tuple(perm) == tuple(range(len(perm))):
        return x
    init = e.empty(out.shape, out.dtype)
    return e.emit(
        f"linalg.transpose ins({x} : {tensor_type(a.shape, a.dtype)}) "
        f"outs({init} : {tensor_type(out.shape, out.dtype)}) "
        f"permutation = [{', '.join(map(str, perm))}]"
    )


@lowering(REGISTRY["concat"])
def _concat(e, op, *xs):
    out, dim = op.out.aval, op.params["dim"]
    r, start = e.empty(out.shape, out.dtype), 0
    for x, v in zip(xs, op.inputs):
        n = v.aval.shape[dim]
        if n:
            r = insert_slice(
                e,
                x,
                v.aval,
                r,
                out,
                tuple(start if k == dim else 0 for k in range(len(out.shape))),
                tuple(start + n if k == dim else s for k, s in enumerate(out.shape)),
                (1,) * len(out.shape),
            )
        start += n  # a dynamic size along the batch: Syms add up
    return r


# view_as_real and view_as_complex through slices of the pair dim and elementwise maps (a
# generic reading both parts of a pair by constant indexing maps, fed by one selecting a
# part by linalg.index, was miscompiled by IREE 3.13 on llvm-cpu: one output lost its
# imaginary parts)
@lowering(REGISTRY["view_as_real"])
def _view_as_real(e, op, x):
    a, out = op.inputs[0].aval, op.out.aval
    rank, t = len(out.shape), elem_type(a.dtype)
    part, unit = type(out)(a.shape, out.dtype), type(out)(a.shape + (1,), out.dtype)
    r = e.empty(out.shape, out.dtype)
    for k, name in enumerate(("re", "im")):
        v = e.map([x], [a], part, lambda z, name=name: e.emit(f"complex.{name} {z} : {t}"))
        v = e.reshape(v, a.shape, unit.shape, out.dtype)
        at = (0,) * (rank - 1) + (k,)
        r = insert_slice(e, v, unit, r, out, at, a.shape + (k + 1,), (1,) * rank)
    return r


@lowering(REGISTRY["view_as_complex"])
def _view_as_complex(e, op, x):
    a, out = op.inputs[0].aval, op.out.aval
    rank, unit = len(a.shape), a.shape[:-1] + (1,)
    parts = []
    for k in (0, 1):
        v = e.emit(
            f"tensor.extract_slice {x}{e.window((0,) * (rank - 1) + (k,), unit, (1,) * rank)} : "
            f"{tensor_type(a.shape, a.dtype)} to {tensor_type(unit, a.dtype)}"
        )
        parts.append(e.reshape(v, unit, out.shape, a.dtype))
    part = type(a)(out.shape, a.dtype)
    t = elem_type(out.dtype)
    return e.map(
        parts, [part, part], out, lambda re_, im_: e.emit(f"complex.create {re_}, {im_} : {t}")
    )


@lowering(REGISTRY["strided"])
def _strided(e, op, x):
    """A generic over the output reading the flattened input at ``offset + sum(i_k *
    strides[k])`` with tensor.extract."""
    a, out, p = op.inputs[0].aval, op.out.aval, op.params
    if 0 in out.shape:
        return e.full(out.shape, out.dtype, 0)
    n = math.prod(a.shape)
    flat = e.reshape(x, a.shape, (n,), a.dtype)

    def body(_):
        at = e.index(p["offset"])
        for k, s in enumerate(p["strides"]):
            if s and out.shape[k] > 1:
                step = e.emit(
                    f"arith.muli {e.emit(f'linalg.index {k} : index')}, {e.index(s)} : index"
                )
                at = e.emit(f"arith.addi {at}, {step} : index")
        return e.emit(f"tensor.extract {flat}[{at}] : {tensor_type((n,), a.dtype)}")

    rank = len(out.shape)
    return e.generic(
        [], [(e.empty(out.shape, out.dtype), out)], [tuple(range(rank))], ["parallel"] * rank, body
    )


# a tensor's bits as another dtype of the same width: arith.bitcast per element. Other
# widths (a repacking of the last dim), bool and complex run eagerly only
_BITCAST_WHY = "x.view(dtype) of bool, complex or another width runs eagerly only"
unsupported("view_dtype", dict.fromkeys(("bool", "complex"), _BITCAST_WHY))


@lowering(REGISTRY["view_dtype"])
def _view_dtype(e, op, x):
    src, dst = op.inputs[0].aval.dtype, op.out.aval.dtype
    if src.itemsize != dst.itemsize or dt.bool_ in (src, dst) or dst.is_complex:
        e.fail(_BITCAST_WHY, src)
    bitcast = f"arith.bitcast {{}} : {elem_type(src)} to {elem_type(dst)}"
    return e.map((x,), [op.inputs[0].aval], op.out.aval, lambda a: e.emit(bitcast.format(a)))
