"""Sums and products of values known whatever the data equal eager in compiled steps
(Note [invariant reductions] in staged/lower/mlir/invariants.py): IREE 3.13 folds x * 0,
x == x, x - x ... of integers itself and then summed the folded value wrongly
((x * 0 + 1).sum() over 10 entries gave 3, where(x == x, 1., 0.).sum() 2.0)."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from tests.backends import needs_vulkan


def _reductions(x, xi):
    ones = xi * 0 + 1
    return (
        ones.sum(),
        ones.sum(1),
        staged.where(xi == xi, 1.0, 0.0).sum(),
        ones.float().mean(1),
        ones.float().norm(),
        (xi * 0 + 2).prod(),
        (~staged.isnan(xi)).sum(),
        (xi - xi + 1).sum(),
        ((xi ^ xi) + 3).sum(0),
        ((xi & 0) + 3).sum(0),
        (xi > xi).sum(),
        staged.median(xi),  # its NaN count of an integer tensor was the folded sum
        ones.sum() + x.sum(),  # beside a sum of data
    )


@pytest.mark.parametrize("backend", ["llvm-cpu", pytest.param("vulkan-spirv", marks=needs_vulkan)])
def test_sums_of_folded_values_equal_eager(backend):
    x = staged.tensor(np.arange(10, dtype=np.float32).reshape(2, 5))
    xi = x.to(staged.int32)
    got = staged.compile(_reductions, backend=backend)(x, xi)
    for k, (g, want) in enumerate(zip(got, _reductions(x, xi))):
        assert g.dtype == want.dtype and np.allclose(g.numpy(), want.numpy()), k


def _written_constant(x):
    w = x.clone()  # the gradient of x is computed from the constant cotangent only
    w[1:, staged.tensor([2, 0, 2])] = 1.0
    w[staged.tensor([0, 0]), staged.tensor([1, 1])] = 2.0
    (gx,) = staged.autograd.grad(w, x, staged.arange(12.0).reshape(3, 4))
    return gx


def test_a_write_into_a_value_of_constants_only_keeps_the_value_for_other_reads():
    """Note [constant destinations]: IREE 3.13 read zeros from a value computed from
    constants only where a slice_scatter wrote zeros into it, so the gradient above lost
    its unwritten entries (0 where 5, 7, 9, 11). The lowering writes into a literal."""
    from staged.lower.mlir.invariants import constant_destinations

    x = staged.zeros(3, 4, requires_grad=True)
    traced = staged.capture(_written_constant, x)
    literal = constant_destinations(traced.graph)
    assert [a.shape for a in literal.values()] == [(3, 4)]
    got = traced.compile()(x)
    np.testing.assert_array_equal(got.numpy(), _written_constant(x).numpy())
    np.testing.assert_array_equal(got.numpy(), [[0, 0, 2, 3], [0, 5, 0, 7], [0, 9, 0, 11]])
