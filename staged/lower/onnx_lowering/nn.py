"""im2col / col2im: one Gather (ScatterElements with add for col2im) of the padded input
flattened per sample, at constant flat indices of every window element; the batch dim
stays free, so it may be dynamic."""

from __future__ import annotations

import math

import numpy as np

from ...autodiff import REGISTRY
from ...tracing.dynamic import is_static
from .model import lowering


def window_index(channels, spatial, kernel, stride, padding, dilation):
    """Flat indices into a padded (C, *spatial) sample, in im2col's (*out, C, *kernel)
    order, and the padded spatial shape."""
    k = len(kernel)
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(spatial, padding))
    out = tuple(
        (p - d * (n - 1) - 1) // st + 1 for p, n, st, d in zip(padded, kernel, stride, dilation)
    )
    grids = np.meshgrid(
        *(np.arange(o) for o in out),
        np.arange(channels),
        *(np.arange(n) for n in kernel),
        indexing="ij",
    )
    flat = grids[k]  # the channel
    for i in range(k):
        flat = flat * padded[i] + grids[i] * stride[i] + grids[k + 1 + i] * dilation[i]
    return flat.reshape(-1).astype(np.int64), padded


def _flat(b, x, shape):
    """``x`` (of ``shape``) reshaped to (N, the rest), N a dim that may be dynamic; the
    rest counted where its dims are static, since ONNX Runtime cannot infer a -1 from an
    empty batch's 0 elements."""
    rest = shape[1:]
    return b.node("Reshape", [x, b.shape((shape[0], math.prod(rest) if is_static(rest) else -1))])


@lowering(REGISTRY["im2col"])
def _im2col(b, op, x):
    p, a = op.params, op.inputs[0].aval
    idx, padded = window_index(
        a.shape[1], a.shape[2:], p["kernel"], p["stride"], p["padding"], p["dilation"]
    )
    if any(lo or hi for lo, hi in p["padding"]):
        pads = [0, 0] + [lo for lo, _ in p["padding"]] + [0, 0] + [hi for _, hi in p["padding"]]
        x = b.node(
            "Pad",
            [x, b.const(np.array(pads, np.int64)), b.const(np.array(p["pad_value"], a.dtype.np))],
        )
    cols = b.node("Gather", [_flat(b, x, (a.shape[0], a.shape[1], *padded)), b.const(idx)], axis=1)
    return b.node("Reshape", [cols, b.shape(op.out.aval.shape)])


@lowering(REGISTRY["col2im"])
def _col2im(b, op, cols):
    p, out = op.params, op.out.aval
    n, c = out.shape[:2]
    idx, padded = window_index(
        c, out.shape[2:], p["kernel"], p["stride"], p["padding"], p["dilation"]
    )
    flat = _flat(b, cols, op.inputs[0].aval.shape)
    index = b.node("Expand", [b.const(idx.reshape(1, -1)), b.node("Shape", [flat])])
    zeros = b.node(
        "Expand", [b.const(np.zeros((1, 1), out.dtype.np)), b.shape((n, c * int(np.prod(padded))))]
    )
    acc = b.node("ScatterElements", [zeros, index, flat], axis=1, reduction="add")
    acc = b.node("Reshape", [acc, b.shape((n, c) + padded)])
    k = len(p["kernel"])
    starts = [lo for lo, _ in p["padding"]]
    stops = [lo + s for s, (lo, _) in zip(out.shape[2:], p["padding"])]
    if starts == [0] * k and list(padded) == stops:
        return acc
    return b.node(
        "Slice",
        [
            acc,
            b.const(np.array(starts, np.int64)),
            b.const(np.array(stops, np.int64)),
            b.const(np.arange(2, 2 + k, dtype=np.int64)),
        ],
    )
