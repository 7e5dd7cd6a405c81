"""Exponential: waiting times of rate ``rate`` (mean ``1 / rate``)."""

from __future__ import annotations

from ..eager import ops
from ..eager.factories import empty, zeros_like
from ..eager.tensor import Tensor
from .distribution import Distribution
from .utils import broadcast_all


class Exponential(Distribution):
    """``torch.distributions.Exponential(rate, validate_args=None)``; ``rsample`` is
    ``exponential_()`` draws divided by ``rate``."""

    has_rsample = True
    arg_checks = {"rate": (lambda x: x > 0, "GreaterThan(lower_bound=0.0)")}

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.rate)

    @property
    def stddev(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return empty(shape, dtype=self.rate.dtype).exponential_() / self.rate

    def _check(self, value: Tensor) -> None:
        self._check_sample(value, lambda v: v >= 0, "GreaterThanEq(lower_bound=0.0)")

    def log_prob(self, value: Tensor) -> Tensor:
        self._check(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value: Tensor) -> Tensor:
        self._check(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value: Tensor) -> Tensor:
        return -ops.log1p(-value) / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()
