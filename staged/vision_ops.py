"""torchvision's C++ operators, for torchvision run on staged: ``torch.ops.load_library`` of
torchvision's ``_C`` extension (which is built against libtorch and cannot load here)
defines the ``torchvision::`` operators with torchvision's schemas and these kernels
instead, so ``torchvision.ops.nms``, ``roi_align``, ``roi_pool`` and the detection models
built on them run. torchvision registers their autograd formulas itself, in Python.

Note [torchvision's kernels]: each kernel follows torchvision's CPU kernel operation by
operation in the tensor's dtype (its bilinear weights, its order of additions: a bin's
samples summed one after another, then divided by their count; the backward's
additions into the input gradient in its loop order, by ``np.add.at``), so results are
its results. ``ps_roi_align``, ``ps_roi_pool``, ``deform_conv2d``, ``box_iou_rotated`` and the
quantized ``qnms``/``qroi_align`` are defined and raise ``NotImplementedError`` naming
themselves (no torchvision detection model uses them).
"""

from __future__ import annotations

import numpy as np

from .eager.factories import from_numpy
from .library import Library

_FLT_MAX = float(np.finfo(np.float32).max)  # roi_pool's empty maximum, for every dtype
_CHUNK = 16  # rois per vectorised step (7x7 bins of 2x2 samples, 256 channels: 25 MB)

SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width, "
    "int sampling_ratio, bool aligned) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width) -> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, "
    "SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, "
    "SymInt height, SymInt width) -> Tensor",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, int sampling_ratio) -> (Tensor, Tensor)",
    "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, "
    "float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, "
    "SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width) -> (Tensor, Tensor)",
    "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, "
    "float spatial_scale, SymInt pooled_height, SymInt pooled_width, SymInt batch_size, "
    "SymInt channels, SymInt height, SymInt width) -> Tensor",
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
    "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, "
    "SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, "
    "Tensor mask, Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, "
    "SymInt dilation_h, SymInt dilation_w, SymInt groups, SymInt offset_groups, "
    "bool use_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qroi_align(Tensor input, Tensor rois, float input_scale, int input_zero_point, "
    "float rois_scale, int rois_zero_point, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "box_iou_rotated(Tensor boxes1, Tensor boxes2) -> Tensor",
    "_cuda_version() -> int",
)
_library: list[Library] = []  # the one "torchvision" library, once defined


def register() -> None:
    """Define the ``torchvision::`` operators with these kernels (once a process)."""
    if _library:
        return
    lib = Library("torchvision", "DEF")
    for schema in SCHEMAS:
        lib.define(schema)
    kernels = {
        "nms": nms,
        "roi_align": roi_align,
        "_roi_align_backward": roi_align_backward,
        "roi_pool": roi_pool,
        "_roi_pool_backward": roi_pool_backward,
        "_cuda_version": lambda: -1,
    }
    for schema in SCHEMAS:
        name = schema.split("(")[0]
        lib.impl(name, kernels.get(name, _missing(name)), "CPU")
    _library.append(lib)


def _missing(name: str):
    def kernel(*args, **kwargs):
        raise NotImplementedError(
            f"torchvision::{name}: staged has no kernel for it (it runs torchvision's nms, "
            "roi_align and roi_pool, what the detection models use)"
        )

    return kernel


def _array(t) -> np.ndarray:
    return np.ascontiguousarray(t.detach().numpy())


def nms(dets, scores, iou_threshold):
    """The indices of the boxes kept, by descending score (torchvision's CPU kernel)."""
    if dets.ndim != 2 or dets.shape[1] != 4:
        raise RuntimeError(f"boxes should have 4 elements in dimension 1, got {dets.shape[1]}")
    if scores.ndim != 1 or scores.shape[0] != dets.shape[0]:
        raise RuntimeError(
            "boxes and scores should have same number of elements in dimension 0, got "
            f"{dets.shape[0]} and {scores.shape[0]}"
        )
    if dets.dtype != scores.dtype:
        raise RuntimeError("dets should have the same type as scores")
    boxes, s = _array(dets), _array(scores)
    if boxes.shape[0] == 0:
        return from_numpy(np.empty(0, np.int64))
    x1, y1, x2, y2 = boxes.T
    areas = (x2 - x1) * (y2 - y1)
    # torch's stable descending sort, NaN first (torch orders NaN above every number)
    nan = np.isnan(s)
    order = np.concatenate(
        [np.flatnonzero(nan), np.flatnonzero(~nan)[np.argsort(-s[~nan], kind="stable")]]
    )
    zero = boxes.dtype.type(0)
    suppressed = np.zeros(len(order), bool)  # by position in ``order``
    keep = []
    for at, i in enumerate(order):
        if suppressed[at]:
            continue
        keep.append(i)
        rest = order[at + 1 :]
        w = _max(zero, _min(x2[i], x2[rest]) - _max(x1[i], x1[rest]))
        h = _max(zero, _min(y2[i], y2[rest]) - _max(y1[i], y1[rest]))
        inter = w * h
        ovr = inter / (areas[i] + areas[rest] - inter)
        suppressed[at + 1 :] |= ovr.astype(np.float64) > iou_threshold  # a double, as C++'s
    return from_numpy(np.asarray(keep, np.int64))


def _max(a, b):
    """``std::max(a, b)``: ``b`` where ``a < b``, else ``a`` (so a NaN ``b`` loses)."""
    return np.where(a < b, b, a)


def _min(a, b):
    """``std::min(a, b)``: ``b`` where ``b < a``, else ``a``."""
    return np.where(b < a, b, a)


def _roi_geometry(rois, spatial_scale, ph, pw, sampling_ratio, aligned, dtype):
    """Per roi: its batch index, start (h, w), bin size (h, w) and sample grid (h, w), in
    the kernel's arithmetic."""
    T = dtype.type
    scale = T(spatial_scale)
    offset = T(0.5) if aligned else T(0)
    start_w, start_h = rois[:, 1] * scale - offset, rois[:, 2] * scale - offset
    end_w, end_h = rois[:, 3] * scale - offset, rois[:, 4] * scale - offset
    width, height = end_w - start_w, end_h - start_h
    if not aligned:
        width, height = np.maximum(width, T(1)), np.maximum(height, T(1))
    bin_h, bin_w = height / T(ph), width / T(pw)
    if sampling_ratio > 0:
        grid_h = np.full(len(rois), sampling_ratio, np.int64)
        grid_w = grid_h
    else:
        grid_h = np.ceil(height / T(ph)).astype(np.int64)
        grid_w = np.ceil(width / T(pw)).astype(np.int64)
    batch = rois[:, 0].astype(np.int64)
    return batch, start_h, start_w, bin_h, bin_w, grid_h, grid_w


def _axis(start, bins, n_bins, grid, extent, T):
    """One axis's sample coordinates of a group of rois sharing ``grid``: for each roi,
    bin and sample, the low and high index and the low and high weight (0 weights and
    index 0 outside ``[-1, extent]``), as the kernel's bilinear precalculation."""
    k = np.arange(n_bins, dtype=T)[:, None]
    frac = (np.arange(grid, dtype=T) + T(0.5))[None, :]
    c = start[:, None, None] + k * bins[:, None, None] + frac * bins[:, None, None] / T(grid)
    outside = (c < -1.0) | (c > extent)
    c = np.where(c <= 0, T(0), c)
    low = c.astype(np.int64)
    top = low >= extent - 1
    low = np.where(top, extent - 1, low)
    high = np.where(top, low, low + 1)
    c = np.where(top, low.astype(T), c)
    lw = c - low.astype(T)  # the weight of ``high``
    hw = T(1) - lw
    return outside, low, high, hw, lw  # each (rois, bins, grid)


def _samples(rois_np, dtype, size, pooled, spatial_scale, sampling_ratio, aligned):
    """Chunks of rois, in order, each of one sample grid: the roi indices, their batch
    indices, positions (rois, ph*pw, samples, 4 corners), weights of the same shape,
    which samples lie outside the map, and the sample count, in the kernel's arithmetic."""
    T = dtype.type
    (height, width), (ph, pw) = size, pooled
    batch, sh, sw, bh, bw, gh, gw = _roi_geometry(
        rois_np, spatial_scale, ph, pw, sampling_ratio, aligned, dtype
    )
    if not len(gh):
        return
    # runs of consecutive rois of one grid, in order: the backward adds roi after roi
    change = np.flatnonzero((gh[1:] != gh[:-1]) | (gw[1:] != gw[:-1])) + 1
    for first, end in zip([0, *change.tolist()], [*change.tolist(), len(gh)]):
        grid = (int(gh[first]), int(gw[first]))
        for part in range(first, end, _CHUNK):
            idx = np.arange(part, min(part + _CHUNK, end))
            yo, yl, yh, hy, ly = _axis(sh[idx], bh[idx], ph, grid[0], height, T)
            xo, xl, xh, hx, lx = _axis(sw[idx], bw[idx], pw, grid[1], width, T)
            r = len(idx)
            # (rois, ph, pw, iy, ix): the kernel's loop order of a bin's samples
            shape = (r, ph, pw, grid[0], grid[1])

            out = _spread(yo, True, shape) | _spread(xo, False, shape)
            Y0, Y1, X0, X1 = (
                _spread(yl, True, shape),
                _spread(yh, True, shape),
                _spread(xl, False, shape),
                _spread(xh, False, shape),
            )
            HY, LY, HX, LX = (
                _spread(hy, True, shape),
                _spread(ly, True, shape),
                _spread(hx, False, shape),
                _spread(lx, False, shape),
            )
            w = np.stack([HY * HX, HY * LX, LY * HX, LY * LX], -1)
            pos = np.stack([Y0 * width + X0, Y0 * width + X1, Y1 * width + X0, Y1 * width + X1], -1)
            w = np.where(out[..., None], T(0), w)
            pos = np.where(out[..., None], 0, pos)
            # no samples where an adaptive grid is 0 or negative (a degenerate roi); the
            # count is the kernel's max(grid_h * grid_w, 1) all the same
            bins = (r, ph * pw, max(grid[0], 0) * max(grid[1], 0))
            count = max(grid[0] * grid[1], 1)
            yield (
                idx,
                batch[idx],
                pos.reshape(*bins, 4),
                w.reshape(*bins, 4),
                out.reshape(bins),
                count,
            )


def _spread(a, axis_y: bool, shape):
    """One axis's (rois, bins, grid) values over (rois, ph, pw, iy, ix)."""
    return np.broadcast_to(a[:, :, None, :, None] if axis_y else a[:, None, :, None, :], shape)


def _check_rois(rois, what, other, batch_size: int) -> np.ndarray:
    """``rois`` as an array, checked: (K, 5) of ``other``'s dtype, each batch index one of
    the ``batch_size`` images (torchvision's kernels would read past the input)."""
    if rois.ndim != 2 or rois.shape[1] != 5:
        raise RuntimeError("rois must have shape as Tensor[K, 5]")
    if rois.dtype != other.dtype:
        raise RuntimeError(
            f"Expected tensor for {what} to have the same type as tensor for rois; but type "
            f"{other.dtype} does not equal {rois.dtype}"
        )
    boxes = _array(rois)
    bad = ~((boxes[:, 0] >= 0) & (boxes[:, 0] < batch_size))
    if bad.any():
        raise IndexError(
            f"rois[{int(np.argmax(bad))}, 0] = {boxes[bad][0, 0]}: a roi's first value is the "
            f"index of its image in the batch, 0 to {batch_size - 1}"
        )
    return boxes


def _check_input(input) -> np.ndarray:
    if input.ndim != 4:
        raise RuntimeError(f"input must be a 4-D (N, C, H, W) tensor, got {input.ndim} dimensions")
    return _array(input)


def roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    """Each roi's ``pooled_height x pooled_width`` bins, each the mean of its bilinear
    samples (torchvision's CPU kernel; Note [torchvision's kernels])."""
    x = _check_input(input)
    n, c, height, width = x.shape
    boxes = _check_rois(rois, "input", input, n)
    feats = x.reshape(n, c, height * width).transpose(0, 2, 1)  # (N, H*W, C)
    out = np.zeros((len(boxes), c, pooled_height * pooled_width), x.dtype)
    geometry = (height, width), (pooled_height, pooled_width)
    for idx, batch, pos, w, _, count in _samples(
        boxes, x.dtype, *geometry, spatial_scale, sampling_ratio, aligned
    ):
        v = feats[batch[:, None, None, None], pos]  # (rois, bins, samples, 4, C)
        wv = w[..., None]
        s = wv[:, :, :, 0] * v[:, :, :, 0] + wv[:, :, :, 1] * v[:, :, :, 1]
        s = s + wv[:, :, :, 2] * v[:, :, :, 2]
        s = s + wv[:, :, :, 3] * v[:, :, :, 3]  # (rois, bins, samples, C)
        zero = np.zeros(s.shape[:2] + (1,) + s.shape[3:], s.dtype)
        total = np.cumsum(np.concatenate([zero, s], 2), axis=2)[:, :, -1]  # one by one
        out[idx] = (total / x.dtype.type(max(count, 1))).transpose(0, 2, 1)
    return from_numpy(out.reshape(len(boxes), c, pooled_height, pooled_width))


def roi_align_backward(
    grad,
    rois,
    spatial_scale,
    pooled_height,
    pooled_width,
    batch_size,
    channels,
    height,
    width,
    sampling_ratio,
    aligned,
):
    """``roi_align``'s input gradient: each bin's gradient spread over its samples' four
    taps, added in torchvision's loop order."""
    boxes = _check_rois(rois, "grad", grad, batch_size)
    g = _array(grad).reshape(len(rois), channels, pooled_height * pooled_width)
    T = g.dtype.type
    out = np.zeros((batch_size * height * width, channels), g.dtype)
    geometry = (height, width), (pooled_height, pooled_width)
    for idx, batch, pos, w, outside, count in _samples(
        boxes, g.dtype, *geometry, spatial_scale, sampling_ratio, aligned
    ):
        gb = g[idx].transpose(0, 2, 1)[:, :, None, None, :]  # (rois, bins, 1, 1, C)
        adds = gb * w[..., None] / T(count)  # (g * w) / count, as the kernel
        inside = ~outside  # the kernel adds nothing for a sample outside the map
        where = batch[:, None, None, None] * (height * width) + pos
        np.add.at(out, where[inside].reshape(-1), adds[inside].reshape(-1, channels))
    return from_numpy(out.reshape(batch_size, height, width, channels).transpose(0, 3, 1, 2).copy())


def _round_half_away(a):
    """C's ``round``: to the nearest integer, halves away from zero."""
    b = np.abs(a)
    whole = np.floor(b)
    return np.sign(a) * (whole + (b - whole >= 0.5))


def _pool_bins(rois_np, spatial_scale, ph, pw, height, width, dtype):
    """Per roi and bin: [hstart, hend) x [wstart, wend) in the map (roi_pool's kernel)."""
    T = dtype.type
    scale = T(spatial_scale)
    sw = _round_half_away(rois_np[:, 1] * scale).astype(np.int64)
    sh = _round_half_away(rois_np[:, 2] * scale).astype(np.int64)
    ew = _round_half_away(rois_np[:, 3] * scale).astype(np.int64)
    eh = _round_half_away(rois_np[:, 4] * scale).astype(np.int64)
    rw, rh = np.maximum(ew - sw + 1, 1), np.maximum(eh - sh + 1, 1)
    bh, bw = rh.astype(T) / T(ph), rw.astype(T) / T(pw)
    kh, kw = np.arange(ph, dtype=T), np.arange(pw, dtype=T)
    hs = np.floor(kh[None] * bh[:, None]).astype(np.int64) + sh[:, None]
    he = np.ceil((kh[None] + T(1)) * bh[:, None]).astype(np.int64) + sh[:, None]
    ws = np.floor(kw[None] * bw[:, None]).astype(np.int64) + sw[:, None]
    we = np.ceil((kw[None] + T(1)) * bw[:, None]).astype(np.int64) + sw[:, None]
    clip = lambda a, n: np.clip(a, 0, n)  # noqa: E731
    return clip(hs, height), clip(he, height), clip(ws, width), clip(we, width)


def roi_pool(input, rois, spatial_scale, pooled_height, pooled_width):
    """Each roi's bins' maxima and where they are (torchvision's CPU kernel: the first
    maximum above -FLT_MAX in row order; an empty bin 0 and -1)."""
    x = _check_input(input)
    n, c, height, width = x.shape
    boxes = _check_rois(rois, "input", input, n)
    hs, he, ws, we = _pool_bins(
        boxes, spatial_scale, pooled_height, pooled_width, height, width, x.dtype
    )
    out = np.zeros((len(boxes), c, pooled_height, pooled_width), x.dtype)
    arg = np.full(out.shape, -1, np.int64)
    for r in range(len(boxes)):
        b = int(boxes[r, 0])
        for i in range(pooled_height):
            for j in range(pooled_width):
                h0, h1, w0, w1 = hs[r, i], he[r, i], ws[r, j], we[r, j]
                if h1 <= h0 or w1 <= w0:
                    continue
                region = x[b, :, h0:h1, w0:w1].reshape(c, -1)
                live = np.where(region > -_FLT_MAX, region, -np.inf)  # NaN never wins
                at = np.argmax(live, 1)
                best = live[np.arange(c), at]
                found = best > -np.inf
                rows, cols = np.divmod(at, w1 - w0)
                out[r, :, i, j] = np.where(found, best, x.dtype.type(-_FLT_MAX))
                arg[r, :, i, j] = np.where(found, (rows + h0) * width + cols + w0, -1)
    return from_numpy(out), from_numpy(arg)


def roi_pool_backward(
    grad,
    rois,
    argmax,
    spatial_scale,
    pooled_height,
    pooled_width,
    batch_size,
    channels,
    height,
    width,
):
    """``roi_pool``'s input gradient: each bin's gradient to its maximum, added in
    torchvision's loop order."""
    boxes = _check_rois(rois, "grad", grad, batch_size)
    g, a = _array(grad), _array(argmax)
    out = np.zeros((batch_size, height * width, channels), g.dtype)
    batch = boxes[:, 0].astype(np.int64)
    bins = pooled_height * pooled_width
    g2 = g.reshape(len(boxes), channels, bins).transpose(0, 2, 1)  # (rois, bins, C)
    a2 = a.reshape(len(boxes), channels, bins).transpose(0, 2, 1)
    for ch in range(channels):  # channels are independent; within one, the kernel's order
        col = a2[:, :, ch]
        keep = col != -1
        where = (batch[:, None] * (height * width) + col)[keep]
        np.add.at(out.reshape(-1, channels)[:, ch], where, g2[:, :, ch][keep])
    return from_numpy(out.reshape(batch_size, height, width, channels).transpose(0, 3, 1, 2).copy())


__all__ = ["SCHEMAS", "register"]
