"""ContinuousBernoulli: the continuous relaxation of Bernoulli on [0, 1] (Loaiza-Ganem and
Cunningham, 2019)."""

from __future__ import annotations

import math
import numbers

from ..eager import ops
from ..eager.factories import ones_like, rand, zeros_like
from ..eager.grad_mode import no_grad
from ..eager.interceptor import current_interceptor
from ..eager.tensor import Tensor
from ..nn import functional as F
from . import constraints
from .bernoulli import ProbsOrLogits
from .exp_family import ExponentialFamily
from .utils import broadcast_all, clamp_probs, lazy_property, logits_to_probs


class ContinuousBernoulli(ProbsOrLogits, ExponentialFamily):
    """``torch.distributions.ContinuousBernoulli(probs=None, logits=None, lims=(0.499,
    0.501), validate_args=None)``; near ``probs = 0.5`` (inside ``lims``) the normaliser and
    moments are torch's Taylor expansions; draws invert the CDF at ``rand`` draws
    (torch's)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        scalar = isinstance(probs if probs is not None else logits, numbers.Number)
        self._given(probs, logits)
        if probs is not None:
            checked = validate_args is not None and current_interceptor() is None
            if checked and not bool(self.arg_constraints["probs"].check(self.probs).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        self._lims = lims
        super().__init__(() if scalar else self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        cls = ContinuousBernoulli
        new = self._expand_params(cls, batch_shape, _instance, "probs", "logits")
        new._lims = self._lims
        return new

    @lazy_property
    def probs(self) -> Tensor:
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _outside_unstable_region(self):
        return self.probs.le(self._lims[0]) | self.probs.gt(self._lims[1])

    def _cut_probs(self):
        return ops.where(
            self._outside_unstable_region(), self.probs, self._lims[0] * ones_like(self.probs)
        )

    def _cont_bern_log_norm(self):
        """The log normaliser ``log(|log1p(-p) - log p| / |1 - 2p|)``, a Taylor series near 1/2."""
        cut = self._cut_probs()
        below = ops.where(cut.le(0.5), cut, zeros_like(cut))
        above = ops.where(cut.ge(0.5), cut, ones_like(cut))
        log_norm = (ops.log1p(-cut) - cut.log()).abs().log() - ops.where(
            cut.le(0.5), ops.log1p(-2.0 * below), (2.0 * above - 1.0).log()
        )
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return ops.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self) -> Tensor:
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / (ops.log1p(-cut) - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return ops.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    @property
    def variance(self) -> Tensor:
        cut = self._cut_probs()
        vars_ = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / (
            ops.log1p(-cut) - cut.log()
        ).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return ops.where(self._outside_unstable_region(), vars_, taylor)

    def sample(self, sample_shape=()) -> Tensor:
        u = rand(self._extended_shape(sample_shape), dtype=self.probs.dtype)
        with no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=()) -> Tensor:
        return self.icdf(rand(self._extended_shape(sample_shape), dtype=self.probs.dtype))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        bce = F.binary_cross_entropy_with_logits(logits, value, reduction="none")
        return -bce + self._cont_bern_log_norm()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = ops.where(self._outside_unstable_region(), cdfs, value)
        return ops.where(
            value.le(0.0),
            zeros_like(value),
            ops.where(value.ge(1.0), ones_like(value), unbounded),
        )

    def icdf(self, value: Tensor) -> Tensor:
        cut = self._cut_probs()
        inverted = (ops.log1p(-cut + value * (2.0 * cut - 1.0)) - ops.log1p(-cut)) / (
            cut.log() - ops.log1p(-cut)
        )
        return ops.where(self._outside_unstable_region(), inverted, value)

    def entropy(self) -> Tensor:
        log_probs0 = ops.log1p(-self.probs)
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self) -> tuple:
        return (self.logits,)

    def _log_normalizer(self, x):
        lo, hi = self._lims[0] - 0.5, self._lims[1] - 0.5
        out_unst_reg = x.le(lo) | x.gt(hi)
        cut_nat_params = ops.where(out_unst_reg, x, lo * ones_like(x))
        log_norm = ops.expm1(cut_nat_params).abs().log() - cut_nat_params.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return ops.where(out_unst_reg, log_norm, taylor)
