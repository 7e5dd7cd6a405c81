"""The per-example cross entropy kernels vmap's cross entropy rules bind (one NumPy kernel
each, instead of ~30 batched primitives): each equals its decomposition bit for bit, runs
eagerly under vmap(grad), and decomposes where a graph goes through it (grad of vmap)."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from staged.autograd import batching
from tests.checks import both, close

rng = np.random.default_rng(3)
# example 1: all targets ignored (NaN loss, zero gradient); example 2: partly
T = np.array([[0, 2, 1], [-100, -100, -100], [1, -100, 3], [3, 3, 0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 3])
def test_kernels_equal_their_decompositions(dtype, rows):
    x = staged.tensor(rng.standard_normal((4, rows, 5)).astype(dtype))
    t = staged.tensor(T[:, :rows])
    g = staged.tensor(rng.standard_normal(4).astype(dtype))
    for kernel, args in (
        (batching._per_example_ce, (x, t)),
        (batching._per_example_ce_dx, (g, x, t)),
    ):
        with np.errstate(all="ignore"):
            got = kernel.impl(*(a.numpy() for a in args), ignore_index=-100)
        want = kernel.decomposition(*args, ignore_index=-100).numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def _per_example(lib, x, t, w):
    F = lib.nn.functional
    loss = lambda w, x, t: F.cross_entropy(x @ w, t)  # noqa: E731
    return lib.func.vmap(lib.func.grad_and_value(loss), in_dims=(None, 0, 0))(w, x, t)


def test_vmap_grad_binds_the_kernels_once(monkeypatch):
    calls = []
    for kernel in (batching._per_example_ce, batching._per_example_ce_dx):
        impl = kernel.impl
        monkeypatch.setattr(
            kernel, "impl", lambda *a, impl=impl, **k: calls.append(1) or impl(*a, **k)
        )
    x, w = rng.standard_normal((4, 3, 6)), rng.standard_normal((6, 5))

    def run(lib):
        return _per_example(lib, lib.tensor(x), lib.tensor(T), lib.tensor(w))

    ours, theirs = both(run)
    assert len(calls) == 2
    assert np.isnan(ours[1][1].item()) and not ours[0][1].numpy().any()
    close(ours, theirs)


def test_grad_of_vmap_differentiates_the_decomposition():
    x, w = rng.standard_normal((4, 3, 6)), rng.standard_normal((6, 5))

    def run(lib):
        w_ = lib.tensor(w, requires_grad=True)
        xs, ts = lib.tensor(x), lib.tensor(np.where(T < 0, 1, T))
        F = lib.nn.functional
        losses = lib.func.vmap(lambda x, t: F.cross_entropy(x @ w_, t))(xs, ts)
        return lib.autograd.grad(losses.sum(), w_)

    close(*both(run))
