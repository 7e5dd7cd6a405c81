"""A compiled step that stores a tensor it made on a Module (llama2.c's ``self.last_loss =
F.cross_entropy(...)`` in ``forward``) sets the attribute to the new value after every
call, as eager code does, without tracing again (Note [tensor attributes] in
staged/tracing/capture.py); one that reads the previous call's tensor first traces each
call anew, each exact."""

from __future__ import annotations

import re

import numpy as np
import pytest

import staged
import staged.nn.functional as F
from staged import nn, optim
from staged.eager.tensor import Tensor


class _Llama(nn.Module):
    """llama2.c's ``Transformer`` in small: ``last_loss`` is only annotated, set by
    ``forward`` (to None without targets)."""

    last_loss: Tensor | None

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.dropout = nn.Dropout(0.25)

    def forward(self, x, targets=None):
        logits = self.fc(self.dropout(x))
        if targets is not None:
            self.last_loss = F.cross_entropy(logits, targets)
        else:
            self.last_loss = None
        return logits


def _data(n=8):
    x = staged.tensor(np.random.default_rng(0).standard_normal((n, 6)).astype(np.float32))
    return x, staged.tensor(np.arange(n) % 4)


def _train(compiled: bool, calls: int = 6, **options):
    """llama2.c's train.py step (AdamW): the loss read back from the model."""
    staged.manual_seed(0)
    model = _Llama()
    opt = optim.AdamW(model.parameters(), lr=0.05)

    def step(x, y):
        model(x, y)
        loss = model.last_loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    f = staged.compile(step, **options) if compiled else step
    x, y = _data()
    seen = []
    for _ in range(calls):
        loss = f(x, y)
        t = model.last_loss
        seen.append((t is loss, t.requires_grad, t.is_leaf, t.item()))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        model.last_loss.backward()  # the step's backward freed its graph, as eagerly
    return f, seen, [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize(
    "options", [{}, {"dynamic": True}, {"mode": "background"}], ids=["static", "dynamic", "bg"]
)
def test_llama2c_s_last_loss_is_set_by_every_call_and_traces_twice(options):
    """Before, the stored loss made every trace one-shot: 6 calls, 6 traces. Now the
    first (AdamW makes its state) and one more, entered with a tensor there; in background
    mode only that one (its first call runs untraced: Note [untraced first call])."""
    f, seen, params = _train(True, **options)
    _, seen0, params0 = _train(False)
    assert f.traces == (1 if options.get("mode") == "background" else 2)
    assert [s[:3] for s in seen] == [s[:3] for s in seen0] == [(True, True, False)] * 6
    np.testing.assert_allclose([s[3] for s in seen], [s[3] for s in seen0], rtol=1e-5)
    for p, q in zip(params, params0):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)


def _train_and_evaluate(compiled: bool):
    """A loop alternating a training step that returns the logits and an evaluation step
    that passes no targets (``last_loss = None``)."""
    staged.manual_seed(1)
    model = _Llama()
    opt = optim.SGD(model.parameters(), lr=0.1)

    def train(x, y):
        logits = model(x, y)
        model.last_loss.backward()
        opt.step()
        opt.zero_grad()
        return logits.detach()

    def evaluate(x):
        with staged.no_grad():
            return model(x)

    fs = [staged.compile(train), staged.compile(evaluate)] if compiled else [train, evaluate]
    x, y = _data()
    losses, logits = [], []
    for _ in range(4):
        fs[0](x, y)
        losses.append((model.last_loss.requires_grad, model.last_loss.item()))
        model.eval()
        logits.append(fs[1](x).numpy())
        model.train()
        assert model.last_loss is None
    return fs, losses, logits


def test_a_loss_left_on_the_model_and_set_to_none_by_evaluation_keeps_its_traces():
    fs, losses, logits = _train_and_evaluate(True)
    _, losses0, logits0 = _train_and_evaluate(False)
    # the training step entered with no attribute, then with None: one trace each
    assert [f.traces for f in fs] == [2, 1]
    assert fs[0].last_retrace_reason == "model.last_loss: <unbound> -> None"
    assert [r for r, _ in losses] == [r for r, _ in losses0] == [True] * 4
    np.testing.assert_allclose([v for _, v in losses], [v for _, v in losses0], rtol=1e-5)
    np.testing.assert_allclose(logits, logits0, rtol=1e-5, atol=1e-6)


def test_without_grad_the_attribute_is_a_plain_value():
    staged.manual_seed(2)
    model = _Llama().eval()
    f = staged.compile(lambda x, y: model(x, y).sum())
    x, y = _data()
    with staged.no_grad():
        for _ in range(3):
            f(x, y)
            t = model.last_loss
            assert not t.requires_grad and t.grad_fn is None
            np.testing.assert_allclose(t.item(), F.cross_entropy(model.fc(x), y).item(), rtol=1e-6)
    assert f.traces == 2  # entered without the attribute, then with a tensor


class _Ema(nn.Module):
    """Reads the tensor the previous call stored before replacing it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.ema = staged.zeros(())

    def forward(self, x, y):
        loss = F.cross_entropy(self.fc(x), y)
        self.ema = self.ema * 0.9 + loss.detach()
        return loss


def _ema(compiled: bool, **options):
    staged.manual_seed(3)
    m = _Ema()
    opt = optim.SGD(m.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = m(x, y)
        loss.backward()
        opt.step()
        return loss

    f = staged.compile(step, **options) if compiled else step
    x, y = _data()
    return f, [(f(x, y).item(), m.ema.item()) for _ in range(4)]


@pytest.mark.parametrize("options", [{}, {"dynamic": True}], ids=["static", "dynamic"])
def test_a_step_reading_the_previous_call_s_tensor_traces_at_every_call(options):
    """The graph reads the tensor the call enters with: never the first call's, baked in."""
    f, got = _ema(True, **options)
    _, want = _ema(False)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert f.traces == 4
    assert re.match(
        r"m\.ema: tensor#\d+ float32\[\] -> tensor#\d+ float32\[\]", f.last_retrace_reason
    )


def test_a_loss_kept_for_a_backward_outside_the_call_runs_eagerly():
    """``torch.compile(model)`` then ``model.last_loss.backward()``: the call that traced
    runs its graph's ops eagerly, giving the attribute that graph (Note [first eager call]),
    later calls the body, saying why, with eager's gradients (the graph's ops are not
    eager's fused kernels: float32 rounding)."""
    grads = []
    for compiled in (True, False):
        staged.manual_seed(4)
        model = _Llama()
        f = staged.compile(model) if compiled else model
        x, y = _data()
        if compiled:
            with pytest.warns(UserWarning, match="stores new tensors outside itself"):
                f(x, y)
        else:
            f(x, y)
        model.last_loss.backward()
        grads.append(model.fc.weight.grad.numpy().copy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-7)


class _Average(nn.Module):
    """Keeps an average of its outputs that requires grad, returns the loss to a backward
    outside the call."""

    def __init__(self, L):
        super().__init__()
        self.fc, self.ema = L.nn.Linear(3, 3), L.zeros(3)

    def forward(self, x):
        y = self.fc(x).sum(0)
        self.ema = 0.5 * self.ema + y
        return y.sum()


def test_an_attribute_read_and_set_by_a_call_that_runs_eagerly_starts_from_its_value():
    """The trace set ``self.ema`` to a tensor of no data, which the eager run then read
    (CaptureError at the first call): it starts from the value the call entered with,
    and every call equals torch's."""
    import torch

    staged.manual_seed(0)
    m = _Average(staged)
    t = _Average(torch)
    t.fc.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.fc.state_dict().items()})
    f = staged.compile(m)
    x = np.ones((2, 3), np.float32)
    with pytest.warns(UserWarning, match="stores new tensors outside itself"):
        loss = f(staged.tensor(x))
    for call in range(3):
        if call:
            loss = f(staged.tensor(x))
        want = t(torch.tensor(x))
        loss.backward()
        want.backward()
        np.testing.assert_allclose(m.ema.detach().numpy(), t.ema.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(m.fc.weight.grad.numpy(), t.fc.weight.grad.numpy(), rtol=1e-6)


def test_two_attributes_given_one_tensor_get_one_and_capture_changes_neither():
    """``self.a = self.b = t`` holds one tensor after each call, as eagerly; a trace that
    never runs (``staged.capture``) leaves the attribute as it was, not symbolic."""
    model = _Llama().eval()

    def step(x, y):
        model(x, y)
        model.best = model.last_loss
        return model.fc.weight.sum()

    x, y = _data()
    with staged.no_grad():
        staged.capture(step, x, y)
        assert not hasattr(model, "last_loss") and not hasattr(model, "best")
        f = staged.compile(step)
        for _ in range(2):
            f(x, y)
            assert model.best is model.last_loss
            np.testing.assert_allclose(
                model.best.item(), F.cross_entropy(model.fc(x), y).item(), rtol=1e-6
            )
