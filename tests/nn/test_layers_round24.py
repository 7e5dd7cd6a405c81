"""The layers and functionals of round 24 against torch 2.13: 3-D convolution, pooling and
norms, Lp pooling, max unpooling, fold, local response norms, lazy modules, EmbeddingBag,
grid_sample/affine_grid, the random activations (RReLU, gumbel_softmax, feature alpha
dropout: torch's draws after the same seed), pdist, channel shuffle, 3-D and circular
padding, the new losses (CTC included), nn.Buffer/Container and the deprecated aliases:
values, gradients, errors, and compiled steps that give eager's numbers."""

from __future__ import annotations

import copy
import itertools
import math
import pickle
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import staged
import staged.nn.functional as F
from staged import nn
from tests.checks import (
    assert_close,
    assert_raises_like_torch,
    compare_with_torch,
    raises_like_torch,
    to_numpy,
)
from tests.nn.test_layers import check_layer

RNG = np.random.default_rng(24)
DTYPES = [(np.float32, 2e-5), (np.float64, 1e-10)]


def a(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def f32(*shape):
    return a(*shape, dtype=np.float32)


def pos(*shape, dtype=np.float64):
    """Positive values away from 0 (powers with a fractional exponent)."""
    return (np.abs(a(*shape)) + 0.2).astype(dtype)


def both_seeded(seed, fn):
    """``fn(lib)`` for torch and staged, each right after ``manual_seed(seed)``."""
    torch.manual_seed(seed)
    t = fn(torch)
    staged.manual_seed(seed)
    return fn(staged), t


# --- 3-D convolution ----------------------------------------------------------------------------
CONV3D = [
    dict(),
    dict(stride=(1, 2, 1), padding=1, dilation=(1, 1, 2), groups=2),
    dict(padding="same", dilation=2),
    dict(stride=2, padding=(0, 1, 2)),
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("kw", CONV3D, ids=str)
def test_conv3d_matches_torch(kw, dtype, tol):
    compare_with_torch(
        lambda x, w, b: F.conv3d(x, w, b, **kw),
        lambda x, w, b: TF.conv3d(x, w, b, **kw),
        a(2, 4, 5, 6, 5, dtype=dtype),
        a(6, 4 // kw.get("groups", 1), 3, 2, 3, dtype=dtype),
        a(6, dtype=dtype),
        rtol=tol,
        atol=tol,
    )


CONVT3D = [
    dict(),
    dict(stride=2, padding=1, output_padding=1),
    dict(stride=(2, 1, 3), padding=(1, 0, 1), output_padding=(1, 0, 2), groups=2, dilation=1),
    dict(stride=1, dilation=(2, 1, 2), groups=2),
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("kw", CONVT3D, ids=str)
def test_conv_transpose3d_matches_torch(kw, dtype, tol):
    compare_with_torch(
        lambda x, w, b: F.conv_transpose3d(x, w, b, **kw),
        lambda x, w, b: TF.conv_transpose3d(x, w, b, **kw),
        a(2, 4, 3, 4, 3, dtype=dtype),
        a(4, 3, 2, 3, 2, dtype=dtype),
        a(3 * kw.get("groups", 1), dtype=dtype),
        rtol=tol,
        atol=tol,
    )


def test_conv3d_unbatched_and_modules():
    compare_with_torch(
        lambda x, w: F.conv3d(x, w, padding=1),
        lambda x, w: TF.conv3d(x, w, padding=1),
        a(2, 3, 4, 3),
        a(3, 2, 3, 3, 3),
    )
    check_layer(
        lambda ns: ns.nn.Conv3d(4, 6, (3, 2, 3), stride=(2, 1, 1), padding=1, groups=2),
        [f32(2, 4, 5, 4, 6)],
        {},
    )
    check_layer(
        lambda ns: ns.nn.ConvTranspose3d(4, 2, 3, stride=2, padding=1, output_padding=1),
        [f32(1, 4, 3, 2, 3)],
        {},
    )
    check_layer(
        lambda ns: ns.nn.ConvTranspose3d(2, 2, 3, stride=2, padding=1),
        [f32(1, 2, 3, 2, 3)],
        {"output_size": [6, 4, 6]},
    )
    # torch's default initialisation, from the same stream
    m, t = both_seeded(3, lambda ns: ns.nn.Conv3d(2, 4, 3))
    assert_close(m.weight, t.weight, 0, 0)
    assert_close(m.bias, t.bias, 0, 0)
    assert repr(m) == repr(t)


# --- 3-D pooling, *_with_indices, Lp pooling ----------------------------------------------------
@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=2),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
        dict(kernel_size=(2, 3, 2), stride=1, dilation=(2, 1, 1)),
    ],
    ids=str,
)
def test_max_pool3d_matches_torch(kw, dtype, tol):
    x = a(2, 3, 5, 6, 5, dtype=dtype)
    compare_with_torch(
        lambda x: F.max_pool3d(x, **kw), lambda x: TF.max_pool3d(x, **kw), x, rtol=tol, atol=tol
    )
    (y, i), (ty, ti) = (
        F.max_pool3d(staged.tensor(x), return_indices=True, **kw),
        TF.max_pool3d(torch.tensor(x), return_indices=True, **kw),
    )
    assert_close(y, ty, tol, tol)
    assert_close(i, ti, 0, 0)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=2),
        dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
        dict(kernel_size=(3, 2, 3), stride=2, padding=1, ceil_mode=True),
        dict(kernel_size=2, stride=1, divisor_override=3),
    ],
    ids=str,
)
def test_avg_pool3d_matches_torch(kw, dtype, tol):
    compare_with_torch(
        lambda x: F.avg_pool3d(x, **kw),
        lambda x: TF.avg_pool3d(x, **kw),
        a(2, 3, 5, 6, 5, dtype=dtype),
        rtol=tol,
        atol=tol,
    )


def test_pool3d_modules_and_with_indices():
    check_layer(lambda ns: ns.nn.MaxPool3d(2, 1, 1), [f32(2, 2, 4, 3, 4)], {})
    check_layer(
        lambda ns: ns.nn.AvgPool3d(3, 2, 1, count_include_pad=False), [f32(1, 2, 5, 4, 5)], {}
    )
    check_layer(lambda ns: ns.nn.MaxPool3d(2, return_indices=True), [f32(2, 2, 4, 4, 4)], {})
    for ns in (nn, torch.nn):
        assert (
            repr(ns.MaxPool3d(2))
            == "MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
        )
    x = a(2, 3, 7)
    for n in (1, 2, 3):
        xs = a(2, 3, *(6,) * n)
        name = f"max_pool{n}d_with_indices"
        (y, i), (ty, ti) = (
            getattr(F, name)(staged.tensor(xs), 3, 2, 1),
            getattr(TF, name)(torch.tensor(xs), 3, 2, 1),
        )
        assert_close(y, ty)
        assert_close(i, ti, 0, 0)
        name = f"adaptive_max_pool{n}d_with_indices"
        (y, i), (ty, ti) = (
            getattr(F, name)(staged.tensor(xs), 4),
            getattr(TF, name)(torch.tensor(xs), 4),
        )
        assert_close(y, ty)
        assert_close(i, ti, 0, 0)
    assert F.max_pool1d_with_indices(staged.tensor(x), 2)[1].dtype is staged.int64


LP = [
    (1, 2.0, 2, None),
    (1, 3.5, 3, 2),
    (2, 1, 2, None),
    (2, 2.5, (2, 3), (1, 2)),
    (2, math.inf, 2, 1),
    (3, 2, 2, None),
    (3, 1.5, (1, 2, 2), 1),
    (3, -math.inf, 2, None),
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("n,p,kernel,stride", LP, ids=str)
def test_lp_pool_matches_torch(n, p, kernel, stride, dtype, tol):
    name = f"lp_pool{n}d"
    x = pos(2, 3, *(5,) * n, dtype=dtype) * np.where(RNG.random((2, 3, *(5,) * n)) < 0.3, -1, 1)
    if p % 1:
        x = np.abs(x)  # a fractional power of a negative number is NaN in both
    for ceil_mode in (False, True):
        compare_with_torch(
            lambda x: getattr(F, name)(x, p, kernel, stride, ceil_mode),
            lambda x: getattr(TF, name)(x, p, kernel, stride, ceil_mode),
            x,
            rtol=tol,
            atol=tol,
        )


def test_lp_pool_modules():
    check_layer(lambda ns: ns.nn.LPPool1d(2, 3, 2), [f32(2, 3, 9)], {})
    check_layer(lambda ns: ns.nn.LPPool2d(3, 2), [np.abs(f32(2, 3, 4, 6)) + 0.1], {})
    check_layer(lambda ns: ns.nn.LPPool3d(2, (2, 1, 2)), [f32(1, 2, 4, 3, 4)], {})
    assert repr(nn.LPPool2d(2, 3)) == repr(torch.nn.LPPool2d(2, 3))


FRACTIONAL = [
    (2, (2, 3, 7, 8), 2, dict(output_size=3)),
    (2, (3, 9, 9), (2, 3), dict(output_size=(4, 2))),
    (2, (2, 2, 8, 6), 3, dict(output_ratio=(0.5, 0.6))),
    (2, (1, 2, 5, 5), 2, dict(output_size=1)),
    (3, (2, 2, 6, 7, 8), 2, dict(output_size=3)),
    (3, (2, 6, 7, 8), (2, 3, 2), dict(output_ratio=(0.5, 0.5, 0.5))),
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("n,shape,kernel,kw", FRACTIONAL, ids=str)
def test_fractional_max_pool_matches_torch(n, shape, kernel, kw, dtype, tol):
    """Given samples, and drawn ones (torch's ``rand`` after the same seed)."""
    name = f"fractional_max_pool{n}d"
    x = a(*shape, dtype=dtype)
    samples = RNG.random((shape[0] if len(shape) == n + 2 else 1, shape[-n - 1], n)).astype(dtype)
    compare_with_torch(
        lambda x: getattr(F, name)(x, kernel, _random_samples=staged.tensor(samples), **kw),
        lambda x: getattr(TF, name)(x, kernel, _random_samples=torch.tensor(samples), **kw),
        x,
        rtol=tol,
        atol=tol,
    )

    def drawn(ns):
        y, i = getattr(ns.nn.functional, name)(ns.tensor(x), kernel, return_indices=True, **kw)
        return y, i, ns.rand(2)

    for s, t in zip(*both_seeded(6, drawn)):
        assert_close(s, t, 0, 0)


def test_fractional_max_pool_modules():
    for n, shape in ((2, (2, 3, 8, 7)), (3, (1, 2, 6, 5, 7))):
        x = f32(*shape)

        def run(ns):
            m = getattr(ns.nn, f"FractionalMaxPool{n}d")(2, output_ratio=0.5, return_indices=True)
            xs = ns.tensor(x, requires_grad=True)
            y, i = m(xs)
            y.sum().backward()
            return y, i, xs.grad

        for s, t in zip(*both_seeded(8, run)):
            assert_close(s, t, 0, 0)
    assert repr(nn.FractionalMaxPool2d(2, 3)) == repr(torch.nn.FractionalMaxPool2d(2, 3))


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.FractionalMaxPool3d(0, output_size=2),
        lambda ns: ns.nn.FractionalMaxPool2d(2),
        lambda ns: ns.nn.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5),
        lambda ns: ns.nn.FractionalMaxPool2d(2, output_ratio=1.5),
        lambda ns: ns.nn.functional.fractional_max_pool2d(ns.ones(2, 3, 5, 5), 2),
        lambda ns: ns.nn.functional.fractional_max_pool2d(ns.ones(2, 3, 5, 5), 3, output_size=4),
        lambda ns: ns.nn.functional.fractional_max_pool2d(ns.ones(2, 3, 0, 5), 2, output_size=2),
        lambda ns: ns.nn.functional.fractional_max_pool2d(
            ns.ones(4, 4), 2, output_size=3, _random_samples=ns.rand(1, 4, 2)
        ),
        lambda ns: ns.nn.functional.fractional_max_pool2d(
            ns.ones(2, 3, 5, 5), 2, output_size=2, _random_samples=ns.rand(2, 3, 3)
        ),
        lambda ns: ns.nn.functional.fractional_max_pool2d(
            ns.ones(2, 3, 5, 5), 2, output_size=2, _random_samples=ns.rand(1, 3, 2)
        ),
        lambda ns: ns.nn.functional.fractional_max_pool3d(ns.ones(1, 1, 5, 4, 4), 2, output_size=3),
        lambda ns: ns.nn.functional.fractional_max_pool3d(ns.ones(1, 1, 4, 4, 4), 2, output_size=3),
        lambda ns: ns.nn.functional.fractional_max_pool3d(
            ns.ones(1, 1, 5, 5, 5), 2, output_size=3, _random_samples=ns.rand(1, 1, 3).double()
        ),
    ],
)
def test_fractional_max_pool_errors_match_torch(call):
    assert_raises_like_torch(call)


# --- max unpooling --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool_inverts_max_pool_like_torch(n, dtype, tol):
    for kernel, stride, padding, size in ((2, None, 0, None), (3, 2, 1, None), (2, None, 0, "big")):
        x = a(2, 3, *((7, 5, 9) if kernel == 3 else (6, 4, 8))[:n], dtype=dtype)
        ty, ti = getattr(TF, f"max_pool{n}d")(
            torch.tensor(x), kernel, stride, padding, return_indices=True
        )
        out = [2 * s + 1 for s in ty.shape[2:]] if size == "big" else None  # within a stride
        compare_with_torch(
            lambda y: getattr(F, f"max_unpool{n}d")(
                y, staged.tensor(ti.numpy()), kernel, stride, padding, out
            ),
            lambda y: getattr(TF, f"max_unpool{n}d")(y, ti, kernel, stride, padding, out),
            ty.numpy(),
            rtol=tol,
            atol=tol,
        )


def test_max_unpool_modules_and_unbatched():
    x = f32(2, 6, 6)
    ty, ti = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    check_layer(lambda ns: ns.nn.MaxUnpool2d(2), [ty.numpy(), ti.numpy()], {})
    x = f32(2, 2, 4, 4, 4)
    ty, ti = TF.max_pool3d(torch.tensor(x), 2, return_indices=True)
    check_layer(lambda ns: ns.nn.MaxUnpool3d(2), [ty.numpy(), ti.numpy()], {})
    ty, ti = TF.max_pool1d(torch.tensor(f32(2, 3, 8)), 2, return_indices=True)
    check_layer(lambda ns: ns.nn.MaxUnpool1d(2), [ty.numpy(), ti.numpy()], {"output_size": [9]})
    assert repr(nn.MaxUnpool2d(2)) == repr(torch.nn.MaxUnpool2d(2))


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.functional.max_unpool2d(
            ns.ones(1, 1, 2, 2), ns.tensor([[[[0, 1], [2, 100]]]]), 2
        ),
        lambda ns: ns.nn.functional.max_unpool2d(
            ns.ones(1, 1, 2, 2), ns.tensor([[[[0, 1], [2, -1]]]]), 2
        ),
        lambda ns: ns.nn.functional.max_unpool2d(
            ns.ones(1, 1, 2, 2), ns.tensor([[[[0, 1], [2, 3]]]]).int(), 2
        ),
        lambda ns: ns.nn.functional.max_unpool2d(
            ns.ones(1, 1, 2, 2), ns.tensor([[[0, 1], [2, 3]]]), 2
        ),
        lambda ns: ns.nn.functional.max_unpool2d(ns.ones(2, 2), ns.tensor([[0, 1], [2, 3]]), 2),
        lambda ns: ns.nn.functional.max_unpool2d(
            ns.ones(1, 1, 2, 2), ns.zeros(1, 1, 2, 2).long(), 2, output_size=(9, 9)
        ),
        lambda ns: ns.nn.functional.max_unpool2d(
            ns.ones(1, 1, 2, 2), ns.zeros(1, 1, 2, 2).long(), 2, output_size=(4, 4, 4)
        ),
        lambda ns: ns.nn.functional.max_unpool3d(
            ns.ones(1, 1, 2, 2, 2), ns.zeros(1, 1, 2, 2, 2).long() + 100, 2
        ),
        lambda ns: ns.nn.functional.max_unpool3d(ns.ones(2, 2, 2), ns.zeros(2, 2, 2).long(), 2),
        lambda ns: ns.nn.functional.max_unpool3d(
            ns.ones(1, 1, 2, 2, 2), ns.zeros(1, 1, 2, 2, 2).int(), 2
        ),
        lambda ns: ns.nn.functional.max_unpool1d(ns.ones(1, 1, 2), ns.tensor([[[0, 9]]]), 2),
        lambda ns: ns.nn.functional.max_unpool1d(ns.ones(2), ns.tensor([0, 1]), 2),
    ],
)
def test_max_unpool_errors_match_torch(call):
    assert_raises_like_torch(call)


# --- fold / unfold --------------------------------------------------------------------------------
FOLDS = [
    ((4, 5), (2, 3), 1, 0, 1),
    ((5, 6), (2, 3), 1, 1, (1, 2)),
    ((7, 6), 3, (2, 1), (1, 0), 2),
    ((3, 3), 1, 1, 0, 1),
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("out,kernel,dilation,padding,stride", FOLDS, ids=str)
def test_fold_matches_torch(out, kernel, dilation, padding, stride, dtype, tol):
    cols = TF.unfold(torch.zeros(1, 1, *out), kernel, dilation, padding, stride).shape
    k, blocks = cols[1], cols[2]
    for shape in ((2, 2 * k, blocks), (3 * k, blocks)):
        compare_with_torch(
            lambda x: F.fold(x, out, kernel, dilation, padding, stride),
            lambda x: TF.fold(x, out, kernel, dilation, padding, stride),
            a(*shape, dtype=dtype),
            rtol=tol,
            atol=tol,
        )


def test_fold_unfold_modules():
    check_layer(
        lambda ns: ns.nn.Fold((5, 6), (2, 3), padding=1, stride=(1, 2)), [f32(2, 12, 18)], {}
    )
    check_layer(lambda ns: ns.nn.Unfold((2, 3), dilation=(1, 2), padding=1), [f32(2, 2, 5, 6)], {})
    assert repr(nn.Fold((4, 5), (2, 3))) == repr(torch.nn.Fold((4, 5), (2, 3)))
    assert repr(nn.Unfold((2, 3))) == repr(torch.nn.Unfold((2, 3)))


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.functional.fold(ns.ones(2, 7, 9), (4, 4), (2, 3)),
        lambda ns: ns.nn.functional.fold(ns.ones(2, 12, 10), (4, 5), (2, 3)),
        lambda ns: ns.nn.functional.fold(ns.ones(12, 10), (4, 5), (2, 3)),
        lambda ns: ns.nn.functional.fold(ns.ones(2, 3, 12, 10), (4, 5), (2, 3)),
        lambda ns: ns.nn.functional.fold(ns.ones(12, 6), (4, 5), (2, 3), stride=0),
        lambda ns: ns.nn.functional.fold(ns.ones(12, 6), (4, 5), (2, 3), padding=-1),
        lambda ns: ns.nn.functional.fold(ns.ones(12, 6), (4, 5), (2, 3), dilation=0),
        lambda ns: ns.nn.functional.fold(ns.ones(12, 6), (4, 5), (0, 3)),
        lambda ns: ns.nn.functional.fold(ns.ones(12, 6), (1, 1), (2, 3)),
        lambda ns: ns.nn.functional.fold(ns.ones(2, 0, 6), (4, 5), (2, 3)),
    ],
)
def test_fold_errors_match_torch(call):
    assert_raises_like_torch(call)


# --- local response norms, 3-D batch and instance norm -------------------------------------------
@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize(
    "shape,size", [((2, 5, 4), 3), ((2, 6, 3, 4), 2), ((2, 4, 2, 3, 3), 5), ((1, 3, 4), 1)], ids=str
)
def test_local_response_norm_matches_torch(shape, size, dtype, tol):
    compare_with_torch(
        lambda x: F.local_response_norm(x, size, 0.3, 0.6, 1.5),
        lambda x: TF.local_response_norm(x, size, 0.3, 0.6, 1.5),
        a(*shape, dtype=dtype),
        rtol=tol,
        atol=tol,
    )


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("size,channels", [(2, 7), (3, 7), (5, 7), (5, 3), (4, 9), (3, 1)])
def test_cross_map_lrn2d_matches_torch(size, channels, dtype, tol):
    """torch's legacy layer, its forward window and its own backward formula included."""
    compare_with_torch(
        lambda x: nn.CrossMapLRN2d(size, 0.2, 0.8, 2)(x),
        lambda x: torch.nn.CrossMapLRN2d(size, 0.2, 0.8, 2)(x),
        a(2, channels, 3, 2, dtype=dtype),
        rtol=tol,
        atol=tol,
    )


def test_norm_modules():
    check_layer(lambda ns: ns.nn.LocalResponseNorm(3, 0.1, 0.5, 2.0), [f32(2, 5, 3, 3)], {})
    assert repr(nn.LocalResponseNorm(2)) == repr(torch.nn.LocalResponseNorm(2))
    assert repr(nn.CrossMapLRN2d(3)) == repr(torch.nn.CrossMapLRN2d(3))
    check_layer(lambda ns: ns.nn.BatchNorm3d(3, momentum=0.3), [f32(2, 3, 2, 3, 2)], {})
    check_layer(lambda ns: ns.nn.BatchNorm3d(3).eval(), [f32(2, 3, 2, 3, 2)], {})
    check_layer(
        lambda ns: ns.nn.InstanceNorm3d(3, affine=True, track_running_stats=True),
        [f32(2, 3, 2, 3, 2)],
        {},
    )
    check_layer(lambda ns: ns.nn.InstanceNorm3d(3), [f32(3, 2, 3, 2)], {})
    assert repr(nn.BatchNorm3d(3)) == repr(torch.nn.BatchNorm3d(3))


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.functional.local_response_norm(ns.ones(2, 3), 2),
        lambda ns: ns.nn.CrossMapLRN2d(3)(ns.ones(2, 3, 4)),
        lambda ns: ns.nn.BatchNorm3d(3)(ns.ones(2, 3, 4, 4)),
        lambda ns: ns.nn.InstanceNorm3d(3)(ns.ones(2, 3, 4)),
    ],
)
def test_norm_errors_match_torch(call):
    assert_raises_like_torch(call)


# --- lazy modules ----------------------------------------------------------------------------------
LAZY = [
    ("LazyLinear", (3,), {}, (2, 4)),
    ("LazyLinear", (3,), {"bias": False}, (5,)),
    ("LazyConv1d", (4, 3), {"padding": 1}, (2, 3, 6)),
    ("LazyConv2d", (4, 3), {"groups": 2, "stride": 2}, (1, 2, 5, 5)),
    ("LazyConv3d", (2, 2), {}, (2, 4, 3, 3)),
    ("LazyConvTranspose1d", (4, 3), {"groups": 2, "bias": False}, (1, 2, 5)),
    ("LazyConvTranspose2d", (2, 3), {"stride": 2, "output_padding": 1}, (1, 3, 3, 3)),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 2, 2, 2, 2)),
    ("LazyBatchNorm1d", (), {}, (4, 3)),
    ("LazyBatchNorm2d", (), {"affine": False}, (2, 3, 2, 2)),
    ("LazyBatchNorm3d", (), {"track_running_stats": False}, (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 4)),
    ("LazyInstanceNorm2d", (), {"affine": False, "track_running_stats": False}, (2, 3, 2, 2)),
    ("LazyInstanceNorm3d", (), {"bias": False}, (2, 3, 2, 2, 2)),
]


@pytest.mark.filterwarnings("ignore:input's size at dim=1 does not match num_features")
@pytest.mark.parametrize("name,args,kw,shape", LAZY, ids=lambda v: str(v))
def test_lazy_modules_initialise_as_torch(name, args, kw, shape):
    """The first call materializes and initialises (from torch's stream, in torch's order)
    and turns the module into its regular class; then it computes as that class."""
    x = f32(*shape)

    def run(ns):
        m = getattr(ns.nn, name)(*args, **kw)
        before = repr(m), m.has_uninitialized_params()
        ns.randn(3)  # a draw between construction and the first call, as torch's order
        y = m(ns.tensor(x))
        return m, y, before

    (m, y, before), (tm, ty, tbefore) = both_seeded(5, run)
    assert before == tbefore
    assert type(m).__name__ == type(tm).__name__
    assert not any(nn.modules.lazy.is_lazy(v) for v in m.state_dict().values())
    assert repr(m) == repr(tm)
    assert_close(y, ty, 1e-5, 1e-5)
    assert list(m.state_dict()) == list(tm.state_dict())
    params = dict(m.named_parameters())
    for k, v in m.state_dict().items():  # parameters as drawn; running statistics computed
        tol = 0 if k in params else 1e-6
        assert_close(v, tm.state_dict()[k], tol, tol)
    assert not hasattr(m, "_initialize_hook")


def test_uninitialized_parameters():
    m = nn.LazyLinear(3)
    assert isinstance(m.weight, nn.UninitializedParameter) and isinstance(m.weight, nn.Parameter)
    assert repr(m.weight) == "<UninitializedParameter>" and m.weight.requires_grad
    assert [type(v).__name__ for v in m.state_dict().values()] == ["UninitializedParameter"] * 2
    assert m.weight.dtype is staged.float32
    assert nn.LazyLinear(2, dtype=staged.float64).weight.dtype is staged.float64
    for call in (lambda p: p + 1, lambda p: p.sum(), lambda p: p.shape, lambda p: p @ p):
        raises_like_torch(lambda ns: call(ns.nn.UninitializedParameter()))
    b = nn.UninitializedBuffer()
    assert repr(b) == "<UninitializedBuffer>" and not b.requires_grad
    b.materialize((2, 3))
    assert type(b) is staged.Tensor and b.shape == (2, 3)
    q = copy.deepcopy(nn.LazyConv2d(2, 3))
    assert isinstance(q.weight, nn.UninitializedParameter)
    assert isinstance(
        pickle.loads(pickle.dumps(nn.UninitializedParameter())), nn.UninitializedParameter
    )
    # loading a state dict materializes in its shapes, as torch's (tests/test_trust_probe12)
    lazy = nn.LazyLinear(3)
    lazy.load_state_dict({"weight": np.ones((3, 2)), "bias": np.ones(3)})
    assert type(lazy) is nn.LazyLinear and lazy.weight.tolist() == [[1.0, 1.0]] * 3
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D"):
        nn.LazyConv2d(2, 3)(staged.ones(2, 3))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv2d(2, 3, groups=2)(staged.ones(1, 3, 4, 4))


def test_lazy_module_in_a_compiled_step():
    """A dry run initialises it; then a compiled step gives eager's numbers. Compiled before
    the dry run, it says what to do."""

    def make():
        staged.manual_seed(0)
        return nn.Sequential(
            nn.LazyConv2d(3, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2)
        )

    x = staged.tensor(f32(2, 2, 4, 4))
    with pytest.raises(RuntimeError, match="call it once eagerly"):
        staged.compile(lambda x: make()(x).sum())(x)

    def run(compiled):
        net = make()
        net(x)  # the dry run
        opt = staged.optim.SGD(net.parameters(), lr=0.1)

        def step(x):
            loss = net(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        fn = staged.compile(step) if compiled else step
        return [float(fn(x)) for _ in range(2)], net.state_dict()

    eager, compiled = run(False), run(True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    for k, v in eager[1].items():
        assert_close(compiled[1][k], v, 1e-5, 1e-6)


# --- EmbeddingBag ------------------------------------------------------------------------------------
IDX = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 2])
BAGS = [
    dict(offsets=[0, 2, 2, 5]),
    dict(offsets=[0, 2, 2, 5, 10], include_last_offset=True),
    dict(offsets=[0, 3, 10]),
    dict(offsets=[0, 4], padding_idx=2),
    dict(offsets=[0, 4, 6], padding_idx=-8),
    dict(rows=2),
    dict(rows=5, padding_idx=4),
]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("case", BAGS, ids=str)
def test_embedding_bag_matches_torch(case, mode):
    dtype, tol = DTYPES[mode == "mean"]  # float32 for sums and maxima, float64 for means
    case = dict(case)
    rows = case.pop("rows", None)
    idx = IDX.reshape(rows, -1) if rows else IDX
    offsets = case.pop("offsets", None)

    def call(lib, fn):
        off = None if offsets is None else lib.tensor(offsets)
        return lambda w: fn(lib.tensor(idx), w, off, mode=mode, **case)

    compare_with_torch(
        call(staged, F.embedding_bag),
        call(torch, TF.embedding_bag),
        a(10, 3, dtype=dtype),
        rtol=tol,
        atol=tol,
    )


def test_embedding_bag_weights_int32_and_module():
    off = [0, 3, 3, 7]
    compare_with_torch(
        lambda w, p: F.embedding_bag(
            staged.tensor(IDX),
            w,
            staged.tensor(off),
            mode="sum",
            per_sample_weights=p,
            padding_idx=4,
        ),
        lambda w, p: TF.embedding_bag(
            torch.tensor(IDX), w, torch.tensor(off), mode="sum", per_sample_weights=p, padding_idx=4
        ),
        a(10, 4),
        a(10),
    )
    compare_with_torch(
        lambda w: F.embedding_bag(staged.tensor(IDX).int(), w, staged.tensor(off).int()),
        lambda w: TF.embedding_bag(torch.tensor(IDX).int(), w, torch.tensor(off).int()),
        a(10, 4),
    )
    check_layer(lambda ns: ns.nn.EmbeddingBag(10, 3, mode="max"), [IDX, np.array([0, 4, 5])], {})
    check_layer(
        lambda ns: ns.nn.EmbeddingBag(10, 3, mode="sum", padding_idx=2), [IDX.reshape(5, 2)], {}
    )
    m, t = both_seeded(1, lambda ns: ns.nn.EmbeddingBag(6, 3, padding_idx=-1))
    assert_close(m.weight, t.weight, 0, 0)
    assert repr(m) == repr(t)
    w = torch.randn(4, 2)
    m, t = (
        nn.EmbeddingBag.from_pretrained(staged.tensor(w.numpy())),
        torch.nn.EmbeddingBag.from_pretrained(w),
    )
    assert repr(m) == repr(t) and not m.weight.requires_grad


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.functional.embedding_bag(
            ns.tensor([1, 2, 3]), ns.ones(10, 3), ns.tensor([0, 2]), mode="foo"
        ),
        lambda ns: ns.nn.functional.embedding_bag(ns.tensor([1, 2, 3]), ns.ones(10, 3)),
        lambda ns: ns.nn.functional.embedding_bag(
            ns.tensor([1, 2, 3]), ns.ones(10, 3), ns.tensor([[0, 2]])
        ),
        lambda ns: ns.nn.functional.embedding_bag(ns.tensor([[[1, 2, 3]]]), ns.ones(10, 3)),
        lambda ns: ns.nn.functional.embedding_bag(
            ns.tensor([1, 2, 3]), ns.ones(10), ns.tensor([0, 2])
        ),
        lambda ns: ns.nn.functional.embedding_bag(
            ns.tensor([1, 2, 3]), ns.ones(10, 3), ns.tensor([0, 4])
        ),
        lambda ns: ns.nn.functional.embedding_bag(
            ns.tensor([1, 2, 3]),
            ns.ones(10, 3),
            ns.tensor([0, 2]),
            per_sample_weights=ns.ones(3),
            mode="mean",
        ),
        lambda ns: ns.nn.functional.embedding_bag(
            ns.tensor([1, 2, 3]).float(), ns.ones(10, 3), ns.tensor([0, 2])
        ),
        lambda ns: ns.nn.functional.embedding_bag(
            ns.tensor([1, 2, 3]), ns.ones(10, 3), ns.tensor([0, 2]), padding_idx=10
        ),
        lambda ns: ns.nn.functional.embedding_bag(
            ns.tensor([1, 2, 3]),
            ns.ones(10, 3),
            ns.tensor([0, 2]),
            mode="max",
            scale_grad_by_freq=True,
        ),
        lambda ns: ns.nn.EmbeddingBag(10, 3, padding_idx=10),
    ],
)
def test_embedding_bag_errors_match_torch(call):
    assert_raises_like_torch(call)


def test_embedding_bag_errors_with_torch_types():
    """Errors whose text names a type, or where torch's text is an internal check: the same
    exception type, staged's words saying what is wrong."""
    bag = lambda ns, idx, off, **kw: ns.nn.functional.embedding_bag(  # noqa: E731
        ns.tensor(idx), ns.ones(10, 3), ns.tensor(off), **kw
    )
    raises_like_torch(lambda ns: bag(ns, [[1, 2]], [0]), "offsets has to be None")
    raises_like_torch(
        lambda ns: bag(ns, [1, 2, 3], [0, 2], per_sample_weights=ns.ones(2), mode="sum"),
        "then it must have the same shape as the input",
    )
    raises_like_torch(lambda ns: bag(ns, [1, 2, 3], [1, 2]), "offsets[0] has to be 0")
    raises_like_torch(lambda ns: bag(ns, [1, 2, 30], [0, 2]))
    # decreasing offsets: torch raises only on its multi-threaded path (not with 1 thread)
    with pytest.raises(RuntimeError, match="index 30 is out of range"):
        F.embedding_bag(staged.tensor([1, 2, 30]), staged.ones(10, 3), staged.tensor([0, 2]))
    with pytest.raises(RuntimeError, match="non-decreasing"):
        F.embedding_bag(staged.tensor([1, 2, 3]), staged.ones(10, 3), staged.tensor([0, 2, 1]))


# --- grid_sample, affine_grid -------------------------------------------------------------------------
GRIDS = list(
    itertools.product(
        (2, 3), ("bilinear", "nearest"), ("zeros", "border", "reflection"), (False, True)
    )
)


@pytest.mark.parametrize("n,mode,padding,align", GRIDS, ids=str)
def test_grid_sample_matches_torch(n, mode, padding, align):
    dtype, tol = DTYPES[align]  # float32 without align_corners, float64 with
    x = a(2, 3, *(4, 5, 6)[3 - n :], dtype=dtype)
    grid = RNG.uniform(-1.6, 1.6, (2, *(3, 2, 4)[:n], n)).astype(dtype)
    compare_with_torch(
        lambda x, g: F.grid_sample(x, g, mode, padding, align),
        lambda x, g: TF.grid_sample(x, g, mode, padding, align),
        x,
        grid,
        rtol=tol,
        atol=tol,
    )


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize(
    "size,align",
    [
        ([2, 3, 4, 5], False),
        ([2, 3, 4, 5], True),
        ([2, 1, 3, 4, 2], False),
        ([2, 1, 2, 3, 4], True),
        ([2, 3, 1, 5], False),
    ],
    ids=str,
)
def test_affine_grid_matches_torch(size, align, dtype, tol):
    k = len(size) - 2
    compare_with_torch(
        lambda t: F.affine_grid(t, size, align),
        lambda t: TF.affine_grid(t, size, align),
        a(2, k, k + 1, dtype=dtype),
        rtol=tol,
        atol=tol,
    )


def test_grid_sample_warns_and_unit_sizes():
    x, g = a(1, 2, 1, 3), RNG.uniform(-1, 1, (1, 2, 2, 2))
    for fn in (
        lambda ns: ns.nn.functional.grid_sample(ns.tensor(x), ns.tensor(g)),
        lambda ns: ns.nn.functional.affine_grid(ns.ones(1, 2, 3), [1, 1, 2, 2]),
    ):
        with pytest.warns(UserWarning, match="align_corners=False since 1.3.0") as ours:
            fn(staged)
        with warnings.catch_warnings(record=True) as theirs:
            warnings.simplefilter("always")
            fn(torch)
        assert str(ours[0].message) == str(theirs[0].message)
    for padding in ("zeros", "border", "reflection"):
        compare_with_torch(
            lambda x, g: F.grid_sample(x, g, padding_mode=padding, align_corners=True),
            lambda x, g: TF.grid_sample(x, g, padding_mode=padding, align_corners=True),
            x,
            g,
        )


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.functional.grid_sample(
            ns.ones(2, 3, 4, 5), ns.zeros(2, 3, 3, 2), mode="foo"
        ),
        lambda ns: ns.nn.functional.grid_sample(
            ns.ones(2, 3, 4, 5), ns.zeros(2, 3, 3, 2), padding_mode="foo"
        ),
        lambda ns: ns.nn.functional.grid_sample(
            ns.ones(2, 3, 4, 5), ns.zeros(2, 3, 3, 2).double(), align_corners=False
        ),
        lambda ns: ns.nn.functional.grid_sample(
            ns.ones(2, 3, 4, 5), ns.zeros(1, 3, 3, 2), align_corners=False
        ),
        lambda ns: ns.nn.functional.grid_sample(
            ns.ones(2, 3, 4, 5), ns.zeros(2, 3, 3, 3), align_corners=False
        ),
        lambda ns: ns.nn.functional.grid_sample(
            ns.ones(2, 3, 0, 5), ns.zeros(2, 3, 3, 2), align_corners=False
        ),
        lambda ns: ns.nn.functional.grid_sample(
            ns.ones(2, 3, 4), ns.zeros(2, 3, 2), align_corners=False
        ),
        lambda ns: ns.nn.functional.grid_sample(
            ns.ones(2, 3, 4, 5, 6), ns.zeros(2, 1, 3, 3, 3), mode="bicubic", align_corners=False
        ),
        lambda ns: ns.nn.functional.affine_grid(ns.ones(2, 2, 3), [2, 3, 4], align_corners=False),
        lambda ns: ns.nn.functional.affine_grid(
            ns.ones(2, 3, 3), [2, 3, 4, 5], align_corners=False
        ),
        lambda ns: ns.nn.functional.affine_grid(
            ns.ones(2, 2, 3).long(), [2, 3, 4, 5], align_corners=False
        ),
        lambda ns: ns.nn.functional.affine_grid(
            ns.ones(2, 2, 3), [2, 3, 0, 5], align_corners=False
        ),
        lambda ns: ns.nn.functional.affine_grid(
            ns.ones(2, 2, 3), [3, 3, 4, 5], align_corners=False
        ),
    ],
)
def test_grid_errors_match_torch(call):
    assert_raises_like_torch(call)


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_bicubic_is_torchs(padding_mode, align_corners):
    """4 x 4 taps of torch's cubic convolution (A = -0.75), padded tap by tap; gradients to
    the input and through the weights to the grid, eagerly and compiled."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (2, 4, 7, 2)).astype(np.float32)  # some positions outside
    kw = dict(mode="bicubic", padding_mode=padding_mode, align_corners=align_corners)

    def step(ns, sample, a, g):
        y = sample(a, g, **kw)
        weighted = (y * ns.arange(float(y.numel())).reshape(y.shape)).sum()
        return (y, *ns.autograd.grad(weighted, (a, g)))

    want = step(torch, TF.grid_sample, *(torch.tensor(v, requires_grad=True) for v in (x, grid)))
    eager = lambda a, g: step(staged, F.grid_sample, a, g)  # noqa: E731
    for f in (eager, staged.compile(eager)):
        got = f(*(staged.tensor(v, requires_grad=True) for v in (x, grid)))
        for ours, theirs in zip(got, want):
            theirs = theirs.detach().numpy()
            np.testing.assert_allclose(to_numpy(ours), theirs, atol=2e-6 * np.abs(theirs).max())


# --- random activations: torch's draws ------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rrelu_training_draws_torchs_slopes(dtype):
    x = a(4, 5, 3, dtype=dtype)

    def run(ns):
        xs = ns.tensor(x, requires_grad=True)
        y = ns.nn.functional.rrelu(xs, 0.1, 0.4, training=True)
        y2 = ns.nn.functional.rrelu(xs, training=True)  # the stream goes on
        (y * y2).sum().backward()
        xi = ns.tensor(x)
        ns.nn.functional.rrelu_(xi, training=True)
        return y, y2, xs.grad, xi, ns.rand(2)

    for s, t in zip(*both_seeded(7, run)):
        assert_close(s, t, 0, 0)


def test_rrelu_eval_module_and_errors():
    compare_with_torch(lambda x: F.rrelu(x, 0.2, 0.3), lambda x: TF.rrelu(x, 0.2, 0.3), a(3, 4))
    m, t = both_seeded(2, lambda ns: ns.nn.RReLU(0.1, 0.3))
    x = f32(3, 4)
    staged.manual_seed(4)
    torch.manual_seed(4)
    assert_close(m(staged.tensor(x)), t(torch.tensor(x)), 0, 0)
    assert_close(m.eval()(staged.tensor(x)), t.eval()(torch.tensor(x)), 0, 0)
    assert repr(m) == repr(t)
    for call in (
        lambda ns: ns.nn.functional.rrelu(ns.ones(3), 0.5, 0.1, training=True),
        lambda ns: ns.nn.functional.rrelu(ns.ones(3).long(), training=True),
        lambda ns: ns.nn.functional.rrelu(ns.ones(3).long()),
    ):
        assert_raises_like_torch(call)
    with pytest.raises(NotImplementedError, match="training=False"):
        staged.compile(lambda x: F.rrelu(x, training=True))(staged.ones(3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax_draws_torchs_noise(hard, dtype):
    x = a(4, 6, dtype=dtype)

    def run(ns):
        xs = ns.tensor(x, requires_grad=True)
        y = ns.nn.functional.gumbel_softmax(xs, tau=0.7, hard=hard, dim=0)
        (y * ns.tensor(np.arange(24.0).reshape(4, 6).astype(dtype))).sum().backward()
        return y, xs.grad, ns.rand(2)

    tol = 1e-5 if dtype == np.float32 else 1e-12
    for s, t in zip(*both_seeded(11, run)):
        assert_close(s, t, tol, tol)
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated"):
        F.gumbel_softmax(staged.tensor(x), eps=1e-3)


def test_feature_alpha_dropout_draws_torchs_mask():
    x = f32(4, 3, 2, 2)

    def run(ns):
        xs = ns.tensor(x, requires_grad=True)
        y = ns.nn.functional.feature_alpha_dropout(xs, 0.4, training=True)
        y.sum().backward()
        m = ns.nn.FeatureAlphaDropout(0.3)
        return y, xs.grad, m(ns.tensor(x)), m.eval()(ns.tensor(x)), ns.rand(2)

    for s, t in zip(*both_seeded(9, run)):
        assert_close(s, t, 1e-6, 1e-6)
    for call in (
        lambda ns: ns.nn.functional.feature_alpha_dropout(ns.ones(3), 0.5, True),
        lambda ns: ns.nn.functional.feature_alpha_dropout(ns.ones(3), 1.5, True),
    ):
        assert_raises_like_torch(call)
    assert repr(nn.FeatureAlphaDropout()) == repr(torch.nn.FeatureAlphaDropout())


# --- pdist, channel shuffle, padding --------------------------------------------------------------------
@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("p", [0, 1, 1.5, 2, 3, math.inf])
def test_pdist_matches_torch(p, dtype, tol):
    compare_with_torch(
        lambda x: F.pdist(x, p), lambda x: TF.pdist(x, p), a(5, 3, dtype=dtype), rtol=tol, atol=tol
    )
    for rows in (1, 0):
        assert_close(F.pdist(staged.ones(rows, 3)), TF.pdist(torch.ones(rows, 3)))


def test_channel_shuffle_and_padding_layers():
    for groups in (1, 2, 3):
        compare_with_torch(
            lambda x: F.channel_shuffle(x, groups),
            lambda x: TF.channel_shuffle(x, groups),
            a(2, 6, 2, 3),
        )
    compare_with_torch(
        lambda x: F.native_channel_shuffle(x, 2),
        lambda x: TF.native_channel_shuffle(x, 2),
        a(2, 4, 3),
        grad=False,
    )
    check_layer(lambda ns: ns.nn.ChannelShuffle(2), [f32(2, 4, 3, 3)], {})
    for make, shape in (
        (lambda ns: ns.nn.CircularPad1d((1, 2)), (2, 3, 4)),
        (lambda ns: ns.nn.CircularPad2d(1), (3, 3, 4)),
        (lambda ns: ns.nn.CircularPad3d((1, 0, 2, 1, 0, 1)), (1, 2, 3, 3, 3)),
        (lambda ns: ns.nn.ConstantPad3d((1, 0, 2, 1, 0, 1), 2.5), (1, 2, 3, 3, 3)),
        (lambda ns: ns.nn.ZeroPad3d(1), (2, 2, 2, 3)),
        (lambda ns: ns.nn.ReflectionPad3d((1, 2, 0, 1, 2, 1)), (1, 2, 3, 4, 3)),
        (lambda ns: ns.nn.ReplicationPad3d(2), (2, 2, 3, 2)),
    ):
        check_layer(make, [f32(*shape)], {})
        assert repr(make(staged)) == repr(make(torch))


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.functional.pdist(ns.ones(3)),
        lambda ns: ns.nn.functional.pdist(ns.ones(3, 2), -1),
        lambda ns: ns.nn.functional.pdist(ns.ones(3, 2).long()),
        lambda ns: ns.nn.functional.channel_shuffle(ns.ones(2, 3), 1),
        lambda ns: ns.nn.functional.channel_shuffle(ns.ones(2, 6, 3), 0),
        lambda ns: ns.nn.functional.channel_shuffle(ns.ones(2, 6, 3), 4),
        lambda ns: ns.nn.CircularPad2d(1)(ns.ones(2, 3)),
        lambda ns: ns.nn.CircularPad1d(4)(ns.ones(2, 3)),
    ],
)
def test_shuffle_pdist_padding_errors_match_torch(call):
    assert_raises_like_torch(call)


# --- losses ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_with_distance_loss(swap, reduction):
    for dist in (None, lambda x, y: 1 - (x * y).sum(-1) / (x.norm(dim=-1) * y.norm(dim=-1))):
        compare_with_torch(
            lambda x, p, n: F.triplet_margin_with_distance_loss(
                x, p, n, distance_function=dist, margin=0.7, swap=swap, reduction=reduction
            ),
            lambda x, p, n: TF.triplet_margin_with_distance_loss(
                x, p, n, distance_function=dist, margin=0.7, swap=swap, reduction=reduction
            ),
            a(4, 3),
            a(4, 3),
            a(4, 3),
        )
    check_layer(
        lambda ns: ns.nn.TripletMarginWithDistanceLoss(swap=swap, reduction=reduction),
        [f32(4, 3), f32(4, 3), f32(4, 3)],
        {},
    )
    assert repr(nn.TripletMarginWithDistanceLoss()) == repr(
        torch.nn.TripletMarginWithDistanceLoss()
    )


MLM_TARGETS = np.array([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 1, 1, 1], [2, 2, -1, 0]])


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss_matches_torch(reduction, dtype, tol):
    x = a(4, 4, dtype=dtype)
    cases = [(x, MLM_TARGETS), (x[0], MLM_TARGETS[0])]
    if reduction == "none":  # torch's sum or mean of an empty batch is uninitialized memory
        cases.append((x[:0], MLM_TARGETS[:0]))
    for xs, ts in cases:
        compare_with_torch(
            lambda x: F.multilabel_margin_loss(x, staged.tensor(ts), reduction=reduction),
            lambda x: TF.multilabel_margin_loss(x, torch.tensor(ts), reduction=reduction),
            xs,
            rtol=tol,
            atol=tol,
        )
    check_layer(
        lambda ns: ns.nn.MultiLabelMarginLoss(reduction=reduction), [f32(4, 4), MLM_TARGETS], {}
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.functional.multilabel_margin_loss(ns.ones(2, 3), ns.tensor([[0, 1, -1]])),
        lambda ns: ns.nn.functional.multilabel_margin_loss(
            ns.ones(2, 3), ns.tensor([[0, 1, 3], [2, -1, 0]])
        ),
        lambda ns: ns.nn.functional.multilabel_margin_loss(
            ns.ones(2, 3), ns.tensor([[0, 1, -2], [2, -1, 0]])
        ),
        lambda ns: ns.nn.functional.multilabel_margin_loss(ns.ones(2, 0), ns.zeros(2, 0).long()),
        lambda ns: ns.nn.functional.multilabel_margin_loss(ns.ones(3), ns.tensor([0.0, 1, -1])),
        lambda ns: ns.nn.functional.multilabel_margin_loss(
            ns.ones(3), ns.tensor([0, 1, -1]), reduction="foo"
        ),
        lambda ns: ns.nn.TripletMarginWithDistanceLoss(margin=0),
        lambda ns: ns.nn.functional.triplet_margin_with_distance_loss(
            ns.ones(2, 3), ns.ones(2, 3), ns.ones(3)
        ),
        lambda ns: ns.nn.functional.triplet_margin_with_distance_loss(
            ns.ones(2, 3), ns.ones(2, 3), ns.ones(2, 3), reduction="foo"
        ),
    ],
)
def test_margin_loss_errors_match_torch(call):
    assert_raises_like_torch(call)


CTC = [
    dict(),
    dict(reduction="sum", blank=2),
    dict(reduction="none", zero_infinity=True, infeasible=True),
    dict(reduction="mean", zero_infinity=True, infeasible=True),
    dict(reduction="none", infeasible=True),  # loss inf, gradient NaN over its steps
    dict(reduction="mean", infeasible=True),
    dict(reduction="none", concatenated=True),
    dict(reduction="none", lists=True),
    dict(reduction="none", unbatched=True),
    dict(reduction="none", empty_input=True),
    dict(softmax=True),
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("case", CTC, ids=str)
def test_ctc_loss_matches_torch(case, dtype, tol):
    """Values and gradients, torch's included (``exp(lp) - posterior``, which is not the
    exact gradient of raw log-probabilities)."""
    case = dict(case)
    t_max, nb, c, s = 8, 3, 5, 4
    lp = a(t_max, nb, c, dtype=dtype)
    blank = case.get("blank", 0)
    labels = np.array([k for k in range(c) if k != blank])
    targets = labels[RNG.integers(0, c - 1, (nb, s))]
    targets[0, 1] = targets[0, 0]  # a repeat needs a blank in between
    il, tl = [8, 6, 7], [4, 2, 0]
    if case.pop("infeasible", False):
        targets[1, :3] = targets[1, 0]
        il, tl = [8, 2, 7], [4, 3, 1]  # sample 1 cannot fit its three repeats in 2 steps
    if case.pop("empty_input", False):
        il = [8, 0, 0]
    concatenated = case.pop("concatenated", False)
    lists = case.pop("lists", False)
    unbatched = case.pop("unbatched", False)
    softmax = case.pop("softmax", False)
    if concatenated:
        targets = np.concatenate([targets[i, :n] for i, n in enumerate(tl)])
    if unbatched:
        lp, targets, il, tl = lp[:, 0], targets[0], il[0], tl[0]

    def call(lib, fn):
        def f(x):
            x = x.log_softmax(-1) if softmax else x
            lengths = (il, tl) if lists else (lib.tensor(il), lib.tensor(tl))
            return fn(x, lib.tensor(targets), *lengths, **case)

        return f

    compare_with_torch(call(staged, F.ctc_loss), call(torch, TF.ctc_loss), lp, rtol=tol, atol=tol)


def test_ctc_module():
    lp = np.log(RNG.dirichlet(np.ones(4), (6, 2))).astype(np.float32)
    check_layer(
        lambda ns: ns.nn.CTCLoss(blank=3, reduction="sum"),
        [lp, np.array([[1, 2, 2], [0, 1, 0]]), np.array([6, 5]), np.array([3, 2])],
        {},
    )
    assert repr(nn.CTCLoss()) == "CTCLoss()"


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4), ns.ones(2, 3).long(), ns.tensor([6, 6]), ns.tensor([3, 2]), blank=4
        ),
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4), ns.ones(2, 3).long(), ns.tensor([6]), ns.tensor([3, 2])
        ),
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4), ns.ones(2, 3).long(), ns.tensor([6, 6]), ns.tensor([3])
        ),
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4), ns.ones(2, 3).long(), ns.tensor([7, 6]), ns.tensor([3, 2])
        ),
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4), ns.ones(2, 3).long(), ns.tensor([6, 6]), ns.tensor([4, 2])
        ),
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4), ns.ones(1, 3).long(), ns.tensor([6, 6]), ns.tensor([3, 2])
        ),
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4), ns.ones(2, 3).long(), ns.tensor([6.0, 6]), ns.tensor([3, 2])
        ),
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4), ns.ones(2, 3).long(), ns.tensor([6, 6]), ns.tensor([3.0, 2])
        ),
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4), ns.ones(5).long(), ns.tensor([6, 6]), ns.tensor([3, 3])
        ),
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4),
            ns.ones(2, 3).long(),
            ns.tensor([6, 6]),
            ns.tensor([3, 2]),
            reduction="foo",
        ),
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4).long(), ns.ones(2, 3).long(), ns.tensor([6, 6]), ns.tensor([3, 2])
        ),
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4), ns.ones(2, 3).long(), ns.tensor([6, 6]), ns.tensor([-2, 2])
        ),
        lambda ns: ns.nn.functional.ctc_loss(
            ns.zeros(6, 2, 4), ns.ones(2, 3).long(), ns.tensor([-1, 6]), ns.tensor([2, 2])
        ),
    ],
)
def test_ctc_errors_match_torch(call):
    assert_raises_like_torch(call)


def test_adaptive_log_softmax_matches_torch():
    x, target = f32(6, 8), np.array([0, 3, 5, 9, 12, 14])

    def run(ns):
        m = ns.nn.AdaptiveLogSoftmaxWithLoss(8, 15, [4, 10], div_value=2.0, head_bias=True)
        xs = ns.tensor(x, requires_grad=True)
        out, loss = m(xs, ns.tensor(target))
        loss.backward()
        one = m(ns.tensor(x[0]), ns.tensor(target[3]))
        grads = [p.grad for p in m.parameters()]
        return (
            out,
            loss,
            xs.grad,
            *grads,
            m.log_prob(ns.tensor(x)),
            m.predict(ns.tensor(x)),
            one.output,
            one.loss,
            repr(m),
        )

    ours, theirs = both_seeded(4, run)
    assert ours[-1] == theirs[-1]
    for s, t in zip(ours[:-1], theirs[:-1]):
        assert_close(s, t, 1e-5, 1e-6)


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.AdaptiveLogSoftmaxWithLoss(8, 10, []),
        lambda ns: ns.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [5, 3]),
        lambda ns: ns.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 10]),
        lambda ns: ns.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4])(
            ns.ones(3, 8), ns.tensor([1, 2, 10])
        ),
        lambda ns: ns.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4])(
            ns.ones(3, 8), ns.tensor([1, -2, 3])
        ),
        lambda ns: ns.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4])(
            ns.ones(2, 8), ns.tensor([1, 2, 3])
        ),
        lambda ns: ns.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4])(
            ns.ones(3, 2, 8), ns.tensor([1, 2, 3])
        ),
        lambda ns: ns.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4])(ns.ones(3, 8), ns.tensor(1)),
        lambda ns: ns.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4])(
            ns.ones(3, 8), ns.ones(3, 2).long()
        ),
    ],
)
def test_adaptive_log_softmax_errors_match_torch(call):
    assert_raises_like_torch(call)


# --- Buffer, Container, deprecated aliases, in-place forms -----------------------------------------
def test_buffer_container_and_aliases():
    b = nn.Buffer(staged.ones(2), persistent=False)
    tb = torch.nn.Buffer(torch.ones(2), persistent=False)
    assert isinstance(b, staged.Tensor) and isinstance(b, nn.Buffer) and b.persistent is False
    assert tb.persistent is False
    for ns in (staged, torch):  # assigned, a Buffer registers itself (was a plain attribute)
        m = ns.nn.Module()
        m.b = ns.nn.Buffer(ns.ones(2), persistent=False)
        m.c = ns.nn.Buffer(ns.zeros(1))
        assert [n for n, _ in m.named_buffers()] == ["b", "c"]
        assert list(m.state_dict()) == ["c"]
    for ns in (staged, torch):
        with pytest.warns(FutureWarning, match="`nn.Container` is deprecated") as w:
            c = ns.nn.Container(relu=ns.nn.ReLU())
        assert [n for n, _ in c.named_children()] == ["relu"]
    assert str(w[0].message) == (
        "`nn.Container` is deprecated. All of its functionality is now implemented in "
        "`nn.Module`. Subclass that instead."
    )
    x = f32(1, 2, 3, 3)
    for name, kw in (
        ("upsample", dict(scale_factor=2, mode="bilinear", align_corners=False)),
        ("upsample_nearest", dict(size=(5, 4))),
        ("upsample_bilinear", dict(scale_factor=2)),
    ):
        with pytest.warns(UserWarning, match=f"`nn.functional.{name}` is deprecated"):
            y = getattr(F, name)(staged.tensor(x), **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_close(y, getattr(TF, name)(torch.tensor(x), **kw), 1e-6, 1e-6)


@pytest.mark.parametrize(
    "name,args",
    [
        ("elu_", (0.5,)),
        ("leaky_relu_", (0.2,)),
        ("hardtanh_", (-0.5, 0.7)),
        ("selu_", ()),
        ("celu_", (1.5,)),
    ],
)
def test_inplace_functional_forms(name, args):
    x = a(3, 4)

    def run(ns):
        leaf = ns.tensor(x, requires_grad=True)
        y = leaf * 1.0
        out = getattr(ns.nn.functional, name)(y, *args)
        assert out is y
        y.sum().backward()
        return y, leaf.grad

    for s, t in zip(run(staged), run(torch)):
        assert_close(s, t, 1e-12, 1e-12)


# --- compiled steps --------------------------------------------------------------------------------
def _compiled_matches_eager(make, step_fn, inputs, steps=2, rtol=1e-4, atol=1e-5):
    """``step_fn(net, opt, *inputs)`` (a training step returning its loss) compiled gives
    eager's losses and final state."""

    def run(compiled):
        staged.manual_seed(0)
        net = make()
        opt = staged.optim.SGD(net.parameters(), lr=0.05)
        fn = (
            staged.compile(lambda *xs: step_fn(net, opt, *xs))
            if compiled
            else (lambda *xs: step_fn(net, opt, *xs))
        )
        losses = [float(fn(*[staged.tensor(v) for v in inputs])) for _ in range(steps)]
        return losses, {k: v.numpy() for k, v in net.state_dict().items()}

    eager, compiled = run(False), run(True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=rtol)
    for k, v in eager[1].items():
        np.testing.assert_allclose(compiled[1][k], v, rtol=rtol, atol=atol)


def _train(net, opt, *xs):
    """A training step that clears the grads last: every call starts with none, so one trace
    (and one compile) serves them all, where clearing them first traces the second call
    again, for the grads the first one left."""
    loss = net(*xs)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def test_compiled_3d_layers_match_eager():
    """3-D convolutions, pooling (max, average, Lp, unpooling, fractional), batch norm, local
    response norms (CrossMapLRN2d's custom backward too), fold/unfold, channel shuffle and
    3-D padding in one compiled training step."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv3d(2, 4, 3, padding=1)
            self.up = nn.ConvTranspose3d(4, 2, 2, stride=2)
            self.bn = nn.BatchNorm3d(2)
            self.pool = nn.MaxPool3d(2, return_indices=True)
            self.unpool = nn.MaxUnpool3d(2)
            self.avg, self.lp = nn.AvgPool3d(2), nn.LPPool3d(2, 2)
            self.pad = nn.ReflectionPad3d(1)
            self.shuffle = nn.ChannelShuffle(2)
            self.frac = nn.FractionalMaxPool2d(2, output_size=3)
            self.lrn = nn.CrossMapLRN2d(3, 0.1)

        def forward(self, x):
            y = self.bn(self.up(self.shuffle(self.conv(x).relu())))  # (N, 2, 8, 8, 8)
            p, i = self.pool(y)
            z = self.unpool(p, i) + y
            z = F.local_response_norm(self.avg(z) + self.lp(z), 2)  # (N, 2, 4, 4, 4)
            z = self.lrn(self.pad(z).flatten(1, 2))  # (N, 12, 6, 6)
            cols = F.unfold(z, 2, stride=2)
            z = F.fold(cols.tanh(), (6, 6), 2, stride=2)
            return z.square().mean() + self.frac(z).mean()  # fractional: torch's draws each call

    _compiled_matches_eager(Net, _train, [f32(2, 2, 4, 4, 4)])


def test_compiled_sampling_and_bags_match_eager():
    """grid_sample over an affine_grid (bilinear and nearest), EmbeddingBag (sum and max),
    pdist and the in-graph random feature alpha dropout, compiled."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.theta = nn.Parameter(
                staged.tensor(np.array([[[0.9, 0.1, 0.05], [-0.2, 1.1, 0.0]]] * 2, np.float32))
            )
            self.bag = nn.EmbeddingBag(10, 4, mode="max")
            self.sum_bag = nn.EmbeddingBag(10, 4, mode="sum", padding_idx=0)
            self.drop = nn.FeatureAlphaDropout(0.3)

        def forward(self, x, idx, offsets):
            grid = F.affine_grid(self.theta, [2, 3, 5, 4], align_corners=False)
            y = F.grid_sample(x, grid, align_corners=False, padding_mode="reflection")
            y = y + F.grid_sample(x, grid, "nearest", "border", align_corners=True)
            bags = self.bag(idx, offsets) + self.sum_bag(idx, offsets)  # (2, 4)
            feats = self.drop(y.mean((2, 3)).unsqueeze(-1)).squeeze(-1)  # (2, 3)
            return F.pdist(bags).sum() + feats.square().sum() + (y * y).mean()

    idx, offsets = np.array([1, 0, 4, 4, 7, 9, 0]), np.array([0, 3])
    _compiled_matches_eager(Net, _train, [f32(2, 3, 6, 5), idx, offsets])


def test_compiled_losses_match_eager():
    """CTC (its time loop and torch's gradient), multilabel margin, triplet-with-distance and
    adaptive log-softmax losses, RReLU in eval mode and gumbel-softmax (host draws: torch's
    noise each call), compiled."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(3, 5)
            self.act = nn.RReLU().eval()
            self.ctc = nn.CTCLoss(zero_infinity=True)
            self.mlm = nn.MultiLabelMarginLoss()
            self.trip = nn.TripletMarginWithDistanceLoss(swap=True)
            self.asm = nn.AdaptiveLogSoftmaxWithLoss(5, 6, [2, 4], div_value=2.0)

        def forward(self, x, targets, il, tl, labels):
            h = self.act(self.proj(x))  # (T, N, 5)
            loss = self.ctc(h.log_softmax(-1), targets, il, tl)
            loss = loss + self.mlm(h[0], labels) + self.trip(h[0], h[1], h[2])
            loss = loss + self.asm(h[1], tl + 1).loss
            return loss + F.gumbel_softmax(h[-1], hard=True).mul(h[-1]).sum()

    targets = np.array([[1, 2], [4, 1], [3, 3], [2, 0]])
    labels = np.array([[1, 3, -1, 0, 0], [0, -1, 2, 2, 2], [4, 3, 2, 1, 0], [-1, 0, 0, 0, 0]])
    _compiled_matches_eager(
        Net,
        _train,
        [f32(5, 4, 3), targets, np.array([5, 4, 3, 5]), np.array([2, 2, 2, 1]), labels],
    )


def test_a_compiled_step_reports_bad_embedding_bag_offsets_and_ctc_lengths_when_read():
    """Values a compiled step cannot check at trace time: recorded, raised on reading."""
    w = staged.tensor(np.arange(12.0).reshape(6, 2))
    inp = staged.tensor([1, 2, 4, 5])
    bag = staged.compile(lambda i, o: F.embedding_bag(i, w, o, mode="sum"))
    ok = staged.tensor([0, 2])
    np.testing.assert_array_equal(bag(inp, ok).numpy(), [[6.0, 8.0], [18.0, 20.0]])
    for offsets, message in (
        ([1, 2], "offsets\\[0\\] has to be 0"),
        ([0, 5], "can not be greater than input's length 4"),
        ([0, 3, 2], "non-decreasing"),
    ):
        with pytest.raises(RuntimeError, match=message):
            bag(inp, staged.tensor(offsets)).numpy()
    np.testing.assert_array_equal(bag(inp, ok).numpy(), [[6.0, 8.0], [18.0, 20.0]])

    lp = staged.tensor(np.random.default_rng(0).standard_normal((5, 2, 4))).log_softmax(2)
    ctc = staged.compile(lambda lp, t, il, tl: F.ctc_loss(lp, t, il, tl))
    padded = staged.tensor([[1, 2], [3, 1]])
    want = F.ctc_loss(lp, padded, staged.tensor([5, 5]), staged.tensor([2, 1])).item()
    assert ctc(lp, padded, staged.tensor([5, 5]), staged.tensor([2, 1])).item() == pytest.approx(
        want
    )
    for targets, il, tl, message in (
        (padded, [6, 5], [2, 1], "input_lengths to have value at most 5"),
        (padded, [5, -1], [2, 1], "input_lengths to have value at least 0"),
        (padded, [5, 5], [3, 1], "size at least max\\(target_lengths\\) at dimension 1"),
        (staged.tensor([1, 2, 3]), [5, 5], [2, 2], "size sum\\(target_lengths\\) at dimension 0"),
    ):
        with pytest.raises(RuntimeError, match=message):
            ctc(lp, targets, staged.tensor(il), staged.tensor(tl)).item()
