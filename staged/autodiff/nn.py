"""Sliding windows: ``im2col`` gathers every window of a (padded) input, ``col2im`` sums
windows back into an input-shaped tensor. Each is the other's transpose, so convolution
and pooling compose from them (plus matmul and reductions) and differentiate to any order.

Layouts, for ``k`` spatial dims: ``x`` is ``(N, C, *spatial)``; the windows are
``(N, *out, C, *kernel)``, channels next to the kernel so a convolution is one matmul of
``(N * prod(out), C * prod(kernel))`` by the flattened weight. ``padding`` is one
``(low, high)`` pair per spatial dim.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .avals import Aval, ShapeError
from .primitive import LINEAR, Primitive


def window_output_shape(spatial, kernel, stride, padding, dilation) -> tuple:
    """Number of windows per spatial dim (PyTorch's floor rule on the padded size)."""
    return tuple(
        (s + lo + hi - d * (k - 1) - 1) // st + 1
        for s, k, st, (lo, hi), d in zip(spatial, kernel, stride, padding, dilation)
    )


def _check(name, shape, kernel, stride, padding, dilation):
    k = len(kernel)
    if len(shape) != k + 2 or not len(stride) == len(padding) == len(dilation) == k:
        raise ShapeError(
            f"{name}: expected (N, C) plus {k} spatial dims with one kernel size, "
            f"stride, padding and dilation each, got {shape}"
        )
    out = window_output_shape(shape[2:], kernel, stride, padding, dilation)
    if (
        any(o < 1 for o in out)
        or min(stride + dilation + kernel, default=1) < 1
        or min((p for pair in padding for p in pair), default=0) < 0
    ):
        raise ShapeError(
            f"{name}: no window fits: input {shape}, kernel {kernel}, stride "
            f"{stride}, padding {padding}, dilation {dilation}"
        )
    return out


def _im2col_rule(x, *, kernel, stride, padding, dilation, pad_value):
    out = _check("im2col", x.shape, kernel, stride, padding, dilation)
    return Aval((x.shape[0],) + out + (x.shape[1],) + tuple(kernel), x.dtype)


def _col2im_rule(cols, *, shape, kernel, stride, padding, dilation):
    k = len(kernel)
    full = (cols.shape[0], cols.shape[1 + k]) + tuple(shape) if cols.ndim == 2 * k + 2 else None
    if full is None or cols.shape != (full[0],) + _check(
        "col2im", full, kernel, stride, padding, dilation
    ) + (full[1],) + tuple(kernel):
        raise ShapeError(
            f"col2im: windows {cols} do not match input spatial shape {shape} "
            f"with kernel {kernel}, stride {stride}, padding {padding}"
        )
    return Aval(full, cols.dtype)


def _im2col(x, *, kernel, stride, padding, dilation, pad_value):
    k = len(kernel)
    if any(lo or hi for lo, hi in padding):
        x = np.pad(x, ((0, 0), (0, 0)) + tuple(padding), constant_values=pad_value)
    if np.prod(kernel) <= _FEW_OFFSETS:
        return _im2col_by_offset(x, kernel, stride, dilation)
    spans = [d * (n - 1) + 1 for n, d in zip(kernel, dilation)]
    w = sliding_window_view(x, spans, axis=tuple(range(2, 2 + k)))  # (N, C, *pos, *span)
    w = w[
        (slice(None),) * 2
        + tuple(slice(None, None, s) for s in stride)
        + tuple(slice(None, None, d) for d in dilation)
    ]
    perm = (0,) + tuple(range(2, 2 + k)) + (1,) + tuple(range(2 + k, 2 + 2 * k))
    return np.ascontiguousarray(w.transpose(perm))


# Up to this many kernel offsets, copying one strided slice per offset beats NumPy's copy
# of the whole 2k+2-d window view (whose innermost runs are one kernel row long): 2-3x
# for 2x2 pooling, 1.4-2x for 3x3 convolutions; with 5x5 kernels it ranges 0.5-1.2x.
_FEW_OFFSETS = 9


def _im2col_by_offset(x, kernel, stride, dilation):
    out = window_output_shape(x.shape[2:], kernel, stride, ((0, 0),) * len(kernel), dilation)
    cols = np.empty((x.shape[0],) + out + (x.shape[1],) + tuple(kernel), x.dtype)
    channels_last = np.moveaxis(x, 1, -1)
    for idx in itertools.product(*map(range, kernel)):
        cols[(Ellipsis,) + idx] = channels_last[
            (slice(None),)
            + tuple(
                slice(i * d, i * d + s * (o - 1) + 1, s)
                for i, d, s, o in zip(idx, dilation, stride, out)
            )
        ]
    return cols


def _col2im(cols, *, shape, kernel, stride, padding, dilation):
    k = len(kernel)
    out_sp = cols.shape[1 : 1 + k]
    n, c = cols.shape[0], cols.shape[1 + k]
    acc = np.zeros((n, c) + tuple(s + lo + hi for s, (lo, hi) in zip(shape, padding)), cols.dtype)
    cols = np.moveaxis(cols, 1 + k, 1)  # (N, C, *out, *kernel)
    for idx in itertools.product(*map(range, kernel)):
        at = tuple(
            slice(i * d, i * d + s * (o - 1) + 1, s)
            for i, d, s, o in zip(idx, dilation, stride, out_sp)
        )
        acc[(slice(None), slice(None)) + at] += cols[(Ellipsis,) + idx]
    return acc[
        (slice(None), slice(None)) + tuple(slice(lo, lo + s) for s, (lo, _) in zip(shape, padding))
    ]


def _im2col_vjp(g, x_aval, kernel, stride, padding, dilation):
    return col2im(
        g,
        shape=tuple(x_aval.shape[2:]),
        kernel=kernel,
        stride=stride,
        padding=padding,
        dilation=dilation,
    )


def _im2col_jvp(primals, tangents, out, **params):
    # the padding is a constant: tangents are padded with zeros whatever pad_value is
    return im2col(tangents[0], **{**params, "pad_value": 0.0})


def _col2im_vjp(g, kernel, stride, padding, dilation):
    return im2col(
        g, kernel=kernel, stride=stride, padding=padding, dilation=dilation, pad_value=0.0
    )


im2col = Primitive(
    "im2col", _im2col, _im2col_rule, vjp=_im2col_vjp, jvp=_im2col_jvp, node_name="Im2ColBackward0"
)
col2im = Primitive(
    "col2im", _col2im, _col2im_rule, vjp=_col2im_vjp, jvp=LINEAR, node_name="Col2ImBackward0"
)
