"""torchvision's operators as staged defines them (``staged.vision_ops``, registered by
``torch.ops.load_library`` of torchvision's extension): each against a line-by-line
transcription of torchvision's CPU kernel in scalar NumPy arithmetic of the tensor's dtype
(bit for bit), the backward kernels by the adjoint identity and by their transcription."""

import math

import numpy as np
import pytest

import staged
from staged import vision_ops

staged.ops.load_library("/site-packages/torchvision/_C.so")
TV = staged.ops.torchvision


def _rois(rng, n, batch, height, width, dtype):
    """Rois over and past the map's edges, some tiny, some inverted."""
    x1 = rng.uniform(-0.3 * width, width, n)
    y1 = rng.uniform(-0.3 * height, height, n)
    x2 = x1 + rng.uniform(-1, 1.2 * width, n)
    y2 = y1 + rng.uniform(-1, 1.2 * height, n)
    b = rng.integers(0, batch, n)
    return np.stack([b, x1, y1, x2, y2], 1).astype(dtype)


def _roi_align_reference(x, rois, scale, ph, pw, ratio, aligned, grad=None):
    """torchvision's roi_align_forward_kernel_impl (and with ``grad`` its backward
    kernel's additions into the input gradient), scalar by scalar."""
    T = x.dtype.type
    n, c, height, width = x.shape
    out = np.zeros((len(rois), c, ph, pw), x.dtype)
    gin = np.zeros_like(x)
    for r, roi in enumerate(rois):
        b = int(roi[0])
        off = T(0.5) if aligned else T(0)
        sw, sh = roi[1] * T(scale) - off, roi[2] * T(scale) - off
        ew, eh = roi[3] * T(scale) - off, roi[4] * T(scale) - off
        rw, rh = ew - sw, eh - sh
        if not aligned:
            rw, rh = max(rw, T(1)), max(rh, T(1))
        bh, bw = rh / T(ph), rw / T(pw)
        gh = ratio if ratio > 0 else int(math.ceil(rh / T(ph)))
        gw = ratio if ratio > 0 else int(math.ceil(rw / T(pw)))
        count = T(max(gh * gw, 1))
        for i in range(ph):
            for j in range(pw):
                val = np.zeros(c, x.dtype)
                for iy in range(gh):
                    y = sh + T(i) * bh + T(iy + 0.5) * bh / T(gh)
                    for ix in range(gw):
                        xx = sw + T(j) * bw + T(ix + 0.5) * bw / T(gw)
                        yv, xv = y, xx
                        if yv < -1.0 or yv > height or xv < -1.0 or xv > width:
                            val = val + T(0) * x[b, :, 0, 0]
                            continue
                        yv, xv = max(yv, T(0)), max(xv, T(0))
                        yl, xl = int(yv), int(xv)
                        if yl >= height - 1:
                            yh = yl = height - 1
                            yv = T(yl)
                        else:
                            yh = yl + 1
                        if xl >= width - 1:
                            xh = xl = width - 1
                            xv = T(xl)
                        else:
                            xh = xl + 1
                        ly, lx = yv - T(yl), xv - T(xl)
                        hy, hx = T(1) - ly, T(1) - lx
                        w = (hy * hx, hy * lx, ly * hx, ly * lx)
                        taps = ((yl, xl), (yl, xh), (yh, xl), (yh, xh))
                        s = w[0] * x[b, :, yl, xl] + w[1] * x[b, :, yl, xh]
                        s = s + w[2] * x[b, :, yh, xl]
                        s = s + w[3] * x[b, :, yh, xh]
                        val = val + s
                        if grad is not None:
                            for wk, (ty, tx) in zip(w, taps):
                                gin[b, :, ty, tx] += grad[r, :, i, j] * wk / T(gh * gw)
                out[r, :, i, j] = val / count
    return out if grad is None else gin


CASES = [(2, True), (2, False), (-1, True), (-1, False), (1, False)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ratio,aligned", CASES)
def test_roi_align_is_torchvisions_kernel_bit_for_bit(dtype, ratio, aligned):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 9, 11)).astype(dtype)
    rois = _rois(rng, 12, 2, 9 / 0.5, 11 / 0.5, dtype)
    got = TV.roi_align(staged.tensor(x), staged.tensor(rois), 0.5, 3, 2, ratio, aligned)
    want = _roi_align_reference(x, rois, 0.5, 3, 2, ratio, aligned)
    assert got.dtype == getattr(staged, dtype)
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("ratio,aligned", CASES)
def test_roi_align_backward_is_its_adjoint_and_torchvisions_additions(ratio, aligned):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 9, 11))
    rois = _rois(rng, 10, 2, 9, 11, np.float64)
    g = rng.standard_normal((10, 3, 4, 3))
    gin = TV._roi_align_backward(
        staged.tensor(g), staged.tensor(rois), 1.0, 4, 3, 2, 3, 9, 11, ratio, aligned
    ).numpy()
    out = TV.roi_align(staged.tensor(x), staged.tensor(rois), 1.0, 4, 3, ratio, aligned).numpy()
    np.testing.assert_allclose((g * out).sum(), (gin * x).sum(), rtol=1e-12)
    want = _roi_align_reference(x, rois, 1.0, 4, 3, ratio, aligned, grad=g)
    np.testing.assert_array_equal(gin, want)


def _nms_reference(boxes, scores, threshold):
    """torchvision's nms_kernel_impl: a stable descending sort (NaN first), then each
    kept box suppresses the later ones it overlaps by more than ``threshold``."""
    keyed = sorted(range(len(scores)), key=lambda i: (not np.isnan(scores[i]), -scores[i]))
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    gone, keep = set(), []
    for a, i in enumerate(keyed):
        if i in gone:
            continue
        keep.append(i)
        for j in keyed[a + 1 :]:
            if j in gone:
                continue
            xx1 = boxes[j, 0] if boxes[i, 0] < boxes[j, 0] else boxes[i, 0]
            yy1 = boxes[j, 1] if boxes[i, 1] < boxes[j, 1] else boxes[i, 1]
            xx2 = boxes[j, 2] if boxes[j, 2] < boxes[i, 2] else boxes[i, 2]
            yy2 = boxes[j, 3] if boxes[j, 3] < boxes[i, 3] else boxes[i, 3]
            w, h = max(boxes.dtype.type(0), xx2 - xx1), max(boxes.dtype.type(0), yy2 - yy1)
            inter = w * h
            if float(inter / (area[i] + area[j] - inter)) > threshold:
                gone.add(j)
    return keep


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nms_is_torchvisions_kernel(dtype):
    rng = np.random.default_rng(2)
    for trial in range(20):
        n = int(rng.integers(1, 40))
        xy = rng.uniform(0, 50, (n, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(1, 30, (n, 2))], 1).astype(dtype)
        scores = rng.choice([0.1, 0.5, 0.9, 0.3], n).astype(dtype)  # ties: the sort is stable
        if trial % 3 == 0:
            scores[rng.integers(0, n)] = np.nan
        for threshold in (0.3, 0.7, 0.5):
            got = TV.nms(staged.tensor(boxes), staged.tensor(scores), threshold)
            assert got.dtype == staged.int64
            assert got.tolist() == _nms_reference(boxes, scores, threshold), (trial, threshold)
    assert TV.nms(staged.zeros(0, 4), staged.zeros(0), 0.5).tolist() == []
    with pytest.raises(RuntimeError, match="4 elements in dimension 1"):
        TV.nms(staged.zeros(3, 5), staged.zeros(3), 0.5)
    with pytest.raises(RuntimeError, match="same type"):
        TV.nms(staged.zeros(3, 4), staged.zeros(3, dtype=staged.float64), 0.5)


def _roi_pool_reference(x, rois, scale, ph, pw):
    """torchvision's roi_pool_forward_kernel_impl."""
    T = x.dtype.type
    n, c, height, width = x.shape
    out = np.zeros((len(rois), c, ph, pw), x.dtype)
    arg = np.full(out.shape, -1, np.int64)

    def c_round(v):
        return math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)

    for r, roi in enumerate(rois):
        b = int(roi[0])
        sw, sh = c_round(roi[1] * T(scale)), c_round(roi[2] * T(scale))
        ew, eh = c_round(roi[3] * T(scale)), c_round(roi[4] * T(scale))
        rw, rh = max(ew - sw + 1, 1), max(eh - sh + 1, 1)
        bh, bw = T(rh) / T(ph), T(rw) / T(pw)
        for i in range(ph):
            for j in range(pw):
                hs = min(max(int(math.floor(T(i) * bh)) + sh, 0), height)
                he = min(max(int(math.ceil(T(i + 1) * bh)) + sh, 0), height)
                ws = min(max(int(math.floor(T(j) * bw)) + sw, 0), width)
                we = min(max(int(math.ceil(T(j + 1) * bw)) + sw, 0), width)
                empty = he <= hs or we <= ws
                for ch in range(c):
                    best, at = (T(0) if empty else T(-np.finfo(np.float32).max)), -1
                    for h in range(hs, he):
                        for w in range(ws, we):
                            if x[b, ch, h, w] > best:
                                best, at = x[b, ch, h, w], h * width + w
                    out[r, ch, i, j], arg[r, ch, i, j] = best, at
    return out, arg


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_roi_pool_and_its_backward_are_torchvisions_kernels(dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 8, 10)).astype(dtype)
    x[0, 1, 2:4, 3:5] = np.nan  # never a maximum
    rois = _rois(rng, 9, 2, 8 / 0.5, 10 / 0.5, dtype)
    out, arg = TV.roi_pool(staged.tensor(x), staged.tensor(rois), 0.5, 3, 2)
    want, want_arg = _roi_pool_reference(x, rois, 0.5, 3, 2)
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(arg.numpy(), want_arg)
    g = rng.standard_normal(want.shape).astype(dtype)
    gin = TV._roi_pool_backward(
        staged.tensor(g), staged.tensor(rois), arg, 0.5, 3, 2, 2, 3, 8, 10
    ).numpy()
    expect = np.zeros_like(x).reshape(2, 3, -1)
    for r in range(len(rois)):
        for ch in range(3):
            for k in range(6):
                a = want_arg[r, ch].reshape(-1)[k]
                if a != -1:
                    expect[int(rois[r, 0]), ch, a] += g[r, ch].reshape(-1)[k]
    np.testing.assert_array_equal(gin, expect.reshape(x.shape))


def test_the_library_loads_only_torchvisions_extension_and_names_what_it_lacks():
    assert TV._cuda_version() == -1
    staged.ops.load_library("/elsewhere/torchvision/_C.so")  # once a process: no error
    assert "/site-packages/torchvision/_C.so" in staged.ops.loaded_libraries
    with pytest.raises(OSError, match="cannot load operator libraries compiled"):
        staged.ops.load_library("/lib/libmyops.so")
    t = staged.zeros(1)
    for name, args in (
        ("deform_conv2d", [t] * 5 + [1] * 8 + [False]),
        ("ps_roi_align", [t, t, 1.0, 2, 2, 2]),
        ("qnms", [t, t, 0.5]),
        ("box_iou_rotated", [t, t]),
    ):
        with pytest.raises(NotImplementedError, match=f"torchvision::{name}: staged has no kernel"):
            getattr(TV, name)(*args)
    assert len(vision_ops.SCHEMAS) == 15
    with pytest.raises(RuntimeError, match="rois must have shape"):
        TV.roi_align(staged.zeros(1, 1, 2, 2), staged.zeros(1, 4), 1.0, 1, 1, 1, False)
    with pytest.raises(RuntimeError, match="4-D"):
        TV.roi_align(staged.zeros(1, 2, 2), staged.zeros(1, 5), 1.0, 1, 1, 1, False)
    far = staged.tensor([[0.0, 0, 0, 1, 1], [2.0, 0, 0, 1, 1]])  # a batch of 2: index 2 is past it
    for call in (
        lambda: TV.roi_align(staged.zeros(2, 1, 4, 4), far, 1.0, 2, 2, 2, False),
        lambda: TV.roi_pool(staged.zeros(2, 1, 4, 4), far, 1.0, 2, 2),
        lambda: TV._roi_align_backward(
            staged.zeros(2, 1, 2, 2), far, 1.0, 2, 2, 2, 1, 4, 4, 2, False
        ),
    ):
        with pytest.raises(IndexError, match=r"rois\[1, 0\] = 2.0: .* 0 to 1"):
            call()
