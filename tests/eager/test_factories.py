"""Factories without a row in the op database (they take no tensor): against torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged


@pytest.mark.parametrize(
    "args",
    [(-2, 3, 7), (0, 4, 5, 2.0), (1.0, -1.0, 4), (0, 1, 0), (0, 1, 1)],
)
def test_logspace_matches_torch(args):
    np.testing.assert_allclose(
        staged.logspace(*args).numpy(), torch.logspace(*args).numpy(), rtol=1e-6
    )
    assert staged.logspace(*args, dtype=staged.float64).dtype == staged.float64
