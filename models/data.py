"""scikit-learn's bundled 8x8 digits as float32 arrays, with a seeded split."""

from __future__ import annotations

import numpy as np


def load_digits(test_size: int = 360, seed: int = 0):
    """Return (x_train, y_train, x_test, y_test): x float32 in [0, 1] (N, 64), y int64."""
    from sklearn.datasets import load_digits as _load

    d = _load()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(x))
    test, train = perm[:test_size], perm[test_size:]
    return x[train], y[train], x[test], y[test]


def batches(x, y, batch_size: int, rng: np.random.Generator | None = None):
    """Yield full (x, y) batches, shuffled when `rng` is given; the partial last batch is dropped."""
    idx = rng.permutation(len(x)) if rng is not None else np.arange(len(x))
    for i in range(0, len(x) - batch_size + 1, batch_size):
        j = idx[i : i + batch_size]
        yield x[j], y[j]
