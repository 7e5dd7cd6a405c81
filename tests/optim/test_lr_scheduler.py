"""LR schedulers against torch.optim.lr_scheduler: the same learning rates, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged

EPOCHS = 30
SCHEDULERS = {
    "step": lambda m, o: m.StepLR(o, step_size=3, gamma=0.5),
    "multistep": lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    "exponential": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "lambda": lambda m, o: m.LambdaLR(o, [lambda e: 1 / (e + 1), lambda e: 0.95**e]),
    "multiplicative": lambda m, o: m.MultiplicativeLR(o, [lambda e: 0.9, lambda e: 1 - e / 50]),
    "linear": lambda m, o: m.LinearLR(o, start_factor=0.25, total_iters=4),
    "constant": lambda m, o: m.ConstantLR(o, factor=0.3, total_iters=4),
    "polynomial": lambda m, o: m.PolynomialLR(o, total_iters=20, power=1.7),
    "cosine": lambda m, o: m.CosineAnnealingLR(o, T_max=5, eta_min=0.001),
    "warm-restarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01),
    "one-cycle": lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=EPOCHS),
    "one-cycle-linear-3-phase": lambda m, o: m.OneCycleLR(
        o,
        max_lr=0.5,
        epochs=6,
        steps_per_epoch=5,
        pct_start=0.2,
        anneal_strategy="linear",
        three_phase=True,
        base_momentum=[0.8, 0.7],
        div_factor=10.0,
    ),
    "sequential": lambda m, o: m.SequentialLR(
        o,
        [
            m.LinearLR(o, start_factor=0.1, total_iters=4),
            m.ExponentialLR(o, gamma=0.9),
            m.CosineAnnealingLR(o, T_max=6, eta_min=0.01),
        ],
        milestones=[5, 12],
    ),
    "chained": lambda m, o: m.ChainedScheduler(
        [
            m.ConstantLR(o, factor=0.5, total_iters=6),
            m.ExponentialLR(o, gamma=0.9),
            m.StepLR(o, step_size=4, gamma=0.7),
        ]
    ),
    "sequential-of-chained": lambda m, o: m.SequentialLR(
        o,
        [
            m.ChainedScheduler(
                [
                    m.LinearLR(o, start_factor=0.5, total_iters=3),
                    m.MultiStepLR(o, milestones=[2], gamma=0.5),
                ]
            ),
            m.PolynomialLR(o, total_iters=10, power=2.0),
        ],
        milestones=[6],
    ),
    "cyclic": lambda m, o: m.CyclicLR(o, 0.01, [0.1, 0.5], step_size_up=4),
    "cyclic-triangular2": lambda m, o: m.CyclicLR(
        o, [0.01, 0.02], 0.1, step_size_up=3, step_size_down=5, mode="triangular2"
    ),
    "cyclic-exp-range": lambda m, o: m.CyclicLR(
        o,
        0.01,
        0.1,
        step_size_up=3,
        mode="exp_range",
        gamma=0.9,
        base_momentum=[0.7, 0.6],
        max_momentum=0.95,
    ),
    "cyclic-scale-fn": lambda m, o: m.CyclicLR(
        o,
        0.01,
        0.1,
        step_size_up=2,
        scale_fn=lambda x: 0.8**x,
        scale_mode="iterations",
        cycle_momentum=False,
    ),
}


def _lrs(ns, name, epochs=EPOCHS):
    """(lr, momentum) of both groups of an SGD with momentum, at each epoch."""
    params = [ns.zeros(2, requires_grad=True), ns.zeros(3, requires_grad=True)]
    opt = ns.optim.SGD(
        [{"params": params[:1]}, {"params": params[1:], "lr": 0.3}], lr=0.1, momentum=0.9
    )
    sched = SCHEDULERS[name](ns.optim.lr_scheduler, opt)
    out = [sched.get_last_lr()]
    for _ in range(epochs):
        opt.step()
        sched.step()
        out.append([(g["lr"], g["momentum"]) for g in opt.param_groups])
    return out, sched


def _keys(state: dict) -> set:
    return set(state) - {"_get_lr_called_within_step"}


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_learning_rates_equal_torch(name):
    ours, sched = _lrs(staged, name)
    theirs, tsched = _lrs(torch, name)
    assert ours == theirs  # the same float formulas in the same order: exactly equal
    assert getattr(sched, "last_epoch", None) == getattr(tsched, "last_epoch", None)
    assert sched.get_last_lr() == tsched.get_last_lr()
    state, tstate = sched.state_dict(), tsched.state_dict()
    assert _keys(state) == _keys(tstate)
    for sub, tsub in zip(state.get("_schedulers", ()), tstate.get("_schedulers", ())):
        assert _keys(sub) == _keys(tsub)


def test_state_dict_resumes_the_schedule():
    """A SequentialLR saved at epoch 8 and loaded into a new one continues identically."""
    ref, _ = _lrs(staged, "sequential")
    params = [staged.zeros(2, requires_grad=True), staged.zeros(3, requires_grad=True)]

    def make():
        opt = staged.optim.SGD(
            [{"params": params[:1]}, {"params": params[1:], "lr": 0.3}], lr=0.1, momentum=0.9
        )
        return opt, SCHEDULERS["sequential"](staged.optim.lr_scheduler, opt)

    opt, sched = make()
    for _ in range(8):
        sched.step()
    saved, lrs = sched.state_dict(), [g["lr"] for g in opt.param_groups]
    opt, sched = make()
    sched.load_state_dict(saved)
    for g, lr in zip(opt.param_groups, lrs):
        g["lr"] = lr
    for epoch in range(9, EPOCHS + 1):
        sched.step()
        assert [g["lr"] for g in opt.param_groups] == [lr for lr, _ in ref[epoch]]


def test_one_cycle_cycles_adam_beta1_as_torch():
    runs = []
    for ns in (staged, torch):
        opt = ns.optim.Adam([ns.zeros(2, requires_grad=True)], lr=0.1, betas=(0.9, 0.99))
        sched = ns.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.01, total_steps=12)
        out = []
        for _ in range(12):
            opt.step()
            sched.step()
            out.append((opt.param_groups[0]["lr"], opt.param_groups[0]["betas"]))
        runs.append(out)
        with pytest.raises(ValueError, match="Tried to step 13 times"):
            sched.step()
    assert runs[0] == runs[1]


class _Decay:
    """A callable ``scale_fn`` with state: CyclicLR saves its ``__dict__``."""

    def __init__(self, base):
        self.base = base

    def __call__(self, x):
        return self.base**x


def test_cyclic_lr_cycles_adam_beta1_and_resumes_from_its_state_dict():
    """CyclicLR on Adam moves beta1 as torch's; its state_dict (with the scale function's
    ``__dict__``) loaded at step 7 into a new scheduler continues identically."""

    def make(ns, base):
        opt = ns.optim.Adam([ns.zeros(2, requires_grad=True)], lr=0.1, betas=(0.9, 0.99))
        sched = ns.optim.lr_scheduler.CyclicLR(
            opt, 0.001, 0.01, step_size_up=3, scale_fn=_Decay(base), max_momentum=0.97
        )
        return opt, sched

    runs = []
    for ns in (staged, torch):
        opt, sched = make(ns, 0.7)
        out = []
        for i in range(15):
            if i == 7:
                saved = sched.state_dict()
                fn_state = saved["_scale_fn_custom"]  # torch's load pops it
                opt, sched = make(ns, 0.1)
                opt.param_groups[0].update(lr=out[-1][0], betas=out[-1][1])
                sched.load_state_dict(saved)
            opt.step()
            sched.step()
            out.append((opt.param_groups[0]["lr"], opt.param_groups[0]["betas"]))
        runs.append((out, fn_state, sched._scale_fn_custom.base))
    assert runs[0] == runs[1]
    assert runs[0][1:] == ({"base": 0.7}, 0.7)


def test_warm_restarts_with_fractional_epochs():
    runs = []
    for ns in (staged, torch):
        opt = ns.optim.SGD([ns.zeros(2, requires_grad=True)], lr=0.1)
        sched = ns.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=3)
        out = []
        for i in range(40):
            sched.step(i / 4)
            out.append(opt.param_groups[0]["lr"])
        runs.append(out)
    assert runs[0] == runs[1]


METRICS = [
    1.0,
    0.9,
    0.95,
    0.95,
    0.97,
    0.89,
    0.9,
    0.91,
    0.92,
    0.93,
    0.85,
    0.85,
    0.86,
    0.9,
    0.92,
    0.84,
    0.99,
    0.98,
    0.97,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
    0.4,
    0.4,
    0.4,
    0.4,
    0.4,
]
PLATEAU = {
    "min-rel": dict(patience=1),
    "min-abs-cooldown": dict(
        patience=0,
        threshold=0.02,
        threshold_mode="abs",
        cooldown=2,
        factor=0.5,
        min_lr=[0.01, 0.05],
    ),
    "max-rel": dict(mode="max", patience=2, factor=0.3, min_lr=0.004),
    "max-abs-eps": dict(mode="max", threshold_mode="abs", patience=0, factor=0.9, eps=0.01),
}


@pytest.mark.parametrize("case", sorted(PLATEAU))
def test_reduce_lr_on_plateau_equals_torch(case):
    runs = []
    for ns in (staged, torch):
        opt = ns.optim.SGD(
            [
                {"params": [ns.zeros(2, requires_grad=True)]},
                {"params": [ns.zeros(3, requires_grad=True)], "lr": 0.3},
            ],
            lr=0.1,
        )
        sched = ns.optim.lr_scheduler.ReduceLROnPlateau(opt, **PLATEAU[case])
        out = []
        for m in METRICS:
            opt.step()
            sched.step(m)
            out.append(
                sched.get_last_lr() + [sched.num_bad_epochs, sched.cooldown_counter, sched.best]
            )
        runs.append((out, _keys(sched.state_dict())))
    assert runs[0] == runs[1]
    assert runs[0][0][-1][:2] != [0.1, 0.3]  # it reduced


def test_scheduler_errors_match_torch():
    cases = [
        lambda m, o: m.StepLR([], 3),
        lambda m, o: m.StepLR(o, 3, last_epoch=4),
        lambda m, o: m.LambdaLR(o, [abs, abs]),
        lambda m, o: m.MultiplicativeLR(o, 0.9),
        lambda m, o: m.LinearLR(o, start_factor=0),
        lambda m, o: m.ConstantLR(o, factor=1.5),
        lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=0),
        lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0),
        lambda m, o: m.OneCycleLR(o, max_lr=0.1),
        lambda m, o: m.OneCycleLR(o, max_lr=0.1, total_steps=10, pct_start=1),
        lambda m, o: m.OneCycleLR(o, max_lr=0.1, total_steps=10, anneal_strategy="exp"),
        lambda m, o: m.OneCycleLR(o, max_lr=[0.1, 0.2], total_steps=10),
        lambda m, o: m.SequentialLR(o, [m.StepLR(o, 2)], milestones=[3]),
        lambda m, o: m.SequentialLR(o, [], milestones=[]),
        lambda m, o: m.ChainedScheduler([m.StepLR(o, 2), m.ReduceLROnPlateau(o)]),
        lambda m, o: m.ReduceLROnPlateau(o, factor=1.0),
        lambda m, o: m.ReduceLROnPlateau(o, mode="avg"),
        lambda m, o: m.ReduceLROnPlateau(o, min_lr=[0.1, 0.2]),
        lambda m, o: m.CyclicLR([], 0.01, 0.1),
        lambda m, o: m.CyclicLR(o, [0.01, 0.02], 0.1),
        lambda m, o: m.CyclicLR(o, 0.01, [0.1, 0.2]),
        lambda m, o: m.CyclicLR(o, 0.01, 0.1, mode="sine"),
        lambda m, o: m.CyclicLR(o, 0.01, 0.1, base_momentum=[0.8, 0.7]),
        lambda m, o: m.CyclicLR(o, 0.01, 0.1, max_momentum=[0.8, 0.7]),
        lambda m, o: m.CyclicLR(o, 0.01, 0.1, last_epoch=5),
    ]
    for make in cases:
        errors = []
        for ns in (staged, torch):
            opt = ns.optim.SGD([ns.zeros(2, requires_grad=True)], lr=0.1)
            with pytest.raises(Exception) as info:
                make(ns.optim.lr_scheduler, opt)
            errors.append((type(info.value), str(info.value)))
        assert errors[0] == errors[1]


def test_cyclic_lr_needs_a_momentum_to_cycle_as_torch():
    errors = []
    for ns in (staged, torch):
        opt = ns.optim.Rprop([ns.zeros(2, requires_grad=True)])
        with pytest.raises(ValueError) as info:
            ns.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1)
        errors.append(str(info.value))
        ns.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, cycle_momentum=False)  # no momentum
    assert errors[0] == errors[1]


def test_chainable_step_with_an_epoch_warns_and_uses_the_closed_form():
    runs = []
    for ns in (staged, torch):
        opt = ns.optim.SGD([ns.zeros(2, requires_grad=True)], lr=0.1)
        sched = ns.optim.lr_scheduler.PolynomialLR(opt, total_iters=8, power=2.0)
        opt.step()
        with pytest.warns(UserWarning, match="epoch parameter in `scheduler.step\\(\\)`"):
            sched.step(5)
        runs.append(opt.param_groups[0]["lr"])
    np.testing.assert_equal(runs[0], runs[1])
