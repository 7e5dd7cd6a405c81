"""Every layer and loss against torch 2.13 with identical weights: outputs, the gradient of
the input and of every parameter, updated buffers, train/eval behaviour, default
initialisation, repr, and state_dict interop (NumPy arrays, safetensors)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import staged
import staged.nn as nn
from tests.checks import assert_close, to_numpy

RNG = np.random.RandomState(0)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def causal(n):
    return np.triu(np.ones((n, n), bool), 1)


W4 = np.array([0.5, 1.0, 1.5, 2.0], np.float32)


# name: (constructor(ns), inputs as NumPy arrays, forward keyword arguments)
LAYERS = {
    "Linear": (lambda ns: ns.nn.Linear(5, 3), [f32(4, 5)], {}),
    "Conv2d": (lambda ns: ns.nn.Conv2d(2, 3, 3), [f32(2, 2, 6, 6)], {}),
    "Conv2d-stride-pad-groups": (
        lambda ns: ns.nn.Conv2d(4, 6, (3, 2), stride=2, padding=1, groups=2, bias=False),
        [f32(2, 4, 7, 6)],
        {},
    ),
    "Conv2d-same-dilation": (
        lambda ns: ns.nn.Conv2d(2, 2, 3, padding="same", dilation=2),
        [f32(1, 2, 7, 7)],
        {},
    ),
    "Conv1d": (lambda ns: ns.nn.Conv1d(3, 2, 3, padding=1), [f32(2, 3, 8)], {}),
    "MaxPool2d": (lambda ns: ns.nn.MaxPool2d(2), [f32(2, 3, 6, 6)], {}),
    "MaxPool2d-stride-pad": (
        lambda ns: ns.nn.MaxPool2d(3, stride=2, padding=1),
        [f32(1, 2, 7, 7)],
        {},
    ),
    "AvgPool2d": (lambda ns: ns.nn.AvgPool2d(2), [f32(2, 3, 6, 6)], {}),
    "AvgPool2d-pad-exclude": (
        lambda ns: ns.nn.AvgPool2d(3, 2, 1, count_include_pad=False),
        [f32(1, 2, 7, 7)],
        {},
    ),
    "ReLU": (lambda ns: ns.nn.ReLU(), [f32(3, 4)], {}),
    "GELU": (lambda ns: ns.nn.GELU(), [f32(3, 4)], {}),
    "GELU-tanh": (lambda ns: ns.nn.GELU(approximate="tanh"), [f32(3, 4)], {}),
    "Tanh": (lambda ns: ns.nn.Tanh(), [f32(3, 4)], {}),
    "Sigmoid": (lambda ns: ns.nn.Sigmoid(), [f32(3, 4)], {}),
    "Softmax": (lambda ns: ns.nn.Softmax(dim=1), [f32(3, 4)], {}),
    "Flatten": (lambda ns: ns.nn.Flatten(), [f32(2, 3, 4)], {}),
    "Dropout-eval": (lambda ns: ns.nn.Dropout(0.5).eval(), [f32(3, 4)], {}),
    "BatchNorm1d": (lambda ns: ns.nn.BatchNorm1d(4), [f32(6, 4)], {}),
    "BatchNorm1d-3d": (lambda ns: ns.nn.BatchNorm1d(3, momentum=0.3), [f32(4, 3, 5)], {}),
    "BatchNorm1d-no-affine": (lambda ns: ns.nn.BatchNorm1d(4, affine=False), [f32(6, 4)], {}),
    "BatchNorm1d-no-bias": (lambda ns: ns.nn.BatchNorm1d(4, bias=False), [f32(6, 4)], {}),
    "BatchNorm1d-untracked": (
        lambda ns: ns.nn.BatchNorm1d(4, track_running_stats=False),
        [f32(6, 4)],
        {},
    ),
    "BatchNorm1d-cumulative": (lambda ns: ns.nn.BatchNorm1d(4, momentum=None), [f32(6, 4)], {}),
    "BatchNorm2d": (lambda ns: ns.nn.BatchNorm2d(3, eps=1e-3), [f32(2, 3, 4, 4)], {}),
    "BatchNorm2d-eval": (
        lambda ns: _with_stats(ns.nn.BatchNorm2d(3)).eval(),
        [f32(2, 3, 4, 4)],
        {},
    ),
    "BatchNorm2d-untracked-eval": (
        lambda ns: ns.nn.BatchNorm2d(3, track_running_stats=False).eval(),
        [f32(2, 3, 4, 4)],
        {},
    ),
    "LayerNorm": (lambda ns: _randomized(ns.nn.LayerNorm(5)), [f32(3, 5)], {}),
    "LayerNorm-2d-no-bias": (
        lambda ns: ns.nn.LayerNorm((2, 3), eps=1e-3, bias=False),
        [f32(4, 2, 3)],
        {},
    ),
    "Embedding": (lambda ns: ns.nn.Embedding(7, 3), [np.array([[0, 2, 6], [2, 2, 1]])], {}),
    "Embedding-padding": (
        lambda ns: ns.nn.Embedding(7, 3, padding_idx=2),
        [np.array([0, 2, 6, 2])],
        {},
    ),
    "MultiheadAttention": (
        lambda ns: _randomized(ns.nn.MultiheadAttention(8, 2)),
        [f32(5, 2, 8), f32(4, 2, 8), f32(4, 2, 8)],
        {},
    ),
    "MultiheadAttention-batch-first-causal": (
        lambda ns: _randomized(ns.nn.MultiheadAttention(8, 4, batch_first=True)),
        [f32(2, 5, 8)] * 3,
        {"attn_mask": causal(5), "is_causal": True},
    ),
    "MultiheadAttention-padding-float-mask-per-head": (
        lambda ns: _randomized(ns.nn.MultiheadAttention(6, 3, bias=False)),
        [f32(4, 2, 6), f32(3, 2, 6), f32(3, 2, 6)],
        {
            "key_padding_mask": np.array([[False, False, True], [False, True, True]]),
            "attn_mask": f32(4, 3),
            "average_attn_weights": False,
        },
    ),
    "MultiheadAttention-unbatched-no-weights": (
        lambda ns: _randomized(ns.nn.MultiheadAttention(4, 2)),
        [f32(3, 4)] * 3,
        {"need_weights": False},
    ),
    "AdaptiveAvgPool1d": (lambda ns: ns.nn.AdaptiveAvgPool1d(4), [f32(2, 3, 9)], {}),
    "AdaptiveAvgPool2d-none": (
        lambda ns: ns.nn.AdaptiveAvgPool2d((3, None)),
        [f32(2, 3, 7, 6)],
        {},
    ),
    "AdaptiveAvgPool3d-unbatched": (
        lambda ns: ns.nn.AdaptiveAvgPool3d((2, 3, 5)),
        [f32(2, 5, 4, 3)],
        {},
    ),
    "AdaptiveMaxPool1d": (lambda ns: ns.nn.AdaptiveMaxPool1d(3), [f32(2, 3, 8)], {}),
    "AdaptiveMaxPool2d-indices": (
        lambda ns: ns.nn.AdaptiveMaxPool2d((4, 3), return_indices=True),
        [f32(2, 3, 7, 6)],
        {},
    ),
    "AdaptiveMaxPool3d": (lambda ns: ns.nn.AdaptiveMaxPool3d(2), [f32(1, 2, 5, 4, 3)], {}),
    "PReLU-channels": (lambda ns: _randomized(ns.nn.PReLU(3)), [f32(2, 3, 4)], {}),
    "PReLU": (lambda ns: ns.nn.PReLU(init=0.1), [f32(3, 4)], {}),
    "RMSNorm": (lambda ns: _randomized(ns.nn.RMSNorm((3, 4))), [f32(2, 3, 4)], {}),
    "RMSNorm-eps-no-affine": (
        lambda ns: ns.nn.RMSNorm(4, eps=1e-3, elementwise_affine=False),
        [f32(5, 4)],
        {},
    ),
    "Softmin": (lambda ns: ns.nn.Softmin(dim=1), [f32(3, 4)], {}),
    "Softmax2d": (lambda ns: ns.nn.Softmax2d(), [f32(2, 3, 2, 2)], {}),
    "Softshrink": (lambda ns: ns.nn.Softshrink(0.3), [f32(3, 4)], {}),
    "Hardshrink": (lambda ns: ns.nn.Hardshrink(0.7), [f32(3, 4)], {}),
    "Threshold": (lambda ns: ns.nn.Threshold(0.2, -1.0), [f32(3, 4)], {}),
    "CosineSimilarity": (lambda ns: ns.nn.CosineSimilarity(dim=0), [f32(4, 5), f32(4, 5)], {}),
    "PairwiseDistance": (
        lambda ns: ns.nn.PairwiseDistance(p=1.0, keepdim=True),
        [f32(4, 5), f32(4, 5)],
        {},
    ),
    "TripletMarginLoss": (
        lambda ns: ns.nn.TripletMarginLoss(margin=2.0, swap=True),
        [f32(4, 5), f32(4, 5), f32(4, 5)],
        {},
    ),
    "HingeEmbeddingLoss": (
        lambda ns: ns.nn.HingeEmbeddingLoss(margin=0.5, reduction="sum"),
        [f32(3, 4), np.where(f32(3, 4) > 0, 1, -1)],
        {},
    ),
    "MultiLabelSoftMarginLoss-weight": (
        lambda ns: ns.nn.MultiLabelSoftMarginLoss(weight=ns.tensor(W4)),
        [f32(3, 4), (f32(3, 4) > 0).astype(np.float32)],
        {},
    ),
    "GaussianNLLLoss": (
        lambda ns: ns.nn.GaussianNLLLoss(full=True),
        [f32(3, 4), f32(3, 4), np.abs(f32(3, 1)) + 0.1],
        {},
    ),
    "PoissonNLLLoss": (
        lambda ns: ns.nn.PoissonNLLLoss(log_input=False, full=True, reduction="none"),
        [np.abs(f32(3, 4)) + 0.1, np.abs(f32(3, 4)) * 3],
        {},
    ),
    "MultiMarginLoss": (
        lambda ns: ns.nn.MultiMarginLoss(p=2, margin=0.5, weight=ns.tensor(W4)),
        [f32(3, 4), np.array([0, 3, 1])],
        {},
    ),
    "DataParallel": (lambda ns: ns.nn.DataParallel(ns.nn.Linear(5, 3)), [f32(4, 5)], {}),
}


def _with_stats(bn):
    """A BatchNorm whose running statistics are not the initial ones."""
    with (staged if isinstance(bn, staged.nn.Module) else torch).no_grad():
        bn.running_mean.copy_(bn.running_mean + 0.5)
        bn.running_var.copy_(bn.running_var * 2)
    return bn


def _randomized(m):
    """Parameters made random (some layers start at 0 or 1), seeded the same in both."""
    rng = np.random.RandomState(7)
    ns = staged if isinstance(m, staged.nn.Module) else torch
    with ns.no_grad():
        for p in m.parameters():
            p.copy_(ns.tensor(0.5 * rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    return m


def _tensors(ns, arrays):
    return [ns.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]


def _kwargs(ns, kwargs):
    return {k: ns.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


def _first(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_matches_torch(name):
    check_layer(*LAYERS[name])


def check_layer(make, arrays, kwargs, rtol=1e-5):
    """``make(staged)`` vs ``make(torch)`` with torch's parameters copied into staged, on
    ``arrays`` (NumPy; float ones require grad) and forward ``kwargs``: outputs, the
    gradient of every input and parameter under a random cotangent, and buffers after."""
    tm = make(torch)
    m = make(staged)
    m.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    xs, txs = _tensors(staged, arrays), _tensors(torch, arrays)
    out, tout = m(*xs, **_kwargs(staged, kwargs)), tm(*txs, **_kwargs(torch, kwargs))
    outs = out if isinstance(out, tuple) else (out,)
    touts = tout if isinstance(tout, tuple) else (tout,)
    for o, t in zip(outs, touts, strict=True):
        assert (o is None) == (t is None)
        if o is not None:
            assert_close(o, t, rtol=rtol, atol=rtol)
    cot = RNG.standard_normal(tuple(tout_shape := _first(tout).shape)).astype(np.float32)
    (_first(out) * staged.tensor(cot)).sum().backward()
    (_first(tout) * torch.tensor(cot)).sum().backward()
    for x, tx in zip(xs, txs):
        if tx.requires_grad:
            assert_close(x.grad, tx.grad, rtol=10 * rtol, atol=rtol)
    params, tparams = dict(m.named_parameters()), dict(tm.named_parameters())
    assert list(params) == list(tparams)
    for k, p in params.items():
        assert_close(p.grad, tparams[k].grad, rtol=10 * rtol, atol=rtol)
    buffers, tbuffers = dict(m.named_buffers()), dict(tm.named_buffers())
    assert list(buffers) == list(tbuffers)
    for k, b in buffers.items():
        assert_close(b, tbuffers[k], rtol=rtol, atol=rtol / 10)
    assert tout_shape == tuple(_first(out).shape)


def test_batchnorm_running_stats_over_steps_then_eval():
    m, tm = nn.BatchNorm2d(3, momentum=0.2), torch.nn.BatchNorm2d(3, momentum=0.2)
    for _ in range(3):
        x = f32(4, 3, 2, 2) * 3 + 1
        m(staged.tensor(x))
        tm(torch.tensor(x))
    for k, b in m.state_dict().items():
        assert_close(b, tm.state_dict()[k], rtol=1e-5, atol=1e-6)
    assert m.num_batches_tracked.item() == 3
    m.eval(), tm.eval()
    x = f32(2, 3, 2, 2)
    assert_close(m(staged.tensor(x)), tm(torch.tensor(x)).detach(), rtol=1e-5, atol=1e-6)
    assert m.num_batches_tracked.item() == 3


def test_batchnorm_input_checks():
    with pytest.raises(ValueError, match="expected 4D input \\(got 3D input\\)"):
        nn.BatchNorm2d(3)(staged.ones(2, 3, 4))
    with pytest.raises(ValueError, match="expected 2D or 3D input \\(got 4D input\\)"):
        nn.BatchNorm1d(3)(staged.ones(2, 3, 4, 4))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        nn.BatchNorm1d(3)(staged.ones(1, 3))


def test_dropout_train_vs_eval():
    d = nn.Dropout(0.25)
    x = staged.ones(200, 50)
    staged.manual_seed(3)
    y = d(x).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    staged.manual_seed(3)
    np.testing.assert_array_equal(d(x).numpy(), y)  # reproducible from the seed
    assert d.eval()(x) is x
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        nn.Dropout(1.5)


def test_multihead_attention_errors():
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    mha = nn.MultiheadAttention(4, 2)
    x = staged.ones(3, 1, 4)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(
        RuntimeError,
        match="The shape of the 2D attn_mask is staged.Size\\(\\[2, 3\\]\\), but should be \\(3, 3\\)",
    ):
        mha(x, x, x, attn_mask=staged.ones(2, 3))


# --- default initialisation ---------------------------------------------------------------
INIT = {
    "Linear": lambda ns: ns.nn.Linear(400, 300),
    "Conv2d": lambda ns: ns.nn.Conv2d(16, 64, 5),
    "BatchNorm2d": lambda ns: ns.nn.BatchNorm2d(8),
    "LayerNorm": lambda ns: ns.nn.LayerNorm(8),
    "Embedding": lambda ns: ns.nn.Embedding(300, 64, padding_idx=3),
    "MultiheadAttention": lambda ns: ns.nn.MultiheadAttention(128, 4),
}


@pytest.mark.parametrize("name", sorted(INIT))
def test_default_initialisation_matches_torch(name):
    """Same keys, shapes and dtypes; each tensor drawn from torch's distribution (range and
    spread within sampling error, constants exactly)."""
    sd = INIT[name](staged).state_dict()
    tsd = INIT[name](torch).state_dict()
    assert list(sd) == list(tsd)
    for k, v in sd.items():
        a, t = to_numpy(v), to_numpy(tsd[k])
        assert a.shape == t.shape and a.dtype == t.dtype, k
        if t.size and np.all(t == t.flat[0]):
            np.testing.assert_array_equal(a, t, err_msg=k)
            continue
        assert np.abs(a).max() <= np.abs(t).max() * 1.2 + 1e-6, k
        np.testing.assert_allclose(a.std(), t.std(), rtol=0.1, err_msg=k)
        np.testing.assert_allclose(
            a.mean(), t.mean(), atol=5 * t.std() / math.sqrt(t.size), err_msg=k
        )
    if name == "Embedding":
        assert not to_numpy(sd["weight"])[3].any()


def test_init_functions_run_under_no_grad_with_torch_bounds():
    w = nn.Parameter(staged.empty(64, 32, 3, 3))
    for fn, bound in (
        (nn.init.kaiming_uniform_, math.sqrt(6 / (32 * 9))),
        (nn.init.xavier_uniform_, math.sqrt(6 / (32 * 9 + 64 * 9))),
    ):
        fn(w)
        assert w.grad_fn is None and w.requires_grad
        a = to_numpy(w)
        assert a.max() <= bound and a.min() >= -bound and a.max() > 0.9 * bound
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    np.testing.assert_allclose(to_numpy(w).std(), math.sqrt(2 / (64 * 9)), rtol=0.05)
    nn.init.zeros_(w)
    assert not to_numpy(w).any()


def test_repr_matches_torch():
    def build(ns):
        return ns.nn.Sequential(
            ns.nn.Conv2d(1, 6, 3, padding=1),
            ns.nn.BatchNorm2d(6),
            ns.nn.ReLU(),
            ns.nn.MaxPool2d(2),
            ns.nn.AvgPool2d(2),
            ns.nn.Conv2d(6, 4, 2, bias=False, groups=2),
            ns.nn.Dropout(0.1),
            ns.nn.Flatten(),
            ns.nn.Linear(4, 8),
            ns.nn.GELU(),
            ns.nn.LayerNorm(8),
            ns.nn.Embedding(10, 3, padding_idx=0),
            ns.nn.Tanh(),
            ns.nn.MultiheadAttention(4, 2),
            ns.nn.BatchNorm1d(3, affine=False),
            ns.nn.AdaptiveAvgPool2d((None, 3)),
            ns.nn.AdaptiveMaxPool1d(2, return_indices=True),
            ns.nn.AdaptiveMaxPool3d(1),
            ns.nn.PReLU(4, 0.1),
            ns.nn.RMSNorm([2, 3], eps=1e-3, elementwise_affine=False),
            ns.nn.Softmin(),
            ns.nn.Softmax2d(),
            ns.nn.Softshrink(),
            ns.nn.Hardshrink(0.3),
            ns.nn.Threshold(0.1, 2, True),
            ns.nn.CosineSimilarity(),
            ns.nn.PairwiseDistance(),
            ns.nn.TripletMarginLoss(),
            ns.nn.HingeEmbeddingLoss(),
            ns.nn.MultiLabelSoftMarginLoss(),
            ns.nn.GaussianNLLLoss(),
            ns.nn.PoissonNLLLoss(),
            ns.nn.MultiMarginLoss(),
            ns.nn.DataParallel(ns.nn.Linear(2, 3)),
        )

    assert repr(build(staged)) == repr(build(torch))


# --- interop ------------------------------------------------------------------------------
def test_load_numpy_state_dict_from_torch():
    def build(ns):
        return ns.nn.Sequential(
            ns.nn.Conv2d(1, 2, 3), ns.nn.BatchNorm2d(2), ns.nn.Flatten(), ns.nn.Linear(8, 3)
        )

    tm = build(torch)
    tm(torch.randn(4, 1, 4, 4))  # running stats away from the defaults
    exported = {k: v.numpy() for k, v in tm.state_dict().items()}
    m = build(staged)
    assert repr(nn.utils.load_numpy_state_dict(m, exported)) == "<All keys matched successfully>"
    m.eval(), tm.eval()
    x = f32(2, 1, 4, 4)
    assert_close(m(staged.tensor(x)), tm(torch.tensor(x)).detach(), rtol=1e-5, atol=1e-6)
    assert m[1].num_batches_tracked.dtype == staged.int64
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "3.bias"'):
        nn.utils.load_numpy_state_dict(m, {k: v for k, v in exported.items() if k != "3.bias"})
    with pytest.raises(RuntimeError, match="size mismatch for 3.weight"):
        nn.utils.load_numpy_state_dict(m, {**exported, "3.weight": np.zeros((3, 9), "f4")})


def test_load_npz_file(tmp_path):
    tm = torch.nn.Linear(3, 2)
    np.savez(tmp_path / "w.npz", **{k: v.numpy() for k, v in tm.state_dict().items()})
    m = nn.Linear(3, 2)
    nn.utils.load_numpy_state_dict(m, tmp_path / "w.npz")
    assert_close(m.weight, tm.weight.detach(), 0, 0, check_dtype=False)


def test_load_safetensors(tmp_path):
    st = pytest.importorskip(
        "safetensors.torch", reason="the safetensors package is not installed (optional dependency)"
    )
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    st.save_file(tm.state_dict(), str(tmp_path / "m.safetensors"))
    m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
    nn.utils.load_safetensors(m, tmp_path / "m.safetensors")
    x = f32(2, 3)
    assert_close(m(staged.tensor(x)), tm(torch.tensor(x)).detach(), rtol=1e-6, atol=1e-6)


def test_cumulative_batch_norm_compiles_with_eagers_running_stats():
    """``momentum=None`` averages by 1 / num_batches_tracked: compiled, the count is read
    in the graph (it used to need ``.item()`` and could not be captured)."""
    rng = np.random.default_rng(0)
    batches = [rng.standard_normal((6, 3, 2)).astype(np.float32) for _ in range(4)]

    def run(lib, compiled):
        bn = lib.nn.BatchNorm1d(3, momentum=None)

        def step(x):
            return bn(x).pow(2).sum()

        fn = staged.compile(step) if compiled else step
        outs = [fn(lib.tensor(b)).item() for b in batches]
        return outs, [t.detach().numpy() for t in (bn.running_mean, bn.running_var)]

    (te, ts), (se, ss), (ce, cs) = run(torch, False), run(staged, False), run(staged, True)
    np.testing.assert_allclose(se, te, rtol=1e-6)
    np.testing.assert_allclose(ce, se, rtol=1e-6)
    for t, s, c in zip(ts, ss, cs):  # torch updates in double: an ulp or two apart
        np.testing.assert_allclose(s, t, rtol=3e-7)
        np.testing.assert_allclose(c, s, rtol=1e-6)
