"""A trace, capture or compiled call that fails leaves parameters, ``.grad`` and optimizer
state exactly as before it, and usable (Note [state] in staged/tracing/capture.py)."""

from __future__ import annotations

import contextlib
import weakref

import numpy as np
import pytest
import torch

import staged
import staged.nn.functional as F
import staged.runtime.compiled as compiled
from models.common import classification_step
from staged import nn, optim
from staged.tracing.symbolic import CaptureError
from staged.lower.mlir import LoweringError
from staged.runtime.compiler import CompileError
from staged.runtime.background import Interpreter
from staged.runtime.device import DeviceValue, Module

OPTIMIZERS = {  # dampening tells a momentum buffer cloned from the first grad from zeros
    "sgd-momentum": (
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5),
    ),
    "adam": (lambda ps: optim.Adam(ps, lr=0.1), lambda ps: torch.optim.Adam(ps, lr=0.1)),
}


def _setup(name):
    model = nn.Linear(4, 3)
    ref = torch.nn.Linear(4, 3)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(model.weight.detach().numpy()))
        ref.bias.copy_(torch.tensor(model.bias.detach().numpy()))
    make, make_ref = OPTIMIZERS[name]
    opt, ref_opt = make(model.parameters()), make_ref(ref.parameters())

    step = classification_step(model, opt, F.mse_loss)

    def ref_step(x, y):
        ref_opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ref(x), y)
        loss.backward()
        ref_opt.step()
        return loss

    return model, opt, step, ref, ref_opt, ref_step


def _snapshot(model, opt):
    """Everything a failed call must leave as it was: objects and values."""
    values = [p.detach().numpy().copy() for p in model.parameters()]  # brings data home
    # the payloads held weakly: an array held elsewhere gets the step's writes copied in
    # (Note [aliased memory] in staged/eager/aliases.py), a write no failure could undo
    return (
        [
            (
                p,
                weakref.ref(p._payload),
                p.grad,
                None if p.grad is None else p.grad.numpy().copy(),
                v,
            )
            for p, v in zip(model.parameters(), values)
        ],
        {
            p: {
                k: (v, v.numpy().copy() if isinstance(v, staged.Tensor) else v)
                for k, v in s.items()
            }
            for p, s in opt.state.items()
        },
    )


def _assert_intact(before, model, opt):
    params, state = before
    for (p, payload, grad, grad_value, value), q in zip(params, model.parameters()):
        assert q is p and p.grad is grad
        # the same payload, or on llvm-cpu (host memory) the device copy a call made of a
        # host array that no other object saw (Note [state uploads] in runtime/compiled.py)
        held = payload()
        assert p._payload is held or (
            held is None and isinstance(p._payload, DeviceValue) and p._payload.device.host_memory
        )
        np.testing.assert_array_equal(p.detach().numpy(), value)
        if grad is not None:
            np.testing.assert_array_equal(grad.numpy(), grad_value)
    assert list(opt.state) == list(state)
    for p, s in state.items():
        assert list(opt.state[p]) == list(s)
        for k, (v, value) in s.items():
            assert opt.state[p][k] is v
            np.testing.assert_array_equal(
                np.asarray(v.numpy() if isinstance(v, staged.Tensor) else v), value
            )
    repr(opt.state)  # printable: no symbolic tensor left in it


class Injected(RuntimeError):
    pass


def _raiser(error):
    def fail(*args, **kwargs):
        raise error("injected failure")

    return fail


def _after_step(step):
    def bad(x, y):
        step(x, y)
        raise Injected("injected failure after opt.step()")

    return bad


# (what fails, patch target or None, error the call raises)
FAILURES = [
    ("body", None, Injected),
    ("lowering", "to_mlir", LoweringError),
    ("iree-compile", "compile_mlir", CompileError),
    ("invoke", "invoke", Injected),
]


def _inject(monkeypatch, where, error, runner):
    if where is not None:
        monkeypatch.setattr(runner if where == "invoke" else compiled, where, _raiser(error))


def _fail_each_way(monkeypatch, step, x, y, model, opt, one_shot=False):
    """``one_shot``: the call creates the optimizer's state, so its trace runs on the
    interpreter, neither lowered nor compiled (Note [one-shot traces])."""
    for what, where, error in FAILURES:
        if one_shot and where in ("to_mlir", "compile_mlir"):
            continue
        before = _snapshot(model, opt)
        with monkeypatch.context() as m:
            _inject(m, where, error, Interpreter if one_shot else Module)
            fn = _after_step(step) if what == "body" else step
            with pytest.raises(error, match="injected failure"):
                staged.compile(fn)(x, y)
        _assert_intact(before, model, opt)
        before = _snapshot(model, opt)
        with pytest.raises(Injected):
            staged.capture(_after_step(step), x, y)
        _assert_intact(before, model, opt)


def _fail_on_the_device(cstep, x, y, model, opt, read_first):
    """Note [failed steps]: a step that fails on the device, after its call returned."""
    before = _snapshot(model, opt)
    loss = cstep(x, y)
    cstep._last.module._timeline[0].fail("injected device failure")
    if read_first:
        with pytest.raises(RuntimeError, match="injected device failure"):
            loss.item()
        _assert_intact(before, model, opt)
        before = _snapshot(model, opt)  # printing opt.state copied its keys' data home
    with pytest.raises(RuntimeError, match="injected device failure"):
        cstep(x, y)
    _assert_intact(before, model, opt)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_failed_first_and_later_calls_leave_state_intact_and_training_matches_torch(
    name, monkeypatch
):
    model, opt, step, ref, ref_opt, ref_step = _setup(name)
    rng = np.random.default_rng(0)
    data = [
        (
            rng.standard_normal((8, 4)).astype(np.float32),
            rng.standard_normal((8, 3)).astype(np.float32),
        )
        for _ in range(4)
    ]
    x, y = staged.tensor(data[0][0]), staged.tensor(data[0][1])

    _fail_each_way(monkeypatch, step, x, y, model, opt, one_shot=True)  # no state yet
    before = _snapshot(model, opt)
    traced = staged.capture(step, x, y)  # a capture that succeeds changes nothing either
    assert traced.escaped
    _assert_intact(before, model, opt)
    assert opt.state == {}

    step(x, y)  # eager training works and matches torch
    ref_step(torch.tensor(data[0][0]), torch.tensor(data[0][1]))
    _fail_each_way(monkeypatch, step, x, y, model, opt)  # with state and grads
    cstep = staged.compile(step)  # so does a fresh compiled step
    for a, b in data[1:]:
        cstep(staged.tensor(a), staged.tensor(b))
        ref_step(torch.tensor(a), torch.tensor(b))
    for read_first in (True, False):  # seen failing where read, or at the next call
        _fail_on_the_device(cstep, x, y, model, opt, read_first)
    for a, b in data[1:]:  # and training goes on from the state before the failed calls
        cstep(staged.tensor(a), staged.tensor(b))
        ref_step(torch.tensor(a), torch.tensor(b))
    # Adam's bias correction 1 - 0.999**t is ~1e-3 with float32 rounding (6e-8) in it:
    # ~6e-5 relative error in each update of size ~lr = 0.1, over 4 steps
    atol = 3e-5
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=atol)
    for p, q in zip(model.parameters(), ref.parameters()):
        ours, theirs = opt.state[p], ref_opt.state[q]
        assert sorted(ours) == sorted(theirs)
        for k, v in theirs.items():
            np.testing.assert_allclose(ours[k].numpy(), v.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_fallback_to_eager_after_a_trace_that_failed_past_opt_step_matches_torch(name):
    """``return float(loss)`` after ``opt.step()`` cannot be captured: the eager fallback
    then steps from the state as it was, not from the failed trace's symbolic buffers."""
    model, opt, step, ref, ref_opt, ref_step = _setup(name)
    cstep = staged.compile(lambda x, y: float(step(x, y)), fallback="eager")
    rng = np.random.default_rng(1)
    for i in range(3):
        a, b = (rng.standard_normal(s).astype(np.float32) for s in ((8, 4), (8, 3)))
        with (
            pytest.warns(UserWarning, match="running .* eagerly")
            if i == 0
            else contextlib.nullcontext()
        ):  # the first call finds it out and says so
            loss = cstep(staged.tensor(a), staged.tensor(b))
        assert loss == pytest.approx(ref_step(torch.tensor(a), torch.tensor(b)).item(), rel=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(
            p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=3e-5
        )  # Adam: see above


def test_a_tensor_a_failed_trace_stored_elsewhere_says_it_has_no_data():
    store, kept = {}, []

    def f(x):
        store["t"] = x * 2  # a dict's item: put back (Note [tensor stores])
        kept.append(x * 3)  # an escape outside any optimizer's state
        raise Injected("injected failure")

    with pytest.raises(Injected):
        staged.capture(f, staged.ones(3))
    assert store == {}
    with pytest.raises(
        CaptureError,
        match=r"test_failures\.py:\d+: this tensor was made "
        "by a staged trace and stored outside it .* it has no data",
    ):
        kept[0] + 1


class _Ema(nn.Module):
    """A buffer re-assigned (not updated in place) by each call."""

    def __init__(self):
        super().__init__()
        self.register_buffer("ema", staged.zeros(3))

    def forward(self, x):
        self.ema = self.ema * 0.5 + x
        return self.ema.sum()


@pytest.mark.filterwarnings("ignore:staged.compile.*stored new tensors")  # it re-traces, warned
def test_a_failed_call_puts_a_reassigned_buffer_back(monkeypatch):
    m = _Ema()
    old = m.ema
    x = staged.tensor([1.0, 2.0, 4.0])
    with monkeypatch.context() as patched:  # a one-shot trace: the interpreter runs it
        patched.setattr(Interpreter, "invoke", _raiser(Injected))
        with pytest.raises(Injected, match="injected failure"):
            staged.compile(m)(x)
    assert m.ema is old and m._buffers["ema"] is old
    np.testing.assert_array_equal(m.ema.numpy(), [0.0, 0.0, 0.0])
    step = staged.compile(m)
    step(x)
    step(x)  # ema = 0.5 * x + x
    assert m(x).item() == 1.75 * 7  # eager, from the compiled state


@pytest.mark.parametrize(
    "where, error, why",
    [
        ("compile_mlir", CompileError, "IREE could not compile it"),
        ("to_mlir", LoweringError, "it cannot be lowered"),
    ],
)
def test_a_failed_compile_with_fallback_eager_runs_the_step_eagerly(
    where, error, why, monkeypatch, capsys
):
    """Note [compiler process]: a crash of IREE is a CompileError; with ``fallback="eager"``
    it, and a LoweringError, run the step eagerly, with eager's losses and a warning."""
    model, opt, step, ref, ref_opt, ref_step = _setup("adam")
    rng = np.random.default_rng(3)
    x, y = (rng.standard_normal(s).astype(np.float32) for s in ((8, 4), (8, 3)))
    monkeypatch.setattr(compiled, where, _raiser(error))
    cstep = staged.compile(step, fallback="eager")
    with pytest.warns(UserWarning, match=why):
        got = [cstep(staged.tensor(x), staged.tensor(y)).item() for _ in range(2)]
    want = [ref_step(torch.tensor(x), torch.tensor(y)).item() for _ in range(2)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    cstep.explain()
    assert "injected failure" in capsys.readouterr().out
