"""Binomial: successes in ``total_count`` trials of probability ``probs``."""

from __future__ import annotations

from ..eager import ops
from ..eager.grad_mode import no_grad
from ..eager.tensor import Tensor
from . import _samplers, constraints
from .bernoulli import ProbsOrLogits, enumerate_values
from .distribution import Distribution


def _clamp_by_zero(x):
    """max(x, 0), with gradient 1/2 at 0 (torch's)."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


def _homogeneous(total_count: Tensor, what: str) -> int:
    n = int(total_count.max())
    if not bool(total_count.min() == n):
        raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
    return n


class Binomial(ProbsOrLogits, Distribution):
    """``torch.distributions.Binomial(total_count=1, probs=None, logits=None,
    validate_args=None)``; draws are torch's (``torch.binomial``, Note [torch's C++
    samplers] in ``_samplers.py``)."""

    arg_constraints = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        (total_count,) = self._given(probs, logits, total_count)
        self.total_count = total_count.type_as(self._param)
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        names = ("total_count", "probs", "logits")
        return self._expand_params(Binomial, batch_shape, _instance, *names)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return _samplers.binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        log_factorial_n = ops.lgamma(n + 1)
        log_factorial_k = ops.lgamma(value + 1)
        log_factorial_nmk = ops.lgamma(n - value + 1)
        normalize_term = (
            n * _clamp_by_zero(self.logits)
            + n * ops.log1p((-self.logits.abs()).exp())
            - log_factorial_n
        )
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def entropy(self) -> Tensor:
        _homogeneous(self.total_count, "entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True) -> Tensor:
        n = _homogeneous(self.total_count, "enumerate_support")
        return enumerate_values(self, 1 + n, expand)
