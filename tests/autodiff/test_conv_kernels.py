"""The fused convolution and max-pooling kernels (staged/autodiff/nn.py) against torch:
every geometry's values and gradients, and max pooling's picks (first maximum, last NaN)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
import staged.nn.functional as F

GEOMETRIES = [  # stride, padding, dilation
    (1, 0, 1),
    (2, 1, 1),
    (1, 2, 2),
    (3, 0, 1),
    ((2, 1), (1, 0), (1, 2)),
]


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_is_torchs(geometry, bias):
    stride, padding, dilation = geometry
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(3, 2, 9, 8), (4, 2, 3, 3)]]
    if bias:
        arrays.append(rng.standard_normal(4).astype(np.float32))
    ours = [staged.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    y = F.conv2d(*ours, stride=stride, padding=padding, dilation=dilation)
    yt = torch.nn.functional.conv2d(*theirs, stride=stride, padding=padding, dilation=dilation)
    assert y.grad_fn.name() == "ConvolutionBackward0"  # the fused kernel ran
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(staged.tensor(g))
    yt.backward(torch.from_numpy(g))
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kernel, stride, padding, dilation", [(2, 2, 0, 1), (3, 2, 1, 1), (3, 1, 1, 2), (2, 3, 0, 1)]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d_picks_torchs_maximum_among_ties_nan_and_inf(
    kernel, stride, padding, dilation, dtype
):
    rng = np.random.default_rng(1)
    x = rng.integers(-2, 2, (2, 3, 7, 8)).astype(dtype)  # many ties
    x.flat[rng.integers(0, x.size, 6)] = np.nan
    x.flat[rng.integers(0, x.size, 6)] = -np.inf
    g = rng.standard_normal((2, 3, 7, 8)).astype(dtype)  # cut to the output's shape below
    xs, xt = staged.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y = F.max_pool2d(xs, kernel, stride, padding, dilation, ceil_mode=True)
    yt = torch.nn.functional.max_pool2d(xt, kernel, stride, padding, dilation, ceil_mode=True)
    assert y.grad_fn.name() == "MaxPoolWithIndicesBackward0"  # the fused kernel ran
    gy = g[(slice(None), slice(None)) + tuple(slice(0, s) for s in y.shape[2:])].copy()
    gy.flat[0] = np.inf  # not picked elsewhere: zeros there, not inf * 0
    y.backward(staged.tensor(gy))
    yt.backward(torch.from_numpy(gy))
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    tol = 1e-6 if dtype == np.float32 else 1e-12  # overlapping windows add in another order
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=tol, atol=tol)
