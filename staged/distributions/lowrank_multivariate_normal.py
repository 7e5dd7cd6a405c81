"""LowRankMultivariateNormal: a Gaussian whose covariance is ``W W^T + diag(D)``."""

from __future__ import annotations

import math

from ..eager import ops
from ..eager.factories import eye
from ..eager.tensor import Size, Tensor
from .. import linalg
from . import constraints
from ._linalg import batch_mv
from .distribution import Distribution
from .multivariate_normal import mahalanobis
from .utils import lazy_property, standard_normal


def capacitance_tril(W, D):
    """The Cholesky factor of ``I + W^T D^-1 W`` (torch's ``_batch_capacitance_tril``)."""
    m = W.size(-1)
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    return linalg.cholesky(Wt_Dinv @ W + eye(m, dtype=W.dtype))


def lowrank_logdet(W, D, capacitance_tril):
    """``log det(W W^T + D)`` by the matrix determinant lemma."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def lowrank_mahalanobis(W, D, x, capacitance_tril):
    """``x^T (W W^T + D)^-1 x`` by the Woodbury identity."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = batch_mv(Wt_Dinv, x)
    return (x.pow(2) / D).sum(-1) - mahalanobis(capacitance_tril, Wt_Dinv_x)


class LowRankMultivariateNormal(Distribution):
    """``torch.distributions.LowRankMultivariateNormal(loc, cov_factor, cov_diag,
    validate_args=None)``: covariance ``cov_factor @ cov_factor.mT + diag(cov_diag)``;
    ``rsample`` is torch's ``loc + W eps_W + sqrt(D) eps_D`` (its draws)."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if cov_factor.dim() < 2:
            raise ValueError(
                "cov_factor must be at least two-dimensional, with optional leading batch "
                "dimensions"
            )
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError(
                f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m"
            )
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {Size(event_shape)}")
        try:
            loc_, self.cov_factor, cov_diag_ = ops.broadcast_tensors(
                loc.unsqueeze(-1), cov_factor, cov_diag.unsqueeze(-1)
            )
        except RuntimeError as e:
            raise ValueError(
                f"Incompatible batch shapes: loc {loc.shape}, cov_factor {cov_factor.shape}, "
                f"cov_diag {cov_diag.shape}"
            ) from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = capacitance_tril(cov_factor, cov_diag)
        super().__init__(self.loc.shape[:-1], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        names = ("loc", "cov_diag", "cov_factor")
        new = self._expand_params(LowRankMultivariateNormal, batch_shape, _instance, *names)
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        return new

    def _square(self) -> tuple:
        return (*self._batch_shape, *self._event_shape, *self._event_shape)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return (w.pow(2).sum(-1) + d).expand(*self._batch_shape, *self._event_shape)

    @lazy_property
    def scale_tril(self) -> Tensor:
        n = self._event_shape[0]
        d_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        Dinvsqrt_W = self._unbroadcasted_cov_factor / d_sqrt
        K = Dinvsqrt_W @ Dinvsqrt_W.mT + eye(n, dtype=d_sqrt.dtype)
        return (d_sqrt * linalg.cholesky(K)).expand(*self._square())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        w = self._unbroadcasted_cov_factor
        cov = w @ w.mT + self._unbroadcasted_cov_diag.diag_embed()
        return cov.expand(*self._square())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        d = self._unbroadcasted_cov_diag
        Wt_Dinv = self._unbroadcasted_cov_factor.mT / d.unsqueeze(-2)
        A = linalg.solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        return (d.reciprocal().diag_embed() - A.mT @ A).expand(*self._square())

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        w_shape = (*shape[:-1], self.cov_factor.shape[-1])
        eps_W = standard_normal(w_shape, self.loc.dtype)
        eps_D = standard_normal(shape, self.loc.dtype)
        return (
            self.loc
            + batch_mv(self._unbroadcasted_cov_factor, eps_W)
            + self._unbroadcasted_cov_diag.sqrt() * eps_D
        )

    def _log_det(self) -> Tensor:
        return lowrank_logdet(
            self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, self._capacitance_tril
        )

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        M = lowrank_mahalanobis(
            self._unbroadcasted_cov_factor,
            self._unbroadcasted_cov_diag,
            value - self.loc,
            self._capacitance_tril,
        )
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + M)

    def entropy(self) -> Tensor:
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return h if len(self._batch_shape) == 0 else h.expand(*self._batch_shape)
