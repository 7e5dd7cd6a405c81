"""Geometric: failures before the first success, each trial a success with probability
``probs``."""

from __future__ import annotations

from .. import dtypes as dt
from ..eager import ops
from ..eager.factories import empty, zeros_like
from ..eager.grad_mode import no_grad
from ..eager.tensor import Tensor
from ..nn import functional as F
from . import constraints
from .bernoulli import ProbsOrLogits
from .distribution import Distribution
from .utils import broadcast_all


class Geometric(ProbsOrLogits, Distribution):
    """``torch.distributions.Geometric(probs=None, logits=None, validate_args=None)``;
    draws are torch's ``floor(log(U) / log1p(-p))`` of ``uniform_(tiny, 1)`` draws."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._given(probs, logits)
        super().__init__(self._param.shape, validate_args=validate_args)
        if self._checking() and probs is not None and not bool((self.probs > 0).all()):
            value = self.probs
            raise ValueError(
                f"Expected parameter probs ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) of distribution {self!r} to be positive but found "
                f"invalid values:\n{value.detach()[~(value > 0)]}"
            )

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Geometric, batch_shape, _instance, "probs", "logits")

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.probs)

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        tiny = dt.finfo(self.probs.dtype).tiny
        with no_grad():
            u = empty(shape, dtype=self.probs.dtype).uniform_(tiny, 1)
            return (u.log() / ops.log1p(-self.probs)).floor()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = probs.masked_fill((probs == 1) & (value == 0), 0)
        return value * ops.log1p(-probs) + self.probs.log()

    def entropy(self) -> Tensor:
        bce = F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")
        return bce / self.probs
