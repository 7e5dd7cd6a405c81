"""Random changes between the calls of a compiled training step, against the same step run
eagerly, call for call: what users change while a loop runs (the lr, momentum or weight
decay by hand, ``maximize``, train/eval, a parameter frozen or unfrozen, edited in place or
replaced through ``.data``, a Dropout's p, BatchNorm's momentum, an activation swapped, a
bias set to None, a tensor hook or forward hook added or removed, a closure's flags (the
loss scale, clipping, ``zero_grad(set_to_none=...)``), the batch size, the optimizer state
cleared). Each change is made to both copies; the compiled step must re-trace where its
trace no longer holds (its guards) and read what it reads at every call. The losses, and
then every entry of the state dict and every optimizer state tensor, must agree.

CI runs ``CI_SEEDS`` fixed seeds; ``STAGED_FUZZ_EXAMPLES=N`` runs N seeds instead. A failure
names its seed and the changes made before each call."""

from __future__ import annotations

import copy
import os
import random

import numpy as np
import pytest

import staged
import staged.nn.functional as F
from staged import nn, optim

CI_SEEDS = 2
SEEDS = range(int(os.environ.get("STAGED_FUZZ_EXAMPLES", "0")) or CI_SEEDS)
CALLS = 6


def _model(rng):
    d_in, width = rng.choice([3, 5]), rng.choice([4, 8])
    normalized = rng.random() < 0.5
    # no bias before BatchNorm, which takes it out: its gradient would be rounding noise,
    # which RMSprop and Adam scale up differently in the two runs
    layers = [nn.Linear(d_in, width, bias=not normalized)]
    if normalized:
        layers += [nn.ReLU(), nn.BatchNorm1d(width)]
    layers += [rng.choice([nn.Tanh, nn.GELU, nn.SiLU])(), nn.Dropout(rng.choice([0.0, 0.3]))]
    layers.append(nn.Linear(width, 2))
    return nn.Sequential(*layers), d_in


def _optimizer(rng, params):
    make = rng.choice(
        [
            lambda: optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=0.01),
            lambda: optim.SGD(params, lr=0.05),
            lambda: optim.Adam(params, lr=0.01, eps=1e-3),
            lambda: optim.AdamW(params, lr=0.01, eps=1e-3, weight_decay=0.1),
            lambda: optim.RMSprop(params, lr=0.01, eps=1e-3, momentum=0.5),
        ]
    )
    return make()


class _Setup:
    """A model, its optimizer, a config its step reads and the hooks it added."""

    def __init__(self, model, opt):
        self.model, self.opt = model, opt
        self.cfg = {"clip": False, "scale": 1.0, "set_to_none": True}
        self.hooks: list = []

    def step(self, x, y):
        cfg = self.cfg
        self.opt.zero_grad(set_to_none=cfg["set_to_none"])
        loss = F.mse_loss(self.model(x), y) * cfg["scale"]
        loss.backward()
        if cfg["clip"]:
            nn.utils.clip_grad_norm_(self.model.parameters(), 0.1)
        self.opt.step()
        return loss


def _params(s: _Setup) -> list:
    return list(s.model.parameters())


def _lr(s, rng):
    for g in s.opt.param_groups:
        g["lr"] *= 0.5


def _momentum(s, rng):
    for g in s.opt.param_groups:
        if "momentum" in g:
            g["momentum"] = 0.0 if g["momentum"] else 0.9


def _weight_decay(s, rng):
    for g in s.opt.param_groups:
        g["weight_decay"] = 0.0 if g["weight_decay"] else 0.05


def _mode(s, rng):
    s.model.train(not s.model.training)


def _freeze(s, rng):
    p = _params(s)[rng.randrange(len(_params(s)))]
    p.requires_grad_(not p.requires_grad)


def _edit(s, rng):
    p = _params(s)[rng.randrange(len(_params(s)))]
    with staged.no_grad():
        p.mul_(0.9)


def _replace_data(s, rng):
    p = _params(s)[rng.randrange(len(_params(s)))]
    p.data = p.data * 0.5 + 0.01


def _dropout(s, rng):
    for m in s.model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.5 if m.p != 0.5 else 0.1


def _bn_momentum(s, rng):
    for m in s.model.modules():
        if isinstance(m, nn.BatchNorm1d):
            m.momentum = 0.5 if m.momentum != 0.5 else 0.1


def _tensor_hook(s, rng):
    if s.hooks and rng.random() < 0.5:
        s.hooks.pop().remove()
    else:
        p = next((p for p in _params(s) if p.requires_grad), None)  # (frozen: none)
        if p is not None:
            s.hooks.append(p.register_hook(lambda g: g * 0.5))


def _forward_hook(s, rng):
    if s.hooks and rng.random() < 0.5:
        s.hooks.pop(0).remove()
    else:
        s.hooks.append(s.model[0].register_forward_hook(lambda m, args, out: out * 1.5))


def _clip(s, rng):
    s.cfg["clip"] = not s.cfg["clip"]


def _scale(s, rng):
    s.cfg["scale"] = 2.0 if s.cfg["scale"] == 1.0 else 1.0


def _clear_state(s, rng):
    s.opt.state.clear()


def _set_to_none(s, rng):
    s.cfg["set_to_none"] = not s.cfg["set_to_none"]


def _maximize(s, rng):
    for g in s.opt.param_groups:
        g["maximize"] = not g["maximize"]


def _activation(s, rng):
    k = next(i for i, m in enumerate(s.model) if isinstance(m, (nn.Tanh, nn.GELU, nn.SiLU)))
    s.model[k] = rng.choice([nn.Tanh, nn.GELU, nn.SiLU])()


def _no_bias(s, rng):
    s.model[-1].bias = None  # the optimizer keeps it: it gets no gradient, no update


CHANGES = {
    f.__name__[1:]: f
    for f in (
        _lr,
        _momentum,
        _weight_decay,
        _mode,
        _freeze,
        _edit,
        _replace_data,
        _dropout,
        _bn_momentum,
        _tensor_hook,
        _forward_hook,
        _clip,
        _scale,
        _clear_state,
        _set_to_none,
        _maximize,
        _activation,
        _no_bias,
    )
}


def _state(s: _Setup) -> dict:
    out = {k: v.numpy().copy() for k, v in s.model.state_dict().items()}
    for i, p in enumerate(_params(s)):
        for k, v in s.opt.state.get(p, {}).items():
            if isinstance(v, staged.Tensor):
                out[f"opt.{i}.{k}"] = v.numpy().copy()
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_changes_between_calls_of_a_compiled_step_match_eager(seed):
    rng = random.Random(seed)
    staged.manual_seed(seed)
    model, d_in = _model(rng)
    twin = copy.deepcopy(model)
    opt = _optimizer(rng, model.parameters())
    eager = _Setup(model, opt)
    options = {k: v for k, v in opt.defaults.items() if k != "decoupled_weight_decay"}
    compiled = _Setup(twin, type(opt)(twin.parameters(), **options))
    step = staged.compile(compiled.step, backend="llvm-cpu")
    batch = rng.choice([4, 6])
    history = []
    for call in range(CALLS):
        if call:
            names = rng.sample(sorted(CHANGES), rng.randint(0, 2))
            for name in names:
                r = rng.random()  # the same draws for both copies
                CHANGES[name](eager, random.Random(r))
                CHANGES[name](compiled, random.Random(r))
            if rng.random() < 0.2:
                batch = 10 - batch
            history.append(names)
        x, y = staged.randn(batch, d_in), staged.randn(batch, 2)
        staged.manual_seed(1000 + call)
        want = eager.step(x, y).item()
        staged.manual_seed(1000 + call)
        got = step(x, y).item()
        about = f"seed {seed}, call {call}, changes before each call {history}; {model}, {opt}"
        assert np.isclose(got, want, rtol=1e-4, atol=1e-6), f"loss {got} for {want}; {about}"
        want_state, got_state = _state(eager), _state(compiled)
        assert sorted(got_state) == sorted(want_state), about
        for k, v in want_state.items():  # float32 sums' rounding, relative to the largest entry
            atol = 1e-5 * max(1.0, float(np.abs(v).max(initial=0)))
            np.testing.assert_allclose(
                got_state[k], v, rtol=1e-3, atol=atol, err_msg=f"{k}; {about}"
            )
