"""LR schedulers against torch.optim.lr_scheduler: the same learning rates, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import staged

SCHEDULERS = {
    "step": lambda m, o: m.StepLR(o, step_size=3, gamma=0.5),
    "multistep": lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    "exponential": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "lambda": lambda m, o: m.LambdaLR(o, [lambda e: 1 / (e + 1), lambda e: 0.95 ** e]),
    "linear": lambda m, o: m.LinearLR(o, start_factor=0.25, total_iters=4),
    "cosine": lambda m, o: m.CosineAnnealingLR(o, T_max=5, eta_min=0.001),
}


def _lrs(ns, name, epochs=14):
    params = [ns.zeros(2, requires_grad=True), ns.zeros(3, requires_grad=True)]
    opt = ns.optim.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.3}], lr=0.1)
    sched = SCHEDULERS[name](ns.optim.lr_scheduler, opt)
    out = [sched.get_last_lr()]
    for _ in range(epochs):
        opt.step()
        sched.step()
        out.append([g["lr"] for g in opt.param_groups])
    return out, sched


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_learning_rates_equal_torch(name):
    ours, sched = _lrs(staged, name)
    theirs, tsched = _lrs(torch, name)
    assert ours == theirs  # the same float formulas in the same order: exactly equal
    assert sched.last_epoch == tsched.last_epoch == 14
    assert sched.base_lrs == [0.1, 0.3]
    if name != "lambda":
        state = sched.state_dict()
        assert set(state) == set(tsched.state_dict()) - {"_get_lr_called_within_step"}


def test_scheduler_errors_match_torch():
    opt = staged.optim.SGD([staged.zeros(2, requires_grad=True)], lr=0.1)
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        staged.optim.lr_scheduler.StepLR([], 3)
    with pytest.raises(KeyError, match="initial_lr"):
        staged.optim.lr_scheduler.StepLR(opt, 3, last_epoch=4)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas, but got 2"):
        staged.optim.lr_scheduler.LambdaLR(opt, [abs, abs])
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        staged.optim.lr_scheduler.LinearLR(opt, start_factor=0)
    np.testing.assert_equal(opt.param_groups[0]["lr"], 0.1)
