"""Sliding windows: ``im2col`` gathers every window of a (padded) input, ``col2im`` sums
windows back into an input-shaped tensor. Each is the other's transpose, so convolution
and pooling compose from them (plus matmul and reductions) and differentiate to any order.

Layouts, for ``k`` spatial dims: ``x`` is ``(N, C, *spatial)``; the windows are
``(N, *out, C, *kernel)``. ``padding`` is one ``(low, high)`` pair per spatial dim. How the
NumPy impl lays the windows out in memory is Note [window layout]. The fused eager
kernels of convolution (groups=1) and max pooling live here too: eagerly they replace the
composites ``staged/eager/ops/layers.py`` builds from these primitives.
"""

from __future__ import annotations

import itertools
import math

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


def batch_last(kernel, stride, dilation) -> bool:
    """Whether the NumPy impls lay windows out batch-last, (C, *kernel, *out, N), rather
    than per sample, (N, C, *kernel, *out): for windows that overlap (Note [window
    layout])."""
    return any(s < d * (n - 1) + 1 for n, s, d in zip(kernel, stride, dilation))


# Note [window layout]: im2col's result is (N, *out, C, *kernel), but eagerly it is a
# transposed view of an array laid out either per sample, (N, C, *kernel, *out), or
# batch-last, (C, *kernel, *out, N) (``batch_last``), and col2im reads its operand and
# accumulates in the same order. What makes them fast:
# - each kernel offset's windows are one block whose rows are (strided) rows of the
#   input, where the window-major layout copies runs one kernel row long (5x5 windows of
#   a 28x28 input 9x slower);
# - overlapping windows (convolutions) are copied, and summed back, one kernel offset at a
#   time: batch-last, a row of that is out_w * N elements long (NumPy's per-row cost made
#   col2im's 25 adds of 8-element rows 4x slower per sample); the input is transposed to
#   (C, *spatial, N) once, and the convolution is one matmul of the weight by
#   (C * prod(kernel), prod(out) * N) (layers.py: _conv_composite, and conv_impl below);
# - windows that do not overlap (pooling) are one tile each: one copy per sample, and the
#   pooling reductions run over kernel dims outer to the output's, with the result in
#   PyTorch's (N, C, *out) layout.
# The layout is the NumPy impls' alone: the primitives' meaning and their lowerings know
# nothing of it, and an op that permutes the windows otherwise only pays for a copy.


def _im2col(x, *, kernel, stride, padding, dilation, pad_value):
    k = len(kernel)
    padded = _padded(x.shape[2:], padding)
    out = window_output_shape(padded, kernel, stride, ((0, 0),) * k, dilation)
    if batch_last(kernel, stride, dilation):
        cols = _batch_last_windows(x, kernel, stride, padding, dilation, pad_value)
        # (C, *kernel, *out, N) -> (N, *out, C, *kernel)
        return cols.transpose(
            (1 + 2 * k,) + tuple(range(1 + k, 1 + 2 * k)) + (0,) + tuple(range(1, 1 + k))
        )
    if any(lo or hi for lo, hi in padding):
        x = np.pad(x, ((0, 0), (0, 0)) + tuple(padding), constant_values=pad_value)
    cols = np.empty(x.shape[:2] + tuple(kernel) + out, x.dtype)
    tiles = _tiles(x, kernel, stride, dilation, out)
    if tiles is not None:
        cols[...] = tiles
    else:  # strides past the end of the input: one block per kernel offset
        for idx in _offsets(kernel):
            cols[(slice(None), slice(None)) + idx] = x[_block(idx, stride, dilation, out)]
    # (N, C, *kernel, *out) -> (N, *out, C, *kernel)
    return cols.transpose((0,) + tuple(range(2 + k, 2 + 2 * k)) + (1,) + tuple(range(2, 2 + k)))


def _batch_last_input(x, padding, pad_value):
    """``x`` (N, C, *spatial) padded, as (C, *padded, N)."""
    padded = _padded(x.shape[2:], padding)
    xt = np.empty((x.shape[1],) + padded + (x.shape[0],), x.dtype)
    if padded != x.shape[2:]:
        xt.fill(pad_value)
    xt[(slice(None),) + _inner(x.shape[2:], padding)] = np.moveaxis(x, 0, -1)
    return xt


def _inner(spatial, padding) -> tuple:
    """The slices of a padded array that hold the input."""
    return tuple(slice(lo, lo + s) for s, (lo, _) in zip(spatial, padding))


def _offsets(kernel):
    return itertools.product(*map(range, kernel))


def _batch_last_windows(x, kernel, stride, padding, dilation, pad_value):
    """The windows of ``x`` as (C, *kernel, *out, N): one (C, *out, N) block of the
    transposed input per kernel offset."""
    xt = _batch_last_input(x, padding, pad_value)
    out = window_output_shape(xt.shape[1:-1], kernel, stride, ((0, 0),) * len(kernel), dilation)
    cols = np.empty((x.shape[1],) + tuple(kernel) + out + (x.shape[0],), x.dtype)
    for idx in _offsets(kernel):
        cols[(slice(None),) + idx] = xt[_block(idx, stride, dilation, out)[1:] + (slice(None),)]
    return cols


def _block(idx, stride, dilation, out):
    """The (N, C, *out) block of the input that kernel offset ``idx`` of every window reads."""
    return (slice(None), slice(None)) + tuple(
        slice(i * d, i * d + s * (o - 1) + 1, s) for i, d, s, o in zip(idx, dilation, stride, out)
    )


def _tiles(x, kernel, stride, dilation, out):
    """For windows that do not overlap and whose strides fit in the input: a
    (N, C, *kernel, *out) view of ``x`` cut into one tile per window (one copy of it beats a
    strided copy per kernel offset 3x for 2x2 pooling); else None."""
    k = len(kernel)
    if any(o * s > p for s, o, p in zip(stride, out, x.shape[2:])):
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
    if batch_last(kernel, stride, dilation):
        # (N, *out, C, *kernel) -> (C, *kernel, *out, N)
        cols = cols.transpose(
            (1 + k,) + tuple(range(2 + k, 2 + 2 * k)) + tuple(range(1, 1 + k)) + (0,)
        )
        return _batch_last_sum(cols, shape, stride, padding, dilation)
    # (N, *out, C, *kernel) -> (N, C, *kernel, *out), summed into (N, C, *padded)
    cols = cols.transpose((0, 1 + k) + tuple(range(2 + k, 2 + 2 * k)) + tuple(range(1, 1 + k)))
    acc = np.zeros(cols.shape[:2] + _padded(shape, padding), cols.dtype)
    tiles = _tiles(acc, kernel, stride, dilation, out)
    if tiles is not None:  # each input element is in one window at most
        tiles[...] = cols
    else:
        for idx in _offsets(kernel):
            acc[_block(idx, stride, dilation, out)] = cols[(slice(None), slice(None)) + idx]
    return acc[(slice(None), slice(None)) + _inner(shape, padding)]


def _padded(spatial, padding) -> tuple:
    return tuple(s + lo + hi for s, (lo, hi) in zip(spatial, padding))


def _batch_last_sum(cols, spatial, stride, padding, dilation):
    """Windows (C, *kernel, *out, N) summed back into an input (N, C, *spatial), one
    strided add per kernel offset."""
    k = len(spatial)
    kernel, out = cols.shape[1 : 1 + k], cols.shape[1 + k : 1 + 2 * k]
    acc = np.zeros(cols.shape[:1] + _padded(spatial, padding) + cols.shape[-1:], cols.dtype)
    for idx in _offsets(kernel):
        acc[_block(idx, stride, dilation, out)[1:] + (slice(None),)] += cols[(slice(None),) + idx]
    return np.ascontiguousarray(np.moveaxis(acc[(slice(None),) + _inner(spatial, padding)], -1, 0))


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


# --- max pooling's fused eager kernels (staged/eager/ops/layers.py declares them) ---------
def _offset_blocks(a, kernel, stride, dilation, out):
    """The (N, C, *out) views of ``a`` (N, C, *padded) that each kernel offset of every
    window reads, in the windows' order."""
    return [a[_block(idx, stride, dilation, out)] for idx in _offsets(kernel)]


def _pool_blocks(x, kernel, stride, padding, dilation):
    """``x`` padded with -inf and its blocks, with the windows' output shape."""
    if any(lo or hi for lo, hi in padding):
        x = np.pad(x, ((0, 0), (0, 0)) + tuple(padding), constant_values=-np.inf)
    out = window_output_shape(x.shape[2:], kernel, stride, ((0, 0),) * len(kernel), dilation)
    return x, _offset_blocks(x, kernel, stride, dilation, out)


def max_pool_impl(x, *, kernel, stride, padding, dilation):
    """The maximum of each window of a floating ``x`` (NaN where it holds one): one
    ``maximum`` per kernel offset over strided blocks, no windows copied."""
    _, blocks = _pool_blocks(x, kernel, stride, padding, dilation)
    y = np.array(blocks[0])
    for b in blocks[1:]:
        np.maximum(y, b, out=y)
    return y


def max_pool_dx_impl(g, x, out, *, kernel, stride, padding, dilation):
    """Max pooling's input gradient: each window's ``g`` to PyTorch's pick in it, its first
    maximum or, in a window holding NaN, its last NaN. Masks by boolean arithmetic, not
    ``copyto(where=)``, whose branch per element costs 4x on random data."""
    xp, blocks = _pool_blocks(x, kernel, stride, padding, dilation)
    acc = np.zeros(xp.shape, g.dtype)
    targets = _offset_blocks(acc, kernel, stride, dilation, out.shape[2:])
    finite = np.isfinite(g).all()  # else g * 0 is NaN: zeros by where
    overlap = batch_last(kernel, stride, dilation)
    found, hit = np.zeros(out.shape, np.bool_), np.empty(out.shape, np.bool_)

    def give(t, first):  # ``g`` to the windows ``hit`` picks at one kernel offset
        np.greater(hit, found, out=hit)  # not picked at an earlier one
        np.logical_or(found, hit, out=found)
        part = g * hit if finite else np.where(hit, g, 0)
        if first and not overlap:  # each element of ``t`` in no other block
            t[...] = part
        else:
            t += part

    for b, t in zip(blocks, targets):
        np.equal(b, out, out=hit)
        give(t, True)
    if not found.all():  # windows whose maximum is NaN, scanned from their end
        for b, t in zip(reversed(blocks), reversed(targets)):
            np.isnan(b, out=hit)
            give(t, False)
    return acc[(slice(None), slice(None)) + _inner(x.shape[2:], padding)]


# --- convolution's fused eager kernels (groups=1; staged/eager/ops/layers.py declares them)
# The windows are laid out batch-last (Note [window layout]); the weight's gradient makes
# them again rather than have them saved from the forward. What a training step gains: a
# megabyte-sized array kept alive from forward to backward is memory the allocator hands
# back to the OS and faults in again at the next step (a page fault per 4 KiB, which made
# im2col 3-5x slower in a CNN step than alone); one made and freed within a kernel is
# reused.
def _batch_last_rows(g):
    """``g`` (N, C_out, *out) as the matrix (C_out, prod(out) * N)."""
    return np.moveaxis(g, 0, -1).reshape(g.shape[1], -1)


def conv_impl(x, weight, bias=None, *, stride, padding, dilation):
    """(N, C_out, *out): the weight (C_out, C_in * prod(kernel)) @ the windows."""
    kernel = weight.shape[2:]
    cols = _batch_last_windows(x, kernel, stride, padding, dilation, 0)
    y = weight.reshape(weight.shape[0], -1) @ cols.reshape(cols.shape[0] * math.prod(kernel), -1)
    if bias is not None:
        y += bias[:, None]
    y = y.reshape(weight.shape[:1] + cols.shape[1 + len(kernel) :])
    return np.ascontiguousarray(np.moveaxis(y, -1, 0))


def conv_dx_impl(g, weight, *, shape, stride, padding, dilation):
    """The input gradient: the windows' gradient weight.T @ g summed back (col2im)."""
    cols = weight.reshape(weight.shape[0], -1).T @ _batch_last_rows(g)
    cols = cols.reshape(shape[1:2] + weight.shape[2:] + g.shape[2:] + shape[:1])
    return _batch_last_sum(cols, shape[2:], stride, padding, dilation)


def conv_dw_impl(g, x, *, kernel, stride, padding, dilation):
    """The weight gradient: g @ the windows (transposed), recomputed."""
    cols = _batch_last_windows(x, kernel, stride, padding, dilation, 0)
    dw = _batch_last_rows(g) @ cols.reshape(x.shape[1] * math.prod(kernel), -1).T
    return dw.reshape(g.shape[1:2] + x.shape[1:2] + tuple(kernel))
