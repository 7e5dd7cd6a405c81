"""``torch.nn.utils.parametrizations``: orthogonal weights, weight and spectral
normalisation registered as parametrizations (``module.parametrizations.weight``), so the
weight is recomputed, with its gradient, on every access."""

from __future__ import annotations

from enum import Enum, auto

from ...dtypes import finfo
from ...eager.factories import eye, randn, zeros_like
from ...eager.grad_mode import no_grad
from ...eager.ops.composite import allclose
from ...eager.ops.shape import cat
from ...eager.tensor import Tensor
from ...linalg import householder_product, matrix_exp, qr, solve
from ...linalg._orthogonal import geqrf
from .. import functional as F
from ..module import Module
from . import parametrize
from .spectral_norm import _default_dim
from .weight_norm import _weight_norm, norm_except_dim

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def _is_orthogonal(Q) -> bool:
    """Whether the tall ``Q``'s columns are orthonormal, to torch's tolerance."""
    n, k = Q.size(-2), Q.size(-1)
    return allclose(Q.mH @ Q, eye(k, dtype=Q.dtype), atol=10.0 * n * finfo(Q.dtype).eps)


def _make_orthogonal(A):
    """The ``Q`` of the tall ``A``'s QR, its columns signed so that ``diag(R) >= 0``."""
    Q, R = qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    """torch's orthogonal parametrization: ``forward`` maps a matrix (a batch of them) to an
    orthogonal one, of the transpose where it is wide; with a ``base`` (the dynamic
    trivialization) the result is ``base @ Q``, and assigning a matrix stores it (made
    orthogonal) as ``base``."""

    base: Tensor

    def __init__(self, weight, orthogonal_map: _OrthMaps, *, use_trivialization=True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map == _OrthMaps.householder:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            # the diagonal of X (1s and -1s) signs the columns, not differentiated
            Q = householder_product(A, tau) * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        else:
            X = X.tril()
            if n != k:  # embedded in a square matrix
                X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH  # skew-symmetric (skew-hermitian)
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = matrix_exp(A)
            else:  # the Cayley map (I + A/2)(I - A/2)^{-1}
                Id = eye(n, dtype=A.dtype)
                Q = solve(Id.add(A, alpha=-0.5), Id.add(A, alpha=0.5))
            Q = Q[..., :k]
        if hasattr(self, "base"):
            Q = self.base @ Q
        return Q.mT if transposed else Q

    @no_grad()
    def right_inverse(self, Q):
        if Q.shape != self.shape:
            raise ValueError(
                f"Expected a matrix or batch of matrices of shape {self.shape}. "
                f"Got a tensor of shape {Q.shape}."
            )
        Q_init = Q
        n, k = Q.size(-2), Q.size(-1)
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map != _OrthMaps.householder:
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential "
                    "or the Cayley parametrizations when use_trivialization=False."
                )
            # LAPACK's geqrf of Q, its diagonal the signs of diag(R) (negated where LAPACK
            # leaves a column: f), which forward reads
            V, _, R, f = geqrf(Q)
            A = V.tril(-1)
            A[..., :k, :] += R.triu(1)
            A.diagonal(dim1=-2, dim2=-1).copy_(R.diagonal(dim1=-2, dim2=-1).sign() * f)
            return A.mT if transpose else A
        if n != k:  # completed to a square orthogonal matrix
            N = randn(*(Q.size()[:-2] + (n, n - k)), dtype=Q.dtype)
            Q = _make_orthogonal(cat([Q, N], dim=-1))
        elif _is_orthogonal(Q):
            Q = Q.clone()
        else:
            Q = _make_orthogonal(Q)
        self.base = Q
        # -I, so that householder(zeros) is eye
        neg_Id = zeros_like(Q_init)
        neg_Id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_Id


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Reparametrize the matrix (or batch) ``module.<name>`` as an orthogonal (unitary) one:
    orthonormal columns, or rows where it is wide. ``orthogonal_map`` is ``"matrix_exp"``,
    ``"cayley"`` (of a skew-symmetric matrix) or ``"householder"`` (reflectors); by default
    ``"matrix_exp"`` for a square or complex matrix, ``"householder"`` otherwise. With
    ``use_trivialization`` the weight starts as itself made orthogonal (by QR), kept in
    ``module.parametrizations.<name>[0].base``."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(
            f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions."
        )
    if orthogonal_map is None:
        square = weight.size(-2) == weight.size(-1)
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError(
            'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
            f"Got: {orthogonal_map}"
        )
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrize ``module.<name>`` as ``g * v / ||v||``: ``original0`` is ``g`` (the
    norm over all dims but ``dim``; over all for ``dim=None``), ``original1`` is ``v``."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    _u: Tensor
    _v: Tensor

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(
                "Dimension out of range (expected to be in range of "
                f"[-{ndim}, {ndim - 1}] but got {dim})"
            )
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but "
                f"got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:  # a vector is normalised exactly
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations: int) -> None:
        """Update ``_u`` and ``_v`` in place (so replicas' updates reach the buffers)."""
        with no_grad():
            for _ in range(n_power_iterations):
                self._u = F.normalize(weight_mat.mv(self._v), dim=0, eps=self.eps, out=self._u)
                self._v = F.normalize(weight_mat.mH.mv(self._u), dim=0, eps=self.eps, out=self._v)

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        # clones: a later step's in-place update must not change what this backward reads
        u, v = self._u.clone(), self._v.clone()
        sigma = u.vdot(weight_mat.mv(v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Reparametrize ``module.<name>`` as itself over its spectral norm, estimated by
    ``n_power_iterations`` steps of the power method on every access in training mode
    (buffers ``_u`` and ``_v``, drawn from the default generator now, then 15 steps)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    sn = _SpectralNorm(weight, n_power_iterations, _default_dim(module, dim), eps)
    parametrize.register_parametrization(module, name, sn)
    return module
