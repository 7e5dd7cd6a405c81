"""``geqrf`` and ``ormqr`` against torch 2.13: LAPACK's compact QR (the same bits: both
call ``geqrf``), ``Q`` applied from either side, transposed or not, its gradients, and
torch's errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import staged

KERNELS = {"geqrf"}  # staged's Fused kernels checked here (tests/autodiff/test_fused.py)


def _both(shape, dtype="float64", seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal(shape)
    a = a.astype(dtype)
    return staged.tensor(a), torch.tensor(a)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 6, 4), (0, 3)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_geqrf_is_lapack_s(shape, dtype):
    ours, theirs = _both(shape, dtype)
    a, tau = staged.geqrf(ours)
    want = torch.geqrf(theirs)
    assert isinstance(staged.geqrf(ours), staged.return_types.geqrf)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(a.numpy(), want.a.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(tau.numpy(), want.tau.numpy(), rtol=tol, atol=tol)
    assert a.dtype == tau.dtype and tuple(tau.shape) == tuple(want.tau.shape)


@pytest.mark.parametrize("left, transpose", list(itertools.product([True, False], repeat=2)))
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_ormqr_applies_q_as_torch(left, transpose, dtype):
    A, At = _both((2, 5, 3), dtype)
    C, Ct = _both((2, 5, 4) if left else (2, 4, 5), dtype, seed=1)
    a, tau = staged.geqrf(A)
    at, taut = torch.geqrf(At)
    got = staged.ormqr(a, tau, C, left=left, transpose=transpose)
    want = torch.ormqr(at, taut, Ct, left=left, transpose=transpose)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a.ormqr(tau, C, left, transpose).numpy(), want.numpy(), atol=1e-12)


def test_ormqr_gradients_are_torch_s():
    A, At = _both((5, 3))
    C, Ct = _both((5, 2), seed=1)
    grads = []
    for L, x, c in ((staged, A, C), (torch, At, Ct)):
        a, tau = L.geqrf(x)
        a, tau, c = (t.detach().requires_grad_() for t in (a, tau, c))
        (L.ormqr(a, tau, c, transpose=True) ** 2).sum().backward()
        grads.append([t.grad.numpy() for t in (a, tau, c)])
    for ours, theirs in zip(*grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_errors_are_torch_s():
    A = staged.randn(4, 3, requires_grad=True)
    a, _ = staged.geqrf(A)
    with pytest.raises(NotImplementedError, match="the derivative for 'geqrf' is not implemented"):
        a.sum().backward()
    with pytest.raises(RuntimeError, match="torch.geqrf: input must have at least 2 dimensions"):
        staged.geqrf(staged.ones(3))
    with pytest.raises(NotImplementedError, match="\"geqrf_cpu\" not implemented for 'Long'"):
        staged.geqrf(staged.ones(3, 3, dtype=staged.int64))
    with pytest.raises(RuntimeError, match=r"tau.shape\[-1\] must be equal to min"):
        staged.ormqr(staged.ones(3, 2), staged.ones(3), staged.ones(3, 3))
    with pytest.raises(RuntimeError, match=r"other.shape\[-1\] must be equal to input.shape\[-2\]"):
        staged.ormqr(staged.ones(3, 3), staged.ones(3), staged.ones(4, 4), left=False)
    with pytest.raises(RuntimeError, match="Expected input and tau to have the same dtype"):
        staged.ormqr(staged.ones(4, 3), staged.ones(3, dtype=staged.float64), staged.ones(4, 3))


def test_ormqr_compiles_and_geqrf_says_it_runs_eagerly_only():
    A = staged.randn(5, 3, dtype=staged.float64)
    a, tau = staged.geqrf(A)
    C = staged.randn(5, 2, dtype=staged.float64)
    step = staged.compile(lambda a, tau, c: staged.ormqr(a, tau, c, transpose=True))
    want = staged.ormqr(a, tau, C, transpose=True).numpy()
    np.testing.assert_allclose(step(a, tau, C).numpy(), want, rtol=1e-13, atol=1e-14)
    with pytest.raises(RuntimeError, match="torch.geqrf runs LAPACK eagerly only"):
        staged.compile(lambda x: staged.geqrf(x).a)(A)
