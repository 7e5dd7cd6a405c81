"""torch names staged lacked, each checked against torch 2.13: the ``sym_*`` helpers on
Python numbers, the top-level pooling forms that always return indices
(``adaptive_max_pool1d``, ``max_pool1d_with_indices``) and ``adaptive_avg_pool1d``, and
``to_dlpack``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged

SYM = [
    ("sym_int", (3.7,)),
    ("sym_int", (-3.7,)),
    ("sym_int", (5,)),
    ("sym_float", (2,)),
    ("sym_max", (2, 3.5)),
    ("sym_max", (2, 2.0)),
    ("sym_max", (4, 3)),
    ("sym_min", (2, 3)),
    ("sym_min", (2.5, 3)),
    ("sym_not", (True,)),
    ("sym_not", (0,)),
    ("sym_sqrt", (4,)),
    ("sym_sum", ([1, 2, 3],)),
    ("sym_sum", ([1, 2.5],)),
    ("sym_ite", (True, 1, 2)),
    ("sym_ite", (False, 1.5, 2.0)),
]


@pytest.mark.parametrize("name, args", SYM)
def test_sym_helpers_are_torch_s(name, args):
    ours, theirs = getattr(staged, name)(*args), getattr(torch, name)(*args)
    assert ours == theirs and type(ours) is type(theirs)


def test_sym_ite_refuses_branches_of_two_types_as_torch():
    for L in (staged, torch):
        with pytest.raises(AssertionError, match="type mismatch: <class 'int'> vs <class 'float'>"):
            L.sym_ite(True, 1, 2.0)


POOLS = {
    "adaptive_max_pool1d": lambda L, x: L.adaptive_max_pool1d(x, 4),
    "max_pool1d_with_indices": lambda L, x: L.max_pool1d_with_indices(x, 3, 2, 1),
    "adaptive_avg_pool1d": lambda L, x: (L.adaptive_avg_pool1d(x, 3),),
}


@pytest.mark.parametrize("name", list(POOLS))
def test_top_level_pools_are_torch_s(name):
    x = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
    ours, theirs = POOLS[name](staged, staged.tensor(x)), POOLS[name](torch, torch.tensor(x))
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert str(o.dtype).rpartition(".")[2] == str(t.dtype).rpartition(".")[2]
        np.testing.assert_array_equal(o.numpy(), t.numpy())


def test_to_dlpack_at_the_top_level():
    t = staged.tensor([1.0, 2.0])
    u = torch.from_dlpack(staged.to_dlpack(t))
    u[1] = 7.0
    assert t.tolist() == [1.0, 7.0]


CELLS = {
    "lstm_cell": 4,
    "gru_cell": 3,
    "rnn_tanh_cell": 1,
    "rnn_relu_cell": 1,
}


@pytest.mark.parametrize("name", list(CELLS))
@pytest.mark.parametrize("bias", [True, False])
def test_cell_functions_are_torch_s_with_gradients(name, bias):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s) for s in [(3, 5), (3, 4), (3, 4)]]
    arrays += [rng.standard_normal((CELLS[name] * 4, n)) * 0.5 for n in (5, 4)]
    arrays += [rng.standard_normal(CELLS[name] * 4) * 0.1 for _ in range(2)]
    results = []
    for L in (staged, torch):
        x, h, c, w_ih, w_hh, b_ih, b_hh = (L.tensor(a, requires_grad=True) for a in arrays)
        hx = (h, c) if name == "lstm_cell" else h
        biases = (b_ih, b_hh) if bias else ()
        out = getattr(L, name)(x, hx, w_ih, w_hh, *biases)
        outs = out if isinstance(out, tuple) else (out,)
        sum(o.sin().sum() for o in outs).backward()
        used = [x, h, w_ih, w_hh] + ([c] if name == "lstm_cell" else []) + list(biases)
        results.append([o.detach().numpy() for o in outs] + [t.grad.numpy() for t in used])
    assert len(results[0]) == len(results[1])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
