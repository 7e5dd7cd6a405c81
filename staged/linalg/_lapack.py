"""The factorizations of ``staged.linalg`` that run LAPACK eagerly (the SVD, the symmetric
and general eigendecompositions, QR, the pseudoinverse and least squares) and what is
built on them (``matrix_rank``, ``cond``, the 2, -2 and nuclear matrix norms).

Each runs LAPACK (NumPy's) eagerly, as one kernel and one autograd Node (``Fused``, Note
[fused kernels] in ``eager/dispatch.py``) whose backward is torch's formula written in
staged's ops, so it differentiates again. A kernel returns one array, so the factors are
packed side by side along its last dim and sliced back out. Under ``staged.compile``/
capture, forward-mode AD and vmap, QR, ``eigh`` and the SVD (and so ``pinv`` and
``lstsq``) are their compositions in ``_orthogonal.py``, with the same backward (Note
[compiled gradients are torch's formulas]). Real matrices (float32, float64); ``eig`` has
complex results. The SVD, ``eig``, ``pinv`` and ``cond`` (of the SVD's orders) take
complex matrices too. What has no composition (``eig``; the SVD and ``pinv`` of complex
matrices: ``_real_composition``) takes its tangents from torch's JVP formulas under
forward-mode AD, binds LAPACK on the batch under vmap, and raises when captured, naming
the op (``_eager_only``)."""

from __future__ import annotations

import collections
import math
import types

import numpy as np

from .. import dtypes as dt
from .._where import at_user
from ..autodiff import Fused
from ..autodiff.avals import wrap_dim
from ..autodiff.primitive import _bind
from ..autograd import forward_ad
from ..autograd.batching import FUSED_RULES
from ..autograd.function import Function
from ..eager import ops
from ..eager.checks import require
from ..eager.factories import eye, tensor, zeros
from ..eager.interceptor import current_interceptor
from ..eager.ops._operands import broadcast_shapes
from ..eager.ops.reduction import norm as _vector_norm
from ..eager.tensor import Tensor
from ..eager.views import named
from ._composed import deprecated, inv_ex
from ._core import (
    _batched,
    _eager_only,
    _floating,
    _real,
    _real_composition,
    _solve,
    _square,
    solve_triangular,
    vector_norm,
)
from ._orthogonal import jacobi_eigh, jacobi_svd, qr_parts

_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def _pack(*parts, batch) -> np.ndarray:
    """The factors side by side along one last dim (one array for one kernel)."""
    return np.concatenate([p.reshape(*batch, -1) for p in parts], -1)


def _packed(parts, batch) -> Tensor:
    """``_pack`` in staged's ops: a decomposition's result, as its kernel's."""
    return ops.cat([p.reshape(*batch, -1) for p in parts], -1)


def _unpack(t, batch, *shapes) -> list:
    """``_pack``'s factors of shapes ``shapes`` back out of ``t`` (a Tensor)."""
    out, at = [], 0
    for shape in shapes:
        size = math.prod(shape)
        out.append(t[..., at : at + size].reshape(*batch, *shape))
        at += size
    return out


def _own(*parts, name: str | None = None) -> list:
    """``parts`` (``_unpack``'s) in memory of their own, as torch's results are: a view of
    the packed kernel result would keep all of it alive, and ``save`` would write it;
    ``name``: their Nodes named as torch's kernel Node (``LinalgSvdBackward0`` ...)."""
    return [ops.clone(p) if name is None else named(ops.clone(p), name) for p in parts]


# Note [compiled gradients are torch's formulas]: a capture records a kernel's
# composition (``_orthogonal.py``) inside one custom Function whose backward is the
# kernel's VJP rules, torch's formulas, as eagerly: the compiled gradient is eager's and
# costs a few products, not the transpose of every Jacobi rotation (a float32 eigh step
# with its gradient at n = 16: 290 kB in 40 s, through the rotations 700 kB in 250 s).
# Forward AD (which a Function would take from a jvp formula) and vmap outside a capture
# differentiate and batch the composition itself, where there is one (real matrices);
# without one (complex matrices, ``eig``), forward AD binds the kernel inside the same
# Function, its tangents from torch's JVP formula (``_TANGENTS``), and vmap the kernel on
# the batch (``FUSED_RULES``).
_TANGENTS: dict = {}  # kernel name -> fn(tangents, *args, out, **params): out's tangent


class _Formula(Function):
    @staticmethod
    def forward(ctx, kernel, composition, params, *args):
        out = composition(*args, **params)
        ctx.save_for_backward(*args, out)
        ctx.save_for_forward(*args, out)
        ctx.kernel, ctx.params = kernel, params
        return out

    @staticmethod
    def backward(ctx, g):
        *args, out = ctx.saved_tensors
        named = dict(zip(ctx.kernel.inputs, args))
        grads = []
        for rule, needed in zip(ctx.kernel.vjp, ctx.needs_input_grad[3:]):
            if rule is None or not needed:
                grads.append(None)
                continue
            kw = {n: named[n] for n in rule.inputs} | {n: ctx.params[n] for n in rule.static}
            kw |= {n + "_aval": named[n] for n in rule.avals}
            grads.append(rule.fn(g, **(kw | {"out": out} if rule.wants_out else kw)))
        return (None, None, None, *grads)

    @staticmethod
    def jvp(ctx, _kernel, _composition, _params, *tangents):
        *args, out = ctx.saved_tensors
        return _TANGENTS[ctx.kernel.name](tangents, *args, out, **ctx.params)


def _kernel(name, impl, composition, *, vjp, node_name, jvp=None, users=""):
    """A LAPACK kernel (``Fused``) whose decomposition is ``composition`` (None: it has
    none, and raises where it would be needed, naming ``users`` too), captured with the
    kernel's VJP (Note [compiled gradients are torch's formulas]); ``jvp``: torch's JVP
    formula, for forward AD where the composition takes no such operands (``composition``
    None, or real only and a complex first operand)."""
    refuse = _eager_only(name.removeprefix("linalg_"), users)

    def bound(*args, **params):  # the kernel itself, also on dual tensors
        return _bind[0](kernel, args, params)

    def decomposition(*args, **params):
        capturing = current_interceptor() is not None
        if (
            jvp is not None
            and not capturing
            and forward_ad.active()
            and (composition is None or args[0].dtype.is_complex)
        ):
            return _Formula.apply(kernel, bound, params, *args)
        if composition is None:
            return refuse()
        if not capturing or forward_ad.active():
            return composition(*args, **params)
        return _Formula.apply(kernel, composition, params, *args)

    kernel = Fused(name, impl, decomposition, vjp=vjp, node_name=node_name)
    if jvp is not None:
        _TANGENTS[name] = jvp
    return kernel


def _quotient(num, den):
    """``num / den``, and 0 where ``num`` is exactly 0. torch's backward formulas skip the
    terms of outputs that were not used (undefined cotangents); here those cotangents are
    zeros, and a repeated singular value or eigenvalue (``den`` 0) must not make their 0
    terms 0/0. (Its own gradient has no 0/0 either.)"""
    zero = num == 0
    return ops.where(zero, 0.0, num) / ops.where(zero, 1.0, den)


def _matrix(A, what: str) -> None:
    if A.ndim < 2:
        raise RuntimeError(f"linalg.{what}: The input tensor A must have at least 2 dimensions.")


def _no_driver(driver, what: str) -> None:
    if driver is not None:
        raise RuntimeError(
            f"torch.linalg.{what}: keyword argument `driver=` is only supported on CUDA inputs "
            "with cuSOLVER backend."
        )


# --- SVD ----------------------------------------------------------------------------------------
SVDResult = collections.namedtuple("linalg_svd", "U S Vh", module="staged.return_types")  # type: ignore[name-match]
SvdResult = collections.namedtuple("svd", "U S V", module="staged.return_types")  # type: ignore[name-match]  # torch.svd's


def _svd_shapes(m: int, n: int, full_matrices: bool):
    k = min(m, n)
    return (m, m if full_matrices else k), (k,), (n if full_matrices else k, n)


def _svd_impl(A, *, full_matrices):
    U, S, Vh = np.linalg.svd(A, full_matrices=full_matrices)
    return _pack(U, S, Vh, batch=A.shape[:-2])


def svd_backward(gU, gS, gVh, U, S, Vh):
    """torch's ``svd_backward`` (reduced factors): NaN or inf where singular values repeat
    (or, for a non-square ``A``, are 0) and ``U`` or ``Vh`` is used; ``U @ diag(gS) @ Vh``
    where neither is. Complex factors: a loss that depends on the singular vectors'
    phases raises, as torch's."""
    m, n, k = U.shape[-2], Vh.shape[-1], S.shape[-1]
    UhgU, VhgV = U.mH @ gU, Vh @ gVh.mH
    UhgU, VhgV = UhgU - UhgU.mH, VhgV - VhgV.mH
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye(k, dtype=S.dtype)
    gA = _quotient(UhgU * S.unsqueeze(-2) + S.unsqueeze(-1) * VhgV, E) + ops.diag_embed(gS)
    if U.dtype.is_complex:
        im_u, im_v = UhgU.diagonal(0, -2, -1).imag, VhgV.diagonal(0, -2, -1).imag
        require(
            (im_u + im_v).abs() <= 1e-2 + 1e-2 * im_v.abs(),
            RuntimeError,
            "svd_backward: The singular vectors in the complex case are specified up to "
            "multiplication by e^{i phi}. The specified loss function depends on this phase "
            "term, making it ill-defined.",
        )
        gA = gA + ops.diag_embed(_quotient(im_u, 2 * S) * 1j)
    if m > n:
        gUSinv = _quotient(gU, S.unsqueeze(-2))
        return (U @ gA + gUSinv - U @ (U.mH @ gUSinv)) @ Vh
    if m < n:
        SinvgVh = _quotient(gVh, S.unsqueeze(-1))
        return U @ (gA @ Vh + SinvgVh - (SinvgVh @ Vh.mH) @ Vh)
    return U @ (gA @ Vh)


def _svd_vjp(g, A_aval, out, full_matrices):
    *batch, m, n = A_aval.shape
    shapes = _svd_shapes(m, n, full_matrices)
    U, S, Vh = _unpack(out, batch, *shapes)
    gU, gS, gVh = _unpack(g, batch, *shapes)
    if S.dtype.is_complex:  # packed with complex factors: S and its cotangent are real
        S, gS = S.real, gS.real
    k = min(m, n)  # torch: the columns full_matrices adds have no gradient
    return svd_backward(gU[..., :k], gS, gVh[..., :k, :], U[..., :k], S, Vh[..., :k, :])


def _svd_jvp(tangents, A, out, full_matrices):
    """torch's ``linalg_svd_jvp``: with ``dP = U^H dA V``, ``dS = Re diag(dP)``, ``dU = U
    (sym(dP S) / E + i Im diag(dP) / 2S)`` and ``dVh = (-sym(S dP) / E + i Im diag(dP) /
    2S) Vh`` (``E_ij = S_j^2 - S_i^2``, ``sym(X) = X + X^H``), plus the parts outside the
    reduced factors' spans; the columns ``full_matrices`` adds have tangent 0."""
    dA = tangents[0]
    *batch, m, n = A.shape
    k = min(m, n)
    U, S, Vh = _unpack(out, batch, *_svd_shapes(m, n, full_matrices))
    U, Vh, S = U[..., :k], Vh[..., :k, :], S.real
    V = Vh.mH
    dP = U.mH @ dA @ V
    dS = dP.diagonal(0, -2, -1).real
    dP = dP - ops.diag_embed(dS.to(dP.dtype))
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye(k, dtype=S.dtype)
    inner = ops.diag_embed(dP.diagonal(0, -2, -1) / (2 * S).to(dP.dtype))
    rows, cols = S.unsqueeze(-1).to(dP.dtype), S.unsqueeze(-2).to(dP.dtype)
    dPS, SdP = dP * cols, rows * dP
    dU = U @ ((dPS + dPS.mH) / E.to(dP.dtype) + inner)
    dVh = (inner - (SdP + SdP.mH) / E.to(dP.dtype)) @ Vh
    if m > k:
        dAVSinv = dA @ (V / cols)
        dU = dU + dAVSinv - U @ (U.mH @ dAVSinv)
        if full_matrices:
            dU = ops.cat([dU, zeros(*batch, m, m - k, dtype=dU.dtype)], -1)
    if n > k:
        SinvUhdA = (U.mH / rows) @ dA
        dVh = dVh + SinvUhdA - (SinvUhdA @ V) @ Vh
        if full_matrices:
            dVh = ops.cat([dVh, zeros(*batch, n - k, n, dtype=dVh.dtype)], -2)
    return _packed([dU, dS.to(dU.dtype), dVh], batch)


_svd = _kernel(
    "linalg_svd",
    _svd_impl,
    _real_composition(
        "svd", lambda A, *, full_matrices: _packed(jacobi_svd(A, full_matrices), A.shape[:-2])
    ),
    vjp=_svd_vjp,
    node_name="LinalgSvdBackward0",
    jvp=_svd_jvp,
)


def svd(A, full_matrices=True, *, driver=None) -> SVDResult:
    """``(U, S, Vh)`` with ``A == U @ diag(S) @ Vh``, ``S`` descending (``full_matrices``:
    square ``U`` and ``Vh``). LAPACK eagerly (one-sided Jacobi elsewhere); the gradient is
    torch's, ill-defined (NaN or inf) where singular values repeat and ``U`` or ``Vh`` is
    used. Real or complex matrices (``S`` real; complex ones not captured)."""
    _matrix(A, "svd")
    _real(A, "svd", "linalg_svd_cpu", complex_ok=True)
    _no_driver(driver, "svd")
    *batch, m, n = A.shape
    shapes = _svd_shapes(m, n, full_matrices)
    U, S, Vh = _unpack(_svd(A, full_matrices=full_matrices), batch, *shapes)
    return SVDResult(*_own(U, S.real if S.dtype.is_complex else S, Vh, name=_svd.node_name))


_svdvals = Fused(
    "linalg_svdvals",
    lambda A: np.linalg.svd(A, compute_uv=False),
    lambda A: svd(A, full_matrices=False).S,  # for a gradient (svd's Node) or a trace
)


def svdvals(A, *, driver=None) -> Tensor:
    """The singular values, descending, real (also of a complex ``A``, not captured). Its
    gradient is ``U @ diag(g) @ Vh``, finite also where they repeat."""
    _matrix(A, "svd")
    _real(A, "svd", "linalg_svd_cpu", complex_ok=True)
    _no_driver(driver, "svd")
    return named(_svdvals(A), "LinalgSvdBackward0")


# --- symmetric eigendecomposition ---------------------------------------------------------------
EighResult = collections.namedtuple(  # type: ignore[name-match]
    "linalg_eigh", "eigenvalues eigenvectors", module="staged.return_types"
)


def _uplo(UPLO) -> None:
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def _eigh_vjp(g, A_aval, out, UPLO):
    *batch, n, _ = A_aval.shape
    L, V = _unpack(out, batch, (n,), (n, n))
    gL, gV = _unpack(g, batch, (n,), (n, n))
    VhgV = V.mT @ gV
    E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye(n, dtype=L.dtype)
    gA = _quotient((VhgV - VhgV.mT) * 0.5, E) + ops.diag_embed(gL)
    return V @ (gA @ V.mT)


_eigh = _kernel(
    "linalg_eigh",
    lambda A, *, UPLO: _pack(*np.linalg.eigh(A, UPLO=UPLO), batch=A.shape[:-2]),
    lambda A, *, UPLO: _packed(jacobi_eigh(A, UPLO), A.shape[:-2]),
    vjp=_eigh_vjp,
    node_name="LinalgEighBackward0",
)


def eigh(A, UPLO="L") -> EighResult:
    """``(eigenvalues, eigenvectors)`` of symmetric matrices, ascending, read from the
    ``UPLO`` triangle. LAPACK eagerly (Jacobi elsewhere); the gradient is torch's
    (ill-defined where eigenvalues repeat and the eigenvectors are used). Real matrices."""
    _matrix(A, "eigh")
    _square(A, "eigh")
    _real(A, "eigh", "linalg_eigh_cpu")
    _uplo(UPLO)
    *batch, n, _ = A.shape
    parts = _unpack(_eigh(A, UPLO=UPLO), batch, (n,), (n, n))
    return EighResult(*_own(*parts, name=_eigh.node_name))


_eigvalsh = Fused(
    "linalg_eigvalsh",
    lambda A, *, UPLO: np.linalg.eigvalsh(A, UPLO=UPLO),
    lambda A, *, UPLO: eigh(A, UPLO).eigenvalues,
)


def eigvalsh(A, UPLO="L") -> Tensor:
    """The eigenvalues of symmetric matrices, ascending (gradient ``V @ diag(g) @ V^T``)."""
    _matrix(A, "eigh")
    _square(A, "eigvalsh")
    _real(A, "eigvalsh", "linalg_eigh_cpu")
    _uplo(UPLO)
    return named(_eigvalsh(A, UPLO=UPLO), "LinalgEighBackward0")


# --- general eigendecomposition (complex results) ---------------------------------------------
EigResult = collections.namedtuple(  # type: ignore[name-match]
    "linalg_eig", "eigenvalues eigenvectors", module="staged.return_types"
)


def _complex(a: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``a`` complex, of ``A``'s precision (NumPy's ``eig`` is real where it can be)."""
    return a.astype(np.result_type(A.dtype, np.complex64), copy=False)


def _eig_impl(A):
    return _complex(_pack(*np.linalg.eig(A), batch=A.shape[:-2]), A)


def _eig_vjp(g, A_aval, out):
    *batch, n, _ = A_aval.shape
    L, V = _unpack(out, batch, (n,), (n, n))
    gL, gV = _unpack(g, batch, (n,), (n, n))
    VhgV = V.mH @ gV
    diagonal = VhgV.diagonal(0, -2, -1)
    require(
        diagonal.imag.abs() <= 1e-2,
        RuntimeError,
        "linalg_eig_backward: The eigenvectors in the complex case are specified up to "
        "multiplication by e^{i phi}. The specified loss function depends on this quantity, "
        "so it is ill-defined.",
    )
    VhgV = VhgV - V.mH @ (V * diagonal.real.unsqueeze(-2))
    Lc = L.conj()
    gA = _quotient(VhgV, Lc.unsqueeze(-2) - Lc.unsqueeze(-1) + eye(n, dtype=L.dtype))
    gA = gA - ops.diag_embed(gA.diagonal(0, -2, -1)) + ops.diag_embed(gL)
    gA = _solve(V.mH, gA @ V.mH)
    return gA if A_aval.dtype.is_complex else gA.real


def _eig_jvp(tangents, A, out):
    """torch's ``linalg_eig_jvp``: with ``dP = V^-1 dA V``, ``dL = diag(dP)`` and ``dV = X
    - V Re(diag(V^H X))`` for ``X = V (dP / E)`` (``E_ij = L_j - L_i``, the diagonal
    quotient 0), which keeps the eigenvectors' norms 1."""
    *batch, n, _ = A.shape
    L, V = _unpack(out, batch, (n,), (n, n))
    dP = _solve(V, tangents[0].to(V.dtype) @ V)
    E = L.unsqueeze(-2) - L.unsqueeze(-1)
    off = ~eye(n, dtype=dt.bool_)
    X = V @ ops.where(off, dP / ops.where(off, E, 1.0), 0.0)
    dV = X - V * (V.mH @ X).diagonal(0, -2, -1).real.to(V.dtype).unsqueeze(-2)
    return _packed([dP.diagonal(0, -2, -1), dV], batch)


_eig = _kernel(
    "linalg_eig",
    _eig_impl,
    None,
    vjp=_eig_vjp,
    node_name="LinalgEigBackward0",
    jvp=_eig_jvp,
    users=" (and eigvals)",
)


def eig(A) -> EigResult:
    """``(eigenvalues, eigenvectors)`` of square matrices, complex (complex64 for
    float32), eigenvectors of norm 1. LAPACK, also under forward-mode AD and vmap (not
    captured); the gradient and tangents are torch's (the gradient real for a real ``A``;
    a loss that depends on the eigenvectors' phases raises). Real or complex matrices."""
    _matrix(A, "eig")
    _square(A, "eig")
    _real(A, "eig", "linalg_eig_out_cpu", complex_ok=True)
    *batch, n, _ = A.shape
    return EigResult(*_own(*_unpack(_eig(A), batch, (n,), (n, n)), name=_eig.node_name))


_eigvals = Fused(
    "linalg_eigvals",
    lambda A: _complex(np.linalg.eigvals(A), A),
    lambda A: eig(A).eigenvalues,
)


def eigvals(A) -> Tensor:
    """The eigenvalues of square matrices, complex."""
    _matrix(A, "eigvals")
    _square(A, "eigvals")
    _real(A, "eigvals", "linalg_eig_out_cpu", complex_ok=True)
    return named(_eigvals(A), "LinalgEigBackward0")


# --- QR -----------------------------------------------------------------------------------------
QRResult = collections.namedtuple("linalg_qr", "Q R", module="staged.return_types")  # type: ignore[name-match]


def _qr_shapes(m: int, n: int, mode: str):
    k = min(m, n)
    if mode == "r":
        return ((k, n),)
    return ((m, m), (m, n)) if mode == "complete" else ((m, k), (k, n))


def _qr_impl(A, *, mode):
    parts = np.linalg.qr(A, mode=mode)
    return _pack(*((parts,) if mode == "r" else parts), batch=A.shape[:-2])


def qr_backward(gQ, gR, Q, R):
    """torch's ``linalg_qr_backward`` (real matrices; reduced factors, or square ``Q``)."""
    m, n = Q.shape[-2], R.shape[-1]
    gA = gR @ R.mT - Q.mT @ gQ
    if m >= n:
        X = gA.triu()
        gA = Q @ (X + X.mT - ops.diag_embed(X.diagonal(0, -2, -1))) + gQ
        return solve_triangular(R.mT, gA, upper=False, left=False)
    gA = solve_triangular(R[..., :m].mT, Q @ (gA.mT - gA).tril(), upper=False, left=False)
    return ops.cat([gA, zeros(*gA.shape[:-1], n - m, dtype=gA.dtype)], -1) + Q @ gR


def _qr_vjp(g, A_aval, out, mode):
    *batch, m, n = A_aval.shape
    if mode == "r":
        raise RuntimeError(
            "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
            "Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
            "through linalg.qr."
        )
    if mode == "complete" and m > n:
        raise RuntimeError(
            "The QR decomposition is not differentiable when mode='complete' and nrows > ncols."
        )
    shapes = _qr_shapes(m, n, mode)
    Q, R = _unpack(out, batch, *shapes)
    gQ, gR = _unpack(g, batch, *shapes)
    return qr_backward(gQ, gR, Q, R)


_qr = _kernel(
    "linalg_qr",
    _qr_impl,
    lambda A, *, mode: _packed(qr_parts(A, mode), A.shape[:-2]),
    vjp=_qr_vjp,
    node_name="LinalgQrBackward0",
)


def qr(A, mode="reduced") -> QRResult:
    """``(Q, R)`` with ``A == Q @ R``, ``Q`` orthonormal columns, ``R`` upper triangular:
    ``mode`` ``'reduced'`` (``k = min(m, n)`` columns), ``'complete'`` (square ``Q``) or
    ``'r'`` (``Q`` empty). LAPACK eagerly (Householder reflections elsewhere, with
    LAPACK's signs); torch's gradient. Real matrices."""
    _matrix(A, "qr")
    _real(A, "qr", "geqrf_cpu")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(
            f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
            "'r', or 'complete'"
        )
    *batch, m, n = A.shape
    parts = _own(*_unpack(_qr(A, mode=mode), batch, *_qr_shapes(m, n, mode)), name=_qr.node_name)
    if mode == "r":
        return QRResult(zeros(0, dtype=A.dtype), parts[0])
    return QRResult(*parts)


# --- pseudoinverse, least squares, rank ---------------------------------------------------------
def _tolerances(A, atol, rtol, what: str):
    """torch's ``(atol, rtol)`` as float64 tensors: ``rtol`` defaults to ``eps * max(m, n)``,
    and to 0 where a positive ``atol`` is given."""

    def as_tensor(x, name):
        if isinstance(x, Tensor):
            if x.dtype.is_complex:
                raise RuntimeError(f"{what}: {name} tensor of complex type is not supported.")
            return x.detach().to(dt.float64)
        return tensor(float(x), dtype=dt.float64)

    default = dt.finfo(A.dtype).eps * max(A.shape[-2], A.shape[-1])
    a = as_tensor(0.0 if atol is None else atol, "atol")
    if rtol is not None:
        return a, as_tensor(rtol, "rtol")
    return a, (
        tensor(default, dtype=dt.float64) if atol is None else ops.where(a > 0, 0.0, default)
    )


# pinv's and lstsq's bodies, over LAPACK (NumPy) eagerly and staged's ops elsewhere
_NUMPY = types.SimpleNamespace(
    eigh=np.linalg.eigh,
    svd=lambda A: np.linalg.svd(A, full_matrices=False),
    where=np.where,
    maximum=np.maximum,
    top=lambda x: x.max(-1, initial=0, keepdims=True),
    cast=lambda x, like: x.astype(like.dtype, copy=False),
    float64=lambda x: np.asarray(x, np.float64),
    mH=lambda x: np.conj(x.mT),
)
_OPS = types.SimpleNamespace(
    eigh=jacobi_eigh,
    svd=lambda A: jacobi_svd(A, False),
    where=ops.where,
    maximum=ops.maximum,
    top=lambda x: ops.cat([zeros(*x.shape[:-1], 1, dtype=x.dtype), x], -1).amax(-1, keepdim=True),
    cast=lambda x, like: x.to(like.dtype),
    float64=lambda x: tensor(x, dtype=dt.float64),
    mH=lambda x: x.mH,
)


def _reciprocal(xp, S, atol, rtol, top):
    """``1 / S`` where ``|S|`` is above ``max(atol, rtol * top)`` (float64 tolerances),
    else 0."""
    big = abs(S) > xp.maximum(atol[..., None], rtol[..., None] * top)
    return xp.cast(xp.where(big, 1 / xp.where(big, S, 1), 0), S), big


def _pinv_of(xp, A, atol, rtol, hermitian):
    if hermitian:
        L, V = xp.eigh(A)
        inv = _reciprocal(xp, L, atol, rtol, xp.top(abs(L)))[0]
        return (V * inv[..., None, :]) @ xp.mH(V)
    U, S, Vh = xp.svd(A)
    inv = _reciprocal(xp, S, atol, rtol, S[..., :1])[0]
    return (xp.mH(Vh) * inv[..., None, :]) @ xp.mH(U)


def pinv_backward(g, pinvA, A):
    """torch's ``pinv_backward``."""
    m, n = A.shape[-2], A.shape[-1]
    pinvAh, gh = pinvA.mH, g.mH
    if m <= n:
        K = gh @ pinvA
        KpinvAh = K @ pinvAh
        return -(pinvA @ K).mH + KpinvAh - (A @ pinvA) @ KpinvAh + (pinvAh @ pinvA) @ (gh - K @ A)
    K = pinvA @ gh
    pinvAhK = pinvAh @ K
    return -(K @ pinvA).mH + (gh - A @ K) @ pinvA @ pinvAh + pinvAhK - pinvAhK @ pinvA @ A


def _pinv_jvp(tangents, A, atol, rtol, out, hermitian):
    """The pseudoinverse's derivative (torch's ``pinv_jvp``, where the rank is constant):
    ``-P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P`` of ``P = pinv(A)``."""
    dA, P = tangents[0], out
    dAh, Ph = dA.mH, out.mH
    return -(P @ dA @ P) + (P @ Ph) @ (dAh - dAh @ (A @ P)) + (dAh - (P @ A) @ dAh) @ (Ph @ P)


_pinv = _kernel(
    "linalg_pinv",
    lambda A, atol, rtol, *, hermitian: _pinv_of(_NUMPY, A, atol, rtol, hermitian),
    _real_composition(
        "pinv", lambda A, atol, rtol, *, hermitian: _pinv_of(_OPS, A, atol, rtol, hermitian)
    ),
    vjp=(lambda g, A, out: pinv_backward(g, out, A), None, None),
    node_name="LinalgPinvBackward0",
    jvp=_pinv_jvp,
)


# vmap binds the kernels once on the batch (NumPy's LAPACK loops over batch dims)
FUSED_RULES.update({k.name: _batched(k, 0) for k in (_svd, _svdvals, _eig, _eigvals, _pinv)})


def pinv(A, *, atol=None, rtol=None, hermitian=False) -> Tensor:
    """The Moore-Penrose pseudoinverse: singular values (``hermitian``: ``|eigenvalues|`` of
    the lower triangle) at most ``max(atol, rtol * largest)`` count as 0; ``rtol``
    defaults to ``eps * max(m, n)``, or 0 where ``atol > 0`` is given. ``atol``/``rtol``
    may be tensors over the batch. torch's gradient. Real or complex matrices (complex ones
    not captured)."""
    if A.ndim < 2:
        raise RuntimeError(
            f"linalg.pinv({A.dtype.title}{{{list(A.shape)}}}): expected a tensor with 2 or more "
            "dimensions of float, double, cfloat or cdouble types"
        )
    _real(A, "pinv", "linalg_svd_cpu", complex_ok=True)
    a, r = _tolerances(A, atol, rtol, "torch.linalg.pinv")
    return _pinv(A, a, r, hermitian=hermitian)


LstsqResult = collections.namedtuple(  # type: ignore[name-match]
    "linalg_lstsq", "solution residuals rank singular_values", module="staged.return_types"
)
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lstsq_of(xp, A, B, rcond, pack):
    U, S, Vh = xp.svd(A)
    inv, big = _reciprocal(xp, S, xp.float64(0.0), xp.float64(rcond), S[..., :1])
    X = Vh.mT @ (inv[..., :, None] * (U.mT @ B))
    r = A @ X - B
    return pack([X, (r * r).sum(-2), xp.cast(big.sum(-1), A), S], A.shape[:-2])


def _lstsq_parts(t, A_shape, k: int):
    *batch, m, n = A_shape
    return _unpack(t, batch, (n, k), (k,), (), (min(m, n),))


def _lstsq_dA(g, A, B, out):
    gX, gL, _, _ = _lstsq_parts(g, A.shape, B.shape[-1])
    X = _lstsq_parts(out, A.shape, B.shape[-1])[0]
    grad = pinv_backward(gX @ B.mT, pinv(A), A)
    return grad + 2 * (gL.unsqueeze(-2) * (A @ X - B)) @ X.mT


def _lstsq_dB(g, A, B, out):
    gX, gL, _, _ = _lstsq_parts(g, A.shape, B.shape[-1])
    X = _lstsq_parts(out, A.shape, B.shape[-1])[0]
    return pinv(A).mT @ gX - 2 * gL.unsqueeze(-2) * (A @ X - B)


_lstsq = _kernel(
    "linalg_lstsq",
    lambda A, B, *, rcond: _lstsq_of(_NUMPY, A, B, rcond, lambda p, b: _pack(*p, batch=b)),
    lambda A, B, *, rcond: _lstsq_of(_OPS, A, B, rcond, _packed),
    vjp=(_lstsq_dA, _lstsq_dB),
    node_name="LinalgLstsqBackward0",
)


def _full_rank(rank, n: int, driver: str) -> bool:
    """Whether every matrix has rank ``n``: it decides whether ``residuals`` are given,
    which only data can."""
    if type(rank._payload) is not np.ndarray:
        raise NotImplementedError(
            at_user(
                f"linalg.lstsq: driver='{driver}' gives residuals only where every matrix has "
                "full rank, which a compiled step or transform cannot know; use driver='gels' "
                "(residuals always) or 'gelsy' (none) there"
            )
        )
    return bool((rank == n).all())


def lstsq(A, B, rcond=None, *, driver=None) -> LstsqResult:
    """The least-squares (minimum-norm) ``X`` of ``A @ X ~ B`` and torch's other results:
    ``residuals`` (the squared residual norms, where ``m > n``, every matrix has full rank
    and the driver is not ``'gelsy'``), ``rank`` and ``singular_values`` (for
    ``'gelsd'``/``'gelss'``), empty where the driver does not give them. Every driver
    solves by LAPACK's SVD (``gelsd``'s method: singular values at most ``rcond *
    largest`` count as 0; ``rcond`` defaults to ``eps * max(m, n)``), which is the same
    solution where ``A`` has full rank. Gradients of the solution and the residuals are
    torch's. Real matrices."""
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if B.ndim < 1:
        raise RuntimeError("torch.linalg.lstsq: other must have at least 1 dimension.")
    if A.dtype is not B.dtype:
        raise RuntimeError(
            "torch.linalg.lstsq: Expected input and other to have the same dtype, but got "
            f"input's dtype {A.dtype.title} and other's dtype {B.dtype.title}"
        )
    _real(A, "lstsq", "linalg_lstsq")
    if not 0 <= A.ndim - B.ndim <= 1:
        raise RuntimeError(
            "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
            "(input.dim() - other.dim()) <= 1"
        )
    driver = "gelsy" if driver is None else driver
    if driver not in _DRIVERS:
        raise RuntimeError(
            "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)"
        )
    vector = A.ndim - B.ndim == 1
    Bm = B.unsqueeze(-1) if vector else B
    *_, m, n = A.shape
    if Bm.shape[-2] != m:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    batch = broadcast_shapes(tuple(A.shape[:-2]), tuple(Bm.shape[:-2]))
    A, Bm = A.expand(*batch, m, n), Bm.expand(*batch, m, Bm.shape[-1])
    rcond = dt.finfo(A.dtype).eps * max(m, n) if rcond is None else rcond
    X, residuals, rank, S = _lstsq_parts(_lstsq(A, Bm, rcond=rcond), A.shape, Bm.shape[-1])
    rank = rank.detach().to(dt.int64)
    full = m > n and driver != "gelsy" and (driver == "gels" or _full_rank(rank, n, driver))
    empty = zeros(0, dtype=A.dtype)
    X, residuals, S = _own(X, residuals, S, name="LinalgLstsqBackward0")
    return LstsqResult(
        X.squeeze(-1) if vector else X,
        residuals if full else empty,
        zeros(0, dtype=dt.int64) if driver == "gels" else rank,
        S.detach() if driver in ("gelsd", "gelss") else empty,
    )


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None) -> Tensor:
    """How many singular values (``hermitian``: ``|eigenvalues|``) exceed ``max(atol, rtol
    * largest)`` (tolerances as ``pinv``'s; a positional ``tol`` is ``atol`` with ``rtol``
    0, NumPy's), int64."""
    if A.ndim < 2:
        raise RuntimeError(
            "torch.linalg.matrix_rank: The input tensor input must have at least 2 dimensions."
        )
    if tol is not None:
        atol, rtol = tol, 0.0
    A = A.detach()
    S = eigvalsh(A).abs() if hermitian else svdvals(A)
    a, r = _tolerances(A, atol, rtol, "torch.linalg.matrix_rank")
    top = S.amax(-1, keepdim=True) if S.shape[-1] else zeros(*S.shape[:-1], 1, dtype=S.dtype)
    return (S > ops.maximum(a.unsqueeze(-1), r.unsqueeze(-1) * top)).sum(-1)


# --- norms and condition numbers --------------------------------------------------------------
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None) -> Tensor:
    """The ``ord``-norm of the matrices over ``dim``: ``"fro"``, ``"nuc"`` (the sum of the
    singular values), 2 / -2 (the largest / smallest), 1 / -1 (largest / smallest column
    sum of ``|A|``) or ``inf`` / ``-inf`` (row sums)."""
    if ord not in _MATRIX_ORDS:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if A.ndim < 2:
        raise RuntimeError(
            "linalg.matrix_norm: The input tensor A must have at least 2 dimensions."
        )
    A = _floating(A, "matrix_norm", low_precision=ord not in ("nuc", 2, -2))
    if len(dim) != 2:
        raise RuntimeError(
            f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dim))}"
        )
    dim = tuple(wrap_dim(d, A.ndim) for d in dim)
    if dim[0] == dim[1]:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got {dim}")
    A = _floating(A, "matrix_norm", dtype)
    if ord == "fro":
        return _vector_norm(A, 2.0, dim, keepdim)
    if ord in ("nuc", 2, -2):
        S = svdvals(A.movedim(dim, (-2, -1)))
        out = S.sum(-1) if ord == "nuc" else S.amax(-1) if ord == 2 else S.amin(-1)
        return out.unsqueeze(min(dim)).unsqueeze(max(dim)) if keepdim else out
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


def cond(A, p=None) -> Tensor:
    """The condition number in the ``p``-norm: ``None``/2 (-2) the ratio of the largest and
    smallest (smallest and largest) singular values, ``'nuc'`` the product of their sum
    and their reciprocals' sum; ``'fro'``, 1, -1, inf and -inf ``matrix_norm(A, p) *
    matrix_norm(inv(A), p)`` of square matrices, inf where ``A`` is singular. Real or
    complex matrices (complex ones not captured for the SVD's ``p``)."""
    if A.ndim < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    if p not in (None, *_MATRIX_ORDS):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    if p in (None, 2, -2):
        S = svdvals(A)
        return S[..., -1] / S[..., 0] if p == -2 else S[..., 0] / S[..., -1]
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(
            f"linalg.cond(ord={p}): A must be batches of square matrices, but they are "
            f"{A.shape[-2]} by {A.shape[-1]} matrices"
        )
    if p == "nuc":  # torch's: sum(S) * sum(1 / S), of the singular values
        S = svdvals(A)
        return S.sum(-1) * S.reciprocal().sum(-1)
    inverse, info = inv_ex(A)
    inverse = ops.where((info > 0)[..., None, None], math.inf, inverse)
    out = matrix_norm(A, p) * matrix_norm(inverse, p)
    return ops.nan_to_num(out, math.inf, math.inf, -math.inf)  # torch's 0 * inf


# --- torch's top-level forms ----------------------------------------------------------------------
def _torch_norm(input, p="fro", dim=None, keepdim=False, *, dtype=None) -> Tensor:
    """``torch.norm``: ``vector_norm`` for a number ``p`` (None: 2) and for ``"fro"`` over
    at most two dims, else ``matrix_norm`` (``"nuc"``) over ``dim``, every dim by default."""
    dims = [dim] if isinstance(dim, int) else dim
    if not isinstance(p, str):
        return vector_norm(input, 2.0 if p is None else p, dims, keepdim, dtype=dtype)
    if p == "fro" and (dims is None or len(dims) <= 2):
        return vector_norm(input, 2, dims, keepdim, dtype=dtype)
    every = list(range(input.ndim)) if dims is None else dims
    return matrix_norm(input, p, every, keepdim, dtype=dtype)


def _torch_svd(input, some=True, compute_uv=True) -> SvdResult:
    """``torch.svd``: ``V``, not ``Vh``; ``some=False`` gives square factors;
    ``compute_uv=False`` zero-filled ``U`` and ``V`` of shapes ``(m, m)`` and ``(n, n)``."""
    if not compute_uv:
        *batch, m, n = input.shape
        S = svdvals(input)
        return SvdResult(zeros(*batch, m, m, dtype=S.dtype), S, zeros(*batch, n, n, dtype=S.dtype))
    U, S, Vh = svd(input, full_matrices=not some)
    return SvdResult(U, S, Vh.mT)


def _torch_qr(input, some=True) -> QRResult:
    """``torch.qr`` (deprecated there, with its warning): ``some=False`` is
    ``mode='complete'``."""
    deprecated(
        "qr",
        "qr",
        "The boolean parameter 'some' has been replaced with a string parameter 'mode'.\nQ, R = "
        "torch.qr(A, some)\nshould be replaced with\nQ, R = torch.linalg.qr(A, 'reduced' if "
        "some else 'complete')",
    )
    return qr(input, "reduced" if some else "complete")


TriangularSolveResult = collections.namedtuple(  # type: ignore[name-match]
    "triangular_solve", "solution cloned_coefficient", module="staged.return_types"
)


def _triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """``torch.triangular_solve`` (deprecated there, with its warning): X with ``A X = b``
    (``transpose``: ``A^T X = b``), and a copy of ``A``."""
    deprecated(
        "triangular_solve",
        "solve_triangular",
        "torch.linalg.solve_triangular has its arguments reversed and does not return a copy of "
        "one of the inputs.\nX = torch.triangular_solve(B, A).solution\nshould be replaced "
        "with\nX = torch.linalg.solve_triangular(A, B).",
    )
    M = A.mT if transpose else A
    X = solve_triangular(M, b, upper=upper != transpose, unitriangular=unitriangular)
    return TriangularSolveResult(X, A.clone())


def _frobenius_norm(input, dim, keepdim=False) -> Tensor:
    """``torch.frobenius_norm``: the 2-norm over ``dim`` (one or two dims)."""
    return vector_norm(input, 2, dim, keepdim)


def _nuclear_norm(input, dim=None, keepdim=False) -> Tensor:
    """``torch.nuclear_norm``: the sum of singular values over ``dim`` (the last two
    without it; ``nuclear_norm(x, True)`` keeps them, as torch's overload)."""
    if dim is None or isinstance(dim, bool):
        keepdim, dim = keepdim if dim is None else dim, (-2, -1)
    return matrix_norm(input, "nuc", dim, keepdim)


def _pinverse(input, rcond=1e-15) -> Tensor:
    """``torch.pinverse``: ``pinv`` with ``rtol=rcond``."""
    return pinv(input, rtol=rcond)
