"""RMSprop, Adagrad, Adamax, NAdam, RAdam, Adadelta, Rprop, ASGD, SGD with Nesterov and
LBFGS against torch (float64 trajectories from identical weights), their compiled steps
against eager, and their constructor errors against torch's."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, to_numpy
from tests.optim.test_optim import _problem, resume_torch_run, trajectory


def _groups(p, first, rest=None):
    """Two param groups: the weight with options ``first``, the rest with ``rest``."""
    return [{"params": p[:1], **first}, {"params": p[1:], **(rest or {})}]


CASES = {
    "rmsprop": lambda ns, p: ns.optim.RMSprop(p, lr=0.01),
    "rmsprop-centered-momentum": lambda ns, p: ns.optim.RMSprop(
        p, lr=0.01, alpha=0.9, eps=1e-6, momentum=0.5, centered=True, weight_decay=0.1
    ),
    "rmsprop-groups-maximize": lambda ns, p: ns.optim.RMSprop(
        _groups(p, {"lr": 0.02, "centered": True}, {"momentum": 0.9}), lr=0.005, maximize=True
    ),
    "adagrad": lambda ns, p: ns.optim.Adagrad(p, lr=0.1),
    "adagrad-decay": lambda ns, p: ns.optim.Adagrad(
        p, lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.5, eps=1e-6
    ),
    "adagrad-groups-maximize": lambda ns, p: ns.optim.Adagrad(
        _groups(p, {"lr": 0.3, "lr_decay": 0.1}), lr=0.05, maximize=True
    ),
    "adamax": lambda ns, p: ns.optim.Adamax(p, lr=0.05),
    "adamax-weight-decay": lambda ns, p: ns.optim.Adamax(
        p, lr=0.05, betas=(0.8, 0.9), eps=1e-3, weight_decay=0.2
    ),
    "adamax-groups-maximize": lambda ns, p: ns.optim.Adamax(
        _groups(p, {"lr": 0.1, "betas": (0.5, 0.99)}), lr=0.02, maximize=True
    ),
    "nadam": lambda ns, p: ns.optim.NAdam(p, lr=0.05),
    "nadam-weight-decay": lambda ns, p: ns.optim.NAdam(
        p, lr=0.05, betas=(0.8, 0.99), weight_decay=0.1, momentum_decay=0.01
    ),
    "nadamw": lambda ns, p: ns.optim.NAdam(
        p, lr=0.05, weight_decay=0.3, decoupled_weight_decay=True
    ),
    "nadam-groups-maximize": lambda ns, p: ns.optim.NAdam(
        _groups(p, {"lr": 0.1, "momentum_decay": 0.1}, {"weight_decay": 0.1}),
        lr=0.02,
        maximize=True,
    ),
    "radam": lambda ns, p: ns.optim.RAdam(p, lr=0.05),
    "radam-weight-decay": lambda ns, p: ns.optim.RAdam(
        p, lr=0.05, betas=(0.8, 0.99), eps=1e-4, weight_decay=0.1
    ),
    "radamw": lambda ns, p: ns.optim.RAdam(
        p, lr=0.05, weight_decay=0.3, decoupled_weight_decay=True
    ),
    "radam-groups-maximize": lambda ns, p: ns.optim.RAdam(
        _groups(p, {"lr": 0.1, "betas": (0.5, 0.9)}), lr=0.02, maximize=True
    ),
    "adadelta": lambda ns, p: ns.optim.Adadelta(p),
    "adadelta-weight-decay": lambda ns, p: ns.optim.Adadelta(
        p, lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1
    ),
    "adadelta-groups-maximize": lambda ns, p: ns.optim.Adadelta(
        _groups(p, {"lr": 2.0, "rho": 0.5}), maximize=True
    ),
    "sgd-nesterov-groups": lambda ns, p: ns.optim.SGD(
        _groups(p, {"lr": 0.2, "weight_decay": 0.1}, {"momentum": 0.5}),
        lr=0.05,
        momentum=0.9,
        nesterov=True,
    ),
    "rprop": lambda ns, p: ns.optim.Rprop(p),
    "rprop-etas-step-sizes": lambda ns, p: ns.optim.Rprop(
        p, lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2)
    ),
    "rprop-groups-maximize": lambda ns, p: ns.optim.Rprop(
        _groups(p, {"lr": 0.1, "etas": (0.4, 1.1)}, {"step_sizes": (0.0, 0.02)}),
        maximize=True,
        foreach=False,
    ),
    "asgd": lambda ns, p: ns.optim.ASGD(p, lr=0.1),
    "asgd-averaging": lambda ns, p: ns.optim.ASGD(
        p, lr=0.2, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1
    ),
    "asgd-groups-maximize": lambda ns, p: ns.optim.ASGD(
        _groups(p, {"lr": 0.05, "t0": 5}, {"lambd": 0.1}), lr=0.1, t0=2, maximize=True
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_trajectory_matches_torch(name):
    ours, theirs = trajectory(staged, CASES[name]), trajectory(torch, CASES[name])
    for a, b in zip(ours, theirs):
        for x, y in zip(a, b):
            assert_close(x, y, rtol=1e-10, atol=1e-13)
    assert not np.allclose(ours[-1][0], ours[0][0])  # the parameters moved


@pytest.mark.parametrize(
    "name",
    [
        "rmsprop-centered-momentum",
        "adagrad-decay",
        "adamax",
        "nadamw",
        "radam-groups-maximize",
        "adadelta",
        "rprop-groups-maximize",
        "asgd-averaging",
        "asgd-groups-maximize",
    ],
)
def test_state_dict_has_torch_layout_and_resumes_a_torch_run(name):
    """7 steps in torch, its state_dict (as NumPy) loaded here, 5 more steps in both: the
    same trajectory as 12 steps in torch (RAdam switches to its rectified rule at 6)."""
    resume_torch_run(CASES[name], 7, 12, rtol=1e-10, atol=1e-13)


ERRORS = [
    ("RMSprop", dict(lr=-1)),
    ("RMSprop", dict(eps=-1e-8)),
    ("RMSprop", dict(momentum=-0.5)),
    ("RMSprop", dict(weight_decay=-1)),
    ("RMSprop", dict(alpha=-0.1)),
    ("Adagrad", dict(lr_decay=-1)),
    ("Adagrad", dict(initial_accumulator_value=-1)),
    ("Adagrad", dict(eps=-1)),
    ("Adamax", dict(betas=(1.0, 0.9))),
    ("Adamax", dict(betas=(0.9, -0.1))),
    ("NAdam", dict(momentum_decay=-1)),
    ("NAdam", dict(lr=float("nan"))),
    ("RAdam", dict(weight_decay=-0.1)),
    ("Adadelta", dict(rho=1.5)),
    ("Adadelta", dict(lr=-1)),
    ("SGD", dict(lr=0.1, nesterov=True)),
    ("SGD", dict(momentum=0.9, dampening=0.1, nesterov=True)),
    ("LBFGS", dict(lr=-1)),
    ("LBFGS", dict(two_groups=True)),
    ("Rprop", dict(lr=-0.1)),
    ("Rprop", dict(etas=(1.0, 1.2))),
    ("Rprop", dict(etas=(0.0, 1.2))),
    ("Rprop", dict(etas=(0.5, 1.0))),
    ("Rprop", dict(etas=(0.5, 1.2), weight_decay=0.1)),
    ("ASGD", dict(lr=-1)),
    ("ASGD", dict(weight_decay=-0.5)),
    ("ASGD", dict(amsgrad=True)),
]


@pytest.mark.parametrize("name, kwargs", ERRORS)
def test_constructor_errors_match_torch(name, kwargs):
    errors = []
    for ns in (staged, torch):
        params = _problem(ns)[0]
        if kwargs.get("two_groups"):
            params = _groups(params, {})
        with pytest.raises(Exception) as info:
            getattr(ns.optim, name)(
                params, **{k: v for k, v in kwargs.items() if k != "two_groups"}
            )
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("name", ["Rprop", "ASGD"])
def test_signature_and_param_groups_match_torch(name):
    """Names, kinds and defaults of the arguments (``foreach`` and the like included), and
    a new optimizer's param groups, as torch's."""
    ours, theirs = (inspect.signature(getattr(ns.optim, name)).parameters for ns in (staged, torch))
    assert [(p.name, p.kind, p.default) for p in ours.values()] == [
        (p.name, p.kind, p.default) for p in theirs.values()
    ]
    groups = [
        getattr(ns.optim, name)(_problem(ns)[0]).state_dict()["param_groups"]
        for ns in (staged, torch)
    ]
    assert groups[0] == groups[1]


def test_asgd_complex_parameters_match_torch():
    """ASGD's step, eta and mu stay real for a complex parameter."""
    runs = []
    for ns in (staged, torch):
        z = ns.tensor(np.array([1 + 2j, -0.5 + 1j]), requires_grad=True)
        opt = ns.optim.ASGD([z], lr=0.1, t0=2, weight_decay=0.1)
        for _ in range(5):
            opt.zero_grad()
            (z.abs() ** 2).sum().backward()
            opt.step()
        runs.append([z, *opt.state[z].values()])
    for a, b in zip(*runs):
        assert_close(a, b, rtol=1e-12, atol=1e-14)


# -- compiled steps -----------------------------------------------------------------------
COMPILED = {  # one model, each optimizer on its own weight and bias (two param groups)
    "rmsprop": lambda p: staged.optim.RMSprop(
        _groups(p, {"centered": True}), lr=0.01, momentum=0.5, weight_decay=0.01
    ),
    "adagrad": lambda p: staged.optim.Adagrad(_groups(p, {"lr": 0.2}), lr=0.1, lr_decay=0.01),
    "adamax": lambda p: staged.optim.Adamax(_groups(p, {"lr": 0.05}), weight_decay=0.01),
    "nadam": lambda p: staged.optim.NAdam(
        _groups(p, {"decoupled_weight_decay": True}), lr=0.05, weight_decay=0.01
    ),
    "radam": lambda p: staged.optim.RAdam(_groups(p, {"lr": 0.05}), weight_decay=0.01),
    "adadelta": lambda p: staged.optim.Adadelta(_groups(p, {"rho": 0.8}), weight_decay=0.01),
    "sgd-nesterov": lambda p: staged.optim.SGD(
        _groups(p, {"lr": 0.05}), lr=0.02, momentum=0.9, nesterov=True
    ),
    "rprop": lambda p: staged.optim.Rprop(
        _groups(p, {"etas": (0.4, 1.3)}), lr=0.02, step_sizes=(1e-4, 0.05)
    ),
    "asgd": lambda p: staged.optim.ASGD(
        _groups(p, {"lr": 0.05}), lr=0.1, lambd=0.01, t0=2, weight_decay=0.01
    ),
}


def _compiled_run(compiled, calls=7, change_at=3):
    """Float32 steps of every optimizer in COMPILED; before call ``change_at`` every lr
    is halved and RMSprop's alpha, NAdam's betas, Rprop's etas and ASGD's lambd change.
    Returns the losses, the final weights and, compiled, the trace count after each
    call."""
    rng = np.random.RandomState(0)
    x, y = (staged.tensor(rng.standard_normal(s).astype(np.float32)) for s in [(8, 3), (8, 2)])
    params = {
        k: [
            staged.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
            for s in [(3, 2), (2,)]
        ]
        for k in COMPILED
    }
    opts = {k: make(params[k]) for k, make in COMPILED.items()}

    def step(x, y):
        for o in opts.values():
            o.zero_grad()
        loss = sum((((x @ w + b).tanh() - y) ** 2).mean() for w, b in params.values())
        loss.backward()
        for o in opts.values():
            o.step()
        return loss

    f = staged.compile(step) if compiled else step
    losses, traces = [], []
    for i in range(calls):
        if i == change_at:
            for o in opts.values():
                for g in o.param_groups:
                    g["lr"] *= 0.5
            opts["rmsprop"].param_groups[0]["alpha"] = 0.9
            opts["nadam"].param_groups[1]["betas"] = (0.8, 0.99)
            opts["rprop"].param_groups[0]["etas"] = (0.6, 1.1)
            opts["asgd"].param_groups[1]["lambd"] = 0.05
        losses.append(f(x, y).item())
        traces.append(f.traces if compiled else 0)
    weights = {k: [p.detach().numpy().copy() for p in ps] for k, ps in params.items()}
    return losses, weights, traces


def test_compiled_steps_match_eager_and_read_hyper_parameters_at_every_call():
    ours, weights, traces = _compiled_run(compiled=True)
    eager, eager_weights, _ = _compiled_run(compiled=False)
    np.testing.assert_allclose(ours, eager, rtol=1e-5)
    for k in COMPILED:
        for a, b in zip(weights[k], eager_weights[k]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=k)
    # the first call makes the optimizers' state (one-shot); the second trace serves the
    # rest, through the changes of hyper-parameters before the fourth call
    assert traces == [1, 2, 2, 2, 2, 2, 2]
    unchanged, _, _ = _compiled_run(compiled=False, change_at=None)
    assert not np.allclose(eager[4:], unchanged[4:], rtol=1e-4)  # the changes mattered


# -- LBFGS --------------------------------------------------------------------------------
def _rosenbrock(ns):
    """The 4-d Rosenbrock function (and a parameter left without grad)."""
    x = ns.tensor([-1.5, 2.0, 0.5, -0.3], dtype=ns.float64, requires_grad=True)
    unused = ns.zeros(2, dtype=ns.float64, requires_grad=True)
    return [x, unused], lambda: (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def _lbfgs_run(ns, steps=3, params=None, state=None, **kwargs):
    """``steps`` LBFGS steps on the Rosenbrock function, from ``params`` and the optimizer
    state ``state`` if given: (losses, final parameters, optimizer)."""
    start, loss_fn = _rosenbrock(ns)
    if params is not None:
        with ns.no_grad():
            for p, w in zip(start, params):
                p.copy_(ns.tensor(w))
    opt = ns.optim.LBFGS(start, **kwargs)
    if state is not None:
        opt.load_state_dict(state)

    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    losses = [float(opt.step(closure).detach()) for _ in range(steps)]
    return losses, [to_numpy(p).copy() for p in start], opt


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(lr=0.5, max_iter=7, history_size=3),
        dict(line_search_fn="strong_wolfe"),
        dict(line_search_fn="strong_wolfe", history_size=2, tolerance_change=1e-6),
    ],
    ids=["plain", "short-history", "strong-wolfe", "strong-wolfe-short"],
)
def test_lbfgs_matches_torch(kwargs):
    ours, weights, opt = _lbfgs_run(staged, **kwargs)
    theirs, tweights, topt = _lbfgs_run(torch, **kwargs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)
    for a, b in zip(weights, tweights):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)
    s, ts = opt.state[opt._params[0]], topt.state[topt._params[0]]
    assert (s["func_evals"], s["n_iter"]) == (ts["func_evals"], ts["n_iter"])
    assert ours[-1] < ours[0] / 100


def test_lbfgs_state_dict_round_trip_continues_identically():
    """A step, the state_dict loaded into a new LBFGS (history lists and all), two more
    steps: those of an uninterrupted run, bit for bit."""
    kwargs = dict(line_search_fn="strong_wolfe", max_iter=4, history_size=3)
    ref, ref_weights, _ = _lbfgs_run(staged, **kwargs)
    _, weights, opt = _lbfgs_run(staged, steps=1, **kwargs)
    losses, resumed, _ = _lbfgs_run(
        staged, steps=2, params=weights, state=opt.state_dict(), **kwargs
    )
    assert losses == ref[1:]
    for a, b in zip(resumed, ref_weights):
        np.testing.assert_array_equal(a, b)


def test_lbfgs_under_compile_says_it_runs_eagerly():
    params, loss_fn = _rosenbrock(staged)
    opt = staged.optim.LBFGS(params)

    def step():
        def closure():
            opt.zero_grad()
            loss = loss_fn()
            loss.backward()
            return loss

        return opt.step(closure)

    with pytest.raises(
        RuntimeError, match="LBFGS.step needs data-dependent control flow .* fallback='eager'"
    ):
        staged.compile(step)()
    with pytest.warns(UserWarning, match="LBFGS.step needs data-dependent"):
        eager_loss = staged.compile(step, fallback="eager")()
    assert eager_loss.item() > 0  # it ran, eagerly


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_step_warns_nothing_as_torch(line_search):
    """``float(closure())`` ran under ``enable_grad``: the requires-grad scalar warning,
    which torch (converting under the step's no_grad) never gives."""
    w = staged.nn.Parameter(staged.tensor([1.5, -0.5]))
    opt = staged.optim.LBFGS([w], max_iter=3, line_search_fn=line_search)

    def closure():
        opt.zero_grad()
        loss = ((w - 1) ** 2).sum()
        loss.backward()
        return loss

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step(closure)
    assert w.tolist() == pytest.approx([1.0, 1.0], abs=1e-4)
