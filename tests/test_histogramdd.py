"""``histogramdd`` against torch 2.13: counts, weights, density, explicit bins and ranges
in every form torch takes, leading dims of points, and torch's errors; ``histogram`` is its
one-dimensional case."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged

CASES = {
    "one count": lambda L, x: L.histogramdd(x, bins=3),
    "counts per dim": lambda L, x: L.histogramdd(x, bins=[2, 4]),
    "range": lambda L, x: L.histogramdd(x, bins=(2, 3), range=[-1.0, 1.0, 0.0, 2.0]),
    "density": lambda L, x: L.histogramdd(x, bins=(2, 3), density=True),
    "weights": lambda L, x: L.histogramdd(x, bins=2, weight=L.arange(40.0).reshape(4, 10)),
    "edges": lambda L, x: L.histogramdd(
        x, bins=[L.tensor([-2.0, 0.0, 0.5, 2.0]), L.tensor([-1.0, 1.0])]
    ),
    "edges, density": lambda L, x: L.histogramdd(
        x, bins=[L.tensor([-2.0, 0.0, 0.5, 2.0]), L.tensor([-1.0, 1.0])], density=True
    ),
    "three dims": lambda L, x: L.histogramdd(x.reshape(-1, 4)[:, :3], bins=[2, 3, 2]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_histogramdd_is_torch_s(case):
    x = np.random.default_rng(0).standard_normal((4, 10, 2)).astype(np.float32)
    ours, theirs = CASES[case](staged, staged.tensor(x)), CASES[case](torch, torch.tensor(x))
    assert type(ours).__name__ == type(theirs).__name__ == "histogramdd"
    assert isinstance(ours, staged.return_types.histogramdd)
    np.testing.assert_allclose(ours.hist.numpy(), theirs.hist.numpy(), rtol=1e-6)
    assert len(ours.bin_edges) == len(theirs.bin_edges)
    for e, f in zip(ours.bin_edges, theirs.bin_edges):
        np.testing.assert_allclose(e.numpy(), f.numpy(), rtol=1e-6)


def test_errors_are_torch_s():
    x = staged.randn(10, 2)
    cases = [
        (lambda: staged.histogramdd(x, bins=[3, 4, 5]), "size of bins must be equal"),
        (lambda: staged.histogramdd(x, bins=3, range=[0.0, 1.0]), "range should have 4 elements"),
        (
            lambda: staged.histogramdd(x, bins=[staged.linspace(0, 1, 3)]),
            "expected 2 sequences of bin edges",
        ),
        (
            lambda: staged.histogramdd(x, bins=3, weight=staged.ones(3)),
            r"input with shape \[10, 2\] and weight with shape \[3\]",
        ),
        (lambda: staged.histogramdd(staged.ones(3), bins=3), "at least 2 dimensions"),
        (lambda: staged.histogramdd(x, bins=[2, 0]), "bins must be > 0, but got 0 for dimension 1"),
    ]
    cases.append(
        (
            lambda: staged.histogramdd(staged.randn(2, 5, 2), bins=2, weight=staged.ones(10)),
            r"input with shape \[2, 5, 2\] and weight with shape \[10\]",
        )
    )
    for call, message in cases:
        with pytest.raises(RuntimeError, match=message):
            call()
    with pytest.raises(RuntimeError, match="same shape as the input"):
        staged.histogram(staged.ones(2, 3), bins=2, weight=staged.ones(3, 2))
