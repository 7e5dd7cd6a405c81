"""``nonzero_static`` against torch 2.13: the first ``size`` non-zero entries' indices in
order, the rest ``fill_value``; and, unlike ``nonzero``, it compiles: one trace serves
inputs with any number of non-zero entries."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged

CASES = {
    "2-D, padded": (lambda L: L.tensor([[0, 1, 0], [2, 0, 3]]), 5, -1),
    "2-D, cut": (lambda L: L.tensor([[0, 1, 0], [2, 0, 3]]), 2, 7),
    "NaN and -0.0": (lambda L: L.tensor([float("nan"), 0.0, -0.0]), 3, -1),
    "bool": (lambda L: L.tensor([True, False, True]), 3, 0),
    "0-d": (lambda L: L.tensor(3.0), 2, -1),
    "empty": (lambda L: L.zeros(0, 2), 2, -1),
    "3-D": (lambda L: L.tensor(np.arange(24).reshape(2, 3, 4) % 5), 30, -2),
    "size 0": (lambda L: L.ones(3), 0, -1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_nonzero_static_is_torch_s(case):
    make, size, fill = CASES[case]
    ours = staged.nonzero_static(make(staged), size=size, fill_value=fill)
    theirs = torch.nonzero_static(make(torch), size=size, fill_value=fill)
    assert ours.dtype == staged.int64 and tuple(ours.shape) == tuple(theirs.shape)
    assert ours.tolist() == theirs.tolist()
    assert make(staged).nonzero_static(size=size, fill_value=fill).tolist() == theirs.tolist()


def test_it_compiles_once_for_any_count():
    step = staged.compile(lambda x: staged.nonzero_static(x, size=4))
    for rows in ([[0.0, 1, 0], [2, 0, 3]], [[1.0, 1, 1], [1, 1, 0]], [[0.0, 0, 0], [0, 0, 0]]):
        want = torch.nonzero_static(torch.tensor(rows), size=4).tolist()
        assert step(staged.tensor(rows)).tolist() == want
    assert step.traces == 1


def test_a_negative_size_is_refused_as_torch():
    with pytest.raises(RuntimeError, match="'size' must be an non-negative integer"):
        staged.nonzero_static(staged.ones(3), size=-1)
