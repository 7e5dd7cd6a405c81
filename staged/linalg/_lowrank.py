"""Randomized low-rank SVD and PCA (Halko, Martinsson and Tropp, 2009: arXiv:0909.4061,
Algorithms 4.4 and 5.1), as torch's ``svd_lowrank`` and ``pca_lowrank``: the same draws
from the global generator in the same order, so a seed gives torch's factors."""

from __future__ import annotations

from .. import dtypes as dt
from ..eager.factories import randn
from ..eager.tensor import Tensor
from ._lapack import qr, svd


def _floating(A: Tensor):
    """The dtype the factors are computed in: ``A``'s if floating, else float32."""
    return A.dtype if A.dtype.is_floating_point or A.dtype.is_complex else dt.float32


def _basis(A: Tensor, q: int, niter: int, M: Tensor | None) -> Tensor:
    """``q`` orthonormal columns ``Q`` with ``Q Q^H (A - M)`` close to ``A - M``: a random
    range sketch refined by ``niter`` subspace iterations (Algorithm 4.4)."""

    def product(B, X):  # (B - M) @ X, M's product taken apart, as torch's
        Y = B @ X
        return Y if M is None else Y - (M if B is A else M.mH) @ X

    Q = qr(product(A, randn(A.shape[-1], q, dtype=_floating(A)))).Q
    for _ in range(niter):
        Q = qr(product(A.mH, Q)).Q
        Q = qr(product(A, Q)).Q
    return Q


def _svd_lowrank(A: Tensor, q: int, niter: int, M: Tensor | None):
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    if m < n:  # the sketch is taken of the taller side
        A = A.mH
        M = None if M is None else M.mH
    Q = _basis(A, q, niter, M)
    B = Q.mH @ A
    if M is not None:
        B = B - Q.mH @ M
    U, S, Vh = svd(B, full_matrices=False)
    U, V = Q @ U, Vh.mH
    return (V, S, U) if m < n else (U, S, V)


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2, M: Tensor | None = None):
    """``(U, S, V)`` with ``A - M`` close to ``U diag(S) V^H`` (``M`` broadcast to ``A``;
    0 where None), of rank ``q``, after ``niter`` subspace iterations."""
    return _svd_lowrank(A, 6 if q is None else q, 2 if niter is None else niter, M)


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2):
    """``svd_lowrank`` of the data matrix ``A`` (samples by features) less its column
    means (``center``): ``V``'s columns are the principal directions, ``S ** 2 / (m - 1)``
    the covariance's eigenvalues. ``q`` defaults to ``min(6, m, n)``."""
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise ValueError(
            f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}"
        )
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return _svd_lowrank(A, q, niter, None)
    return _svd_lowrank(A - A.mean(dim=(-2,), keepdim=True), q, niter, None)
