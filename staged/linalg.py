"""``torch.linalg``'s counterpart: the norms, products and matrix algebra that training
and scientific programs use. The norms and products are compositions of staged's ops.
``solve``, ``inv``, ``det`` and ``slogdet`` run LAPACK (NumPy's) eagerly, as one kernel
and one autograd Node each (``Fused``, Note [fused kernels] in ``eager/dispatch.py``);
captured, differentiated forward or batched, they are Gaussian elimination with partial
pivoting in staged's ops, unrolled over the matrix size. ``cholesky`` and
``solve_triangular`` are such compositions everywhere. What needs other factorizations
(QR, SVD, eigendecompositions: ``svd``, ``eigh``, ``pinv``, ``matrix_norm(ord=2)``...)
is not here: asking for one names what is. Real matrices (float32, float64)."""

from __future__ import annotations

import collections
import functools
import math

import numpy as np

from ._where import at_user, sited
from .autodiff import Fused
from .autodiff.indexing import LinAlgError
from .eager import ops
from .eager.checks import require
from .eager.factories import arange, eye, ones_like, zeros
from .eager.interceptor import current_interceptor
from .eager.ops.linalg import cross as _cross
from .eager.ops._operands import broadcast_shapes
from .eager.ops.linalg import matmul
from .eager.ops.reduction import norm as _vector_norm
from .eager.tensor import Tensor

__all__ = [
    "LinAlgError",
    "cholesky",
    "cross",
    "det",
    "diagonal",
    "inv",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "multi_dot",
    "norm",
    "slogdet",
    "solve",
    "solve_triangular",
    "vecdot",
    "vector_norm",
]


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def _floating(x: Tensor, what: str, dtype) -> Tensor:
    if dtype is not None:
        x = x.to(dtype)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(
            f"linalg.{what}: Expected a floating point or complex tensor as input. "
            f"Got {x.dtype.title}"
        )
    return x


def _square(A, what: str) -> None:
    """torch's shape check of a batch of square matrices."""
    if A.ndim < 2:
        raise RuntimeError(f"linalg.{what}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(
            f"linalg.{what}: A must be batches of square matrices, but they are "
            f"{A.shape[-2]} by {A.shape[-1]} matrices"
        )


def _real(A, what: str) -> None:
    """Real floating matrices: what the factorizations here take."""
    if A.dtype.is_complex:
        raise NotImplementedError(f"linalg.{what}: complex matrices are not supported here")
    _floating(A, what, None)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    """The ``ord``-norm of the vectors along ``dim`` (all of ``x`` by default): any number,
    ``inf`` or ``-inf``; 0 counts the nonzero entries. The gradient is 0 at zero entries
    and zero norms, as torch's."""
    x = _floating(x, "vector_norm", dtype)
    if isinstance(ord, str):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be Number, not str ({ord!r})")
    return _vector_norm(x, float(ord), dim, keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None) -> Tensor:
    """The ``ord``-norm of the matrices over ``dim``: ``"fro"``, 1 / -1 (largest /
    smallest column sum of ``|A|``) or ``inf`` / ``-inf`` (row sums). ``2``, ``-2`` and
    ``"nuc"`` need singular values, which staged does not compute."""
    A = _floating(A, "matrix_norm", dtype)
    if ord not in _MATRIX_ORDS:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if A.ndim < 2:
        raise RuntimeError(
            f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions. Got {A.ndim}D"
        )
    dim = tuple(d % A.ndim for d in dim)
    if len(dim) != 2 or dim[0] == dim[1]:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got {dim}")
    if ord == "fro":
        return _vector_norm(A, 2.0, dim, keepdim)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(
            f"linalg.matrix_norm: ord={ord!r} is a function of the singular values, and "
            "staged has no SVD; ord='fro', 1, -1, inf and -inf are here"
        )
    summed, over = (dim[0], dim[1]) if ord in (1, -1) else (dim[1], dim[0])
    extreme = ops.amax if ord > 0 else ops.amin
    out = extreme(A.abs().sum(summed, keepdim=True), over, keepdim=True)
    return out if keepdim else out.squeeze(max(dim)).squeeze(min(dim))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    """``vector_norm`` or ``matrix_norm``, as torch decides: an int ``dim`` or a 1-D
    ``A`` is a vector norm, a pair of dims or a 2-D ``A`` with an ``ord`` a matrix norm,
    and with neither ``dim`` nor ``ord`` the 2-norm of all the entries."""
    if isinstance(dim, int) or (dim is not None and len(dim) == 1):
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is not None:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise RuntimeError(
        f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
        f"Got {A.ndim}D."
    )


def vecdot(x, y, *, dim=-1) -> Tensor:
    """``sum(conj(x) * y)`` along ``dim`` (operands broadcast)."""
    return (x.conj() * y).sum(dim)


def cross(input, other, *, dim=-1) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (-1 by default, unlike ``torch.cross``)."""
    return _cross(input, other, dim=dim)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1) -> Tensor:
    """``A.diagonal(offset, dim1, dim2)``, keyword arguments only."""
    return A.diagonal(offset, dim1, dim2)


def multi_dot(tensors) -> Tensor:
    """``tensors[0] @ tensors[1] @ ...``: a 1-D first operand is a row, a 1-D last one a
    column, and their dims are dropped from the result."""
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        if t.ndim != 2 and not (t.ndim == 1 and i in (0, len(tensors) - 1)):
            raise RuntimeError(
                f"multi_dot(): tensor {i} must be 2D{' or 1D' if i in (0, len(tensors) - 1) else ''}"
                f" but got {t.ndim}D"
            )
    return functools.reduce(matmul, tensors)


def matrix_power(A, n: int) -> Tensor:
    """``A @ A @ ... @ A`` (``n`` factors, by repeated squaring; the identity for 0, and
    powers of ``inv(A)`` for ``n < 0``)."""
    _square(A, "matrix_power")
    if n < 0:
        A, n = inv(A), -n
    out, square = None, A
    while n:
        if n & 1:
            out = square if out is None else out @ square
        n >>= 1
        if n:
            square = square @ square
    if out is None:  # the identity, with A's graph (gradient 0), as torch's
        return ops.where(ones_like(A, dtype=bool), eye(A.shape[-1], dtype=A.dtype), A)
    return out


def cholesky(A, *, upper=False) -> Tensor:
    """The lower ``L`` with ``L @ L.mH == A`` (``upper=True``: ``L.mH``), one column per
    step. It factors ``(A + A.mT) / 2`` (``A`` itself when symmetric), so the gradient is
    symmetric, as torch's; eagerly, a matrix that is not positive-definite raises torch's
    error (a compiled step cannot check it: its factor is NaN there). Real matrices."""
    _square(A, "cholesky")
    _real(A, "cholesky")
    n = A.shape[-1]
    a = (A + A.mT) * 0.5
    cols: list[Tensor] = []
    for j in range(n):
        v = a[..., :, j]
        if j:
            c = ops.stack(cols, -1)
            v = v - (c * c[..., j : j + 1, :]).sum(-1)
        pivot = v[..., j : j + 1]
        if current_interceptor() is None and not bool((pivot > 0).all()):
            raise LinAlgError(
                "linalg.cholesky: The factorization could not be completed because the "
                f"input is not positive-definite (the leading minor of order {j + 1} is "
                "not positive-definite)."
            )
        d = pivot.sqrt()
        parts = [zeros(*v.shape[:-1], j, dtype=v.dtype), d, v[..., j + 1 :] / d]
        cols.append(ops.cat(parts, -1))
    L = ops.stack(cols, -1)
    return L.mT if upper else L


def solve_triangular(A, B, *, upper, left=True, unitriangular=False) -> Tensor:
    """``X`` with ``A @ X == B`` (``left=False``: ``X @ A == B``) for triangular ``A``,
    by substitution one row at a time (batch dims broadcast); ``unitriangular`` takes
    ``A``'s diagonal as ones. Real matrices."""
    if A.dtype.is_complex or B.dtype.is_complex:
        raise NotImplementedError(
            "linalg.solve_triangular: complex matrices are not supported here"
        )
    if A.ndim < 2 or B.ndim < 2:
        raise RuntimeError(
            "linalg.solve_triangular: The input tensor "
            f"{'A' if A.ndim < 2 else 'B'} must have at least 2 dimensions."
        )
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return solve_triangular(A.mT, B.mT, upper=not upper, unitriangular=unitriangular).mT
    n = A.shape[-1]
    if A.shape[-2] != n or B.shape[-2] != n:
        raise RuntimeError(
            f"linalg.solve_triangular: Incompatible shapes of A and B for the equation AX = B "
            f"({'x'.join(map(str, A.shape[-2:]))} and {'x'.join(map(str, B.shape[-2:]))})"
        )
    rows: dict[int, Tensor] = {}
    for i in reversed(range(n)) if upper else range(n):
        r = B[..., i, :]
        done = sorted(rows)
        if done:
            lo, hi = done[0], done[-1] + 1  # the solved rows are contiguous
            r = r - (A[..., i, lo:hi].unsqueeze(-1) * ops.stack([rows[k] for k in done], -2)).sum(
                -2
            )
        rows[i] = r if unitriangular else r / A[..., i, i : i + 1]
    return ops.stack([rows[k] for k in range(n)], -2)


# --- LU: solve, inv, det, slogdet -----------------------------------------------------------
def _eliminate(M, n: int):
    """Gaussian elimination with partial pivoting over the first ``n`` columns of the
    ``(..., n, m)`` rows ``M``: the upper-triangular result (entries below the diagonal
    are not zeroed, and never read) and the sign of the row permutation."""
    rows = arange(n)
    sign = ones_like(M[..., 0, 0])
    for k in range(n - 1):
        p = M[..., k:, k].abs().argmax(-1) + k  # the largest pivot, per matrix
        pk = p.unsqueeze(-1)
        order = ops.where(rows == k, pk, ops.where(rows == pk, k, rows))  # swap rows k, p
        M = M.gather(-2, order.unsqueeze(-1).expand(*M.shape))
        sign = ops.where(p == k, sign, -sign)
        factors = M[..., k + 1 :, k : k + 1] / M[..., k : k + 1, k : k + 1]
        below = M[..., k + 1 :, :] - factors * M[..., k : k + 1, :]
        M = ops.cat([M[..., : k + 1, :], below], -2)
    return M, sign


_SINGULAR = "torch.linalg.solve: The solver failed because the input matrix is singular."


def _solve_decomposed(A, B):
    n = A.shape[-1]
    M, _ = _eliminate(ops.cat([A, B], -1), n)
    U = M[..., :n]
    # without data (a capture) the check goes into the graph, read with the results
    require(U.diagonal(0, -2, -1) != 0, LinAlgError, _SINGULAR)
    return solve_triangular(U, M[..., n:], upper=True)


def _solve_impl(A, B):
    try:
        return np.linalg.solve(A, B)
    except np.linalg.LinAlgError:
        raise LinAlgError(at_user(_SINGULAR)) from None


def _solve_dB(g, A):
    return _solve(A.mT, g)  # A^-T g


def _solve_dA(g, A, out):
    return -(_solve(A.mT, g) @ out.mT)


_solve = Fused(
    "linalg_solve",
    _solve_impl,
    _solve_decomposed,
    vjp=(_solve_dA, _solve_dB),
    node_name="LinalgSolveExBackward0",
)


def solve(A, B, *, left=True) -> Tensor:
    """``X`` with ``A @ X == B`` (``left=False``: ``X @ A == B``); ``B`` is a batch of
    vectors when it is 1-D or has ``A``'s shape less its last dim, as in torch. A
    singular ``A`` raises ``LinAlgError`` (eagerly; a compiled step raises it when its
    results are read)."""
    _square(A, "solve")
    _real(A, "solve")
    if A.dtype is not B.dtype:
        raise RuntimeError(
            f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
            f"{A.dtype.title} and B of type {B.dtype.title} instead"
        )
    if not left:
        return solve(A.mT, B.mT).mT
    n = A.shape[-1]
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.shape[-2] != n:
        raise RuntimeError(
            f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
            f"({n}x{n} and {Bm.shape[-2]}x{Bm.shape[-1]})"
        )
    batch = broadcast_shapes(tuple(A.shape[:-2]), tuple(Bm.shape[:-2]))
    X = _solve(A.expand(*batch, n, n), Bm.expand(*batch, n, Bm.shape[-1]))
    return X.squeeze(-1) if vector else X


def inv(A) -> Tensor:
    """``A``'s inverse (``solve(A, I)``); a singular ``A`` raises ``LinAlgError``."""
    _square(A, "inv")
    _real(A, "inv")
    n = A.shape[-1]
    try:
        return solve(A, eye(n, dtype=A.dtype).expand(*A.shape))
    except LinAlgError:
        raise LinAlgError(
            at_user(
                "linalg.inv: The inversion could not be completed because the input matrix "
                "is singular."
            )
        ) from None


def _inv_T(A):  # A^-T, for the determinants' gradients
    n = A.shape[-1]
    return _solve(A.mT, eye(n, dtype=A.dtype).expand(*A.shape))


def _pivots(A):
    """The diagonal of ``A``'s eliminated form and the row permutation's sign."""
    U, sign = _eliminate(A, A.shape[-1])
    return U.diagonal(0, -2, -1), sign


def _det_decomposed(A):
    d, sign = _pivots(A)
    return sign * d.prod(-1)


_det = Fused(
    "linalg_det",
    lambda A: np.asarray(np.linalg.det(A), A.dtype),
    _det_decomposed,
    vjp=lambda g, A, out: (g * out)[..., None, None] * _inv_T(A),
    node_name="LinalgDetBackward0",
)


def _slogdet_decomposed(A):
    d, sign = _pivots(A)
    return ops.stack([sign * d.sign().prod(-1), d.abs().log().sum(-1)])


# sign and logabsdet stacked: one LAPACK call (one elimination when decomposed); the sign
# is piecewise constant, so only logabsdet's cotangent reaches A (torch's sign requires
# grad too)
_slogdet = Fused(
    "linalg_slogdet",
    lambda A: np.stack(np.linalg.slogdet(A)).astype(A.dtype, copy=False),
    _slogdet_decomposed,
    vjp=lambda g, A: g[1][..., None, None] * _inv_T(A),
    node_name="LinalgSlogdetBackward0",
)


def det(A) -> Tensor:
    """The determinant; its gradient ``g det(A) A^-T`` needs an invertible ``A`` (torch's
    is finite at singular matrices too: here the backward raises ``LinAlgError``)."""
    _square(A, "det")
    _real(A, "det")
    return _det(A)


SlogdetResult = collections.namedtuple("SlogdetResult", "sign logabsdet")


def slogdet(A) -> SlogdetResult:
    """``(sign, logabsdet)``: the determinant's sign (0 for a singular ``A``, with
    logabsdet ``-inf``) and the log of its absolute value; the sign's gradient is 0."""
    _square(A, "slogdet")
    _real(A, "slogdet")
    both = _slogdet(A)
    return SlogdetResult(both[0], both[1])


_FACTORIZATIONS = (
    "inv_ex solve_ex lu lu_factor lu_factor_ex lu_solve qr svd svdvals eig eigvals eigh "
    "eigvalsh pinv lstsq matrix_rank cond cholesky_ex ldl_factor ldl_solve matrix_exp "
    "tensorinv tensorsolve householder_product"
).split()


def __getattr__(name: str):
    if name in _FACTORIZATIONS:
        raise AttributeError(
            f"staged.linalg has no {name}: it needs a matrix factorization staged does not "
            "compute (an LU with its pivots, QR, SVD or an eigendecomposition). Here: "
            f"{', '.join(__all__)}"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- torch's top-level names for these: staged.det, Tensor.det ... -------------------------
def _logdet(A) -> Tensor:
    """``log(det(A))``: NaN where the determinant is negative, -inf where it is 0."""
    sign, logabsdet = slogdet(A)
    return ops.where(sign == -1, math.nan, logabsdet)


def _cholesky(A, upper=False) -> Tensor:
    """``torch.cholesky``: ``upper`` may be positional."""
    return cholesky(A, upper=upper)


# staged/__init__.py exports them; they are Tensor methods too
TOP_LEVEL = {
    name: sited(fn)
    for name, fn in {
        "inverse": inv,
        "det": det,
        "logdet": _logdet,
        "slogdet": slogdet,
        "matrix_power": matrix_power,
        "cholesky": _cholesky,
    }.items()
}
for _name, _fn in TOP_LEVEL.items():
    setattr(Tensor, _name, _fn)
