"""A compiled call's per-trace shortcuts (Note [per-call costs]): the trace that served last
is checked first, a state tensor's hooks are guarded whether or not it had any, and steps
with and without .grad writes, argument writes and index checks run as eagerly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged import nn

SCALE = [2.0]


def test_alternating_traces_each_serve_their_own_state():
    w = staged.tensor([1.0, 2.0, 3.0])
    f = staged.compile(lambda x: x * w * SCALE[0])  # SCALE is guarded by its items
    x = staged.tensor([1.0, -1.0, 0.5])
    got = []
    for s in (2.0, 3.0, 2.0, 3.0, 2.0):
        SCALE[0] = s
        got.append(f(x).numpy())
    want = [np.array([1.0, -2.0, 1.5]) * s for s in (2.0, 3.0, 2.0, 3.0, 2.0)]
    np.testing.assert_allclose(np.stack(got), np.stack(want))
    assert f.traces == 2  # each value's trace is reused, whichever served last
    assert f.last_retrace_reason == "SCALE: [2.0] -> [3.0]"


@pytest.mark.parametrize("where", ["hook", "post_accumulate"])
def test_a_hook_added_to_a_parameter_after_tracing_retraces(where):
    torch.manual_seed(0)
    tm = torch.nn.Linear(3, 2)
    m = nn.Linear(3, 2)
    m.load_state_dict({k: staged.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)

    def step(model, x):
        model.zero_grad()
        model(x).pow(2).sum().backward()
        return model.weight.grad.clone()

    f = staged.compile(lambda x: step(m, x))
    for _ in range(2):
        f(staged.tensor(x))
    assert f.traces == 2  # the first call made the .grad tensors (a one-shot trace)
    for model in (tm, m):
        if where == "hook":
            model.weight.register_hook(lambda g: g * 3)
        else:
            model.weight.register_post_accumulate_grad_hook(_triple_grad)
    got = f(staged.tensor(x)).numpy()
    np.testing.assert_allclose(got, step(tm, torch.tensor(x)).numpy(), rtol=1e-5)
    assert f.traces == 3 and "a hook was registered or removed" in f.last_retrace_reason


def _triple_grad(p) -> None:
    p.grad.mul_(3)


def test_argument_writes_and_index_checks_still_run():
    table = staged.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])

    def step(acc, idx):
        acc.add_(table[idx].sum(0))
        return acc * 2

    f = staged.compile(step)
    acc = staged.zeros(2)
    for _ in range(2):
        out = f(acc, staged.tensor([0, 2]))
    np.testing.assert_allclose(acc.numpy(), [12.0, 16.0])
    np.testing.assert_allclose(out.numpy(), [24.0, 32.0])
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 3"):
        f(acc, staged.tensor([0, 7])).numpy()
    with pytest.raises(IndexError, match="index 7"):  # acc holds a result of that call
        acc.numpy()
