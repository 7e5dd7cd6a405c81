"""col2im's MLIR lowering: input gradients of convolutions and poolings against torch,
static and with a dynamic batch (strided, dilated, padded, windows that skip rows)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged

rng = np.random.default_rng(0)

# (input shape, weight shape, conv2d keywords); kernels overlapping or not, strided,
# dilated, padded beyond the windows, windows that skip input rows
CASES = [
    ((2, 3, 12, 10), (4, 3, 5, 5), {}),
    ((1, 2, 9, 11), (3, 2, 3, 2), {"stride": (2, 3), "padding": (2, 1)}),
    ((2, 2, 13, 8), (2, 2, 3, 3), {"stride": 2, "dilation": (2, 1), "padding": (1, 0)}),
    ((1, 1, 7, 7), (1, 1, 2, 2), {"stride": 3}),
]


def _loss(lib, x, w, kw):
    f = lib.nn.functional
    h = f.conv2d(x.tanh(), w, **kw)
    return (h * h).sum() + f.max_pool2d(x, 2).exp().sum() + f.avg_pool2d(x, 3, 2, 1).sum()


def _want(xa, wa, kw):
    x, w = (torch.tensor(a, requires_grad=True) for a in (xa, wa))
    return [g.numpy() for g in torch.autograd.grad(_loss(torch, x, w, kw), [x, w])]


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("shape,wshape,kw", CASES)
def test_conv_and_pool_input_gradients_match_torch(shape, wshape, kw, dynamic):
    xa, wa = (rng.standard_normal(s).astype(np.float32) for s in (shape, wshape))

    def step(x, w):
        return staged.autograd.grad(_loss(staged, x, w, kw), [x, w])

    compiled = staged.compile(step, dynamic=dynamic)
    got = compiled(*(staged.tensor(a, requires_grad=True) for a in (xa, wa)))
    for g, w in zip(got, _want(xa, wa, kw), strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-4)
