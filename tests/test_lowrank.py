"""``svd_lowrank`` and ``pca_lowrank`` against torch 2.13 from the same seed: the same
random sketch (torch's draws in torch's order), so the same singular values and the same
factors up to each singular pair's sign (LAPACK's choice: NumPy's OpenBLAS and torch's
MKL ``gesdd`` may pick another), hence the same low-rank product."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged


def _run(L, case):
    L.manual_seed(0)
    return case(L)


CASES = {
    "tall, rank 8": lambda L: L.svd_lowrank(L.randn(20, 8) @ L.randn(8, 30), q=5),
    "wide, float64": lambda L: L.svd_lowrank(L.randn(6, 40, dtype=L.float64), q=4, niter=3),
    "batched, with M": lambda L: L.svd_lowrank(L.randn(2, 9, 6), q=4, niter=1, M=L.ones(1, 6)),
    "pca, centred": lambda L: L.pca_lowrank(L.randn(40, 7, dtype=L.float64) + 3, q=3),
    "pca, default q": lambda L: L.pca_lowrank(L.randn(10, 4), center=False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_factors_are_torch_s_from_the_same_seed(case):
    ours = [t.numpy() for t in _run(staged, CASES[case])]
    theirs = [t.numpy() for t in _run(torch, CASES[case])]
    tol = 1e-10 if ours[1].dtype == np.float64 else 2e-5
    U, S, V = ours
    Ut, St, Vt = theirs
    assert U.dtype == Ut.dtype and U.shape == Ut.shape and V.shape == Vt.shape
    np.testing.assert_allclose(S, St, rtol=tol, atol=tol * St.max())
    # each pair's sign is LAPACK's choice; |u|, |v| and u s v^H are not
    np.testing.assert_allclose(np.abs(U), np.abs(Ut), atol=tol * 10)
    np.testing.assert_allclose(np.abs(V), np.abs(Vt), atol=tol * 10)
    product = U @ (S[..., None] * np.swapaxes(V, -1, -2))
    want = Ut @ (St[..., None] * np.swapaxes(Vt, -1, -2))
    np.testing.assert_allclose(product, want, atol=tol * 10 * St.max())


def test_torch_s_names_and_errors():
    assert staged.functional.svd_lowrank is staged.svd_lowrank
    assert staged.functional.pca_lowrank is staged.pca_lowrank
    with pytest.raises(ValueError, match=r"q\(=5\) must be non-negative integer and not greater"):
        staged.pca_lowrank(staged.randn(3, 4), q=5)
    with pytest.raises(ValueError, match=r"niter\(=-1\) must be non-negative"):
        staged.pca_lowrank(staged.randn(3, 4), niter=-1)
