"""Categorical: a class index drawn with the given probabilities (or logits)."""

from __future__ import annotations

from functools import cached_property

from .. import dtypes as dt
from ..eager import ops
from ..eager.factories import full, multinomial
from ..eager.tensor import Size, Tensor
from .distribution import Distribution
from .utils import logits_to_probs, probs_to_logits


def _simplex(p):
    return ops.logical_and((p >= 0).all(-1), ((p.sum(-1) - 1).abs() < 1e-6))


class Categorical(Distribution):
    """``torch.distributions.Categorical(probs=None, logits=None, validate_args=None)``:
    exactly one of ``probs`` (normalised over the last dim) or ``logits`` (made
    log-probabilities)."""

    arg_checks = {
        "probs": (_simplex, "Simplex()"),
        "logits": (lambda x: (x == x).all(-1), "IndependentConstraint(Real(), 1)"),
    }

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        param = self.probs if probs is not None else self.logits
        self._num_events = param.size(-1)
        super().__init__(param.shape[:-1], validate_args=validate_args)

    @cached_property
    def logits(self) -> Tensor:  # type: ignore[override]
        return probs_to_logits(self.probs)

    @cached_property
    def probs(self) -> Tensor:  # type: ignore[override]
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> Size:
        return self.probs.shape

    @property
    def mean(self) -> Tensor:
        return full(self._extended_shape(), float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(dim=-1)

    @property
    def variance(self) -> Tensor:
        return full(self._extended_shape(), float("nan"), dtype=self.probs.dtype)

    def sample(self, sample_shape=()) -> Tensor:
        """torch's draw: ``multinomial`` of the flattened rows, with replacement."""
        shape = Size(sample_shape)
        probs_2d = self.probs.detach().reshape(-1, self._num_events)
        samples_2d = multinomial(probs_2d, shape.numel(), True).T
        return samples_2d.reshape(self._extended_shape(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        self._check_sample(
            value,
            lambda v: ops.logical_and(
                ops.logical_and(v >= 0, v <= self._num_events - 1), v == v.floor()
            ),
            f"IntegerInterval(lower_bound=0, upper_bound={self._num_events - 1})",
        )
        value, log_pmf = ops.broadcast_tensors(value.long().unsqueeze(-1), self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self) -> Tensor:
        logits = self.logits.clamp(min=dt.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)
