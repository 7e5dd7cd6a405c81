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
    "sgd-dampening": lambda ns, p: ns.optim.SGD(
        p, lr=0.05, momentum=0.5, dampening=0.3, weight_decay=0.01
    ),
    "sgd-maximize": lambda ns, p: ns.optim.SGD(p, lr=0.01, momentum=0.9, maximize=True),
    "adam": lambda ns, p: ns.optim.Adam(p, lr=0.05),
    "adam-weight-decay": lambda ns, p: ns.optim.Adam(
        p, lr=0.05, betas=(0.8, 0.99), weight_decay=0.1
    ),
    "adam-amsgrad": lambda ns, p: ns.optim.Adam(p, lr=0.05, amsgrad=True),
    "adamw": lambda ns, p: ns.optim.AdamW(p, lr=0.05),
    "adamw-groups": lambda ns, p: ns.optim.AdamW(
        [{"params": p[:1], "lr": 0.1}, {"params": p[1:]}], lr=0.02, weight_decay=0.5
    ),
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
    with pytest.raises(
        ValueError, match="Nesterov momentum requires a momentum and zero dampening"
    ):
        staged.optim.SGD(params, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 0: 1.0"):
        staged.optim.Adam(params, betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="Invalid weight_decay value: -1"):
        staged.optim.Adam(params, weight_decay=-1)
    with pytest.raises(ValueError, match="empty parameter list"):
        staged.optim.Adam([])
    with pytest.raises(ValueError, match="more than one parameter group"):
        staged.optim.SGD([{"params": params}, {"params": params[:1]}], lr=0.1)


def _to_numpy_state(sd):
    """A PyTorch optimizer state_dict with its tensors as NumPy arrays."""
    return {
        "state": {
            i: {k: to_numpy(v) if isinstance(v, torch.Tensor) else v for k, v in s.items()}
            for i, s in sd["state"].items()
        },
        "param_groups": sd["param_groups"],
    }


@pytest.mark.parametrize("name", ["sgd-momentum", "adam-amsgrad", "adamw-groups"])
def test_state_dict_has_torch_layout_and_resumes_a_torch_run(name):
    """5 steps in torch, its state_dict (as NumPy) loaded here, 5 more steps in both: the
    same trajectory as 10 steps in torch."""
    resume_torch_run(CASES[name], 5, 10, rtol=1e-5, atol=1e-7)


def resume_torch_run(make, switch, steps, rtol, atol):
    """``switch`` steps of the optimizer ``make`` builds in torch, its state_dict (as NumPy)
    and parameters loaded into staged's, then both on to ``steps``: state dicts (torch's
    layout) and parameters agree."""
    tparams, tloss = _problem(torch)
    topt = make(torch, tparams)
    params, loss_fn = _problem(staged)
    opt = make(staged, params)
    for i in range(steps):
        if i == switch:
            with staged.no_grad():
                for p, tp in zip(params, tparams):
                    p.copy_(staged.tensor(to_numpy(tp)))
            opt.load_state_dict(_to_numpy_state(topt.state_dict()))
        for o, f in ((topt, tloss), (opt, loss_fn)):
            o.zero_grad()
            f().backward()
            o.step()
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    assert sd["state"].keys() == tsd["state"].keys()
    for i, s in sd["state"].items():
        assert s.keys() == tsd["state"][i].keys()
        for k, v in s.items():
            assert_close(v, tsd["state"][i][k], rtol=rtol, atol=atol)
    for p, tp in zip(params, tparams):
        assert_close(p, tp, rtol=rtol, atol=atol)


def test_state_dict_round_trip_continues_identically():
    """Adam stopped after 3 steps, its state_dict loaded into a new Adam over copies of the
    parameters: the next 3 steps are those of an uninterrupted run."""
    runs = []
    for reload in (False, True):
        params, _ = _problem(staged)
        opt = staged.optim.Adam(params, lr=0.05)
        for i in range(6):
            if reload and i == 3:
                sd = opt.state_dict()
                params = [staged.tensor(p.numpy(force=True), requires_grad=True) for p in params]
                opt = staged.optim.Adam(params, lr=0.05)
                opt.load_state_dict(sd)
            opt.zero_grad()
            _quadratic(params).backward()
            opt.step()
        runs.append([p.numpy(force=True) for p in params])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def _quadratic(params):
    return sum(((p - 1) ** 2).sum() for p in params[:2])


def test_load_state_dict_errors_and_hyperparameters():
    params, _ = _problem(staged)
    opt = staged.optim.SGD(params, lr=0.1)
    sd = staged.optim.SGD(params, lr=0.5, momentum=0.9).state_dict()
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[0]["momentum"] == 0.9
    assert opt.param_groups[0]["params"] == params
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0], "lr": 0.1}]})


def test_load_state_dict_keeps_state_tensors_for_compiled_steps():
    params, _ = _problem(staged)
    opt = staged.optim.SGD(params, lr=0.1, momentum=0.9)
    _quadratic(params).backward()
    opt.step()
    buf = opt.state[params[0]]["momentum_buffer"]
    sd = {
        "state": {0: {"momentum_buffer": np.zeros((3, 2))}},
        "param_groups": opt.state_dict()["param_groups"],
    }
    opt.load_state_dict(sd)
    assert opt.state[params[0]]["momentum_buffer"] is buf
    assert buf.dtype == params[0].dtype and not buf.numpy(force=True).any()


@pytest.mark.parametrize("name", ["Adam", "AdamW", "NAdam", "RAdam", "Adamax"])
def test_bias_corrections_keep_the_adam_family_at_torchs_trajectory(name):
    """torch computes the bias corrections (1 - beta ** step, RAdam's rho_t) with Python
    floats: in float32, 1 - 0.999 ** 1 cancels to 1.3e-5 off, and 20 steps of lr 0.01 ended
    up to 1.4e-6 (RAdam 1.3e-5) from torch's weights. Eagerly the count is float64 now;
    compiled, the corrections are -expm1(step * log(beta))."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((50, 30)).astype(np.float32)
    grads = [rng.standard_normal((50, 30)).astype(np.float32) for _ in range(20)]

    def run(lib, compiled=False):
        p = lib.nn.Parameter(lib.tensor(w0.copy()))
        opt = getattr(lib.optim, name)([p], lr=0.01)

        def step(g):
            p.grad = g
            opt.step()

        fn = staged.compile(step) if compiled else step
        for g in grads:
            fn(lib.tensor(g))
        return p.detach().numpy()

    want = run(torch)
    # float32 rounding of each update (an ulp or two at |w| ~ 1), over 20 steps; compiled
    # kernels also contract multiply-adds
    np.testing.assert_allclose(run(staged), want, rtol=0, atol=5e-7)
    np.testing.assert_allclose(run(staged, compiled=True), want, rtol=0, atol=3e-6)
