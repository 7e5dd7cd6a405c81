"""The factorizations and functions of ``staged.linalg`` written in staged's ops, so that
they run, differentiate (both modes, to any order), compile and batch everywhere: the LU
factorization with partial pivoting and its solves, the ``_ex`` forms reporting LAPACK's
``info``, the Cholesky solves, the matrix exponential, Vandermonde matrices, tensor
inverses and solves, and products of Householder reflectors. They are unrolled over the
matrix size: for the small matrices of a model, not large dense algebra."""

from __future__ import annotations

import collections
import math
import warnings

import numpy as np

from .. import dtypes as dt
from ..autodiff.indexing import LinAlgError
from ..eager import ops
from ..eager.checks import require
from ..eager.factories import arange, eye, ones_like, zeros
from ..eager.ops._operands import broadcast_shapes
from ..eager.tensor import Tensor
from ._core import (
    _argmax,
    _real,
    _singular_diagonal,
    _solve,
    _square,
    check_info,
    conj_transpose,
    cholesky_info,
    first_failure,
    not_positive_definite,
    solve,
    solve_operands,
    solve_triangular,
    torch_named,
)


def _matrices(A, what: str, name: str = "A") -> None:
    if A.ndim < 2:
        raise RuntimeError(f"{what}: The input tensor {name} must have at least 2 dimensions.")


def _has_data(t: Tensor) -> bool:
    """Whether ``t`` holds values (not under capture or vmap)."""
    return type(t._payload) is np.ndarray


# --- LU ---------------------------------------------------------------------------------------
LUFactorResult = collections.namedtuple(  # type: ignore[name-match]
    "linalg_lu_factor", "LU pivots", module="staged.return_types"
)
LUFactorExResult = collections.namedtuple(  # type: ignore[name-match]
    "linalg_lu_factor_ex", "LU pivots info", module="staged.return_types"
)
LUResult = collections.namedtuple("linalg_lu", "P L U", module="staged.return_types")  # type: ignore[name-match]


def _lu(A):
    """LAPACK's ``getrf`` in staged's ops: ``P A = L U`` by Gaussian elimination with
    partial pivoting (the first largest ``|entry|`` of each column), one column per step.
    The compact ``LU`` (``L``'s unit diagonal implied), the 1-based row swapped with each
    row (int32) and ``info`` (1 + the first zero pivot's index, else 0). A zero pivot's
    column has zeros below it: its multipliers are 0, as LAPACK leaves them."""
    *batch, m, n = A.shape
    k = min(m, n)
    if not k:
        return A, zeros(*batch, 0, dtype=dt.int32), zeros(*batch, dtype=dt.int32)
    rows = arange(m)
    M, swaps, pivots = A, [], []
    for j in range(k):
        pj = _argmax(M[..., j:, j]) + j
        order = ops.where(rows == j, pj, ops.where(rows == pj, j, rows))
        M = M.gather(-2, order.unsqueeze(-1).expand(*M.shape))
        pivot = M[..., j : j + 1, j : j + 1]
        factors = M[..., j + 1 :, j : j + 1] / ops.where(pivot == 0, 1, pivot)
        below = M[..., j + 1 :, j + 1 :] - factors * M[..., j : j + 1, j + 1 :]
        rest = ops.cat([M[..., j + 1 :, :j], factors, below], -1)
        M = ops.cat([M[..., : j + 1, :], rest], -2)
        swaps.append(pj)
        pivots.append(pivot[..., 0])
    info = first_failure(ops.cat(pivots, -1) == 0)
    return M, (ops.cat(swaps, -1) + 1).to(dt.int32), info


def _zero_pivot(i) -> str:
    return (
        f"U[{i or 'i'},{i or 'i'}] is zero and using it on lu_solve would result in a division "
        "by zero. If you still want to perform the factorization, consider calling "
        "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"
    )


def _lu_checked(A, pivot: bool):
    if A.ndim < 2:
        raise RuntimeError(
            f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: "
            f"{list(A.shape)} instead"
        )
    _real(A, "lu_factor", complex_ok=True)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    return _lu(A)


def lu_factor_ex(A, *, pivot=True, check_errors=False) -> LUFactorExResult:
    """``lu_factor`` with LAPACK's ``info`` (int32, per matrix): 0, or ``i`` where
    ``U[i-1, i-1]`` is zero. Only ``check_errors=True`` raises for it."""
    LU, pivots, info = _lu_checked(A, pivot)
    (LU,) = torch_named("LinalgLuFactorExBackward0", A, LU)
    out = LUFactorExResult(LU, pivots, info)
    if check_errors:
        check_info(out.info, RuntimeError, "torch.linalg.lu_factor_ex", _zero_pivot)
    return out


def lu_factor(A, *, pivot=True) -> LUFactorResult:
    """The compact LU factorization with partial pivoting of the ``(*, m, n)`` ``A``
    (LAPACK's ``getrf``: ``LU`` holds ``L`` below its diagonal and ``U`` on and above it;
    ``pivots`` the 1-based row swapped with each row, int32). A zero pivot raises, as in
    torch (``lu_factor_ex`` reports it instead). Real or complex matrices; ``pivot=False`` raises,
    as torch's CPU kernel does."""
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    check_info(info, RuntimeError, "torch.linalg.lu_factor", _zero_pivot)
    return LUFactorResult(LU, pivots)


def _permutation(pivots, m: int):
    """The row order LAPACK's swaps ``pivots`` make of ``range(m)``: ``P[perm[i], i] = 1``."""
    rows = arange(m)
    perm = rows.expand(*pivots.shape[:-1], m)
    for j in range(pivots.shape[-1]):
        p = (pivots[..., j : j + 1] - 1).to(dt.int64)
        a, b = perm[..., j : j + 1], perm.gather(-1, p)
        perm = ops.where(rows == j, b, ops.where(rows == p, a, perm))
    return perm


def _permutation_matrix(perm, m: int, dtype):
    return (perm.unsqueeze(-2) == arange(m).unsqueeze(-1)).to(dtype)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True) -> LUResult:
    """``(P, L, U)`` from ``lu_factor``'s result: ``A = P @ L @ U``; what is not unpacked
    is an empty tensor, as in torch."""
    *_, m, n = LU_data.shape
    k = min(m, n)
    empty = zeros(0, dtype=LU_data.dtype)
    L = U = P = empty
    if unpack_data:
        L = LU_data[..., :, :k].tril(-1) + eye(m, k, dtype=LU_data.dtype)
        U = LU_data[..., :k, :].triu()
    if unpack_pivots:
        P = _permutation_matrix(_permutation(LU_pivots, m), m, LU_data.dtype)
    return LUResult(P, L, U)


def lu(A, *, pivot=True) -> LUResult:
    """``(P, L, U)`` with ``A = P @ L @ U``: ``P`` a permutation, ``L`` ``(*, m, k)`` unit
    lower triangular, ``U`` ``(*, k, n)`` upper triangular (``k = min(m, n)``)."""
    LU, pivots, _ = _lu_checked(A, pivot)
    P, L, U = lu_unpack(LU, pivots)
    return LUResult(P, *torch_named("LinalgLuBackward0", A, L, U))


def _lu_solve(LU, pivots, B, adjoint: bool):
    n = LU.shape[-1]
    batch = broadcast_shapes(tuple(LU.shape[:-2]), tuple(pivots.shape[:-1]), tuple(B.shape[:-2]))
    B = B.expand(*batch, n, B.shape[-1])
    perm = _permutation(pivots.expand(*batch, n), n)
    if not adjoint:  # L U X = P^T B, whose row i is B's row perm[i]
        PB = B.gather(-2, perm.unsqueeze(-1).expand(*B.shape))
        Y = solve_triangular(LU, PB, upper=False, unitriangular=True)
        return solve_triangular(LU, Y, upper=True)
    # A^H X = B: U^H L^H P^T X = B
    Y = solve_triangular(LU.mH, B, upper=False)
    Z = solve_triangular(LU.mH, Y, upper=True, unitriangular=True)
    return _permutation_matrix(perm, n, B.dtype) @ Z


def lu_solve(LU, pivots, B, *, left=True, adjoint=False) -> Tensor:
    """``X`` with ``A @ X == B`` from ``(LU, pivots) = lu_factor(A)`` (``adjoint``:
    ``A^H @ X == B``; ``left=False``: ``X @ A == B``), by two triangular solves. Real or
    complex matrices."""
    _matrices(B, "linalg.lu_solve", "B")
    _matrices(LU, "linalg.lu_solve", "LU")
    if LU.shape[-1] != LU.shape[-2]:
        raise RuntimeError(
            "torch.linalg.lu_solve: A must be batches of square matrices, but they are "
            f"{LU.shape[-2]} by {LU.shape[-1]} matrices"
        )
    _real(LU, "lu_solve", complex_ok=True)
    _real(B, "lu_solve", complex_ok=True)
    if pivots.dtype is not dt.int32:
        raise RuntimeError("linalg.lu_solve: pivots should be a Tensor of scalar type torch.int32")
    n = LU.shape[-1]
    if pivots.ndim < 1 or pivots.shape[-1] != n:
        raise RuntimeError(
            "linalg.lu_solve: Number of pivots per batch should be same as the dimension of "
            "the matrix"
        )
    rows = B.shape[-2] if left else B.shape[-1]
    if rows != n:
        b = B.shape[-2:] if left else B.shape[-2:][::-1]
        raise RuntimeError(
            "linalg.lu_solve: Incompatible shapes of A and B for the equation "
            f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {b[0]}x{b[1]})"
        )
    if not left:  # X A = B  <=>  A^H X^H = B^H
        return _lu_solve(LU, pivots, B.mH, not adjoint).mH  # a conj view, as torch's
    return _lu_solve(LU, pivots, B, adjoint)


def deprecated(old: str, new: str, how: str) -> None:
    """torch's warning for its deprecated ``old`` (a call made through ``sited``)."""
    warnings.warn(
        f"torch.{old} is deprecated in favor of torch.linalg.{new} and will be removed in a "
        f"future PyTorch release.\n{how}",
        UserWarning,
        stacklevel=4,
    )


def _torch_lu_solve(b, LU_data, LU_pivots) -> Tensor:
    """``torch.lu_solve`` (deprecated there, with its warning): ``linalg.lu_solve`` with
    ``b`` first."""
    deprecated(
        "lu_solve",
        "lu_solve",
        "Note that torch.linalg.lu_solve has its arguments reversed.\nX = torch.lu_solve(B, LU, "
        "pivots)\nshould be replaced with\nX = torch.linalg.lu_solve(LU, pivots, B)",
    )
    return lu_solve(LU_data, LU_pivots, b)


def _torch_lu(A, pivot=True, get_infos=False):
    """``torch.lu`` (deprecated there, with its warning): ``(LU, pivots)``, and ``infos``
    with ``get_infos``, which alone does not raise for a zero pivot."""
    deprecated(
        "lu",
        "lu_factor / torch.linalg.lu_factor_ex",
        "LU, pivots = torch.lu(A, compute_pivots)\nshould be replaced with\nLU, pivots = "
        "torch.linalg.lu_factor(A, compute_pivots)\nand\nLU, pivots, info = torch.lu(A, "
        "compute_pivots, get_infos=True)\nshould be replaced with\nLU, pivots, info = "
        "torch.linalg.lu_factor_ex(A, compute_pivots)",
    )
    if get_infos:
        return lu_factor_ex(A, pivot=pivot)
    return lu_factor(A, pivot=pivot)


# --- the _ex forms: LAPACK's info instead of an error ----------------------------------------
InvExResult = collections.namedtuple("linalg_inv_ex", "inverse info", module="staged.return_types")  # type: ignore[name-match]
SolveExResult = collections.namedtuple(  # type: ignore[name-match]
    "linalg_solve_ex", "result info", module="staged.return_types"
)
CholeskyExResult = collections.namedtuple(  # type: ignore[name-match]
    "linalg_cholesky_ex", "L info", module="staged.return_types"
)


def _solve_ex(A, B, what: str):
    """``solve(A, B)`` of matrices and LU's ``info``: LAPACK's kernel where there is data
    and ``A`` is invertible, else the elimination in staged's ops (whose ``X`` is inf or
    NaN where a pivot is 0). Complex matrices: the kernel's (or, without data, the
    elimination's) ``X`` of the invertible ones, NaN for the others."""
    data = _has_data(A) and _has_data(B)
    if data:
        try:
            X = _solve(A, B)
            return X, zeros(*X.shape[:-2], dtype=dt.int32)
        except LinAlgError:
            pass
    if A.dtype.is_complex:
        info = _lu(A)[2]
        singular = (info > 0)[..., None, None]
        X = _solve(ops.where(singular, eye(A.shape[-1], dtype=A.dtype), A), B)
        return ops.where(singular, math.nan, X), info
    LU, pivots, info = _lu(A)
    return _lu_solve(LU, pivots, B, False), info


def inv_ex(A, *, check_errors=False) -> InvExResult:
    """``inv(A)`` and LAPACK's ``info`` (int32, per matrix: 0, or ``i`` where ``U[i-1,
    i-1]`` of ``A``'s LU is zero; the inverse is then inf or NaN). Only
    ``check_errors=True`` raises for a singular ``A``. Real or complex matrices."""
    _square(A, "inv")
    _real(A, "inv_ex", "lu_cpu", complex_ok=True)
    n = A.shape[-1]
    X, info = _solve_ex(A, eye(n, dtype=A.dtype).expand(*A.shape), "inv_ex")
    if check_errors:
        check_info(info, LinAlgError, "linalg.inv_ex", _singular_diagonal)
    (X,) = torch_named("LinalgInvExBackward0", A, X)
    return InvExResult(X, info)


def solve_ex(A, B, *, left=True, check_errors=False) -> SolveExResult:
    """``solve(A, B, left=left)`` and LAPACK's ``info``, as ``inv_ex``."""
    if not left:
        X, info = solve_ex(A.mT, B.mT, check_errors=check_errors)
        return SolveExResult(X.mT, info)
    A, Bm, vector = solve_operands(A, B, "solve_ex")
    X, info = _solve_ex(A, Bm, "solve_ex")
    if check_errors:
        check_info(
            info,
            LinAlgError,
            "torch.linalg.solve_ex",
            lambda i: "The solver failed because the input matrix is singular.",
        )
    return SolveExResult(X.squeeze(-1) if vector else X, info)


def cholesky_ex(A, *, upper=False, check_errors=False) -> CholeskyExResult:
    """``cholesky(A)`` and LAPACK's ``info`` (int32: 0, or the order of the first leading
    minor that is not positive-definite; the factor is NaN from that column on). Only
    ``check_errors=True`` raises for it."""
    _square(A, "cholesky")
    _real(A, "cholesky_ex", complex_ok=True)
    L, info = cholesky_info(A)
    if check_errors:
        check_info(info, LinAlgError, "linalg.cholesky_ex", not_positive_definite)
    (L,) = torch_named("LinalgCholeskyExBackward0", A, conj_transpose(L) if upper else L)
    return CholeskyExResult(L, info)


# --- Cholesky solves ----------------------------------------------------------------------------
def cholesky_solve(B, L, upper=False) -> Tensor:
    """``torch.cholesky_solve``: ``X`` with ``(L @ L^T) @ X == B`` (``upper``: ``U^T @ U``)
    by two triangular solves. Only ``L``'s triangle is read, so its gradient is that
    triangle's (torch's also has entries in the other, the derivative of ``(L L^T)^-1 B``
    as if ``L`` were a full matrix). Real or complex matrices."""
    if B.ndim < 2:
        raise RuntimeError(
            f"b should have at least 2 dimensions, but has {B.ndim} dimensions instead"
        )
    if L.ndim < 2:
        raise RuntimeError(
            f"u should have at least 2 dimensions, but has {L.ndim} dimensions instead"
        )
    if B.dtype is not L.dtype:
        raise RuntimeError(
            f"Expected b and A to have the same dtype, but found b of type {B.dtype.title} and "
            f"A of type {L.dtype.title} instead."
        )
    n = L.shape[-1]
    if L.shape[-2] != n or B.shape[-2] != n:
        raise RuntimeError(
            f"Incompatible matrix sizes for cholesky_solve: each A matrix is {L.shape[-2]} by "
            f"{n} but each b matrix is {B.shape[-2]} by {B.shape[-1]}"
        )
    _real(L, "cholesky_solve", complex_ok=True)
    lower = L.mH if upper else L
    return solve_triangular(lower.mH, solve_triangular(lower, B, upper=False), upper=True)


def cholesky_inverse(L, upper=False) -> Tensor:
    """``torch.cholesky_inverse``: ``(L @ L^T)^-1`` (``upper``: ``(U^T @ U)^-1``) from the
    Cholesky factor, as ``cholesky_solve`` of the identity."""
    _matrices(L, "cholesky_inverse")
    if L.shape[-1] != L.shape[-2]:
        raise RuntimeError(
            "cholesky_inverse: A must be batches of square matrices, but they are "
            f"{L.shape[-2]} by {L.shape[-1]} matrices"
        )
    return cholesky_solve(eye(L.shape[-1], dtype=L.dtype).expand(*L.shape), L, upper)


# --- the matrix exponential -------------------------------------------------------------------
# the largest 1-norm for which the degree-18 Taylor polynomial is exp to the dtype's precision
# (torch's values, from Bader, Blanes and Casas 2019); larger matrices are scaled by 2^-s first
_THETA_18 = {"float32": 3.010066362817634, "float64": 1.090863719290036}
_TAYLOR = [1 / math.factorial(i) for i in range(19)]
# the squarings a compiled graph holds (it cannot count them from data): 1-norms up to
# theta * 2^32; a larger one raises when the step's results are read
_MAX_SQUARINGS = 32


def _taylor_18(X):
    """``sum_{i <= 18} X^i / i!`` by Paterson-Stockmeyer: 7 products."""
    X2 = X @ X
    powers = [eye(X.shape[-1], dtype=X.dtype), X, X2, X2 @ X]
    X4 = X2 @ X2

    def block(j):  # sum_i c[4j + i] X^i
        return sum(_TAYLOR[4 * j + i] * powers[i] for i in range(4) if 4 * j + i <= 18)

    P = block(4)
    for j in (3, 2, 1, 0):
        P = P @ X4 + block(j)
    return P


def matrix_exp(A) -> Tensor:
    """``e^A`` of each square matrix: scaling and squaring of the degree-18 Taylor
    polynomial (torch's degree for the largest norms; it takes lower degrees for small
    ones), in staged's ops. Its gradient is that of the computation, within rounding of
    torch's (the exact adjoint). Real matrices."""
    _matrices(A, "linalg.matrix_exp", "A")
    _square(A, "matrix_exp")
    _real(A, "matrix_exp")
    if not A.shape[-1]:
        return A.clone()
    norm = A.detach().abs().sum(-2).amax(-1)
    s = (norm / _THETA_18[A.dtype.name]).log2().ceil().clamp(min=0)
    s = ops.where(s.isfinite(), s, 0)  # NaN and inf entries give NaN results anyway
    X = _taylor_18(A * ops.exp2(-s)[..., None, None])
    if _has_data(s):
        rounds = int(s.max()) if s.numel() else 0
    else:
        rounds = _MAX_SQUARINGS
        require(
            s <= _MAX_SQUARINGS,
            RuntimeError,
            f"linalg.matrix_exp: a compiled step squares at most {_MAX_SQUARINGS} times, "
            "too few for a matrix of this norm; compute it eagerly",
        )
    for r in range(rounds):
        X = ops.where((s > r)[..., None, None], X @ X, X)
    return X


# --- Vandermonde, tensor inverses and solves, Householder products ---------------------------
def vander(x, N=None) -> Tensor:
    """``x``'s powers ``0 .. N-1`` along a new last dim (``N`` defaults to ``x.shape[-1]``),
    as the running product of ``x``, as torch's."""
    if x.ndim < 1:
        raise RuntimeError("N must be greater than 1.")
    N = x.shape[-1] if N is None else N
    if N <= 1:
        raise RuntimeError("N must be greater than 1.")
    powers = x.unsqueeze(-1).expand(*x.shape, N - 1).cumprod(-1)
    return ops.cat([ones_like(x).unsqueeze(-1), powers], -1)


def _torch_vander(x, N=None, increasing=False) -> Tensor:
    """``torch.vander``: a 1-D ``x``, decreasing powers unless ``increasing``."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    if N is not None and N < 0:
        raise RuntimeError("N must be non-negative.")
    N = x.shape[0] if N is None else N
    if N <= 1:
        out = ones_like(x).unsqueeze(-1)[:, :N]
    else:
        out = vander(x, N)
    return out if increasing else out.flip(-1)


def tensorinv(A, ind=2) -> Tensor:
    """The inverse of ``A`` seen as the matrix of its first ``ind`` dims by the rest: the
    result has shape ``A.shape[ind:] + A.shape[:ind]``."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = math.prod(A.shape[:ind]), math.prod(A.shape[ind:])
    if rows != cols:
        raise RuntimeError(
            "Expected self to satisfy the requirement prod(self.shape[ind:]) == "
            f"prod(self.shape[:ind]), but got {cols} != {rows}"
        )
    inverse, info = inv_ex(A.reshape(rows, cols))
    check_info(info, LinAlgError, "inv", _singular_diagonal)
    return inverse.reshape(*A.shape[ind:], *A.shape[:ind])


def tensorsolve(A, B, dims=None) -> Tensor:
    """``X`` with ``tensordot(A, X, X.ndim) == B`` (``dims``: ``A``'s dims moved to the end
    first), by a solve of ``A`` seen as a square matrix."""
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = A.movedim(dims, list(range(A.ndim - len(dims), A.ndim)))
    out_shape = A.shape[B.ndim :]
    rows, cols = math.prod(A.shape[: B.ndim]), math.prod(out_shape)
    if rows != cols:
        raise RuntimeError(
            "Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
            f"prod(self.shape[:other.ndim]), but got {cols} != {rows}"
        )
    return solve(A.reshape(rows, cols), B.reshape(rows)).reshape(*out_shape)


def householder_product(A, tau) -> Tensor:
    """The first ``n`` columns of ``H_1 H_2 ... H_k`` for ``(*, m, n)`` ``A`` and ``(*, k)``
    ``tau``, ``H_i = I - tau_i v_i v_i^T`` with ``v_i`` 1 at ``i`` and ``A[i+1:, i]`` below
    (LAPACK's ``orgqr``), one reflector per step. Real matrices."""
    what = "torch.linalg.householder_product"
    if A.ndim < 2:
        raise RuntimeError(f"{what}: input must have at least 2 dimensions.")
    *batch, m, n = A.shape
    if m < n:
        raise RuntimeError(
            f"{what}: input.shape[-2] must be greater than or equal to input.shape[-1]"
        )
    if tau.ndim and n < tau.shape[-1]:
        raise RuntimeError(
            f"{what}: input.shape[-1] must be greater than or equal to tau.shape[-1]"
        )
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(
            f"{what}: Expected tau to have one dimension less than input, but got tau.ndim "
            f"equal to {tau.ndim} and input.ndim is equal to {A.ndim}"
        )
    if list(tau.shape[:-1]) != batch:
        raise RuntimeError(
            f"{what}: Expected batch dimensions of tau to be equal to input.shape[:-2], but "
            f"got {list(tau.shape[:-1])}"
        )
    if tau.dtype is not A.dtype:
        raise RuntimeError(
            f"{what}: tau dtype {tau.dtype.title} does not match input dtype {A.dtype.title}"
        )
    _real(A, "householder_product")
    Q = eye(m, n, dtype=A.dtype).expand(*batch, m, n)
    for i in reversed(range(tau.shape[-1])):
        v = ops.cat(
            [zeros(*batch, i, dtype=A.dtype), ones_like(A[..., :1, 0]), A[..., i + 1 :, i]], -1
        )
        Q = Q - tau[..., i, None, None] * v.unsqueeze(-1) * (v.unsqueeze(-2) @ Q)
    return Q
