"""``Tensor.resize_``/``resize_as_`` against torch 2.13: entries kept in memory order (a
transposed copy reads as torch's storage does), a version bump a call, shrinking in place,
and torch's refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged


@pytest.mark.parametrize("sizes", [(6,), (2,), (2, 2), (3, 3), (0,)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_resize_keeps_entries_in_memory_order(sizes, layout):
    def run(L):
        x = L.arange(6.0).reshape(2, 3)
        x = x.t().clone() if layout == "transposed" else x.clone()
        v = x._version
        x.resize_(*sizes)
        return x, x._version - v

    (ours, bumped), (theirs, torch_bumped) = run(staged), run(torch)
    assert tuple(ours.shape) == tuple(theirs.shape) and bumped == torch_bumped
    n = min(6, theirs.numel())  # torch's entries past the old end are uninitialized
    assert ours.flatten()[:n].tolist() == theirs.flatten()[:n].tolist()
    assert ours.flatten()[n:].tolist() == [0.0] * (ours.numel() - n)


def test_resize_shrinks_in_place_and_resize_as_takes_a_shape():
    x = staged.arange(6.0)
    before = x._payload
    assert x.resize_([2, 2]) is x and np.shares_memory(before, x._payload)
    y = staged.arange(4.0).t().clone()
    assert (
        y.resize_as_(staged.ones(2, 2)).tolist()
        == torch.arange(4.0).resize_as_(torch.ones(2, 2)).tolist()
    )


@pytest.mark.parametrize("call", ["resize_", "resize_as_"])
def test_resize_refuses_tensors_requiring_grad(call):
    for L in (torch, staged):
        x = L.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
            x.resize_(3) if call == "resize_" else x.resize_as_(L.ones(3))


def test_resize_needs_a_size():
    for L in (torch, staged):
        with pytest.raises(TypeError, match='missing 1 required positional arguments: "size"'):
            L.ones(2).resize_()
