"""StudentT: Student's t with ``df`` degrees of freedom, location and scale."""

from __future__ import annotations

import math

from ..eager import ops
from ..eager.tensor import Tensor
from . import constraints
from .distribution import Distribution
from .chi2 import Chi2
from .utils import broadcast_all, standard_normal


class StudentT(Distribution):
    """``torch.distributions.StudentT(df, loc=0.0, scale=1.0, validate_args=None)``;
    ``rsample`` is torch's ``loc + scale * X / sqrt(Z / df)`` with ``X`` normal and ``Z``
    a Chi2 draw (torch's draws, Note [torch's C++ samplers] in ``_samplers.py``)."""

    arg_constraints = {
        "df": constraints.positive,
        "loc": constraints.real,
        "scale": constraints.positive,
    }
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        names = ("df", "loc", "scale", "_chi2")
        return self._expand_params(StudentT, batch_shape, _instance, *names)

    @property
    def mean(self) -> Tensor:
        return self.loc.masked_fill(self.df <= 1, math.nan)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2)
        m = ops.where(df > 2, finite, df).masked_fill((df <= 2) & (df > 1), math.inf)
        return m.masked_fill(df <= 1, math.nan)

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        x = standard_normal(shape, self.df.dtype)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * (x * (z / self.df).rsqrt())

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (
            self.scale.log()
            + 0.5 * self.df.log()
            + 0.5 * math.log(math.pi)
            + ops.lgamma(0.5 * self.df)
            - ops.lgamma(0.5 * (self.df + 1.0))
        )
        return -0.5 * (self.df + 1.0) * ops.log1p(y**2.0 / self.df) - z

    def entropy(self) -> Tensor:
        df = self.df
        lbeta = ops.lgamma(0.5 * df) + math.lgamma(0.5) - ops.lgamma(0.5 * (df + 1))
        return (
            self.scale.log()
            + 0.5 * (df + 1) * (ops.digamma(0.5 * (df + 1)) - ops.digamma(0.5 * df))
            + 0.5 * df.log()
            + lbeta
        )
