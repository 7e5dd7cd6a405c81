"""What made compiled steps re-trace at every call: a step that switches ``training`` in
its body and back (Note [attribute writes] in staged/tracing/guards.py) is traced once,
guarded on the flag it enters with, and its results are eager's. Also what ``explain()``
and the README say of what a step sets and saves."""

import re
from pathlib import Path

import numpy as np
import staged
import staged.runtime
from staged import nn, optim


class _Net(nn.Module):
    """Nested: ``model.eval()`` reaches the BatchNorm and Dropout inside ``body``,
    ``forward`` reads ``self.training`` in the user's own code, and ``probe`` is called
    only in validation."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5))
        self.head = nn.Linear(8, 1)
        self.probe = nn.Sequential(nn.Dropout(0.5), nn.Linear(8, 2))  # validation only

    def forward(self, x):
        h = self.body(x)
        return self.head(h * 2.0 if self.training else h)


def _setup(seed: int = 0):
    staged.manual_seed(seed)
    model = _Net()
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, opt, staged.randn(8, 4), staged.randn(8, 1)


def _snapshot(model) -> list:
    return [v.detach().numpy().copy() for v in model.state_dict().values()]


def _check(run, calls: int = 5):
    """The compiled step of ``run(compiled, calls)`` (the step, and per call its results,
    the training flags and the model's state), checked against eager's, call by call."""
    f, compiled = run(True, calls)
    _, eager = run(False, calls)
    for got, want in zip(compiled, eager, strict=True):
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    return f


def _flags(model) -> list:
    return [m.training for m in model.modules()]


def _validating(compiled: bool, calls: int, back: bool = True):
    """A step that validates first, under ``eval()`` and no_grad, then trains; with
    ``back`` it calls ``train()`` itself, else the loop does between calls."""
    model, opt, xv, yv = _setup()

    def step(x, y):
        model.eval()
        with staged.no_grad():
            val = ((model(xv) - yv) ** 2).mean()
        if back:
            model.train()
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss, val

    step(staged.randn(8, 4), staged.randn(8, 1))  # the grads and momentum exist: no one-shot
    model.train()
    f = staged.compile(step) if compiled else step
    out = []
    for i in range(calls):
        x, y = staged.randn(8, 4), staged.randn(8, 1)
        loss, val = f(x, y)
        out.append([loss.item(), val.item(), _flags(model), *_snapshot(model)])
        if not back and i % 2:
            model.train()
    return f, out


def test_eval_then_train_in_the_body_traces_once():
    """Traced on every call before: ``_Net.training: False -> True`` (the flag the module
    saw mid-body guarded as if the call had entered with it)."""
    f = _check(_validating)
    assert f.traces == 1, f.last_retrace_reason


def test_eval_left_set_by_the_body_traces_once_per_entry_flag():
    """The body's ``eval()`` is not undone: replayed after each call; the loop's
    ``train()`` every other call makes calls enter in both modes, one trace each."""
    f = _check(lambda compiled, calls: _validating(compiled, calls, back=False), calls=6)
    assert f.traces == 2
    assert f.last_retrace_reason == "model.body.0.training: True -> False"


def _train_then_validate(compiled: bool, calls: int):
    """The order of a loop that validates every step: train, evaluate, switch back."""
    model, opt, xv, yv = _setup(1)

    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        model.eval()
        model.probe[0].p = 0.25  # a layer's attribute changed and put back too
        with staged.no_grad():
            val = model.probe(model.body(xv))
        model.probe[0].p = 0.5
        model.train()
        return loss, val

    step(staged.randn(8, 4), staged.randn(8, 1))
    f = staged.compile(step) if compiled else step
    out = []
    for _ in range(calls):
        loss, val = f(staged.randn(8, 4), staged.randn(8, 1))
        out.append([loss.item(), val.numpy().copy(), _flags(model), *_snapshot(model)])
    return f, out


def test_train_then_validate_traces_once():
    """Traced on every call before: ``Sequential.training: False -> True`` (``probe``,
    first called in eval mode), then ``Dropout attributes/hooks: ... p=0.25 -> ... p=0.5``."""
    f = _check(_train_then_validate)
    assert f.traces == 1, f.last_retrace_reason


def test_a_call_entering_in_eval_mode_still_re_traces():
    """Guarded on the flag at entry: entering in eval mode is another trace, naming it."""
    model, opt, xv, yv = _setup()

    def step(x):
        model.eval()
        with staged.no_grad():
            val = model(x).sum()
        model.train()
        return val

    f = staged.compile(step)
    x = staged.randn(8, 4)
    f(x)
    f(x)
    model.eval()
    f(x)
    assert (f.traces, f.last_retrace_reason) == (2, "model.body.0.training: True -> False")
    assert all(_flags(model))  # as the body left them


class _LastLoss(nn.Module):
    """llama2.c's ``Transformer``: ``forward`` keeps the loss as ``self.last_loss``."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        logits = self.fc(x)
        self.last_loss = nn.functional.cross_entropy(logits, y)
        return logits


def test_explain_lists_the_module_attributes_the_step_sets():
    model = _LastLoss()
    opt = optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        model(x, y)
        model.last_loss.backward()
        opt.step()
        opt.zero_grad()

    f = staged.compile(step)
    x, y = staged.randn(5, 4), staged.tensor([0, 1, 2, 0, 1])
    for _ in range(3):
        f(x, y)
    assert [o.name for o in f.graphs()[-1].outputs if o.kind == "attr"] == ["model.last_loss"]
    lines = f.explanation().splitlines()
    assert "module attributes set (1): model.last_loss" in lines
    plain = staged.compile(lambda x: model.fc(x).sum())
    with staged.no_grad():
        plain(x)
    assert "module attributes set" not in plain.explanation()


def _saved_hyper_parameters(tmp_path, opt_cls, **hyper) -> dict:
    """The hyper-parameters in the state of a saved step (a compiled step's ``save``)."""
    model = nn.Linear(3, 1)
    opt = opt_cls(model.parameters(), **hyper)

    def step(x):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    f = staged.compile(step)
    x = staged.randn(4, 3)
    f(x)
    f(x)
    f.save(tmp_path / opt_cls.__name__)
    state = staged.runtime.load(tmp_path / opt_cls.__name__).state_dict()
    return {k: float(v) for k, v in state.items() if ".param_groups[" in k}


def test_the_readme_names_the_saved_hyper_parameters_as_saves_do(tmp_path):
    """README named SGD's live lr ``SGD.param_groups[0].lr``; saves name it ``-lr``, as it
    holds the negated lr the update multiplies by (``h.number("-lr")`` in optim/sgd.py)."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    start = readme.index("hyper-parameters are state too")
    named = re.findall(r"`(\w+\.param_groups\[0\]\.[^`]+)`", readme[start : start + 400])
    saved = {
        **_saved_hyper_parameters(tmp_path, optim.SGD, lr=0.1, momentum=0.9),
        **_saved_hyper_parameters(tmp_path, optim.Adam, lr=0.1),
    }
    assert named and set(named) <= set(saved), (named, sorted(saved))
    assert saved["SGD.param_groups[0].-lr"] == np.float32(-0.1)
    assert saved["Adam.param_groups[0].lr"] == np.float32(0.1)


def test_positional_arguments_are_named_by_the_parameters_they_bind_to():
    """A retrace reason names each argument by its parameter: ``*args`` leaves as
    ``args.<i>``, never after the keyword-only parameters behind it."""
    lin = nn.Linear(3, 2)

    def step(*batch, model=lin, scale=2.0):
        return model(batch[0]).sum() * scale + batch[1].sum()

    def pair(x, *rest, model=lin):
        return model(x).sum() + sum(r.sum() for r in rest)

    f, g = staged.compile(step, dynamic=False), staged.compile(pair, dynamic=False)
    f(staged.ones(4, 3), staged.ones(2))
    f(staged.ones(4, 3), staged.ones(5))
    assert f.last_retrace_reason == "batch.1: shape (2,) -> (5,)"
    g(staged.ones(4, 3), staged.ones(2), staged.ones(1))
    g(staged.ones(4, 3), staged.ones(2), staged.ones(6))
    assert g.last_retrace_reason == "rest.1: shape (1,) -> (6,)"
