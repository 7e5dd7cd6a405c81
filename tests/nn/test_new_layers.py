"""ConvTranspose1d/2d, PixelShuffle/Unshuffle, GroupNorm, InstanceNorm1d/2d, Bilinear and the
padding layers against torch 2.13: values and gradients (float32 and float64), default
initialisation from the same seed, errors, and a compiled training step."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import staged
import staged.nn.functional as F
from staged import nn
from tests.checks import assert_close, assert_raises_like_torch, compare_with_torch
from tests.nn.test_layers import check_layer

RNG = np.random.default_rng(5)


def a(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


DTYPES = [(np.float32, 1e-4), (np.float64, 1e-9)]


def _transpose_cases():
    """(n, input, weight shape, options): strides, padding, output_padding, groups and
    dilation in many combinations, batched and not."""
    cases = []
    for n, (s, p, d, g) in itertools.product(
        (1, 2), itertools.product((1, 2, 3), (0, 1, 2), (1, 2), (1, 2))
    ):
        for op in sorted({0, max(s, d) - 1}):
            spatial = (4, 3)[:n] if n == 2 else (5,)
            kernel = (3, 2)[:n] if n == 2 else (3,)
            cases.append(
                (
                    n,
                    (2, 2 * g) + spatial,
                    (2 * g, 3) + kernel,
                    dict(stride=s, padding=p, output_padding=op, groups=g, dilation=d),
                )
            )
    cases.append((2, (4, 3, 3), (4, 2, 2, 2), dict(stride=(2, 1), padding=(0, 1))))  # unbatched
    cases.append((1, (0, 2, 4), (2, 2, 3), dict(stride=2)))  # empty batch
    return cases


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("case", _transpose_cases(), ids=str)
def test_conv_transpose_matches_torch(case, dtype, tol):
    n, x, w, kw = case
    fn, tfn = (
        (F.conv_transpose1d, TF.conv_transpose1d)
        if n == 1
        else (F.conv_transpose2d, TF.conv_transpose2d)
    )
    b = a(w[1] * kw.get("groups", 1), dtype=dtype)
    try:
        tfn(torch.tensor(a(*x, dtype=dtype)), torch.tensor(a(*w, dtype=dtype)), **kw)
    except RuntimeError:
        pytest.skip("torch refuses this geometry (output too small)")
    compare_with_torch(
        lambda x, w, b: fn(x, w, b, **kw),
        lambda x, w, b: tfn(x, w, b, **kw),
        a(*x, dtype=dtype),
        a(*w, dtype=dtype),
        b,
        rtol=tol,
        atol=tol,
    )


def _shuffles():
    return [
        (F.pixel_shuffle, TF.pixel_shuffle, (2, 8, 3, 4), 2),
        (F.pixel_shuffle, TF.pixel_shuffle, (9, 2, 2), 3),
        (F.pixel_shuffle, TF.pixel_shuffle, (2, 3, 4, 2, 2), 1),
        (F.pixel_shuffle, TF.pixel_shuffle, (1, 2, 18, 2, 3), 3),
        (F.pixel_unshuffle, TF.pixel_unshuffle, (2, 3, 4, 6), 2),
        (F.pixel_unshuffle, TF.pixel_unshuffle, (1, 6, 9), 3),
        (F.pixel_unshuffle, TF.pixel_unshuffle, (2, 2, 1, 4, 4), 4),
    ]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize(
    "fn,tfn,shape,r", _shuffles(), ids=lambda v: getattr(v, "__name__", str(v))
)
def test_pixel_shuffles_match_torch(fn, tfn, shape, r, dtype, tol):
    compare_with_torch(lambda x: fn(x, r), lambda x: tfn(x, r), a(*shape, dtype=dtype))


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize(
    "shape,groups,affine",
    [((2, 6, 5), 3, True), ((3, 4, 2, 3), 2, True), ((2, 4), 4, False), ((1, 6, 2, 2), 1, True)],
)
def test_group_norm_matches_torch(shape, groups, affine, dtype, tol):
    c = shape[1]
    wb = (a(c, dtype=dtype), a(c, dtype=dtype)) if affine else (None, None)
    compare_with_torch(
        lambda x, w, b: F.group_norm(x, groups, w, b, 1e-3),
        lambda x, w, b: TF.group_norm(x, groups, w, b, 1e-3),
        a(*shape, dtype=dtype),
        *wb,
        rtol=tol * 10,
        atol=tol * 10,
    )


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3, 5), (3, 2, 4, 3)])
@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm_matches_torch_with_running_stats(shape, use_input_stats, dtype, tol):
    c = shape[1]
    x, w, b = a(*shape, dtype=dtype), a(c, dtype=dtype), a(c, dtype=dtype)
    stats = {
        lib: (lib.tensor(a(c, dtype=dtype) * 0.1), lib.tensor(np.abs(a(c, dtype=dtype)) + 0.5))
        for lib in (staged, torch)
    }
    stats[torch] = tuple(torch.tensor(s.numpy()) for s in stats[staged])
    compare_with_torch(
        lambda x, w, b: F.instance_norm(x, *stats[staged], w, b, use_input_stats, 0.3, 1e-3),
        lambda x, w, b: TF.instance_norm(x, *stats[torch], w, b, use_input_stats, 0.3, 1e-3),
        x,
        w,
        b,
        rtol=tol * 10,
        atol=tol * 10,
    )
    for s, t in zip(stats[staged], stats[torch]):  # the running statistics, updated alike
        assert_close(s, t, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("lead", [(5,), (2, 3), ()])
@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_matches_torch(lead, bias, dtype, tol):
    b = a(4, dtype=dtype) if bias else None
    compare_with_torch(
        F.bilinear,
        TF.bilinear,
        a(*lead, 3, dtype=dtype),
        a(*lead, 2, dtype=dtype),
        a(4, 3, 2, dtype=dtype),
        b,
        rtol=tol,
        atol=tol,
    )


f32 = lambda *s: RNG.standard_normal(s).astype(np.float32)  # noqa: E731

# name: (constructor(ns), inputs as NumPy arrays, forward keyword arguments)
LAYERS = {
    "ConvTranspose2d": (
        lambda ns: ns.nn.ConvTranspose2d(4, 6, 3, 2, 1, 1, 2),
        [f32(2, 4, 3, 5)],
        {},
    ),
    "ConvTranspose2d-output_size": (
        lambda ns: ns.nn.ConvTranspose2d(2, 3, (3, 2), stride=(3, 2), bias=False, dilation=2),
        [f32(2, 2, 3, 4)],
        {"output_size": [11, 10]},
    ),
    "ConvTranspose1d": (
        lambda ns: ns.nn.ConvTranspose1d(3, 2, 4, stride=2, padding=1),
        [f32(3, 6)],
        {},
    ),
    "PixelShuffle": (lambda ns: ns.nn.PixelShuffle(2), [f32(2, 8, 3, 3)], {}),
    "PixelUnshuffle": (lambda ns: ns.nn.PixelUnshuffle(3), [f32(2, 1, 6, 3)], {}),
    "GroupNorm": (lambda ns: ns.nn.GroupNorm(2, 6, eps=1e-3), [f32(3, 6, 4)], {}),
    "GroupNorm-no-bias": (lambda ns: ns.nn.GroupNorm(3, 6, bias=False), [f32(2, 6, 2, 2)], {}),
    "InstanceNorm1d": (lambda ns: ns.nn.InstanceNorm1d(3), [f32(2, 3, 5)], {}),
    "InstanceNorm2d-affine-tracked": (
        lambda ns: ns.nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
        [f32(2, 3, 4, 4) * 2 + 1],
        {},
    ),
    "InstanceNorm2d-unbatched": (
        lambda ns: ns.nn.InstanceNorm2d(2, affine=True),
        [f32(2, 3, 3)],
        {},
    ),
    "InstanceNorm1d-eval": (
        lambda ns: ns.nn.InstanceNorm1d(3, track_running_stats=True).eval(),
        [f32(2, 3, 4)],
        {},
    ),
    "Bilinear": (lambda ns: ns.nn.Bilinear(3, 2, 4), [f32(5, 3), f32(5, 2)], {}),
    "ReflectionPad1d": (lambda ns: ns.nn.ReflectionPad1d((2, 1)), [f32(2, 3, 4)], {}),
    "ReflectionPad2d": (lambda ns: ns.nn.ReflectionPad2d(1), [f32(2, 3, 4, 4)], {}),
    "ReplicationPad1d": (lambda ns: ns.nn.ReplicationPad1d(3), [f32(3, 4)], {}),
    "ReplicationPad2d": (lambda ns: ns.nn.ReplicationPad2d((1, 0, 2, 3)), [f32(1, 2, 3, 3)], {}),
    "ZeroPad1d": (lambda ns: ns.nn.ZeroPad1d((1, 2)), [f32(2, 3, 4)], {}),
    "ZeroPad2d": (lambda ns: ns.nn.ZeroPad2d((1, 1, 0, 2)), [f32(2, 3, 4, 4)], {}),
    "ConstantPad1d": (lambda ns: ns.nn.ConstantPad1d(2, 3.5), [f32(2, 3, 4)], {}),
    "ConstantPad2d": (lambda ns: ns.nn.ConstantPad2d((0, 1, 2, 0), -1.0), [f32(3, 4, 4)], {}),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_matches_torch(name):
    make, arrays, kwargs = LAYERS[name]
    check_layer(make, arrays, kwargs, rtol=1e-4)
    assert repr(make(staged)) == repr(make(torch))


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_default_initialisation_draws_torchs_numbers(name):
    make = LAYERS[name][0]
    staged.manual_seed(7)
    torch.manual_seed(7)
    ours, theirs = make(staged).state_dict(), make(torch).state_dict()
    assert list(ours) == list(theirs)
    for k, v in ours.items():
        assert_close(v, theirs[k], rtol=0, atol=0)


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.functional.pixel_shuffle(ns.ones(2, 5, 3, 3), 2),
        lambda ns: ns.nn.functional.pixel_shuffle(ns.ones(4, 3), 2),
        lambda ns: ns.nn.functional.pixel_shuffle(ns.ones(2, 4, 3, 3), 0),
        lambda ns: ns.nn.functional.pixel_unshuffle(ns.ones(2, 5, 3, 4), 2),
        lambda ns: ns.nn.functional.pixel_unshuffle(ns.ones(2, 5, 4, 3), 2),
        lambda ns: ns.nn.functional.pixel_unshuffle(ns.ones(2, 5, 4, 4), -1),
        lambda ns: ns.nn.functional.group_norm(ns.ones(2, 5, 3), 2),
        lambda ns: ns.nn.functional.group_norm(ns.ones(2, 6, 3), 2, ns.ones(5)),
        lambda ns: ns.nn.functional.group_norm(ns.ones(2), 2),
        lambda ns: ns.nn.GroupNorm(4, 6),
        lambda ns: ns.nn.functional.instance_norm(ns.ones(2, 3, 1)),
        lambda ns: ns.nn.functional.instance_norm(ns.ones(2, 3, 4), ns.zeros(3), None),
        lambda ns: ns.nn.InstanceNorm1d(4, affine=True)(ns.ones(2, 3, 5)),
        lambda ns: ns.nn.InstanceNorm2d(3)(ns.ones(2, 3)),
        lambda ns: ns.nn.functional.bilinear(ns.ones(2, 3), ns.ones(2, 4), ns.ones(5, 3, 3)),
        lambda ns: ns.nn.functional.bilinear(ns.ones(2, 3), ns.ones(3, 4), ns.ones(5, 3, 4)),
        lambda ns: ns.nn.functional.bilinear(
            ns.ones(2, 3), ns.ones(2, 4), ns.ones(5, 3, 4), ns.ones(4)
        ),
        lambda ns: ns.nn.functional.conv_transpose2d(
            ns.ones(2, 5, 3, 3), ns.ones(5, 2, 3, 3), stride=2, output_padding=2
        ),
        lambda ns: ns.nn.functional.conv_transpose1d(
            ns.ones(2, 5, 3), ns.ones(5, 2, 3), stride=2, output_padding=2
        ),
        lambda ns: ns.nn.functional.conv_transpose2d(ns.ones(2, 5, 3, 3), ns.ones(4, 2, 3, 3)),
        lambda ns: ns.nn.functional.conv_transpose2d(
            ns.ones(2, 5, 3, 3), ns.ones(5, 2, 3, 3), groups=2
        ),
        lambda ns: ns.nn.functional.conv_transpose2d(
            ns.ones(2, 5, 3, 3), ns.ones(5, 2, 3, 3), groups=0
        ),
        lambda ns: ns.nn.functional.conv_transpose1d(
            ns.ones(2, 5, 3), ns.ones(5, 2, 3), padding=-1
        ),
        lambda ns: ns.nn.functional.conv_transpose1d(ns.ones(2, 5, 3), ns.ones(5, 2, 3), stride=0),
        lambda ns: ns.nn.functional.conv_transpose2d(ns.ones(3, 3), ns.ones(5, 2, 3, 3)),
        lambda ns: ns.nn.ConvTranspose2d(2, 4, 3, padding_mode="reflect"),
        lambda ns: ns.nn.ConvTranspose2d(2, 4, 3, stride=2)(ns.ones(1, 2, 3, 3), output_size=[9]),
        lambda ns: ns.nn.ConvTranspose2d(2, 4, 3, stride=2)(ns.ones(1, 2, 3, 3), [9, 3]),
    ],
)
def test_errors_match_torch(call):
    assert_raises_like_torch(call)


def test_compiled_step_matches_eager():
    """A decoder step (ConvTranspose2d, GroupNorm, InstanceNorm, reflection padding, a
    PixelShuffle and a Bilinear head) trained by SGD: compiled, it gives eager's losses and
    parameters."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.ConvTranspose2d(3, 8, 3, stride=2, padding=1, output_padding=1)
            self.norm = nn.GroupNorm(2, 8)
            self.pad = nn.ReflectionPad2d(1)
            self.inorm = nn.InstanceNorm2d(8, affine=True)
            self.shuffle = nn.PixelShuffle(2)
            self.head = nn.Bilinear(2, 2, 1)

        def forward(self, x):
            y = self.shuffle(self.inorm(self.pad(self.norm(self.up(x)).relu())))
            z = y.flatten(2).mean(-1)  # (N, 2)
            return self.head(z, z.tanh())

    x, t = f32(2, 3, 4, 4), f32(2, 1)

    def run(compiled):
        staged.manual_seed(0)
        net = Net()
        opt = staged.optim.SGD(net.parameters(), lr=0.1)

        def step(x, t):
            loss = F.mse_loss(net(x), t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        fn = staged.compile(step) if compiled else step
        losses = [fn(staged.tensor(x), staged.tensor(t)).item() for _ in range(3)]
        return losses, {k: v.numpy() for k, v in net.state_dict().items()}

    eager, compiled = run(False), run(True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-4)
    for k, v in eager[1].items():
        np.testing.assert_allclose(compiled[1][k], v, rtol=1e-4, atol=1e-5)
