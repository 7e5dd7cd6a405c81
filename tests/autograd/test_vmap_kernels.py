"""vmap of the Fused eager kernels (Note [fused kernels] in staged/eager/dispatch.py): a
kernel with a batching rule binds itself once on the batch (linear, its weight gradient as
a batch of outer products, cross entropy per example, softmax along a dim), a rule that
cannot batch its operands declines to the kernel's decomposition; either way the values
and gradients are torch.func's."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from staged.autograd import batching
from tests.checks import both, close, compare

rng = np.random.default_rng(0)
X = rng.standard_normal((4, 3, 5)).astype(np.float32)  # 4 examples of 3 rows
W1 = rng.standard_normal((6, 5)).astype(np.float32)
B1 = rng.standard_normal(6).astype(np.float32)
W2 = rng.standard_normal((3, 6)).astype(np.float32)
B2 = rng.standard_normal(3).astype(np.float32)
# the second example's targets are all ignored (its loss is NaN, its gradients zero); the
# third's partly
T = np.array([[0, 2, 1], [-100, -100, -100], [1, -100, 2], [2, 2, 0]])


def _params(lib):
    return {k: lib.tensor(v) for k, v in dict(w1=W1, b1=B1, w2=W2, b2=B2).items()}


def _loss(lib):
    F = lib.nn.functional

    def loss(p, x, t):
        h = F.linear(F.linear(x, p["w1"], p["b1"]).relu(), p["w2"], p["b2"])
        return F.cross_entropy(h, t)

    return loss


def test_per_example_gradients_with_several_rows_and_ignored_targets():
    def run(lib):
        per = lib.func.vmap(lib.func.grad_and_value(_loss(lib)), in_dims=(None, 0, 0))
        grads, values = per(_params(lib), lib.tensor(X), lib.tensor(T))
        return grads, values

    ours, theirs = both(run)
    grads, values = ours
    assert np.isnan(values[1].item()) and not np.isnan(values[0].item())
    assert all(not g[1].numpy().any() for g in grads.values())  # all ignored: zeros
    close(ours, theirs)


def test_the_kernels_bind_once_on_the_batch(monkeypatch):
    """A per-example gradient of the two layers binds each kernel's rule, none declining:
    one linear per layer forward, one weight gradient (a batch of outer products) per layer
    backward."""
    calls = []

    def counted(name, rule):
        def run(*args, **params):
            out = rule(*args, **params)
            calls.append(name if out is not NotImplemented else f"{name} declined")
            return out

        return run

    for name in ("linear", "linear_dx", "linear_dw", "cross_entropy", "cross_entropy_dx"):
        monkeypatch.setitem(batching.FUSED_RULES, name, counted(name, batching.FUSED_RULES[name]))
    per = staged.func.vmap(staged.func.grad(_loss(staged)), in_dims=(None, 0, 0))
    per(_params(staged), staged.tensor(X), staged.tensor(T))
    assert sorted(calls) == sorted(
        ["linear"] * 2 + ["linear_dx"] + ["linear_dw"] * 2 + ["cross_entropy", "cross_entropy_dx"]
    )


@pytest.mark.parametrize(
    "in_dims",
    [(0, None, None), (1, None, None), (None, 0, 0), (0, 0, None), (2, None, 0)],
    ids=["input", "input-at-1", "weights", "input-and-weight", "input-and-bias"],
)
def test_linear_batched_anywhere(in_dims):
    """Batched weights or biases are declined (the decomposition), an input batched at any
    dim is one kernel; with and without bias, and gradients through both."""
    size = 4
    shapes = {0: (size, 3, 5), 1: (3, size, 5), 2: (3, 5, size), None: (3, 5)}
    x = rng.standard_normal(shapes[in_dims[0]]).astype(np.float32)
    w = rng.standard_normal((size, 6, 5) if in_dims[1] == 0 else (6, 5)).astype(np.float32)
    b = rng.standard_normal((size, 6) if in_dims[2] == 0 else 6).astype(np.float32)

    def run(lib):
        F = lib.nn.functional
        args = [lib.tensor(a) for a in (x, w, b)]
        out = lib.func.vmap(F.linear, in_dims=in_dims)(*args)
        no_bias = lib.func.vmap(F.linear, in_dims=in_dims[:2])(*args[:2])
        grads = lib.func.vmap(
            lib.func.grad(lambda *a: F.linear(*a).tanh().sum(), argnums=(0, 1, 2)),
            in_dims=in_dims,
        )(*args)
        return out, no_bias, grads

    compare(run)


def test_softmax_kernels_along_a_dim():
    """softmax and log_softmax batched at a dim other than 0, their gradients, and the
    Jacobian (a batch of cotangents against one output)."""
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)

    def run(lib):
        F = lib.nn.functional
        xs = lib.tensor(x)
        out = lib.func.vmap(lambda v: (F.softmax(v, 0), F.log_softmax(v, 1)), in_dims=1)(xs)
        grads = lib.func.vmap(
            lib.func.grad(lambda v: (F.softmax(v, 1) * F.log_softmax(v, 0)).sum()), in_dims=2
        )(xs)
        jac = lib.func.jacrev(lambda v: F.log_softmax(F.softmax(v, -1), 0))(xs[0])
        return out, grads, jac

    compare(run)


def test_grad_through_vmap_of_the_kernels():
    """An outer gradient through the batched kernels (their physical operands require
    grad), and a gradient of per-example gradients (the backward kernels decompose)."""

    def run(lib):
        loss = _loss(lib)
        x, t = lib.tensor(X[[0, 2, 3]]), lib.tensor(T[[0, 2, 3]])  # no NaN loss

        def mean_loss(p):
            return lib.func.vmap(loss, in_dims=(None, 0, 0))(p, x, t).mean()

        def penalty(p):
            g = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(p, x, t)
            return sum((v**2).sum() for v in g.values())

        return lib.func.grad(mean_loss)(_params(lib)), lib.func.grad(penalty)(_params(lib))

    compare(run, rtol=1e-4, atol=1e-5)


def test_nested_vmap_of_the_kernels():
    """Per model of an ensemble (batched weights: declined) and per example (one kernel)."""
    ws = rng.standard_normal((2, 6, 5)).astype(np.float32)

    def run(lib):
        F = lib.nn.functional
        per_example = lib.func.vmap(
            lib.func.grad(lambda w, xi: F.linear(xi, w).tanh().sum()), in_dims=(None, 0)
        )
        return lib.func.vmap(per_example, in_dims=(0, None))(lib.tensor(ws), lib.tensor(X))

    compare(run)


@pytest.mark.parametrize("in_dims", [(0, None), (None, 0), (1, 0)])
def test_cross_entropy_batched_on_one_side(in_dims):
    """Logits batched against shared targets, one set of logits against a batch of
    targets, and logits batched at dim 1; values and gradients with respect to the
    logits, and the Jacobian of one loss (a batch of cotangents)."""
    logits = {0: X[:, :, :3], None: X[0, :, :3], 1: X[:, :, :3].transpose(1, 0, 2)}
    targets = {0: T, None: T[3]}

    def run(lib):
        F = lib.nn.functional
        x, t = lib.tensor(logits[in_dims[0]].copy()), lib.tensor(targets[in_dims[1]])
        value = lib.func.vmap(F.cross_entropy, in_dims=in_dims)(x, t)
        grad = lib.func.vmap(lib.func.grad(F.cross_entropy), in_dims=in_dims)(x, t)
        jac = lib.func.jacrev(lambda v: F.cross_entropy(v, lib.tensor(T[0])))(
            lib.tensor(X[0, :, :3])
        )
        return value, grad, jac

    compare(run)
