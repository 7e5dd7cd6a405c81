"""In-place writes to tensors made inside a compiled step (not inputs, not parameters):
each read after a write sees the write, as eagerly. The tracer folds such a tensor's ops
into its array and made one graph constant per array, so a read after ``s.add_(1)`` got
the first value: Adam's step count, created in the first call's trace, gave a second
``opt.step()`` in the same call the first step's bias correction."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import to_numpy


def _counter(lib, x):
    s, out = lib.zeros(()), []
    for _ in range(3):
        s.add_(1)
        out.append(x * s)
    return lib.stack(out)


def _view_writes(lib, x):
    s = lib.zeros(2)
    v, out = s[1:], []
    for _ in range(2):
        v.mul_(0).add_(3)
        out.append(x * s)
        s += 1
        out.append(x * v)
    return lib.stack(out)


def _copies(lib, x):
    s, out = lib.ones(2), []
    for k in range(3):
        s.copy_(x * k)
        out.append(s * 1)
        s *= 2
        out.append(s + 0)
    return lib.stack(out)


@pytest.mark.parametrize("fn", [_counter, _view_writes, _copies])
def test_reads_after_in_place_writes_see_them(fn):
    want = fn(torch, torch.tensor([1.0, 2.0])).numpy()
    got = staged.compile(lambda x: fn(staged, x))(staged.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(to_numpy(got), want)


@pytest.mark.parametrize("name", ["Adam", "NAdam", "RAdam", "Adamax", "ASGD"])
def test_two_optimizer_steps_in_one_compiled_call_are_eagers(name):
    """A critic's inner loop: the optimizer's state (its step count) is made in the
    first call's trace, then stepped twice in the same call."""
    runs = []
    for compiled in (False, True):
        staged.manual_seed(0)
        w = staged.nn.Parameter(staged.randn(3))
        x = staged.randn(3)
        opt = getattr(staged.optim, name)([w], lr=0.01)

        def step(x, w=w, opt=opt):
            for _ in range(2):
                opt.zero_grad()
                (x * w).pow(2).sum().backward()
                opt.step()
            return w * 1

        run = staged.compile(step) if compiled else step
        runs.append(np.array([to_numpy(run(x)) for _ in range(3)]))
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-6, atol=1e-7)
