"""Every random draw of ``staged.utils.data``, in one place.

``generator`` is ``None`` for staged's global generator (the one ``staged.manual_seed``
seeds) or an object with its interface, a NumPy ``Generator``: staged has no
``torch.Generator`` yet. The draws come in torch's sequence (the loader's seed at each
``iter()``, then a shuffling sampler's seed and a permutation from a generator made from
it), but not with torch's numbers: a later change makes these functions, and only these,
reproduce torch's stream bit for bit (``shared/notes/RNG.md``).
"""
from __future__ import annotations

import numpy as np

from ...eager.factories import generator as _global_generator


def _resolve(generator):
    return _global_generator() if generator is None else generator


def seed(generator=None) -> int:
    """A seed, as ``torch.empty((), dtype=torch.int64).random_(generator=generator)``."""
    return int(_resolve(generator).integers(0, 2 ** 63))


def new_generator(seed: int):
    """A fresh generator seeded with ``seed`` (``torch.Generator().manual_seed(seed)``)."""
    return np.random.default_rng(seed)


def randperm(n: int, generator=None) -> list:
    """``torch.randperm(n, generator=generator).tolist()``."""
    return _resolve(generator).permutation(n).tolist()


def randint(high: int, size: int, generator=None) -> list:
    """``torch.randint(high=high, size=(size,), generator=generator).tolist()``."""
    return _resolve(generator).integers(0, high, size).tolist()


def multinomial(weights: np.ndarray, num_samples: int, replacement: bool,
                generator=None) -> list:
    """``torch.multinomial(weights, num_samples, replacement, generator=generator).tolist()``
    for 1-D float64 ``weights``, with torch's checks; without replacement, torch's method
    (the top ``num_samples`` of ``weights / q``, ``q`` exponential), so zero weights come
    last rather than failing."""
    if not np.all(np.isfinite(weights) & (weights >= 0)):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if not weights.sum() > 0:
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    rng = _resolve(generator)
    if replacement:
        cdf = np.cumsum(weights) / weights.sum()
        cdf[-1] = 1.0
        return np.searchsorted(cdf, rng.random(num_samples), side="right").tolist()
    if num_samples > len(weights):
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    keys = weights / rng.exponential(size=len(weights))
    return np.argsort(-keys, kind="stable")[:num_samples].tolist()
