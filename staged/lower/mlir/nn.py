"""Window primitives. im2col: the input padded (a fill plus insert_slice) and cut to the
extent the windows read, then one gathering linalg.generic whose input map reads ``out * stride + kernel * dilation``.
col2im: for each kernel offset, a strided extract_slice of the accumulator, an add of
that offset's windows and an insert_slice back (prod(kernel) steps, unrolled)."""

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
    n, c, out_sp = a.shape[0], a.shape[1 + k], a.shape[1 : 1 + k]
    perm = (0, 1 + k) + tuple(range(1, 1 + k)) + tuple(range(2 + k, 2 + 2 * k))
    moved = type(a)(tuple(a.shape[i] for i in perm), d)  # (N, C, *out, *kernel)
    cols = e.emit(
        f"linalg.transpose ins({cols} : {tensor_type(a.shape, d)}) "
        f"outs({e.empty(moved.shape, d)} : {tensor_type(moved.shape, d)}) "
        f"permutation = [{', '.join(map(str, perm))}]"
    )
    acc_aval = type(a)(
        (n, c) + tuple(s + lo + hi for s, (lo, hi) in zip(out.shape[2:], padding)), d
    )
    acc = e.full(acc_aval.shape, d, 0)
    piece_shape = (n, c) + tuple(out_sp)
    piece_aval = type(a)(piece_shape, d)
    strides = (1, 1) + tuple(stride)
    for idx in itertools.product(*map(range, kernel)):
        piece = _slice(
            e,
            cols,
            moved,
            (0,) * (2 + k) + idx,
            piece_shape + (1,) * k,
            (1,) * (2 + 2 * k),
            piece_shape,
        )
        at = (0, 0) + tuple(i * dl for i, dl in zip(idx, dilation))
        cur = _slice(e, acc, acc_aval, at, piece_shape, strides, piece_shape)
        total = e.map(
            (cur, piece), [piece_aval, piece_aval], piece_aval, lambda u, v: add(e, d, u, v)
        )
        acc = _insert(e, total, piece_shape, acc, acc_aval, at, strides)
    if acc_aval.shape == out.shape:
        return acc
    return _slice(
        e,
        acc,
        acc_aval,
        (0, 0) + tuple(lo for lo, _ in padding),
        out.shape,
        (1,) * len(out.shape),
        out.shape,
    )
