"""Random draws under nested vmap with each level's own ``randomness``: torch's shapes and
values (staged's default generator is torch's), the draws equal along a ``"same"`` level
and different along a ``"different"`` one; and an inner function's result batched only
at an outer level (a draw of that level, a closure's tensor) leaves the inner vmap with
the logical shape."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import to_numpy

DRAWS = {
    "rand_like": lambda L, x: L.rand_like(x),
    "randn_like": lambda L, x: L.randn_like(x),
    "dropout": lambda L, x: L.nn.functional.dropout(x, 0.5),
    "rand": lambda L, x: x + L.rand(2),
    "randn": lambda L, x: x + L.randn(4, 2)[0],
}
LEVELS = [
    ("same", "different"),
    ("different", "same"),
    ("same", "same"),
    ("different", "different"),
]


def _nested(L, name, inner, outer, in_dims=0):
    L.manual_seed(0)
    f = L.func.vmap(lambda x: DRAWS[name](L, x), randomness=inner)
    return to_numpy(L.func.vmap(f, in_dims=in_dims, randomness=outer)(L.ones(3, 4, 2)))


@pytest.mark.parametrize(("inner", "outer"), LEVELS, ids=["-".join(p) for p in LEVELS])
@pytest.mark.parametrize("name", list(DRAWS))
def test_nested_levels_draw_as_torch(name, inner, outer):
    want, got = (_nested(L, name, inner, outer) for L in (torch, staged))
    assert got.shape == want.shape == (3, 4, 2)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # along a "same" level every entry is the first one's; along a "different" one not
    for axis, randomness in ((0, outer), (1, inner)):
        first = np.take(got, [0], axis)
        assert (got == first).all() == (randomness == "same"), (axis, randomness)


def test_outer_different_inner_same_with_the_outer_dim_inside():
    want, got = (_nested(L, "randn_like", "same", "different", in_dims=1) for L in (torch, staged))
    assert got.shape == want.shape == (4, 3, 2)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_an_inner_result_batched_at_the_outer_level_only():
    """``vmap(lambda y: vmap(lambda x: y)(x))``: ``y`` broadcast over the inner batch."""

    def run(L):
        y = L.arange(6.0).reshape(3, 2)
        return to_numpy(L.func.vmap(lambda y: L.func.vmap(lambda x: y * 2)(L.ones(4)))(y))

    want, got = run(torch), run(staged)
    assert got.shape == want.shape == (3, 4, 2)
    np.testing.assert_array_equal(got, want)
