"""The activation, dropout and loss modules beyond the basic set, against torch 2.13: outputs
and gradients with options, repr, in-place variants, errors and warnings; channel dropout's
masks (torch's eagerly; compiled: fresh each call, seeded); an ONNX export of a model using
them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import staged
import staged.nn.functional as F
from staged import nn
from tests.checks import assert_close, assert_raises_like_torch, to_numpy
from tests.nn.test_layers import check_layer

RNG = np.random.RandomState(1)


def f32(*shape, low=-3.0, high=3.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def signs(*shape):
    return np.where(RNG.random_sample(shape) < 0.5, -1.0, 1.0).astype(np.float32)


def _tensor(ns, a):
    return ns.tensor(a.astype(np.float32))


W4 = np.array([0.5, 1.0, 1.5, 2.0], np.float32)

# name: (constructor(ns), inputs as NumPy arrays)
MODULES = {
    "LeakyReLU": (lambda ns: ns.nn.LeakyReLU(0.2), [f32(3, 4)]),
    "ELU": (lambda ns: ns.nn.ELU(alpha=0.7), [f32(3, 4)]),
    "SELU": (lambda ns: ns.nn.SELU(), [f32(3, 4)]),
    "CELU": (lambda ns: ns.nn.CELU(2.0), [f32(3, 4)]),
    "Mish": (lambda ns: ns.nn.Mish(), [f32(3, 4)]),
    "Hardtanh": (lambda ns: ns.nn.Hardtanh(-2.0, 1.5), [f32(3, 4)]),
    "ReLU6": (lambda ns: ns.nn.ReLU6(), [f32(3, 4, low=-2, high=8)]),
    "Hardsigmoid": (lambda ns: ns.nn.Hardsigmoid(), [f32(3, 4, low=-4, high=4)]),
    "Hardswish": (lambda ns: ns.nn.Hardswish(), [f32(3, 4, low=-4, high=4)]),
    "Softplus": (lambda ns: ns.nn.Softplus(beta=2.0, threshold=4.0), [f32(3, 4)]),
    "LogSigmoid": (lambda ns: ns.nn.LogSigmoid(), [f32(3, 4)]),
    "Softsign": (lambda ns: ns.nn.Softsign(), [f32(3, 4)]),
    "Tanhshrink": (lambda ns: ns.nn.Tanhshrink(), [f32(3, 4)]),
    "GLU": (lambda ns: ns.nn.GLU(dim=0), [f32(4, 3)]),
    "Dropout2d-eval": (lambda ns: ns.nn.Dropout2d(0.5).eval(), [f32(2, 3, 2, 2)]),
    "AlphaDropout-eval": (lambda ns: ns.nn.AlphaDropout(0.5).eval(), [f32(2, 3)]),
    "L1Loss": (lambda ns: ns.nn.L1Loss(), [f32(3, 4), f32(3, 4)]),
    "SmoothL1Loss": (
        lambda ns: ns.nn.SmoothL1Loss(reduction="sum", beta=0.5),
        [f32(3, 4), f32(3, 4)],
    ),
    "HuberLoss": (lambda ns: ns.nn.HuberLoss(delta=1.5), [f32(3, 4), f32(3, 4)]),
    "BCELoss-weight": (
        lambda ns: ns.nn.BCELoss(weight=_tensor(ns, W4)),
        [f32(3, 4, low=0.05, high=0.95), f32(3, 4, low=0, high=1)],
    ),
    "BCEWithLogitsLoss-pos-weight": (
        lambda ns: ns.nn.BCEWithLogitsLoss(
            weight=_tensor(ns, W4[::-1].copy()), pos_weight=_tensor(ns, W4)
        ),
        [f32(3, 4), f32(3, 4, low=0, high=1)],
    ),
    "KLDivLoss-batchmean": (
        lambda ns: ns.nn.KLDivLoss(reduction="batchmean"),
        [f32(3, 4), f32(3, 4, low=0.05, high=1)],
    ),
    "KLDivLoss-log-target": (
        lambda ns: ns.nn.KLDivLoss(reduction="sum", log_target=True),
        [f32(3, 4), f32(3, 4)],
    ),
    "SoftMarginLoss": (
        lambda ns: ns.nn.SoftMarginLoss(),  # torch: no gradient for target
        [f32(3, 4), signs(3, 4).astype(np.int64)],
    ),
    "CosineEmbeddingLoss": (
        lambda ns: ns.nn.CosineEmbeddingLoss(margin=0.1),
        [f32(4, 5), f32(4, 5), np.array([1, -1, 1, -1])],
    ),
    "MarginRankingLoss": (
        lambda ns: ns.nn.MarginRankingLoss(margin=0.5, reduction="none"),
        [f32(5), f32(5), signs(5)],
    ),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_matches_torch(name):
    make, arrays = MODULES[name]
    check_layer(make, arrays, {})


def test_repr_matches_torch():
    def build(ns):
        return ns.nn.Sequential(
            ns.nn.LeakyReLU(),
            ns.nn.LeakyReLU(0.2, inplace=True),
            ns.nn.ELU(0.5),
            ns.nn.ELU(inplace=True),
            ns.nn.SELU(),
            ns.nn.SELU(True),
            ns.nn.CELU(2.0),
            ns.nn.Mish(inplace=True),
            ns.nn.Hardtanh(),
            ns.nn.Hardtanh(-2, 2, True),
            ns.nn.ReLU6(),
            ns.nn.ReLU6(inplace=True),
            ns.nn.Hardsigmoid(True),
            ns.nn.Hardswish(),
            ns.nn.Softplus(),
            ns.nn.Softplus(2, 10),
            ns.nn.LogSigmoid(),
            ns.nn.Softsign(),
            ns.nn.Tanhshrink(),
            ns.nn.GLU(),
            ns.nn.Dropout1d(0.2),
            ns.nn.Dropout2d(inplace=True),
            ns.nn.Dropout3d(),
            ns.nn.AlphaDropout(0.1),
            ns.nn.L1Loss(),
            ns.nn.SmoothL1Loss(beta=0.5),
            ns.nn.HuberLoss(),
            ns.nn.BCELoss(),
            ns.nn.BCEWithLogitsLoss(),
            ns.nn.KLDivLoss(),
            ns.nn.SoftMarginLoss(),
            ns.nn.CosineEmbeddingLoss(),
            ns.nn.MarginRankingLoss(),
        )

    assert repr(build(staged)) == repr(build(torch))


# --- in-place activations ------------------------------------------------------------------------
INPLACE = {
    "leaky_relu": dict(negative_slope=0.3),
    "elu": dict(alpha=0.5),
    "selu": {},
    "celu": {},
    "mish": {},
    "hardtanh": dict(min_val=-0.5, max_val=0.5),
    "relu6": {},
    "hardsigmoid": {},
    "hardswish": {},
    "threshold": dict(threshold=0.1, value=-2.0),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_activation_writes_its_input_and_differentiates(name):
    """``inplace=True`` returns the input, written; the gradient through the write of a
    non-leaf equals torch's."""
    x = f32(3, 4)
    kw = INPLACE[name]
    a, ta = staged.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ty = a * 2, ta * 2
    out = getattr(F, name)(y, inplace=True, **kw)
    tout = getattr(TF, name)(ty, inplace=True, **kw)
    assert out is y
    assert_close(y, ty, rtol=1e-6, atol=1e-6)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    assert_close(a.grad, ta.grad, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used"):
        getattr(F, name)(a, inplace=True, **kw)
    assert tout is ty


def test_softmin_dtype_relu_and_threshold_as_torch():
    x = f32(3, 4)
    out = F.softmin(staged.tensor(x), 1, dtype=staged.float64)
    assert out.dtype == staged.float64
    assert_close(out, TF.softmin(torch.tensor(x), 1, dtype=torch.float64), rtol=1e-12, atol=0)
    a, b = staged.tensor(x), staged.tensor(x)
    assert F.relu_(a) is a and F.threshold_(b, 0.5, -1.0) is b
    assert_close(a, torch.relu(torch.tensor(x)), rtol=0, atol=0)
    assert_close(b, TF.threshold(torch.tensor(x), 0.5, -1.0), rtol=0, atol=0)
    ints = [1, -1, 2]  # integer inputs keep their dtype; the value is cast as torch's
    assert_close(
        F.threshold(staged.tensor(ints), 0.5, 5.5), TF.threshold(torch.tensor(ints), 0.5, 5.5), 0, 0
    )


# --- channel dropout -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn,shape,lead",
    [
        (F.dropout1d, (40, 30, 3), 2),
        (F.dropout1d, (300, 2), 1),
        (F.dropout2d, (20, 30, 2, 2), 2),
        (F.dropout3d, (10, 30, 2, 1, 2), 2),
        (F.dropout3d, (300, 2, 1, 2), 1),
    ],
)
def test_channel_dropout_zeroes_whole_channels(fn, shape, lead):
    """One draw per channel (the leading ``lead`` dims), seeded; the gradient is the mask."""
    x = staged.ones(*shape, requires_grad=True)
    staged.manual_seed(5)
    y = fn(x, 0.25)
    a = to_numpy(y)
    per_channel = a.reshape(shape[:lead] + (-1,))
    assert (per_channel == per_channel[..., :1]).all()
    assert set(np.unique(a)) <= {0.0, np.float32(1 / 0.75)}
    channels = np.prod(shape[:lead])
    assert abs((a != 0).mean() - 0.75) < 4 * np.sqrt(0.75 * 0.25 / channels)
    staged.manual_seed(5)
    np.testing.assert_array_equal(to_numpy(fn(x, 0.25)), a)
    (g,) = staged.autograd.grad(y.sum(), x)
    np.testing.assert_array_equal(to_numpy(g), a)
    assert fn(x, 0.25, training=False) is x and fn(x, 0.0) is x
    assert not to_numpy(fn(x, 1.0)).any()
    out = staged.ones(*shape)
    assert fn(out, 0.5, inplace=True) is out
    assert set(np.unique(out.numpy())) <= {0.0, 2.0}


def test_alpha_dropout_keeps_mean_and_variance():
    x = staged.randn(400, 250)
    y = to_numpy(F.alpha_dropout(x, 0.2, training=True))
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1) < 0.02
    alpha, p = 1.7580993408473766, 0.2  # dropped elements: -alpha a (1 - p)
    dropped = np.isclose(y, -alpha * (1 - p) / np.sqrt((alpha * alpha * p + 1) * (1 - p)))
    assert abs(dropped.mean() - p) < 0.01
    assert not to_numpy(F.alpha_dropout(x, 1.0, training=True)).any()
    assert F.alpha_dropout(x, 0.2) is x and nn.AlphaDropout(0.2).eval()(x) is x


def test_channel_dropout_masks_are_torchs():
    """Eagerly the masks are torch's draws (``dropout``'s generator on the noise shape)."""
    x = f32(4, 6, 3, 2)
    for name, a in (
        ("dropout1d", x[:, :, 0]),
        ("dropout2d", x),
        ("dropout3d", x),
        ("alpha_dropout", x),
    ):
        staged.manual_seed(3)
        torch.manual_seed(3)
        out = getattr(F, name)(staged.tensor(a), 0.3, training=True)
        assert_close(out, getattr(TF, name)(torch.tensor(a), 0.3, training=True), 0, 0)


def _channel_dropouts(x):
    outs = [
        F.dropout1d(x[:, :, 0], 0.5),
        F.dropout2d(x, 0.3),
        F.dropout3d(x, 0.6),
        F.alpha_dropout(x, 0.4, True),
    ]
    return outs + list(staged.autograd.grad(outs[1].sum(), [x]))


def test_compiled_channel_dropout_draws_fresh_seeded_masks():
    """Compiled, each call draws new channel masks (the counter-based generator, seeded by
    ``manual_seed``); kept channels are scaled by 1 / (1 - p), the gradient is the mask."""
    x = staged.tensor(f32(4, 5, 2, 3, low=0.5, high=2.0), requires_grad=True)
    xs = to_numpy(x)
    step = staged.compile(_channel_dropouts)
    staged.manual_seed(2)
    first, second = ([to_numpy(t) for t in step(x)] for _ in range(2))
    staged.manual_seed(2)
    reseeded = [to_numpy(t) for t in step(x)]
    assert step.traces == 1
    for out, src, lead, p in zip(first, (xs[:, :, 0], xs, xs), (2, 2, 1), (0.5, 0.3, 0.6)):
        kept = out != 0
        per_channel = kept.reshape(out.shape[:lead] + (-1,))
        assert (per_channel == per_channel[..., :1]).all() and 0 < kept.mean() < 1
        np.testing.assert_allclose(out[kept], src[kept] / (1 - p), rtol=1e-6)
    alpha, p = 1.7580993408473766, 0.4
    a = 1 / np.sqrt((alpha * alpha * p + 1) * (1 - p))
    assert (
        np.isclose(first[3], xs * a + alpha * a * p) | np.isclose(first[3], -alpha * a * (1 - p))
    ).all()
    np.testing.assert_allclose(first[4], first[1] / xs, rtol=1e-6)
    assert not np.array_equal(first[1], second[1])
    for a, b in zip(first, reseeded):
        np.testing.assert_array_equal(a, b)


# --- losses: options, errors and warnings as torch's ------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.functional.binary_cross_entropy(ns.full((2,), 0.5), ns.zeros(2, 1)),
        lambda ns: ns.nn.functional.binary_cross_entropy(ns.tensor([1.5]), ns.zeros(1)),
        lambda ns: ns.nn.functional.binary_cross_entropy(ns.tensor([0.5]), ns.tensor([-1.0])),
        lambda ns: ns.nn.functional.binary_cross_entropy_with_logits(ns.zeros(2), ns.zeros(2, 1)),
        lambda ns: ns.nn.functional.l1_loss(ns.zeros(2), ns.zeros(2), reduction="avg"),
        lambda ns: ns.nn.functional.smooth_l1_loss(ns.zeros(2), ns.zeros(2), beta=-1.0),
        lambda ns: ns.nn.functional.huber_loss(ns.zeros(2), ns.zeros(2), delta=0.0),
        lambda ns: ns.nn.functional.huber_loss(ns.zeros(2, 3), ns.zeros(2, 3), weight=ns.ones(3)),
        lambda ns: ns.nn.functional.cosine_embedding_loss(
            ns.zeros(2, 3), ns.zeros(2, 3), ns.ones(2, 1)
        ),
        lambda ns: ns.nn.functional.cosine_embedding_loss(ns.zeros(2, 3), ns.zeros(3), ns.ones(2)),
        lambda ns: ns.nn.functional.margin_ranking_loss(ns.zeros(2, 3), ns.zeros(3), ns.ones(2)),
        lambda ns: ns.nn.functional.glu(ns.zeros(2, 3), -1),
        lambda ns: ns.nn.functional.glu(ns.tensor(1.0)),
        lambda ns: ns.nn.functional.celu(ns.zeros(2), 0.0),
        lambda ns: ns.nn.functional.hardtanh(ns.zeros(2), 2.0, 1.0),
        lambda ns: ns.nn.Hardtanh(1.0, 1.0),
        lambda ns: ns.nn.functional.dropout1d(ns.ones(2, 3, 4, 5)),
        lambda ns: ns.nn.functional.dropout2d(ns.ones(2), 1.5),
        lambda ns: ns.nn.Dropout3d(-0.1),
        # the layers and losses added with the adaptive pools
        lambda ns: ns.nn.functional.adaptive_avg_pool2d(ns.zeros(3, 4), 2),
        lambda ns: ns.nn.functional.adaptive_max_pool2d(ns.zeros(4, 4), 2),
        lambda ns: ns.nn.functional.adaptive_max_pool1d(ns.zeros(4), 2),
        lambda ns: ns.nn.functional.adaptive_avg_pool3d(ns.zeros(4, 4, 4), 2),
        lambda ns: ns.nn.functional.adaptive_avg_pool2d(ns.zeros(2, 2, 4, 4), (2, 3, 4)),
        lambda ns: ns.nn.functional.adaptive_avg_pool2d(ns.zeros(2, 2, 4, 4), -1),
        lambda ns: ns.nn.functional.adaptive_max_pool2d(ns.zeros(2, 0, 4, 4), 2),
        lambda ns: ns.nn.functional.adaptive_avg_pool2d(ns.zeros(1, 4, 4, dtype=ns.int64), 2),
        lambda ns: ns.nn.functional.adaptive_max_pool2d(ns.zeros(1, 4, 4, dtype=ns.int64), 2),
        lambda ns: ns.nn.functional.adaptive_max_pool3d(ns.zeros(1, 2, 2, 2, dtype=ns.bool), 1),
        lambda ns: ns.nn.functional.softshrink(ns.ones(3), -1.0),
        lambda ns: ns.nn.functional.softshrink(ns.ones(3, dtype=ns.int64)),
        lambda ns: ns.nn.functional.hardshrink(ns.ones(3, dtype=ns.int64)),
        lambda ns: ns.nn.functional.prelu(ns.ones(2, 3, 4), ns.ones(2)),
        lambda ns: ns.nn.functional.prelu(ns.ones(()), ns.ones(2)),
        lambda ns: ns.nn.functional.prelu(ns.ones(3), ns.ones(1, 1)),
        lambda ns: ns.nn.functional.prelu(ns.ones(3, dtype=ns.int64), ns.ones(1, dtype=ns.int64)),
        lambda ns: ns.nn.functional.rms_norm(ns.ones(3, 2), (3, 4)),
        lambda ns: ns.nn.functional.rms_norm(ns.ones(3, 2), (2,), ns.ones(3)),
        lambda ns: ns.nn.Softmax2d()(ns.ones(3, 2)),
        lambda ns: ns.nn.functional.triplet_margin_loss(ns.ones(3, 2), ns.ones(3, 2), ns.ones(3)),
        lambda ns: ns.nn.functional.triplet_margin_loss(ns.ones(2), ns.ones(2), ns.ones(2), 0.0),
        lambda ns: ns.nn.TripletMarginLoss(margin=-1.0),
        lambda ns: ns.nn.functional.multi_margin_loss(ns.ones(3, 4), ns.tensor([0, 3, 4])),
        lambda ns: ns.nn.functional.multi_margin_loss(ns.ones(3, 4), ns.tensor([0, 3, 1]), p=3),
        lambda ns: ns.nn.functional.multi_margin_loss(ns.ones(3, 4), ns.tensor([0, 3])),
        lambda ns: ns.nn.functional.multi_margin_loss(
            ns.ones(3, 4), ns.tensor([0, 3, 1]), weight=ns.ones(3)
        ),
        lambda ns: ns.nn.functional.multi_margin_loss(
            ns.ones(3, 4), ns.tensor([0, 3, 1]), weight=ns.ones(2, 2)
        ),
        lambda ns: ns.nn.functional.multi_margin_loss(ns.ones(3, 4), ns.tensor([0.0, 3.0, 1.0])),
        lambda ns: ns.nn.functional.multi_margin_loss(ns.ones(3, 4, 2), ns.tensor([0, 3, 1])),
        lambda ns: ns.nn.MultiMarginLoss(p=3),
        lambda ns: ns.nn.MultiMarginLoss(weight=ns.ones(2, 2)),
        lambda ns: ns.nn.functional.multilabel_soft_margin_loss(
            ns.ones(2), ns.ones(2), reduction="avg"
        ),
        lambda ns: ns.nn.functional.poisson_nll_loss(ns.ones(2), ns.ones(2), reduction="avg"),
        lambda ns: ns.nn.functional.hinge_embedding_loss(ns.ones(2), ns.ones(2), reduction="avg"),
        lambda ns: ns.nn.functional.gaussian_nll_loss(ns.ones(4, 3), ns.ones(4, 3), ns.ones(5)),
        lambda ns: ns.nn.functional.gaussian_nll_loss(ns.ones(2), ns.ones(2), -ns.ones(2)),
        lambda ns: ns.nn.functional.gaussian_nll_loss(ns.ones(2), ns.ones(2), -1.0),
        lambda ns: ns.nn.functional.gaussian_nll_loss(ns.ones(2), ns.ones(2), 1.0, reduction="a"),
    ],
)
def test_errors_match_torch(call):
    assert_raises_like_torch(call)


def _warnings(call, lib):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = call(lib)
    return [str(w.message).replace("torch.", "staged.") for w in got], out


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.functional.l1_loss(ns.ones(3, 1), ns.zeros(3)),
        lambda ns: ns.nn.functional.mse_loss(ns.ones(3), ns.zeros(2, 3), size_average=False),
        lambda ns: ns.nn.functional.kl_div(ns.zeros(2, 3), ns.full((2, 3), 0.5)),
        lambda ns: ns.nn.functional.smooth_l1_loss(ns.ones(3, 2), ns.zeros(3, 2), reduce=False),
        lambda ns: ns.nn.functional.cross_entropy(
            ns.ones(3, 2), ns.tensor([0, 1, 1]), None, True, -100, False
        ),
        lambda ns: ns.nn.BCELoss(size_average=False)(ns.full((2,), 0.3), ns.ones(2)),
        lambda ns: ns.nn.functional.dropout2d(ns.ones(2, 3, 4), training=False),
        lambda ns: ns.nn.functional.dropout2d(ns.ones(2, 3), training=False),
        lambda ns: ns.nn.functional.dropout3d(ns.ones(2, 3, 4), training=False),
        lambda ns: ns.nn.functional.softmin(ns.ones(2, 3, 4) * ns.arange(4.0)),
        lambda ns: ns.nn.Softmin()(ns.ones(3, 2) * ns.arange(2.0)),
        lambda ns: ns.nn.functional.triplet_margin_loss(
            ns.ones(2, 3), ns.zeros(2, 3), ns.ones(2, 3) * 2, reduce=False
        ),
        lambda ns: ns.nn.HingeEmbeddingLoss(size_average=False)(ns.ones(2) * 0.3, ns.ones(2)),
        lambda ns: ns.nn.MultiLabelSoftMarginLoss(reduce=False)(ns.ones(2, 3), ns.ones(2, 3)),
        lambda ns: ns.nn.PoissonNLLLoss(size_average=False)(ns.ones(2, 3), ns.ones(2, 3)),
        lambda ns: ns.nn.MultiMarginLoss(reduce=False)(ns.ones(2, 3), ns.tensor([0, 2])),
    ],
)
def test_warnings_and_legacy_reduction_match_torch(call):
    ours, out = _warnings(call, staged)
    theirs, tout = _warnings(call, torch)
    assert ours == theirs
    assert_close(out, tout, rtol=1e-6, atol=1e-6)


def test_weighted_pointwise_losses_match_torch():
    x, t, w = f32(3, 4), f32(3, 4), f32(3, 4, low=0.1, high=2)
    for name in ("l1_loss", "mse_loss", "huber_loss"):
        for reduction in ("mean", "sum", "none"):
            out = getattr(F, name)(
                *(staged.tensor(a) for a in (x, t)), weight=staged.tensor(w), reduction=reduction
            )
            tout = getattr(TF, name)(
                *(torch.tensor(a) for a in (x, t)), weight=torch.tensor(w), reduction=reduction
            )
            assert_close(out, tout, rtol=1e-6, atol=1e-6)


# --- export -------------------------------------------------------------------------------------
def test_onnx_export_of_a_gru_with_new_layers_matches_eager(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    import staged.onnx

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(3, 4, batch_first=True, bidirectional=True)
            self.act = nn.Sequential(nn.LeakyReLU(0.1), nn.Hardswish(), nn.Mish())
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            out, _ = self.gru(x)
            return self.head(self.act(out[:, -1]))

    staged.manual_seed(0)
    model = Model()
    x, y = staged.tensor(f32(2, 4, 3)), staged.tensor(f32(2, 2, low=0, high=1))
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=staged.tensor([2.0, 0.5]))
    staged.onnx.export(model, (x, y), tmp_path / "m.onnx", loss_fn=loss_fn)
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    feed = {k: v.numpy() for k, v in model.state_dict().items()}
    names = [i.name for i in sess.get_inputs()]
    feed.update(zip([n for n in names if n not in feed], (x.numpy(), y.numpy())))
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
    loss = loss_fn(model(x), y)
    loss.backward()
    np.testing.assert_allclose(next(iter(got.values())), loss.item(), rtol=1e-5)
    for k, p in model.named_parameters():
        np.testing.assert_allclose(got["grad." + k], p.grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("weight_dtype", ["same", "float32"])
def test_half_rms_norm_with_a_weight_rounds_once_as_torch(dtype, weight_dtype):
    """x / rms(x) * weight in float32, rounded once (the normalised x was rounded first:
    a quarter of bfloat16 outputs an ulp off)."""
    rng = np.random.default_rng(0)
    x, w = (
        rng.standard_normal((16, 64)).astype(np.float32),
        rng.standard_normal(64).astype(np.float32),
    )
    outs = []
    for L in (torch, staged):
        wd = getattr(L, dtype if weight_dtype == "same" else weight_dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's: weight and input dtypes differ
            y = L.nn.functional.rms_norm(
                L.tensor(x).to(getattr(L, dtype)), (64,), L.tensor(w).to(wd)
            )
        outs.append(y.float().detach().numpy())
    np.testing.assert_array_equal(outs[1], outs[0])
