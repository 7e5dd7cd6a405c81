"""conv_tbc (fairseq's time-batch-channel convolution) against torch 2.13: values and
gradients for each padding, eagerly and compiled, and torch's shape errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close

RNG = np.random.default_rng(3)
X, W, B = (RNG.standard_normal(s).astype(np.float32) for s in ((6, 2, 3), (3, 3, 4), (4,)))


@pytest.mark.parametrize("pad", [0, 1, 2])
def test_values_and_gradients(pad):
    results = []
    for lib in (staged, torch):
        ts = [lib.tensor(a, requires_grad=True) for a in (X, W, B)]
        y = lib.nn.functional.conv_tbc(*ts, pad)
        (y * y).sum().backward()
        results.append([y] + [t.grad for t in ts])
    for ours, theirs in zip(*results):
        assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    compiled = staged.compile(lambda *a: staged.conv_tbc(*a, pad))(*map(staged.tensor, (X, W, B)))
    assert_close(compiled, results[1][0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "shapes",
    [((6, 2), (3, 3, 4), (4,)), ((6, 2, 3), (3, 4), (4,)), ((6, 2, 3), (3, 3, 4), (4, 1))]
    + [((6, 2, 3), (3, 2, 4), (4,)), ((6, 2, 3), (3, 3, 4), (3,))],
)
def test_errors_as_torch(shapes):
    messages = []
    for lib in (staged, torch):
        with pytest.raises(RuntimeError) as e:
            lib.conv_tbc(*(lib.zeros(s) for s in shapes))
        messages.append(str(e.value))
    assert messages[0].endswith(messages[1])
