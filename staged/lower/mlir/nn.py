"""Window primitives. im2col: the input padded (a fill plus insert_slice) and cut to the
extent the windows read, then one gathering linalg.generic whose input map reads ``out * stride + kernel * dilation``.
col2im: the windows spread out with a strided insert_slice into zeros (so that every
kernel offset reads a shifted copy of them, in bounds), then one elementwise generic over
the input's positions with an operand per kernel offset (the first a slice of it, read
by a plain map), summed in order: two dispatches where a strided slice-add-insert per
offset made two each (a 5x5 kernel's backward pass 50, each compiled and run on its
own). Not a reduction over the offsets (IREE 3.13's vectorizer failed on one:
"vector.multi_reduction ... reduction dimension out of range"), nor tensor.extract reads
(25 gathers compiled slower than the 50 dispatches)."""

from __future__ import annotations

import itertools

from ...autodiff import REGISTRY
from .elementwise import BINARY
from .emitter import lowering, tensor_type


def _slice(e, x, src_aval, offsets, sizes, strides, dst_shape) -> str:
    return e.emit(
        f"tensor.extract_slice {x}{e.window(offsets, sizes, strides)} : "
        f"{tensor_type(src_aval.shape, src_aval.dtype)} to "
        f"{tensor_type(dst_shape, src_aval.dtype)}"
    )


def _insert(e, src, src_shape, dst, dst_aval, offsets, strides) -> str:
    d = dst_aval.dtype
    return e.emit(
        f"tensor.insert_slice {src} into {dst}{e.window(offsets, src_shape, strides)} "
        f": {tensor_type(src_shape, d)} into {tensor_type(dst_aval.shape, d)}"
    )


@lowering(REGISTRY["im2col"])
def _im2col(e, op, x):
    a, out, p = op.inputs[0].aval, op.out.aval, op.params
    kernel, stride, dilation = p["kernel"], p["stride"], p["dilation"]
    k = len(kernel)
    if any(lo or hi for lo, hi in p["padding"]):
        padded = type(a)(
            a.shape[:2] + tuple(s + lo + hi for s, (lo, hi) in zip(a.shape[2:], p["padding"])),
            a.dtype,
        )
        x = _insert(
            e,
            x,
            a.shape,
            e.full(padded.shape, a.dtype, p["pad_value"]),
            padded,
            (0, 0) + tuple(lo for lo, _ in p["padding"]),
            (1,) * len(a.shape),
        )
        a = padded
    # read exactly the rows the windows reach: once IREE folds unit loop dims, a read map
    # like ``d1 * 2 + d4`` may become the plain ``d4``, whose size must then match
    needed = tuple(
        (o - 1) * s + (n - 1) * dl + 1
        for o, s, n, dl in zip(out.shape[1 : 1 + k], stride, kernel, dilation)
    )
    if needed != tuple(a.shape[2:]):
        x = _slice(
            e,
            x,
            a,
            (0,) * len(a.shape),
            a.shape[:2] + needed,
            (1,) * len(a.shape),
            a.shape[:2] + needed,
        )
        a = type(a)(a.shape[:2] + needed, a.dtype)
    # a dim of kernel 1 reads ``out * stride`` alone: a strided slice takes it first. As a
    # read map (``d1 * 2`` once IREE folds the unit kernel loop) IREE 3.x miscompiled it
    # where the input's producer fused into it had other readers: they read wrong values
    # (a 1x1 stride-2 conv, ResNet's downsample, before a 3x3 conv of the same input)
    unit = tuple(n == 1 and s > 1 for n, s in zip(kernel, stride))
    if any(unit):
        sizes = a.shape[:2] + tuple(
            o if u else n for o, u, n in zip(out.shape[1 : 1 + k], unit, a.shape[2:])
        )
        steps = (1, 1) + tuple(s if u else 1 for s, u in zip(stride, unit))
        x = _slice(e, x, a, (0,) * len(a.shape), sizes, steps, sizes)
        a = type(a)(sizes, a.dtype)
        stride = tuple(1 if u else s for s, u in zip(stride, unit))
    # loops: n, out_1..out_k, c, kernel_1..kernel_k (the output's dims)
    reads = (0, 1 + k) + tuple(
        f"d{1 + i} * {stride[i]} + d{2 + k + i} * {dilation[i]}" for i in range(k)
    )
    rank = len(out.shape)
    return e.generic(
        [(x, a)],
        [(e.empty(out.shape, out.dtype), out)],
        [reads, tuple(range(rank))],
        ["parallel"] * rank,
        lambda v, _: v,
    )


@lowering(REGISTRY["col2im"])
def _col2im(e, op, cols):
    a, out, p = op.inputs[0].aval, op.out.aval, op.params
    kernel, stride, dilation, padding = p["kernel"], p["stride"], p["dilation"], p["padding"]
    k, d = len(kernel), out.dtype
    add = e.need(BINARY["add"], d)
    n, c, windows = a.shape[0], a.shape[1 + k], a.shape[1 : 1 + k]
    # the windows spread out to their places (a zero between two), with a zero margin of
    # one kernel's reach on each side: every offset's read is then in bounds. One more
    # row in front: linalg requires an operand read at offset 0 (``d2``, not ``d2 + 1``)
    # to be the loop's size, which this one is not
    margin = [(size - 1) * dl + 1 for size, dl in zip(kernel, dilation)]
    extent = tuple(
        max(size + lo + m, (o - 1) * s + m + 1)
        for size, (lo, _), m, o, s in zip(out.shape[2:], padding, margin, windows, stride)
    )
    spread = type(a)((n, *extent, c, *kernel), d)
    z = _insert(
        e,
        cols,
        a.shape,
        e.full(spread.shape, d, 0),
        spread,
        (0, *margin, 0) + (0,) * k,
        (1, *stride, 1) + (1,) * k,
    )
    offsets = list(itertools.product(*map(range, kernel)))
    starts = [
        tuple(lo + m - j * dl for (lo, _), m, j, dl in zip(padding, margin, offset, dilation))
        for offset in offsets
    ]
    reads = [
        (0, *(f"d{2 + i} + {s}" for i, s in enumerate(start)), 1, *map(str, offset))
        for start, offset in zip(starts[1:], offsets[1:])
    ]
    # the first offset is read through a slice of the result's size, by a plain map: a
    # generic of two operands whose first map reads ``d2 + 3`` crashed IREE 3.13 (SIGSEGV
    # in linalg::inferConvolutionDims, called by its dispatch-naming pass), as a kernel of
    # two offsets (2, 2x1, 2x1x1) made where nothing fused into it
    first = type(a)((n, *out.shape[2:], c), d)
    head = _slice(
        e,
        z,
        spread,
        (0, *starts[0], 0) + (0,) * k,
        first.shape + (1,) * k,
        (1,) * len(spread.shape),
        first.shape,
    )
    rank = len(out.shape)
    zero = e.const(0, d)

    def body(*xs):
        total = zero
        for x in xs[:-1]:  # the offsets in order, as eager sums them
            total = add(e, d, total, x)
        return total

    return e.generic(
        [(head, first)] + [(z, spread)] * len(reads),
        [(e.empty(out.shape, d), out)],
        [(0, *range(2, 2 + k), 1), *reads, tuple(range(rank))],
        ["parallel"] * rank,
        body,
    )
