"""torch.gradient against torch 2.13: uniform and coordinate spacing, edge orders 1 and 2,
chosen dims, integer input; values and the input's gradient, eagerly and compiled; torch's
errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close

X = np.array([[1.0, 4.0, 9.0, 16.0, 20.0], [2.0, 3.0, 5.0, 8.0, 4.0]], np.float32)
COORDS = np.array([0.0, 1.0, 3.0, 7.0, 8.0], np.float32)
CASES = [
    {},
    {"spacing": 2.0, "dim": 1, "edge_order": 2},
    {"spacing": (COORDS,), "dim": 1},
    {"spacing": (COORDS,), "dim": 1, "edge_order": 2},
    {"spacing": [2.0, 3.0]},
    {"dim": [1]},
    {"dim": -1, "edge_order": 2},
]


def _kwargs(lib, kw):
    coords = kw.get("spacing")
    if isinstance(coords, tuple):
        return {**kw, "spacing": tuple(lib.tensor(c) for c in coords)}
    return kw


@pytest.mark.parametrize("kw", CASES, ids=str)
def test_values_and_gradients(kw):
    results = []
    for lib in (staged, torch):
        x = lib.tensor(X, requires_grad=True)
        out = lib.gradient(x, **_kwargs(lib, kw))
        sum((o * (i + 1)).sum() for i, o in enumerate(out)).backward()
        results.append([*out, x.grad])
    assert len(results[0]) == len(results[1])
    for ours, theirs in zip(*results):
        assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
    compiled = staged.compile(lambda x: staged.gradient(x, **_kwargs(staged, kw)))
    for ours, theirs in zip(compiled(staged.tensor(X)), results[1]):
        assert_close(ours, theirs, rtol=1e-6, atol=1e-6)


def test_integer_input_gives_float():
    ours, theirs = (
        staged.gradient(staged.tensor([1, 4, 9])),
        torch.gradient(torch.tensor([1, 4, 9])),
    )
    assert_close(ours[0], theirs[0])


@pytest.mark.parametrize(
    "kw",
    [
        {"spacing": [1.0, 2.0, 3.0]},
        {"spacing": [1.0], "dim": [0, 1]},
        {"dim": (0, 0)},
        {"edge_order": 3},
        {"edge_order": 2},  # dim 0 has 2 entries
    ],
    ids=str,
)
def test_errors_as_torch(kw):
    messages = []
    for lib in (staged, torch):
        with pytest.raises(RuntimeError) as e:
            lib.gradient(lib.ones(2, 4), **kw)
        messages.append(str(e.value))
    assert messages[0].endswith(messages[1])
