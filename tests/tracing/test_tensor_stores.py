"""A compiled step whose forward hooks store activations in a dict (``acts[name] =
out.detach()``: feature extraction, activation logging) sets those items after every call,
as eager code does, and compiles: each call used to trace again and run eagerly (Note
[tensor stores] in staged/tracing/capture.py). Eager code is the oracle, item for item."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from staged import nn, optim
from staged.tracing.capture import CaptureError

ACTS: dict = {}  # a module-level dict, as activation-logging code keeps one


def _model():
    staged.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _batches(n=5):
    rng = np.random.default_rng(0)
    return [staged.tensor(rng.standard_normal((3, 4)).astype(np.float32)) for _ in range(n)]


def _trainer(model, store):
    """A training step whose hooks call ``store(name, out)``."""
    opt = optim.SGD(model.parameters(), lr=0.1)
    for name, m in model.named_children():
        m.register_forward_hook(lambda m, i, o, name=name: store(name, o))

    def step(x):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    return step


def _global_store(name, out):
    ACTS[name] = out.detach()


class _Recorder:
    def __init__(self):
        self.features = {}

    def store(self, name, out):  # a bound method: the dict is its object's attribute
        self.features[name] = out.detach() * 2


def _closure_store():
    seen = {}

    def store(name, out):
        seen[name] = out.relu()

    return store, seen


def _stores():
    """(store, the dict it fills) of each kind, built afresh."""
    ACTS.clear()
    rec = _Recorder()
    closure, seen = _closure_store()
    return [(_global_store, ACTS), (rec.store, rec.features), (closure, seen)]


@pytest.mark.parametrize("kind", [0, 1, 2], ids=["global", "bound method", "closure"])
def test_activations_stored_by_hooks_follow_eager_and_compile(kind):
    store, got = _stores()[kind]
    step = staged.compile(_trainer(_model(), store))
    eager_store, want = _stores()[kind]
    eager = _trainer(_model(), eager_store)
    for x in _batches():
        np.testing.assert_allclose(step(x).item(), eager(x).item(), rtol=1e-6)
        assert got.keys() == want.keys() == {"0", "1", "2"}
        for k in want:  # .relu() of an activation requires grad, as eagerly
            assert got[k].requires_grad == want[k].requires_grad
            np.testing.assert_allclose(
                got[k].detach().numpy(), want[k].detach().numpy(), rtol=1e-5, atol=1e-7
            )
    # call 1 traced with the items absent, call 2 with tensors there (and .grad set):
    # every later call ran the compiled module
    assert step.traces == 2, step.history
    assert "calls 2-5: compiled (trace 2)" in step.explanation()


def test_an_item_stored_once_keeps_the_first_calls_tensor():
    """``setdefault`` stores at the first call only: each trace is guarded on what the item
    held as the call entered (absent, or a tensor), so later calls do not replace it."""
    cache: dict = {}
    lin = nn.Linear(4, 2)

    def f(x):
        y = lin(x).detach()
        cache.setdefault("first", y)
        return y.sum()

    step = staged.compile(f)
    xs = _batches(4)
    for x in xs:
        step(x)
    np.testing.assert_allclose(cache["first"].numpy(), lin(xs[0]).detach().numpy(), rtol=1e-6)
    assert step.traces == 2


def test_a_failed_trace_leaves_the_dict_as_it_was():
    store: dict = {"kept": staged.ones(1)}
    kept = store["kept"]

    def f(x):
        store["new"] = x * 2
        store["kept"] = x + 1
        return x.tolist()  # a float argument's data: cannot be captured

    with pytest.raises(CaptureError):
        staged.compile(f)(staged.ones(3))
    assert store.keys() == {"kept"} and store["kept"] is kept
