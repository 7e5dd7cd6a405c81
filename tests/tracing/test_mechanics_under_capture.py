"""Autograd mechanics under capture: hooks run at trace time (what they do is baked into
the graph), grad modes decide what is recorded, version checks hold, and a hook that
needs data raises CaptureError naming its line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import staged
from staged.tracing.interpret import interpret
from staged.tracing.symbolic import CaptureError
from tests.checks import to_numpy


def _interpret(c, *args):
    arrays = [a.numpy(force=True) for a in args] + [w.tensor._host() for w in c.state]
    return interpret(c.graph, *arrays)


def _ops(c):
    return [op.prim.name for op in c.graph.ops]


def test_hooks_run_at_trace_time_and_are_baked_into_the_graph():
    log = []

    def step(x):
        y = x.exp()
        y.register_hook(lambda g: (log.append("tensor"), g * 3)[1])
        y.grad_fn.register_prehook(lambda go: log.append("pre"))
        y.grad_fn.register_hook(lambda gi, go: log.append("post"))
        (g,) = staged.autograd.grad(y.sum(), x)
        return g

    x = staged.tensor([0.5, 1.0], requires_grad=True)
    c = staged.capture(step, x)
    assert log == ["tensor", "pre", "post"]  # once, while tracing, in eager order
    (got,) = _interpret(c, x)
    np.testing.assert_allclose(got, 3 * np.exp([0.5, 1.0]), rtol=1e-6)
    assert log == ["tensor", "pre", "post"]  # running the graph runs no Python


def test_grad_modes_decide_what_is_recorded():
    def step(x):
        with staged.no_grad():
            scale = x.sum() * 2  # recorded as a value, outside the backward
        y = (x * scale).sum()
        with staged.inference_mode():
            flag = (x * 1).is_inference()
        (g,) = staged.autograd.grad(y, x)
        return g, flag

    x = staged.tensor([1.0, 2.0], requires_grad=True)
    c = staged.capture(step, x)
    got = _interpret(c, x)
    np.testing.assert_allclose(got[0], [6.0, 6.0])  # no d(scale)/dx term
    eager, _ = step(x)
    np.testing.assert_allclose(got[0], eager.numpy())
    assert c.out_leaves[1] == ("py", True)


def test_version_check_holds_under_capture():
    def step(x):
        h = x * 1
        y = (h * h).sum()
        h.add_(1)
        y.backward()

    with pytest.raises(
        RuntimeError,
        match="modified by an inplace operation.*is at version 1; expected version 0 instead",
    ):
        staged.capture(step, staged.tensor([1.0, 2.0], requires_grad=True))


def test_retain_grad_and_post_accumulate_hooks_under_capture():
    w = staged.tensor([1.0, -2.0], requires_grad=True)
    seen = []

    def step(x):
        h = x * w
        h.retain_grad()
        (h * h).sum().backward()
        return h.grad

    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.shape))
    x = staged.tensor([3.0, 4.0])
    c = staged.capture(step, x)
    got = _interpret(c, x)
    np.testing.assert_allclose(got[0], 2 * np.array([3.0, -8.0]))
    assert seen == [(2,)]
    assert w.grad is None  # capture restores the caller's state


def test_hook_reading_item_raises_capture_error_naming_its_line():
    def hook(g):
        if g.sum().item() > 0:  # needs data
            return g

    line = inspect.getsourcelines(hook)[1] + 1

    def step(x):
        y = x.exp()
        y.register_hook(hook)
        (y * y).sum().backward()  # y's gradient 2y depends on the argument

    with pytest.raises(
        CaptureError,
        match=rf"test_mechanics_under_capture.py:{line}: comparing it \(>\) needs the "
        rf"number read by \.item\(\) at .*test_mechanics_under_capture.py:{line}",
    ):
        staged.capture(step, staged.tensor([1.0], requires_grad=True))


def test_anomaly_mode_records_forward_tracebacks_while_tracing():
    tracebacks = []

    def step(x):
        y = x.exp()
        tracebacks.append(y.grad_fn.metadata.get("traceback_", ""))
        return y.sum()

    with staged.autograd.set_detect_anomaly(True):
        staged.capture(step, staged.tensor([1.0], requires_grad=True))
    assert "y = x.exp()" in tracebacks[0]


def test_views_made_before_their_base_required_grad_regenerate_under_capture():
    """Views made before their base first required grad join the graph when the base is
    written (AsStridedBackward0, Note [stale views]): the interpreted and the compiled
    step give eager's and torch's gradients."""
    import torch

    w0 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], dtype=np.float32)
    names = []

    def step(T, x, w):
        a = T.zeros(2, 3)
        top, col, flat_t = a[0], a[:, 1], a.t()[1:]  # made before a requires grad
        a.add_(x * w)
        names.append([v.grad_fn.name() for v in (top, col, flat_t)])
        loss = (top * top).sum() + (col * 3).sum() + (flat_t * flat_t * flat_t).sum()
        (g,) = T.autograd.grad(loss, w)
        return loss, g

    w = staged.tensor(w0, requires_grad=True)
    x = staged.full((2, 3), 2.0)
    eager = step(staged, x, w)
    wt = torch.tensor(w0, requires_grad=True)
    theirs = step(torch, torch.full((2, 3), 2.0), wt)
    c = staged.capture(lambda x: step(staged, x, w), x)
    assert names == [["AsStridedBackward0"] * 3] * 3
    interpreted = _interpret(c, x)
    compiled = c.compile()(x)
    for got in (eager, interpreted, compiled):
        np.testing.assert_allclose(to_numpy(got[0]), theirs[0].item(), rtol=1e-6)
        np.testing.assert_allclose(to_numpy(got[1]), theirs[1].numpy(), rtol=1e-6)
