"""Wishart: distributions of positive-definite matrices, ``df`` degrees of freedom and a
scale matrix (as a covariance, a precision or its lower Cholesky factor)."""

from __future__ import annotations

import math
import numbers
import warnings

from .. import dtypes as dt
from .. import linalg
from ..eager import ops
from ..eager.factories import arange, randn, tensor
from ..eager.ops.composite import mvlgamma
from ..eager.ops.linalg import einsum
from ..eager.ops.shape import broadcast_shapes
from ..eager.tensor import Size, Tensor
from . import _linalg, constraints
from .chi2 import Chi2
from .exp_family import ExponentialFamily
from .multivariate_normal import _precision_to_scale_tril
from .utils import lazy_property, vec_to_tril_matrix

_LOG_2 = math.log(2)


def _mvdigamma(x: Tensor, p: int) -> Tensor:
    """The multivariate digamma function: ``sum_i digamma(x - i / 2)``, i < p."""
    if not bool(x.gt((p - 1) / 2).all()):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    offsets = arange(p, dtype=x.dtype).div(2).expand(*x.shape, -1)
    return ops.digamma(x.unsqueeze(-1) - offsets).sum(-1)


def _cholesky_solve(b: Tensor, lower: Tensor) -> Tensor:
    """``torch.cholesky_solve(b, lower)``: ``(lower @ lower.mT)^-1 @ b``."""
    y = linalg.solve_triangular(lower, b, upper=False)
    return linalg.solve_triangular(lower.mT, y, upper=True)


class Wishart(ExponentialFamily):
    """``torch.distributions.Wishart(df, covariance_matrix=None, precision_matrix=None,
    scale_tril=None, validate_args=None)``; ``rsample`` is torch's Bartlett decomposition
    (its Chi2 and normal draws). torch 2.13's ``rsample`` tests its draws for singularity
    the wrong way round: it replaces every positive-definite first draw by a second one
    (warning "Singular sample detected.") and keeps singular ones. staged draws the same
    two rounds, so its samples are torch's, warns only for a singular draw, and redraws
    that one (up to ``max_try_correction`` rounds)."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self) -> dict:  # type: ignore[override]
        return {
            "covariance_matrix": constraints.positive_definite,
            "precision_matrix": constraints.positive_definite,
            "scale_tril": constraints.lower_cholesky,
            "df": constraints.greater_than(self.event_shape[-1] - 1),
        }

    def __init__(
        self,
        df,
        covariance_matrix=None,
        precision_matrix=None,
        scale_tril=None,
        validate_args=None,
    ):
        given = {
            "scale_tril": scale_tril,
            "covariance_matrix": covariance_matrix,
            "precision_matrix": precision_matrix,
        }
        if sum(m is not None for m in given.values()) != 1:
            raise AssertionError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                "specified."
            )
        name, param = next((k, m) for k, m in given.items() if m is not None)
        if param.dim() < 2:
            raise ValueError(
                "scale_tril must be at least two-dimensional, with optional leading batch "
                "dimensions"
            )
        if isinstance(df, numbers.Number):
            batch_shape = Size(tuple(param.shape[:-2]))
            self.df = tensor(df, dtype=param.dtype)
        else:
            batch_shape = Size(broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(*batch_shape)
        event_shape = tuple(param.shape[-2:])
        if bool(self.df.le(event_shape[-1] - 1).any()):
            raise ValueError(
                f"Value of df={df} expected to be greater than ndim - 1 = {event_shape[-1] - 1}."
            )
        self.__dict__[name] = param.expand(*batch_shape, -1, -1)
        if bool(self.df.lt(event_shape[-1]).any()):
            warnings.warn(
                "Low df values detected. Singular samples are highly likely to occur for "
                "ndim - 1 < df < ndim.",
                stacklevel=2,
            )
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = param
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = linalg.cholesky(param)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(param)
        self._dist_chi2 = self._chi2()

    def _chi2(self) -> Chi2:
        """The Bartlett decomposition's squared diagonal: Chi2 of ``df - i``."""
        p = self._event_shape[-1]
        offsets = arange(p, dtype=self._unbroadcasted_scale_tril.dtype)
        return Chi2(self.df.unsqueeze(-1) - offsets.expand(*self._batch_shape, -1))

    @property
    def _batch_dims(self) -> list:
        return [-(x + 1) for x in range(len(self._batch_shape))]

    def expand(self, batch_shape, _instance=None):
        names = ("df", "covariance_matrix", "scale_tril", "precision_matrix")
        new = self._expand_params(Wishart, batch_shape, _instance, *names)
        cov_shape = (*new._batch_shape, *self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new._dist_chi2 = new._chi2()
        return new

    def _square(self) -> tuple:
        return (*self._batch_shape, *self._event_shape)

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(self._square())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        tril = self._unbroadcasted_scale_tril
        return (tril @ tril.mT).expand(self._square())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        return _linalg.cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._square())

    def _df_matrix(self) -> Tensor:
        return self.df.reshape(*self._batch_shape, 1, 1)

    @property
    def mean(self) -> Tensor:
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self) -> Tensor:
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = factor.masked_fill(factor <= 0, math.nan)
        return factor.reshape(*self._batch_shape, 1, 1) * self.covariance_matrix

    @property
    def variance(self) -> Tensor:
        v = self.covariance_matrix
        diag_v = v.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (v.pow(2) + einsum("...i,...j->...ij", diag_v, diag_v))

    def _bartlett_sampling(self, sample_shape) -> Tensor:
        p = self._event_shape[-1]
        eps = dt.finfo(self.df.dtype).eps
        diag = self._dist_chi2.rsample(sample_shape).sqrt().clamp(min=eps).diag_embed()
        count = p * (p - 1) // 2
        below = randn(*sample_shape, *self._batch_shape, count, dtype=diag.dtype)
        chol = self._unbroadcasted_scale_tril @ (diag + vec_to_tril_matrix(below, diag=-1))
        return chol @ chol.mT

    def rsample(self, sample_shape=(), max_try_correction=None) -> Tensor:
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = Size(tuple(sample_shape))
        self._bartlett_sampling(sample_shape)  # torch's first draw, which it replaces
        sample = self._bartlett_sampling(sample_shape)
        for _ in range(max_try_correction - 1):
            singular = ~self.support.check(sample)
            if self._batch_shape:
                singular = singular.amax(self._batch_dims)
            if not bool(singular.any()):
                break
            warnings.warn("Singular sample detected.", stacklevel=2)
            mask = singular.reshape(*singular.shape, *(1,) * (len(self._batch_shape) + 2))
            sample = ops.where(mask, self._bartlett_sampling(sample_shape), sample)
        return sample

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        tril = self._unbroadcasted_scale_tril
        return (
            -nu * (p * _LOG_2 / 2 + tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
            - mvlgamma(nu / 2, p)
            + (nu - p - 1) / 2 * linalg.slogdet(value).logabsdet
            - _cholesky_solve(value, tril).diagonal(dim1=-2, dim2=-1).sum(dim=-1) / 2
        )

    def entropy(self) -> Tensor:
        nu = self.df
        p = self._event_shape[-1]
        tril = self._unbroadcasted_scale_tril
        return (
            (p + 1) * (p * _LOG_2 / 2 + tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
            + mvlgamma(nu / 2, p)
            - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p)
            + nu * p / 2
        )

    @property
    def _natural_params(self) -> tuple:
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        logdet = linalg.slogdet(-2 * x).logabsdet
        return (y + (p + 1) / 2) * (-logdet + _LOG_2 * p) + mvlgamma(y + (p + 1) / 2, p)
