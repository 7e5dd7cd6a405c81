"""Names real PyTorch programs use, with torch 2.13's values, gradients and errors:
``+x``, ``torch.broadcast_to``, ``torch.combinations``, ``torch.complex`` and
``torch.polar`` (Llama 2's rotary embedding: ``torch.polar(torch.ones_like(f), f)``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged


def test_unary_plus_and_broadcast_to():
    a, ta = staged.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal((+a).numpy(), (+ta).numpy())
    for T in (staged, torch):
        with pytest.raises(RuntimeError, match="The `\\+` operator, on a bool tensor"):
            +T.tensor([True])
    np.testing.assert_array_equal(
        staged.broadcast_to(a, (2, 3)).numpy(), torch.broadcast_to(ta, (2, 3)).numpy()
    )


@pytest.mark.parametrize("args", [(), (3, True), (0,), (4,), (1,), (2, True)])
def test_combinations(args):
    a, ta = staged.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0])
    got, want = staged.combinations(a, *args), torch.combinations(ta, *args)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda T: T.combinations(T.ones(2, 2)), "Expect a 1D vector, but got shape \\[2, 2\\]"),
        (lambda T: T.combinations(T.ones(2), -1), "Expect a non-negative number, but got -1"),
        (
            lambda T: T.complex(T.ones(2).long(), T.ones(2).long()),
            "Expected both inputs to be Half, Float or Double tensors but got Long and Long",
        ),
        (
            lambda T: T.polar(T.ones(2), T.ones(2).double()),
            "Expected object of scalar type Float but got scalar type Double for second argument",
        ),
    ],
)
def test_errors_are_torchs(bad, message):
    for T in (staged, torch):
        with pytest.raises(RuntimeError, match=message):
            bad(T)


@pytest.mark.parametrize("name", ["complex", "polar"])
def test_complex_from_real_parts_values_and_gradients(name):
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.3, 2.0, (3, 1)), rng.uniform(-3.0, 3.0, (4,))
    g = rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))
    out = {}
    for T in (staged, torch):
        x, y = T.tensor(a, requires_grad=True), T.tensor(b, requires_grad=True)
        z = getattr(T, name)(x, y)
        (z * T.tensor(g)).real.sum().backward()
        out[T] = z.detach().numpy(), x.grad.numpy(), y.grad.numpy()
    assert out[staged][0].dtype == np.complex128
    for got, want in zip(out[staged], out[torch]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    inputs = (staged.tensor(a, requires_grad=True), staged.tensor(b, requires_grad=True))
    assert staged.autograd.gradcheck(getattr(staged, name), inputs)
    assert staged.autograd.gradgradcheck(getattr(staged, name), inputs)
    f32 = getattr(staged, name)(staged.ones(2), staged.zeros(2))
    assert f32.dtype == staged.complex64


ALIASES = [
    "avg_pool1d", "bilinear", "celu", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "cosine_similarity", "group_norm", "hardshrink",
    "layer_norm", "max_pool1d", "max_pool2d", "max_pool3d", "pairwise_distance", "pdist",
    "pixel_shuffle", "pixel_unshuffle", "prelu", "rrelu", "selu", "threshold",
]  # fmt: skip


def test_top_level_names_of_nn_functional_are_its_functions():
    for name in ALIASES:
        assert getattr(staged, name) is getattr(staged.nn.functional, name), name
        assert callable(getattr(torch, name)), name  # torch has each at its top level too


@pytest.mark.parametrize(
    "call",
    [
        lambda T, x, w: T.conv2d(x, w, None, 1, 1),
        lambda T, x, w: T.max_pool2d(x, 2, 1, 0, 1, True),
        lambda T, x, w: T.cosine_similarity(x, x.flip(-1), 1, 1e-8),
        lambda T, x, w: T.pdist(x.flatten(1), 1.5),
        lambda T, x, w: T.threshold(x, 0.1, -1.0),
        lambda T, x, w: T.layer_norm(x, (4,), None, None, 1e-5),
        lambda T, x, w: T.vmap(T.sum)(x),
        lambda T, x, w: T.detach(x) * 2,
    ],
)
def test_top_level_calls_with_torchs_positional_arguments(call):
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(2, 3, 4, 4)), rng.normal(size=(5, 3, 3, 3))
    got = call(staged, staged.tensor(x), staged.tensor(w))
    want = call(torch, torch.tensor(x), torch.tensor(w))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_equal():
    a = [1.0, 2.0]
    for T in (staged, torch):
        assert T.equal(T.tensor(a), T.tensor(a)) is True
        assert T.equal(T.tensor(a), T.tensor([1.0, 3.0])) is False
        assert T.equal(T.tensor(a), T.tensor([1.0, 2.0, 3.0])) is False
