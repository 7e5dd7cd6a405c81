"""nn.Transformer, TransformerEncoder(Layer) and TransformerDecoder(Layer) against torch 2.13:
the same parameter names (torch's state dicts load), outputs and parameter gradients with
torch's weights (dropout 0) across batch_first, norm_first, activations, bias and masks;
errors for bad inputs; a compiled training step of an encoder equal to the eager one."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from staged import nn
from tests.checks import assert_close, from_torch, raises_like_torch

RNG = np.random.RandomState(7)


def _pair(make):
    """The torch module ``make(torch)`` and the staged one with its state dict loaded."""
    theirs = make(torch)
    ours = make(staged)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: from_torch(v) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _run(ours, theirs, inputs, kwargs=None, rtol=2e-5, atol=2e-5):
    """Forward both on ``inputs`` (NumPy), compare outputs and every parameter's grad."""
    kwargs = kwargs or {}
    xs = [staged.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    ts = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    kw_s = {k: staged.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    kw_t = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    out, tout = ours(*xs, **kw_s), theirs(*ts, **kw_t)
    assert_close(out, tout, rtol=rtol, atol=atol)
    w = RNG.standard_normal(tuple(tout.shape)).astype(np.float32)
    (out * staged.tensor(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        assert_close(p.grad, tp.grad, rtol=1e-4, atol=1e-4)
    for x, t in zip(xs, ts):
        if t.grad is not None:
            assert_close(x.grad, t.grad, rtol=1e-4, atol=1e-4)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer(batch_first, norm_first, activation):
    ours, theirs = _pair(
        lambda ns: ns.nn.TransformerEncoderLayer(
            8,
            2,
            dim_feedforward=16,
            dropout=0.0,
            activation=activation,
            batch_first=batch_first,
            norm_first=norm_first,
        )
    )
    _run(ours, theirs, [f32(3, 5, 8)])


def test_encoder_layer_masks_and_unbatched():
    ours, theirs = _pair(lambda ns: ns.nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True))
    causal = np.triu(np.full((5, 5), -np.inf, np.float32), 1)
    pad = np.zeros((3, 5), bool)
    pad[1, 3:] = True
    _run(ours, theirs, [f32(3, 5, 8)], {"src_mask": causal, "src_key_padding_mask": pad})
    _run(ours, theirs, [f32(5, 8)], {"src_mask": causal, "is_causal": True})


def test_encoder_stack_with_norm_and_bias_off():
    def make(ns):
        layer = ns.nn.TransformerEncoderLayer(8, 4, 12, 0.0, bias=False, norm_first=True)
        return ns.nn.TransformerEncoder(
            layer, 2, norm=ns.nn.LayerNorm(8, bias=False), enable_nested_tensor=False
        )

    ours, theirs = _pair(make)
    assert [n for n, _ in ours.named_parameters()][:3] == [
        "layers.0.self_attn.in_proj_weight",
        "layers.0.self_attn.out_proj.weight",
        "layers.0.linear1.weight",
    ]
    _run(ours, theirs, [f32(4, 2, 8)], {"mask": np.triu(np.ones((4, 4), bool), 1)})


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_and_stack(norm_first):
    def make(ns):
        layer = ns.nn.TransformerDecoderLayer(
            8, 2, 16, 0.0, activation=ns.nn.functional.gelu, norm_first=norm_first, batch_first=True
        )
        return ns.nn.TransformerDecoder(layer, 2, norm=ns.nn.LayerNorm(8))

    ours, theirs = _pair(make)
    causal = np.triu(np.full((4, 4), -np.inf, np.float32), 1)
    mem_pad = np.zeros((2, 6), bool)
    mem_pad[0, 4:] = True
    _run(
        ours,
        theirs,
        [f32(2, 4, 8), f32(2, 6, 8)],
        {"tgt_mask": causal, "memory_key_padding_mask": mem_pad, "tgt_is_causal": True},
    )


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer(batch_first):
    ours, theirs = _pair(
        lambda ns: ns.nn.Transformer(
            d_model=8,
            nhead=2,
            num_encoder_layers=2,
            num_decoder_layers=1,
            dim_feedforward=16,
            dropout=0.0,
            batch_first=batch_first,
        )
    )
    src, tgt = (f32(2, 5, 8), f32(2, 3, 8)) if batch_first else (f32(5, 2, 8), f32(3, 2, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert_close(mask, torch.nn.Transformer.generate_square_subsequent_mask(3))
    _run(ours, theirs, [src, tgt], {"tgt_mask": np.asarray(mask)})


def test_transformer_init_and_repr():
    t = nn.Transformer(
        d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16
    )
    assert t.encoder.norm is not None and t.decoder.norm is not None
    w = np.asarray(t.encoder.layers[0].linear1.weight.detach())
    bound = np.sqrt(6.0 / (8 + 16))  # xavier_uniform_ on every matrix
    assert np.abs(w).max() <= bound and np.abs(w).max() > bound / 2
    assert "TransformerEncoderLayer" in repr(t)


def test_errors_like_torch():
    def bad_batch(ns):
        m = ns.nn.Transformer(8, 2, 1, 1, 16, 0.0)
        return m(ns.zeros(5, 2, 8), ns.zeros(3, 3, 8))

    raises_like_torch(bad_batch, "the batch number of src and tgt must be equal")

    def bad_features(ns):
        m = ns.nn.Transformer(8, 2, 1, 1, 16, 0.0)
        return m(ns.zeros(5, 2, 8), ns.zeros(3, 2, 6))

    raises_like_torch(bad_features, "the feature number of src and tgt must be equal")
    raises_like_torch(
        lambda ns: ns.nn.TransformerEncoderLayer(8, 2, activation="tanh"),
        "activation should be relu/gelu, not tanh",
    )
    raises_like_torch(lambda ns: ns.nn.TransformerEncoderLayer(8, 3), "divisible by num_heads")

    def causal_without_mask(ns):
        m = ns.nn.TransformerEncoderLayer(8, 2, 16, 0.0)
        return m(ns.zeros(4, 1, 8), is_causal=True)

    raises_like_torch(causal_without_mask, "Need attn_mask")


def test_compiled_encoder_step_matches_eager():
    def make():
        staged.manual_seed(3)
        layer = nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True)
        model = nn.Sequential(
            nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), nn.Linear(8, 1)
        )
        return model, staged.optim.Adam(model.parameters(), lr=1e-2)

    x, y = staged.tensor(f32(4, 5, 8)), staged.tensor(f32(4, 5, 1))
    mask = nn.Transformer.generate_square_subsequent_mask(5)

    def make_step(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = ((model[1](model[0](x, mask=mask)) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        return step

    losses = []
    for compiled in (False, True):
        step = make_step(*make())
        run = staged.compile(step) if compiled else step
        losses.append([float(run(x, y)) for _ in range(3)])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-4, atol=1e-5)


def test_torch_state_dict_roundtrip_through_checkpoint(tmp_path):
    theirs = torch.nn.Transformer(8, 2, 1, 1, 16, 0.0)
    path = tmp_path / "t.pt"
    torch.save(theirs.state_dict(), path)
    ours = nn.Transformer(8, 2, 1, 1, 16, 0.0)
    ours.load_state_dict(staged.load(path))
    src, tgt = f32(4, 1, 8), f32(3, 1, 8)
    assert_close(
        ours(staged.tensor(src), staged.tensor(tgt)),
        theirs(torch.tensor(src), torch.tensor(tgt)),
        rtol=2e-5,
        atol=2e-5,
    )


@pytest.mark.parametrize(
    "kw",
    [
        dict(norm_first=True, batch_first=True),
        dict(batch_first=False),
        dict(batch_first=True),
        dict(batch_first=True, activation=lambda x: x),
        dict(batch_first=True, nhead=1),
    ],
)
def test_encoder_warns_as_torch_where_it_cannot_use_nested_tensors(kw):
    def warned(lib):
        kw2 = {"nhead": 2, **kw}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.nn.TransformerEncoder(
                lib.nn.TransformerEncoderLayer(8, dim_feedforward=16, **kw2), 2
            )
        return [(str(w.message), w.filename) for w in caught]

    assert warned(staged) == warned(torch)


def test_decoder_copies_of_a_module_activation_run_relu_as_torch():
    """torch's TransformerDecoderLayer.__setstate__ puts F.relu before a module activation
    in every copy: the layers of TransformerDecoder run relu, the layer given runs GELU."""

    def make(ns):
        layer = ns.nn.TransformerDecoderLayer(8, 2, 16, 0.0, activation=ns.nn.GELU())
        return ns.nn.ModuleList([layer, ns.nn.TransformerDecoder(layer, 2)])

    ours, theirs = _pair(make)
    assert ours[1].layers[0].activation is nn.functional.relu
    assert isinstance(ours[0].activation, nn.GELU)
    tgt, mem = f32(3, 2, 8), f32(4, 2, 8)
    for i in range(2):
        _run(ours[i], theirs[i], [tgt, mem])


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_inference_fast_path_runs_exact_gelu_as_torch(norm_first):
    """torch's _transformer_encoder_layer_fwd (eval, no autograd, batch_first) takes any
    GELU module for exact gelu: 1e-4 apart from tanh's on these inputs; with autograd,
    or with a forward hook, the reference path keeps tanh."""

    def make(ns):
        act = ns.nn.GELU(approximate="tanh")
        kw = {"batch_first": True, "norm_first": norm_first, "activation": act}
        return ns.nn.TransformerEncoderLayer(8, 2, 16, **kw).eval()

    ours, theirs = _pair(make)
    x = 3 * f32(2, 4, 8)
    outs = {}
    for hooked in (False, True):
        for grad in (False, True):
            with torch.set_grad_enabled(grad), staged.set_grad_enabled(grad):
                out, tout = ours(staged.tensor(x)), theirs(torch.tensor(x))
            assert_close(out, tout, rtol=1e-5, atol=2e-6)
            outs[hooked, grad] = out.detach().numpy()
        ours.register_forward_hook(lambda *a: None)
        theirs.register_forward_hook(lambda *a: None)
    assert np.abs(outs[False, False] - outs[False, True]).max() > 1e-5
    np.testing.assert_array_equal(outs[True, False], outs[True, True])
