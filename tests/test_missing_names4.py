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
