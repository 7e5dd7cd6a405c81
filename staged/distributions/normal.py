"""Normal: the Gaussian with mean ``loc`` and standard deviation ``scale``."""

from __future__ import annotations

import math

from ..eager import ops
from ..eager.factories import empty, normal
from ..eager.tensor import Tensor
from .distribution import LOG_SQRT_2PI, LocScale


class Normal(LocScale):
    """``torch.distributions.Normal(loc, scale, validate_args=None)``; ``rsample`` is
    ``loc + eps * scale`` (differentiable in both)."""

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def sample(self, sample_shape=()) -> Tensor:
        """torch's draw: ``normal(loc, scale)`` of the parameters expanded."""
        shape = self._extended_shape(sample_shape)
        return normal(self.loc.detach().expand(shape), self.scale.detach().expand(shape))

    def rsample(self, sample_shape=()) -> Tensor:
        eps = empty(self._extended_shape(sample_shape), dtype=self.loc.dtype).normal_()
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        self._check_sample(value, lambda v: v == v, "Real()")
        var = self.scale**2
        return -((value - self.loc) ** 2) / (2 * var) - self.scale.log() - LOG_SQRT_2PI

    def cdf(self, value: Tensor) -> Tensor:
        self._check_sample(value, lambda v: v == v, "Real()")
        return 0.5 * (1 + ops.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc + self.scale * ops.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()
