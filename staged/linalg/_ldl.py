"""``ldl_factor``, ``ldl_factor_ex`` and ``ldl_solve``: the LDL^T (LDL^H) factorization of
symmetric (Hermitian) indefinite matrices with Bunch-Kaufman pivoting, in LAPACK's compact
form, as torch returns it.

NumPy has no ``?sytrf``, so the kernels here are LAPACK's ``?sytf2``/``?hetf2`` and
``?sytrs``/``?hetrs`` (``uplo='L'``, as torch calls them) written in NumPy: a Python loop
over the columns that decides each matrix's pivot as LAPACK does (``alpha = (1 +
sqrt(17)) / 8``, magnitudes of complex entries ``|re| + |im|``, LAPACK's ``cabs1``), and
the swaps, rank-1 and rank-2 updates vectorized over the batch and the trailing matrix.
The blocked ``?sytrf`` makes the same pivot choices, so the pivots are LAPACK's except
where a comparison is a tie within round-off. The working matrices are kept whole (the
upper triangle mirrors the lower one, which alone is computed), so that a swap is one
symmetric permutation.

Each is one eager kernel (``Fused``) with no composition in staged's ops: under
``staged.compile``/capture, forward-mode AD or vmap it raises, naming the op. torch has no
derivative for them: asking for a gradient raises its error in the backward."""

from __future__ import annotations

import collections
import math

import numpy as np

from .. import dtypes as dt
from .._where import at_user
from ..autodiff import Fused
from ..autodiff.indexing import LinAlgError
from ..eager.ops._operands import broadcast_shapes
from ..eager.tensor import Tensor
from ._core import _eager_only, _square, check_info
from ._lapack import _own, _unpack

LDLFactorResult = collections.namedtuple(  # type: ignore[name-match]
    "linalg_ldl_factor", "LD pivots", module="staged.return_types"
)
LDLFactorExResult = collections.namedtuple(  # type: ignore[name-match]
    "linalg_ldl_factor_ex", "LD pivots info", module="staged.return_types"
)

_ALPHA = (1 + math.sqrt(17)) / 8  # Bunch-Kaufman's: bounds the growth of the entries


def _abs1(x: np.ndarray) -> np.ndarray:
    """LAPACK's magnitude for choosing pivots: ``|re| + |im|`` (``cabs1``, ``izamax``)."""
    return np.abs(x.real) + np.abs(x.imag) if np.iscomplexobj(x) else np.abs(x)


def _mirror(T: np.ndarray, herm: bool) -> None:
    """Write the upper triangles of the matrices ``T`` from their lower ones (conjugated
    where ``herm``; the diagonal made real), in place."""
    m = T.shape[-1]
    i, j = np.triu_indices(m, 1)
    T[:, i, j] = T[:, j, i].conj() if herm else T[:, j, i]
    if herm:
        d = np.arange(m)
        T[:, d, d] = T[:, d, d].real


def _permute_rows(X: np.ndarray, sel, r, q) -> None:
    """Swap rows ``r`` and ``q`` (per matrix) of the matrices ``X[sel]``, in place."""
    if sel.size:
        rows, other = X[sel, r], X[sel, q]
        X[sel, r], X[sel, q] = other, rows


def _sytf2(A: np.ndarray, herm: bool):
    """LAPACK's ``?sytf2`` (``?hetf2`` where ``herm``), ``uplo='L'``, on the ``(N, n, n)``
    matrices ``A`` (their lower triangles): ``(LD, ipiv, info)`` as LAPACK returns them,
    ``LD``'s upper triangle zero."""
    N, n, _ = A.shape
    W = np.tril(A)  # a copy, in A's precision
    _mirror(W, herm)
    cj = np.conj if herm else (lambda v: v)
    dabs = (lambda v: np.abs(v.real)) if herm else _abs1  # a diagonal entry's magnitude
    alpha = W.real.dtype.type(_ALPHA)
    ipiv = np.zeros((N, n), np.int32)
    info = np.zeros(N, np.int32)
    every = np.arange(N)
    skip = np.zeros(N, bool)  # the second column of a 2x2 block
    for k in range(n):
        act = ~skip
        absakk = dabs(W[:, k, k])
        if k < n - 1:
            col = _abs1(W[:, k + 1 :, k])
            imax = k + 1 + col.argmax(-1)  # the first largest, as LAPACK's i?amax
            colmax = col.max(-1)
        else:
            imax, colmax = np.full(N, k), np.zeros_like(absakk)
        zero = (np.maximum(absakk, colmax) == 0) | np.isnan(absakk)
        row = _abs1(W[every, imax, k:])  # row imax of the trailing matrix
        row[every, imax - k] = 0  # less its diagonal
        rowmax = row.max(-1)
        keep = zero | (absakk >= alpha * colmax) | (absakk >= alpha * colmax * (colmax / rowmax))
        kp = np.where(keep, k, imax)
        kstep = np.where(keep | (dabs(W[every, imax, imax]) >= alpha * rowmax), 1, 2)
        kk = k + kstep - 1
        # swap rows and columns kk and kp of the trailing matrix (not L's columns before k)
        sel = np.flatnonzero(act & (kp != kk))
        if sel.size:
            p = np.broadcast_to(np.arange(k, n), (sel.size, n - k)).copy()
            p[np.arange(sel.size), kk[sel] - k] = kp[sel]
            p[np.arange(sel.size), kp[sel] - k] = kk[sel]
            T = np.take_along_axis(W[sel, k:, k:], p[:, :, None] - k, 1)
            W[sel, k:, k:] = np.take_along_axis(T, p[:, None, :] - k, 2)
        one = np.flatnonzero(act & ~zero & (kstep == 1))
        if one.size and k < n - 1:  # A -= w w^T / d, and w / d is L's column
            x = W[one, k + 1 :, k]
            r = 1 / (W[one, k, k].real if herm else W[one, k, k])
            T = W[one, k + 1 :, k + 1 :]
            T -= x[:, :, None] * cj(r[:, None] * x)[:, None, :]
            _mirror(T, herm)
            W[one, k + 1 :, k + 1 :] = T
            W[one, k + 1 :, k] = x * r[:, None]
        two = np.flatnonzero(act & (kstep == 2))
        if two.size and k < n - 2:  # A -= (w1 w2) D^-1 (w1 w2)^T, LAPACK's formulas
            x, y = W[two, k + 2 :, k], W[two, k + 2 :, k + 1]
            b = W[two, k + 1, k]
            if herm:  # ?hetf2 divides by |b| and keeps its phase s
                d = np.abs(b)
                s = (b / d)[:, None]
                sy, sx = s * y, s.conj() * x
            else:
                d, sy, sx = b, y, x
            d11 = (W[two, k + 1, k + 1].real if herm else W[two, k + 1, k + 1]) / d
            d22 = (W[two, k, k].real if herm else W[two, k, k]) / d
            f = (1 / (d11 * d22 - 1) / d)[:, None]
            wk = f * (d11[:, None] * x - sy)
            wkp1 = f * (d22[:, None] * y - sx)
            T = W[two, k + 2 :, k + 2 :]
            T -= x[:, :, None] * cj(wk)[:, None, :]
            T -= y[:, :, None] * cj(wkp1)[:, None, :]
            _mirror(T, herm)
            W[two, k + 2 :, k + 2 :] = T
            W[two, k + 2 :, k], W[two, k + 2 :, k + 1] = wk, wkp1
        ipiv[act, k] = np.where(kstep == 1, kp + 1, -(kp + 1))[act]
        if two.size:
            ipiv[two, k + 1] = -(kp[two] + 1)
        info = np.where((info == 0) & act & zero, k + 1, info).astype(np.int32)
        skip = act & (kstep == 2)
    return np.tril(W), ipiv, info


def _factor_impl(A, *, hermitian):
    """``(LD, pivots, info)`` of the ``(*, n, n)`` ``A``, packed side by side in ``A``'s
    dtype (one array for one kernel)."""
    *batch, n, _ = A.shape
    herm = hermitian and np.iscomplexobj(A)
    LD, ipiv, info = _sytf2(A.reshape(math.prod(batch), n, n), herm)
    packed = np.concatenate([LD.reshape(len(LD), n * n), ipiv, info[:, None]], -1)
    return packed.astype(A.dtype).reshape(*batch, n * n + n + 1)


def _no_derivative(op: str):
    """The VJP rule of an input torch does not differentiate: it raises torch's error."""

    def rule(g):
        raise RuntimeError(f"derivative for aten::{op} is not implemented")

    return rule


_ldl_factor = Fused(
    "linalg_ldl_factor_ex",
    _factor_impl,
    _eager_only("ldl_factor", " (and ldl_factor_ex)"),
    vjp=_no_derivative("linalg_ldl_factor_ex"),
    node_name="torch::autograd::NotImplemented",
)


def _pivot_error(message: str) -> RuntimeError:
    return RuntimeError(at_user(f"{message} Did you properly pass the result of ldl_factor?"))


def _check_pivots(ipiv: np.ndarray, n: int) -> None:
    """torch's checks of the pivots, and LAPACK's block structure: a negative pivot (a
    2x2 block) is repeated in the next entry (LAPACK would read past the matrix)."""
    size = np.abs(ipiv)
    if (size < 1).any():
        raise _pivot_error("Pivots given to ldl_solve must all satisfy |pivot| >= 1.")
    if (size > n).any():
        raise _pivot_error("Pivots given to ldl_solve must all satisfy |pivot| <= LD.size(-2).")
    skip = np.zeros(ipiv.shape[0], bool)
    for k in range(n):
        two = ~skip & (ipiv[:, k] < 0)
        if two.any() and (k == n - 1 or (ipiv[two, k + 1] != ipiv[two, k]).any()):
            raise _pivot_error(
                "Pivots given to ldl_solve must mark each 2x2 block of D by the same negative "
                "pivot in two consecutive entries."
            )
        skip = two


def _sytrs(LD: np.ndarray, ipiv: np.ndarray, B: np.ndarray, herm: bool) -> np.ndarray:
    """LAPACK's ``?sytrs`` (``?hetrs`` where ``herm``), ``uplo='L'``: ``X`` with ``A X =
    B`` for the ``(N, n, n)`` factors ``LD`` with pivots ``ipiv`` and ``(N, n, m)`` ``B``."""
    N, n, _ = LD.shape
    X = B.copy()
    cj = np.conj if herm else (lambda v: v)
    skip = np.zeros(N, bool)
    for k in range(n):  # L D X = B, one block of D at a time
        act, p = ~skip, ipiv[:, k]
        one, two = np.flatnonzero(act & (p > 0)), np.flatnonzero(act & (p < 0))
        for sel, r in ((one, k), (two, k + 1)):
            _permute_rows(X, sel, r, np.abs(p[sel]) - 1)
        if one.size:
            if k < n - 1:
                X[one, k + 1 :] -= LD[one, k + 1 :, k][:, :, None] * X[one, k][:, None, :]
            d = LD[one, k, k].real if herm else LD[one, k, k]
            X[one, k] *= (1 / d)[:, None]
        if two.size:
            for j in (k, k + 1):
                if k < n - 2:
                    X[two, k + 2 :] -= LD[two, k + 2 :, j][:, :, None] * X[two, j][:, None, :]
            b = LD[two, k + 1, k]
            akm1, ak = LD[two, k, k] / cj(b), LD[two, k + 1, k + 1] / b
            denom = (akm1 * ak - 1)[:, None]
            bkm1, bk = X[two, k] / cj(b)[:, None], X[two, k + 1] / b[:, None]
            X[two, k] = (ak[:, None] * bkm1 - bk) / denom
            X[two, k + 1] = (akm1[:, None] * bk - bkm1) / denom
        skip = np.zeros(N, bool)
        skip[two] = True
    skip = np.zeros(N, bool)
    for k in reversed(range(n)):  # L^T X = B (L^H), from the last block
        act, p = ~skip, ipiv[:, k]
        two = np.flatnonzero(act & (p < 0))
        if k < n - 1:
            sel = np.flatnonzero(act)
            X[sel, k] -= np.einsum("bi,bim->bm", cj(LD[sel, k + 1 :, k]), X[sel, k + 1 :])
            X[two, k - 1] -= np.einsum("bi,bim->bm", cj(LD[two, k + 1 :, k - 1]), X[two, k + 1 :])
        sel = np.flatnonzero(act)
        _permute_rows(X, sel, k, np.abs(p[sel]) - 1)
        skip = np.zeros(N, bool)
        skip[two] = True
    return X


def _solve_impl(LD, pivots, B, *, hermitian):
    *batch, n, m = B.shape
    N = math.prod(batch)
    ipiv = pivots.reshape(N, n).astype(np.int64)
    _check_pivots(ipiv, n)
    herm = hermitian and np.iscomplexobj(LD)
    X = _sytrs(LD.reshape(N, n, n), ipiv, B.reshape(N, n, m), herm)
    return X.reshape(*batch, n, m)


_ldl_solve = Fused(
    "linalg_ldl_solve",
    _solve_impl,
    _eager_only("ldl_solve", ""),
    vjp=(_no_derivative("linalg_ldl_solve"), None, _no_derivative("linalg_ldl_solve")),
    node_name="torch::autograd::NotImplemented",
)


def _matrices(A, what: str, kernel: str) -> None:
    """torch's checks of ``A``: a batch of square floating or complex matrices, of a
    dtype LAPACK has (not float16, bfloat16)."""
    _square(A, what, prefix="")
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError(
            f"{what}: Expected a floating point or complex tensor as input. Got {A.dtype.title}"
        )
    if A.dtype in (dt.float16, dt.bfloat16):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{A.dtype.title}'")


def _int32(t):
    """The integers packed in the (real or complex) ``t``, as int32 without a gradient."""
    t = t.detach()
    return (t.real if t.dtype.is_complex else t).to(dt.int32)


def _singular(i) -> str:
    return (
        f"The factorization could not be completed because the block diagonal D is singular: "
        f"its diagonal element {i or 'i'} is zero (LAPACK's info {i or 'i'}). "
        "ldl_factor_ex(A) returns info instead of raising."
    )


def ldl_factor_ex(A, *, hermitian=False, check_errors=False) -> LDLFactorExResult:
    """``ldl_factor`` with LAPACK's ``info`` (int32, per matrix): 0, or ``k`` where
    ``D[k-1, k-1]`` is exactly zero (a zero column; the factorization is completed, D
    singular). Only ``check_errors=True`` raises for it (torch 2.13 raises an internal
    "Unknown error code" there; here a ``LinAlgError``, a ``RuntimeError``)."""
    _matrices(A, "torch.linalg.ldl_factor_ex", "ldl_factor_kernel_cpu")
    *batch, n, _ = A.shape
    LD, pivots, info = _unpack(_ldl_factor(A, hermitian=hermitian), tuple(batch), (n, n), (n,), ())
    (LD,) = _own(LD)
    out = LDLFactorExResult(LD, _int32(pivots), _int32(info))
    if check_errors:
        check_info(out.info, LinAlgError, "torch.linalg.ldl_factor_ex", _singular)
    return out


def ldl_factor(A, *, hermitian=False) -> LDLFactorResult:
    """The Bunch-Kaufman factorization ``A = L D L^T`` (``hermitian``: ``L D L^H``) of
    symmetric (Hermitian) indefinite ``(*, n, n)`` matrices, read from their lower
    triangles, in LAPACK's compact form (``?sytrf``/``?hetrf``, ``uplo='L'``): ``LD``
    holds ``L`` below its diagonal (unit diagonal implied) and the 1x1 and 2x2 blocks of
    ``D`` on and next to it (upper triangle zero); ``pivots`` (int32, 1-based) the row
    swapped with each row, negative and repeated for a 2x2 block. A singular ``D`` (a
    zero column) raises (``ldl_factor_ex`` reports it). float32, float64, complex64,
    complex128; eager only; no gradient, as torch's."""
    LD, pivots, info = ldl_factor_ex(A, hermitian=hermitian)
    check_info(info, LinAlgError, "torch.linalg.ldl_factor", _singular)
    return LDLFactorResult(LD, pivots)


def ldl_solve(LD, pivots, B, *, hermitian=False) -> Tensor:
    """``X`` with ``A @ X == B`` from ``ldl_factor(A)``'s ``LD`` and ``pivots``
    (LAPACK's ``?sytrs``/``?hetrs``; ``hermitian`` as given to ``ldl_factor``). Batch
    dims of ``B`` and ``LD`` broadcast. Eager only; no gradient, as torch's."""
    what = "torch.linalg.ldl_solve"
    _matrices(LD, what, "ldl_solve_kernel_cpu")
    n = LD.shape[-1]
    if B.dtype is not LD.dtype:
        raise RuntimeError(
            f"Expected b and A to have the same dtype, but found b of type {B.dtype.title} "
            f"and A of type {LD.dtype.title} instead."
        )
    if B.ndim < 2:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got -2)")
    if B.shape[-2] != n:
        raise RuntimeError(
            f"Incompatible matrix sizes for {what}: each A matrix is {n} by {n} but each b "
            f"matrix is {B.shape[-2]} by {B.shape[-1]}"
        )
    if tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise RuntimeError(
            f"{what}: Expected LD.shape[:-1] and pivots.shape to be the same, but got pivots "
            f"with shape {list(pivots.shape)} instead"
        )
    if pivots.dtype.is_floating_point or pivots.dtype.is_complex or pivots.dtype is dt.bool_:
        raise RuntimeError(f"{what}: Expected pivots to be integers. Got {pivots.dtype.title}")
    batch = broadcast_shapes(tuple(B.shape[:-2]), tuple(LD.shape[:-2]))
    return _ldl_solve(
        LD.expand(*batch, n, n),
        pivots.expand(*batch, n),
        B.expand(*batch, n, B.shape[-1]),
        hermitian=hermitian,
    )
