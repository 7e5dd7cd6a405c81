"""Op database entries for the nn.functional ops: convolution, pooling, unfold,
normalisation, embedding, one_hot, pad, activations, distances and losses (dropout is
random: tests/nn/test_functional_ops.py and test_more_layers.py check it against its own
seeds, eagerly and compiled)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as TF

import staged
import staged.nn.functional as F
from tests.ops.opinfo import OpInfo, Sample, Skip, arr, distinct, index


def _conv2d_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(2, 4, 6, 5), a(6, 4, 3, 3), a(6)), name="plain"),
        Sample(
            (a(2, 4, 7, 6), a(6, 2, 3, 2), a(6)),
            dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2),
            name="grouped",
        ),
        Sample((a(3, 5, 5), a(4, 3, 2, 2), None), dict(padding="same"), name="unbatched"),
        Sample((a(0, 4, 6, 5), a(6, 4, 3, 3), a(6)), name="empty-batch"),
    ]


def _conv1d_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [Sample((a(2, 4, 9), a(6, 2, 3), a(6)), dict(stride=2, padding=1, groups=2))]


def _pool_samples(dtype, rng):
    x = distinct(rng, dtype, (2, 3, 7, 6), 1 / 8)
    return [
        Sample((x, 2)),
        Sample((x, 3), dict(stride=2, padding=1, ceil_mode=True)),
        Sample((x[0], (3, 2)), dict(stride=1, padding=(1, 0)), name="unbatched"),
    ]


def _max_pool_samples(dtype, rng):
    x = distinct(rng, dtype, (2, 3, 7, 6), 1 / 8)
    return _pool_samples(dtype, rng) + [
        Sample((x, 2), dict(dilation=2, return_indices=True), name="indices")
    ]


def _avg_pool_samples(dtype, rng):
    x = arr(rng, dtype, (2, 3, 7, 6))
    return _pool_samples(dtype, rng) + [
        Sample((x, 3), dict(stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
        Sample((x, 2), dict(divisor_override=3)),
    ]


def _unfold_samples(dtype, rng):
    return [
        Sample(
            (arr(rng, dtype, (2, 3, 5, 4)), (2, 3)), dict(dilation=(1, 1), padding=1, stride=(2, 1))
        )
    ]


def _layer_norm_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [Sample((a(3, 4, 5), (4, 5), a(4, 5), a(4, 5))), Sample((a(2, 6), (6,)))]


def _conv_transpose2d_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(2, 4, 3, 4), a(4, 3, 3, 2), a(3)), dict(stride=2, padding=1), name="strided"),
        Sample(
            (a(2, 4, 3, 3), a(4, 2, 2, 3), a(4)),
            dict(stride=(2, 1), padding=(0, 1), output_padding=(1, 0), groups=2, dilation=(1, 2)),
            name="grouped",
        ),
        Sample((a(3, 2, 2), a(3, 2, 3, 3), None), name="unbatched"),
    ]


def _conv_transpose1d_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [Sample((a(2, 4, 5), a(4, 3, 3), a(3)), dict(stride=2, padding=1, output_padding=1))]


def _pixel_shuffle_samples(dtype, rng):
    return [Sample((arr(rng, dtype, (2, 8, 3, 2)), 2)), Sample((arr(rng, dtype, (9, 2, 1)), 3))]


def _pixel_unshuffle_samples(dtype, rng):
    return [Sample((arr(rng, dtype, (2, 2, 4, 6)), 2)), Sample((arr(rng, dtype, (1, 3, 3)), 3))]


def _group_norm_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(2, 6, 3, 2), 3, a(6), a(6)), dict(eps=1e-3)),
        Sample((a(3, 4, 5), 2)),
    ]


def _instance_norm_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(2, 3, 4, 5),), dict(weight=a(3), bias=a(3), eps=1e-3)),
        Sample((a(2, 3, 6),)),
    ]


def _bilinear_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(4, 3), a(4, 2), a(5, 3, 2), a(5))),
        Sample((a(2, 3, 3), a(2, 3, 2), a(4, 3, 2))),
    ]


def _batch_norm_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(6, 3), None, None, a(3), a(3), True)),
        Sample((a(4, 3, 2, 5), None, None, a(3), a(3), True, 0.1, 1e-3)),
    ]


def _embedding_samples(dtype, rng):
    w = arr(rng, dtype, (6, 4))
    return [Sample((index(rng, 6, (2, 3)), w)), Sample((np.array([4, 0, 4]), w[:, :2]))]


def _padding_idx_samples(dtype, rng):
    w = arr(rng, dtype, (6, 4))
    return [
        Sample((np.array([[0, 2], [2, 5]]), w), dict(padding_idx=2)),
        Sample((np.array([1, 5]), w), dict(padding_idx=-1)),
    ]


def _one_hot_samples(dtype, rng):
    return [Sample((index(rng, 5, (2, 3)), 5)), Sample((np.array([0, 3, 1]), 4))]


def _one_hot_infer_samples(dtype, rng):
    return [Sample((np.array([0, 3, 1]),))]


def _pad_samples(dtype, rng):
    x = arr(rng, dtype, (2, 3, 4))
    return [
        Sample((x, (1, 2))),
        Sample((x, (1, -1, 0, 2)), dict(value=1.5)),
        Sample((x, (-1, -1, 2, 0, 1, 1))),
    ]


def _gathered_pad_samples(dtype, rng):
    x = arr(rng, dtype, (2, 3, 4))
    return [Sample((x, (1, 2)), dict(mode=m)) for m in ("reflect", "replicate", "circular")] + [
        Sample((arr(rng, dtype, (1, 2, 3, 4)), (2, 1, 0, 2)), dict(mode="reflect"))
    ]


def _interpolate_samples(dtype, rng):
    x3, x4 = arr(rng, dtype, (2, 3, 5)), arr(rng, dtype, (1, 2, 4, 5))
    return [
        Sample((x3,), dict(scale_factor=2)),
        Sample((x3,), dict(size=8, mode="linear")),
        Sample((x3,), dict(size=3, mode="linear", align_corners=True)),
        Sample((x4,), dict(size=(7, 3), mode="nearest-exact")),
        Sample((x4,), dict(scale_factor=(1.5, 0.7), mode="bilinear")),
        Sample((x4,), dict(size=(3, 8), mode="bilinear", align_corners=True)),
        Sample((arr(rng, dtype, (1, 1, 2, 3, 4)),), dict(size=(3, 2, 5), mode="trilinear")),
        Sample((x4,), dict(scale_factor=(1.5, 0.7), mode="bicubic")),
        Sample((x4,), dict(size=(3, 8), mode="bicubic", align_corners=True)),
        Sample((x3,), dict(size=3, mode="area")),
        Sample((x4,), dict(scale_factor=0.5, mode="area")),
    ]


def _activation_samples(low=-3.0, high=3.0, **options):
    """A matrix, and a 0-d scalar with ``options``."""

    def samples(dtype, rng):
        return [
            Sample((arr(rng, dtype, (3, 4), low, high),)),
            Sample((arr(rng, dtype, (), low, high),), options, name="scalar"),
        ]

    return samples


def _activation(name, low=-3.0, high=3.0, **options):
    return OpInfo(
        name, getattr(F, name), getattr(TF, name), _activation_samples(low, high, **options)
    )


def _glu_samples(dtype, rng):
    return [Sample((arr(rng, dtype, (3, 4)),)), Sample((arr(rng, dtype, (4, 3)), 0))]


def _normalize_samples(dtype, rng):
    return [
        Sample((arr(rng, dtype, (3, 4)),)),
        Sample((arr(rng, dtype, (2, 3, 4)),), dict(p=3.0, dim=0)),
    ]


def _pair_samples(**options):
    """Two (3, 4) inputs, then (3, 4) against a broadcast (4,) with ``options``."""

    def samples(dtype, rng):
        a = lambda *s: arr(rng, dtype, s)  # noqa: E731
        return [Sample((a(3, 4), a(3, 4))), Sample((a(3, 4), a(4)), options, name="broadcast")]

    return samples


def _pointwise_loss_samples(**options):
    """(input, target): their mean, then ``options`` unreduced."""

    def samples(dtype, rng):
        x, t = arr(rng, dtype, (3, 4)), arr(rng, dtype, (3, 4))
        return [Sample((x, t)), Sample((x, t), dict(reduction="none", **options))]

    return samples


def _bce_samples(dtype, rng):
    x, t = arr(rng, dtype, (3, 4), 0.05, 0.95), arr(rng, dtype, (3, 4), 0.0, 1.0)
    return [Sample((x, t)), Sample((x, t), dict(reduction="none"))]


def _bce_logits_samples(dtype, rng):
    x, t = arr(rng, dtype, (3, 4), -4.0, 4.0), arr(rng, dtype, (3, 4), 0.0, 1.0)
    return [Sample((x, t)), Sample((x, t), dict(reduction="sum"))]


_POS_WEIGHT = np.linspace(0.5, 2.0, 4)


def _pos_weighted(fn, tensor):
    """``fn`` with a constant ``pos_weight`` (torch does not differentiate it)."""
    return lambda x, t, **kw: fn(x, t, pos_weight=tensor(_POS_WEIGHT).to(x.dtype), **kw)


def _kl_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, arr(rng, dtype, (3, 4), 0.05, 1.0)), dict(reduction="batchmean")),
        Sample((x, arr(rng, dtype, (3, 4))), dict(reduction="none", log_target=True)),
    ]


def _signs(rng, shape, dtype):
    return np.where(rng.random(shape) < 0.5, -1, 1).astype(dtype)


def _soft_margin_samples(dtype, rng):
    # int64 targets: torch's soft_margin_loss does not differentiate its target
    x, y = arr(rng, dtype, (3, 4)), _signs(rng, (3, 4), np.int64)
    return [Sample((x, y)), Sample((x, y), dict(reduction="none"))]


def _cosine_embedding_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(4, 5), a(4, 5), _signs(rng, (4,), np.int64)), dict(margin=0.2, reduction="none")),
        Sample((a(5), a(5), np.array(-1)), dict(margin=-0.5), name="unbatched"),
    ]


def _margin_ranking_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(5), a(5), _signs(rng, (5,), dtype))),
        Sample((a(5), a(5), _signs(rng, (5,), dtype)), dict(margin=0.5, reduction="none")),
    ]


def _adaptive_avg_samples(n):
    """Overlapping windows (sizes not multiples), None keeping a size, equal windows,
    more outputs than inputs, unbatched, then an empty batch."""

    def samples(dtype, rng):
        a = lambda *s: arr(rng, dtype, s)  # noqa: E731
        sizes = (7, 6, 5)[:n]
        return [
            Sample((a(2, 3, *sizes), 3)),
            Sample((a(2, 3, *sizes), (None,) * (n - 1) + (2,))),
            Sample((a(3, *sizes), tuple(s + 3 for s in sizes)), name="unbatched-upsampling"),
            Sample((a(0, 2, *sizes), 4), name="empty-batch"),
        ]

    return samples


def _adaptive_max_samples(n):
    """As the average's, on distinct values (no ties); with ``return_indices``."""

    def samples(dtype, rng):
        sizes = (7, 6, 5)[:n]
        x = distinct(rng, dtype, (2, 3, *sizes), 1 / 8)
        return [
            Sample((x, 3)),
            Sample((x, (None,) * (n - 1) + (2,)), dict(return_indices=True), name="indices"),
            Sample(
                (x[0], tuple(s + 3 for s in sizes)),
                dict(return_indices=True),
                name="unbatched-upsampling",
            ),
        ]

    return samples


def _adaptive(kind, n):
    name = f"adaptive_{kind}_pool{n}d"
    if kind == "avg":
        return OpInfo(name, getattr(F, name), getattr(TF, name), _adaptive_avg_samples(n))
    return OpInfo(
        name,
        getattr(F, name),
        getattr(TF, name),
        _adaptive_max_samples(n),
        skips=[Skip("complex", "complex numbers are not ordered")],
    )


def _prelu_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(2, 3, 4), a(3))),
        Sample((a(3, 4), a(1))),
        Sample((a(5), a(1)), name="vector"),
        Sample((a(), a(1)), name="scalar"),
    ]


def _rms_norm_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(3, 4, 5), (4, 5), a(4, 5))),
        Sample((a(2, 6), (6,)), dict(eps=1e-3)),
        Sample((a(0, 3), [3], a(3)), name="empty-batch"),
    ]


def _softmin_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [Sample((a(3, 4), 1)), Sample((a(2, 3, 4), -1)), Sample((a(), 0), name="scalar")]


def _threshold_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [Sample((a(3, 4), 0.5, -1.0)), Sample((a(), -0.2, 2.0), name="scalar")]


def _triplet_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(4, 5), a(4, 5), a(4, 5)), dict(margin=2.0)),
        Sample((a(4, 5), a(4, 5), a(4, 5)), dict(p=1.0, swap=True, reduction="none")),
        Sample((a(5), a(5), a(5)), dict(margin=1.5, reduction="sum"), name="unbatched"),
    ]


def _hinge_embedding_samples(dtype, rng):
    # int64 targets: torch's hinge_embedding_loss only compares them
    x, y = arr(rng, dtype, (3, 4)), _signs(rng, (3, 4), np.int64)
    return [Sample((x, y)), Sample((x, y), dict(margin=0.5, reduction="none"))]


def _multilabel_soft_margin_samples(dtype, rng):
    x, y = arr(rng, dtype, (3, 4)), arr(rng, dtype, (3, 4), 0.0, 1.0)
    return [
        Sample((x, y)),
        Sample((x, y, arr(rng, dtype, (4,), 0.5, 2.0)), dict(reduction="none")),
        Sample((x[0], y[0]), dict(reduction="sum"), name="unbatched"),
    ]


def _gaussian_nll_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(3, 4), a(3, 4), arr(rng, dtype, (3, 4), 0.1, 2.0))),
        Sample((a(3, 4), a(3, 4), arr(rng, dtype, (3,), 0.1, 2.0)), dict(full=True)),
        Sample((a(3, 4), a(3, 4), 0.7), dict(reduction="sum"), name="float-var"),
        Sample((a(2, 3), a(2, 3), arr(rng, dtype, (2, 1), 0.1, 2.0)), dict(reduction="none")),
    ]


def _poisson_nll_samples(dtype, rng):
    x, rate = arr(rng, dtype, (3, 4)), arr(rng, dtype, (3, 4), 0.1, 3.0)
    y = arr(rng, dtype, (3, 4), 0.2, 4.0)  # some <= 1: full's Stirling term is 0 there
    return [
        Sample((x, y)),
        Sample((rate, y), dict(log_input=False, full=True, reduction="none")),
        Sample((x, y), dict(full=True, reduction="sum")),
    ]


_MULTI_MARGIN_WEIGHT = np.linspace(0.5, 2.0, 4)


def _multi_margin_weighted(fn, tensor):
    """``fn`` with a constant ``weight`` (torch does not differentiate it)."""
    return lambda x, t, **kw: fn(x, t, weight=tensor(_MULTI_MARGIN_WEIGHT).to(x.dtype), **kw)


def _multi_margin_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4), -1.0, 1.0)  # margins on both sides of 0
    t = index(rng, 4, (3,))
    return [
        Sample((x, t)),
        Sample((x, t), dict(p=2, margin=0.7, reduction="none")),
        Sample((x[0], np.array(2)), dict(reduction="none"), name="unbatched"),
    ]


_NO_MULTI_MARGIN_JVP = Skip(
    "jvp",
    "torch 2.13 has no forward-mode rule for multi_margin_loss (NotImplementedError), so "
    "there is no oracle",
)


_INT_ONLY = Skip("complex", "class indices are integers")
_PADDING_ROW = (
    "padding_idx zeroes the gradient of a row the output does depend on "
    "(PyTorch's definition), so finite differences disagree by design"
)
ENTRIES = [
    OpInfo("conv2d", F.conv2d, TF.conv2d, _conv2d_samples),
    OpInfo("conv1d", F.conv1d, TF.conv1d, _conv1d_samples),
    OpInfo("conv_transpose2d", F.conv_transpose2d, TF.conv_transpose2d, _conv_transpose2d_samples),
    OpInfo("conv_transpose1d", F.conv_transpose1d, TF.conv_transpose1d, _conv_transpose1d_samples),
    OpInfo("pixel_shuffle", F.pixel_shuffle, TF.pixel_shuffle, _pixel_shuffle_samples),
    OpInfo("pixel_unshuffle", F.pixel_unshuffle, TF.pixel_unshuffle, _pixel_unshuffle_samples),
    OpInfo("group_norm", F.group_norm, TF.group_norm, _group_norm_samples),
    OpInfo("instance_norm", F.instance_norm, TF.instance_norm, _instance_norm_samples),
    OpInfo("bilinear", F.bilinear, TF.bilinear, _bilinear_samples),
    OpInfo(
        "max_pool2d",
        F.max_pool2d,
        TF.max_pool2d,
        _max_pool_samples,
        skips=[Skip("complex", "complex numbers are not ordered")],
    ),
    OpInfo("avg_pool2d", F.avg_pool2d, TF.avg_pool2d, _avg_pool_samples),
    *(_adaptive(kind, n) for kind in ("avg", "max") for n in (1, 2, 3)),
    OpInfo("unfold", F.unfold, TF.unfold, _unfold_samples),
    OpInfo("layer_norm", F.layer_norm, TF.layer_norm, _layer_norm_samples),
    OpInfo("rms_norm", F.rms_norm, TF.rms_norm, _rms_norm_samples),
    OpInfo("batch_norm", F.batch_norm, TF.batch_norm, _batch_norm_samples),
    OpInfo("embedding", F.embedding, TF.embedding, _embedding_samples),
    OpInfo(
        "embedding_padding_idx",
        F.embedding,
        TF.embedding,
        _padding_idx_samples,
        skips=[
            Skip("fd", _PADDING_ROW),
            Skip("gradgrad", _PADDING_ROW),
            Skip(
                "jvp",
                "PyTorch's embedding JVP (auto_linear) carries the padding row's tangent "
                "while its VJP zeroes that row; staged's composite detaches the row, so "
                "its JVP is zero there, consistent with the VJP",
            ),
        ],
    ),
    OpInfo(
        "one_hot",
        F.one_hot,
        TF.one_hot,
        _one_hot_samples,
        dtypes=("float32",),
        differentiable=False,
        skips=[_INT_ONLY],
    ),
    OpInfo(
        "one_hot_infer_classes",
        F.one_hot,
        TF.one_hot,
        _one_hot_infer_samples,
        dtypes=("float32",),
        differentiable=False,
        skips=[_INT_ONLY]
        + [
            Skip(
                c,
                "num_classes=-1 reads the largest index: the output shape depends on "
                "data, which a static-shape capture cannot trace",
            )
            for c in ("shape", "capture", "llvm-cpu")
        ],
    ),
    OpInfo("pad", F.pad, TF.pad, _pad_samples),
    OpInfo("pad_gathered", F.pad, TF.pad, _gathered_pad_samples),
    OpInfo("interpolate", F.interpolate, TF.interpolate, _interpolate_samples),
    # activations
    _activation("leaky_relu", negative_slope=0.2),
    _activation("elu", alpha=0.5),
    _activation("selu"),
    _activation("celu", alpha=2.0),
    _activation("mish"),
    _activation("hardtanh", min_val=-0.5, max_val=2.0),
    _activation("relu6", -2.0, 8.0),
    _activation("hardsigmoid", -4.0, 4.0),
    _activation("hardswish", -4.0, 4.0),
    _activation("logsigmoid", -30.0, 30.0),
    _activation("softsign"),
    _activation("tanhshrink"),
    _activation("softshrink", lambd=0.3),
    _activation("hardshrink", lambd=1.2),
    OpInfo("threshold", F.threshold, TF.threshold, _threshold_samples),
    OpInfo("prelu", F.prelu, TF.prelu, _prelu_samples),
    OpInfo("softmin", F.softmin, TF.softmin, _softmin_samples),
    OpInfo("glu", F.glu, TF.glu, _glu_samples),
    # distances
    OpInfo("normalize", F.normalize, TF.normalize, _normalize_samples),
    OpInfo(
        "cosine_similarity",
        F.cosine_similarity,
        TF.cosine_similarity,
        _pair_samples(dim=-1, eps=1e-6),
    ),
    OpInfo(
        "pairwise_distance",
        F.pairwise_distance,
        TF.pairwise_distance,
        _pair_samples(p=1.0, keepdim=True),
    ),
    # losses
    OpInfo("l1_loss", F.l1_loss, TF.l1_loss, _pointwise_loss_samples()),
    OpInfo(
        "smooth_l1_loss", F.smooth_l1_loss, TF.smooth_l1_loss, _pointwise_loss_samples(beta=0.5)
    ),
    OpInfo("huber_loss", F.huber_loss, TF.huber_loss, _pointwise_loss_samples(delta=0.5)),
    OpInfo("binary_cross_entropy", F.binary_cross_entropy, TF.binary_cross_entropy, _bce_samples),
    OpInfo(
        "binary_cross_entropy_with_logits",
        F.binary_cross_entropy_with_logits,
        TF.binary_cross_entropy_with_logits,
        _bce_logits_samples,
    ),
    OpInfo(
        "binary_cross_entropy_with_logits_pos_weight",
        _pos_weighted(F.binary_cross_entropy_with_logits, staged.tensor),
        _pos_weighted(TF.binary_cross_entropy_with_logits, torch.tensor),
        lambda d, rng: _bce_logits_samples(d, rng)[:1],
    ),
    OpInfo("kl_div", F.kl_div, TF.kl_div, _kl_samples),
    OpInfo("soft_margin_loss", F.soft_margin_loss, TF.soft_margin_loss, _soft_margin_samples),
    OpInfo(
        "cosine_embedding_loss",
        F.cosine_embedding_loss,
        TF.cosine_embedding_loss,
        _cosine_embedding_samples,
    ),
    OpInfo(
        "margin_ranking_loss",
        F.margin_ranking_loss,
        TF.margin_ranking_loss,
        _margin_ranking_samples,
    ),
    OpInfo("triplet_margin_loss", F.triplet_margin_loss, TF.triplet_margin_loss, _triplet_samples),
    OpInfo(
        "hinge_embedding_loss",
        F.hinge_embedding_loss,
        TF.hinge_embedding_loss,
        _hinge_embedding_samples,
    ),
    OpInfo(
        "multilabel_soft_margin_loss",
        F.multilabel_soft_margin_loss,
        TF.multilabel_soft_margin_loss,
        _multilabel_soft_margin_samples,
    ),
    OpInfo("gaussian_nll_loss", F.gaussian_nll_loss, TF.gaussian_nll_loss, _gaussian_nll_samples),
    OpInfo("poisson_nll_loss", F.poisson_nll_loss, TF.poisson_nll_loss, _poisson_nll_samples),
    OpInfo(
        "multi_margin_loss",
        F.multi_margin_loss,
        TF.multi_margin_loss,
        _multi_margin_samples,
        skips=[_NO_MULTI_MARGIN_JVP],
    ),
    OpInfo(
        "multi_margin_loss_weight",
        _multi_margin_weighted(F.multi_margin_loss, staged.tensor),
        _multi_margin_weighted(TF.multi_margin_loss, torch.tensor),
        lambda d, rng: _multi_margin_samples(d, rng)[:2],
        skips=[_NO_MULTI_MARGIN_JVP],
    ),
]
