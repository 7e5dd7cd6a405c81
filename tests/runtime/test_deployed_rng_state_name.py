"""A saved dropout step names its counter-based generator's (seed, counter) state
``rng_state``, as an ONNX export does (Note [state names] in staged/tracing/names.py),
not by its position (``state4``); a step saved under the old name still loads."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import staged
import staged.onnx
from staged import nn, optim


@pytest.fixture
def step():
    """A dropout MLP's SGD step drawing in the graph (``rng="counter"``), called twice."""
    staged.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    opt = optim.SGD(model.parameters(), lr=0.1)

    def train(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    f = staged.compile(train, rng="counter")
    for _ in range(2):
        f(*_data())
    return f


def _data():
    x = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    return staged.tensor(x), staged.tensor(np.arange(6) % 2)


def test_the_generator_state_is_saved_as_rng_state(step, tmp_path):
    step.save(tmp_path / "step")
    manifest = json.loads((tmp_path / "step" / "manifest.json").read_text())
    names = [s["name"] for s in manifest["state"]]
    assert {"0.weight", "0.bias", "2.weight", "2.bias", "rng_state"} <= set(names)
    assert not [n for n in names if re.fullmatch(r"state\d+", n)]  # none named by position
    loaded = staged.runtime.load(tmp_path / "step")
    live = staged.onnx.rng_state()
    np.testing.assert_array_equal(loaded.state_dict()["rng_state"], live.numpy())
    x, y = _data()
    for _ in range(2):  # the same masks: it is the counter the live step draws from
        np.testing.assert_allclose(loaded(x, y).item(), step(x, y).item(), rtol=1e-5)
        np.testing.assert_array_equal(loaded.state_dict()["rng_state"], live.numpy())


def test_a_step_saved_with_the_positional_name_still_loads(step, tmp_path):
    """Steps saved before the name was given keep ``state4`` in their manifest, parameter
    archive and module; the loader reads the name from the manifest."""
    step.save(tmp_path / "old", names={staged.onnx.rng_state(): "state4"})
    step.save(tmp_path / "new")
    old, new = (staged.runtime.load(tmp_path / d) for d in ("old", "new"))
    state = old.state_dict()
    assert "state4" in state and "rng_state" not in state
    np.testing.assert_array_equal(state["state4"], new.state_dict()["rng_state"])
    x, y = _data()
    losses = [(old(x, y).item(), new(x, y).item()) for _ in range(3)]
    np.testing.assert_array_equal(*zip(*losses))
    old.load_state_dict(state)  # back to before those calls, by the old name
    np.testing.assert_array_equal(old(x, y).item(), losses[0][0])
