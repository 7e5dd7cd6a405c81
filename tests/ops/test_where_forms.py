"""torch.where's forms against torch 2.13: the condition alone (nonzero as a tuple, any
dtype), keyword arguments, and the refusal of two arguments."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged


@pytest.mark.parametrize(
    "cond", [[0, 1, 1], [[True, False], [True, True]], [[0.0, 2.5, 0.0]], [False, False], 1]
)
def test_condition_alone_is_nonzero_as_tuple(cond):
    ours, theirs = staged.where(staged.tensor(cond)), torch.where(torch.tensor(cond))
    assert isinstance(ours, tuple) and len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == staged.int64
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_keywords_and_two_arguments():
    for lib in (staged, torch):
        got = lib.where(lib.tensor([True, False]), input=lib.ones(2), other=0.0)
        np.testing.assert_array_equal(got.numpy(), [1.0, 0.0])
        with pytest.raises(TypeError):
            lib.where(lib.tensor([True]), lib.ones(1))
