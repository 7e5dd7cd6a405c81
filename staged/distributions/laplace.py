"""Laplace: the double exponential around ``loc`` with scale ``scale``."""

from __future__ import annotations

from .. import dtypes as dt
from ..eager import ops
from ..eager.factories import empty
from ..eager.tensor import Tensor
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all


class Laplace(Distribution):
    """``torch.distributions.Laplace(loc, scale, validate_args=None)``; ``rsample``
    inverts the CDF at ``uniform_(eps - 1, 1)`` draws, as torch."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Laplace, batch_shape, _instance, "loc", "scale")

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.pow(2)

    @property
    def stddev(self) -> Tensor:
        return (2**0.5) * self.scale

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = dt.finfo(self.loc.dtype).eps
        u = empty(shape, dtype=self.loc.dtype).uniform_(eps - 1, 1)
        return self.loc - self.scale * u.sign() * ops.log1p(-u.abs())

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        d = value - self.loc
        return 0.5 - 0.5 * d.sign() * ops.expm1(-d.abs() / self.scale)

    def icdf(self, value: Tensor) -> Tensor:
        term = value - 0.5
        return self.loc - self.scale * term.sign() * ops.log1p(-2 * term.abs())

    def entropy(self) -> Tensor:
        return 1 + (2 * self.scale).log()
