"""OneHotCategorical: a Categorical's draw as a one-hot vector."""

from __future__ import annotations

from ..eager.factories import eye
from ..eager.tensor import Size, Tensor
from ..nn import functional as F
from . import constraints
from .categorical import Categorical
from .distribution import Distribution


class OneHotCategorical(Distribution):
    """``torch.distributions.OneHotCategorical(probs=None, logits=None,
    validate_args=None)``: draws are ``one_hot`` of the inner ``Categorical``'s (torch's
    draw), in the probabilities' dtype; the event is the last dim."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(
            self._categorical.batch_shape,
            self._categorical.param_shape[-1:],
            validate_args=validate_args,
        )

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(OneHotCategorical, batch_shape, _instance, "_categorical")

    @property
    def _param(self) -> Tensor:
        return self._categorical._param

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
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.max(-1)[1])

    def entropy(self) -> Tensor:
        return self._categorical.entropy()

    def enumerate_support(self, expand=True) -> Tensor:
        n = self.event_shape[0]
        values = eye(n, dtype=self._param.dtype).reshape(n, *(1,) * len(self.batch_shape), n)
        return values.expand(n, *self.batch_shape, n) if expand else values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """``OneHotCategorical`` whose ``rsample`` is the draw plus ``probs - probs.detach()``:
    the straight-through gradient estimator."""

    has_rsample = True

    def rsample(self, sample_shape=()) -> Tensor:
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
