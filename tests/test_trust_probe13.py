"""Layers and losses against torch 2.13 (the thirteenth trust probe): nothing silently wrong
in the configurations real programs use. Every case runs in float64 with torch and with
staged from the same weights (torch's, copied through ``state_dict``) and inputs, and
compares outputs, the gradients of the inputs and of every parameter, and the buffers
and weights after the call: RNN/LSTM/GRU (layers, bidirectional, ``batch_first``,
``proj_size``, given states, unbatched input, packed sequences) and their cells,
``MultiheadAttention`` (``kdim``/``vdim``, bias and zero attention, bool and float masks,
per-head weights), the Transformer layers (the encoder's nested-tensor inference: zeros
at the padded positions) and ``scaled_dot_product_attention``,
convolutions (padding modes, ``"same"``, groups, transposed ``output_size``), pooling
(``ceil_mode``, padding, divisors, unpooling, adaptive sizes that do not divide, LP),
``interpolate``, ``Embedding`` (``max_norm`` renormalising in place, ``padding_idx``,
``scale_grad_by_freq``) and ``EmbeddingBag``, the normalisation layers' running
statistics, ``logsigmoid`` past softplus's threshold, and losses with weights,
``ignore_index``, label smoothing and every reduction; antialiased ``interpolate`` where
torch's own kernels are wrong is checked by finite differences instead."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_raises_like_torch, check_grads


def _np(t) -> np.ndarray:
    return np.asarray(t.detach().tolist() if hasattr(t, "detach") else t)


class _Ctx:
    """What one case builds for library ``L``: its leaves, modules and inputs, all drawn
    from the same seeded NumPy generator for either library."""

    def __init__(self, L, seed: int):
        self.L = L
        self.F = L.nn.functional
        self.rng = np.random.default_rng(seed)
        self.leaves: list = []
        self.mods: list = []

    def x(self, *shape, lo=-1.0, hi=1.0, grad=True):
        t = self.L.tensor(self.rng.uniform(lo, hi, shape), dtype=self.L.float64)
        if grad:
            t.requires_grad_(True)
            self.leaves.append(t)
        return t

    def leaf(self, values):
        t = self.L.tensor(values, dtype=self.L.float64, requires_grad=True)
        self.leaves.append(t)
        return t

    def t(self, values, dtype=None):
        return self.L.tensor(values, dtype=getattr(self.L, dtype) if dtype else None)

    def mod(self, make):
        """``make(torch)`` under torch's seed 0 in float64; for staged, the same weights
        loaded into ``make(staged)``."""
        torch.manual_seed(0)
        m = make(torch).double()
        if self.L is not torch:
            sd = {k: staged.tensor(v.detach().numpy().copy()) for k, v in m.state_dict().items()}
            m = make(staged).double()
            m.load_state_dict(sd)
        self.mods.append(m)
        return m


def _flat(out) -> list:
    if isinstance(out, (tuple, list)):
        return [y for o in out for y in _flat(o)]
    return [] if out is None else [out]


def _run(L, case, seed):
    c = _Ctx(L, seed)
    outs = _flat(case(c))
    rng = np.random.default_rng(1000 + seed)
    loss = None
    for o in outs:
        if o.requires_grad:
            term = (o * L.tensor(rng.uniform(-1, 1, tuple(o.shape)), dtype=o.dtype)).sum()
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()
    got = {f"out{i}": _np(o) for i, o in enumerate(outs)}
    got.update({f"grad{i}": _np(t.grad) for i, t in enumerate(c.leaves) if t.grad is not None})
    for j, m in enumerate(c.mods):
        for k, p in m.named_parameters():
            if p.grad is not None:
                got[f"m{j}.{k}.grad"] = _np(p.grad)
        for k, v in m.state_dict().items():
            got[f"m{j}.{k}"] = _np(v)
    return got


def check(case, seed=0, rtol=1e-10, atol=1e-12):
    """``case`` under torch and staged: the same outputs, gradients and state (NaN where
    torch's is)."""
    want, ours = _run(torch, case, seed), _run(staged, case, seed)
    assert list(ours) == list(want)  # outputs, gradients, the state dicts' keys in order
    for k in want:
        assert ours[k].shape == want[k].shape, k
        np.testing.assert_allclose(ours[k], want[k], rtol=rtol, atol=atol, err_msg=k)


CASES: dict = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# --- recurrent layers ----------------------------------------------------------------------


@case
def lstm_proj_bidir_batch_first_states(c):
    m = c.mod(
        lambda L: L.nn.LSTM(
            3, 4, num_layers=2, bidirectional=True, batch_first=True, proj_size=2, dropout=0.5
        ).eval()
    )
    return m(c.x(2, 5, 3), (c.x(4, 2, 2), c.x(4, 2, 4)))


@case
def lstm_proj_no_state(c):
    m = c.mod(lambda L: L.nn.LSTM(3, 5, num_layers=2, proj_size=3))
    return m(c.x(4, 2, 3))


@case
def gru_unbatched_two_layers(c):
    m = c.mod(lambda L: L.nn.GRU(3, 4, num_layers=2, bidirectional=True))
    return m(c.x(5, 3), c.x(4, 4))


@case
def rnn_relu_no_bias_batch_first(c):
    m = c.mod(lambda L: L.nn.RNN(3, 4, 2, nonlinearity="relu", bias=False, batch_first=True))
    return m(c.x(2, 3, 3))


def _packed(kind, batch_first=False, bidir=True, **kw):
    def run(c):
        m = c.mod(
            lambda L: getattr(L.nn, kind)(
                3, 4, num_layers=2, bidirectional=bidir, batch_first=batch_first, **kw
            )
        )
        x = c.x(3, 5, 3) if batch_first else c.x(5, 3, 3)
        rnn = c.L.nn.utils.rnn
        p = rnn.pack_padded_sequence(x, [2, 5, 3], batch_first=batch_first, enforce_sorted=False)
        out, h = m(p)
        pad, lens = rnn.pad_packed_sequence(out, batch_first=batch_first, total_length=6)
        return out.data, pad, lens, h

    return run


for _kind in ("RNN", "GRU", "LSTM"):
    CASES[f"packed_{_kind}"] = _packed(_kind)
    CASES[f"packed_{_kind}_batch_first"] = _packed(_kind, batch_first=True)
CASES["packed_LSTM_proj"] = _packed("LSTM", proj_size=2)


@case
def packed_lstm_given_state(c):
    m = c.mod(lambda L: L.nn.LSTM(3, 4, bidirectional=True))
    rnn = c.L.nn.utils.rnn
    seqs = [c.x(2, 3), c.x(4, 3), c.x(3, 3)]
    p = rnn.pack_sequence(seqs, enforce_sorted=False)
    out, (h, cc) = m(p, (c.x(2, 3, 4), c.x(2, 3, 4)))
    return rnn.pad_packed_sequence(out), h, cc, p.sorted_indices, p.unsorted_indices


@case
def cells(c):
    L = c.L
    a = c.mod(lambda L: L.nn.LSTMCell(3, 4))
    b = c.mod(lambda L: L.nn.GRUCell(3, 4, bias=False))
    d = c.mod(lambda L: L.nn.RNNCell(3, 4, nonlinearity="relu"))
    x = c.x(2, 3)
    return (
        a(x),
        a(c.x(3), (c.x(4), c.x(4))),
        b(x, c.x(2, 4)),
        b(c.x(3)),
        d(x),
        d(c.x(3), c.x(4)),
        L.zeros(1),
    )


# --- attention -----------------------------------------------------------------------------


@case
def mha_kdim_vdim_bias_kv_zero_attn(c):
    m = c.mod(
        lambda L: L.nn.MultiheadAttention(
            6, 2, batch_first=True, kdim=4, vdim=5, add_bias_kv=True, add_zero_attn=True
        )
    )
    kpm = c.t([[False, False, True], [False, True, True]])
    mask = c.x(4, 2, 3, grad=False)
    return m(
        c.x(2, 2, 6),
        c.x(2, 3, 4),
        c.x(2, 3, 5),
        key_padding_mask=kpm,
        attn_mask=mask,
        average_attn_weights=False,
    )


@case
def mha_bool_mask_float_padding(c):
    m = c.mod(lambda L: L.nn.MultiheadAttention(4, 2, bias=False))
    q = c.x(3, 2, 4)
    kpm = c.t([[0.0, -1.5, 0.2], [0.0, 0.0, -np.inf]], "float64")
    mask = c.t([[False, True, False], [False, False, True], [True, False, False]])
    fmask = c.L.zeros(3, 3, dtype=c.L.float64).masked_fill(mask, float("-inf"))
    return m(q, q, q, key_padding_mask=kpm, attn_mask=fmask)


@case
def mha_bool_masks(c):
    m = c.mod(lambda L: L.nn.MultiheadAttention(4, 2))
    q = c.x(3, 2, 4)
    kpm = c.t([[False, False, True], [False, False, False]])
    mask = c.t([[False, True, True], [False, False, True], [False, False, False]])
    return m(q, q, q, key_padding_mask=kpm, attn_mask=mask)


@case
def mha_causal_unbatched(c):
    m = c.mod(lambda L: L.nn.MultiheadAttention(4, 2))
    q = c.x(3, 4)
    mask = c.L.nn.Transformer.generate_square_subsequent_mask(3, dtype=c.L.float64)
    return m(q, q, q, attn_mask=mask, is_causal=True, need_weights=False)


@case
def encoder_layer_norm_first_gelu(c):
    m = c.mod(
        lambda L: L.nn.TransformerEncoderLayer(
            4, 2, 8, dropout=0.0, activation="gelu", norm_first=True, batch_first=True
        )
    )
    kpm = c.t([[False, False, True], [False, False, False]])
    return m(c.x(2, 3, 4), src_key_padding_mask=kpm)


@case
def encoder_layer_float_masks_eval(c):
    m = c.mod(lambda L: L.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.3).eval())
    mask = c.L.nn.Transformer.generate_square_subsequent_mask(3, dtype=c.L.float64)
    return m(c.x(3, 2, 4), src_mask=mask, is_causal=True)


@case
def decoder_layer_callable_activation(c):
    m = c.mod(
        lambda L: L.nn.TransformerDecoderLayer(
            4, 2, 8, dropout=0.0, activation=L.nn.functional.silu, norm_first=True, bias=False
        )
    )
    mask = c.L.nn.Transformer.generate_square_subsequent_mask(3, dtype=c.L.float64)
    kpm = c.t([[False, True], [False, False]])
    return m(
        c.x(3, 2, 4), c.x(2, 2, 4), tgt_mask=mask, memory_key_padding_mask=kpm, tgt_is_causal=True
    )


@case
def sdpa_masks_scale(c):
    F = c.F
    q, k, v = c.x(2, 2, 3, 4), c.x(2, 2, 5, 4), c.x(2, 2, 5, 6)
    bmask = c.t(np.random.default_rng(5).uniform(size=(3, 5)) > 0.3)
    return (
        F.scaled_dot_product_attention(q, k, v, attn_mask=bmask, scale=0.3),
        F.scaled_dot_product_attention(q, k, v, attn_mask=c.x(2, 1, 3, 5), dropout_p=0.0),
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
        F.scaled_dot_product_attention(q, c.x(2, 1, 5, 4), c.x(2, 1, 5, 6), enable_gqa=True),
    )


# --- convolutions ---------------------------------------------------------------------------


def _conv(make, *shape):
    def run(c):
        return c.mod(make)(c.x(*shape))

    return run


for _mode in ("reflect", "replicate", "circular"):
    CASES[f"conv1d_{_mode}"] = _conv(
        lambda L, m=_mode: L.nn.Conv1d(2, 4, 3, stride=2, padding=2, padding_mode=m, groups=2),
        2,
        2,
        7,
    )
    CASES[f"conv2d_{_mode}"] = _conv(
        lambda L, m=_mode: L.nn.Conv2d(2, 3, (3, 2), padding=(1, 2), padding_mode=m), 1, 2, 5, 4
    )
    CASES[f"conv3d_{_mode}"] = _conv(
        lambda L, m=_mode: L.nn.Conv3d(1, 2, 2, padding=1, padding_mode=m, dilation=2),
        1,
        1,
        3,
        4,
        3,
    )
CASES["conv2d_same_dilation_even_kernel"] = _conv(
    lambda L: L.nn.Conv2d(4, 2, (4, 3), padding="same", dilation=(1, 2), groups=2), 2, 4, 6, 7
)
CASES["conv1d_same_even_reflect"] = _conv(
    lambda L: L.nn.Conv1d(2, 2, 4, padding="same", dilation=3, padding_mode="reflect"), 1, 2, 11
)
CASES["conv1d_same_even_circular"] = _conv(
    lambda L: L.nn.Conv1d(2, 2, 2, padding="same", padding_mode="circular"), 1, 2, 5
)
CASES["conv_transpose2d"] = _conv(
    lambda L: L.nn.ConvTranspose2d(
        4, 2, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2
    ),
    1,
    4,
    3,
    4,
)
CASES["conv_transpose3d"] = _conv(
    lambda L: L.nn.ConvTranspose3d(2, 2, 2, stride=(2, 1, 3), output_padding=(1, 0, 2)),
    1,
    2,
    2,
    2,
    2,
)


@case
def conv_transpose_output_size(c):
    a = c.mod(lambda L: L.nn.ConvTranspose1d(2, 3, 3, stride=3, padding=1))
    b = c.mod(lambda L: L.nn.ConvTranspose2d(2, 2, 3, stride=2, groups=2))
    return a(c.x(2, 2, 4), output_size=[11]), b(c.x(2, 3, 3), output_size=(8, 7)), a(c.x(2, 4))


# --- pooling --------------------------------------------------------------------------------


@case
def maxpool_ceil_indices_unpool(c):
    L = c.L
    x = c.x(1, 2, 7, 6)
    y, i = L.nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True, return_indices=True)(x)
    u = L.nn.MaxUnpool2d(3, stride=2, padding=1)(y, i, output_size=x.shape[-2:])
    y1, i1 = c.F.max_pool1d(c.x(2, 8), 2, 3, ceil_mode=True, return_indices=True)
    u1 = c.F.max_unpool1d(y1, i1, 2, 3, output_size=[8])
    y3 = c.F.max_pool3d(c.x(1, 1, 5, 5, 5), 2, stride=2, dilation=2, ceil_mode=True, padding=1)
    return y, i, u, y1, i1, u1, y3


@case
def avgpool_variants(c):
    F = c.F
    x = c.x(1, 2, 7, 6)
    return (
        F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=False),
        F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=True),
        F.avg_pool2d(x, (2, 3), 2, padding=1, divisor_override=5),
        F.avg_pool1d(c.x(2, 2, 8), 3, 2, padding=1, ceil_mode=True, count_include_pad=False),
        F.avg_pool3d(c.x(1, 1, 5, 4, 5), 2, 2, ceil_mode=True, count_include_pad=False, padding=1),
    )


@case
def adaptive_pools(c):
    F = c.F
    x = c.x(2, 3, 7, 5)
    return (
        F.adaptive_avg_pool2d(x, (3, None)),
        F.adaptive_max_pool2d(x, (4, 3), return_indices=True),
        F.adaptive_avg_pool1d(c.x(2, 7), 4),
        F.adaptive_max_pool1d(c.x(1, 2, 10), 4, return_indices=True),
        F.adaptive_avg_pool3d(c.x(1, 1, 5, 3, 7), (2, 3, 4)),
        F.adaptive_max_pool3d(c.x(1, 1, 5, 3, 7), (2, 2, 3)),
    )


@case
def lp_pools(c):
    F = c.F
    return (
        F.lp_pool2d(c.x(1, 2, 6, 5, lo=0.1), 2, 3, stride=2, ceil_mode=True),
        F.lp_pool1d(c.x(2, 2, 7, lo=0.1), 3.0, 2, ceil_mode=True),
        F.lp_pool2d(c.x(1, 1, 4, 4, lo=0.1), 1.5, (2, 3)),
    )


@case
def fractional_max_pool(c):
    samples = c.t(np.random.default_rng(3).uniform(size=(2, 3, 2)), "float64")
    y, i = c.F.fractional_max_pool2d(
        c.x(2, 3, 9, 8), 2, output_size=(4, 5), return_indices=True, _random_samples=samples
    )
    z = c.F.fractional_max_pool2d(
        c.x(1, 3, 7, 7), 3, output_ratio=(0.5, 0.6), _random_samples=samples[:1]
    )
    return y, i, z


# --- interpolate ----------------------------------------------------------------------------


@case
def interpolate_modes(c):
    F = c.F
    x = c.x(1, 2, 4, 5)
    return (
        F.interpolate(x, scale_factor=1.7, mode="nearest"),
        F.interpolate(x, scale_factor=1.7, mode="nearest-exact"),
        F.interpolate(x, size=(3, 7), mode="nearest-exact"),
        F.interpolate(x, scale_factor=1.7, mode="nearest", recompute_scale_factor=True),
        F.interpolate(x, size=(7, 3), mode="bilinear", align_corners=True),
        F.interpolate(x, size=(7, 3), mode="bilinear", align_corners=False),
        F.interpolate(x, scale_factor=(1.5, 0.7), mode="bilinear"),
        F.interpolate(x, scale_factor=(1.5, 0.7), mode="bilinear", recompute_scale_factor=True),
        F.interpolate(x, size=(6, 8), mode="bicubic", align_corners=True),
        F.interpolate(x, size=(6, 8), mode="bicubic", align_corners=False),
        F.interpolate(x, size=(3, 2), mode="area"),
        F.interpolate(c.x(1, 1, 3, 4, 2), size=(5, 2, 3), mode="trilinear", align_corners=False),
        F.interpolate(c.x(1, 1, 3, 4, 2), scale_factor=2.5, mode="trilinear", align_corners=True),
        F.interpolate(c.x(2, 3, 5), scale_factor=0.6, mode="linear"),
        F.interpolate(c.x(2, 3, 5), size=3, mode="nearest"),
    )


@case
def interpolate_antialias(c):
    F = c.F
    x = c.x(1, 2, 9, 8)
    return (
        F.interpolate(x, size=(4, 3), mode="bilinear", antialias=True),
        F.interpolate(x, size=(4, 3), mode="bicubic", antialias=True),
        F.interpolate(x, size=(12, 3), mode="bilinear", antialias=True, align_corners=True),
        F.interpolate(x, size=(5, 13), mode="bicubic", antialias=True, align_corners=True),
        F.interpolate(x, scale_factor=(0.3, 1.6), mode="bicubic", antialias=True),
        F.interpolate(
            x, scale_factor=0.45, mode="bilinear", antialias=True, recompute_scale_factor=True
        ),
        F.interpolate(x, size=(2, 8), mode="bilinear", antialias=True),
    )


@pytest.mark.parametrize(
    "kw",
    [
        {"scale_factor": (1.08, 2.3), "mode": "bilinear"},
        {"scale_factor": (0.5, 1.1), "mode": "bicubic"},
    ],
)
def test_antialias_leaves_a_dim_of_unchanged_size(kw):
    """9 rows by 1.08 stay 9 (8 columns by 1.1, 8): torch's forward leaves that dim as it
    is; its backward resamples it by the factor, so fails gradcheck there. staged's gradient
    is its forward's (finite differences)."""
    x = np.random.default_rng(0).uniform(-1, 1, (1, 2, 9, 8))
    out = [L.nn.functional.interpolate(L.tensor(x), antialias=True, **kw) for L in (torch, staged)]
    np.testing.assert_allclose(_np(out[1]), _np(out[0]), rtol=1e-12, atol=1e-12)
    check_grads(lambda t: staged.nn.functional.interpolate(t, antialias=True, **kw), [x])


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialias_to_one_column_resizes_the_rows(mode):
    """torch 2.13's antialiased kernels repeat the first row down an output one column wide;
    staged's is torch's result for two equal columns, either one."""
    x = np.random.default_rng(0).uniform(-1, 1, (1, 2, 6, 1))
    size = (9, 1)
    ours = staged.nn.functional.interpolate(staged.tensor(x), size, mode=mode, antialias=True)
    two = torch.tensor(np.repeat(x, 2, axis=3))
    want = torch.nn.functional.interpolate(two, (9, 2), mode=mode, antialias=True)[..., :1]
    np.testing.assert_allclose(_np(ours), _np(want), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialias_in_float32_is_torch_s(mode):
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3, 17, 11)).astype(np.float32)
    out = [
        L.nn.functional.interpolate(L.tensor(x), size=(5, 7), mode=mode, antialias=True)
        for L in (torch, staged)
    ]
    np.testing.assert_allclose(_np(out[1]), _np(out[0]), rtol=1e-6, atol=1e-6)


# --- embeddings -----------------------------------------------------------------------------


@case
def embedding_max_norm_in_place(c):
    m = c.mod(lambda L: L.nn.Embedding(6, 3, max_norm=1.0, norm_type=1.5))
    idx = c.t([[1, 4, 1], [5, 0, 4]])
    return m(idx)


@case
def embedding_padding_idx_freq(c):
    m = c.mod(lambda L: L.nn.Embedding(6, 3, padding_idx=-2, scale_grad_by_freq=True))
    return m(c.t([[1, 4, 1], [1, 0, 4]]))


@case
def embedding_bag_modes(c):
    L = c.L
    out = []
    for mode in ("sum", "mean", "max"):
        m = c.mod(lambda L, mode=mode: L.nn.EmbeddingBag(7, 3, mode=mode, padding_idx=2))
        idx, off = c.t([1, 2, 4, 4, 3, 2, 6]), c.t([0, 2, 2, 5])
        out.append(m(idx, off))
        out.append(m(c.t([[1, 2, 3], [2, 2, 0]])))
    s = c.mod(lambda L: L.nn.EmbeddingBag(7, 3, mode="sum", include_last_offset=True))
    out.append(s(c.t([1, 2, 4, 4, 3]), c.t([0, 1, 3, 5]), per_sample_weights=c.x(5)))
    out.append(L.zeros(1))
    return out


# --- normalisation --------------------------------------------------------------------------


@case
def batchnorm_cumulative_average(c):
    m = c.mod(lambda L: L.nn.BatchNorm1d(3, momentum=None))
    a, b = m(c.x(4, 3)), m(c.x(5, 3, 2))
    m.eval()
    return a, b, m(c.x(2, 3))


@case
def batchnorm_no_running_stats_eval(c):
    m = c.mod(lambda L: L.nn.BatchNorm2d(3, track_running_stats=False, affine=False).eval())
    e = c.mod(lambda L: L.nn.BatchNorm2d(3, affine=False, momentum=0.3))
    y = e(c.x(2, 3, 2, 2))
    e.eval()
    return m(c.x(2, 3, 2, 2)), y, e(c.x(1, 3, 2, 2))


@case
def group_layer_norms(c):
    g = c.mod(lambda L: L.nn.GroupNorm(2, 4, eps=1e-3))
    a = c.mod(lambda L: L.nn.GroupNorm(4, 4, affine=False))
    n1 = c.mod(lambda L: L.nn.LayerNorm((3, 2), elementwise_affine=False))
    n2 = c.mod(lambda L: L.nn.LayerNorm(2, bias=False))
    return g(c.x(2, 4, 3)), a(c.x(2, 4, 2, 2)), n1(c.x(2, 3, 2)), n2(c.x(2, 3, 2))


@case
def instance_norm_running_stats(c):
    m = c.mod(lambda L: L.nn.InstanceNorm1d(3, affine=True, track_running_stats=True))
    a = m(c.x(2, 3, 5))
    u = m(c.x(3, 4))  # unbatched
    m.eval()
    n = c.mod(lambda L: L.nn.InstanceNorm2d(2, momentum=None, track_running_stats=True))
    return a, u, m(c.x(2, 3, 5)), n(c.x(2, 2, 3, 3)), n(c.x(1, 2, 2, 3))


@case
def local_response_norm(c):
    m = c.mod(lambda L: L.nn.LocalResponseNorm(3, alpha=0.3, beta=0.6, k=1.5))
    return m(c.x(2, 5, 3)), m(c.x(1, 4, 3, 2)), c.F.local_response_norm(c.x(1, 6, 2, 2, 2), 4)


# --- losses ---------------------------------------------------------------------------------


def _ce(reduction):
    def run(c):
        F = c.F
        w = c.x(4, lo=0.2, hi=2.0, grad=False)
        x = c.x(5, 4)
        tgt = c.t([0, 3, -100, 1, 3])
        return (
            F.cross_entropy(x, tgt, weight=w, reduction=reduction, label_smoothing=0.2),
            F.cross_entropy(
                x,
                c.t([0, 3, 2, 1, 2]),
                weight=w,
                ignore_index=2,
                reduction=reduction,
                label_smoothing=0.1,
            ),
            F.cross_entropy(
                x,
                c.x(5, 4, lo=0.0, grad=False).softmax(-1),
                weight=w,
                reduction=reduction,
                label_smoothing=0.3,
            ),
            F.cross_entropy(
                c.x(2, 4, 3),
                c.t([[0, 1, 1], [3, 1, -100]]),
                weight=w,
                reduction=reduction,
                label_smoothing=0.25,
            ),
            F.nll_loss(
                x.log_softmax(-1),
                c.t([0, 3, 2, 1, 2]),
                weight=w,
                ignore_index=3,
                reduction=reduction,
            ),
            F.nll_loss(
                c.x(2, 4, 3, 2),
                c.t([[[0, 1], [1, 2], [3, 3]], [[2, 2], [1, 0], [0, 0]]]),
                weight=w,
                ignore_index=0,
                reduction=reduction,
            ),
        )

    return run


def _losses(reduction):
    def run(c):
        F = c.F
        L = c.L
        x, y = c.x(3, 4), c.x(3, 4)
        z = c.x(3, 4, lo=0.0, grad=False)
        return (
            F.binary_cross_entropy_with_logits(
                x,
                z,
                pos_weight=c.x(4, lo=0.5, hi=3, grad=False),
                weight=c.x(3, 1, lo=0, grad=False),
                reduction=reduction,
            ),
            F.binary_cross_entropy(
                c.x(3, 4, lo=0.05, hi=0.95), z, weight=c.x(4, lo=0, grad=False), reduction=reduction
            ),
            F.kl_div(x, y, log_target=True, reduction=reduction),
            F.kl_div(x, z, reduction=reduction),
            F.margin_ranking_loss(
                c.x(5), c.x(5), c.t([1.0, -1, 1, -1, 1], "float64"), margin=0.3, reduction=reduction
            ),
            F.triplet_margin_loss(
                x, y, c.x(3, 4), margin=0.5, p=1.0, swap=True, reduction=reduction
            ),
            F.triplet_margin_with_distance_loss(
                x,
                y,
                c.x(3, 4),
                reduction=reduction,
                distance_function=F.pairwise_distance,
                swap=True,
            ),
            F.cosine_embedding_loss(x, y, c.t([1, -1, 1]), margin=0.2, reduction=reduction),
            F.poisson_nll_loss(x, z * 3, reduction=reduction),
            F.poisson_nll_loss(
                c.x(3, 4, lo=0.1, hi=3), z * 3, log_input=False, full=True, reduction=reduction
            ),
            F.gaussian_nll_loss(x, y, c.x(3, 1, lo=0.1), full=True, reduction=reduction),
            F.gaussian_nll_loss(x, y, c.x(3, lo=0.1), eps=0.2, reduction=reduction),
            F.huber_loss(x, y, delta=0.4, reduction=reduction),
            F.smooth_l1_loss(x, y, beta=0.0, reduction=reduction),
            F.smooth_l1_loss(x, y, beta=0.3, reduction=reduction),
            F.soft_margin_loss(x, L.sign(y.detach()), reduction=reduction),
            F.hinge_embedding_loss(
                x,
                c.t(np.sign(np.arange(12).reshape(3, 4) % 3 - 0.5)),
                margin=0.4,
                reduction=reduction,
            ),
            F.multilabel_margin_loss(
                x, c.t([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 2, 1, 0]]), reduction=reduction
            ),
            F.multilabel_soft_margin_loss(
                x, z.round(), weight=c.x(4, lo=0, grad=False), reduction=reduction
            ),
            F.multi_margin_loss(
                x,
                c.t([0, 3, 1]),
                p=2,
                margin=0.7,
                weight=c.x(4, lo=0, grad=False),
                reduction=reduction,
            ),
        )

    return run


def _ctc(reduction):
    def run(c):
        lp = c.x(6, 3, 4).log_softmax(-1)
        tg = c.t([[1, 2, 2], [3, 1, 0], [2, 0, 0]])
        return (
            c.F.ctc_loss(lp, tg, c.t([6, 5, 4]), c.t([3, 2, 1]), reduction=reduction),
            c.F.ctc_loss(
                lp,
                c.t([2, 2, 0, 3, 3, 2]),
                [6, 2, 4],
                [3, 2, 1],
                reduction=reduction,
                zero_infinity=True,
                blank=1,
            ),  # the second is impossible: zeroed
        )

    return run


for _red in ("none", "sum", "mean"):
    CASES[f"cross_entropy_nll_{_red}"] = _ce(_red)
    CASES[f"losses_{_red}"] = _losses(_red)
    CASES[f"ctc_{_red}"] = _ctc(_red)


# --- more edges -----------------------------------------------------------------------------


@case
def lstm_proj_unbatched_states(c):
    m = c.mod(lambda L: L.nn.LSTM(3, 4, proj_size=1, bidirectional=True, bias=False))
    return m(c.x(4, 3), (c.x(2, 1), c.x(2, 4)))


@case
def packed_gru_sorted_given_state(c):
    m = c.mod(lambda L: L.nn.GRU(2, 3, batch_first=True))
    rnn = c.L.nn.utils.rnn
    p = rnn.pack_padded_sequence(c.x(3, 4, 2), c.t([4, 2, 1]), batch_first=True)
    out, h = m(p, c.x(1, 3, 3))
    return rnn.pad_packed_sequence(out, batch_first=True, padding_value=-2.0), h


@case
def transformer_full(c):
    m = c.mod(
        lambda L: L.nn.Transformer(4, 2, 1, 1, 8, dropout=0.0, batch_first=True, norm_first=True)
    )
    mask = c.L.nn.Transformer.generate_square_subsequent_mask(3, dtype=c.L.float64)
    kpm = c.t([[False, False, False, True], [False, False, False, False]])
    return m(
        c.x(2, 4, 4),
        c.x(2, 3, 4),
        tgt_mask=mask,
        src_key_padding_mask=kpm,
        memory_key_padding_mask=kpm,
        tgt_is_causal=True,
    )


@case
def encoder_stack_with_norm(c):
    m = c.mod(
        lambda L: L.nn.TransformerEncoder(
            L.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0),
            2,
            norm=L.nn.LayerNorm(4),
            enable_nested_tensor=False,
        )
    )
    kpm = c.t([[False, False, True], [False, False, False]])
    return m(c.x(3, 2, 4), src_key_padding_mask=kpm)


@case
def conv_unbatched_padding_modes(c):
    a = c.mod(lambda L: L.nn.Conv1d(2, 3, 3, padding=2, padding_mode="circular"))
    b = c.mod(lambda L: L.nn.Conv2d(2, 2, 3, padding=(2, 1), padding_mode="reflect", stride=2))
    return a(c.x(2, 5)), b(c.x(2, 5, 4))


@case
def pool_edges(c):
    F = c.F
    x = c.x(1, 1, 5, 6)
    y, i = F.max_pool1d(c.x(1, 2, 9), 3, 2, padding=1, dilation=2, return_indices=True)
    return (
        F.avg_pool2d(x, 2, 2, padding=1, ceil_mode=True, count_include_pad=True),
        F.avg_pool2d(x, 3, 3, padding=1, ceil_mode=True, divisor_override=2),
        F.max_pool2d(x, 2, 2, padding=1, ceil_mode=True),
        y,
        i,
        F.max_unpool1d(y, i, 3, 2, padding=1, output_size=[8]),
        c.L.nn.Upsample(scale_factor=1.5, mode="nearest")(x),
        c.L.nn.Upsample(scale_factor=(1.5, 0.5), mode="bilinear", align_corners=True)(x),
    )


@case
def functional_embedding_max_norm(c):
    w = c.x(5, 3, lo=-2.0, hi=2.0, grad=False)
    w2 = w.clone()
    y = c.F.embedding(c.t([0, 2, 2, 4]), w, max_norm=1.2)
    return y, w, c.F.embedding(c.t([[1, 3]]), w2, padding_idx=3, max_norm=0.5, norm_type=1.0), w2


@case
def soft_targets_and_all_ignored(c):
    F = c.F
    x = c.x(3, 4, 2)
    p = c.x(3, 4, 2, lo=0, grad=False).softmax(1)
    w = c.x(4, lo=0.5, grad=False)
    return (
        F.cross_entropy(x, p, weight=w, label_smoothing=0.4),
        F.cross_entropy(x, p, reduction="none", label_smoothing=0.1),
        F.cross_entropy(x[:, :, 0], c.t([1, 1, 1]), ignore_index=1),  # 0 / 0: nan
        F.nll_loss(x[:, :, 0], c.t([1, 1, 1]), ignore_index=1, reduction="sum"),
        F.cross_entropy(x[:, :, 0], c.t([1, 1, 1]), weight=w, ignore_index=1, label_smoothing=0.2),
        F.kl_div(x, p, reduction="batchmean"),
        F.kl_div(x, p.log(), reduction="batchmean", log_target=True),
        F.binary_cross_entropy_with_logits(x, p, pos_weight=c.x(4, 1, lo=0.5, grad=False)),
        F.cosine_embedding_loss(c.L.zeros(2, 3, dtype=c.L.float64), c.x(2, 3), c.t([1, -1])),
        F.poisson_nll_loss(x, p, log_input=False, eps=0.1, full=True),
    )


@case
def fully_masked_rows(c):
    F = c.F
    q = c.x(1, 2, 3, 4)
    mask = c.t([[True, True], [False, True], [False, False]])
    mha = c.mod(lambda L: L.nn.MultiheadAttention(4, 1))
    kpm = c.t([[True, True]])
    return (
        F.scaled_dot_product_attention(q, c.x(1, 2, 2, 4), c.x(1, 2, 2, 4), attn_mask=mask),
        mha(c.x(3, 1, 4), c.x(2, 1, 4), c.x(2, 1, 4), key_padding_mask=kpm),
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda L: L.nn.LSTM(3, 4, proj_size=2)(L.zeros(5, 1, 3), (L.zeros(1, 1, 4),) * 2),
        lambda L: L.nn.LSTM(3, 4, proj_size=4),
        lambda L: L.nn.MultiheadAttention(4, 2, kdim=3)(
            L.zeros(2, 1, 4), L.zeros(3, 1, 3), L.zeros(3, 1, 4), attn_mask=L.zeros(2, 4)
        ),
        lambda L: L.nn.MultiheadAttention(4, 2, add_bias_kv=True)(
            L.zeros(2, 1, 4),
            L.zeros(3, 1, 4),
            L.zeros(3, 1, 4),
            key_padding_mask=L.zeros(1, 4, dtype=L.bool),
        ),
        lambda L: L.nn.Conv1d(2, 2, 3, padding=3, padding_mode="reflect")(L.zeros(1, 2, 3)),
        lambda L: L.nn.Conv2d(2, 2, 3, padding="same", stride=2, padding_mode="circular"),
        lambda L: L.nn.functional.interpolate(
            L.zeros(1, 1, 4, 4), size=2, mode="nearest", antialias=True
        ),
        lambda L: L.nn.functional.interpolate(
            L.zeros(1, 1, 4), size=2, mode="linear", antialias=True
        ),
        lambda L: L.nn.utils.rnn.pack_padded_sequence(L.zeros(3, 2, 1), [1, 3]),
        lambda L: L.nn.utils.rnn.pad_packed_sequence(
            L.nn.utils.rnn.pack_sequence([L.zeros(3, 1)]), total_length=2
        ),
        lambda L: L.nn.ConvTranspose1d(1, 1, 3, stride=2)(L.zeros(1, 1, 3), output_size=[9]),
        lambda L: L.nn.functional.gaussian_nll_loss(L.zeros(2), L.zeros(2), -L.ones(2)),
        lambda L: L.nn.functional.cross_entropy(L.zeros(2, 3), L.ones(2, 3) / 3, ignore_index=1),
        lambda L: L.nn.functional.pad(L.zeros(1, 1, 3, 3), (1, 1), mode="reflect"),
        lambda L: L.nn.EmbeddingBag(3, 2, mode="mean")(
            L.tensor([0, 1]), L.tensor([0]), per_sample_weights=L.ones(2)
        ),
    ],
)
def test_errors_match_torch(call):
    assert_raises_like_torch(call)


def test_reprs_match_torch():
    for make in (
        lambda L: L.nn.LSTM(3, 4, proj_size=2, num_layers=2),
        lambda L: L.nn.Conv2d(2, 2, 3, padding=1, padding_mode="circular"),
        lambda L: L.nn.MultiheadAttention(4, 2, kdim=3, vdim=5, add_bias_kv=True),
    ):
        assert repr(make(staged)) == repr(make(torch))
        names = [(k, tuple(p.shape)) for k, p in make(torch).named_parameters()]
        assert [(k, tuple(p.shape)) for k, p in make(staged).named_parameters()] == names


@case
def adaptive_log_softmax(c):
    m = c.mod(
        lambda L: L.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3, 6], div_value=2.0, head_bias=True)
    )
    x = c.x(5, 4)
    r = m(x, c.t([0, 4, 9, 2, 7]))
    return r.output, r.loss, m.log_prob(x), m.predict(x), m(c.x(4), c.t(8))


@case
def rms_norm_and_normalize(c):
    F = c.F
    a = c.mod(lambda L: L.nn.RMSNorm([3, 2]))
    b = c.mod(lambda L: L.nn.RMSNorm(2, eps=0.1, elementwise_affine=False))
    z = c.x(2, 3)
    zero = z * c.t([[0.0], [1.0]], "float64")
    return (
        a(c.x(2, 3, 2)),
        b(c.x(2, 3, 2)),
        F.normalize(zero, dim=1),
        F.normalize(z, p=1.5, dim=0),
        F.cosine_similarity(zero, c.x(2, 3), eps=1e-3),
        F.cosine_similarity(z, c.x(1, 3)),
        F.pairwise_distance(z, c.x(2, 3), p=3.0, eps=0.1, keepdim=True),
        F.pairwise_distance(z, z.detach(), p=1.0),
    )


@case
def pad_sequence_sides(c):
    rnn = c.L.nn.utils.rnn
    seqs = [c.x(2, 3), c.x(4, 3), c.x(1, 3)]
    return (
        rnn.pad_sequence(seqs, batch_first=True, padding_value=0.5, padding_side="left"),
        rnn.pad_sequence(seqs, padding_side="right"),
        rnn.unpad_sequence(rnn.pad_sequence(seqs), c.t([2, 4, 1])),
        rnn.unpack_sequence(rnn.pack_sequence(seqs, enforce_sorted=False)),
    )


@case
def loss_clamps(c):
    F = c.F
    L = c.L
    p = c.x(4, lo=0.1, hi=0.9) * c.t([0.0, 1.0, 1.0, 1.0], "float64") + c.t(
        [0, 0, 0.1, 0], "float64"
    )
    one = c.x(2, lo=0.2) * 0 + 1.0
    big = c.x(3) * 800.0
    var = c.x(3, lo=0.0, hi=0.2)
    return (
        F.binary_cross_entropy(p, c.t([1.0, 0.0, 1.0, 1.0], "float64")),
        F.binary_cross_entropy(one, c.t([0.0, 1.0], "float64"), reduction="none"),
        F.binary_cross_entropy_with_logits(big, c.t([1.0, 0.0, 0.5], "float64"), reduction="none"),
        F.gaussian_nll_loss(c.x(3), c.x(3), var, eps=0.1, reduction="none"),
        F.kl_div(c.x(3), c.t([0.0, 0.5, 0.5], "float64"), reduction="sum"),
        F.poisson_nll_loss(
            c.x(4), c.t([0.0, 1.0, 2.0, 5.0], "float64"), full=True, reduction="none"
        ),
        F.smooth_l1_loss(c.x(3), c.x(3) * 0, beta=0.0),
        F.l1_loss(L.zeros(2, dtype=L.float64) + c.x(1) * 0, L.zeros(2, dtype=L.float64)),
        F.mse_loss(c.x(3, 1), c.x(3, 1), reduction="sum"),
    )


@case
def lp_pool_negative(c):
    F = c.F
    return F.lp_pool1d(c.x(1, 2, 6), 3.0, 2), F.lp_pool2d(c.x(1, 1, 4, 4), 2.0, 2, ceil_mode=True)


@case
def fold_unfold_shuffle(c):
    F = c.F
    x = c.x(1, 4, 5, 6)
    cols = F.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(2, 2))
    return (
        cols,
        F.fold(cols, (5, 6), (2, 3), dilation=(2, 1), padding=1, stride=(2, 2)),
        F.pixel_shuffle(c.x(1, 8, 2, 3), 2),
        F.pixel_unshuffle(x[:, :, :4], 2),
        F.channel_shuffle(x, 2),
        F.pad(x, (1, -2, 0, 2), value=0.5),
        F.pad(x[0], (2, 1), mode="reflect"),
        F.pad(c.x(2, 3, 4), (1, 3, 2, 0), mode="circular"),
    )


@case
def embedding_bag_max_padding_weights(c):
    m = c.mod(lambda L: L.nn.EmbeddingBag(6, 2, mode="max", max_norm=0.5))
    n = c.mod(
        lambda L: L.nn.EmbeddingBag.from_pretrained(
            L.arange(12, dtype=L.float64).reshape(6, 2) - 5,
            freeze=False,
            mode="sum",
            padding_idx=0,
            scale_grad_by_freq=True,
        )
    )
    return m(c.t([[1, 2, 2], [5, 5, 0]])), n(
        c.t([0, 3, 3, 1]), c.t([0, 1]), per_sample_weights=c.x(4)
    )


@case
def smoothed_weighted_mean_with_no_weight(c):
    """torch reduces the smoothing term apart: NaN (0 / 0 plus x / 0), not the sum's inf."""
    F = c.F
    x = c.x(3, 3)
    w = c.t([0.0, 1, 0], "float64")
    return (
        F.nll_loss(x, c.t([0, 0, 2]), weight=w),
        F.cross_entropy(x, c.t([0, 0, 2]), weight=w, label_smoothing=0.3),
        F.cross_entropy(x, c.t([0, 1, 2]), weight=w, label_smoothing=0.3),
    )


@case
def log_sigmoid_past_softplus_threshold(c):
    """logsigmoid(-20.03) is -20.03 - 2e-9, its gradient 1 - 2e-9: not softplus's linear
    branch (-x, gradient 1); through BCE with logits as well."""
    x = c.x(6, lo=-26.0, hi=-19.0)
    z = c.x(6, lo=19.0, hi=26.0)
    return (
        c.F.logsigmoid(x),
        c.L.nn.LogSigmoid()(c.leaf([0.0, -0.0, 30.0])),
        c.F.binary_cross_entropy_with_logits(
            z, c.t([0.0, 1.0, 0.3, 1, 1, 0], "float64"), reduction="none"
        ),
        c.F.binary_cross_entropy_with_logits(
            x, c.t([1.0, 0.0, 0.5, 1, 1, 0], "float64"), pos_weight=c.t([2.0], "float64")
        ),
    )


def _infeasible_ctc(c):
    lp = c.x(5, 2, 3).log_softmax(-1)
    return c.F.ctc_loss(lp, c.t([[1, 1], [2, 2]]), c.t([2, 5]), c.t([2, 2]), reduction="none")


def test_ctc_gradient_of_an_impossible_alignment_is_nan():
    check(_infeasible_ctc)


def _encoder_inference(heads=2, pad=((0, 0, 1, 1), (0, 0, 0, 0)), grad=False, **kw):
    """A TransformerEncoder in eval with a padding mask: torch runs its layers on a nested
    tensor (zeros at the padded positions, then the norm) where its fast path's conditions
    hold, else the layers as in training."""

    def run(c):
        L = c.L
        m = c.mod(
            lambda L: L.nn.TransformerEncoder(
                L.nn.TransformerEncoderLayer(4, heads, 8, batch_first=True, **kw),
                2,
                norm=L.nn.LayerNorm(4),
            ).eval()
        )
        kpm = c.t(np.array(pad, bool))
        with L.set_grad_enabled(grad):
            return m(c.x(2, 4, 4, grad=grad), src_key_padding_mask=kpm)

    return run


@pytest.mark.parametrize(
    "variant",
    [
        {},
        {"pad": ((0, 0, 1, 1), (0, 1, 1, 1))},
        {"pad": ((0, 1, 0, 1), (0, 0, 0, 0))},  # not padded at the ends: no nested tensor
        {"grad": True},
        {"heads": 1},
        {"norm_first": True},
        {"activation": "gelu"},
    ],
)
def test_encoder_inference_zeroes_the_padded_positions(variant):
    check(_encoder_inference(**variant))


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch_in_float64(name):
    check(CASES[name])


def test_compiled_step_of_the_new_options_equals_eager():
    """One llvm-cpu module: LSTM ``proj_size``, MultiheadAttention with ``kdim``/``vdim``,
    ``bias_kv`` and zero attention, a reflect-padded convolution, antialiased resizing and
    ``logsigmoid``, forward and backward, against eager."""
    nn, F = staged.nn, staged.nn.functional
    staged.manual_seed(0)
    lstm = nn.LSTM(3, 4, proj_size=2)
    mha = nn.MultiheadAttention(4, 2, kdim=3, vdim=2, add_bias_kv=True, add_zero_attn=True)
    conv = nn.Conv1d(1, 1, 3, padding=2, padding_mode="reflect")
    params = [*lstm.parameters(), *mha.parameters(), *conv.parameters()]

    def step(x, img):
        y, _ = lstm(x)  # (2, 2, 2)
        a, _ = mha(y.repeat(1, 1, 2), x, y)
        r = F.interpolate(img, size=(3, 2), mode="bicubic", antialias=True)
        c = conv(r.reshape(1, 1, 6))
        loss = F.logsigmoid(a * 30).sum() + c.square().sum()
        grads = staged.autograd.grad(loss, [x, img, *params])
        return loss, *grads

    x = staged.tensor(np.random.default_rng(0).uniform(-1, 1, (2, 2, 3)), dtype=staged.float32)
    img = staged.tensor(np.random.default_rng(1).uniform(-1, 1, (1, 1, 7, 5)), dtype=staged.float32)
    x.requires_grad_(True)
    img.requires_grad_(True)
    for ours, want in zip(staged.compile(step)(x, img), step(x, img)):
        np.testing.assert_allclose(_np(ours), _np(want), rtol=2e-5, atol=2e-5)
