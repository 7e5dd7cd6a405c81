"""OneHotCategorical: a Categorical's draw as a one-hot vector."""

from __future__ import annotations

from ..eager import ops
from ..eager.tensor import Size, Tensor
from ..nn import functional as F
from .categorical import Categorical
from .distribution import Distribution


class OneHotCategorical(Distribution):
    """``torch.distributions.OneHotCategorical(probs=None, logits=None,
    validate_args=None)``: draws are ``one_hot`` of the inner ``Categorical``'s (torch's
    draw), in the probabilities' dtype; the event is the last dim."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(
            self._categorical.batch_shape,
            self._categorical.param_shape[-1:],
            validate_args=validate_args,
        )

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        probs = self.probs
        return F.one_hot(probs.argmax(dim=-1), num_classes=probs.shape[-1]).to(probs)

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        indices = self._categorical.sample(sample_shape)
        return F.one_hot(indices, self._categorical._num_events).to(self.probs)

    def log_prob(self, value: Tensor) -> Tensor:
        self._check_sample(
            value,
            lambda v: ops.logical_and(ops.logical_or(v == 0, v == 1).all(-1), v.sum(-1) == 1),
            "OneHot()",
        )
        return self._categorical.log_prob(value.max(-1)[1])

    def entropy(self) -> Tensor:
        return self._categorical.entropy()
