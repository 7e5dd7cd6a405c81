"""Reductions: ReduceSum/Max/Min with the dims as an axes tensor (float sums blocked),
ArgMax/ArgMin.
onnxruntime's max/min reductions skip a NaN anywhere but first; NumPy's NaN wins, so for
float inputs the NaN mask is reduced too and selected where any."""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...autodiff import REGISTRY
from ...autodiff.blocked import levels
from .model import lowering


def _reduce(op_type: str, bool_op: str):
    def lower(b, op, x):
        d, dims = op.inputs[0].aval.dtype, op.params["dims"]
        if not dims:
            return x  # NumPy reduces over no axes: the value itself
        keep = int(op.params["keepdim"])
        if op_type == "ReduceSum" and (d.is_floating_point or d.is_complex):
            x = _blocked(b, x, op.inputs[0].aval, dims)
        if op_type in _WRAPPED and d in (dt.int32, dt.int64):
            exact = _wrapped(b, op_type, x, op.inputs[0].aval, dims, keep)
            if exact is not None:
                return exact
        axes = b.const(np.array(dims, np.int64))
        r = b.kernel(bool_op if d is dt.bool_ else op_type, [x], d, post=[axes], keepdims=keep)
        if op_type in ("ReduceMax", "ReduceMin") and d.is_floating_point:
            r = b.kernel(
                "Where",
                [b.const(np.array(np.nan, d.np)), r],
                d,
                pre=[_any(b, d, _isnan(b, d, x), axes, keep)],
            )
        return r

    return lower


_WRAPPED = ("ReduceSum", "ReduceProd")


def _wrapped(b, op_type, x, a, dims, keep):
    """An int32/int64 sum or product that wraps on overflow, as NumPy's: onnxruntime's
    ReduceSum and ReduceProd saturate int32 and round int64 through doubles (a sum of
    2**60 + 1 and 1 gave 2**60). A sum is the last entry of a CumSum (exact), a product a
    tree of Muls over each dim; None (ReduceSum/ReduceProd) for a dynamic or empty shape."""
    shape = list(a.shape)
    if not all(isinstance(s, int) and s > 0 for s in shape):
        return None
    for i in dims:
        if op_type == "ReduceSum":
            x = b.node("CumSum", [x, b.const(np.array(i, np.int64))])
            x = b.node("Gather", [x, b.const(np.array([-1], np.int64))], axis=i)
            continue
        n = shape[i]
        while n > 1:
            if n % 2:  # one more factor of 1
                pads = np.zeros(2 * len(shape), np.int64)
                pads[len(shape) + i] = 1
                x = b.node("Pad", [x, b.const(pads), b.const(np.array(1, a.dtype.np))])
                n += 1
            pairs = b.node("Reshape", [x, b.shape(shape[:i] + [n // 2, 2] + shape[i + 1 :])])
            half = [
                b.node("Gather", [pairs, b.const(np.array(k, np.int64))], axis=i + 1)
                for k in (0, 1)
            ]
            x, n = b.node("Mul", half), n // 2
            shape[i] = n
    if keep:
        return x
    return b.node("Squeeze", [x, b.const(np.array(dims, np.int64))])


def _blocked(b, x, a, dims):
    """``x`` summed over ``dims`` level by level (Note [blocked sums] in
    ``autodiff/blocked.py``) down to at most BLOCK elements, the dims kept."""
    shape, d = list(a.shape), a.dtype
    for i, s, k in levels(a.shape, dims):
        if s != shape[i]:  # zero padding up to a multiple of the block
            pads = np.zeros(2 * len(shape), np.int64)
            pads[len(shape) + i] = s - shape[i]
            x = b.node("Pad", [x, b.const(pads)])
        split = b.node("Reshape", [x, b.shape(shape[:i] + [s // k, k] + shape[i + 1 :])])
        x = b.kernel(
            "ReduceSum", [split], d, post=[b.const(np.array([i + 1], np.int64))], keepdims=0
        )
        shape[i] = s // k
    return x


def _isnan(b, d, x):
    """1 where ``x`` is NaN, else 0, as ``d`` (bool reductions need opset 20)."""
    return b.cast(b.kernel("IsNaN", [x], d, out=dt.bool_), dt.bool_, d)


def _any(b, d, mask, axes, keep):
    """Whether the 0/1 ``mask`` (of dtype ``d``) has a 1 along ``axes``, as bool."""
    return b.cast(b.kernel("ReduceMax", [mask], d, post=[axes], keepdims=keep), d, dt.bool_)


lowering(REGISTRY["reduce_sum"])(_reduce("ReduceSum", "ReduceMax"))  # a boolean sum is any()
lowering(REGISTRY["reduce_max"])(_reduce("ReduceMax", "ReduceMax"))
lowering(REGISTRY["reduce_min"])(_reduce("ReduceMin", "ReduceMin"))
lowering(REGISTRY["reduce_prod"])(_reduce("ReduceProd", "ReduceMin"))  # a boolean product: all()


def _arg(op_type: str):
    def lower(b, op, x):
        d, kw = (
            op.inputs[0].aval.dtype,
            dict(axis=op.params["dim"], keepdims=int(op.params["keepdim"])),
        )
        r = b.kernel(op_type, [x], d, out=dt.int64, **kw)
        if d.is_floating_point:  # the first NaN, where there is one
            nan = _isnan(b, d, x)
            first = b.kernel("ArgMax", [nan], d, out=dt.int64, **kw)
            axes = b.const(np.array([op.params["dim"]], np.int64))
            r = b.node("Where", [_any(b, d, nan, axes, kw["keepdims"]), first, r])
        return r

    return lower


lowering(REGISTRY["argmax"])(_arg("ArgMax"))
lowering(REGISTRY["argmin"])(_arg("ArgMin"))
