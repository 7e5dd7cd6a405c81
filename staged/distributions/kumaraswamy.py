"""Kumaraswamy: a Beta-like distribution on [0, 1] with a closed-form CDF."""

from __future__ import annotations

import math

from ..eager import ops
from ..eager.factories import full_like
from ..eager.tensor import Tensor
from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all, euler_constant


def _moments(a, b, n):
    """The n-th moment ``b * B(1 + n / a, b)``."""
    arg1 = 1 + n / a
    log_value = ops.lgamma(arg1) + ops.lgamma(b) - ops.lgamma(arg1 + b)
    return b * log_value.exp()


class Kumaraswamy(TransformedDistribution):
    """``torch.distributions.Kumaraswamy(concentration1, concentration0,
    validate_args=None)``: torch's ``(1 - U ** (1 / b)) ** (1 / a)`` of a Uniform ``U``
    (its draws)."""

    arg_constraints = {
        "concentration1": constraints.positive,
        "concentration0": constraints.positive,
    }
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(
            full_like(self.concentration0, 0),
            full_like(self.concentration0, 1),
            validate_args=validate_args,
        )
        transforms = [
            PowerTransform(exponent=self.concentration0.reciprocal()),
            AffineTransform(loc=1.0, scale=-1.0),
            PowerTransform(exponent=self.concentration1.reciprocal()),
        ]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self) -> Tensor:
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        log_mode = b.reciprocal() * ops.log1p(-b) - ops.log1p(-b * a)
        return log_mode.masked_fill((b < 1) | (a < 1), math.nan).exp()

    @property
    def variance(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        return _moments(a, b, 2) - self.mean.pow(2)

    def entropy(self) -> Tensor:
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = ops.digamma(self.concentration0 + 1) + euler_constant
        return t0 + t1 * h0 - self.concentration1.log() - self.concentration0.log()
