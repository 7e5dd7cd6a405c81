"""nn.MultiheadAttention and F.multi_head_attention_forward against torch 2.13 where the
two paths of torch's function differ: a query that may attend to no key (0 without
``need_weights``, NaN with), the ``is_causal`` hint standing for the mask, and the
functional form's own arguments (separate projections, static keys/values, bias_kv,
zero attention), values and gradients, eagerly and in a compiled step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, from_torch

RNG = np.random.RandomState(11)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _pair(make):
    theirs, ours = make(torch), make(staged)
    ours.load_state_dict({k: from_torch(v) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _grads(out, lib, module, x, w):
    (out * lib.tensor(w)).sum().backward()
    return [x.grad] + [p.grad for p in module.parameters()]


# batch 0's first two keys are padding, and the causal mask leaves its first two queries
# only those: no key at all
_PAD = np.array([[True, True, False, False], [False] * 4])
_CAUSAL = np.triu(np.ones((4, 4), bool), 1)


@pytest.mark.parametrize("need_weights", [False, True])
def test_a_query_with_no_key(need_weights):
    ours, theirs = _pair(lambda lib: lib.nn.MultiheadAttention(8, 2, batch_first=True))
    x = _f32(2, 4, 8)
    w = _f32(2, 4, 8)
    results = []
    for lib, m in ((staged, ours), (torch, theirs)):
        xt = lib.tensor(x, requires_grad=True)
        out, weights = m(
            xt,
            xt,
            xt,
            key_padding_mask=lib.tensor(_PAD),
            attn_mask=lib.tensor(_CAUSAL),
            need_weights=need_weights,
        )
        results.append((out, weights, _grads(out, lib, m, xt, w)))
    (out, weights, grads), (tout, tweights, tgrads) = results
    assert_close(out, tout, rtol=1e-5, atol=1e-6)
    assert np.isnan(out.detach().numpy()).any() == need_weights
    if need_weights:
        assert_close(weights, tweights, rtol=1e-5, atol=1e-6)
    else:
        assert weights is None and tweights is None
        assert not np.isnan(out.detach().numpy()[0, :2]).any()
    for g, tg in zip(grads, tgrads):
        assert_close(g, tg, rtol=1e-4, atol=1e-5)


def test_encoder_layer_training_with_a_query_with_no_key_stays_finite():
    """The layer calls attention without weights: torch's rows of 0, staged's too, and a
    compiled training step equal to the eager one (NaN in every parameter before)."""

    def make(lib):
        lib.manual_seed(0)
        return lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)

    ours, theirs = _pair(make)
    x, w = _f32(2, 4, 8), _f32(2, 4, 8)
    mask, pad = _CAUSAL, _PAD
    outs = []
    for lib, m in ((staged, ours), (torch, theirs)):
        xt = lib.tensor(x, requires_grad=True)
        out = m(xt, src_mask=lib.tensor(mask), src_key_padding_mask=lib.tensor(pad))
        outs.append((out, _grads(out, lib, m, xt, w)))
    (out, grads), (tout, tgrads) = outs
    assert_close(out, tout, rtol=1e-5, atol=1e-5)
    for g, tg in zip(grads, tgrads):
        assert np.isfinite(g.numpy()).all()
        assert_close(g, tg, rtol=1e-4, atol=1e-4)

    def loss(x):
        return (
            ours(x, src_mask=staged.tensor(mask), src_key_padding_mask=staged.tensor(pad)) ** 2
        ).mean()

    eager = float(loss(staged.tensor(x)).detach())
    compiled = float(staged.compile(loss)(staged.tensor(x)))
    assert np.isfinite(compiled)
    np.testing.assert_allclose(compiled, eager, rtol=1e-5)


@pytest.mark.parametrize("key_padding", [False, True])
def test_is_causal_hint_stands_for_the_mask_without_weights(key_padding):
    """torch replaces ``attn_mask`` by the causal mask when ``is_causal`` is given without
    a key padding mask and weights (its mask here allows everything)."""
    ours, theirs = _pair(lambda lib: lib.nn.MultiheadAttention(8, 2))
    x = _f32(4, 2, 8)
    kw = lambda lib: {  # noqa: E731
        "attn_mask": lib.zeros(4, 4, dtype=lib.bool),
        "is_causal": True,
        "need_weights": False,
        "key_padding_mask": lib.zeros(2, 4, dtype=lib.bool) if key_padding else None,
    }
    out, _ = ours(*[staged.tensor(x)] * 3, **kw(staged))
    tout, _ = theirs(*[torch.tensor(x)] * 3, **kw(torch))
    assert_close(out, tout, rtol=1e-5, atol=1e-6)
    full, _ = ours(*[staged.tensor(x)] * 3, need_weights=False)
    assert np.array_equal(out.detach().numpy(), full.detach().numpy()) == key_padding


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("width", [8, 3])
def test_functional_form_with_its_own_arguments(need_weights, batched, width):
    """Separate projection weights, static keys and values, zero attention, unbatched; an
    output projection to another ``width`` (CLIP's attention pool, open_clip's ResNets)."""
    e, h, n, lq, s = 8, 2, 3, 4, 5
    arrays = {
        "q_proj_weight": _f32(e, e),
        "k_proj_weight": _f32(e, e),
        "v_proj_weight": _f32(e, e),
        "in_proj_bias": _f32(3 * e),
        "out_proj_weight": _f32(width, e),
        "out_proj_bias": _f32(width),
        "static_k": _f32(n * h, s, e // h),
        "static_v": _f32(n * h, s, e // h),
    }
    q, k = _f32(lq, n, e), _f32(s, n, e)
    if not batched:
        q, k = q[:, 0], k[:, 0]
        arrays["static_k"], arrays["static_v"] = (arrays[a][:h] for a in ("static_k", "static_v"))
    results = []
    for lib in (staged, torch):
        ts = {name: lib.tensor(a, requires_grad=True) for name, a in arrays.items()}
        out, weights = lib.nn.functional.multi_head_attention_forward(
            lib.tensor(q),
            lib.tensor(k),
            lib.tensor(k),
            e,
            h,
            None,
            ts["in_proj_bias"],
            None,
            None,
            True,
            0.0,
            ts["out_proj_weight"],
            ts["out_proj_bias"],
            need_weights=need_weights,
            use_separate_proj_weight=True,
            q_proj_weight=ts["q_proj_weight"],
            k_proj_weight=ts["k_proj_weight"],
            v_proj_weight=ts["v_proj_weight"],
            static_k=ts["static_k"],
            static_v=ts["static_v"],
            average_attn_weights=False,
        )
        out.sum().backward()
        results.append((out, weights, [ts[name].grad for name in arrays]))
    (out, weights, grads), (tout, tweights, tgrads) = results
    assert_close(out, tout, rtol=1e-5, atol=1e-5)
    if need_weights:
        assert_close(weights, tweights, rtol=1e-5, atol=1e-6)
    for name, g, tg in zip(arrays, grads, tgrads):
        assert (g is None) == (tg is None), name
        if tg is not None:
            assert_close(g, tg, rtol=1e-4, atol=1e-4)


def test_functional_form_errors_as_torch():
    e = 8
    x = staged.randn(4, 2, e)
    w, b = staged.randn(3 * e, e), staged.randn(3 * e)
    args = (x, x, x, e, 2, w, b, None, None, False, 0.0, staged.randn(e, e), None)
    with pytest.raises(AssertionError, match="was expecting embedding dimension of 6"):
        staged.nn.functional.multi_head_attention_forward(*args[:3], 6, *args[4:])
    with pytest.raises(AssertionError, match="expecting static_k.size"):
        staged.nn.functional.multi_head_attention_forward(*args, static_k=staged.randn(3, 4, 4))


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("same_tensor", [False, True])
def test_inference_fast_path_gives_a_query_with_no_key_nan_as_torch(need_weights, same_tensor):
    """In eval without autograd, self-attention on one batch_first tensor runs torch's
    _native_multi_head_attention, whose softmax gives that query NaN even without weights
    (0 through scaled_dot_product_attention otherwise); staged follows both paths."""
    ours, theirs = _pair(lambda lib: lib.nn.MultiheadAttention(8, 2, batch_first=True).eval())
    x = _f32(2, 4, 8)
    outs = []
    for lib, m in ((staged, ours), (torch, theirs)):
        with lib.no_grad():
            q = lib.tensor(x)
            kv = q if same_tensor else lib.tensor(x)
            kw = {"key_padding_mask": lib.tensor(_PAD), "attn_mask": lib.tensor(_CAUSAL)}
            outs.append(m(q, kv, kv, need_weights=need_weights, **kw)[0])
    assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-6)
    nan = np.isnan(outs[0].numpy())
    assert nan.any() == (need_weights or same_tensor)


def test_encoder_stack_in_inference_as_torch():
    """A two-layer encoder in eval: torch's fast path's NaN rows (left padding and a causal
    mask) reach the next layer's keys, so the whole padded sequence is NaN; the other
    sequence is finite and equal."""

    def make(lib):
        lib.manual_seed(0)
        layer = lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        return lib.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()

    ours, theirs = _pair(make)
    x = _f32(2, 4, 8)
    outs = []
    for lib, m in ((staged, ours), (torch, theirs)):
        with lib.no_grad():
            kw = {"mask": lib.tensor(_CAUSAL), "src_key_padding_mask": lib.tensor(_PAD)}
            outs.append(m(lib.tensor(x), **kw))
    assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-5)
    assert np.isnan(outs[0].numpy()[0]).all() and np.isfinite(outs[0].numpy()[1]).all()


@pytest.mark.parametrize("need_weights", [False, True])
def test_autocast_runs_the_products_in_bfloat16_as_torch(need_weights):
    """Under CPU autocast the projections, score and value products (torch's linear, bmm,
    baddbmm or scaled_dot_product_attention) run in bfloat16: torch's output and weights
    (it crashed on float32 and bfloat16 operands with weights, and stayed float32 without)."""
    torch.manual_seed(0)  # fixed values: the tolerance below is measured on them
    ours, theirs = _pair(lambda lib: lib.nn.MultiheadAttention(8, 2, batch_first=True))
    x = np.random.RandomState(5).standard_normal((2, 3, 8)).astype(np.float32)
    outs = []
    for lib, m in ((staged, ours), (torch, theirs)):
        t = lib.tensor(x)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            kw = {"attn_mask": lib.tensor(_CAUSAL[:3, :3]), "need_weights": need_weights}
            outs.append(m(t, t, t, **kw))
    (out, weights), (tout, tweights) = outs
    assert out.dtype == staged.bfloat16
    # with weights torch's bits; without, its flash kernel rounds elsewhere: an ulp of the
    # largest entries apart (0.5 here)
    tol = 0 if need_weights else 2**-8
    assert_close(out.float(), tout.float(), rtol=tol, atol=tol)
    if need_weights:
        assert_close(weights.float(), tweights.float(), rtol=0, atol=0)
