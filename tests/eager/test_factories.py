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


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32"])
@pytest.mark.parametrize(
    "args",
    [
        (-np.pi, np.pi, 2000),
        (0, 1, 10),
        (1.5, -2.25, 1001),
        (-3, 7, 37),
        (0, 100, 7),
        (2, 2, 5),
        (0, 1, 2),
        (0, 1, 1),
        (0, 1, 0),
        (0.1, 0.2, 3),
    ],
)
def test_linspace_is_torchs_to_the_bit(args, dtype):
    """torch rounds ``start + step * i`` (first half) and ``end - step * (steps - 1 - i)``
    (second half) once (a fused multiply-add; each operation in float16 and bfloat16):
    ``np.linspace`` differs in the last bit of 30 % of the values of (-pi, pi, 2000)."""
    got = staged.linspace(*args, dtype=getattr(staged, dtype))
    want = torch.linspace(*args, dtype=getattr(torch, dtype))
    assert str(got.dtype) == str(want.dtype).replace("torch", "staged")
    np.testing.assert_array_equal(got.double().numpy(), want.double().numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "args", [(0, 1, 0.1), (-3.3, 7.1, 0.013), (1.5, 40.2, 0.7), (1, -1, -0.03), (0, 1000, 0.123)]
)
def test_float_arange_is_torchs_to_the_bit(args, dtype):
    """torch's AVX2 kernel: 8-float (4-double) vectors from a rounded base, the tail one by
    one, each value a fused multiply-add in float64 (``np.arange`` differed in the last bit
    of 19 % of (-3.3, 7.1, 0.013)'s float32 values)."""
    got = staged.arange(*args, dtype=getattr(staged, dtype)).numpy()
    np.testing.assert_array_equal(got, torch.arange(*args, dtype=getattr(torch, dtype)).numpy())


@pytest.mark.parametrize("dtype", ["float64", "float16", "int32", "int16", "uint8", "bool"])
@pytest.mark.parametrize("make", ["tensor", "as_tensor"])
def test_a_torch_tensor_keeps_its_dtype(make, dtype):
    """An array-like (a torch tensor, as a NumPy array) keeps its dtype, as in torch: a
    float64 torch tensor became float32 (the default dtype of Python floats), int32
    int64."""
    t = torch.arange(4).to(getattr(torch, dtype))
    got = getattr(staged, make)(t)
    assert str(got.dtype) == f"staged.{dtype}"
    np.testing.assert_array_equal(got.numpy(), t.numpy())
    assert str(getattr(torch, make)(t).dtype) == f"torch.{dtype}"
