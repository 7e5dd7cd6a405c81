"""Poisson: counts of events at rate ``rate``."""

from __future__ import annotations

from ..eager import ops
from ..eager.grad_mode import no_grad
from ..eager.ops.composite import xlogy
from ..eager.tensor import Tensor
from . import _samplers, constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all


class Poisson(ExponentialFamily):
    """``torch.distributions.Poisson(rate, validate_args=None)``; draws are torch's
    (``torch.poisson``, Note [torch's C++ samplers] in ``_samplers.py``)."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Poisson, batch_shape, _instance, "rate")

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def mode(self) -> Tensor:
        return self.rate.floor()

    @property
    def variance(self) -> Tensor:
        return self.rate

    def sample(self, sample_shape=()) -> Tensor:
        with no_grad():
            return _samplers.poisson(self.rate.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return xlogy(value, rate) - rate - ops.lgamma(value + 1)

    @property
    def _natural_params(self) -> tuple:
        return (self.rate.log(),)

    def _log_normalizer(self, x):
        return x.exp()
