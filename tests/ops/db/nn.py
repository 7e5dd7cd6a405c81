"""Op database entries for the nn.functional ops: convolution, pooling, unfold,
normalisation, embedding, one_hot and pad (dropout is random: tests/nn/test_functional_ops.py
checks it against its own seeds, eagerly and compiled)."""
from __future__ import annotations

import numpy as np
import torch.nn.functional as TF

import staged.nn.functional as F
from tests.ops.opinfo import OpInfo, Sample, Skip, arr, distinct, index

def _conv2d_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [Sample((a(2, 4, 6, 5), a(6, 4, 3, 3), a(6)), name="plain"),
            Sample((a(2, 4, 7, 6), a(6, 2, 3, 2), a(6)),
                   dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2), name="grouped"),
            Sample((a(3, 5, 5), a(4, 3, 2, 2), None), dict(padding="same"), name="unbatched"),
            Sample((a(0, 4, 6, 5), a(6, 4, 3, 3), a(6)), name="empty-batch")]


def _conv1d_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [Sample((a(2, 4, 9), a(6, 2, 3), a(6)), dict(stride=2, padding=1, groups=2))]


def _pool_samples(dtype, rng):
    x = distinct(rng, dtype, (2, 3, 7, 6), 1 / 8)
    return [Sample((x, 2)), Sample((x, 3), dict(stride=2, padding=1, ceil_mode=True)),
            Sample((x[0], (3, 2)), dict(stride=1, padding=(1, 0)), name="unbatched")]


def _max_pool_samples(dtype, rng):
    x = distinct(rng, dtype, (2, 3, 7, 6), 1 / 8)
    return _pool_samples(dtype, rng) + [Sample((x, 2), dict(dilation=2, return_indices=True),
                                               name="indices")]


def _avg_pool_samples(dtype, rng):
    x = arr(rng, dtype, (2, 3, 7, 6))
    return _pool_samples(dtype, rng) + [
        Sample((x, 3), dict(stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
        Sample((x, 2), dict(divisor_override=3))]


def _unfold_samples(dtype, rng):
    return [Sample((arr(rng, dtype, (2, 3, 5, 4)), (2, 3)), dict(dilation=(1, 1), padding=1,
                                                                 stride=(2, 1)))]


def _layer_norm_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [Sample((a(3, 4, 5), (4, 5), a(4, 5), a(4, 5))), Sample((a(2, 6), (6,)))]


def _batch_norm_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [Sample((a(6, 3), None, None, a(3), a(3), True)),
            Sample((a(4, 3, 2, 5), None, None, a(3), a(3), True, 0.1, 1e-3))]


def _embedding_samples(dtype, rng):
    w = arr(rng, dtype, (6, 4))
    return [Sample((index(rng, 6, (2, 3)), w)), Sample((np.array([4, 0, 4]), w[:, :2]))]


def _padding_idx_samples(dtype, rng):
    w = arr(rng, dtype, (6, 4))
    return [Sample((np.array([[0, 2], [2, 5]]), w), dict(padding_idx=2)),
            Sample((np.array([1, 5]), w), dict(padding_idx=-1))]


def _one_hot_samples(dtype, rng):
    return [Sample((index(rng, 5, (2, 3)), 5)), Sample((np.array([0, 3, 1]), 4))]


def _one_hot_infer_samples(dtype, rng):
    return [Sample((np.array([0, 3, 1]),))]


def _pad_samples(dtype, rng):
    x = arr(rng, dtype, (2, 3, 4))
    return [Sample((x, (1, 2))), Sample((x, (1, -1, 0, 2)), dict(value=1.5)),
            Sample((x, (-1, -1, 2, 0, 1, 1)))]


_INT_ONLY = Skip("complex", "class indices are integers")
_PADDING_ROW = "padding_idx zeroes the gradient of a row the output does depend on " \
               "(PyTorch's definition), so finite differences disagree by design"
ENTRIES = [
    OpInfo("conv2d", F.conv2d, TF.conv2d, _conv2d_samples),
    OpInfo("conv1d", F.conv1d, TF.conv1d, _conv1d_samples),
    OpInfo("max_pool2d", F.max_pool2d, TF.max_pool2d, _max_pool_samples,
           skips=[Skip("complex", "complex numbers are not ordered")]),
    OpInfo("avg_pool2d", F.avg_pool2d, TF.avg_pool2d, _avg_pool_samples),
    OpInfo("unfold", F.unfold, TF.unfold, _unfold_samples),
    OpInfo("layer_norm", F.layer_norm, TF.layer_norm, _layer_norm_samples),
    OpInfo("batch_norm", F.batch_norm, TF.batch_norm, _batch_norm_samples),
    OpInfo("embedding", F.embedding, TF.embedding, _embedding_samples),
    OpInfo("embedding_padding_idx", F.embedding, TF.embedding, _padding_idx_samples, skips=[
        Skip("fd", _PADDING_ROW), Skip("gradgrad", _PADDING_ROW),
        Skip("jvp", "PyTorch's embedding JVP (auto_linear) carries the padding row's tangent "
                    "while its VJP zeroes that row; staged's composite detaches the row, so "
                    "its JVP is zero there, consistent with the VJP")]),
    OpInfo("one_hot", F.one_hot, TF.one_hot, _one_hot_samples, dtypes=("float32",),
           differentiable=False, skips=[_INT_ONLY]),
    OpInfo("one_hot_infer_classes", F.one_hot, TF.one_hot, _one_hot_infer_samples,
           dtypes=("float32",), differentiable=False, skips=[_INT_ONLY] + [
               Skip(c, "num_classes=-1 reads the largest index: the output shape depends on "
                       "data, which a static-shape capture cannot trace")
               for c in ("shape", "capture", "llvm-cpu")]),
    OpInfo("pad", F.pad, TF.pad, _pad_samples),
]
