"""Writes through a boolean mask a compiled step has no data of (Note [masked writes] in
``staged/eager/ops/indexing.py``), and in-place shape changes of a step's arguments:
compiled against eager and torch, values and gradients, and a mask whose count of True
entries is not the value's reported when the results are read (Note [index checks])."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged

RNG = np.random.default_rng(0)
# (x's shape, the mask, the value's shape): a row per True entry, rows of a 3-D tensor, a
# value broadcast over the rows, one with a leading unit dim, a 0-d one (a select)
MASK1 = np.array([True, False, True, True, False])
MASK2 = np.array([[True, False], [True, True], [False, True]])
CASES = [
    ((5,), MASK1, (3,)),
    ((3, 2, 4), MASK2, (4, 4)),
    ((3, 2, 4), MASK2, (4,)),
    ((3, 2, 4), MASK2, (1, 4)),
    ((3, 2, 4), MASK2, (1, 4, 4)),
    ((5,), MASK1, ()),
]
DATA = [
    (RNG.standard_normal(xs), m, RNG.standard_normal(vs), RNG.standard_normal(xs))
    for xs, m, vs in CASES
]


def _writes(lib, *flat):
    """Each case's ``y = x * 1; y[mask] = v`` and the gradients of ``(y * w).sum()`` to
    every ``x`` and ``v``."""
    cases = [flat[i : i + 4] for i in range(0, len(flat), 4)]
    out = []
    for x, m, v, _ in cases:
        y = x * 1
        y[m] = v
        out.append(y)
    loss = sum((y * w).sum() for y, (_, _, _, w) in zip(out, cases))
    return out, list(lib.autograd.grad(loss, [t for x, _, v, _ in cases for t in (x, v)]))


def _args(lib, mask_t=None):
    flat = []
    for x, m, v, w in DATA:
        flat += [
            lib.tensor(x, dtype=lib.float32, requires_grad=True),
            lib.tensor(m) if mask_t is None else mask_t(m),
            lib.tensor(v, dtype=lib.float32, requires_grad=True),
            lib.tensor(w, dtype=lib.float32),
        ]
    return flat


def test_masked_writes_compile_with_torchs_values_and_gradients():
    want = _writes(torch, *_args(torch))
    eager = _writes(staged, *_args(staged))
    step = staged.compile(lambda *a: _writes(staged, *a))
    got = step(*_args(staged))
    got2 = step(*_args(staged))
    for w, e, g, g2 in zip(
        want[0] + want[1], eager[0] + eager[1], got[0] + got[1], got2[0] + got2[1]
    ):
        np.testing.assert_allclose(e.detach().numpy(), w.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-6)
        np.testing.assert_array_equal(g2.detach().numpy(), g.detach().numpy())
    assert step.traces == 1


def test_the_dqn_targets_write_compiles():
    """PyTorch's DQN tutorial: the next states' values through the mask of non-final
    states, as many rows as the mask has True entries."""
    w = np.float32(RNG.standard_normal((4, 2)))

    def targets(lib, mask, states, w):
        values = lib.zeros(6)
        values[mask] = (states @ w).max(1).values
        return values * 0.9

    mask = np.array([True, True, False, True, False, True])
    states = np.float32(RNG.standard_normal((4, 4)))
    want = targets(torch, torch.tensor(mask), torch.tensor(states), torch.tensor(w))
    step = staged.compile(lambda *a: targets(staged, *a))
    got = step(staged.tensor(mask), staged.tensor(states), staged.tensor(w))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)  # matmul sums


@pytest.mark.parametrize("ones", [2, 4])
def test_a_mask_of_another_count_raises_on_read_not_out_of_bounds(ones):
    def write(x, mask, v):
        y = x * 1
        y[mask] = v
        return y

    x, v = staged.zeros(6), staged.tensor([1.0, 2.0, 3.0])
    bad = staged.tensor([True] * ones + [False] * (6 - ones))
    with pytest.raises(RuntimeError, match=r"shape mismatch: value tensor of shape \[3\]"):
        write(x, bad, v)  # eager: torch's error, the count in it
    with pytest.raises(RuntimeError) as e:
        torch_x = torch.zeros(6)
        torch_x[torch.tensor(bad.numpy())] = torch.tensor(v.numpy())
    assert "shape mismatch: value tensor of shape [3]" in str(e.value)
    step = staged.compile(write)
    good = staged.tensor([False, True, True, False, True, False])
    np.testing.assert_array_equal(step(x, good, v).numpy(), [0, 1, 2, 0, 3, 0])
    out = step(x, bad, v)
    with pytest.raises(RuntimeError, match="shape mismatch: value tensor of shape \\[3\\] can"):
        out.numpy()
    np.testing.assert_array_equal(step(x, good, v).numpy(), [0, 1, 2, 0, 3, 0])
    assert step.traces == 1


def test_masked_fill_by_number_and_masked_scatter_compile():
    def fn(x, mask, src):
        a = x * 1
        a[mask] = 7.0
        return a, (x * 1).masked_scatter_(mask, src)

    x, src = np.arange(6.0, dtype=np.float32), np.float32([10, 20, 30, 40, 50, 60])
    mask = np.array([True, False, True, False, False, True])
    want = fn(torch.tensor(x), torch.tensor(mask), torch.tensor(src))
    got = staged.compile(fn)(staged.tensor(x), staged.tensor(mask), staged.tensor(src))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def _unsqueezes(lib, x, t):
    t.unsqueeze_(-1)
    t.mul_(2)
    return (x * t).sum()


def test_unsqueeze_of_an_argument_gives_the_callers_tensor_its_new_shape():
    """char_rnn_generate's ``target_line_tensor.unsqueeze_(-1)``: the caller's tensor ends
    with the new shape and the written values after a compiled call, as eagerly; an alias
    of it keeps its shape and sees the data."""
    step = staged.compile(lambda x, t: _unsqueezes(staged, x, t))
    x = np.float32(RNG.standard_normal((4, 4)))
    for held in (False, True, False):
        t, tt = staged.arange(4.0), torch.arange(4.0)
        aliases = (t.detach(), tt.detach()) if held else ()
        want = _unsqueezes(torch, torch.tensor(x), tt)
        got = step(staged.tensor(x), t)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
        assert tuple(t.shape) == tuple(tt.shape) == (4, 1)
        np.testing.assert_array_equal(t.numpy(), tt.numpy())
        for a in aliases:
            assert tuple(a.shape) == (4,)
            np.testing.assert_array_equal(a.numpy(), [0, 2, 4, 6])
    assert step.traces == 1


def test_unsqueeze_of_state_raises_naming_the_fix():
    buf = staged.zeros(3)

    def step(x):
        buf.unsqueeze_(0)
        return x + buf

    with pytest.raises(RuntimeError) as e:
        staged.compile(step)(staged.ones(3))
    msg = str(e.value)
    assert "unsqueeze_() changes the shape of a tensor from outside the traced function" in msg
    assert "pass it as an argument, or use the out-of-place form (x = x.unsqueeze(...))" in msg
    assert tuple(buf.shape) == (3,)
