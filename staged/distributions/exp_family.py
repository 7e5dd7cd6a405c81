"""ExponentialFamily: densities ``exp(<t(x), theta> - F(theta) + k(x))``, whose entropy
and same-family KL follow from the log normalizer ``F`` by autograd."""

from __future__ import annotations

from ..autograd.engine import grad
from ..eager.tensor import Tensor
from .distribution import Distribution


class ExponentialFamily(Distribution):
    """``torch.distributions.ExponentialFamily``: subclasses give ``_natural_params``,
    ``_log_normalizer`` and ``_mean_carrier_measure``; ``entropy`` is the Bregman form,
    differentiating ``_log_normalizer`` with ``create_graph=True``."""

    @property
    def _natural_params(self) -> tuple:
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self) -> float:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        lg_normal = self._log_normalizer(*nparams)
        gradients = grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for n, g in zip(nparams, gradients):
            result = result - (n * g).reshape(*self._batch_shape, -1).sum(-1)
        return result
