"""Capture runs the eager engine on symbolic tensors: the graph it records, interpreted
with NumPy, must give what eager mode gives, hooks and grad modes included."""

from __future__ import annotations

import numpy as np
import pytest

import staged
import staged.nn.functional as F
from staged import nn
from staged.tracing.interpret import interpret
from staged.tracing.symbolic import CaptureError
from models.common import classification_step


def _run_interpreted(c, *args):
    arrays = [a.numpy() for a in args] + [w.tensor._host() for w in c.state]
    return interpret(c.graph, *arrays)


def _mlp():
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))


def test_forward_and_backward_interpret_equal_eager():
    model = _mlp()
    x, y = staged.randn(4, 5), staged.tensor([0, 2, 1, 2])

    def loss_and_grads(x, y):
        loss = F.cross_entropy(model(x), y)
        grads = staged.autograd.grad(loss, list(model.parameters()))
        return loss, grads

    c = staged.capture(loss_and_grads, x, y)
    got = _run_interpreted(c, x, y)
    loss, grads = loss_and_grads(x, y)
    np.testing.assert_allclose(got[0], loss.item(), rtol=1e-6)
    for g, e in zip(got[1:], grads):
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-5, atol=1e-7)
    assert all(p.grad is None for p in model.parameters())


def test_capture_leaves_state_untouched_and_functionalizes_updates():
    model = _mlp()
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    opt = staged.optim.SGD(model.parameters(), lr=0.5)

    step = classification_step(model, opt)

    x, y = staged.randn(4, 5), staged.tensor([0, 2, 1, 2])
    c = staged.capture(step, x, y)
    for k, v in model.state_dict().items():  # tracing changed nothing
        np.testing.assert_array_equal(v.numpy(), before[k])
    assert all(p.grad is None for p in model.parameters())
    kinds = [o.kind for o in c.graph.outputs]
    assert kinds.count("state") == 4 and kinds[0] == "out"
    outs = _run_interpreted(c, x, y)
    step(x, y)  # eager reference
    assert len(c.state_updates) == 4
    for w, k in c.state_updates:
        np.testing.assert_allclose(outs[k], w.tensor.detach().numpy(), rtol=1e-5, atol=1e-7)


def test_graph_prints_one_op_a_line_with_source_lines():
    x = staged.randn(3, requires_grad=True)

    def f(x):
        return (x.exp() * 2).sum()

    c = staged.capture(f, x)
    text = str(c)
    op_lines = [ln for ln in text.splitlines() if "= exp(" in ln or "= mul(" in ln]
    assert len(op_lines) == 2
    assert all("test_capture.py:" in ln for ln in op_lines)
    assert "# arg x" in text


def test_tensor_hook_and_no_grad_block_take_effect_at_trace_time():
    w = staged.randn(3, requires_grad=True)
    seen = []

    def f(x):
        h = x * w
        h.register_hook(lambda g: seen.append("hook") or g * 10)
        with staged.no_grad():
            scale = (w * 3).sum()  # not differentiated
        loss = (h * scale).sum()
        return staged.autograd.grad(loss, w)[0]

    x = staged.randn(3)
    c = staged.capture(f, x)
    assert seen == ["hook"]
    got = _run_interpreted(c, x)[0]
    expected = f(x)
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-6)
    np.testing.assert_allclose(got, 10 * x.numpy() * (3 * w.detach().numpy()).sum(), rtol=1e-5)


@pytest.mark.parametrize(
    "use", [lambda t: bool(t > 0), lambda t: t.numpy(), lambda t: float(t), lambda t: t.tolist()]
)
def test_data_access_under_capture_names_the_call_site(use):
    def f(x):
        s = x.sum()
        use(s)
        return s

    with pytest.raises(CaptureError, match=r"test_capture\.py:\d+: this needs the data"):
        staged.capture(f, staged.randn(3))


def test_a_boolean_mask_under_capture_says_what_a_mask_needs():
    def f(x, mask):
        return x[mask].sum()

    with pytest.raises(CaptureError, match=r"test_capture\.py:\d+: indexing with a boolean mask"):
        staged.capture(f, staged.randn(4), staged.tensor([True, False, True, False]))


def test_python_scalars_and_structure_round_trip():
    def f(x, cfg):
        return {"y": x * cfg["scale"], "n": cfg["n"]}

    x = staged.randn(2)
    c = staged.capture(f, x, {"scale": 3.0, "n": 7})
    out = c.compile()(x, {"scale": 3.0, "n": 7})
    assert out["n"] == 7
    np.testing.assert_allclose(out["y"].numpy(), 3 * x.numpy(), rtol=1e-6)


def test_writes_through_views_are_functionalized_and_siblings_see_them():
    w = staged.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)

    def f(x):
        h = x * w + 1
        row, flat = h[0], h.reshape(6)  # two views of h
        row.mul_(2)  # written through one view ...
        h[:, 1].sub_(1)  # ... and through a slice of the base
        loss = (flat * flat).sum() + (h * h).sum() + (row * 3).sum()  # siblings are fresh
        (g,) = staged.autograd.grad(loss, w)
        return loss, g

    x = staged.full((2, 3), 0.1)
    c = staged.capture(f, x)
    got = _run_interpreted(c, x)
    loss, g = f(x)
    np.testing.assert_allclose(got[0], loss.item(), rtol=1e-6)
    np.testing.assert_allclose(got[1], g.numpy(), rtol=1e-6)
    import torch

    wt = torch.tensor(w.detach().numpy(), requires_grad=True)
    h = torch.full((2, 3), 0.1) * wt + 1
    row, flat = h[0], h.reshape(6)
    row.mul_(2)
    h[:, 1].sub_(1)
    lt = (flat * flat).sum() + (h * h).sum() + (row * 3).sum()
    lt.backward()
    np.testing.assert_allclose(got[1], wt.grad.numpy(), rtol=1e-6)


def test_escapes_are_found_among_what_the_trace_made_and_the_heap_is_thawed():
    """Escape detection walks only what the trace allocated (the pre-trace heap is frozen
    meanwhile, Note [escapes]); it still finds a new tensor stored in a pre-trace dict,
    even one only reachable through a reference cycle the trace made."""
    import gc

    store = {}
    p = staged.tensor([1.0, 2.0, 3.0])

    def f(x):
        cyc = {"t": x * 2}
        cyc["self"] = cyc  # garbage in a cycle: must not count as stored
        box = {"buf": x + 1}
        box["self"] = box  # stored, and only held through a cycle
        store["box"] = box
        return (p * x).sum()

    assert gc.get_freeze_count() == 0
    c = staged.capture(f, staged.ones(3))
    assert gc.get_freeze_count() == 0
    assert [t for t, _ in c.escaped] == [store["box"]["buf"]]
    gc.freeze()  # a caller that froze its heap keeps it frozen
    try:
        n = gc.get_freeze_count()
        staged.capture(f, staged.ones(3))
        assert gc.get_freeze_count() >= n
    finally:
        gc.unfreeze()


def test_assigning_data_of_an_unread_pre_trace_tensor_is_a_state_update():
    p = staged.tensor([1.0, 2.0, 3.0])

    def f(x):
        p.data = x * 3
        return x.sum()

    c = staged.capture(f, staged.ones(3))
    assert not c.escaped and [w.tensor for w, _ in c.state_updates] == [p]
    assert isinstance(p._payload, np.ndarray)  # restored after the trace


def test_a_compiled_step_returns_and_takes_named_tuples_as_their_class():
    """``values, indices`` and ``.values`` alike, as torch.compile's (a list before)."""
    import collections

    Pair = collections.namedtuple("Pair", "a b")
    x = staged.tensor([[3.0, 1.0, 2.0]])
    out = staged.compile(lambda t: t.sort(1))(x)
    assert type(out) is type(x.sort(1))
    np.testing.assert_array_equal(np.asarray(out.indices), [[1, 2, 0]])
    both = staged.compile(lambda p: Pair(p.a * p.b, p.a + p.b))(Pair(x, x))
    assert type(both) is Pair and float(both.b.sum()) == 12.0
