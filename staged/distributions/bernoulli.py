"""Bernoulli: 1 with probability ``probs`` (or ``sigmoid(logits)``), else 0."""

from __future__ import annotations

from functools import cached_property

from ..eager import ops
from ..eager.factories import bernoulli
from ..eager.tensor import Tensor
from ..nn import functional as F
from .distribution import Distribution
from .utils import broadcast_all, logits_to_probs, probs_to_logits


def _unit_interval(p):
    return ops.logical_and(p >= 0, p <= 1)


class Bernoulli(Distribution):
    """``torch.distributions.Bernoulli(probs=None, logits=None, validate_args=None)``."""

    arg_checks = {
        "probs": (_unit_interval, "Interval(lower_bound=0.0, upper_bound=1.0)"),
        "logits": (lambda x: x == x, "Real()"),
    }

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        param = self.probs if probs is not None else self.logits
        super().__init__(param.shape, validate_args=validate_args)

    @cached_property
    def logits(self) -> Tensor:  # type: ignore[override]
        return probs_to_logits(self.probs, is_binary=True)

    @cached_property
    def probs(self) -> Tensor:  # type: ignore[override]
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        return (self.probs >= 0.5).to(self.probs.dtype)

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        """torch's draw: ``bernoulli`` of the probabilities expanded to the sample's shape."""
        return bernoulli(self.probs.detach().expand(self._extended_shape(sample_shape)))

    def log_prob(self, value: Tensor) -> Tensor:
        self._check_sample(value, lambda v: ops.logical_or(v == 0, v == 1), "Boolean()")
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")
