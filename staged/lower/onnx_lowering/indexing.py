"""Indexing: Slice, its scatter (ScatterElements one sliced axis at a time), GatherElements,
ScatterElements with add, mul, max or min (scatter_add, scatter_reduce) and scatter (their
indices clamped; scatter: the last write wins, a max
ScatterElements of positions, as plain ScatterElements leaves the order of duplicates
undefined), check and barrier (the identity); cumsum (CumSum) and argsort (TopK, which
breaks ties by index)."""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...autodiff import REGISTRY
from .model import carrier, lowering, onnx_type


def _slice_node(b, x, starts, stops, steps, axes):
    return b.node(
        "Slice",
        [
            x,
            b.shape([starts[a] for a in axes]),
            b.shape([stops[a] for a in axes]),
            b.const(np.array(axes, np.int64)),
            b.const(np.array([steps[a] for a in axes], np.int64)),
        ],
    )


def _sliced_axes(shape, starts, stops, steps):
    return [
        a
        for a, (n, s, e, st) in enumerate(zip(shape, starts, stops, steps))
        if (s, e, st) != (0, n, 1)
    ]


@lowering(REGISTRY["slice"])
def _slice(b, op, x):
    p = op.params
    axes = _sliced_axes(op.inputs[0].aval.shape, p["starts"], p["stops"], p["steps"])
    return _slice_node(b, x, p["starts"], p["stops"], p["steps"], axes) if axes else x


@lowering(REGISTRY["slice_scatter"])
def _slice_scatter(b, op, x, src):
    p = op.params
    axes = _sliced_axes(op.inputs[0].aval.shape, p["starts"], p["stops"], p["steps"])
    return _scatter_axes(b, x, src, op.inputs[1].aval.shape, axes, p) if axes else src


def _scatter_axes(b, x, src, src_shape, axes, p):
    """``x`` with ``src`` written at the slice over ``axes``: slice ``x`` along the first
    axis, write ``src`` into that recursively, then scatter the result along the axis."""
    a, rest = axes[0], axes[1:]
    if rest:
        part = _slice_node(b, x, p["starts"], p["stops"], p["steps"], [a])
        src = _scatter_axes(b, part, src, src_shape, rest, p)
    n = src_shape[a]
    pos = np.arange(p["starts"][a], p["starts"][a] + n * p["steps"][a], p["steps"][a])
    pos = pos.astype(np.int64).reshape([n if i == a else 1 for i in range(len(src_shape))])
    index = b.node("Expand", [b.const(pos), b.node("Shape", [src])])
    return b.node("ScatterElements", [x, index, src], axis=a)


def _clamped(b, index, n):
    """``index`` clamped to ``[0, n)``: onnxruntime fails a whole run on an index out of
    range; the step's check reports it instead, as NaN results (Note [index checks])."""
    last = b.node("Sub", [b.scalar(n, dt.int64), b.const(np.array(1, np.int64))])
    return b.node("Clip", [index, b.const(np.array(0, np.int64)), last])


@lowering(REGISTRY["gather"])
def _gather(b, op, x, index):
    dim = op.params["dim"]
    return b.node("GatherElements", [x, _clamped(b, index, op.inputs[0].aval.shape[dim])], axis=dim)


def _scatter_elements(b, op, x, index, src, reduction):
    dim, d = op.params["dim"], op.out.aval.dtype
    c = carrier(f"ScatterElements {reduction}", d)  # float16 adds in float32, bool's max in int32
    out = b.node(
        "ScatterElements",
        [b.cast(x, d, c), _clamped(b, index, op.inputs[0].aval.shape[dim]), b.cast(src, d, c)],
        axis=dim,
        reduction=reduction,
    )
    return b.cast(out, c, d)


@lowering(REGISTRY["scatter_add"])
def _scatter_add(b, op, x, index, src):
    return _scatter_elements(b, op, x, index, src, "add")


@lowering(REGISTRY["scatter_reduce"])
def _scatter_reduce(b, op, x, index, src):
    reduction = {"prod": "mul", "amax": "max", "amin": "min"}[op.params["reduce"]]
    return _scatter_elements(b, op, x, index, src, reduction)


@lowering(REGISTRY["check"])
def _check(b, op, report):
    return report


@lowering(REGISTRY["barrier"])
def _barrier(b, op, x):
    return x


@lowering(REGISTRY["scatter"])
def _scatter(b, op, x, index, src):
    # each destination's last writer (the max position along dim that hits it), then a
    # gather of that source: exact, whatever order a runtime applies duplicate updates in
    dim, xa = op.params["dim"], op.inputs[0].aval
    if 0 in op.inputs[1].aval.shape:
        return x
    one = b.const(np.array(1, np.int64))
    ones = b.node("Expand", [one, b.node("Shape", [index])])
    pos = b.node("Sub", [b.node("CumSum", [ones, b.const(np.array(dim, np.int64))]), one])
    none = b.node("Expand", [b.const(np.array(-1, np.int64)), b.shape(xa.shape)])
    last = b.node(
        "ScatterElements", [none, _clamped(b, index, xa.shape[dim]), pos], axis=dim, reduction="max"
    )
    hit = b.node("GreaterOrEqual", [last, b.const(np.array(0, np.int64))])
    got = b.node(
        "GatherElements", [src, b.node("Max", [last, b.const(np.array(0, np.int64))])], axis=dim
    )
    return b.kernel("Where", [got, x], xa.dtype, pre=[hit])  # no bool Where in onnxruntime


@lowering(REGISTRY["cumsum"])
def _cumsum(b, op, x):
    return b.kernel(
        "CumSum",
        [x],
        op.out.aval.dtype,
        post=[b.const(np.array(op.params["dim"], np.int64))],
        reverse=int(op.params["reverse"]),
    )


def _topk(b, x, k, p):
    return b.node(
        "TopK",
        [x, b.const(np.array([k], np.int64))],
        n_out=2,
        axis=p["dim"],
        largest=int(p["descending"]),
        sorted=1,
    )[1]


@lowering(REGISTRY["argsort"])
def _argsort(b, op, x):
    # TopK breaks ties by index (a stable sort); NaN must sort above every number, so
    # floats are sorted twice: with NaN as +inf, then stably by isnan
    p, d = op.params, op.inputs[0].aval.dtype
    c = carrier("TopK", d)  # float16 sorts as float32
    x, d = b.cast(x, d, c), c
    if not d.is_floating_point:
        return _topk(b, x, p["k"], p)
    nan = b.kernel("IsNaN", [x], d, out=dt.bool_)
    inf = b.const(np.array(np.inf, d.np))
    order = _topk(b, b.node("Where", [nan, inf, x]), op.inputs[0].aval.shape[p["dim"]], p)
    key = b.node(
        "Cast", [b.node("GatherElements", [nan, order], axis=p["dim"])], to=onnx_type(dt.int32)
    )
    return b.node("GatherElements", [order, _topk(b, key, p["k"], p)], axis=p["dim"])
