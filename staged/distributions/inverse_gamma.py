"""InverseGamma: the reciprocal of a Gamma variable."""

from __future__ import annotations

import math

from ..eager import ops
from ..eager.factories import ones
from ..eager.tensor import Tensor
from . import constraints
from .gamma import Gamma
from .transformed_distribution import TransformedDistribution
from .transforms import PowerTransform


class InverseGamma(TransformedDistribution):
    """``torch.distributions.InverseGamma(concentration, rate, validate_args=None)``:
    ``1 / X`` of a Gamma(concentration, rate) draw (torch's draws)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = -ones((), dtype=base_dist.rate.dtype)
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self) -> Tensor:
        return self.base_dist.concentration

    @property
    def rate(self) -> Tensor:
        return self.base_dist.rate

    @property
    def mean(self) -> Tensor:
        result = self.rate / (self.concentration - 1)
        return ops.where(self.concentration > 1, result, math.inf)

    @property
    def mode(self) -> Tensor:
        return self.rate / (self.concentration + 1)

    @property
    def variance(self) -> Tensor:
        c = self.concentration
        result = self.rate.square() / ((c - 1).square() * (c - 2))
        return ops.where(c > 2, result, math.inf)

    def entropy(self) -> Tensor:
        c = self.concentration
        return c + self.rate.log() + ops.lgamma(c) - (1 + c) * ops.digamma(c)
