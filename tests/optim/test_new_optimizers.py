"""Adafactor, Muon and SparseAdam against torch 2.13: trajectories from identical weights
in float32 and float64, param groups, state_dicts (torch's layout, resuming a torch run),
compiled steps against eager, and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, message, to_numpy

# Muon's update is orthogonalized in bfloat16 as torch's: a sum torch's bfloat16 matrix
# product accumulates in another order can round to the neighbouring bfloat16, one ulp
# (2**-7 for entries up to 2) of the update, which moves a weight by that times the step size
BF16_ULP = 2.0**-7


def _problem(ns, shapes, dtype):
    """Weights of ``shapes`` and a loss coupling each to fixed data nonlinearly."""
    rng = np.random.RandomState(0)
    params = [ns.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in shapes]
    data = [
        (
            ns.tensor(rng.standard_normal(s).astype(dtype)),
            ns.tensor(rng.standard_normal(s).astype(dtype)),
        )
        for s in shapes
    ]

    def loss():
        return sum(((p.tanh() * a - b) ** 2).sum() for p, (a, b) in zip(params, data))

    return params, loss


ADAFACTOR = [(3, 4), (5,), (2, 3, 4), ()]  # factored (2 and 3 dims), a vector, a scalar
MUON = [(4, 6), (6, 4), (1, 5)]  # wide, tall, one row (a 1x1 Gram matrix)


def _groups(p, first, rest=None):
    return [{"params": p[:1], **first}, {"params": p[1:], **(rest or {})}]


CASES = {  # name: (make, shapes, step size of the largest Muon step or None)
    "adafactor": (lambda ns, p: ns.optim.Adafactor(p), ADAFACTOR, None),
    "adafactor-options": (
        lambda ns, p: ns.optim.Adafactor(
            p, lr=0.05, beta2_decay=-0.5, eps=(1e-5, 1e-2), d=1.5, weight_decay=0.1
        ),
        ADAFACTOR,
        None,
    ),
    "adafactor-groups-maximize": (
        lambda ns, p: ns.optim.Adafactor(
            _groups(p, {"lr": 0.3, "eps": (1e-6, 0.5)}, {"weight_decay": 0.2, "d": 1.2}),
            maximize=True,
        ),
        ADAFACTOR,
        None,
    ),
    "muon": (lambda ns, p: ns.optim.Muon(p, lr=0.02), MUON, 0.02 * 1.5**0.5),
    "muon-options": (
        lambda ns, p: ns.optim.Muon(
            p,
            lr=0.05,
            weight_decay=0.0,
            momentum=0.3,
            nesterov=False,
            ns_coefficients=(2.0, -1.5, 0.5),
            ns_steps=3,
            adjust_lr_fn="match_rms_adamw",
        ),
        MUON,
        0.05 * 0.2 * 6**0.5,
    ),
    "muon-groups": (
        lambda ns, p: ns.optim.Muon(
            _groups(p, {"adjust_lr_fn": "original"}, {"lr": 0.05, "momentum": 0.9, "eps": 1e-3}),
            lr=0.02,
        ),
        MUON,
        0.05 * 1.5**0.5,
    ),
}


def trajectory(ns, name, dtype, steps=6):
    make, shapes, _ = CASES[name]
    params, loss_fn = _problem(ns, shapes, dtype)
    opt = make(ns, params)
    history = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
        history.append([to_numpy(p).copy() for p in params] + [to_numpy(loss)])
    return history


def _tolerance(name, dtype, steps):
    rtol, atol = (1e-5, 1e-6) if dtype is np.float32 else (1e-10, 1e-13)
    step_size = CASES[name][2]
    return rtol, atol + (step_size * steps * BF16_ULP if step_size else 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_trajectory_matches_torch(name, dtype):
    ours, theirs = trajectory(staged, name, dtype), trajectory(torch, name, dtype)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        rtol, atol = _tolerance(name, dtype, i + 1)
        for x, y in zip(a, b):
            assert x.dtype == y.dtype
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)
    assert not np.allclose(ours[-1][0], ours[0][0])  # the weights moved


def _numpy_state(sd):
    return {
        "state": {
            i: {k: to_numpy(v) if isinstance(v, torch.Tensor) else v for k, v in s.items()}
            for i, s in sd["state"].items()
        },
        "param_groups": sd["param_groups"],
    }


@pytest.mark.parametrize("name", ["adafactor-groups-maximize", "muon-groups"])
def test_state_dict_has_torch_layout_and_resumes_a_torch_run(name):
    """4 float64 steps in torch, its state_dict (as NumPy) and weights loaded here, 4 more
    in both: the same state dicts (keys, dtypes, values) and weights."""
    make, shapes, _ = CASES[name]
    tparams, tloss = _problem(torch, shapes, np.float64)
    params, loss = _problem(staged, shapes, np.float64)
    topt, opt = make(torch, tparams), make(staged, params)
    for i in range(8):
        if i == 4:
            with staged.no_grad():
                for p, tp in zip(params, tparams):
                    p.copy_(staged.tensor(to_numpy(tp)))
            opt.load_state_dict(_numpy_state(topt.state_dict()))
        for o, f in ((topt, tloss), (opt, loss)):
            o.zero_grad()
            f().backward()
            o.step()
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    assert sd["state"].keys() == tsd["state"].keys()
    rtol, atol = _tolerance(name, np.float64, 8)
    for i, s in sd["state"].items():
        assert list(s) == list(tsd["state"][i])
        for k, v in s.items():
            assert_close(v, tsd["state"][i][k], rtol=rtol, atol=atol)
    for p, tp in zip(params, tparams):
        assert_close(p, tp, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["adafactor-options", "muon"])
def test_state_dict_round_trip_continues_identically(name):
    """Stopped after 3 steps, the state_dict loaded into a new optimizer of the same
    weights: the next 3 steps are those of an uninterrupted run, bit for bit."""
    make, shapes, _ = CASES[name]
    runs = []
    for reload in (False, True):
        params, loss = _problem(staged, shapes, np.float32)
        opt = make(staged, params)
        for i in range(6):
            if reload and i == 3:
                sd = opt.state_dict()
                opt = make(staged, params)
                opt.load_state_dict(sd)
            opt.zero_grad()
            loss().backward()
            opt.step()
        runs.append([p.numpy(force=True) for p in params])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


# -- compiled steps -----------------------------------------------------------------------
def _compiled_run(compiled, calls=7, change_at=3, ns_steps_at=5):
    """Float32 steps of Muon (its weights, two groups) and Adafactor (the rest, two
    groups); before call ``change_at`` learning rates, Adafactor's eps and Muon's momentum
    and adjust_lr_fn change (no re-trace), before call ``ns_steps_at`` Muon's ns_steps (a
    re-trace). Returns the losses, the weights and the trace counts."""
    params, loss_fn = _problem(staged, MUON + ADAFACTOR, np.float32)
    muon = staged.optim.Muon([{"params": params[:2]}, {"params": params[2:3], "lr": 0.05}], lr=0.02)
    adafactor = staged.optim.Adafactor(
        [{"params": params[3:5]}, {"params": params[5:], "lr": 0.05}], weight_decay=0.01
    )

    def step():
        muon.zero_grad()
        adafactor.zero_grad()
        loss = loss_fn()
        loss.backward()
        muon.step()
        adafactor.step()
        return loss

    f = staged.compile(step) if compiled else step
    losses, traces = [], []
    for i in range(calls):
        if i == change_at:
            for g in muon.param_groups + adafactor.param_groups:
                g["lr"] *= 0.5
            adafactor.param_groups[0]["eps"] = (1e-4, 1e-2)
            muon.param_groups[1].update(momentum=0.8, adjust_lr_fn="match_rms_adamw")
        if i == ns_steps_at:
            muon.param_groups[0]["ns_steps"] = 3
        losses.append(f().item())
        traces.append(f.traces if compiled else 0)
    return losses, [p.numpy(force=True) for p in params], traces


def test_compiled_steps_match_eager_and_read_hyper_parameters_at_every_call():
    ours, weights, traces = _compiled_run(compiled=True)
    eager, eager_weights, _ = _compiled_run(compiled=False)
    atol = 7 * 0.05 * 1.5**0.5 * BF16_ULP  # Muon's largest steps (BF16_ULP)
    np.testing.assert_allclose(ours, eager, rtol=1e-5, atol=atol)
    for a, b in zip(weights, eager_weights):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=atol)
    # the first call makes the state; the second trace serves the next calls through the
    # changes of numbers; a new ns_steps (a loop count) is a new trace
    assert traces == [1, 2, 2, 2, 2, 3, 3]
    unchanged, _, _ = _compiled_run(compiled=False, change_at=None, ns_steps_at=None)
    assert not np.allclose(eager[4:], unchanged[4:], rtol=1e-4)  # the changes mattered


# -- errors -------------------------------------------------------------------------------
def _error(call):
    with pytest.raises(Exception) as info:
        call()
    return type(info.value), message(info.value).replace("staged.", "torch.")


def _weight(ns, shape=(3, 4), dtype=None):
    return ns.zeros(shape, dtype=dtype or ns.float32, requires_grad=True)


CONSTRUCTOR_ERRORS = [
    ("Adafactor", (), dict(lr=-1.0)),
    ("Adafactor", (), dict(beta2_decay=0.5)),
    ("Adafactor", (), dict(eps=(-1e-3, 1e-3))),
    ("Adafactor", (), dict(eps=(None, -1.0))),
    ("Adafactor", (), dict(d=0.5)),
    ("Adafactor", (), dict(weight_decay=-0.1)),
    ("Muon", (), dict(lr=-1.0)),
    ("Muon", (), dict(momentum=-0.9)),
    ("Muon", (), dict(weight_decay=-0.1)),
    ("Muon", (), dict(adjust_lr_fn="scaled")),
    ("Muon", (3,), {}),
    ("Muon", (2, 3, 4), {}),
    ("SparseAdam", (), dict(lr=0.0)),
    ("SparseAdam", (), dict(eps=0.0)),
    ("SparseAdam", (), dict(betas=(1.0, 0.9))),
    ("SparseAdam", (), dict(betas=(0.9, -0.1))),
]


@pytest.mark.parametrize("name, shape, kwargs", CONSTRUCTOR_ERRORS)
def test_constructor_errors_match_torch(name, shape, kwargs):
    errors = [
        _error(lambda: getattr(ns.optim, name)([_weight(ns, shape or (3, 4))], **kwargs))
        for ns in (staged, torch)
    ]
    assert errors[0] == errors[1]


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
def test_sparse_adam_rejects_sparse_and_complex_parameters_as_torch():
    def make(ns, second):
        return ns.optim.SparseAdam(
            [{"params": [_weight(ns)]}, {"params": [_weight(ns), second(ns)]}]
        )

    sparse = lambda ns: ns.sparse_coo_tensor([[0, 2]], ns.ones(2), (3,), requires_grad=True)  # noqa: E731
    complex_ = lambda ns: _weight(ns, (2,), ns.complex64)  # noqa: E731
    for second in (sparse, complex_):
        errors = [_error(lambda: make(ns, second)) for ns in (staged, torch)]
        assert errors[0] == errors[1]


STEP_ERRORS = [  # what torch checks when it steps
    ("SparseAdam", {}),  # a dense gradient
    ("Adafactor", dict(dtype="complex64")),
    ("Muon", dict(dtype="complex64")),
    ("Muon", dict(ns_steps=100)),
    ("Muon", dict(ns_coefficients=(3.4, -4.7))),
]


@pytest.mark.parametrize("name, kwargs", STEP_ERRORS)
def test_step_errors_match_torch(name, kwargs):
    def call(ns):
        kw = dict(kwargs)
        p = _weight(ns, dtype=getattr(ns, kw.pop("dtype")) if "dtype" in kw else None)
        p.grad = ns.ones_like(p)
        getattr(ns.optim, name)([p], **kw).step()

    errors = [_error(lambda: call(ns)) for ns in (staged, torch)]
    assert errors[0] == errors[1]


def test_sparse_adam_under_compile_raises_torch_error_and_steps_without_grads():
    p = _weight(staged)
    opt = staged.optim.SparseAdam([p])
    opt.step()  # no gradient: nothing to do
    assert not opt.state
    p.grad = staged.ones_like(p)
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        staged.compile(opt.step)()
    with pytest.warns(UserWarning, match="SparseAdam does not support dense"):
        with pytest.raises(RuntimeError, match="does not support dense gradients, please"):
            staged.compile(opt.step, fallback="eager")()  # eagerly: torch's own error
