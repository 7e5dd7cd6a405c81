"""``cond`` and ``while_loop`` against torch 2.13: values, gradients, errors, and under
staged.compile (a predicate known at the trace picks its branch; one from the step's data
raises CaptureError, as a Python ``if`` on it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged.tracing.symbolic import CaptureError

X = np.array([0.3, -1.2, 2.0], np.float32)


@pytest.mark.parametrize("pred", [True, False, 1, 0.0, "tensor-true", "tensor-false"])
def test_cond_takes_torchs_branch_with_its_gradients(pred):
    def run(lib):
        x = lib.tensor(X, requires_grad=True)
        p = lib.tensor(pred == "tensor-true") if isinstance(pred, str) else pred
        y = lib.cond(
            p,
            lambda a, b: (a.cos() * b["w"], a.sum()),
            lambda a, b: (a.sin() * b["w"], a.max()),
            (x, {"w": x * 2}),
        )
        (y[0].sum() + y[1]).backward()
        return [t.detach().numpy() for t in y] + [x.grad.numpy()]

    for a, b in zip(run(staged), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_while_loop_gives_torchs_carried_values():
    def run(lib):
        return lib.while_loop(
            lambda i, x: i < 3, lambda i, x: (i + 1, x * 2), (lib.tensor(0), lib.tensor(X))
        )

    ours, theirs = run(staged), run(torch)
    assert type(ours) is tuple and len(ours) == 2
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_bad_predicates_raise_torchs_errors():
    x = staged.ones(2)
    with pytest.raises(RuntimeError, match="Expected pred to be bool or single-element tensor"):
        staged.cond(staged.tensor([True, False]), lambda x: x, lambda x: x, (x,))
    with pytest.raises(RuntimeError, match="Expected pred to be bool or tensor, but got a."):
        staged.cond("a", lambda x: x, lambda x: x, (x,))
    with pytest.raises(TypeError, match=r"operands must be a tuple or list .*pass \(x,\)"):
        staged.cond(True, lambda x: x, lambda x: x, x)
    with pytest.raises(RuntimeError, match="only consists of tensor leaves"):
        staged.cond(True, lambda x, s: x, lambda x, s: x, (x, 2.0))


def test_a_compiled_cond_on_a_shape_picks_its_branch_at_the_trace():
    f = staged.compile(
        lambda x: staged.cond(x.shape[0] > 2, lambda x: x.cos(), lambda x: x.sin(), (x,))
    )
    np.testing.assert_allclose(f(staged.tensor(X)).numpy(), np.cos(X), rtol=1e-6)
    np.testing.assert_allclose(f(staged.tensor(X[:2])).numpy(), np.sin(X[:2]), rtol=1e-6)


def test_a_compiled_cond_on_the_steps_data_raises_as_an_if_does():
    f = staged.compile(
        lambda x: staged.cond(x.sum() > 0, lambda x: x.cos(), lambda x: x.sin(), (x,))
    )
    with pytest.raises(CaptureError, match="needs the data of a tensor that is being captured"):
        f(staged.tensor(X))
