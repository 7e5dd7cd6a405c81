"""``torch.distributions``' most used families: ``Categorical``, ``OneHotCategorical``,
``Bernoulli``, ``Normal``, ``LogNormal``, ``MultivariateNormal``, ``Uniform``,
``Exponential``, ``Laplace`` and ``Independent`` (sample, rsample, log_prob, entropy,
mean, mode, variance, and cdf/icdf where torch has them) and their ``kl_divergence`` for
pairs of one family, with torch's parameter checks and torch's random draws after the
same seed: the reinforcement-learning and VAE examples written for torch run unchanged.
The modules have torch's names, so ``torch.distributions.uniform`` resolves under
``staged.as_torch()``."""

from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .exponential import Exponential
from .independent import Independent
from .kl import kl_divergence
from .laplace import Laplace
from .log_normal import LogNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .uniform import Uniform

__all__ = [
    "Bernoulli",
    "Categorical",
    "Distribution",
    "Exponential",
    "Independent",
    "Laplace",
    "LogNormal",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "Uniform",
    "kl_divergence",
]
