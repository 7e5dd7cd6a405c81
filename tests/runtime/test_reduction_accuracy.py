"""Accuracy of sums and of what is built on them (mean, var, mse_loss, layer_norm,
softmax) in every mode, against float64 NumPy on the same (rounded) inputs, with error
bounds from the summation order (Note [blocked sums] in staged/autodiff/blocked.py); float16
and bfloat16 accumulate in float32 and round once; their gradients match torch 2.13."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

import staged
import staged.nn.functional as F
import staged.onnx
from staged.autodiff.blocked import BLOCK, SPLIT_MIN, depth
from tests.backends import needs_vulkan

U = 2.0**-24  # float32's unit roundoff
HALF = {
    "float32": (staged.float32, 0.0),
    "float16": (staged.float16, 2.0**-11),
    "bfloat16": (staged.bfloat16, 2.0**-8),
}
# float32 exp and rsqrt are taken to be within LIBM units of roundoff (IREE's polynomials)
LIBM = 4
MODES = ["eager", "llvm-cpu", pytest.param("vulkan-spirv", marks=needs_vulkan), "onnx"]
rng = np.random.default_rng(0)


def run(mode, fn, arrays, tmp_path):
    """``fn``'s outputs on ``arrays`` eagerly, compiled for a backend, or exported to ONNX
    and run in onnxruntime, as float64 arrays."""
    args = tuple(staged.tensor(a) for a in arrays)
    if mode == "onnx":
        path = tmp_path / "f.onnx"
        staged.onnx.export(fn, args, path, with_gradients=False)
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        outs = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), arrays)})
    else:
        outs = [
            o.numpy()
            for o in (fn(*args) if mode == "eager" else staged.compile(fn, backend=mode)(*args))
        ]
    return [np.asarray(o, np.float64) for o in outs]


def check(name, got, ref, bound):
    err = np.abs(got - ref)
    worst = np.unravel_index(np.argmax(err - bound), np.shape(err)) if np.ndim(err) else ()
    assert np.all(err <= bound), (
        f"{name}: error {err[worst]:.3g} above its bound "
        f"{np.broadcast_to(bound, np.shape(err))[worst]:.3g}"
    )


def test_depth_meets_the_float32_target():
    """The blocked order's worst case for 2**25 terms of one sign, (depth + 1) u, is below
    the 1e-5 relative target, as is a prime size's (padded) and a leading-axis sum's."""
    for shape, dims in [
        ((1 << 25,), (0,)),
        ((8192, 4096), (0, 1)),
        ((1 << 24, 2), (0,)),
        ((33_554_393,), (0,)),
    ]:
        assert (depth(shape, dims) + 1) * U <= 1e-5, (shape, dims)
    assert depth((SPLIT_MIN,), (0,)) == SPLIT_MIN - 1 and BLOCK < SPLIT_MIN


@pytest.fixture(scope="module")
def big():
    """8192 x 4096 float32 ``x`` in [0.5, 1), ``t`` in [-1, 0), and the float64 references
    of x.sum(), x.mean(), mse_loss(x, t) and x.reshape(-1, 2).sum(0)."""
    x = rng.random((8192, 4096), dtype=np.float32) * np.float32(0.5) + np.float32(0.5)
    t = -rng.random((8192, 4096), dtype=np.float32)
    s = x.sum(dtype=np.float64)
    d = x.astype(np.float64).ravel()
    d -= t.ravel()
    refs = (s, s / x.size, np.dot(d, d) / x.size, x.reshape(-1, 2).sum(0, dtype=np.float64))
    return x, t, refs


@pytest.mark.parametrize("mode", ["eager", "llvm-cpu", "onnx"])
def test_float32_sums_of_2_25_elements(mode, big, tmp_path):
    """sum, mean, mse_loss over 8192 x 4096 and a sum over the leading axis of 2**24 rows:
    relative error <= (depth + k) u <= 1e-5 (one rounding chain per term: k = 1 for sum, 2
    for mean, 5 for mse_loss's difference, square and division). Before: a compiled sum
    of 2**25 ones stuck at 2**24, mse_loss was 6.5% off, sums over a leading axis (NumPy's
    and onnxruntime's too) ran one chain."""
    x, t, (s_ref, m_ref, mse_ref, cols_ref) = big
    fn = lambda x, t: (x.sum(), x.mean(), F.mse_loss(x, t), x.reshape(-1, 2).sum(0))  # noqa
    s, m, mse, cols = run(mode, fn, (x, t), tmp_path)
    full, lead = depth(x.shape, (0, 1)), depth((1 << 24, 2), (0,))
    check("sum", s, s_ref, (full + 1) * U * s_ref)
    check("mean", m, m_ref, (full + 2) * U * m_ref)
    check("mse_loss", mse, mse_ref, (full + 5) * U * mse_ref)
    check("sum(0)", cols, cols_ref, (lead + 1) * U * cols_ref)


def _ops(x, t):
    return (
        x.sum(-1),
        x.mean(),
        x.var(),
        F.mse_loss(x, t),
        F.layer_norm(x, (x.shape[-1],)),
        x.softmax(-1),
    )


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("mode", MODES)
def test_rows_of_8192_in_every_mode(mode, dtype, tmp_path):
    """Row sums, mean, var, mse_loss, layer_norm and softmax over 64 x 8192 (rows long
    enough to be blocked), computed from float16/bfloat16 inputs in float32 and rounded
    once: error <= u_half |ref| + the float32 bound (relative for all but layer_norm,
    absolute for it). Before: float16 means of ones gave 0.2, bfloat16 sums stuck at 256,
    float16 layer_norm was off by 0.97 at width 4096."""
    d, uh = HALF[dtype]
    if mode == "vulkan-spirv" and d is not staged.float32:
        pytest.skip("vulkan-spirv's baseline SPIR-V target has no 16-bit storage")
    x = rng.uniform(0.5, 1.0, (64, 8192)).astype(np.float32)
    t = rng.uniform(-1.0, 0.0, (64, 8192)).astype(np.float32)
    if d is not staged.float32:  # the references see the rounded inputs
        x, t = (staged.tensor(a).to(d).float().numpy() for a in (x, t))
    fn = lambda x, t: tuple(o.float() for o in _ops(x.to(d), t.to(d)))  # noqa: E731
    rows, mean, var, mse, ln, sm = run(mode, fn, (x, t), tmp_path)

    x64 = x.astype(np.float64)
    full, row = depth(x.shape, (0, 1)), depth(x.shape, (1,))
    m, v = x64.mean(1, keepdims=True), x64.var(1, keepdims=True)
    y = (x64 - m) / np.sqrt(v + 1e-5)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    diff2 = (x64 - t) ** 2
    check("sum(-1)", rows, x64.sum(1), (uh + (row + 1) * U) * x64.sum(1))
    check("mean", mean, x64.mean(), (uh + (full + 2) * U) * x64.mean())
    # x - mean, its square, the sum, the division; the mean's error is second order
    check("var", var, x64.var(ddof=1), (uh + (full + 5) * U) * x64.var(ddof=1))
    check("mse_loss", mse, diff2.mean(), (uh + (full + 5) * U) * diff2.mean())
    # |mean error| / std, and y's relative error: x - mean, half of var's, the eps add,
    # rsqrt, the product
    ln_bound = np.abs(m) / np.sqrt(v) * (row + 2) * U + np.abs(y) * (
        uh + ((row + 5) / 2 + 3 + LIBM) * U
    )
    check("layer_norm", ln, y, ln_bound)
    # exp of (x - max) within |x - max| u + LIBM u, the row sum, the division
    check(
        "softmax",
        sm,
        e / e.sum(1, keepdims=True),
        (uh + (row + LIBM + 3) * U) * e / e.sum(1, keepdims=True),
    )


def _grads(lib, x, t, g_rows, g_ln):
    """Gradients of sum(-1), mean, var, mse_loss, layer_norm and softmax, each against its
    own output cotangent, w.r.t. ``x``, for staged or torch."""
    outs = [
        x.sum(-1),
        x.mean(),
        x.var(),
        lib.nn.functional.mse_loss(x, t),
        lib.nn.functional.layer_norm(x, (x.shape[-1],)),
        x.softmax(-1),
    ]
    cots = [g_rows, None, None, None, g_ln, g_ln]
    grads = []
    for o, c in zip(outs, cots):
        (gx,) = lib.autograd.grad(o, x, c, retain_graph=True)
        grads.append(gx)
    return grads


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_gradients_match_torch(dtype):
    """The VJPs of these reductions in float16/bfloat16 (float32 inside, one rounding)
    against torch's, to 8 units of half roundoff of the largest gradient (torch rounds the
    cotangent and some intermediates in half where staged keeps float32)."""
    d, uh = HALF[dtype]
    td = getattr(torch, dtype)
    x = rng.uniform(0.5, 1.0, (8, 4096)).astype(np.float32)
    t = rng.uniform(-1.0, 0.0, (8, 4096)).astype(np.float32)
    g_rows = rng.uniform(-1, 1, 8).astype(np.float32)
    g_ln = rng.uniform(-1, 1, (8, 4096)).astype(np.float32)
    sx = staged.tensor(x).to(d).requires_grad_()
    tx = torch.tensor(x).to(td).requires_grad_()
    ours = _grads(
        staged, sx, staged.tensor(t).to(d), staged.tensor(g_rows).to(d), staged.tensor(g_ln).to(d)
    )
    theirs = _grads(
        torch, tx, torch.tensor(t).to(td), torch.tensor(g_rows).to(td), torch.tensor(g_ln).to(td)
    )
    for name, a, b in zip(
        ["sum", "mean", "var", "mse_loss", "layer_norm", "softmax"], ours, theirs
    ):
        assert a.dtype is d, name
        a, b = a.float().numpy().astype(np.float64), b.float().numpy().astype(np.float64)
        np.testing.assert_allclose(a, b, rtol=4 * uh, atol=8 * uh * np.abs(b).max(), err_msg=name)
