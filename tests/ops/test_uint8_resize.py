"""uint8 bilinear and bicubic ``interpolate`` (antialiased or not, align_corners or not, by
size or by scale factor): torch 2.13's fixed-point results to the bit (Note [uint8 resize]
in staged/eager/ops/layers.py), as torchvision's transforms v2 resize uint8 images."""

import itertools

import numpy as np
import pytest
import torch

import staged

RNG = np.random.default_rng(0)


def _images():
    for trial in range(24):
        c = int(RNG.integers(1, 5))
        h, w = (int(v) for v in RNG.integers(1, 40, 2))
        a = RNG.integers(0, 256, (2, c, h, w), dtype=np.uint8)
        if trial % 3 == 0:  # smooth ramps: many ties at half a level
            a = (np.arange(h * w).reshape(1, 1, h, w) * 37 % 256).astype(np.uint8)
            a = a.repeat(c, 1).repeat(2, 0)
        if trial % 2:
            kw = dict(size=(int(RNG.integers(1, 50)), int(RNG.integers(1, 50))))
        else:
            kw = dict(scale_factor=(float(RNG.uniform(0.2, 3)), float(RNG.uniform(0.2, 3))))
        yield a, kw


CASES = list(_images())


@pytest.mark.parametrize(
    "mode, antialias, align_corners",
    itertools.product(["bilinear", "bicubic"], [False, True], [False, True]),
)
def test_uint8_resizing_gives_torchs_bits(mode, antialias, align_corners):
    for a, kw in CASES:
        args = dict(mode=mode, antialias=antialias, align_corners=align_corners, **kw)
        try:
            theirs = torch.nn.functional.interpolate(torch.from_numpy(a), **args).numpy()
        except RuntimeError:  # an output size of 0
            with pytest.raises(RuntimeError, match="greater than 0"):
                staged.nn.functional.interpolate(staged.from_numpy(a), **args)
            continue
        ours = staged.nn.functional.interpolate(staged.from_numpy(a), **args)
        assert ours.dtype is staged.uint8
        np.testing.assert_array_equal(ours.numpy(), theirs, err_msg=f"{a.shape} {kw}")


def test_a_photo_resized_for_a_classifier_and_channels_last():
    a = RNG.integers(0, 256, (1, 3, 300, 400), dtype=np.uint8)
    for mode in ("bilinear", "bicubic"):
        t = torch.from_numpy(a).contiguous(memory_format=torch.channels_last)
        s = staged.from_numpy(a).contiguous(memory_format=staged.channels_last)
        args = dict(size=(224, 298), mode=mode, antialias=True)
        np.testing.assert_array_equal(
            staged.nn.functional.interpolate(s, **args).numpy(),
            torch.nn.functional.interpolate(t, **args).numpy(),
        )


def test_uint8_linear_and_trilinear_raise_torchs_error():
    for shape, mode in (((1, 2, 5), "linear"), ((1, 1, 2, 3, 4), "trilinear")):
        with pytest.raises(NotImplementedError, match="not implemented for 'Byte'"):
            staged.nn.functional.interpolate(
                staged.zeros(shape, dtype=staged.uint8), scale_factor=2, mode=mode
            )


def test_a_resize_to_the_same_size_is_a_copy():
    x = staged.from_numpy(np.arange(24, dtype=np.uint8).reshape(1, 2, 3, 4))
    y = staged.nn.functional.interpolate(x, size=(3, 4), mode="bilinear")
    y.add_(1)
    assert x.numpy().ravel()[:3].tolist() == [0, 1, 2] and y.numpy().ravel()[:3].tolist() == [
        1,
        2,
        3,
    ]
