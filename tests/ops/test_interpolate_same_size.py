"""``F.interpolate`` where a ``scale_factor`` leaves a dim's size as it was (floor(5 * 1.1)
= 5), against torch 2.13's CPU kernels: linear, bilinear, trilinear and 2-D nearest copy
such a dim, nearest-exact, bicubic and 1-D and 3-D nearest resample it (``interpolate`` in
staged/eager/ops/layers.py). Where torch's backward copies the gradient of a forward that
resampled, staged's gradient is the adjoint of that forward; and an empty output raises as
torch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, assert_raises_like_torch

MODES = {1: ["nearest", "nearest-exact", "linear"], 3: ["nearest", "nearest-exact", "trilinear"]}
MODES[2] = ["nearest", "nearest-exact", "bilinear", "bicubic"]
# torch's backward copies where its forward resampled (not the forward's adjoint)
TORCH_COPIES_GRADIENT = {(1, "nearest"), (2, "bicubic"), (3, "nearest")}


def _cases():
    for n, modes in MODES.items():
        for mode in modes:
            for sf in (1.1, (2.0, 1.1, 1.15)[:n]):
                for ac in [None] if "nearest" in mode else [False, True]:
                    yield pytest.param(n, mode, sf, ac, id=f"{n}d-{mode}-{sf}-{ac}")


def _interpolate(lib, x, g, **kw):
    t = lib.tensor(x, requires_grad=True)
    y = lib.nn.functional.interpolate(t, **kw)
    y.backward(lib.tensor(g))
    return y.detach().numpy(), t.grad.numpy()


@pytest.mark.parametrize("n, mode, sf, ac", _cases())
def test_a_dim_kept_by_the_scale_is_copied_or_resampled_as_torch(n, mode, sf, ac):
    shape = (2, 3, *(5, 6, 4)[:n])
    x = np.random.default_rng(0).standard_normal(shape)
    kw = dict(scale_factor=sf, mode=mode, align_corners=ac)
    want_y = torch.nn.functional.interpolate(torch.tensor(x), **kw).numpy()
    g = np.random.default_rng(1).standard_normal(want_y.shape)
    y, gx = _interpolate(staged, x, g, **kw)
    assert_close(y, want_y, rtol=1e-12, atol=1e-12)
    if (n, mode) in TORCH_COPIES_GRADIENT:
        # the adjoint of torch's forward: <J e_i, g> for every input basis vector e_i
        basis = np.eye(x.size).reshape(x.size, *shape)[:: max(1, x.size // 40)]
        for e in basis:
            ye = torch.nn.functional.interpolate(torch.tensor(e), **kw).numpy()
            assert np.isclose((gx * e).sum(), (ye * g).sum(), rtol=1e-12, atol=1e-12)
    else:
        _, want_gx = _interpolate(torch, x, g, **kw)
        assert_close(gx, want_gx, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "shape, kw",
    [
        ((1, 1, 5), dict(scale_factor=0.1)),
        ((1, 1, 5), dict(scale_factor=0.1, recompute_scale_factor=True)),
        ((1, 1, 4, 4), dict(size=(0, 2), mode="bicubic")),
        ((1, 1, 4, 4), dict(size=(0, 2), mode="bilinear", antialias=True)),
        ((1, 1, 0, 4), dict(size=(2, 2), mode="nearest-exact")),
        ((1, 1, 4, 4, 4), dict(size=(2, 0, 1), mode="trilinear")),
    ],
)
def test_an_empty_input_or_output_raises_as_torch(shape, kw):
    assert_raises_like_torch(lambda lib: lib.nn.functional.interpolate(lib.ones(shape), **kw))


def test_area_pools_to_an_empty_size_as_torch():
    ours, theirs = (
        lib.nn.functional.interpolate(lib.ones(1, 1, 4, 4), size=(0, 2), mode="area")
        for lib in (staged, torch)
    )
    assert tuple(ours.shape) == tuple(theirs.shape) == (1, 1, 0, 2)


# --- half precision: torch's generic kernel (linear, trilinear, bicubic) rounds its weights
# to the half type, then sums in float32 ----------------------------------------------------
HALF = [
    (half, mode, kw, ac)
    for half in ("bfloat16", "float16")
    for mode, n in (("linear", 1), ("bicubic", 2), ("trilinear", 3))
    for kw in (dict(scale_factor=1.7), dict(size=(11, 4, 9)[:n]), dict(scale_factor=0.6))
    for ac in (False, True)
]


@pytest.mark.parametrize("half, mode, kw, ac", HALF)
def test_half_interpolation_rounds_its_weights_as_torch(half, mode, kw, ac):
    n = {"linear": 1, "bicubic": 2, "trilinear": 3}[mode]
    x = np.random.default_rng(0).standard_normal((2, 3, *(7, 6, 5)[:n])).astype(np.float32) * 3
    ours, theirs = (
        lib.nn.functional.interpolate(
            lib.tensor(x).to(getattr(lib, half)), mode=mode, align_corners=ac, **kw
        )
        .float()
        .numpy()
        for lib in (staged, torch)
    )
    if half == "bfloat16" or mode == "linear":
        np.testing.assert_array_equal(ours, theirs)
    else:  # float16 trilinear and bicubic: a few sums in another order (0.02-4 %)
        assert (ours != theirs).mean() < 0.05
        eps = float(np.finfo(np.float16).eps)  # of the largest tap, where taps cancel
        np.testing.assert_allclose(ours, theirs, rtol=eps, atol=eps * np.abs(x).max())
