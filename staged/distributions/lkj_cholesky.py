"""LKJCholesky: Cholesky factors of correlation matrices (Lewandowski, Kurowicka and Joe,
2009)."""

from __future__ import annotations

import math

from .. import dtypes as dt
from ..eager import ops
from ..eager.factories import arange, randn, zeros
from ..eager.ops.composite import mvlgamma
from ..eager.tensor import Tensor
from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all


class LKJCholesky(Distribution):
    """``torch.distributions.LKJCholesky(dim, concentration=1.0, validate_args=None)``;
    draws are torch's onion method (its Beta and ``randn`` draws)."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(
                f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}."
            )
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = arange(self.dim - 1, dtype=self.concentration.dtype)
        offset = ops.cat([zeros(1, dtype=offset.dtype), offset])
        self._beta = Beta(offset + 0.5, marginal_conc.unsqueeze(-1) - 0.5 * offset)
        super().__init__(self.concentration.shape, (dim, dim), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(LKJCholesky, batch_shape, _instance, "concentration", "_beta")
        new.dim = self.dim
        return new

    def sample(self, sample_shape=()) -> Tensor:
        y = self._beta.sample(sample_shape).unsqueeze(-1)
        u_normal = randn(self._extended_shape(sample_shape), dtype=y.dtype).tril(-1)
        u_hypersphere = u_normal / u_normal.norm(dim=-1, keepdim=True)
        u_hypersphere[..., 0, :].fill_(0.0)
        w = y.sqrt() * u_hypersphere
        eps = dt.finfo(w.dtype).tiny
        diag_elems = (1 - (w**2).sum(dim=-1)).clamp(min=eps).sqrt()
        return w + diag_elems.diag_embed()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = arange(2, self.dim + 1)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = (order * diag_elems.log()).sum(dim=-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = ops.lgamma(alpha) * dm1
        numerator = mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        return unnormalized_log_pdf - (pi_constant + numerator - denominator)
