"""Antialiased ``interpolate`` gives torch's bits: its filter weights in torch's mixed float
and double steps (the cubic's multiply-adds fused), its taps summed as torch's
GCC-vectorised loop sums them (rounded products in 16-byte steps, the rest by FMA). A
torchvision preprocessing of a uint8 image (resize in float, rounded back to bytes) then
gives torch's tensor; before, a pixel in 150k came out one level off."""

import numpy as np
import pytest
import torch

import staged

SIZES = [
    ((30, 40), (25, 34)),  # downsampling by 1.2: 3-4 taps a dim
    ((30, 40), (22, 22)),
    ((30, 40), (31, 41)),  # barely up: the filter not stretched
    ((7, 5), (37, 50)),  # upsampling
    ((37, 50), (5, 7)),  # by 7: 15-17 taps, past two 16-byte steps
    ((9, 300), (9, 4)),  # by 75: 150 taps along the last dim only
    ((300, 9), (3, 9)),  # and along the other
]


def _image(shape, dtype, seed=0):
    rs = np.random.RandomState(seed)
    x = rs.randint(0, 256, (2, 3, *shape)) + rs.rand(2, 3, *shape)
    return x.astype(dtype)


def _both(x, **kw):
    ours = staged.nn.functional.interpolate(staged.tensor(x), antialias=True, **kw).numpy()
    theirs = torch.nn.functional.interpolate(torch.tensor(x), antialias=True, **kw).numpy()
    return ours, theirs


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("shape,size", SIZES)
def test_antialiased_resizes_give_torchs_bits(shape, size, mode, dtype):
    ours, theirs = _both(_image(shape, dtype), size=size, mode=mode)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize(
    "kw",
    [
        {"size": (12, 29), "align_corners": True},
        {"scale_factor": (0.3, 1.7)},
        {"scale_factor": 0.45, "recompute_scale_factor": True},
    ],
)
def test_scales_and_corners_give_torchs_bits(kw, mode):
    ours, theirs = _both(_image((30, 40), np.float32, seed=1), mode=mode, **kw)
    np.testing.assert_array_equal(ours, theirs)


def test_torchvisions_resize_of_a_byte_image_gives_torchs_bytes():
    """torchvision's Resize(256, antialias=True) of a uint8 tensor image: a float resize,
    rounded back to bytes (the pretrained models' preprocessing)."""
    img = np.random.RandomState(2).randint(0, 256, (1, 3, 300, 400)).astype(np.float32)
    ours, theirs = _both(img, size=(256, 341), mode="bilinear", align_corners=False)
    np.testing.assert_array_equal(
        np.round(ours).astype(np.uint8), np.round(theirs).astype(np.uint8)
    )
    np.testing.assert_array_equal(ours, theirs)


def test_a_pixel_past_an_outputs_taps_does_not_reach_it():
    """Outputs with fewer taps than the widest read no pixel past their own: an infinite
    pixel is torch's inf or NaN where torch's filter covers it, and nowhere else."""
    x = _image((6, 40), np.float32)
    x[..., 17] = np.inf
    ours, theirs = _both(x, size=(6, 7), mode="bicubic")
    assert np.isfinite(theirs).sum() > 0
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_the_gradient_is_torchs(mode):
    x = _image((12, 10), np.float64)
    xs = staged.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    g = np.random.RandomState(3).randn(2, 3, 5, 14)
    for lib, t in ((staged, xs), (torch, xt)):
        y = lib.nn.functional.interpolate(t, size=(5, 14), mode=mode, antialias=True)
        y.backward(lib.tensor(g))
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-13, atol=1e-13)


def test_a_compiled_resize_is_eagers_but_for_contracted_multiply_adds():
    """IREE's llvm-cpu code fuses each multiply feeding an add into one FMA (README,
    Backends), so the taps eager rounds twice round once compiled: an ulp or so apart."""
    x = staged.tensor(_image((37, 50), np.float32))

    def resize(x):
        return staged.nn.functional.interpolate(x, size=(9, 61), mode="bicubic", antialias=True)

    eager = resize(x).numpy()
    np.testing.assert_allclose(staged.compile(resize)(x).numpy(), eager, rtol=2e-6, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_types_are_refused_as_torch(dtype):
    for lib in (staged, torch):
        x = lib.ones(1, 1, 8, 8, dtype=getattr(lib, dtype))
        name = "Half" if dtype == "float16" else "BFloat16"
        with pytest.raises(NotImplementedError, match=f"not implemented for '{name}'"):
            lib.nn.functional.interpolate(x, size=(4, 4), mode="bilinear", antialias=True)
