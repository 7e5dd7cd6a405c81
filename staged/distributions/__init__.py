"""``torch.distributions``' most used families: ``Categorical``, ``Bernoulli`` and
``Normal`` (sample, rsample, log_prob, entropy, mean, variance, cdf) and their
``kl_divergence``, with torch's parameter checks and torch's random draws after the same
seed: the reinforcement-learning and VAE examples written for torch run unchanged."""

from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .kl import kl_divergence
from .normal import Normal

__all__ = ["Bernoulli", "Categorical", "Distribution", "Normal", "kl_divergence"]
