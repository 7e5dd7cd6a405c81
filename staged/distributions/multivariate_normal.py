"""MultivariateNormal: the Gaussian over vectors, from a covariance, a precision or a
lower Cholesky factor."""

from __future__ import annotations

import math

from ..eager import ops
from ..eager.factories import eye
from ..eager.tensor import Size, Tensor
from .. import linalg
from . import _linalg, constraints
from .distribution import Distribution
from .utils import lazy_property, standard_normal


def _precision_to_scale_tril(p: Tensor) -> Tensor:
    """torch's: the Cholesky factor of the flipped precision, flipped back and inverted."""
    lf = linalg.cholesky(p.flip(-2, -1))
    l_inv = lf.flip(-2, -1).transpose(-2, -1)
    return linalg.solve_triangular(l_inv, eye(p.shape[-1], dtype=p.dtype), upper=False)


class MultivariateNormal(Distribution):
    """``torch.distributions.MultivariateNormal(loc, covariance_matrix=None,
    precision_matrix=None, scale_tril=None, validate_args=None)``: exactly one of the
    three matrices; everything is computed from the lower factor ``scale_tril``
    (``rsample`` is ``loc + scale_tril @ eps``). staged's Cholesky factor and triangular
    solve are compositions of its ops (``staged.linalg``), so all of it is differentiable."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc,
        covariance_matrix=None,
        precision_matrix=None,
        scale_tril=None,
        validate_args=None,
    ):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = {
            "scale_tril": scale_tril,
            "covariance_matrix": covariance_matrix,
            "precision_matrix": precision_matrix,
        }
        if sum(m is not None for m in given.values()) != 1:
            raise ValueError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                "specified."
            )
        name, matrix = next((k, m) for k, m in given.items() if m is not None)
        if matrix.dim() < 2:
            what = "scale_tril matrix" if name == "scale_tril" else name
            raise ValueError(
                f"{what} must be at least two-dimensional, with optional leading batch dimensions"
            )
        batch_shape = Size(ops.broadcast_shapes(matrix.shape[:-2], loc.shape[:-1]))
        self.__dict__[name] = matrix.expand(*batch_shape, -1, -1)
        self.loc = loc.expand(*batch_shape, -1)
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = linalg.cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def expand(self, batch_shape, _instance=None):
        names = ("loc", "covariance_matrix", "scale_tril", "precision_matrix")
        new = self._expand_params(MultivariateNormal, batch_shape, _instance, *names)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        return new

    def _matrix_shape(self) -> tuple:
        return (*self._batch_shape, *self._event_shape, *self._event_shape)

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(*self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        tril = self._unbroadcasted_scale_tril
        return (tril @ tril.mT).expand(*self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        inverse = _linalg.cholesky_inverse(self._unbroadcasted_scale_tril)
        return inverse.expand(*self._matrix_shape())

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        shape = (*self._batch_shape, *self._event_shape)
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(*shape)

    def rsample(self, sample_shape=()) -> Tensor:
        """torch's draw: ``eps`` from ``empty(shape).normal_()`` (``_standard_normal``)."""
        eps = standard_normal(self._extended_shape(sample_shape), self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = mahalanobis(self._unbroadcasted_scale_tril, diff)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self) -> Tensor:
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h if len(self._batch_shape) == 0 else h.expand(*self._batch_shape)


def mahalanobis(lower: Tensor, x: Tensor) -> Tensor:
    """torch's ``_batch_mahalanobis``: ``x^T (L L^T)^-1 x`` as ``|L^-1 x|^2``."""
    return linalg.solve_triangular(lower, x.unsqueeze(-1), upper=False).squeeze(-1).pow(2).sum(-1)
