"""Optimizers on complex parameters against torch 2.13, whose single-tensor steps update
each real and imaginary part as a real number of its own (``torch.view_as_real`` of the
parameter, its gradient and its state): trajectories in complex64 and complex128 next to
a real parameter, torch's state_dict layout (complex state tensors), resuming from torch's
state, a differentiable step, LBFGS, the optimizers that refuse complex parameters, and
compiled steps against eager."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, message, to_numpy

STEPS = 6
CASES = {
    "SGD": dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1),
    "Adam": dict(lr=0.05),
    "Adam-amsgrad-decay-maximize": dict(lr=0.05, amsgrad=True, weight_decay=0.1, maximize=True),
    "AdamW": dict(lr=0.05, weight_decay=0.3),
    "Adamax": dict(lr=0.05, weight_decay=0.1),
    "Adadelta": dict(lr=0.5, weight_decay=0.1),
    "Adagrad": dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.2, weight_decay=0.1),
    "ASGD": dict(lr=0.05, t0=2, weight_decay=0.1),
    "NAdam": dict(lr=0.05, decoupled_weight_decay=True, weight_decay=0.1),
    "RAdam": dict(lr=0.05, weight_decay=0.1),  # rho_t > 5 from step 6 on
    "RMSprop": dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1),
    "Rprop": dict(lr=0.05),
}
# float32 numbers torch computes in double from the step count (bias corrections) are
# float32 tensors here (Note [hyper-parameters] in staged/optim/optimizer.py): a relative
# 2**-24 in a step's size, through divisions by running moments near 0 over the steps
TOL = {np.complex128: (1e-12, 1e-13), np.complex64: (1e-4, 1e-5)}


def _start(dtype):
    rng = np.random.RandomState(0)
    z = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    return z.astype(dtype), rng.standard_normal(5).astype(np.zeros((), dtype).real.dtype)


def _grad(p, k):
    """A gradient of step ``k`` that depends on the weights (NumPy, the same for both)."""
    rng = np.random.RandomState(k + 1)
    a = rng.standard_normal(p.shape) + 1j * rng.standard_normal(p.shape)
    b = rng.standard_normal(p.shape) + 1j * rng.standard_normal(p.shape)
    g = a * p + b
    if k == 2:
        g.flat[:3] = [0, 1j, -2]  # zero parts: Rprop's sign, Adamax's max
    return (g if np.iscomplexobj(p) else g.real).astype(p.dtype)


def _run(ns, name, dtype, steps=STEPS, state=None):
    z, w = _start(dtype)
    p, q = ns.tensor(z, requires_grad=True), ns.tensor(w, requires_grad=True)
    opt = getattr(ns.optim, name.split("-")[0])([p, q], **CASES[name])
    if state is not None:
        opt.load_state_dict(state)
    for k in range(steps):
        for t in (p, q):
            t.grad = ns.tensor(_grad(to_numpy(t), k))
        opt.step()
    return p, q, opt


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["complex64", "complex128"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_trajectory_and_state_match_torch(name, dtype):
    rtol, atol = TOL[dtype]
    *ours, opt = _run(staged, name, dtype)
    *theirs, topt = _run(torch, name, dtype)
    for a, b in zip(ours, theirs):
        assert_close(a, b, rtol, atol)
    state, tstate = opt.state_dict()["state"], topt.state_dict()["state"]
    assert state.keys() == tstate.keys()
    for i in tstate:
        assert state[i].keys() == tstate[i].keys()
        for k, v in tstate[i].items():
            if isinstance(v, torch.Tensor):  # complex state of a complex parameter, as torch
                assert_close(state[i][k], v, rtol, atol)
            else:
                assert state[i][k] == pytest.approx(v, rel=rtol)


@pytest.mark.parametrize("name", sorted(set(CASES) - {"SGD"}))
def test_each_part_is_updated_as_a_real_number(name):
    """A complex parameter moves exactly as a real one holding its parts as pairs would."""
    z, _ = _start(np.complex64)
    pairs = staged.tensor(np.stack([z.real, z.imag], -1), requires_grad=True)
    p = staged.tensor(z, requires_grad=True)
    opts = [getattr(staged.optim, name.split("-")[0])([t], **CASES[name]) for t in (p, pairs)]
    for k in range(STEPS):
        p.grad = staged.tensor(_grad(to_numpy(p), k))
        pairs.grad = staged.view_as_real(p.grad).clone()
        for opt in opts:
            opt.step()
        np.testing.assert_array_equal(to_numpy(staged.view_as_real(p)), to_numpy(pairs))


def test_resuming_from_torchs_state_dict():
    """torch's complex state loads into staged's optimizer, which continues torch's run."""
    for name in ("Adam-amsgrad-decay-maximize", "Rprop", "Adagrad", "RMSprop"):
        *_, topt = _run(torch, name, np.complex128, steps=3)
        state = topt.state_dict()  # torch's run from it writes into its tensors
        *theirs, _ = _run(torch, name, np.complex128, steps=3, state=copy.deepcopy(state))
        *ours, _ = _run(staged, name, np.complex128, steps=3, state=state)
        for a, b in zip(ours, theirs):
            assert_close(a, b, *TOL[np.complex128])


def test_differentiable_step_differentiates_through_the_real_views():
    """Differentiable Adagrad steps on a complex non-leaf weight: the gradient of a loss
    of the new weight with respect to the old one, as torch's."""

    def run(ns):
        z, _ = _start(np.complex128)
        w0 = ns.tensor(z, requires_grad=True)
        w = w0 * 1
        opt = ns.optim.Adagrad([w], **CASES["Adagrad"], differentiable=True)
        for k in range(3):
            w.grad = ns.tensor(_grad(z, k))
            opt.step()
        loss = (w * w.conj()).real.sum() + w.imag.sin().sum()
        loss.backward()
        return w, w0.grad

    for a, b in zip(run(staged), run(torch)):
        assert_close(a, b, 1e-12, 1e-13)


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_views_complex_parameters_as_real(line_search):
    def run(ns):
        z, w = _start(np.complex128)
        p, q = ns.tensor(z, requires_grad=True), ns.tensor(w, requires_grad=True)
        a = ns.tensor(_grad(z, 0))
        opt = ns.optim.LBFGS([p, q], lr=0.5, max_iter=6, line_search_fn=line_search)

        def closure():
            opt.zero_grad()
            loss = ((p * a - 1).abs() ** 2).sum() + (q.sin() * p.real.sum()).sum()
            loss.backward()
            return loss

        for _ in range(2):
            opt.step(closure)
        return p, q

    for a, b in zip(run(staged), run(torch)):
        assert_close(a, b, 1e-9, 1e-10)


@pytest.mark.parametrize(
    "make",
    [
        lambda ns, p: ns.optim.Adafactor([p]),
        lambda ns, p: ns.optim.Muon([p]),
        lambda ns, p: ns.optim.SparseAdam([p]),
    ],
    ids=["Adafactor", "Muon", "SparseAdam"],
)
def test_optimizers_without_complex_support_raise_as_torch(make):
    def error(ns):
        p = ns.zeros((3, 4), dtype=ns.complex64, requires_grad=True)
        with pytest.raises(Exception) as info:
            opt = make(ns, p)
            p.grad = ns.ones_like(p)
            opt.step()
        return type(info.value), message(info.value)

    assert error(staged) == error(torch)


@pytest.mark.parametrize("name", ["Adam-amsgrad-decay-maximize", "RMSprop", "Rprop"])
def test_compiled_steps_match_eager(name):
    def run(compiled):
        z, w = _start(np.complex64)
        p, q = staged.tensor(z, requires_grad=True), staged.tensor(w, requires_grad=True)
        opt = getattr(staged.optim, name.split("-")[0])([p, q], **CASES[name])

        def step(a):
            opt.zero_grad()
            loss = ((p * a).real ** 2).sum() + (p.imag * q[:4]).sum() + (q**2).sum()
            loss.backward()
            opt.step()

        f = staged.compile(step) if compiled else step
        a = staged.tensor(_grad(z, 0))
        for _ in range(4):
            f(a)
        return [p, q, *opt.state_dict()["state"][0].values()]

    for a, b in zip(run(True), run(False)):
        assert_close(a, b, 1e-5, 1e-6)
