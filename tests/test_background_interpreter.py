"""Background mode's ``Interpreter`` (Note [background compiles]): what it runs of a
captured step and what the first call does besides, checked against the graph interpreter
(``staged.tracing.interpret``, which runs every op of the graph), eager staged and torch.
A gate holds every background compile, so the calls checked here run on the interpreter."""

from __future__ import annotations


import numpy as np
import pytest
import torch

import staged
import staged.nn.functional as F
from staged import nn, optim
from staged.runtime.background import Interpreter
from staged.runtime.device import Device
from staged.tracing.interpret import interpret

WAIT_S = 300  # a hang guard, not a timing


def _sgd_step(lr=0.1):
    staged.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = optim.SGD(model.parameters(), lr=lr)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step, model, opt


def _data(targets):
    x = np.random.default_rng(1).standard_normal((len(targets), 6)).astype(np.float32)
    return staged.tensor(x), staged.tensor(np.array(targets))


def _inputs(c, x, y):
    """The graph's inputs for a call on (x, y): the arguments, then the state."""
    return [x.numpy(), y.numpy()] + [np.asarray(w.tensor._payload) for w in c.state]


def test_interpreter_returns_what_the_graph_does_without_its_check_selects():
    """The interpreter returns each output's value before the checks' selects and runs
    no op that only they need; on good targets that is what the whole graph returns."""
    step, _, _ = _sgd_step()
    x, y = _data([0, 2, 1, 1])
    c = staged.capture(step, x, y)
    assert c.checks and c.unchecked  # cross_entropy's target check selects the new state
    it = Interpreter(c.graph, c.checks, c.check_output, c.unchecked)
    assert len(it.steps) < len(c.graph.ops)
    got = it.invoke("main", _inputs(c, x, y))
    want = interpret(c.graph, *_inputs(c, x, y))
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b, err_msg=c.graph.outputs[k].name)


def test_interpreter_raises_a_bad_target_as_torch_does():
    step, _, _ = _sgd_step()
    x, y = _data([0, 2, 1, 1])
    c = staged.capture(step, x, y)
    it = Interpreter(c.graph, c.checks, c.check_output, c.unchecked)
    bad = _inputs(c, x, y)
    bad[1] = np.array([0, 7, 1, 1])
    with pytest.raises(IndexError) as theirs:
        torch.nn.functional.cross_entropy(torch.zeros(4, 3), torch.tensor([0, 7, 1, 1]))
    with pytest.raises(IndexError) as ours:
        it.invoke("main", bad)
    assert str(ours.value).endswith(str(theirs.value))


def test_first_call_uploads_nothing(gate, monkeypatch):
    """The first call runs on NumPy: its state and results stay on the host (an upload
    would only be read back by the interpreter)."""
    step, model, _ = _sgd_step()
    bg = staged.compile(step, mode="background")
    uploads = []
    real = Device.upload
    monkeypatch.setattr(Device, "upload", lambda *a, **kw: uploads.append(1) or real(*a, **kw))
    x, y = _data([0, 2, 1, 1])
    bg(x, y)
    bg(x, y)
    assert bg.calls.runs[-1][0].startswith("eager") and not uploads
    assert all(type(p._payload) is np.ndarray for p in model.parameters())


def test_learning_rate_changes_reach_eager_then_compiled_calls(gate):
    """The learning rate is a live input: set on the host for the interpreter's calls and
    uploaded for the compiled ones, each call using the value set before it."""
    lrs = [0.1, 0.05, 0.2, 0.01, 0.3]
    x, y = _data([0, 2, 1, 1, 0])
    losses = {}
    params = {}
    for mode in ("eager", "background"):
        step, model, opt = _sgd_step()
        run = step if mode == "eager" else staged.compile(step, mode="background")
        got = []
        for k, lr in enumerate(lrs):
            opt.param_groups[0]["lr"] = lr
            if mode == "background" and k == 3:
                gate.set()
                assert run._last.background.done.wait(WAIT_S)
            got.append(float(run(x, y)))
        losses[mode] = got
        params[mode] = [p.detach().numpy().copy() for p in model.parameters()]
    runs = [r[0] for r in run.calls.runs]
    assert runs[0].startswith("eager") and runs[-1] == "compiled"
    np.testing.assert_allclose(losses["background"], losses["eager"], rtol=1e-5, atol=1e-6)
    for a, b in zip(params["background"], params["eager"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
