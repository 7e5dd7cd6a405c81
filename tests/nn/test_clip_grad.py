"""nn.utils gradient clipping and parameter vectors against torch, and clip_grad_norm_
inside a compiled training step (no data-dependent branch: equal to eager)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import staged
import staged.nn.functional as F
from staged import nn, optim
from tests.checks import assert_close, both

GRADS = [np.array([[3.0, -4.0], [0.5, 1.0]]), np.array([2.0, -0.25, 1.5])]


def _params(lib, grads=GRADS):
    """Parameters of ``lib`` holding ``grads`` (float64), one without a grad."""
    ps = [lib.nn.Parameter(lib.tensor(np.ones_like(g))) for g in grads]
    for p, g in zip(ps, grads):
        p.grad = lib.tensor(g.copy())
    return ps + [lib.nn.Parameter(lib.tensor(np.ones(2)))]


@pytest.mark.parametrize(
    "max_norm,norm_type", [(1.0, 2.0), (100.0, 2), (2.0, 1.0), (1.5, float("inf")), (1.0, 3.0)]
)
def test_clip_grad_norm_matches_torch(max_norm, norm_type):
    (ours, o_total), (theirs, t_total) = both(
        lambda lib: (ps := _params(lib), lib.nn.utils.clip_grad_norm_(ps, max_norm, norm_type))
    )
    assert_close(o_total, t_total)
    for p, q in zip(ours, theirs):
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            assert_close(p.grad, q.grad)


def test_clip_grad_norm_single_tensor_and_none():
    (p, total), (q, t_total) = both(
        lambda lib: (ps := _params(lib)[0], lib.nn.utils.clip_grad_norm_(ps, 1.0))
    )
    assert_close(total, t_total)
    assert_close(p.grad, q.grad)
    assert_close(staged.nn.utils.clip_grad_norm_([], 1.0), torch.nn.utils.clip_grad_norm_([], 1.0))


def test_clip_grad_norm_nonfinite():
    grads = [np.array([np.inf, 1.0, 2.0])]
    with pytest.raises(RuntimeError) as theirs:
        torch.nn.utils.clip_grad_norm_(_params(torch, grads), 1.0, error_if_nonfinite=True)
    ps = _params(staged, grads)
    with pytest.raises(RuntimeError) as ours:
        staged.nn.utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert str(ours.value) == str(theirs.value)
    assert np.isinf(ps[0].grad.numpy()[0])  # left as it was
    (p, total), (q, t_total) = both(
        lambda lib: (ps := _params(lib, grads), lib.nn.utils.clip_grad_norm_(ps, 1.0))
    )
    assert_close(total, t_total)
    np.testing.assert_array_equal(p[0].grad.numpy(), q[0].grad.numpy())  # NaN, 0, 0


def test_clip_grad_value_matches_torch():
    ours, theirs = both(
        lambda lib: (ps := _params(lib), lib.nn.utils.clip_grad_value_(ps, 0.75))[0]
    )
    for p, q in zip(ours, theirs):
        if q.grad is not None:
            assert_close(p.grad, q.grad)


def test_parameters_to_vector_and_back():
    (ours, vec), (theirs, tvec) = both(
        lambda lib: (ps := _params(lib), lib.nn.utils.parameters_to_vector(ps))
    )
    assert_close(vec, tvec)
    new = np.arange(vec.numel(), dtype=np.float64)
    staged.nn.utils.vector_to_parameters(staged.tensor(new), ours)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), theirs)
    for p, q in zip(ours, theirs):
        assert_close(p, q)
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        staged.nn.utils.vector_to_parameters([1.0], ours)


def test_parameters_to_vector_gradient():
    ours, theirs = both(
        lambda lib: (
            ps := _params(lib),
            (lib.nn.utils.parameters_to_vector(ps) * lib.arange(9.0, dtype=lib.float64))
            .sum()
            .backward(),
        )[0]
    )
    for p, q in zip(ours, theirs):
        assert_close(p.grad, q.grad)


def _trainer(model, clip):
    opt = optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        total = clip(model.parameters())
        opt.step()
        return total

    return step


@pytest.mark.parametrize("norm_type", [2.0, float("inf")])
def test_compiled_step_with_clip_grad_norm_equals_eager(norm_type):
    staged.manual_seed(0)
    eager_model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    compiled_model = copy.deepcopy(eager_model)

    def clip(ps):  # max_norm between the norms seen: clipped at some steps, not others
        return nn.utils.clip_grad_norm_(ps, 1.1, norm_type, error_if_nonfinite=True)

    eager_step = _trainer(eager_model, clip)
    step = staged.compile(_trainer(compiled_model, clip))
    rng = np.random.default_rng(0)
    for i in range(4):
        x = staged.tensor(rng.standard_normal((5, 6)).astype(np.float32) * (1 + i))
        y = staged.tensor(rng.integers(0, 3, 5))
        assert_close(step(x, y), eager_step(x, y), rtol=1e-5, atol=1e-6)
    for p, q in zip(compiled_model.parameters(), eager_model.parameters()):
        assert_close(p, q, rtol=1e-5, atol=1e-6)
        assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    assert step.traces <= 2
    before = [np.array(p.detach()) for p in compiled_model.parameters()]
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        step(staged.tensor(np.full((5, 6), np.nan, np.float32)), y).item()
    for p, b in zip(compiled_model.parameters(), before):  # the failed step changed nothing
        np.testing.assert_array_equal(np.asarray(p.detach()), b)
