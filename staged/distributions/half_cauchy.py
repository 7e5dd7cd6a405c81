"""HalfCauchy: ``|X|`` of a zero-centred Cauchy."""

from __future__ import annotations

import math

from ..eager.factories import full
from ..eager.tensor import Tensor
from .cauchy import Cauchy
from .half_normal import Half
from .transforms import AbsTransform


class HalfCauchy(Half):
    """``torch.distributions.HalfCauchy(scale, validate_args=None)``: ``|Cauchy(0,
    scale)|``, with the Cauchy's draws (torch's)."""

    def __init__(self, scale, validate_args=None):
        base_dist = Cauchy(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self) -> Tensor:
        return full(self._extended_shape(), math.inf, dtype=self.scale.dtype)

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance
