"""RelaxedBernoulli (binary Concrete / Gumbel-softmax) and its logit form."""

from __future__ import annotations

import numbers

from ..eager import ops
from ..eager.factories import rand
from ..eager.tensor import Tensor
from . import constraints
from .bernoulli import ProbsOrLogits
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import SigmoidTransform
from .utils import broadcast_all, clamp_probs


class LogitRelaxedBernoulli(ProbsOrLogits, Distribution):
    """``torch.distributions.relaxed_bernoulli.LogitRelaxedBernoulli(temperature,
    probs=None, logits=None, validate_args=None)``: the logit of a RelaxedBernoulli draw;
    ``rsample`` is torch's (``rand`` draws through the logistic)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        scalar = isinstance(probs if probs is not None else logits, numbers.Number)
        self._given(probs, logits)
        super().__init__(() if scalar else self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(LogitRelaxedBernoulli, batch_shape, _instance, "probs", "logits")
        new.temperature = self.temperature
        return new

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(rand(shape, dtype=probs.dtype))
        return (
            uniforms.log() - ops.log1p(-uniforms) + probs.log() - ops.log1p(-probs)
        ) / self.temperature

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value.mul(self.temperature)
        return self.temperature.log() + diff - 2 * ops.log1p(diff.exp())


class RelaxedBernoulli(TransformedDistribution):
    """``torch.distributions.RelaxedBernoulli(temperature, probs=None, logits=None,
    validate_args=None)``: ``sigmoid`` of a ``LogitRelaxedBernoulli`` (torch's draws)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self) -> Tensor:
        return self.base_dist.temperature

    @property
    def logits(self) -> Tensor:
        return self.base_dist.logits

    @property
    def probs(self) -> Tensor:
        return self.base_dist.probs
