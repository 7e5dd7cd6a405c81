"""The norms, products and matrix algebra of ``staged.linalg`` that are compositions of
staged's ops, and the LU-based solves. ``solve``, ``inv``, ``det`` and ``slogdet`` run LAPACK
(NumPy's) eagerly, as one kernel and one autograd Node each (``Fused``, Note [fused kernels]
in ``eager/dispatch.py``), and under vmap once on the batch; captured or differentiated
forward, they are Gaussian elimination with partial pivoting in staged's ops, unrolled over
the matrix size (real or complex).
``cholesky`` and ``solve_triangular`` are such compositions everywhere."""

from __future__ import annotations

import collections
import functools
import math

import numpy as np

from .._where import at_user, warn_once
from ..autodiff import Fused
from ..autodiff.avals import EagerOnlyError
from ..autograd.batching import FUSED_RULES, to_batch
from .. import dtypes as dt
from ..autodiff.indexing import LinAlgError
from ..eager import ops
from ..eager.checks import require
from ..eager.factories import arange, eye, ones_like, zeros
from ..eager.interceptor import current_interceptor
from ..eager.ops.linalg import cross as _cross
from ..eager.ops._operands import broadcast_shapes
from ..eager.ops.linalg import matmul
from ..eager.ops.reduction import norm as _vector_norm
from ..eager.tensor import Tensor, type_label
from ..eager.views import named


def _floating(x: Tensor, what: str, dtype=None, *, low_precision: bool = True) -> Tensor:
    """``x`` (converted to ``dtype``) where it is floating or complex (``low_precision``:
    float16 and bfloat16 too), with torch's checks of the norms' ``dtype``."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(
            f"linalg.{what}: Expected a floating point or complex tensor as input. "
            f"Got {x.dtype.title}"
        )
    if not low_precision and x.dtype.itemsize < 4 and x.dtype.is_floating_point:
        raise RuntimeError(
            f"linalg.{what}: Low precision dtypes not supported. Got {x.dtype.title}"
        )
    return x if dtype is None else _norm_dtype(x, what, dt.as_dtype(dtype))


def _norm_dtype(x: Tensor, what: str, dtype: dt.DType) -> Tensor:
    """``x.to(dtype)``: a floating or complex ``dtype`` as complex as ``x``'s, no narrower."""
    if not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(
            f"linalg.{what}: dtype should be floating point or complex, but got {dtype.title}"
        )
    kind = "complex" if x.dtype.is_complex else "real"
    if x.dtype.is_complex != dtype.is_complex:
        raise RuntimeError(
            f"linalg.{what}: dtype should be {kind} for {kind} inputs, but got {dtype.title}"
        )
    if dt._promote_pair(x.dtype, dtype) is not dtype:
        raise RuntimeError(
            f"linalg.{what}: the dtype of the input ({x.dtype.title}) should be convertible "
            f"without narrowing to the specified dtype ({dtype.title})"
        )
    return x.to(dtype)


def _square(A, what: str, prefix: str = "linalg.") -> None:
    """torch's shape check of a batch of square matrices (its messages name
    ``prefix + what``)."""
    if A.ndim < 2:
        raise RuntimeError(f"{prefix}{what}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(
            f"{prefix}{what}: A must be batches of square matrices, but they are "
            f"{A.shape[-2]} by {A.shape[-1]} matrices"
        )


def _real(A, what: str, kernel: str = "", *, complex_ok: bool = False) -> None:
    """Real floating matrices (``complex_ok``: or complex ones): what the factorizations
    here take; those that run LAPACK (its ``kernel``, torch's name) take float32 and
    float64 (complex64 and complex128) only."""
    if A.dtype.is_complex and not complex_ok:
        raise NotImplementedError(f"linalg.{what}: complex matrices are not supported here")
    _floating(A, what, None)
    if kernel and A.dtype.name in ("float16", "bfloat16"):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{A.dtype.title}'")


def _eager_only(name: str, users: str, prefix: str = "linalg."):
    """The decomposition of a LAPACK kernel: what staged cannot trace, say so (``name``
    after ``prefix``, torch's module of it)."""

    def decomposition(*args, **params):
        where = (
            "inside staged.compile or staged.capture"
            if current_interceptor() is not None
            else "under forward-mode AD (forward_ad, jvp) or vmap"
        )
        raise EagerOnlyError(
            at_user(
                f"{prefix}{name}{users} runs LAPACK eagerly only: staged has no composition "
                f"of it in its ops, so it cannot run {where}. Call it eagerly, outside the "
                "compiled function or transform."
            )
        )

    return decomposition


def _real_composition(name: str, composition):
    """``composition``, of real matrices only: a complex one raises as ``_eager_only``."""
    refuse = _eager_only(name, " of a complex matrix")

    def decomposition(A, *args, **params):
        return refuse() if A.dtype.is_complex else composition(A, *args, **params)

    return decomposition


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    """The ``ord``-norm of the vectors along ``dim`` (all of ``x`` by default): any number,
    ``inf`` or ``-inf``; 0 counts the nonzero entries. The gradient is 0 at zero entries
    and zero norms, as torch's."""
    x = _floating(x, "vector_norm", dtype)
    if isinstance(ord, str):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be Number, not str ({ord!r})")
    return _vector_norm(x, float(ord), dim, keepdim)


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


def _torch_chain_matmul(*matrices) -> Tensor:
    """``torch.chain_matmul`` (deprecated there, with its warning once a process):
    ``multi_dot`` of 2-D matrices; of one, a copy of it."""
    warn_once(
        "torch.chain_matmul is deprecated and will be removed in a future PyTorch release. "
        "Use torch.linalg.multi_dot instead, which accepts a list of two or more tensors "
        "rather than multiple parameters."
    )
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    return matrices[0].clone() if len(matrices) == 1 else multi_dot(matrices)


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
    return A.clone() if out is A else out  # n = 1: a new tensor, as torch's


def conj_transpose(X) -> Tensor:
    """``X.mH``, resolved (a complex one is no conj view: torch's kernels write it out)."""
    return X.mH.resolve_conj() if X.dtype.is_complex else X.mT


def _argmax(x) -> Tensor:
    """The index of the first largest ``|x|`` along the last dim (of a complex ``x``,
    ``|re| + |im|``, as LAPACK's ``izamax``), kept as a dim of 1 (vmap batches
    ``argmax(-1)`` wrong without ``keepdim``)."""
    size = x.real.abs() + x.imag.abs() if x.dtype.is_complex else x.abs()
    return size.argmax(-1, keepdim=True)


def first_failure(bad) -> Tensor:
    """LAPACK's ``info`` of each matrix: 1 + the index of its first ``bad`` entry (the
    last dim), 0 where none is (int32)."""
    bad = bad.to(dt.int32)
    return ops.where(bad.amax(-1) > 0, _argmax(bad)[..., 0] + 1, 0).to(dt.int32)


def check_info(info, error, what: str, describe) -> None:
    """torch's error for the first matrix whose ``info`` is nonzero, ``what: (Batch element
    k): describe(info)`` (no batch part for one matrix). Without data (a capture, vmap)
    the check is recorded, ``describe(None)`` its message (``eager/checks.py``)."""
    if type(info._payload) is not np.ndarray:
        require(info == 0, error, f"{what}: {describe(None)}")
        return
    flat = info._payload.reshape(-1)
    bad = np.flatnonzero(flat)
    if bad.size:
        batch = f"(Batch element {bad[0]}): " if info.ndim else ""
        raise error(at_user(f"{what}: {batch}{describe(int(flat[bad[0]]))}"))


def cholesky_info(A):
    """The lower factor of ``(A + A.mH) / 2``, one column per step, and torch's ``info``:
    0, or the order of the first leading minor that is not positive-definite (the factor
    is NaN from that column on). A complex factor's diagonal is real, as LAPACK's."""
    n = A.shape[-1]
    a = (A + A.mH) * 0.5
    cols: list[Tensor] = []
    pivots = []
    for j in range(n):
        v = a[..., :, j]
        if j:
            c = ops.stack(cols, -1)
            v = v - (c * c[..., j : j + 1, :].conj()).sum(-1)
        pivot = v[..., j : j + 1]
        if pivot.dtype.is_complex:  # sum |L_jk|^2 off a real diagonal: imaginary part 0
            pivot = pivot.real
        pivots.append(pivot)
        d = pivot.sqrt()
        parts = [zeros(*v.shape[:-1], j, dtype=v.dtype), d.to(v.dtype), v[..., j + 1 :] / d]
        cols.append(ops.cat(parts, -1))
    if not n:
        return A, zeros(*A.shape[:-2], dtype=dt.int32)
    return ops.stack(cols, -1), first_failure(~(ops.cat(pivots, -1) > 0))


def not_positive_definite(order) -> str:
    return (
        "The factorization could not be completed because the input is not "
        f"positive-definite (the leading minor of order {order or 'k'} is not "
        "positive-definite)."
    )


def torch_named(name: str, A: Tensor, *results: Tensor) -> list:
    """``results`` (of a composite of ``A``), the Node each was made by named ``name``, as
    torch's one kernel Node for them all (``LinalgLuBackward0`` ...); a result holding
    ``A``'s own Node (an empty ``A`` returned as it is) keeps it."""
    return [r if r.grad_fn is A.grad_fn else named(r, name) for r in results]


def cholesky(A, *, upper=False) -> Tensor:
    """The lower ``L`` with ``L @ L.mH == A`` (``upper=True``: ``L.mH``), one column per
    step. It factors ``(A + A.mT) / 2`` (``A`` itself when symmetric), so the gradient is
    symmetric, as torch's; a matrix that is not positive-definite raises torch's error,
    eagerly, or from a compiled step when its results are read. Real or complex
    (Hermitian: ``L @ L.mH``) matrices."""
    _square(A, "cholesky")
    _real(A, "cholesky", complex_ok=True)
    L, info = cholesky_info(A)
    check_info(info, LinAlgError, "linalg.cholesky", not_positive_definite)
    (L,) = torch_named("LinalgCholeskyExBackward0", A, conj_transpose(L) if upper else L)
    return L


def solve_triangular(A, B, *, upper, left=True, unitriangular=False) -> Tensor:
    """``X`` with ``A @ X == B`` (``left=False``: ``X @ A == B``) for triangular ``A``,
    by substitution one row at a time (batch dims broadcast); ``unitriangular`` takes
    ``A``'s diagonal as ones. Real or complex matrices."""
    if A.ndim < 2 or B.ndim < 2:
        raise RuntimeError(
            "linalg.solve_triangular: The input tensor "
            f"{'A' if A.ndim < 2 else 'B'} must have at least 2 dimensions."
        )
    if B.dtype is not A.dtype:  # torch's result has A's dtype
        B = B.to(A.dtype)
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
        pk = _argmax(M[..., k:, k]) + k  # the largest pivot, per matrix
        order = ops.where(rows == k, pk, ops.where(rows == pk, k, rows))  # swap rows k, p
        M = M.gather(-2, order.unsqueeze(-1).expand(*M.shape))
        sign = ops.where(pk[..., 0] == k, sign, -sign)
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
    return _solve(A.mH, g)  # A^-H g (complex matrices reach here from eig's gradient)


def _solve_dA(g, A, out):
    return -(_solve(A.mH, g) @ out.mH)


_solve = Fused(
    "linalg_solve",
    _solve_impl,
    _solve_decomposed,
    vjp=(_solve_dA, _solve_dB),
    node_name="LinalgSolveExBackward0",
)


def solve_operands(A, B, what: str):
    """torch's checks of ``solve``'s operands, and ``(A, B as matrices, B a batch of
    vectors?)`` broadcast to one batch: ``B`` is vectors when it is 1-D or has ``A``'s
    shape less its last dim."""
    _square(A, "solve")
    _real(A, what, "lu_cpu", complex_ok=True)
    if A.dtype is not B.dtype:
        raise RuntimeError(
            f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
            f"{A.dtype.title} and B of type {B.dtype.title} instead"
        )
    n = A.shape[-1]
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.shape[-2] != n:
        raise RuntimeError(
            f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
            f"({n}x{n} and {Bm.shape[-2]}x{Bm.shape[-1]})"
        )
    batch = broadcast_shapes(tuple(A.shape[:-2]), tuple(Bm.shape[:-2]))
    return A.expand(*batch, n, n), Bm.expand(*batch, n, Bm.shape[-1]), vector


def solve(A, B, *, left=True) -> Tensor:
    """``X`` with ``A @ X == B`` (``left=False``: ``X @ A == B``); ``B`` is a batch of
    vectors when it is 1-D or has ``A``'s shape less its last dim, as in torch. A
    singular ``A`` raises ``LinAlgError`` (eagerly; a compiled step raises it when its
    results are read)."""
    for position, (name, v) in enumerate((("A", A), ("B", B)), 1):
        if not isinstance(v, Tensor):
            raise TypeError(
                f"linalg_solve(): argument '{name}' (position {position}) must be Tensor, not "
                f"{type_label(v)}"
            )
    if not left:
        return solve(A.mT, B.mT).mT
    A, B, vector = solve_operands(A, B, "solve")
    X = _solve(A, B)
    return X.squeeze(-1) if vector else X


def _singular_diagonal(i) -> str:
    return (
        f"The diagonal element {i or 'i'} is zero, the inversion could not be completed "
        "because the input matrix is singular."
    )


def inv(A) -> Tensor:
    """``A``'s inverse (``solve(A, I)``); a singular ``A`` raises ``LinAlgError``, naming
    the first zero on the diagonal of its LU factor, as torch's."""
    _square(A, "inv")
    _real(A, "inv", complex_ok=True)
    if A.dtype.name in ("float16", "bfloat16"):
        raise RuntimeError(f"linalg.inv: Low precision dtypes not supported. Got {A.dtype.title}")
    n = A.shape[-1]
    try:
        X = solve(A, eye(n, dtype=A.dtype).expand(*A.shape))
    except LinAlgError:
        info = first_failure(_pivots(A)[0] == 0)
        check_info(info, LinAlgError, "linalg.inv", _singular_diagonal)
        raise LinAlgError(  # a pivot LAPACK found zero that the elimination here did not
            at_user(
                "linalg.inv: The inversion could not be completed because the input matrix "
                "is singular."
            )
        ) from None
    return torch_named("LinalgInvExBackward0", A, X)[0]


def _inv_H(A):  # A^-H, for the determinants' gradients (A^-T of a real A)
    n = A.shape[-1]
    return _solve(conj_transpose(A), eye(n, dtype=A.dtype).expand(*A.shape))


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
    vjp=lambda g, A, out: (g * out.conj())[..., None, None] * _inv_H(A),
    node_name="LinalgDetBackward0",
)


def _slogdet_decomposed(A):
    d, sign = _pivots(A)
    phase = d.sgn() if d.dtype.is_complex else d.sign()
    return ops.stack([sign * phase.prod(-1), d.abs().log().sum(-1).to(d.dtype)])


def _slogdet_vjp(g, A, out):
    """torch's: ``(g_logabsdet - i Im(conj(g_sign) sign)) A^-H``; a real sign is piecewise
    constant, a complex one's phase moves with ``A``."""
    scale = g[1]
    if A.dtype.is_complex:
        scale = scale.real - 1j * (g[0].conj() * out[0]).imag
    return scale[..., None, None] * _inv_H(A)


# sign and logabsdet stacked: one LAPACK call (one elimination when decomposed)
_slogdet = Fused(
    "linalg_slogdet",
    lambda A: np.stack(np.linalg.slogdet(A)).astype(A.dtype, copy=False),
    _slogdet_decomposed,
    vjp=_slogdet_vjp,
    node_name="LinalgSlogdetBackward0",
)


# vmap binds the kernels once on the batch (NumPy's LAPACK loops over batch dims)
def _batched(kernel, out_bdim):
    def rule(size, args, bdims, **params):
        return kernel(*(to_batch(a, b, size) for a, b in zip(args, bdims)), **params), out_bdim

    return rule


FUSED_RULES.update(
    {
        "linalg_solve": _batched(_solve, 0),
        "linalg_det": _batched(_det, 0),
        "linalg_slogdet": _batched(_slogdet, 1),  # sign and logabsdet stacked first
    }
)


def det(A) -> Tensor:
    """The determinant; its gradient ``g conj(det(A)) A^-H`` needs an invertible ``A``
    (torch's is finite at singular matrices too: here the backward raises
    ``LinAlgError``). Real or complex matrices."""
    _square(A, "det")
    _real(A, "det", "lu_cpu", complex_ok=True)
    return _det(A)


SlogdetResult = collections.namedtuple(  # type: ignore[name-match]
    "linalg_slogdet", "sign logabsdet", module="staged.return_types"
)


def slogdet(A) -> SlogdetResult:
    """``(sign, logabsdet)``: the determinant's sign (0 for a singular ``A``, with
    logabsdet ``-inf``; of a complex ``A``, ``det / |det|``) and the log of its absolute
    value (real); a real sign's gradient is 0."""
    _square(A, "slogdet")
    _real(A, "slogdet", "lu_cpu", complex_ok=True)
    both = _slogdet(A)
    logabsdet = both[1].real if A.dtype.is_complex else both[1]
    parts = (ops.clone(both[0]), ops.clone(logabsdet))  # (memory of their own)
    return SlogdetResult(*torch_named("LinalgSlogdetBackward0", A, *parts))


# --- torch's top-level names for these: staged.det, Tensor.det ... -------------------------
def _logdet(A) -> Tensor:
    """``log(det(A))``: NaN where a real determinant is negative, -inf where it is 0."""
    sign, logabsdet = slogdet(A)
    if A.dtype.is_complex:
        return sign.log() + logabsdet
    return ops.where(sign == -1, math.nan, logabsdet)


def _cholesky(A, upper=False) -> Tensor:
    """``torch.cholesky``: ``upper`` may be positional."""
    return torch_named("CholeskyBackward0", A, cholesky(A, upper=upper))[0]
