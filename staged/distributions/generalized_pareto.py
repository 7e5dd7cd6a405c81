"""GeneralizedPareto: location ``loc``, scale ``scale``, shape ``concentration`` (an
exponential tail at 0, heavier above, bounded below)."""

from __future__ import annotations

import math

from ..eager import ops
from ..eager.factories import ones_like, rand, zeros_like
from ..eager.ops.composite import isclose
from ..eager.tensor import Tensor
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all


class GeneralizedPareto(Distribution):
    """``torch.distributions.GeneralizedPareto(loc, scale, concentration,
    validate_args=None)``; ``rsample`` inverts the CDF at ``rand`` draws (torch's)."""

    arg_constraints = {
        "loc": constraints.real,
        "scale": constraints.positive,
        "concentration": constraints.real,
    }
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        names = ("loc", "scale", "concentration")
        return self._expand_params(GeneralizedPareto, batch_shape, _instance, *names)

    def rsample(self, sample_shape=()) -> Tensor:
        return self.icdf(rand(self._extended_shape(sample_shape), dtype=self.loc.dtype))

    def _safe_concentration(self):
        """(concentration close to 0, the concentration with 1 there)."""
        eq_zero = isclose(self.concentration, zeros_like(self.concentration))
        return eq_zero, ops.where(eq_zero, ones_like(self.concentration), self.concentration)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        y = 1 / safe_conc + ones_like(z)
        where_nonzero = ops.where(y == 0, y, y * ops.log1p(safe_conc * z))
        return -self.scale.log() - ops.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        return ops.where(eq_zero, -z, -ops.log1p(safe_conc * z) / safe_conc)

    def log_cdf(self, value: Tensor) -> Tensor:
        return ops.log1p(-self.log_survival_function(value).exp())

    def cdf(self, value: Tensor) -> Tensor:
        return self.log_cdf(value).exp()

    def icdf(self, value: Tensor) -> Tensor:
        eq_zero, safe_conc = self._safe_concentration()
        logu = ops.log1p(-value)
        where_nonzero = self.loc + self.scale / safe_conc * ops.expm1(-safe_conc * logu)
        return ops.where(eq_zero, self.loc - self.scale * logu, where_nonzero)

    def _z(self, x):
        return (x - self.loc) / self.scale

    @property
    def mean(self) -> Tensor:
        valid = self.concentration < 1
        safe_conc = ops.where(valid, self.concentration, 0.5)
        return ops.where(valid, self.loc + self.scale / (1 - safe_conc), math.nan)

    @property
    def variance(self) -> Tensor:
        valid = self.concentration < 0.5
        safe_conc = ops.where(valid, self.concentration, 0.25)
        result = self.scale**2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc))
        return ops.where(valid, result, math.nan)

    def entropy(self) -> Tensor:
        ans = self.scale.log() + self.concentration + 1
        return ans.broadcast_to(self._batch_shape)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        upper = ops.where(self.concentration < 0, lower - self.scale / self.concentration, math.inf)
        return constraints.interval(lower, upper)
