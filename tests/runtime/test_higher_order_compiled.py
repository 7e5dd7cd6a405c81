"""Gradients of gradients under staged.compile: a gradient-penalty step, compiled, must
match eager staged and torch; compiled calls show up in the profiler."""

import numpy as np
import torch

import staged
from staged.autograd import profiler
from tests.checks import assert_close

rng = np.random.default_rng(0)
W0 = (rng.standard_normal((6, 3)) * 0.5).astype(np.float32)
XS = [rng.standard_normal((8, 6)).astype(np.float32) for _ in range(3)]
Y = rng.standard_normal((8, 3)).astype(np.float32)


def penalty_step(lib):
    def step(w, x, y):
        loss = (((x @ w).tanh() - y) ** 2).mean()
        (g,) = lib.autograd.grad(loss, w, create_graph=True)  # grad of grad below
        total = loss + 0.1 * (g * g).sum()
        total.backward()
        return total

    return step


def test_gradient_penalty_compiled_matches_eager_and_torch():
    we, wc = (staged.tensor(W0, requires_grad=True) for _ in range(2))
    wt = torch.tensor(W0, requires_grad=True)
    compiled = staged.compile(penalty_step(staged))
    y = staged.tensor(Y)
    with profiler.profile() as prof:
        for x in XS:
            we.grad = wc.grad = wt.grad = None  # as zero_grad(set_to_none=True) does
            le = penalty_step(staged)(we, staged.tensor(x), y)
            lc = compiled(wc, staged.tensor(x), y)
            lt = penalty_step(torch)(wt, torch.tensor(x), torch.tensor(Y))
            assert_close(le, lt, rtol=1e-5, atol=1e-6)
            assert_close(lc, le, rtol=1e-5, atol=1e-6)
            assert_close(wc.grad, we.grad, rtol=1e-5, atol=1e-6)
            assert_close(we.grad, wt.grad, rtol=1e-5, atol=1e-6)
    calls = [e for e in prof.events() if e.cat == "compiled"]
    assert len(calls) == len(XS)  # one event per invocation, named by the backend
    assert all(e.name == "staged.compile [llvm-cpu]" for e in calls)
    assert any(e.name == "MulBackward0" for e in prof.events())  # the traced/eager backward
