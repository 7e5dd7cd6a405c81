"""Compiled training steps against the same code run eagerly, call for call, when Python
state the step reads changes between calls (numbers in dicts, objects and Modules, hooks),
and saving a step whose trace went stale."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

import staged
import staged.nn.functional as F
from staged import nn, optim


def _training_step(m, opt, loss_fn=None):
    """One SGD-style step of ``m`` on ``loss_fn(x, y)`` (default: the MSE of ``m(x)``)."""

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(x, y) if loss_fn is not None else F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _calls(n=4):
    staged.manual_seed(100)
    return [(staged.randn(4, 3), staged.randn(4, 2)) for _ in range(n)]


def _run(build, change, compiled, n=4):
    """Losses and final weight of ``n`` calls of the step ``build()`` makes, ``change(ctx,
    i)`` called before call ``i``; eagerly or compiled."""
    staged.manual_seed(0)
    step, ctx, weight = build()
    f = staged.compile(step) if compiled else step
    losses = []
    for i, (x, y) in enumerate(_calls(n)):
        change(ctx, i)
        losses.append(f(x, y).item())
    return losses, weight().detach().numpy().copy(), f


def _same_as_eager(build, change, n=4):
    ours, w, f = _run(build, change, True, n)
    eager, w_eager, _ = _run(build, change, False, n)
    np.testing.assert_allclose(ours, eager, rtol=1e-5)
    np.testing.assert_allclose(w, w_eager, rtol=1e-5, atol=1e-6)
    return f


CFG = {"scale": 1.0}


NS = argparse.Namespace(scale=1.0)


def _scaled_step(where):
    """An SGD step whose loss is scaled by a number read from ``where``."""

    def build():
        m = nn.Linear(3, 2)
        opt = optim.SGD(m.parameters(), lr=0.1)
        m.temperature = 1.0

        def from_dict(x, y):
            return F.mse_loss(m(x), y) * CFG["scale"]

        def from_namespace(x, y):
            return F.mse_loss(m(x), y) * NS.scale

        def from_module(x, y):
            return F.mse_loss(m(x), y) / m.temperature

        loss_fn = {"dict": from_dict, "ns": from_namespace, "module": from_module}[where]

        step = _training_step(m, opt, loss_fn)

        return step, m, lambda: m.weight

    return build


@pytest.mark.parametrize(
    "where, reason",
    [
        ("dict", "CFG['scale']: 1.0 -> 4.0"),
        ("ns", "NS.scale: 1.0 -> 4.0"),
        ("module", "m.temperature: 1.0 -> 4.0"),
    ],
)
def test_a_number_in_a_dict_a_config_object_or_a_module_attribute_re_traces(where, reason):
    def change(m, i):
        if i == 0:
            CFG["scale"] = NS.scale = m.temperature = 1.0
        if i == 2:
            CFG["scale"] = NS.scale = m.temperature = 4.0

    f = _same_as_eager(_scaled_step(where), change, n=3)
    assert f.last_retrace_reason == reason


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.temperature = 1.0

    def forward(self, x):
        return self.fc(x) / self.temperature


class _Trainer:
    def __init__(self):
        self.net = _Net()
        self.opt = optim.SGD(self.net.parameters(), lr=0.1)
        self.steps = 0

    def step(self, x, y):
        self.opt.zero_grad()
        loss = F.mse_loss(self.net(x), y)
        loss.backward()
        self.opt.step()
        self.steps += 1  # a counter the body changes: set again after each call
        return loss


def test_an_attribute_of_a_compiled_method_s_self_and_its_modules_re_traces():
    def build():
        t = _Trainer()
        return t.step, t, lambda: t.net.fc.weight

    def change(t, i):
        if i >= 2:
            t.net.temperature = 2.0 + i

    f = _same_as_eager(build, change)
    assert f.last_retrace_reason == "self.net.temperature: 4.0 -> 5.0"
    t = _Trainer()  # the counter the body increments counts every call (Note [binding
    g = staged.compile(t.step)  # writes]), each a trace, until the calls run eagerly
    with pytest.warns(UserWarning, match="eagerly from now on, since it changes self.steps"):
        for n in (4, 4, 2, 4, 2, 4):
            g(staged.randn(n, 3), staged.randn(n, 2))
    assert t.steps == 6


def test_a_hook_registered_or_removed_on_a_parameter_between_calls_re_traces():
    def build():
        m = nn.Linear(3, 2)
        opt = optim.SGD(m.parameters(), lr=0.1)

        step = _training_step(m, opt)

        return step, {"m": m, "handles": []}, lambda: m.weight

    def change(ctx, i):
        if i == 2:
            w = ctx["m"].weight
            ctx["handles"].append(w.register_hook(lambda g: g * 10))
            ctx["handles"].append(w.register_post_accumulate_grad_hook(_negate_grad))
        if i == 4:
            for h in ctx["handles"]:
                h.remove()

    f = _same_as_eager(build, change, n=6)
    assert f.traces == 3  # the hook-free trace serves again once they are removed


def test_a_hook_on_an_argument_runs_as_eagerly():
    def run(compiled):
        w = nn.Parameter(staged.tensor([1.0, 2.0, 3.0]))

        def step(x):
            loss = (w * x * x).sum()
            loss.backward()
            return loss.detach()

        f = staged.compile(step) if compiled else step
        x = staged.tensor([1.0, -1.0, 2.0], requires_grad=True)
        f(x)
        x.register_hook(lambda g: g * 100)
        f(x)
        return x.grad.numpy(), w.grad.numpy()

    for ours, eager in zip(run(True), run(False)):
        np.testing.assert_allclose(ours, eager, rtol=1e-6)


def _adam_step():
    staged.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    opt = optim.Adam(m.parameters(), lr=0.01)

    step = _training_step(m, opt)

    return m, opt, staged.compile(step)


@pytest.mark.parametrize("change", ["weight_decay", "parameter"])
def test_saving_a_step_whose_trace_went_stale_raises_naming_why(tmp_path, change):
    m, opt, step = _adam_step()
    for x, y in _calls(3):
        step(x, y)
    if change == "weight_decay":  # the update's code path changes
        opt.param_groups[0]["weight_decay"] = 0.1
        why = r"Adam.param_groups\[0\]\['weight_decay'\]: 0 -> 0.1"
    else:  # the saved state would be the old parameter's
        m[2].weight = nn.Parameter(staged.ones(2, 4))
        opt.param_groups[0]["params"][2] = m[2].weight
        why = r"Linear parameters/buffers: .*"
    with pytest.raises(RuntimeError, match=rf"no longer matches .*\({why}\).*call the step once"):
        step.save(tmp_path / "s")
    x, y = _calls(1)[0]
    step(x, y)  # re-traces; then it saves
    step(x, y)
    step.save(tmp_path / "s")


# --- state that staged's own Modules, optimizers and ops read --------------------------------


def _dropout_p_changed(compiled):
    staged.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.0), nn.Linear(4, 2))
    f = staged.compile(lambda x: m(x).sum().detach()) if compiled else (lambda x: m(x).sum())
    x = staged.ones(2, 3)
    f(x)
    m[1].p = 1.0  # everything dropped: the output is the last bias, summed
    return f(x).item()


def test_dropout_p_changed_between_calls():
    assert _dropout_p_changed(True) == pytest.approx(_dropout_p_changed(False), rel=1e-6)


def _forward_hook_added(compiled):
    staged.manual_seed(0)
    m = nn.Linear(3, 2)
    f = staged.compile(lambda x: m(x).sum().detach()) if compiled else (lambda x: m(x).sum())
    x = staged.ones(2, 3)
    f(x)
    m.register_forward_hook(lambda mod, args, out: out * 3)
    return f(x).item()


def test_a_forward_hook_registered_between_calls():
    assert _forward_hook_added(True) == pytest.approx(_forward_hook_added(False), rel=1e-6)


def _param_group_added(compiled):
    staged.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    opt = optim.SGD(m[0].parameters(), lr=0.1)

    step = _training_step(m, opt)

    f = staged.compile(step) if compiled else step
    for i, (x, y) in enumerate(_calls(4)):
        if i == 2:
            opt.add_param_group({"params": list(m[1].parameters()), "lr": 0.05})
        f(x, y)
    return m[1].weight.detach().numpy()


def test_a_param_group_added_between_calls():
    np.testing.assert_allclose(_param_group_added(True), _param_group_added(False), rtol=1e-5)


def _write_through_data_view(compiled):
    b = nn.Parameter(staged.tensor([1.0, 2.0, 3.0]))

    def step(x):
        y = (b * x).sum().detach()
        b.data[1:].mul_(0.5)  # e.g. re-zeroing a padding row: p.data[pad].zero_()
        return y

    f = staged.compile(step) if compiled else step
    losses = [f(staged.ones(3)).item() for _ in range(3)]
    return losses, b.detach().numpy()


def test_a_write_through_a_view_of_data_inside_a_step():
    (ours, w), (eager, w_eager) = _write_through_data_view(True), _write_through_data_view(False)
    assert ours == eager
    np.testing.assert_array_equal(w, w_eager)


def test_one_hot_of_a_class_out_of_range_in_a_compiled_step_raises():
    f = staged.compile(lambda y: F.one_hot(y, 2).float().sum())
    f(staged.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        f(staged.tensor([0, 2])).item()
    with pytest.raises(RuntimeError, match="Class values must be non-negative"):
        f(staged.tensor([3, -1])).item()  # torch's first check: the negative value
    assert f(staged.tensor([1, 1])).item() == 2 and f.traces == 1


def _negate_grad(p):  # a post-accumulate hook returns None (torch refuses a value)
    p.grad.neg_()
