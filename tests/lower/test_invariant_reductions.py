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
