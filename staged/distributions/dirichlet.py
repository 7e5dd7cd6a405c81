"""Dirichlet: distributions over the simplex, with concentration ``concentration``."""

from __future__ import annotations

from ..eager import ops
from ..eager.ops.composite import xlogy
from ..eager.tensor import Tensor
from ..nn import functional as F
from . import _samplers, constraints
from .exp_family import ExponentialFamily


class Dirichlet(ExponentialFamily):
    """``torch.distributions.Dirichlet(concentration, validate_args=None)``; draws are
    torch's (Note [torch's C++ samplers] in ``_samplers.py``), and ``rsample`` is
    differentiable by torch's implicit reparameterization (``_dirichlet_grad``)."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(
            concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args
        )

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Dirichlet, batch_shape, _instance, "concentration")

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return _samplers._Dirichlet.apply(self.concentration.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return xlogy(c - 1.0, value).sum(-1) + ops.lgamma(c.sum(-1)) - ops.lgamma(c).sum(-1)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self) -> Tensor:
        concentrationm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concentrationm1 / concentrationm1.sum(-1, True)
        # all concentrations below 1: the mode is the corner of the largest
        corner = F.one_hot(mode.argmax(dim=-1), concentrationm1.shape[-1]).to(mode)
        below = (self.concentration < 1).all(dim=-1, keepdim=True)
        return ops.where(below, corner, mode)

    @property
    def variance(self) -> Tensor:
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self) -> Tensor:
        c = self.concentration
        k = c.size(-1)
        a0 = c.sum(-1)
        return (
            ops.lgamma(c).sum(-1)
            - ops.lgamma(a0)
            - (k - a0) * ops.digamma(a0)
            - ((c - 1.0) * ops.digamma(c)).sum(-1)
        )

    @property
    def _natural_params(self) -> tuple:
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - ops.lgamma(x.sum(-1))
