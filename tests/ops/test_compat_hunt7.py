"""What a seventh hunt through public PyTorch programs (johnma2006's mamba-minimal,
efficient-kan, PointNet, a VQ-VAE, milesial's U-Net, llama2.c) found, against torch 2.13:
``Tensor.split``'s keyword ``split_size``, ``F.interpolate``'s ``bicubic`` and ``area``
modes, and its refusal of integer images (bilinear ones of uint8 were nearest ones)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, assert_raises_like_torch, raises_like_torch


# --- Tensor.split(split_size=...): the method's name of its sizes ---------------------------------
@pytest.mark.parametrize("sizes", [[2, 4], 4])
def test_split_method_takes_torchs_keyword(sizes):
    x = np.arange(12.0).reshape(2, 6)
    got, want = {}, {}
    for lib, out in ((staged, got), (torch, want)):
        t = lib.tensor(x, requires_grad=True)
        pieces = t.split(split_size=sizes, dim=-1)
        (pieces[0].sum() * 2 + pieces[-1].square().sum()).backward()
        out.update(pieces=pieces, grad=t.grad)
    assert len(got["pieces"]) == len(want["pieces"])
    for ours, theirs in zip(got["pieces"], want["pieces"]):
        assert_close(ours.detach(), theirs.detach())
    assert_close(got["grad"], want["grad"])


def test_split_method_refuses_the_functions_keyword_as_torch():
    x = np.arange(6.0)
    assert_raises_like_torch(lambda lib: lib.tensor(x).split(split_size_or_sections=2))
    assert_raises_like_torch(lambda lib: lib.split(lib.tensor(x), split_size=2))


# --- interpolate: bicubic (Keys' a = -0.75, taps clamped at the edges) and area -------------------
CASES = [
    dict(scale_factor=1.7, mode="bicubic"),
    dict(size=(11, 4), mode="bicubic"),
    dict(size=(13, 5), mode="bicubic", align_corners=True),
    dict(scale_factor=0.6, mode="bicubic", recompute_scale_factor=True),
    dict(size=(3, 5), mode="area"),
    dict(scale_factor=0.5, mode="area"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", CASES, ids=lambda kw: "-".join(map(str, kw.values())))
def test_interpolate_bicubic_and_area_give_torchs_values_and_gradients(kw, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 9)).astype(dtype)
    out = {}
    for lib in (staged, torch):
        t = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.interpolate(t, **kw)
        g = lib.tensor(np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(dtype))
        (gx,) = lib.autograd.grad(y, t, g)
        out[lib] = (y.detach(), gx)
    tol = 1e-5 if dtype == "float32" else 1e-13
    for ours, theirs in zip(out[staged], out[torch]):
        assert_close(ours, theirs, rtol=tol, atol=tol)


@pytest.mark.parametrize("n", [1, 3])
def test_interpolate_area_pools_other_ranks_as_torch(n):
    x = np.random.default_rng(2).standard_normal((1, 2, *[5, 7, 6][:n]))
    size = [3, 4, 2][:n]
    ours, theirs = (
        lib.nn.functional.interpolate(lib.tensor(x), size, mode="area") for lib in (staged, torch)
    )
    assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_upsample_module_takes_bicubic():
    x = np.random.default_rng(3).standard_normal((1, 2, 4, 5))
    ours, theirs = (
        lib.nn.Upsample(scale_factor=3, mode="bicubic", align_corners=True)(lib.tensor(x))
        for lib in (staged, torch)
    )
    assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.nn.functional.interpolate(lib.ones(1, 2, 3), size=4, mode="bicubic"),
        lambda lib: lib.nn.functional.interpolate(
            lib.ones(1, 2, 3, 3), size=2, mode="area", align_corners=False
        ),
    ],
    ids=["bicubic-3d", "area-align-corners"],
)
def test_interpolate_refuses_bad_arguments_as_torch(call):
    raises_like_torch(call)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic", "area"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_interpolate_refuses_integer_images_as_torch(mode, dtype):
    assert_raises_like_torch(
        lambda lib: lib.nn.functional.interpolate(
            lib.ones(1, 3, 4, 5, dtype=getattr(lib, dtype)), scale_factor=2, mode=mode
        )
    )


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_interpolate_refuses_integer_sequences_as_torch(mode):
    assert_raises_like_torch(
        lambda lib: lib.nn.functional.interpolate(
            lib.ones(1, 3, 4, dtype=lib.int16), scale_factor=2, mode=mode
        )
    )


def test_interpolate_of_uint8_images_as_torch():
    """staged's weights were cast to uint8 (all 0 or 1), a nearest resize called bilinear;
    torch's bilinear and bicubic of uint8 round in fixed point (tests/ops/test_uint8_resize.py
    has them in full)."""
    x = np.random.default_rng(4).integers(0, 256, (1, 3, 5, 6), dtype=np.uint8)
    ours, theirs = (
        lib.nn.functional.interpolate(lib.tensor(x), size=(7, 9)) for lib in (staged, torch)
    )
    assert_close(ours, theirs, rtol=0, atol=0)
    for mode in ("bilinear", "bicubic"):
        ours, theirs = (
            lib.nn.functional.interpolate(lib.tensor(x), size=(7, 9), mode=mode)
            for lib in (staged, torch)
        )
        assert_close(ours, theirs, rtol=0, atol=0)
