"""Values a compiled step changes through a global, a closure cell, a dict, an object's
attribute or a list's items (Note [binding writes] in tracing/guards.py): every call
leaves them as eager code would, and a counter that changes at every call ends up running
eagerly with a warning (Note [counters run eagerly] in runtime/compiled.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from staged.runtime.compiled import RETRACE_LIMIT


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def _style_transfer_loop(lib, compiled):
    """The tutorial's LBFGS loop: it ends when the closure's counter passes ``num_steps``."""
    lib.manual_seed(0)
    img = lib.rand(4, requires_grad=True)
    target = lib.linspace(0, 1, 4)
    # no early stop: a step evaluates the closure max_iter times, whatever float rounding
    opt = lib.optim.LBFGS([img], lr=0.1, max_iter=5, tolerance_grad=-1, tolerance_change=-1)
    run = [0]

    def closure():
        with lib.no_grad():
            img.clamp_(0, 1)
        opt.zero_grad()
        loss = ((img - target) ** 2).sum()
        loss.backward()
        run[0] += 1
        return loss

    step = staged.compile(closure) if compiled else closure
    for _ in range(10):  # the tutorial's ``while run[0] <= 12``, bounded: it never ended
        if run[0] > 12:
            break
        opt.step(step)
    return run[0], img.detach().numpy().copy()


def test_the_tutorials_lbfgs_loop_ends_where_eager_code_does():
    (n, img), (n0, img0) = (_quiet(_style_transfer_loop, staged, c) for c in (True, False))
    m, img1 = _style_transfer_loop(torch, False)
    assert n == n0 == m == 15
    np.testing.assert_allclose(img, img0, rtol=1e-6)
    np.testing.assert_allclose(img, img1, rtol=1e-5)


class _Trainer:
    """Gradient accumulation steered by a counter the step itself increments."""

    def __init__(self, lib):
        lib.manual_seed(0)
        self.m = lib.nn.Linear(3, 2)
        self.opt = lib.optim.SGD(self.m.parameters(), lr=0.1)
        self.calls = 0

    def step(self, x):
        self.m(x).pow(2).mean().backward()
        self.calls += 1
        if self.calls % 2 == 0:
            self.opt.step()
            self.opt.zero_grad()


def test_a_counter_that_steers_the_step_is_exact_and_then_runs_eagerly():
    t, t0 = _Trainer(staged), _Trainer(torch)
    f = staged.compile(t.step)
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    with pytest.warns(
        UserWarning,
        match=r"running _Trainer.step eagerly from now on, since it"
        r" changes self.calls at every call",
    ) as seen:
        for _ in range(8):
            f(staged.tensor(x))
            t0.step(torch.tensor(x))
    assert len([w for w in seen if "eagerly from now on" in str(w.message)]) == 1
    assert t.calls == t0.calls == 8
    np.testing.assert_allclose(t.m.weight.detach().numpy(), t0.m.weight.detach().numpy(), rtol=1e-5)
    assert f.traces == RETRACE_LIMIT  # a trace per value, then eager calls


STEP = 0


def test_a_global_and_a_cell_the_step_increments_count_every_call():
    global STEP
    STEP, cell = 0, {"n": 0}
    box = [0]

    def step(x):
        global STEP
        nonlocal_box = box
        STEP += 1
        cell["n"] += 2
        nonlocal_box[0] += 3
        return x * 2

    f = staged.compile(step)
    _quiet(lambda: [f(staged.ones(2)) for _ in range(6)])
    assert (STEP, cell["n"], box) == (6, 12, [18])


def test_a_flag_set_in_the_step_and_reset_outside_keeps_its_trace():
    """Not a counter: the call enters with the value the trace entered with."""
    state = {"mode": "eval"}

    def step(x):
        state["mode"] = "train"
        return x + 1

    f = staged.compile(step)
    for _ in range(6):
        assert state["mode"] == "eval"
        f(staged.ones(2))
        assert state["mode"] == "train"
        state["mode"] = "eval"
    assert f.traces == 1


def test_a_list_the_step_appends_to_grows_at_the_trace_only_and_warns():
    """Appending is a side effect of the trace (JAX's semantics; README, Staged mode): a
    trace count kept so stays one, and says so once."""
    calls = []

    def step(x):
        calls.append(1)
        return x * 2

    f = staged.compile(step)
    with pytest.warns(UserWarning, match=r"changed calls \(\[\] -> \[1\]\) while it was traced"):
        for _ in range(3):
            f(staged.ones(2))
    assert calls == [1] and f.traces == 1


class _Counted(staged.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.steps = staged.nn.Linear(3, 3), 0

    def forward(self, x):
        self.steps += 1
        y = self.lin(x)
        return y + 1 if y.sum() > 0 else y  # a branch on data: the trace fails here


def test_a_trace_that_fails_changes_no_python_value():
    """A failed trace puts back what its body changed, as it puts back tensors: with
    ``fallback="eager"`` each call then changes them once, as eager code does."""
    calls, counter = [], {"n": 0}
    seen = []

    def step(x):
        calls.append(1)
        counter["n"] += 1
        y = x * 2
        return y + 1 if y.sum() > 0 else y

    m = _Counted()
    m.lin.register_forward_hook(lambda mod, args, out: seen.append(1))
    with pytest.raises(staged.tracing.symbolic.CaptureError):
        staged.compile(step)(staged.ones(3))
    with pytest.raises(staged.tracing.symbolic.CaptureError):
        staged.compile(m)(staged.ones(3))
    assert (calls, counter, m.steps, seen) == ([], {"n": 0}, 0, [])
    f, g = staged.compile(step, fallback="eager"), staged.compile(m, fallback="eager")
    for _ in range(3):
        _quiet(f, staged.ones(3))
        _quiet(g, staged.ones(3))
    assert (len(calls), counter["n"], m.steps, len(seen)) == (3, 3, 3, 3)
