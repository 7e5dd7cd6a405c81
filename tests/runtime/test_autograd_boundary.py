"""Note [autograd boundary]: a compiled body that returns tensors requiring grad and runs
no backward (``model = torch.compile(model)`` then ``loss.backward()`` outside) runs
eagerly, with one warning, so gradients reach the parameters; under no_grad, or when the
body differentiates itself, it compiles."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staged
from staged import nn


def _train(compiled: bool):
    staged.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = staged.optim.SGD(m.parameters(), lr=0.1)
    model = staged.compile(m) if compiled else m
    x, y = staged.randn(16, 4), staged.randint(0, 2, (16,))
    model.train()
    losses = []
    for _ in range(3):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with staged.no_grad():
        out = model(x)
    return losses, out.numpy(), model


def test_a_compiled_model_trained_with_backward_outside_runs_eagerly_and_learns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses, out, model = _train(compiled=True)
    boundary = [w for w in caught if "not connected to autograd" in str(w.message)]
    assert len(boundary) == 1
    assert "running Sequential eagerly, since it returns out, which require grad" in str(
        boundary[0].message
    )
    want, want_out, _ = _train(compiled=False)
    assert losses == want and losses[2] < losses[0]  # the parameters were updated
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-6)
    # the no_grad call compiled; the module answers for itself through the wrapper
    assert model.traces == 1 and "compiled (trace 1)" in model.explanation()
    assert "eager (autograd outside)" in model.explanation()
    assert len(list(model.parameters())) == 4 and model.training is False


def test_results_keep_their_graph_and_a_step_that_differentiates_itself_compiles():
    w = staged.randn(3, requires_grad=True)
    f = staged.compile(lambda x: (x * w).sum())
    with pytest.warns(UserWarning, match="not connected to autograd"):
        out = f(staged.randn(3))
    (g,) = staged.autograd.grad(out, [w])
    assert g.shape == (3,)

    def step(x):
        loss = (x * w).sum()
        loss.backward()
        return loss

    s = staged.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no boundary warning: it compiles
        s(staged.ones(3))
    assert s.traces == 1 and "compiled (trace 1)" in s.explanation()
