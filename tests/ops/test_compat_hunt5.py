"""What a fifth hunt through public PyTorch programs (a DDPM, a sparse mixture of experts,
lucidrains' vision transformers, PyTorch's spatial transformer tutorial, ...) found, against
torch 2.13: running sums of float32 that accumulate in double, ``affine_grid``'s points,
``grid_sample``'s position on a pixel's edge (and the side its gradient takes), softmax's
row-major result (which a dropout after it draws its mask in) and ``torch.nn.attention``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, message

F_NAMES = ("float32", "float64")


# --- cumsum: float32 sums accumulate in double, each rounded once --------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "complex64", "float64"])
@pytest.mark.parametrize("dim", [0, 1])
def test_cumsum_rounds_each_running_sum_once_as_torch(dtype, dim):
    # float32 data: torch casts float64 to float16 through float32 (twice rounded)
    x = (np.random.default_rng(0).standard_normal((40, 300)) * 0.1).astype(np.float32)
    out = {}
    for lib in (staged, torch):
        t = lib.tensor(x).to(getattr(lib, dtype))
        out[lib] = (lib.cumsum(t, dim), t.flip(dim).cumsum(dim).flip(dim))
    for ours, theirs in zip(out[staged], out[torch]):  # bit for bit: 8 in 10 differed
        wide = "complex128" if dtype.startswith("complex") else "float64"
        assert_close(ours.to(getattr(staged, wide)), theirs.to(getattr(torch, wide)), 0, 0)


def test_cumsum_gradient_is_the_reversed_running_sum():
    grads = []
    for lib in (staged, torch):
        x = lib.tensor(np.linspace(-1, 1, 500, dtype=np.float32), requires_grad=True)
        (lib.cumsum(x, 0) * lib.tensor(np.cos(np.arange(500), dtype=np.float32))).sum().backward()
        grads.append(x.grad)
    assert_close(grads[0], grads[1], rtol=0, atol=0)


# --- affine_grid: torch's linspace, not NumPy's ---------------------------------------------------
@pytest.mark.parametrize("dtype", F_NAMES)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(2, 1, 28, 28), (2, 3, 6, 29), (2, 1, 7, 9, 101)])
def test_affine_grid_points_are_torchs_bit_for_bit(dtype, align_corners, size):
    k = len(size) - 2
    out = {}
    for lib in (staged, torch):
        eye = lib.eye(k, k + 1, dtype=getattr(lib, dtype)).expand(2, k, k + 1)
        out[lib] = lib.nn.functional.affine_grid(eye, size, align_corners=align_corners)
    assert_close(out[staged], out[torch], rtol=0, atol=0)


# --- grid_sample: a position on a pixel's edge falls on torch's side ------------------------------
THETAS = [
    [[1.0, 0, 0], [0, 1, 0]],  # the identity: every position on a pixel's centre
    [[0.5, 0, 0.25], [0, 2, -1 / 3]],
    [[1.5, 0, 0.5], [0, 0.75, 0.0]],
]


@pytest.mark.parametrize("dtype", F_NAMES)
@pytest.mark.parametrize("width", [6, 7, 28, 29, 100, 224])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_on_pixel_edges_gives_torchs_values_and_grid_gradient(
    dtype, width, mode, align_corners
):
    # torch's 2-D CPU kernel computes the position with a fused multiply-add: where it is
    # a hair below an integer, the bilinear gradient is the left pixel pair's slope
    out = {}
    for lib in (staged, torch):
        dt = getattr(lib, dtype)
        theta = lib.tensor(THETAS, dtype=dt)
        grid = lib.nn.functional.affine_grid(theta, (3, 1, 4, width), align_corners=align_corners)
        grid.requires_grad_()
        i = lib.arange(width * 12, dtype=dt)
        x = ((i % width).pow(2) + 7 * (i // width)).reshape(3, 1, 4, width)
        y = lib.nn.functional.grid_sample(x, grid, mode=mode, align_corners=align_corners)
        y.sum().backward()
        out[lib] = (y.detach(), grid.grad)
    for ours, theirs in zip(out[staged], out[torch]):
        # sums in other orders (torch's weight times a difference, staged's weights times
        # values); a wrong side's slope is 2 / (2 i + 1) off, more than 4e-3
        f32 = dtype == "float32"
        assert_close(ours, theirs, rtol=1e-3 if f32 else 1e-9, atol=1e-2 if f32 else 1e-9)


def test_spatial_transformer_step_from_the_identity_gives_torchs_theta_gradient():
    # the tutorial's initial transform: fc_loc's gradient, 25 % off torch's before the fix
    grads = []
    for lib in (staged, torch):
        lib.manual_seed(0)
        theta = lib.tensor([[1.0, 0, 0], [0, 1, 0]], dtype=lib.float64).repeat(4, 1, 1)
        theta.requires_grad_()
        x = lib.randn(4, 1, 28, 28, dtype=lib.float64)
        grid = lib.nn.functional.affine_grid(theta, x.size(), align_corners=False)
        y = lib.nn.functional.grid_sample(x, grid, align_corners=False)
        (y * lib.randn(4, 1, 28, 28, dtype=lib.float64)).sum().backward()
        grads.append(theta.grad)
    assert_close(grads[0], grads[1], rtol=1e-12, atol=1e-12)


# --- softmax's result is row-major, as torch's: a dropout after it draws torch's mask -------------
def _scores(lib):
    """CaiT's class-attention scores: an einsum whose result is laid out (68, 1, 68, 4)."""
    lib.manual_seed(0)
    x = lib.randn(2, 1, 32)
    ctx = lib.cat((x, lib.randn(2, 16, 32)), dim=1)
    q = lib.nn.functional.linear(x, lib.randn(32, 32)).reshape(2, 1, 4, 8).permute(0, 2, 1, 3)
    k = lib.nn.functional.linear(ctx, lib.randn(32, 32)).reshape(2, 17, 4, 8).permute(0, 2, 1, 3)
    dots = lib.einsum("bhid,bhjd->bhij", q, k) * 0.35
    return lib.einsum("bhij,hg->bgij", dots, lib.randn(4, 4))


@pytest.mark.parametrize(
    "op",
    [
        lambda lib, s: lib.softmax(s, -1),
        lambda lib, s: lib.log_softmax(s, -1),
        lambda lib, s: lib.nn.Softmax(dim=-1)(s),
        lambda lib, s: lib.nn.functional.log_softmax(s, dim=1),
        lambda lib, s: lib.softmax(lib.randn(3, 4, 5).permute(2, 0, 1), 1),
    ],
)
def test_softmax_of_a_permuted_tensor_is_row_major_as_torchs(op):
    out = {}
    for lib in (staged, torch):
        s = _scores(lib)
        r = op(lib, s)
        out[lib] = (r, r.stride())
    assert out[staged][1] == out[torch][1]
    assert_close(out[staged][0], out[torch][0], rtol=1e-5, atol=1e-4)  # scores up to 300


def test_dropout_after_softmax_of_permuted_scores_draws_torchs_mask():
    masks = {}
    for lib in (staged, torch):
        attn = lib.nn.functional.softmax(_scores(lib), dim=-1)
        masks[lib] = lib.nn.functional.dropout(attn, 0.5) == 0
    assert_close(masks[staged], masks[torch], rtol=0, atol=0)


# --- torch.nn.attention ------------------------------------------------------------------------
def test_sdpa_kernel_selects_and_changes_nothing():
    from torch.nn import attention as theirs

    from staged.nn import attention as ours

    assert {k: int(v) for k, v in ours.SDPBackend.__members__.items()} == {
        k: int(v) for k, v in theirs.SDPBackend.__members__.items()
    }
    q = np.random.default_rng(0).standard_normal((2, 4, 5, 8)).astype(np.float32)
    out = {}
    for lib, mod in ((staged, ours), (torch, theirs)):
        t = lib.tensor(q)
        with mod.sdpa_kernel([mod.SDPBackend.MATH, mod.SDPBackend.FLASH_ATTENTION]) as got:
            assert got == {}
            out[lib] = lib.nn.functional.scaled_dot_product_attention(t, t, t)
        with mod.sdpa_kernel(mod.SDPBackend.MATH, set_priority=True):
            pass
    assert_close(out[staged], out[torch], rtol=1e-5, atol=1e-6)


def test_sdpa_kernel_refuses_what_torch_refuses():
    from torch.nn import attention as theirs

    from staged.nn import attention as ours

    errors = []
    for mod in (ours, theirs):
        with pytest.raises(AssertionError) as e, mod.sdpa_kernel("MATH"):
            pass
        errors.append(message(e.value))
    assert errors[0] == errors[1]


# --- Conv's _conv_forward: the layer's geometry with weights of one's own (LoRA's Conv2d) --------
@pytest.mark.parametrize("n", [1, 2, 3])
def test_conv_forward_with_other_weights_is_torchs(n):
    out = {}
    for lib in (staged, torch):
        lib.manual_seed(0)
        conv = getattr(lib.nn, f"Conv{n}d")(4, 6, 3, stride=2, padding=1, dilation=1, groups=2)
        x = lib.randn(2, 4, *(7,) * n)
        w = (conv.weight * 2).detach().requires_grad_()
        y = conv._conv_forward(x, w, None)
        y.sum().backward()
        out[lib] = (y.detach(), w.grad, conv(x).detach())
    for ours, theirs in zip(out[staged], out[torch]):
        assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
