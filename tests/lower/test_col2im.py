"""col2im's MLIR lowering: input gradients of convolutions and poolings against torch,
static and with a dynamic batch (strided, dilated, padded, windows that skip rows)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged.lower.mlir import to_mlir
from staged.runtime import compiler

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


# kernels of two offsets (2, 2x1, 2x1x1): col2im's generic then had two operands, the
# first reading ``d2 + c``, which crashed IREE 3.13 (SIGSEGV, the whole process) where
# nothing fused into it: here the input's gradient is col2im's result itself
TWO_OFFSETS = [
    ("conv1d", (2, 3, 9), (4, 3, 2), {}),
    ("conv2d", (2, 3, 9, 7), (4, 3, 2, 1), {"stride": (2, 1), "padding": (1, 0)}),
    ("conv3d", (1, 2, 5, 4, 3), (2, 2, 2, 1, 1), {"dilation": (2, 1, 1)}),
]


def _conv_loss(lib, name, x, w, kw):
    return getattr(lib.nn.functional, name)(x, w, **kw).square().sum()


def _conv_grad(name, kw):
    def step(x, w):
        return staged.autograd.grad(_conv_loss(staged, name, x, w, kw), [x, w])

    return step


@pytest.mark.parametrize("name,shape,wshape,kw", TWO_OFFSETS)
def test_a_two_offset_kernel_compiles_in_an_iree_compile_process(name, shape, wshape, kw):
    """Compiled apart from this process first, so that a compiler crash fails this test
    instead of killing the test run."""
    args = [staged.tensor(np.ones(s, np.float32), requires_grad=True) for s in (shape, wshape)]
    graph = staged.capture(_conv_grad(name, kw), *args).graph
    assert [op.prim.name for op in graph.ops].count("col2im") == 1
    flags = compiler.flags("llvm-cpu") + compiler.STEP_FLAGS["llvm-cpu"]
    assert compiler.compile_subprocess(to_mlir(graph), flags)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("name,shape,wshape,kw", TWO_OFFSETS)
def test_two_offset_kernel_gradients_match_torch(name, shape, wshape, kw, dynamic):
    xa, wa = (rng.standard_normal(s).astype(np.float32) for s in (shape, wshape))
    compiled = staged.compile(_conv_grad(name, kw), dynamic=dynamic)
    got = compiled(*(staged.tensor(a, requires_grad=True) for a in (xa, wa)))
    x, w = (torch.tensor(a, requires_grad=True) for a in (xa, wa))
    want = torch.autograd.grad(_conv_loss(torch, name, x, w, kw), [x, w])
    for g, t in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-4, atol=1e-4)
