"""LogNormal: ``exp(X)`` for ``X ~ Normal(loc, scale)``."""

from __future__ import annotations

from ..eager import ops
from ..eager.tensor import Tensor
from .distribution import Distribution
from .normal import Normal


class LogNormal(Distribution):
    """``torch.distributions.LogNormal(loc, scale, validate_args=None)``: torch builds it
    as ``TransformedDistribution(Normal(loc, scale), ExpTransform())``; here the same
    formulas directly: draws are the Normal's (``base_dist``) exponentiated, and
    ``log_prob(y) = base_dist.log_prob(log y) - log y``."""

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.base_dist = Normal(loc, scale, validate_args=validate_args)
        super().__init__(self.base_dist.batch_shape, validate_args=validate_args)

    @property
    def loc(self) -> Tensor:
        return self.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self) -> Tensor:
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self) -> Tensor:
        scale_sq = self.scale.pow(2)
        return ops.expm1(scale_sq) * (2 * self.loc + scale_sq).exp()

    def sample(self, sample_shape=()) -> Tensor:
        return self.base_dist.sample(sample_shape).exp()

    def rsample(self, sample_shape=()) -> Tensor:
        return self.base_dist.rsample(sample_shape).exp()

    def _check(self, value: Tensor) -> None:
        self._check_sample(value, lambda v: v > 0, "GreaterThan(lower_bound=0.0)")

    def log_prob(self, value: Tensor) -> Tensor:
        self._check(value)
        x = value.log()
        return -x + self.base_dist.log_prob(x)

    def cdf(self, value: Tensor) -> Tensor:
        self._check(value)
        return self.base_dist.cdf(value.log())

    def icdf(self, value: Tensor) -> Tensor:
        return self.base_dist.icdf(value).exp()

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() + self.loc
