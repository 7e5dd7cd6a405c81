"""Optimizers and lr schedulers against torch 2.13 (the fourteenth trust probe): the same
float64 model and data trained step by step in both, the parameters, the optimizer's
state dict and the schedulers' ``get_last_lr()`` compared after every step. Every
optimizer with torch's options (``amsgrad``, ``maximize``, ``foreach``, ``fused``,
``capturable``, ``differentiable``, ``nesterov``, ``centered``, ``lr_decay``,
``decoupled_weight_decay``, LBFGS's strong Wolfe line search), param groups of their own
options, ``add_param_group`` mid-run, parameters without a gradient at some steps,
``zero_grad(set_to_none=False)``, complex parameters, tensor and hand-changed learning
rates; every scheduler (chained, resumed with ``last_epoch``, through its state dict,
stepped before the optimizer), ``swa_utils``; and compiled training steps call for call
against torch's."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import message

STEPS = 8
RNG = np.random.RandomState(14)
W = {
    "0.weight": RNG.standard_normal((4, 3)),
    "0.bias": RNG.standard_normal(4),
    "2.weight": RNG.standard_normal((2, 4)),
    "2.bias": RNG.standard_normal(2),
}
X, Y = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 2))


def _model(L):
    m = L.nn.Sequential(L.nn.Linear(3, 4), L.nn.Tanh(), L.nn.Linear(4, 2)).double()
    m.load_state_dict({k: L.tensor(v, dtype=L.float64) for k, v in W.items()})
    return m


def _loss(L, m):
    x, y = L.tensor(X, dtype=L.float64), L.tensor(Y, dtype=L.float64)
    return ((m(x) - y) ** 2).mean()


def _tree(x):
    """A state dict as NumPy: tensors as ``(dtype name, array)``."""
    if isinstance(x, dict):
        return {k: _tree(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_tree(v) for v in x)
    if isinstance(x, (torch.Tensor, staged.Tensor)):
        return (str(x.dtype).rpartition(".")[2], np.array(x.detach().tolist()))
    if isinstance(x, float):
        return float(x)  # not a NumPy float
    return x


def _same(ours, theirs, rtol, atol, where="") -> None:
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and sorted(ours, key=str) == sorted(theirs, key=str), (
            where,
            ours.keys() if isinstance(ours, dict) else ours,
            theirs.keys(),
        )
        for k in theirs:
            _same(ours[k], theirs[k], rtol, atol, f"{where}.{k}")
    elif isinstance(theirs, (list, tuple)) and not (
        len(theirs) == 2 and isinstance(theirs[1], np.ndarray)
    ):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(theirs), (where, ours, theirs)
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _same(a, b, rtol, atol, f"{where}[{i}]")
    elif isinstance(theirs, tuple):  # a tensor
        assert isinstance(ours, tuple) and ours[0] == theirs[0], (where, ours, theirs)
        np.testing.assert_allclose(ours[1], theirs[1], rtol, atol, err_msg=where)
    elif isinstance(theirs, float):
        assert ours == pytest.approx(theirs, rel=rtol, abs=atol), (where, ours, theirs)
    else:
        assert ours == theirs, (where, ours, theirs)


def _train(L, make, steps=STEPS, before=None, closure=False, sched_first=False):
    """``steps`` steps of ``make(L, model) -> (optimizer, schedulers)``: per step the
    parameters, the optimizer's state dict and each scheduler's last lrs.
    ``before(L, k, model, opt)`` runs before step ``k``'s backward pass."""
    m = _model(L)
    opt, scheds = make(L, m)
    out = []
    for k in range(steps):
        opt.zero_grad()
        if before is not None:
            before(L, k, m, opt)
        if closure:

            def f():
                opt.zero_grad()
                loss = _loss(L, m)
                loss.backward()
                return loss

            opt.step(f)
        else:
            _loss(L, m).backward()
            if before is not None:
                before(L, -1 - k, m, opt)
            for s in scheds if sched_first else ():
                s.step()
            opt.step()
        for s in () if sched_first else scheds:
            s.step()
        out.append(
            (
                _tree(dict(m.state_dict())),
                _tree(opt.state_dict()),
                [_tree(s.get_last_lr()) for s in scheds],
            )
        )
    return out


def _compare(make, rtol=1e-11, atol=1e-13, **kw) -> None:
    theirs = _train(torch, make, **kw)
    ours = _train(staged, make, **kw)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        _same(a, b, rtol, atol, f"step {k}")


def _opt(name, **kw):
    return lambda L, m: (getattr(L.optim, name)(m.parameters(), **kw), [])


OPTIMIZERS = {
    "SGD": dict(lr=0.1),
    "SGD-momentum": dict(lr=0.1, momentum=0.9),
    "SGD-dampening": dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.1),
    "SGD-nesterov-maximize": dict(lr=0.1, momentum=0.8, nesterov=True, maximize=True),
    "SGD-foreach": dict(lr=0.1, momentum=0.5, foreach=True),
    "SGD-fused": dict(lr=0.1, momentum=0.5, weight_decay=0.01, fused=True),
    "Adam": dict(lr=0.05),
    "Adam-amsgrad-maximize": dict(lr=0.05, amsgrad=True, maximize=True),
    "Adam-wd-betas-eps": dict(lr=0.05, weight_decay=0.1, betas=(0.8, 0.95), eps=1e-3),
    "Adam-foreach": dict(lr=0.05, foreach=True, amsgrad=True),
    "Adam-no-foreach": dict(lr=0.05, foreach=False),
    "Adam-fused": dict(lr=0.05, fused=True, amsgrad=True, weight_decay=0.1),
    "Adam-decoupled": dict(lr=0.05, decoupled_weight_decay=True, weight_decay=0.1),
    "AdamW": dict(lr=0.05),
    "AdamW-amsgrad-maximize": dict(lr=0.05, weight_decay=0.3, amsgrad=True, maximize=True),
    "AdamW-fused": dict(lr=0.05, fused=True),
    "RMSprop": dict(lr=0.01),
    "RMSprop-centered-momentum": dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1),
    "RMSprop-alpha-maximize": dict(lr=0.01, alpha=0.9, eps=1e-4, maximize=True, momentum=0.3),
    "Adagrad": dict(lr=0.1),
    "Adagrad-lr_decay": dict(lr=0.1, lr_decay=0.05, initial_accumulator_value=0.3),
    "Adagrad-wd-maximize": dict(lr=0.1, weight_decay=0.1, maximize=True, eps=1e-3),
    "Adagrad-fused": dict(lr=0.1, lr_decay=0.05, fused=True),
    "Adamax": dict(lr=0.05),
    "Adamax-wd-maximize": dict(lr=0.05, weight_decay=0.1, maximize=True, betas=(0.8, 0.9)),
    "NAdam": dict(lr=0.05),
    "NAdam-momentum_decay": dict(lr=0.05, momentum_decay=0.01, weight_decay=0.1),
    "NAdam-decoupled": dict(lr=0.05, decoupled_weight_decay=True, weight_decay=0.1),
    "RAdam": dict(lr=0.05),
    "RAdam-decoupled": dict(lr=0.05, decoupled_weight_decay=True, weight_decay=0.1),
    "RAdam-wd-maximize": dict(lr=0.05, weight_decay=0.1, maximize=True),
    "Adadelta": dict(lr=1.0),
    "Adadelta-rho-wd": dict(lr=0.5, rho=0.5, weight_decay=0.1, eps=1e-4, maximize=True),
    "Rprop": dict(lr=0.01),
    "Rprop-etas": dict(lr=0.02, etas=(0.3, 1.5), step_sizes=(1e-3, 0.03), maximize=True),
    "ASGD": dict(lr=0.05),
    "ASGD-t0": dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=3, weight_decay=0.1, maximize=True),
    "Adafactor": dict(lr=0.05),
    "Adafactor-wd-maximize": dict(lr=0.05, weight_decay=0.1, beta2_decay=-0.5, maximize=True),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_trajectory_and_state(name):
    _compare(_opt(name.split("-")[0], **OPTIMIZERS[name]), steps=10)


LBFGS = {
    "plain": dict(lr=0.5, max_iter=3),
    "history": dict(lr=1, max_iter=5, history_size=2),
    "wolfe": dict(lr=1, max_iter=6, line_search_fn="strong_wolfe", history_size=3),
    "tolerance": dict(lr=1, max_iter=20, tolerance_grad=1e-3, tolerance_change=1e-4),
}


@pytest.mark.parametrize("case", list(LBFGS))
def test_lbfgs(case):
    _compare(_opt("LBFGS", **LBFGS[case]), steps=4, closure=True, rtol=1e-10, atol=1e-12)


def test_capturable_on_the_cpu():
    """torch's capturable steps want an accelerator; here every step can be captured
    (Note [implementation flags] in staged/optim/optimizer.py): staged's runs as torch's
    non-capturable one."""
    with pytest.raises(AssertionError, match="If capturable=True, params and state_steps"):
        _train(torch, _opt("Adam", lr=0.05, capturable=True), steps=1)
    theirs = _train(torch, _opt("Adam", lr=0.05, capturable=False), steps=3)
    ours = _train(staged, _opt("Adam", lr=0.05, capturable=True), steps=3)
    for a, b in zip(ours, theirs):
        _same(a[0], b[0], 1e-12, 1e-13)
        assert a[1]["param_groups"][0]["capturable"] is True


def _groups(name, first, second):
    """Two groups: the first layer with options ``first``, the second with ``second``."""

    def make(L, m):
        groups = [
            {"params": m[0].parameters(), **first},
            {"params": m[2].parameters(), **second},
        ]
        return getattr(L.optim, name)(groups, lr=0.05), []

    return make


GROUPS = {
    "SGD": ({"momentum": 0.9, "nesterov": True}, {"lr": 0.2, "weight_decay": 0.1}),
    "Adam": ({"amsgrad": True, "betas": (0.5, 0.6)}, {"lr": 0.01, "maximize": True}),
    "AdamW": ({"weight_decay": 0.0}, {"weight_decay": 0.5, "eps": 1e-2}),
    "RMSprop": ({"centered": True}, {"momentum": 0.4, "alpha": 0.5}),
    "Adagrad": ({"lr_decay": 0.1}, {"initial_accumulator_value": 1.0}),
    "NAdam": ({"decoupled_weight_decay": True, "weight_decay": 0.1}, {"momentum_decay": 0.1}),
    "RAdam": ({"decoupled_weight_decay": True, "weight_decay": 0.1}, {"betas": (0.5, 0.9)}),
}


@pytest.mark.parametrize("name", list(GROUPS))
def test_param_groups_with_options_of_their_own(name):
    _compare(_groups(name, *GROUPS[name]))


def _first_layer(name, **kw):
    return lambda L, m: (getattr(L.optim, name)(m[0].parameters(), **kw), [])


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad", "Rprop"])
def test_add_param_group_mid_training(name):
    """The second layer joins with options of its own at step 3 (trained from there)."""
    kw = {"SGD": {"momentum": 0.9}, "Rprop": {}}.get(name, {})

    def before(L, k, m, opt):
        if k == 3:
            opt.add_param_group({"params": m[2].parameters(), "lr": 0.02})

    _compare(_first_layer(name, lr=0.05, **kw), before=before)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adadelta", "ASGD", "Adamax"])
def test_parameters_without_a_gradient_are_skipped(name):
    """The bias's gradient is None at steps 0, 3 and 4: no state made, none touched (its
    step count stays behind the weight's); AdamW's decay skips it too."""
    kw = {"SGD": {"momentum": 0.9}, "AdamW": {"weight_decay": 0.5}}.get(name, {})

    def before(L, k, m, opt):
        if -1 - k in (0, 3, 4):
            m[2].bias.grad = None

    _compare(_opt(name, lr=0.05, **kw), before=before)


@pytest.mark.parametrize("name", ["SGD", "Adam", "Rprop"])
def test_zero_grad_keeping_zero_gradients(name):
    """``zero_grad(set_to_none=False)``: the bias's gradient is zeros (a step on it) at
    steps 1 and 2, where the loss does not reach it."""
    kw = {"SGD": {"momentum": 0.9, "weight_decay": 0.1}}.get(name, {})

    def before(L, k, m, opt):
        if k >= 0:
            opt.zero_grad(set_to_none=False)
        elif -1 - k in (1, 2):
            m[2].bias.grad.zero_()

    _compare(_opt(name, lr=0.05, **kw), before=before)


def test_a_learning_rate_changed_by_hand():
    def before(L, k, m, opt):
        if k >= 0:
            opt.param_groups[0]["lr"] = 0.1 / (k + 1)
            opt.param_groups[0]["betas"] = (0.9 - 0.05 * k, 0.99)

    _compare(_opt("Adam", lr=0.05), before=before)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "NAdam"])
def test_a_tensor_learning_rate(name):
    """``lr=torch.tensor(0.02)`` (float64 here and there), stepped by ExponentialLR in
    place: the state dict's lr is that tensor."""

    def make(L, m):
        opt = getattr(L.optim, name)(m.parameters(), lr=L.tensor(0.02, dtype=L.float64))
        return opt, [L.optim.lr_scheduler.ExponentialLR(opt, gamma=0.7)]

    _compare(make)


def _complex_train(L, name, kw, steps=6):
    rng = np.random.RandomState(1)
    z = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    c = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    p = L.tensor(z, requires_grad=True)
    opt = getattr(L.optim, name)([p], **kw)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        ((p * L.tensor(c)).abs() ** 1.5).sum().backward()
        opt.step()
        out.append((_tree(p), _tree(opt.state_dict())))
    return out


COMPLEX = {
    "SGD": dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.1),
    "Adam": dict(lr=0.05, amsgrad=True, weight_decay=0.1, foreach=False),
    "AdamW": dict(lr=0.05, maximize=True, foreach=True),
    "RMSprop": dict(lr=0.01, centered=True, momentum=0.3),
    "Adagrad": dict(lr=0.1, lr_decay=0.1),
    "Adamax": dict(lr=0.05),
    "NAdam": dict(lr=0.05, decoupled_weight_decay=True, weight_decay=0.1),
    "RAdam": dict(lr=0.05),
    "Adadelta": dict(lr=1.0),
    "Rprop": dict(lr=0.05),
    "ASGD": dict(lr=0.05, t0=2),
}


@pytest.mark.parametrize("name", list(COMPLEX))
def test_complex_parameters(name):
    theirs = _complex_train(torch, name, COMPLEX[name])
    ours = _complex_train(staged, name, COMPLEX[name])
    for k, (a, b) in enumerate(zip(ours, theirs)):
        _same(a, b, 1e-12, 1e-13, f"step {k}")


@pytest.mark.parametrize("name", ["SGD", "Adam", "Adagrad", "Adafactor", "SparseAdam"])
def test_complex_parameters_refused(name):
    """Where torch's refuses a complex parameter, or its fused step does."""
    kw = {"SGD": dict(fused=True), "Adam": dict(fused=True), "Adagrad": dict(fused=True)}

    def run(L):
        p = L.tensor(np.ones(2) * (1 + 1j), requires_grad=True)
        opt = getattr(L.optim, name)([p], **kw.get(name, {}))
        p.grad = L.ones_like(p)
        opt.step()

    with pytest.raises(Exception) as theirs:
        run(torch)
    with pytest.raises(type(theirs.value)) as ours:
        run(staged)
    assert message(ours.value) == str(theirs.value).replace("torch.", "staged.")


DIFFERENTIABLE = ["SGD", "Adam", "AdamW", "Adagrad", "NAdam", "RAdam", "ASGD", "Adadelta"]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_differentiable_steps(name, dtype):
    """``differentiable=True`` on non-leaf weights: the trajectory, and the gradient of
    the last loss with respect to the starting weights through every step. torch's Adam
    computes its bias corrections from the float32 step tensor then (1.5e-5 from the
    double's at step 1), not in double as its other steps; a float32 ``lr / tensor`` is
    ``reciprocal * lr`` in torch, an ulp from a division (so 1e-6, not 1e-12)."""

    def run(L):
        dt = getattr(L, dtype)
        w0 = L.tensor(W["0.weight"], dtype=dt, requires_grad=True)
        w = w0 * 1.0
        opt = getattr(L.optim, name)([w], lr=0.05, differentiable=True)
        x = L.tensor(X, dtype=dt)
        out = []
        for _ in range(3):
            loss = (x @ w.T).tanh().pow(2).sum()
            (g,) = L.autograd.grad(loss, w, create_graph=True)
            w.grad = g
            opt.step()
            out.append(_tree(w))
        (x @ w.T).sum().backward()
        return out, _tree(w0.grad)

    tol = (1e-6, 1e-8) if dtype == "float64" else (1e-5, 1e-6)
    _same(run(staged), run(torch), *tol)


def _sched(opt_name, opt_kw, *makers):
    """An optimizer and schedulers ``maker(lr_scheduler, optimizer)`` on it."""

    def make(L, m):
        opt = getattr(L.optim, opt_name)(
            [{"params": m[0].parameters()}, {"params": m[2].parameters(), "lr": 0.02}], **opt_kw
        )
        return opt, [f(L.optim.lr_scheduler, opt) for f in makers]

    return make


SGD_M = ("SGD", dict(lr=0.1, momentum=0.9))
ADAM = ("Adam", dict(lr=0.05, betas=(0.9, 0.99)))
SCHEDULERS = {
    "StepLR": (SGD_M, lambda S, o: S.StepLR(o, step_size=3, gamma=0.5)),
    "MultiStepLR": (SGD_M, lambda S, o: S.MultiStepLR(o, milestones=[1, 4, 4], gamma=0.3)),
    "ExponentialLR": (ADAM, lambda S, o: S.ExponentialLR(o, gamma=0.8)),
    "CosineAnnealingLR": (ADAM, lambda S, o: S.CosineAnnealingLR(o, T_max=3, eta_min=1e-3)),
    "WarmRestarts": (SGD_M, lambda S, o: S.CosineAnnealingWarmRestarts(o, 2, T_mult=2)),
    "CyclicLR-triangular2": (
        SGD_M,
        lambda S, o: S.CyclicLR(o, 0.01, [0.2, 0.1], step_size_up=2, mode="triangular2"),
    ),
    "CyclicLR-exp_range": (
        SGD_M,
        lambda S, o: S.CyclicLR(
            o, 0.01, 0.2, step_size_up=2, step_size_down=1, mode="exp_range", gamma=0.9
        ),
    ),
    "CyclicLR-adam": (
        ADAM,
        lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=3, base_momentum=0.7),
    ),
    "CyclicLR-no-momentum": (
        ("Adagrad", dict(lr=0.1)),
        lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=3, cycle_momentum=False),
    ),
    "OneCycleLR-adam": (ADAM, lambda S, o: S.OneCycleLR(o, max_lr=[0.3, 0.1], total_steps=9)),
    "OneCycleLR-three-phase": (
        SGD_M,
        lambda S, o: S.OneCycleLR(
            o, 0.3, epochs=3, steps_per_epoch=3, three_phase=True, anneal_strategy="linear"
        ),
    ),
    "LinearLR": (ADAM, lambda S, o: S.LinearLR(o, start_factor=0.2, total_iters=5)),
    "ConstantLR": (ADAM, lambda S, o: S.ConstantLR(o, factor=0.4, total_iters=3)),
    "PolynomialLR": (ADAM, lambda S, o: S.PolynomialLR(o, total_iters=6, power=2.0)),
    "LambdaLR": (ADAM, lambda S, o: S.LambdaLR(o, [lambda e: 0.9**e, lambda e: 1 / (e + 1)])),
    "MultiplicativeLR": (SGD_M, lambda S, o: S.MultiplicativeLR(o, lambda e: 0.95)),
    "SequentialLR": (
        ADAM,
        lambda S, o: S.SequentialLR(
            o,
            [S.LinearLR(o, start_factor=0.1, total_iters=3), S.ExponentialLR(o, gamma=0.7)],
            milestones=[3],
        ),
    ),
    "ChainedScheduler": (
        SGD_M,
        lambda S, o: S.ChainedScheduler(
            [S.ConstantLR(o, factor=0.5, total_iters=4), S.ExponentialLR(o, gamma=0.9)]
        ),
    ),
}


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_trajectory(name):
    (opt_name, opt_kw), maker = SCHEDULERS[name]
    _compare(_sched(opt_name, opt_kw, maker), steps=9)


def test_two_schedulers_on_one_optimizer():
    _compare(
        _sched(
            *SGD_M,
            lambda S, o: S.StepLR(o, step_size=2, gamma=0.5),
            lambda S, o: S.CosineAnnealingLR(o, T_max=4),
        )
    )


def test_a_scheduler_resumed_with_last_epoch():
    """A scheduler made with ``last_epoch=3`` on groups holding ``initial_lr``."""

    def make(L, m):
        opt = L.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
        opt.param_groups[0]["initial_lr"] = 0.2
        scheds = [
            L.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6, last_epoch=3),
            L.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5, last_epoch=3),
        ]
        return opt, scheds

    _compare(make)
    for L in (torch, staged):
        opt = L.optim.SGD(_model(L).parameters(), lr=0.1)
        with pytest.raises(KeyError) as e:
            L.optim.lr_scheduler.StepLR(opt, step_size=2, last_epoch=3)
        assert (
            message(e.value)
            == "\"param 'initial_lr' is not specified in param_groups[0] when resuming scheduler with last_epoch >= 0.\\nThis typically happens when:\\n1. You're trying to resume training from a checkpoint but haven't properly loaded the optimizer state\\n2. You're using last_epoch >= 0 for a fresh training run (not recommended)\""
        )


@pytest.mark.parametrize("name", ["StepLR", "CyclicLR-exp_range", "OneCycleLR-adam"])
def test_scheduler_state_dict_round_trip(name):
    """After 4 steps, a scheduler's state dict loaded into a fresh one (on a fresh
    optimizer at the same lrs) continues as the first would, in both libraries; the state
    dicts agree."""
    (opt_name, opt_kw), maker = SCHEDULERS[name]
    out = {}
    for L in (torch, staged):
        opt, (s,) = _sched(opt_name, opt_kw, maker)(L, _model(L))
        for _ in range(4):
            opt.step()
            s.step()
        opt2, (s2,) = _sched(opt_name, opt_kw, maker)(L, _model(L))
        opt2.load_state_dict(opt.state_dict())
        s2.load_state_dict(s.state_dict())
        lrs = []
        for _ in range(3):
            opt2.step()
            s2.step()
            lrs.append(_tree(s2.get_last_lr()))
            lrs.append(_tree([g["lr"] for g in opt2.param_groups]))
        state = {k: v for k, v in s2.state_dict().items() if not callable(v)}
        out[L] = lrs, _tree(state)
    _same(out[staged], out[torch], 1e-13, 1e-15)


def test_reduce_lr_on_plateau():
    """mode max, an absolute threshold, cooldown, a min_lr per group, eps: the lrs after
    each metric, and the state dict."""
    metrics = [1.0, 1.05, 1.06, 1.0, 1.2, 1.2, 1.1, 1.1, 1.1, 1.3, 1.0, 1.0, 1.0, 1.0]
    out = {}
    for L in (torch, staged):
        opt = L.optim.SGD([{"params": [L.zeros(1)]}, {"params": [L.zeros(1)], "lr": 0.011}])
        opt.param_groups[0]["lr"] = 0.1
        s = L.optim.lr_scheduler.ReduceLROnPlateau(
            opt,
            mode="max",
            factor=0.5,
            patience=1,
            threshold=0.1,
            threshold_mode="abs",
            cooldown=1,
            min_lr=[0.02, 0.001],
            eps=0.004,
        )
        lrs = []
        for v in metrics:
            s.step(v)
            lrs.append((s.get_last_lr(), [g["lr"] for g in opt.param_groups]))
        out[L] = lrs, _tree(s.state_dict())
    _same(out[staged], out[torch], 1e-15, 0)


def test_a_scheduler_stepped_before_the_optimizer_warns():
    def run(L):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            opt, (s,) = _sched(*SGD_M, lambda S, o: S.StepLR(o, 1, 0.5))(L, _model(L))
            s.step()
            opt.step()
            s.step()
        return [(x.category.__name__, str(x.message)) for x in w]

    ours, theirs = run(staged), run(torch)
    assert theirs and ours == theirs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _compare(_sched(*SGD_M, lambda S, o: S.StepLR(o, 2, 0.5)), sched_first=True)


def _compiled_run(L, opt_name, opt_kw, maker, steps=6):
    """A float32 training step with ``opt.step()`` and ``sched.step()`` inside, compiled
    in staged: the loss, the lrs, the parameters and the state dict after every call."""
    m = _model(L).float()
    opt = getattr(L.optim, opt_name)(m.parameters(), **opt_kw)
    sched = maker(L.optim.lr_scheduler, opt)
    x, y = L.tensor(X, dtype=L.float32), L.tensor(Y, dtype=L.float32)

    def step(x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        sched.step()
        return loss

    f = staged.compile(step) if L is staged else step
    out = []
    for _ in range(steps):
        loss = f(x, y).item()
        out.append((loss, _tree(sched.get_last_lr()), _tree(dict(m.state_dict()))))
        out.append(_tree(opt.state_dict()))
    return out


COMPILED = {
    "Adam-OneCycleLR": (
        ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
        lambda S, o: S.OneCycleLR(o, max_lr=0.1, total_steps=8, three_phase=True),
    ),
    "SGD-CyclicLR": (
        ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
        lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=2, mode="triangular2"),
    ),
    "RMSprop-WarmRestarts": (
        ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
        lambda S, o: S.CosineAnnealingWarmRestarts(o, 2, T_mult=2, eta_min=1e-3),
    ),
}


@pytest.mark.parametrize("name", list(COMPILED))
def test_compiled_training_step_with_a_scheduler(name):
    """Call for call against torch's eager float32 step (float32 rounding: 1e-5 of weights near 8)."""
    (opt_name, opt_kw), maker = COMPILED[name]
    theirs = _compiled_run(torch, opt_name, opt_kw, maker)
    ours = _compiled_run(staged, opt_name, opt_kw, maker)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        _same(a, b, 1e-5, 1e-5, f"call {k // 2}")


def _outcome(fn):
    """``(fn(torch), fn(staged))``, each its result or ``(type, message)`` of its error,
    with the warnings it gave; the library's name in messages made neutral."""
    out = []
    for L in (torch, staged):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result = fn(L)
            except Exception as e:
                result = (type(e).__name__, message(e).replace(L.__name__ + ".", "L."))
        out.append((result, [(w.category.__name__, str(w.message)) for w in caught]))
    return out


def _params(L):
    return list(_model(L).parameters())


def _sgd(L, **kw):
    return L.optim.SGD(_params(L), lr=0.1, **kw)


def _step_by_hand_tensor_lr(L, name):
    opt = getattr(L.optim, name)(_params(L), foreach=True)
    opt.param_groups[0]["lr"] = L.tensor(0.01)
    _loss(L, _model(L))  # another model: no gradient reaches opt's parameters
    for p in opt.param_groups[0]["params"]:
        p.grad = L.ones_like(p)
    opt.step()


def _in_two_groups(L):
    opt = _sgd(L)
    opt.add_param_group({"params": opt.param_groups[0]["params"][1:2], "lr": 0.5})


def _onecycle_overstepped(L):
    s = L.optim.lr_scheduler.OneCycleLR(_sgd(L, momentum=0.9), 0.1, total_steps=3)
    for _ in range(4):
        s.optimizer.step()
        s.step()


def _stepped_then_scheduled(L):
    opt = _sgd(L)
    opt.step()  # before the scheduler was made: torch counts only steps after
    s = L.optim.lr_scheduler.StepLR(opt, 2)
    s.step()
    return s.get_last_lr()


def _sequential(L, other):
    opt = _sgd(L)
    S = L.optim.lr_scheduler
    second = S.StepLR(_sgd(L) if other else opt, 1)
    return S.SequentialLR(opt, [S.StepLR(opt, 1), second], milestones=[1, 2][: 2 - other])


ERRORS = {
    **{
        f"tensor-lr-of-two-{n}": lambda L, n=n: getattr(L.optim, n)(
            _params(L), lr=L.tensor([0.01, 0.02])
        )
        for n in ["SGD", "Adam", "AdamW", "Adagrad", "NAdam", "RMSprop", "LBFGS", "Adafactor"]
    },
    "tensor-lr-foreach-Adam": lambda L: L.optim.Adam(_params(L), lr=L.tensor(0.01), foreach=True),
    "tensor-lr-foreach-AdamW": lambda L: L.optim.AdamW(_params(L), lr=L.tensor(0.01), foreach=True),
    "tensor-lr-foreach-by-hand-Adam": lambda L: _step_by_hand_tensor_lr(L, "Adam"),
    "tensor-lr-foreach-by-hand-AdamW": lambda L: _step_by_hand_tensor_lr(L, "AdamW"),
    "fused-and-foreach": lambda L: L.optim.Adam(_params(L), fused=True, foreach=True),
    "fused-and-differentiable": lambda L: L.optim.SGD(_params(L), fused=True, differentiable=True),
    "betas-mixed": lambda L: L.optim.Adam(_params(L), betas=(L.tensor(0.9), 0.99)),
    "nesterov-dampening": lambda L: _sgd(L, momentum=0.9, dampening=0.1, nesterov=True),
    "duplicate-parameters": lambda L: repr(L.optim.SGD([_params(L)[0]] * 2, lr=0.1)),
    "parameter-in-two-groups": lambda L: _in_two_groups(L),
    "lbfgs-two-groups": lambda L: L.optim.LBFGS([{"params": _params(L)}, {"params": _params(L)}]),
    "cyclic-without-momentum": lambda L: L.optim.lr_scheduler.CyclicLR(
        L.optim.Adagrad(_params(L)), 0.01, 0.1
    ),
    "one-cycle-overstepped": _onecycle_overstepped,
    "sequential-milestones": lambda L: _sequential(L, other=False),
    "sequential-other-optimizer": lambda L: _sequential(L, other=True),
    "plateau-min-lr-count": lambda L: L.optim.lr_scheduler.ReduceLROnPlateau(
        _sgd(L), min_lr=[0.1, 0.2]
    ),
    "plateau-threshold-mode": lambda L: L.optim.lr_scheduler.ReduceLROnPlateau(
        _sgd(L), threshold_mode="rel2"
    ),
    "warm-restarts-T_mult": lambda L: L.optim.lr_scheduler.CosineAnnealingWarmRestarts(
        _sgd(L), 2, T_mult=1.5
    ),
    "get_lr-outside-step": lambda L: L.optim.lr_scheduler.CyclicLR(
        _sgd(L, momentum=0.9), 0.01, 0.1
    ).get_lr(),
    "swalr-get_lr-outside-step": lambda L: L.optim.swa_utils.SWALR(_sgd(L), swa_lr=0.1).get_lr(),
    "scheduled-after-a-step": _stepped_then_scheduled,
    "step-with-epoch": lambda L: L.optim.lr_scheduler.StepLR(_sgd(L), 2).step(3),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_and_warnings(case):
    theirs, ours = _outcome(ERRORS[case])
    assert ours == theirs


def _swa(L):
    """SGD with SWALR from step 2 on, an AveragedModel updated each step, update_bn."""
    m = L.nn.Sequential(L.nn.Linear(3, 4), L.nn.BatchNorm1d(4), L.nn.Linear(4, 2)).double()
    m.load_state_dict({**m.state_dict(), **{k: L.tensor(v) for k, v in W.items() if "0." in k}})
    opt = L.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
    swa = L.optim.swa_utils.AveragedModel(m)
    sched = L.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=3, anneal_strategy="cos")
    x, y = L.tensor(X), L.tensor(Y)
    out = []
    for k in range(6):
        opt.zero_grad()
        ((m(x) - y) ** 2).mean().backward()
        opt.step()
        if k >= 2:
            swa.update_parameters(m)
            sched.step()
        out.append((_tree(sched.get_last_lr()), _tree(dict(swa.state_dict()))))
    L.optim.swa_utils.update_bn([(x[:3],), (x[3:],)], swa)
    out.append(_tree(dict(swa.state_dict())))
    return out


def test_swa_utils():
    _same(_swa(staged), _swa(torch), 1e-12, 1e-13)
