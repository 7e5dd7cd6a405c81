"""The fused kernels' row reductions (Note [row reductions] in staged/autodiff/fused.py) and
the embedding's row take (``take_rows``): forward kernels equal their decompositions bit for
bit (what a captured graph computes), including rows of infinities and NaN; backward
kernels, which sum a row in BLAS's order, equal torch's gradients within the rounding of a
row's sum; the embedding matches torch eagerly, under vmap, forward AD, double backward and
in a compiled step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
import staged.nn.functional as F
from staged.autodiff import FUSED
from staged.eager.ops import layers
from tests.checks import compare

inf, nan = float("inf"), float("nan")


def _tol(dtype, n):
    """A row sum of ``n`` terms in two orders differs by at most ``n - 1`` roundings of the
    largest partial sum; a few more for the exp, log or divide around it."""
    return (n + 8) * np.finfo(dtype).eps


def _decomposed(fn, *args):
    """``fn(*args)`` with every Fused kernel decomposed into primitives (as under capture)."""
    with staged.autograd.forward_ad.dual_level():
        return fn(*args)


def _rows(rng, shape, dtype):
    """Normal rows, with a row holding +inf, one only -inf, one NaN and one a single -inf."""
    x = rng.standard_normal(shape).astype(dtype) * 3
    flat = x.reshape(-1, shape[-1])
    flat[0, 1] = inf
    flat[1] = -inf
    flat[2, 0] = nan
    flat[3, -1] = -inf
    return x


KERNELS = {  # forward kernels with a row max: (staged, torch)
    "softmax": (lambda x, d: x.softmax(d), lambda x, d: x.softmax(d)),
    "log_softmax": (lambda x, d: F.log_softmax(x, d), lambda x, d: x.log_softmax(d)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(5, 32), (2, 3, 64), (4, 65), (6, 200)], ids=str)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_forward_kernels_equal_their_decomposition_bit_for_bit(name, shape, dtype):
    """Short rows take the max of a transposed copy, long ones NumPy's; either way the
    kernel's values are its decomposition's exactly, and torch's (NaN where torch's)."""
    ours, theirs = KERNELS[name]
    x = _rows(np.random.default_rng(0), shape, dtype)
    for dim in (-1, 0):
        for a in (x, np.swapaxes(x, 0, -1)):  # contiguous, and a transposed view
            t = staged.tensor(a)
            out = ours(t, dim)
            assert out.grad_fn is None and np.array_equal(
                out.numpy(), _decomposed(ours, t, dim).numpy(), equal_nan=True
            )
            ref = theirs(torch.from_numpy(np.ascontiguousarray(a)), dim).numpy()
            n = a.shape[dim]
            np.testing.assert_allclose(out.numpy(), ref, rtol=_tol(dtype, n), atol=_tol(dtype, n))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("classes", [10, 64, 100])
def test_cross_entropy_equals_its_decomposition_and_torch(classes, dtype):
    """The kernel takes only the picked log-probabilities (x[t] - logsumexp), rounded as the
    whole log_softmax's; its gradient (softmax - one-hot, BLAS row sums) is torch's."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((37, classes)) * 4).astype(dtype)
    t = rng.integers(0, classes, 37)
    t[[3, 9]] = -100
    xs = staged.tensor(x, requires_grad=True)
    loss = F.cross_entropy(xs, staged.tensor(t))
    assert loss.grad_fn.prim is FUSED["cross_entropy"]
    ref = _decomposed(F.cross_entropy, xs.detach(), staged.tensor(t))
    assert loss.item() == ref.item()
    (g,) = staged.autograd.grad(loss, [xs])
    xt = torch.tensor(x, requires_grad=True)
    tl = torch.nn.functional.cross_entropy(xt, torch.from_numpy(t))
    tl.backward()
    tol = _tol(dtype, classes)
    np.testing.assert_allclose(loss.item(), tl.item(), rtol=tol)
    np.testing.assert_allclose(g.numpy(), xt.grad.numpy(), rtol=tol, atol=tol / len(t))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_backward_kernels_sum_rows_as_blas_within_rounding(dtype):
    """layer_norm (over one and two trailing dims, a transposed input), softmax and
    log_softmax along the last dim (rows of 32 and 200) and another, with a cotangent that
    is a broadcast (from ``sum``) or not: gradients are torch's."""
    rng = np.random.default_rng(2)
    data = [rng.standard_normal(s).astype(dtype) for s in ((4, 6, 32), (6, 32), (6, 32), (3, 200))]
    cotangent = rng.standard_normal((4, 6, 32)).astype(dtype)

    def run(lib):
        F_ = lib.nn.functional
        x, w, b, long = (lib.tensor(a, requires_grad=True) for a in data)
        g = lib.tensor(cotangent)
        outs = [
            F_.layer_norm(x, (32,), w[0], b[0]),
            F_.layer_norm(x.transpose(0, 1), (4, 32), w[:4], b[:4]).transpose(0, 1),
            F_.layer_norm(x, (6, 32), w, b),
            x.softmax(-1),
            F_.log_softmax(x, -1),
            x.softmax(1) * 2,
            F_.log_softmax(x, 0),
        ]
        grads = [lib.autograd.grad(o, [x, w, b], g, allow_unused=True) for o in outs]
        sums = [lib.autograd.grad(f(long, -1).sum(), [long]) for f in (F_.softmax, F_.log_softmax)]
        return [[v for v in gr if v is not None] for gr in grads], sums

    tol = _tol(dtype, 200)
    compare(run, rtol=tol, atol=tol)


# --- the embedding's row take -----------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_embedding_is_one_kernel_with_torchs_values_and_gradients(dtype):
    """Repeated rows, int32 indices, a padding row and embedding_bag (through the same
    kernel): values and gradients are torch's, the row sums in the same order."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((7, 5)).astype(dtype)
    idx = np.array([[1, 3, 1], [6, 0, 1]])
    g = rng.standard_normal((2, 3, 5)).astype(dtype)
    assert (
        layers._take_rows(staged.tensor(w, requires_grad=True), staged.tensor([1, 2])).grad_fn.prim
        is FUSED["take_rows"]
    )

    def run(lib):
        F_ = lib.nn.functional
        wt = lib.tensor(w, requires_grad=True)
        outs = [
            F_.embedding(lib.tensor(idx), wt),
            F_.embedding(lib.tensor(idx.astype(np.int32)), wt),
            F_.embedding(lib.tensor(idx), wt, padding_idx=1),
        ]
        grads = [lib.autograd.grad(o, [wt], lib.tensor(g))[0] for o in outs]
        bag = F_.embedding_bag(lib.tensor(idx.reshape(-1)), wt, lib.tensor([0, 2]), mode="sum")
        return outs, grads, bag, lib.autograd.grad(bag.sum(), [wt])

    compare(run, rtol=_tol(dtype, 8), atol=_tol(dtype, 8))


def test_embedding_under_vmap_forward_ad_and_double_backward():
    """vmap (no batching rule: the decomposition), a forward-mode tangent, and the gradient
    of a gradient (the weight gradient kernel decomposes where it needs a grad_fn)."""
    rng = np.random.default_rng(4)
    w = rng.standard_normal((6, 4))
    idx = np.array([[0, 5, 5], [2, 2, 1]])
    u = rng.standard_normal((6, 4))

    def run(lib):
        F_ = lib.nn.functional
        wt = lib.tensor(w, requires_grad=True)
        batched = lib.func.vmap(lambda i: F_.embedding(i, wt))(lib.tensor(idx))
        per = lib.func.vmap(lib.func.grad(lambda v, i: (F_.embedding(i, v) ** 3).sum()), (None, 0))
        _, tangent = lib.func.jvp(
            lambda v: F_.embedding(lib.tensor(idx), v), (wt,), (lib.tensor(u),)
        )
        (gw,) = lib.autograd.grad(
            (F_.embedding(lib.tensor(idx), wt) ** 2).sum(), [wt], create_graph=True
        )
        (gg,) = lib.autograd.grad((gw * lib.tensor(u)).sum(), [wt])
        return batched, per(wt, lib.tensor(idx)), tangent, gw, gg

    compare(run, rtol=1e-12, atol=1e-12)


def test_compiled_step_with_an_embedding_sees_only_primitives():
    staged.manual_seed(0)
    emb, head = staged.nn.Embedding(10, 6), staged.nn.Linear(6, 10)
    x, y = staged.tensor([[1, 4, 4], [9, 0, 1]]), staged.tensor([[2, 3, 1], [0, 0, 9]])

    def step(x, y):
        loss = F.cross_entropy(head(emb(x)).reshape(-1, 10), y.reshape(-1))
        loss.backward()
        return loss

    names = {op.prim.name for op in staged.capture(step, x, y).graph.ops}
    assert "gather" in names and not names & set(FUSED)
    eager = step(x, y).item()
    grad = emb.weight.grad.numpy().copy()
    for p in (*emb.parameters(), *head.parameters()):
        p.grad = None
    compiled = staged.compile(step)(x, y).item()
    assert compiled == pytest.approx(eager, rel=1e-5)
    np.testing.assert_allclose(emb.weight.grad.numpy(), grad, rtol=1e-5, atol=1e-6)
