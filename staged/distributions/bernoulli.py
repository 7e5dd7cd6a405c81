"""Bernoulli: 1 with probability ``probs`` (or ``sigmoid(logits)``), else 0."""

from __future__ import annotations

from ..eager import ops
from ..eager.factories import arange, bernoulli
from ..eager.ops.composite import logit
from ..eager.tensor import Size, Tensor
from ..nn import functional as F
from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits


class ProbsOrLogits:
    """Families given by exactly one of ``probs`` or ``logits`` (the other derived lazily,
    torch's ``lazy_property``); ``_param`` is the given one."""

    def _given(self, probs, logits, *others) -> list:
        """Keep the given one of ``probs``/``logits`` broadcast with ``others``; returns
        ``others`` broadcast."""
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        name, param = ("probs", probs) if probs is not None else ("logits", logits)
        *broadcast, self.__dict__[name] = broadcast_all(*others, param)
        return broadcast

    @property
    def _param(self) -> Tensor:
        return self.__dict__["probs"] if "probs" in self.__dict__ else self.__dict__["logits"]

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)


def enumerate_values(d, count: int, expand: bool) -> Tensor:
    """``0 .. count - 1`` in the parameters' dtype along a new first dim (expanded over the
    batch, or of size 1 there)."""
    values = arange(count, dtype=d._param.dtype).reshape(-1, *(1,) * len(d._batch_shape))
    return values.expand(-1, *d._batch_shape) if expand else values


class Bernoulli(ProbsOrLogits, ExponentialFamily):
    """``torch.distributions.Bernoulli(probs=None, logits=None, validate_args=None)``."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._given(probs, logits)
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Bernoulli, batch_shape, _instance, "probs", "logits")

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.masked_fill(self.probs == 0.5, float("nan"))

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        """torch's draw: ``bernoulli`` of the probabilities expanded to the sample's shape."""
        return bernoulli(self.probs.detach().expand(self._extended_shape(sample_shape)))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True) -> Tensor:
        return enumerate_values(self, 2, expand)

    @property
    def _natural_params(self) -> tuple:
        return (logit(self.probs),)

    def _log_normalizer(self, x):
        return ops.log1p(x.exp())
