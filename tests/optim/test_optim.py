"""Optimizers against torch: 10-step trajectories from identical weights and data."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, to_numpy


def _problem(ns):
    """A small least-squares model with a bias (and a parameter left without grad)."""
    rng = np.random.RandomState(0)
    w = ns.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    b = ns.tensor(rng.standard_normal(2), requires_grad=True)
    unused = ns.tensor(rng.standard_normal(2), requires_grad=True)
    x, y = ns.tensor(rng.standard_normal((8, 3))), ns.tensor(rng.standard_normal((8, 2)))
    return [w, b, unused], lambda: (((x @ w + b).tanh() - y) ** 2).mean()


def trajectory(ns, make_opt, steps=10):
    params, loss_fn = _problem(ns)
    opt = make_opt(ns, params)
    history = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
        history.append([to_numpy(p).copy() for p in params] + [to_numpy(loss)])
    return history


CASES = {
    "sgd": lambda ns, p: ns.optim.SGD(p, lr=0.1),
    "sgd-momentum": lambda ns, p: ns.optim.SGD(p, lr=0.1, momentum=0.9),
    "sgd-nesterov": lambda ns, p: ns.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    "sgd-weight-decay": lambda ns, p: ns.optim.SGD(p, lr=0.1, weight_decay=0.1),
    "sgd-dampening": lambda ns, p: ns.optim.SGD(p, lr=0.05, momentum=0.5, dampening=0.3,
                                                weight_decay=0.01),
    "sgd-maximize": lambda ns, p: ns.optim.SGD(p, lr=0.01, momentum=0.9, maximize=True),
    "adam": lambda ns, p: ns.optim.Adam(p, lr=0.05),
    "adam-weight-decay": lambda ns, p: ns.optim.Adam(p, lr=0.05, betas=(0.8, 0.99),
                                                     weight_decay=0.1),
    "adam-amsgrad": lambda ns, p: ns.optim.Adam(p, lr=0.05, amsgrad=True),
    "adamw": lambda ns, p: ns.optim.AdamW(p, lr=0.05),
    "adamw-groups": lambda ns, p: ns.optim.AdamW(
        [{"params": p[:1], "lr": 0.1}, {"params": p[1:]}], lr=0.02, weight_decay=0.5),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_trajectory_matches_torch(name):
    ours, theirs = trajectory(staged, CASES[name]), trajectory(torch, CASES[name])
    for a, b in zip(ours, theirs):
        for x, y in zip(a, b):
            assert_close(x, y, rtol=1e-5, atol=1e-8)
    assert not np.allclose(ours[-1][0], ours[0][0])  # the parameters moved


def test_parameter_without_grad_is_not_updated():
    params, _ = _problem(staged)
    before = params[2].numpy(force=True).copy()
    for opt in (staged.optim.SGD(params, lr=0.1, momentum=0.9), staged.optim.Adam(params)):
        (params[0].sum() + params[1].sum()).backward()
        opt.step()
        assert params[2] not in opt.state
    np.testing.assert_array_equal(params[2].numpy(force=True), before)


def test_zero_grad_set_to_none_or_zeros():
    params, loss_fn = _problem(staged)
    opt = staged.optim.SGD(params, lr=0.1)
    loss_fn().backward()
    opt.zero_grad(set_to_none=False)
    assert params[0].grad.abs().sum().item() == 0.0
    opt.zero_grad()
    assert params[0].grad is None


def test_constructor_errors():
    params, _ = _problem(staged)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        staged.optim.SGD(params, lr=-1.0)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero "
                                         "dampening"):
        staged.optim.SGD(params, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameters"):
        staged.optim.Adam(params, betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="empty parameter list"):
        staged.optim.Adam([])
    with pytest.raises(ValueError, match="more than one parameter group"):
        staged.optim.SGD([{"params": params}, {"params": params[:1]}], lr=0.1)
