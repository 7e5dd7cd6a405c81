"""Gamma: shape ``concentration``, inverse scale ``rate``."""

from __future__ import annotations

from .. import dtypes as dt
from ..eager import ops
from ..eager.factories import as_tensor
from ..eager.ops.composite import xlogy
from ..eager.tensor import Tensor
from . import constraints
from . import _samplers
from .exp_family import ExponentialFamily
from .utils import broadcast_all


class Gamma(ExponentialFamily):
    """``torch.distributions.Gamma(concentration, rate, validate_args=None)``; draws are
    torch's (Note [torch's C++ samplers] in ``_samplers.py``), and ``rsample`` is
    differentiable in both parameters (implicit reparameterization in
    ``concentration``)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Gamma, batch_shape, _instance, "concentration", "rate")

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        value = _samplers._StandardGamma.apply(self.concentration.expand(shape)) / self.rate.expand(
            shape
        )
        value.detach().clamp_(min=dt.finfo(value.dtype).tiny)
        return value

    def log_prob(self, value) -> Tensor:
        value = as_tensor(value, dtype=self.rate.dtype)
        if self._validate_args:
            self._validate_sample(value)
        return (
            xlogy(self.concentration, self.rate)
            + xlogy(self.concentration - 1, value)
            - self.rate * value
            - ops.lgamma(self.concentration)
        )

    def entropy(self) -> Tensor:
        c = self.concentration
        return c - self.rate.log() + ops.lgamma(c) + (1.0 - c) * ops.digamma(c)

    @property
    def _natural_params(self) -> tuple:
        return self.concentration - 1, -self.rate

    def _log_normalizer(self, x, y):
        return ops.lgamma(x + 1) + (x + 1) * (-y.reciprocal()).log()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ops.igamma(self.concentration, self.rate * value)
