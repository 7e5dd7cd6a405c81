"""Multinomial: counts per category in ``total_count`` Categorical draws."""

from __future__ import annotations

import math

from ..eager import ops
from ..eager.factories import ones_like, tensor, zeros
from ..eager.tensor import Size, Tensor
from . import constraints
from .binomial import Binomial
from .categorical import Categorical
from .distribution import Distribution
from .utils import broadcast_all


class Multinomial(Distribution):
    """``torch.distributions.Multinomial(total_count=1, probs=None, logits=None,
    validate_args=None)``; draws count torch's Categorical draws (so they are torch's)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        super().__init__(
            self._categorical.batch_shape,
            self._categorical.param_shape[-1:],
            validate_args=validate_args,
        )

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(Multinomial, batch_shape, _instance, "_categorical", "_binomial")
        new.total_count = self.total_count
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.probs * self.total_count

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    def sample(self, sample_shape=()) -> Tensor:
        sample_shape = Size(tuple(sample_shape))
        samples = self._categorical.sample(Size((self.total_count, *sample_shape)))
        samples = samples.permute(*range(1, samples.dim()), 0)
        counts = zeros(self._extended_shape(sample_shape), dtype=samples.dtype)
        counts = counts.scatter_add(-1, samples, ones_like(samples))
        return counts.type_as(self.probs)

    def entropy(self) -> Tensor:
        n = tensor(self.total_count)
        term1 = n * self._categorical.entropy() - ops.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        weights = ops.lgamma(support + 1)
        return term1 + (binomial_probs * weights).sum([0, -1])

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = ops.lgamma(value.sum(-1) + 1)
        log_factorial_xs = ops.lgamma(value + 1).sum(-1)
        logits = logits.masked_fill((value == 0) & (logits == -math.inf), 0)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers
