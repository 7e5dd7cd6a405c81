"""NegativeBinomial: successes before ``total_count`` failures, each trial a success
with probability ``probs``."""

from __future__ import annotations

from ..eager import ops
from ..eager.grad_mode import no_grad
from ..eager.tensor import Tensor
from ..nn import functional as F
from . import _samplers, constraints
from .bernoulli import ProbsOrLogits
from .distribution import Distribution
from .gamma import Gamma
from .utils import lazy_property


class NegativeBinomial(ProbsOrLogits, Distribution):
    """``torch.distributions.NegativeBinomial(total_count, probs=None, logits=None,
    validate_args=None)``; draws are torch's Gamma-Poisson mixture (Note [torch's C++
    samplers] in ``_samplers.py``)."""

    arg_constraints = {
        "total_count": constraints.greater_than_eq(0),
        "probs": constraints.half_open_interval(0.0, 1.0),
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        (total_count,) = self._given(probs, logits, total_count)
        self.total_count = total_count.type_as(self._param)
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        names = ("total_count", "probs", "logits")
        return self._expand_params(NegativeBinomial, batch_shape, _instance, *names)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.logits.exp()

    @property
    def mode(self) -> Tensor:
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self) -> Tensor:
        return self.mean / (-self.logits).sigmoid()

    @lazy_property
    def _gamma(self) -> Gamma:
        return Gamma(self.total_count, (-self.logits).exp(), validate_args=False)

    def sample(self, sample_shape=()) -> Tensor:
        with no_grad():
            return _samplers.poisson(self._gamma.sample(sample_shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        log_unnormalized_prob = n * F.logsigmoid(-self.logits) + value * F.logsigmoid(self.logits)
        log_normalization = -ops.lgamma(n + value) + ops.lgamma(1.0 + value) + ops.lgamma(n)
        log_normalization = log_normalization.masked_fill(n + value == 0.0, 0.0)
        return log_unnormalized_prob - log_normalization
