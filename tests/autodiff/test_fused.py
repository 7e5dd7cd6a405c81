"""Fused eager kernels (Note [fused kernels] in staged/eager/dispatch.py): each equals its
decomposition, value and gradients, and none ever reaches a graph or forward AD (under
vmap those with a batching rule bind themselves on the batch: test_vmap_kernels.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
import staged.nn.functional as F
from staged.autodiff import FUSED
from staged.eager.ops import layers
from staged.nn.modules import rnn
from tests.test_linalg_factorizations import KERNELS as LINALG  # checked there
from tests.test_geqrf import KERNELS as GEQRF  # checked there
from tests.test_linalg_ldl import KERNELS as LDL  # checked there

RTOL = {"float32": 2e-5, "float64": 1e-12}


def _t(rng, shape, dtype, grad=True):
    return staged.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=grad)


def _torch_lstm_cell(gates, c):
    i, f, g, o = gates.chunk(4, 1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return torch.stack([o.sigmoid() * c.tanh(), c])


def _torch_gru_cell(gi, gh, h):
    (ir, iz, in_), (hr, hz, hn) = gi.chunk(3, 1), gh.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    return n + z * (h - n)


def _square(rng, dtype):
    """A batch of well-conditioned 3x3 matrices whose first columns need row swaps."""
    a = rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    a[:, 2, 0] = 6
    return staged.tensor(a.astype(dtype), requires_grad=True)


TAKE = np.random.default_rng(2).integers(-10, 10, (4, 6))  # repeated entries, negative ones
PUT = [1, 4, 1, -1]


# name -> (the public call that runs it, its operands); every Fused forward kernel has a
# case here and backward kernels run under them (test_every_kernel_is_checked)
CASES = {
    "linear": lambda rng, d: (F.linear, [_t(rng, (2, 3, 5), d), _t(rng, (4, 5), d), _t(rng, 4, d)]),
    "linear_no_bias": lambda rng, d: (F.linear, [_t(rng, (6, 5), d), _t(rng, (4, 5), d)]),
    "layer_norm": lambda rng, d: (
        lambda x, w, b: F.layer_norm(x, (3, 4), w, b, eps=1e-3),
        [_t(rng, (2, 3, 4), d), _t(rng, (3, 4), d), _t(rng, (3, 4), d)],
    ),
    "cross_entropy": lambda rng, d: (
        lambda x: F.cross_entropy(x, staged.tensor([0, 4, -100, 2, 2, 1])),
        [_t(rng, (6, 5), d)],
    ),
    "nll_loss": lambda rng, d: (
        lambda x: F.nll_loss(x, staged.tensor([0, 4, -100, 2, 2, 1])),
        [_t(rng, (6, 5), d)],
    ),
    "huber": lambda rng, d: (  # |d| on both sides of delta, an infinite d
        lambda x, y: F.huber_loss(x * 2, y, reduction="none", delta=0.7),
        [_t(rng, (3, 5), d), _t(rng, (3, 5), d)],
    ),
    "flip": lambda rng, d: (lambda x: x.flip(0, -1), [_t(rng, (2, 3, 4), d)]),
    "roll": lambda rng, d: (lambda x: x.roll((-1, 5), (1, 2)), [_t(rng, (2, 3, 4), d)]),
    "elu": lambda rng, d: (  # both sides of 0, and 0 itself
        lambda x: F.elu(x.where(x.abs() > 0.3, 0.0) * 3, alpha=0.7),
        [_t(rng, (3, 5), d)],
    ),
    "celu": lambda rng, d: (lambda x: F.celu(x * 3, alpha=1.5), [_t(rng, (3, 5), d)]),
    "pick_max": lambda rng, d: (lambda x: x.max(1).values, [_t(rng, (3, 5, 2), d)]),
    "pick_min": lambda rng, d: (lambda x: x.min(-1, keepdim=True)[0], [_t(rng, (4, 3), d)]),
    "clamp": lambda rng, d: (  # both bounds, ties with them (gradient passes), -0.0 at 0
        lambda x: x.where(x.abs() > 0.3, -0.0).where(x.abs() < 1.5, 1.5).clamp(0, 1.5),
        [_t(rng, (4, 5), d)],
    ),
    "clamp_min": lambda rng, d: (lambda x: x.clamp_min(-0.2), [_t(rng, (3, 5), d)]),
    "clamp_max": lambda rng, d: (lambda x: x.clamp_max(0.4), [_t(rng, (3, 5), d)]),
    "softplus": lambda rng, d: (  # both sides of the threshold
        lambda x: staged.nn.functional.softplus(x * 3, beta=2.0, threshold=4.0),
        [_t(rng, (3, 5), d)],
    ),
    "smooth_l1": lambda rng, d: (
        lambda x, y: F.smooth_l1_loss(x * 2, y, reduction="none", beta=0.7),
        [_t(rng, (3, 5), d), _t(rng, (3, 5), d)],
    ),
    "norm2": lambda rng, d: (  # a zero column: its norm 0, its gradient 0
        lambda x: (x * staged.tensor([1.0, 0.0, 1.0, 1.0], dtype=x.dtype)[:, None]).norm(
            dim=(0, 2)
        ),
        [_t(rng, (3, 4, 2), d)],
    ),
    "bce_with_logits": lambda rng, d: (
        lambda x, y: F.binary_cross_entropy_with_logits(x * 4, y.sigmoid(), reduction="none"),
        [_t(rng, (3, 5), d), _t(rng, (3, 5), d)],
    ),
    "softmax": lambda rng, d: (lambda x: x.softmax(-2), [_t(rng, (2, 3, 4), d)]),
    "log_softmax": lambda rng, d: (lambda x: F.log_softmax(x, 1), [_t(rng, (2, 3, 4), d)]),
    "take_rows": lambda rng, d: (
        lambda w: layers._take_rows(w, staged.tensor([1, 3, 1, 4, 0, 1])),
        [_t(rng, (5, 3), d)],
    ),
    # 288 entries of the gradient: its flat add (Note [take's gradient])
    "take": lambda rng, d: (lambda x: x[:, staged.tensor(TAKE)], [_t(rng, (3, 10, 4), d)]),
    "put": lambda rng, d: (  # repeated entries: the last write wins, each gets its gradient
        lambda x, v: x.index_put((staged.tensor(PUT),), v),
        [_t(rng, (6, 3), d), _t(rng, (4, 3), d)],
    ),
    "lstm_cell": lambda rng, d: (rnn._lstm_cell, [_t(rng, (3, 8), d), _t(rng, (3, 2), d)]),
    "gru_cell": lambda rng, d: (
        rnn._gru_cell,
        [_t(rng, (3, 6), d), _t(rng, (3, 6), d), _t(rng, (3, 2), d)],
    ),
    "conv": lambda rng, d: (
        lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2)),
        [_t(rng, (2, 3, 6, 7), d), _t(rng, (4, 3, 3, 2), d), _t(rng, 4, d)],
    ),
    "conv_no_bias": lambda rng, d: (
        lambda x, w: F.conv1d(x, w, padding=2),
        [_t(rng, (2, 3, 9), d), _t(rng, (4, 3, 3), d)],
    ),
    "max_pool": lambda rng, d: (
        lambda x: F.max_pool2d(x, 3, stride=2, padding=1),
        [_t(rng, (2, 3, 7, 6), d)],
    ),
    "linalg_solve": lambda rng, d: (staged.linalg.solve, [_square(rng, d), _t(rng, (2, 3, 2), d)]),
    "linalg_det": lambda rng, d: (staged.linalg.det, [_square(rng, d)]),
    "linalg_slogdet": lambda rng, d: (staged.linalg._core._slogdet, [_square(rng, d)]),
    "stack": lambda rng, d: (
        lambda a, b, c: staged.stack([a, b, c], -2),
        [_t(rng, (2, 3, 4), d), _t(rng, (2, 3, 4), d), _t(rng, (2, 3, 4), d)],
    ),
    "select": lambda rng, d: (lambda x: x.select(1, -2), [_t(rng, (3, 4, 5), d)]),
    "mean": lambda rng, d: (lambda x: x.mean((0, 2), keepdim=True), [_t(rng, (3, 4, 5), d)]),
}
TORCH = {  # the twins of the cases, from the same operands
    "linear": torch.nn.functional.linear,
    "linear_no_bias": torch.nn.functional.linear,
    "layer_norm": lambda x, w, b: torch.nn.functional.layer_norm(x, (3, 4), w, b, eps=1e-3),
    "cross_entropy": lambda x: torch.nn.functional.cross_entropy(
        x, torch.tensor([0, 4, -100, 2, 2, 1])
    ),
    "nll_loss": lambda x: torch.nn.functional.nll_loss(x, torch.tensor([0, 4, -100, 2, 2, 1])),
    "huber": lambda x, y: torch.nn.functional.huber_loss(x * 2, y, reduction="none", delta=0.7),
    "flip": lambda x: x.flip(0, -1),
    "roll": lambda x: x.roll((-1, 5), (1, 2)),
    "elu": lambda x: torch.nn.functional.elu(x.where(x.abs() > 0.3, 0.0) * 3, alpha=0.7),
    "celu": lambda x: torch.nn.functional.celu(x * 3, alpha=1.5),
    "pick_max": lambda x: x.max(1).values,
    "pick_min": lambda x: x.min(-1, keepdim=True)[0],
    "clamp": lambda x: x.where(x.abs() > 0.3, -0.0).where(x.abs() < 1.5, 1.5).clamp(0, 1.5),
    "clamp_min": lambda x: x.clamp_min(-0.2),
    "clamp_max": lambda x: x.clamp_max(0.4),
    "softplus": lambda x: torch.nn.functional.softplus(x * 3, beta=2.0, threshold=4.0),
    "smooth_l1": lambda x, y: torch.nn.functional.smooth_l1_loss(
        x * 2, y, reduction="none", beta=0.7
    ),
    "norm2": lambda x: (x * torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=x.dtype)[:, None]).norm(
        dim=(0, 2)
    ),
    "bce_with_logits": lambda x, y: torch.nn.functional.binary_cross_entropy_with_logits(
        x * 4, y.sigmoid(), reduction="none"
    ),
    "softmax": lambda x: x.softmax(-2),
    "log_softmax": lambda x: torch.nn.functional.log_softmax(x, 1),
    "take_rows": lambda w: torch.nn.functional.embedding(torch.tensor([1, 3, 1, 4, 0, 1]), w),
    "take": lambda x: x[:, torch.tensor(TAKE)],
    "put": lambda x, v: x.index_put((torch.tensor(PUT),), v),
    "lstm_cell": lambda gates, c: _torch_lstm_cell(gates, c),
    "gru_cell": lambda gi, gh, h: _torch_gru_cell(gi, gh, h),
    "conv": lambda x, w, b: torch.nn.functional.conv2d(
        x, w, b, stride=(2, 1), padding=1, dilation=(1, 2)
    ),
    "conv_no_bias": lambda x, w: torch.nn.functional.conv1d(x, w, padding=2),
    "max_pool": lambda x: torch.nn.functional.max_pool2d(x, 3, stride=2, padding=1),
    "linalg_solve": torch.linalg.solve,
    "linalg_det": torch.linalg.det,
    "linalg_slogdet": lambda a: torch.stack(torch.linalg.slogdet(a)),
    "stack": lambda a, b, c: torch.stack([a, b, c], -2),
    "select": lambda x: x.select(1, -2),
    "mean": lambda x: x.mean((0, 2), keepdim=True),
}
BACKWARD = {
    "linear_dx",
    "linear_dw",
    "layer_norm_dx",
    "layer_norm_dw",
    "cross_entropy_dx",
    "nll_loss_dx",
    "huber_dx",
    "elu_dx",
    "clamp_dx",
    "softplus_dx",
    "norm2_dx",
    "bce_with_logits_dx",
    "softmax_dx",
    "log_softmax_dx",
    "take_dx",
    "lstm_cell_dgates",
    "lstm_cell_dc",
    "gru_cell_d",
    "conv_dx",
    "conv_dw",
    "max_pool_dx",
}


# staged.fft's kernels (complex operands and cotangents): tests/test_fft.py checks them
FFT = {"fft_c2c", "fft_r2c", "fft_c2r"}
# vmap's per-example cross entropy: tests/autograd/test_vmap_cross_entropy_kernels.py
VMAP = {"per_example_cross_entropy", "per_example_cross_entropy_dx"}


def test_every_kernel_is_checked():
    assert set(FUSED) == set(CASES) | BACKWARD | FFT | LINALG | LDL | GEQRF | VMAP


def _decomposed(fn, args):
    """``fn(*args)`` with every Fused kernel decomposed (as under forward AD)."""
    with staged.autograd.forward_ad.dual_level():
        return fn(*args)


def _run(fn, args, g, **kw):
    out = fn(*args)
    grads = staged.autograd.grad(out, args, g, **kw)
    return out, grads


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_equals_its_decomposition(name, dtype):
    """Values, gradients, and gradients of gradients (through the backward kernels'
    decompositions) of the fused kernel against the composite, and torch."""
    rng = np.random.default_rng(0)
    fn, args = CASES[name](rng, dtype)
    out = fn(*args)
    assert out.grad_fn.prim is FUSED[name]
    g = staged.tensor(rng.standard_normal(tuple(out.shape)).astype(dtype))
    grads = staged.autograd.grad(out, args, g, create_graph=True)
    with staged.autograd.forward_ad.dual_level():  # decomposes every kernel
        ref = fn(*args)
        assert getattr(ref.grad_fn, "prim", None) is not FUSED[name]
        ref_grads = staged.autograd.grad(ref, args, g, create_graph=True)
    rtol = RTOL[dtype]
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=rtol, atol=rtol)
    for a, b in zip(grads, ref_grads):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=rtol)
    # second order: the backward kernels decompose where their result needs a grad_fn
    pairs = [(a, b) for a, b in zip(grads, ref_grads) if a.requires_grad or b.requires_grad]
    vs = [staged.tensor(rng.standard_normal(tuple(a.shape)).astype(dtype)) for a, _ in pairs]
    second = staged.autograd.grad([a for a, _ in pairs], args, vs, allow_unused=True)
    ref_second = staged.autograd.grad([b for _, b in pairs], args, vs, allow_unused=True)
    for a, b in zip(second, ref_second):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=10 * rtol, atol=10 * rtol)
    # and torch, from the same operands
    targs = [torch.tensor(a.detach().numpy(), requires_grad=True) for a in args]
    tout = TORCH[name](*targs)
    tgrads = torch.autograd.grad(tout, targs, torch.from_numpy(g.numpy()))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=rtol, atol=rtol)
    for a, b in zip(grads, tgrads):
        np.testing.assert_allclose(a.detach().numpy(), b.numpy(), rtol=rtol, atol=rtol)


def test_backward_kernels_run_eagerly_and_decompose_for_double_backward():
    """Plain backward runs the backward kernels (one Node per input gradient); with
    create_graph their results have the decomposition's grad_fns."""
    rng = np.random.default_rng(1)
    x, w, b = _t(rng, (4, 5), "float64"), _t(rng, (3, 5), "float64"), _t(rng, 3, "float64")
    (gx,) = staged.autograd.grad(F.linear(x, w, b).sum(), [x])
    assert gx.grad_fn is None
    (gx,) = staged.autograd.grad(F.linear(x, w, b).sum(), [x], create_graph=True)
    assert gx.grad_fn is not None and "Linear" not in gx.grad_fn.name()


def test_fallbacks_keep_the_composite():
    """Operands a kernel is not written for take the composite: its promotion and errors."""
    x = staged.randn(3, 4)
    # mixed dtypes: promotion's error, as torch
    with pytest.raises(RuntimeError, match="dtype"):
        F.linear(x, staged.randn(2, 4, dtype=staged.float64))
    assert F.linear(x, staged.randn(2, 4)).grad_fn is None  # nothing requires grad
    w = staged.randn(2, 4, requires_grad=True)
    for out in (F.linear(x[0], w), F.linear(x, w, staged.zeros(1, 2))):  # 1-D input; 2-D bias
        assert getattr(out.grad_fn, "prim", None) not in FUSED.values()
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        F.cross_entropy(x, staged.tensor([0, 7, 1]))


def test_captured_steps_see_only_primitives():
    """Under capture a Fused kernel records its decomposition: the graph holds no Fused op,
    and the compiled step gives eager's loss."""
    staged.manual_seed(0)
    model = staged.nn.Sequential(
        staged.nn.Linear(8, 16), staged.nn.LayerNorm(16), staged.nn.Linear(16, 4, bias=False)
    )
    x, y = staged.randn(5, 8), staged.tensor([0, 3, 1, 2, 0])

    def loss_fn(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss

    graph = staged.capture(loss_fn, x, y).graph
    names = {op.prim.name for op in graph.ops}
    assert names and not names & set(FUSED)
    eager = loss_fn(x, y).item()
    for p in model.parameters():
        p.grad = None
    compiled = staged.compile(loss_fn)(x, y).item()
    assert compiled == pytest.approx(eager, rel=1e-5)


def test_forward_ad_uses_the_decomposition_and_vmap_batches_the_kernel():
    rng = np.random.default_rng(2)
    x, w, b = (
        _t(rng, (4, 5), "float64", False),
        _t(rng, (3, 5), "float64", False),
        _t(rng, 3, "float64", False),
    )
    t = staged.tensor(rng.standard_normal((4, 5)))
    fwd = staged.autograd.forward_ad
    with fwd.dual_level():
        out = F.linear(fwd.make_dual(x, t), w, b)
        tangent = fwd.unpack_dual(out).tangent
    np.testing.assert_allclose(tangent.numpy(), t.numpy() @ w.numpy().T, rtol=1e-12)
    batched = staged.func.vmap(lambda r: F.linear(r, w, b))(x)
    np.testing.assert_allclose(batched.numpy(), x.numpy() @ w.numpy().T + b.numpy(), rtol=1e-12)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("loss_name", ["cross_entropy", "nll_loss"])
def test_mean_loss_with_every_target_ignored_has_zero_gradients(loss_name, fused):
    """torch: the mean over no targets is NaN, its gradient zeros (not 0/0's NaN), in the
    kernel, its decomposition and the composite."""
    loss_fn = getattr(F, loss_name)
    x = staged.randn(3, 4, dtype=staged.float64, requires_grad=True)
    t = staged.tensor([-100, -100, -100])
    if fused:
        loss = loss_fn(x, t)
        (g,) = staged.autograd.grad(loss, [x], create_graph=True)
        # nll_loss's gradient is constant in x: no grad_fn (torch's gives zeros)
        gg = staged.autograd.grad(g.sum(), [x])[0] if g.requires_grad else staged.zeros(3, 4)
        assert loss.grad_fn.prim is FUSED[loss_name]
    else:
        with staged.autograd.forward_ad.dual_level():  # the decomposition
            loss = loss_fn(x, t)
            (g,) = staged.autograd.grad(loss, [x], create_graph=True)
        gg = staged.zeros(3, 4)
    assert np.isnan(loss.item())
    assert np.array_equal(g.detach().numpy(), np.zeros((3, 4)))
    assert np.array_equal(gg.numpy(), np.zeros((3, 4)))
    partly = loss_fn(x, staged.tensor([1, -100, 2]))  # the others still count
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    getattr(torch.nn.functional, loss_name)(xt, torch.tensor([1, -100, 2])).backward()
    (gp,) = staged.autograd.grad(partly, [x])
    np.testing.assert_allclose(gp.numpy(), xt.grad.numpy(), rtol=1e-12)


def test_log_softmax_and_cross_entropy_of_infinite_logits_are_torchs():
    """A row holding +inf, or only -inf, is NaN in torch's log_softmax (its kernel does not
    special-case an infinite max, unlike logsumexp): the fused kernel, its decomposition
    and a compiled step give the same, values and gradients; a -inf beside finite logits
    stays -inf."""
    inf = float("inf")
    rows = [[1.0, inf, 2.0], [-inf, -inf, -inf], [1.0, -inf, 3.0], [0.5, 1.5, -2.0]]
    g = [[1.0, 2.0, 3.0]] * 4

    def run(lib, x):
        out = lib.nn.functional.log_softmax(x, 1)
        (grad,) = lib.autograd.grad(out, [x], lib.tensor(g))
        xe = x.detach().requires_grad_()
        ce = lib.nn.functional.cross_entropy(xe, lib.tensor([0, 1, 2, 0]))
        ce.backward()
        return [a.detach() for a in (out, grad, ce, xe.grad)]

    want = run(torch, torch.tensor(rows, requires_grad=True))
    fused = run(staged, staged.tensor(rows, requires_grad=True))
    with staged.autograd.forward_ad.dual_level():  # the decomposition
        decomposed = run(staged, staged.tensor(rows, requires_grad=True))
    compiled = staged.compile(lambda x: run(staged, x.requires_grad_()))(staged.tensor(rows))
    for got in (fused, decomposed, compiled):
        for a, b in zip(got, want):
            a, b = a.numpy(), b.numpy()
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)  # NaN where torch's


@pytest.mark.parametrize(
    "call",
    [
        lambda F, x, w: F.linear(x, w),
        lambda F, x, w: F.layer_norm(x, (5,), w[0], w[1]),
        lambda F, x, w: F.gelu(x),
        lambda F, x, w: F.gelu(x, approximate="tanh"),
    ],
    ids=["linear", "layer_norm", "gelu", "gelu_tanh"],
)
def test_results_torch_does_not_save_may_change_in_place(call):
    """Where torch's backward node keeps the inputs, not the result (AddmmBackward0,
    NativeLayerNormBackward0, GeluBackward0), changing the result in place before
    backward is allowed: a kernel here that kept its result would raise instead."""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((3, 5)), rng.standard_normal((2, 5))
    grads = []
    for lib in (torch, staged):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        out = call(lib.nn.functional, xt, wt)
        out.mul_(2)
        out.sum().backward()
        grads.append(np.asarray(xt.grad.detach().numpy()))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(3, 8, 0), (3, 0, 8), (0, 8, 4)])
def test_linear_with_an_empty_dim_differentiates_as_torch(shape):
    """``_rows`` of an array with a 0 last dim (a Linear with no output features crashed
    in backward: reshape(-1, 0))."""
    n, i, o = shape
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((n, i), (o, i), (o,)))
    grads = []
    for lib in (staged, torch):
        ts = [lib.tensor(a, requires_grad=True) for a in (x, w, b)]
        out = lib.nn.functional.linear(*ts)
        assert tuple(out.shape) == (n, o)
        (out.sum() + 1).backward()
        grads.append([t.grad.numpy() for t in ts])
    for g, tg in zip(*grads):
        np.testing.assert_allclose(g, tg, rtol=1e-6)
