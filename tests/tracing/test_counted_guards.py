"""Note [children stamp] in staged/tracing/guards.py: a Module's ``_modules``,
``_parameters`` and ``_buffers`` count their changes, so a trace's children and
parameters/buffers guards hold in one comparison while nothing changed. After each change
(through the Module's API, its dicts, or its ``__dict__`` behind ``__setattr__``) the
check says what checking each guard in order says, and a compiled step re-traces."""

from __future__ import annotations

import collections
import copy
import pickle
import types

import numpy as np
import pytest
import torch

import staged
from staged import nn
from staged.nn.module import Children, Registered
from staged.tracing.guards import Guards


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.act = nn.Tanh()
        self.scale = 0.5

    def forward(self, x):
        return self.act(self.fc(x)) * self.scale


def _model():
    return nn.Sequential(nn.Sequential(nn.Linear(3, 3), nn.ReLU()), Block())


def _in_order(guards):
    return next((why for g in guards if (why := g.failure()) is not None), None)


def _spares():
    """What the changes put in, made before the counts are stamped: a Module made counts
    its children and parameters, and the changes behind ``__setattr__`` must count none."""
    return types.SimpleNamespace(
        other=nn.Sequential(nn.Linear(3, 3), nn.Sigmoid()),
        linear=nn.Linear(3, 3),
        relu=nn.ReLU(),
        param=nn.Parameter(staged.zeros(3)),
    )


def _bypass(obj, name, value):
    vars(obj)[name] = value  # behind Module.__setattr__


CHANGES = {
    "none": lambda m, s: None,
    "a Module built elsewhere": lambda m, s: nn.Sequential(nn.ReLU()),
    "a child set back": lambda m, s: m.__setitem__(0, m[0]),
    "child replaced": lambda m, s: m[0].__setitem__(0, s.linear),
    "child replaced by attribute": lambda m, s: setattr(m[1], "fc", s.linear),
    "child added": lambda m, s: setattr(m[1], "extra", s.relu),
    "child deleted": lambda m, s: delattr(m[1], "act"),
    "child set to None": lambda m, s: setattr(m[1], "act", None),
    "child put in _modules": lambda m, s: m._modules.__setitem__("0", s.other),
    "_modules popped": lambda m, s: m[0]._modules.pop("1"),
    "_modules cleared": lambda m, s: m[0]._modules.clear(),
    "_modules updated": lambda m, s: m[0]._modules.update({"1": s.relu}),
    "child moved": lambda m, s: m[1]._modules.move_to_end("fc"),
    "child shadowed in __dict__": lambda m, s: _bypass(m, "0", s.other),
    "_modules replaced": lambda m, s: setattr(m[0], "_modules", {"0": s.linear}),
    "_modules replaced in __dict__": lambda m, s: _bypass(
        m[0], "_modules", collections.OrderedDict(a=s.linear)
    ),
    "_modules equal, in __dict__": lambda m, s: _bypass(
        m[0], "_modules", collections.OrderedDict(m[0]._modules)
    ),
    "__dict__ replaced": lambda m, s: object.__setattr__(
        m[1], "__dict__", {**vars(m[1]), "_modules": collections.OrderedDict(fc=s.relu)}
    ),
    "parameter replaced": lambda m, s: setattr(m[1].fc, "bias", s.param),
    "parameter put in _parameters": lambda m, s: m[0][0]._parameters.__setitem__("bias", s.param),
    "parameter deleted": lambda m, s: m[0][0]._parameters.pop("bias"),
    "buffer registered": lambda m, s: m[1].fc.register_buffer("b", None),
    "_parameters replaced in __dict__": lambda m, s: _bypass(
        m[1].fc, "_parameters", collections.OrderedDict(weight=m[1].fc.weight)
    ),
    "_parameters equal, in __dict__": lambda m, s: _bypass(
        m[1].fc, "_parameters", collections.OrderedDict(m[1].fc._parameters)
    ),
    "attribute set in __dict__": lambda m, s: _bypass(m[1], "scale", 2.0),
}
SAME = {
    "none",
    "a Module built elsewhere",
    "a child set back",
    "_modules equal, in __dict__",
    "_parameters equal, in __dict__",
}


def _check(model):
    captured = staged.capture(lambda x: model(x).sum(), staged.ones(2, 3))
    guards = captured.guards
    check = Guards(guards)
    for _ in range(2):  # the first in full, the second by the counts
        assert check.failure() is None
    return guards, check


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_counted_guards_say_what_the_guards_in_order_say(change):
    model, spares = _model(), _spares()
    guards, check = _check(model)
    CHANGES[change](model, spares)
    got = check.failure()
    assert got == _in_order(guards)
    assert (got is None) == (change in SAME)
    assert check.failure() == got  # and again: a failure stamps nothing


def test_a_change_set_back_holds_again():
    model = _model()
    guards, check = _check(model)
    old = model[1].fc
    model[1].fc = nn.Linear(3, 3)
    assert check.failure().startswith("model.1 children: ")
    model[1].fc = old
    assert check.failure() is None and check.failure() is None


def test_the_model_rebound_is_seen():
    model = _model()
    captured = staged.capture(lambda x: model(x).sum(), staged.ones(2, 3))
    check = Guards(captured.guards)
    check.failure(), check.failure()
    model = nn.Sequential(*model)  # noqa: F841 (the closure's cell now holds another)
    assert check.failure() == _in_order(captured.guards) is not None


def _run(lib, model, changes):
    step = staged.compile(lambda x: model(x).detach()) if lib is staged else model
    x = lib.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    out = []
    for change in changes:
        change(lib, model)
        out.append(step(x).numpy().copy() if lib is staged else step(x).detach().numpy())
    return out, step


def _same_weights(lib, m, seed):
    w = np.random.default_rng(seed).standard_normal((3, 3)).astype(np.float32)
    with lib.no_grad():
        m.weight.copy_(lib.tensor(w))
        m.bias.zero_()
    return m


CALLS = [
    lambda lib, m: None,
    lambda lib, m: None,
    lambda lib, m: m[0]._modules.__setitem__("0", _same_weights(lib, lib.nn.Linear(3, 3), 1)),
    lambda lib, m: None,
    lambda lib, m: vars(m[0]).__setitem__("_modules", {"0": lib.nn.Tanh(), "1": lib.nn.ReLU()}),
    lambda lib, m: None,
]


def test_a_compiled_step_re_traces_on_a_counted_change_and_one_behind_setattr_as_torch():
    def model(lib):
        return lib.nn.Sequential(
            lib.nn.Sequential(_same_weights(lib, lib.nn.Linear(3, 3), 0), lib.nn.ReLU())
        )

    got, step = _run(staged, model(staged), CALLS)
    want, _ = _run(torch, model(torch), CALLS)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    assert step.traces == 3


@pytest.mark.parametrize("copy_of", [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))])
def test_a_copied_or_unpickled_model_counts_its_changes_and_pickles_plain_dicts(copy_of):
    model = copy_of(_model())
    assert b"Counted" not in pickle.dumps(model)  # an OrderedDict, as torch's modules hold
    assert all(
        type(m._modules) is Children and type(m._parameters) is type(m._buffers) is Registered
        for m in model.modules()
    )
    guards, check = _check(model)
    fc, tanh = model[1].fc, model[1].act
    model[1]._modules["act"] = nn.ReLU()
    assert (
        check.failure()
        == _in_order(guards)
        == (
            f"model.1 children: fc=Linear at {id(fc):#x}, act=Tanh at {id(tanh):#x} -> "
            f"fc=Linear at {id(fc):#x}, act=ReLU at {id(model[1].act):#x}"
        )
    )
