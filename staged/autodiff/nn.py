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
    out = window_output_shape(x.shape[2:], kernel, stride, ((0, 0),) * k, dilation)
    cols = np.empty(x.shape[:2] + tuple(kernel) + out, x.dtype)  # Note [window layout]
    tiles = _tiles(x, kernel, stride, dilation, out)
    if tiles is not None:
        cols[...] = tiles
    else:
        for idx in itertools.product(*map(range, kernel)):
            cols[(slice(None), slice(None)) + idx] = x[_block(idx, stride, dilation, out)]
    return cols.transpose((0,) + tuple(range(2 + k, 2 + 2 * k)) + (1,) + tuple(range(2, 2 + k)))


# Note [window layout]: im2col's result is (N, *out, C, *kernel), but eagerly it is a
# transposed view of an array laid out (N, C, *kernel, *out), and col2im reads its operand
# in that order. Each kernel offset's windows are then one (N, C, *out) block whose rows
# are strided rows of the input (the window-major layout copies runs one kernel row
# long: 5x5 windows of a 28x28 input 9x slower); a convolution's matmul of the weight by
# (C * prod(kernel), prod(out)) per sample reads it as it is and writes (N, C_out, *out),
# PyTorch's layout, with no transpose; pooling reduces over kernel dims outer to the
# output's (elementwise, not along runs of prod(kernel)). The layout is the NumPy impl's
# alone: the primitives' meaning and their lowerings know nothing of it.


def _block(idx, stride, dilation, out):
    """The (N, C, *out) block of the input that kernel offset ``idx`` of every window reads."""
    return (slice(None), slice(None)) + tuple(
        slice(i * d, i * d + s * (o - 1) + 1, s) for i, d, s, o in zip(idx, dilation, stride, out)
    )


def _tiles(x, kernel, stride, dilation, out):
    """Windows that do not overlap (each stride at least its dilated kernel) and whose
    strides fit in the input: a (N, C, *kernel, *out) view of ``x`` cut into one tile per
    window; else None. One copy of it beats a strided copy per kernel offset (3x for 2x2
    pooling)."""
    k = len(kernel)
    if any(
        s < d * (n - 1) + 1 or o * s > p
        for s, n, d, o, p in zip(stride, kernel, dilation, out, x.shape[2:])
    ):
        return None
    cut = x[(slice(None), slice(None)) + tuple(slice(0, o * s) for o, s in zip(out, stride))]
    tiles = cut.reshape(x.shape[:2] + tuple(v for o, s in zip(out, stride) for v in (o, s)))
    tiles = tiles.transpose((0, 1) + tuple(range(3, 2 + 2 * k, 2)) + tuple(range(2, 2 + 2 * k, 2)))
    return tiles[
        (slice(None), slice(None))
        + tuple(slice(0, d * (n - 1) + 1, d) for n, d in zip(kernel, dilation))
    ]


def _col2im(cols, *, shape, kernel, stride, padding, dilation):
    k = len(kernel)
    out = cols.shape[1 : 1 + k]
    cols = cols.transpose((0, 1 + k) + tuple(range(2 + k, 2 + 2 * k)) + tuple(range(1, 1 + k)))
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(shape, padding))
    acc = np.zeros(cols.shape[:2] + padded, cols.dtype)  # (N, C, *padded)
    tiles = _tiles(acc, kernel, stride, dilation, out)
    if tiles is not None:  # each input element is in one window at most
        tiles[...] = cols
    else:
        for idx in itertools.product(*map(range, kernel)):
            acc[_block(idx, stride, dilation, out)] += cols[(slice(None), slice(None)) + idx]
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
