"""QR, the symmetric eigendecomposition and the SVD in staged's ops: what ``_lapack.py``'s
kernels decompose to under ``staged.compile``/capture, forward-mode AD and vmap. Unrolled
over the matrix size (and, for the Jacobi methods, a fixed number of sweeps): for the
small matrices of a model. Forward AD differentiates them as computed; a capture gives
them torch's backward formulas (Note [compiled gradients are torch's formulas] in
``_lapack.py``)."""

from __future__ import annotations

import math

from ..eager import ops
from ..eager.factories import arange, eye, ones, ones_like, tensor, zeros
from ._composed import householder_product


def _sign(x):
    """Fortran's ``SIGN(1, x)``: 1 for ``x >= 0``, else -1 (piecewise constant)."""
    return ops.where(x >= 0, 1.0, -1.0).to(x.dtype)


def geqrf(A):
    """LAPACK's ``geqrf`` in staged's ops: the reflectors ``V`` (``(*, m, k)``, unit
    diagonal), ``tau`` (``(*, k)``), ``R`` (``(*, k, n)``) and the sign ``f`` (``(*, k)``)
    that makes ``R`` and ``Q = householder_product(V, tau) * f`` LAPACK's. Each step
    reflects ``x = A[j:, j]`` onto ``beta e_1`` with ``beta = -sign(x_1) |x|`` (``dlarfg``:
    no cancellation); where ``x``'s tail is 0, ``dlarfg`` leaves the column (``tau = 0``,
    ``beta = x_1``) and ``f = -1`` undoes the reflection (which then only negates row
    ``j``), so the computation stays on one smooth branch and its derivative is the
    factorization's. A zero column gives ``tau = 0`` and a zero pivot, as LAPACK's."""
    *batch, m, n = A.shape
    k = min(m, n)
    M, vs, taus, rows, flips = A, [], [], [], []
    for j in range(k):
        alpha, x = M[..., 0, 0], M[..., 1:, 0]
        tail = (x * x).sum(-1)
        zero = (alpha == 0) & (tail == 0)
        norm = ops.where(zero, 1.0, alpha * alpha + tail).sqrt()
        beta = -_sign(alpha) * norm
        tau = ops.where(zero, 0.0, (beta - alpha) / beta)
        v = x / (alpha - beta).unsqueeze(-1)
        B = M[..., :, 1:]
        w = B[..., 0, :] + (v.unsqueeze(-2) @ B[..., 1:, :])[..., 0, :]
        full_v = ops.cat([ones_like(alpha).unsqueeze(-1), v], -1)
        B = B - (tau.unsqueeze(-1) * full_v).unsqueeze(-1) * w.unsqueeze(-2)
        flip = ops.where((tail == 0) & ~zero, -1.0, 1.0).to(A.dtype)
        pivot = ops.where(zero, 0.0, beta)
        rows.append(
            ops.cat([zeros(*batch, j, dtype=A.dtype), pivot.unsqueeze(-1), B[..., 0, :]], -1)
        )
        vs.append(ops.cat([zeros(*batch, j, dtype=A.dtype), full_v], -1))
        taus.append(tau)
        flips.append(flip)
        M = B[..., 1:, :]
    if not k:
        empty = zeros(*batch, 0, dtype=A.dtype)
        return zeros(*batch, m, 0, dtype=A.dtype), empty, zeros(*batch, 0, n, dtype=A.dtype), empty
    f = ops.stack(flips, -1)
    return ops.stack(vs, -1), ops.stack(taus, -1), ops.stack(rows, -2) * f.unsqueeze(-1), f


def qr_parts(A, mode: str) -> list:
    """``linalg.qr``'s factors for ``mode`` (``'r'``: ``R`` alone), LAPACK's signs."""
    *batch, m, n = A.shape
    V, tau, R, f = geqrf(A)
    if mode == "r":
        return [R]
    k = min(m, n)
    if mode == "complete" and m > k:
        V = ops.cat([V, zeros(*batch, m, m - k, dtype=A.dtype)], -1)
        f = ops.cat([f, ones(*batch, m - k, dtype=A.dtype)], -1)
        R = ops.cat([R, zeros(*batch, m - k, n, dtype=A.dtype)], -2)
    return [householder_product(V, tau) * f.unsqueeze(-2), R]


def _sweeps(n: int, dtype) -> int:
    """Sweeps enough for ``n <= 16``: Jacobi converges quadratically once the off-diagonal
    is below the gaps between eigenvalues (after fewer than ``log2 n`` sweeps on random
    matrices), then each sweep doubles the correct digits; clustered eigenvalues (relative
    gaps 1e-6), graded matrices (entries from 1 to 1e-12) and graded singular values
    delay that point by about ``log2 n`` sweeps more in float64. Measured worst cases at
    ``n = 16``: 8 (eigh) and 10 (SVD) sweeps in float32, 15 in float64 (float32 sees gaps
    below its eps as a multiple eigenvalue, which needs no more)."""
    log = math.ceil(math.log2(max(n, 2)))
    return 6 + log if dtype.name in ("float32", "float16", "bfloat16") else 7 + 2 * log


def _rounds(n: int) -> list:
    """The parallel (round-robin) Jacobi ordering: ``n - 1`` rounds (``n`` for odd ``n``)
    of disjoint pairs ``(p, q)``, ``p < q``, every pair once per sweep."""
    players = list(range(n + n % 2))
    rounds = []
    for _ in range(len(players) - 1):
        pairs = zip(players[: len(players) // 2], reversed(players[len(players) // 2 :]))
        disjoint = sorted((min(p, q), max(p, q)) for p, q in pairs if max(p, q) < n)
        if disjoint:
            rounds.append(disjoint)
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def _selector(index, n: int, dtype):
    """The constant ``(len(index), n)`` matrix of ones at ``(k, index[k])``."""
    return (arange(n) == tensor(index).unsqueeze(-1)).to(dtype)


def _planes(n: int, dtype, sweeps: int | None):
    """Each round of ``sweeps`` sweeps (``_sweeps``'s by default): its ``p``s, ``q``s and
    the rotation of ``t`` in those planes (``_rotation``)."""
    eye_n = eye(n, dtype=dtype)
    rounds = []
    for pairs in _rounds(n):
        p, q = [i for i, _ in pairs], [j for _, j in pairs]
        P, Q = _selector(p, n, dtype), _selector(q, n, dtype)
        rounds.append((p, q, lambda t, P=P, Q=Q: _rotation(t, P, Q, eye_n)))
    for _ in range(_sweeps(n, dtype) if sweeps is None else sweeps):
        yield from rounds


def _ordered(values, vectors, order):
    """``values`` and the columns of ``vectors`` in ``order`` (along the last dim)."""
    return values.gather(-1, order), vectors.gather(-1, order.unsqueeze(-2).expand(*vectors.shape))


def _tangent(app, aqq, apq):
    """``tan`` of the Jacobi rotation that zeroes ``apq`` of ``[[app, apq], [apq, aqq]]``
    (Golub and Van Loan's ``sym.schur2``, multiplied through by ``2 |apq|`` so that no
    quotient overflows and the derivative at ``apq = 0`` is ``1 / (aqq - app)``); 0 where
    the block is already a multiple of the identity."""
    d = aqq - app
    scale = d * d + 4 * apq * apq
    flat = scale == 0
    den = d.abs() + ops.where(flat, 1.0, scale).sqrt()
    return ops.where(flat, 0.0, 2 * apq * _sign(d) / den)


def _rotation(t, P, Q, eye_n):
    """The ``(*, n, n)`` product of the disjoint rotations ``[[c, s], [-s, c]]`` in the
    ``(p_k, q_k)`` planes (``P``, ``Q``: selectors), ``t = s / c``."""
    c = (1 + t * t).rsqrt()
    s = t * c
    diag = 1 + ((c - 1).unsqueeze(-2) @ (P + Q))[..., 0, :]
    return eye_n * diag.unsqueeze(-2) + (P.mT * s.unsqueeze(-2)) @ Q - (Q.mT * s.unsqueeze(-2)) @ P


def _symmetric(A, UPLO: str):
    """The symmetric matrix of ``A``'s ``UPLO`` triangle."""
    if UPLO == "L":
        return A.tril() + A.tril(-1).mT
    return A.triu() + A.triu(1).mT


def jacobi_eigh(A, UPLO: str = "L", sweeps: int | None = None):
    """``(eigenvalues ascending, eigenvectors)`` of the symmetric matrix of ``A``'s
    ``UPLO`` triangle, by ``sweeps`` sweeps of parallel-ordered Jacobi rotations."""
    *batch, n, _ = A.shape
    S = _symmetric(A, UPLO).detach()
    H = (A + A.mT) * 0.5  # the values are the triangle's, the derivatives torch's: of H
    S = S + (H - H.detach())
    V = eye(n, dtype=A.dtype).expand(*batch, n, n)
    for p, q, rotation in _planes(n, A.dtype, sweeps):
        d = S.diagonal(0, -2, -1)
        J = rotation(_tangent(d[..., p], d[..., q], S[..., p, q]))
        S = J.mT @ S @ J
        V = V @ J
    w = S.diagonal(0, -2, -1)
    return _ordered(w, V, w.argsort(-1))


def jacobi_svd(A, full_matrices: bool, sweeps: int | None = None):
    """``(U, S descending, Vh)`` by one-sided (Hestenes) Jacobi: rotations of ``A``'s
    columns (of ``A^T``'s for a wide ``A``) that make them orthogonal, each chosen from
    the pair's norms and inner product as they are then, so that small singular values
    keep a relative accuracy of ``eps`` times the condition number of ``A`` with its
    columns scaled (not its square, as ``eigh(A^T A)`` would); ``U``'s columns are the
    rotated columns over their norms (0 for a zero singular value). ``full_matrices``
    completes ``U`` by QR."""
    *batch, m, n = A.shape
    if m < n:
        U, S, Vh = jacobi_svd(A.mT, full_matrices, sweeps)
        return Vh.mT, S, U.mT
    W, V = A, eye(n, dtype=A.dtype).expand(*batch, n, n)
    for p, q, rotation in _planes(n, A.dtype, sweeps):
        Wp, Wq = W[..., :, p], W[..., :, q]
        J = rotation(_tangent((Wp * Wp).sum(-2), (Wq * Wq).sum(-2), (Wp * Wq).sum(-2)))
        W = W @ J
        V = V @ J
    norms = (W * W).sum(-2)
    zero = norms == 0
    root = ops.where(zero, 1.0, norms).sqrt()
    S = ops.where(zero, 0.0, root)
    order = (-S).argsort(-1)
    U = _ordered(S, W / root.unsqueeze(-2), order)[1]
    S, V = _ordered(S, V, order)
    if full_matrices and m > n:
        U = ops.cat([U, qr_parts(U, "complete")[0][..., n:]], -1)
    return U, S, V.mT
