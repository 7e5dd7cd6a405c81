"""Every random draw of ``staged.utils.data``, in one place, from torch's streams.

``generator`` is ``None`` for staged's default generator (the one ``staged.manual_seed``
seeds) or a ``staged.Generator``. The draws come in torch's sequence and with torch's
numbers (the loader's seed at each ``iter()``, then a shuffling sampler's seed and a
permutation from a generator made from it), so ``DataLoader(shuffle=True)`` gives torch's
orders after the same seed.
"""

from __future__ import annotations

import numpy as np

from ...eager import factories
from ...eager.random import distributions
from ...eager.random.generator import Generator, default_generator


def _resolve(generator):
    return default_generator if generator is None else generator


def seed(generator=None) -> int:
    """A seed, as ``torch.empty((), dtype=torch.int64).random_(generator=generator)``."""
    return int(distributions.random_bits(_resolve(generator), 1, np.int64)[0])


def new_generator(seed: int):
    """A fresh generator seeded with ``seed`` (``torch.Generator().manual_seed(seed)``)."""
    return Generator().manual_seed(seed)


def randperm(n: int, generator=None) -> list:
    """``torch.randperm(n, generator=generator).tolist()``."""
    return distributions.randperm(_resolve(generator), n).tolist()


def randint(high: int, size: int, generator=None) -> list:
    """``torch.randint(high=high, size=(size,), generator=generator).tolist()``."""
    return distributions.integers(_resolve(generator), size, 0, high).tolist()


def multinomial(weights: np.ndarray, num_samples: int, replacement: bool, generator=None) -> list:
    """``torch.multinomial(weights, num_samples, replacement, generator=generator).tolist()``
    for 1-D float64 ``weights``, with torch's checks."""
    return factories.multinomial(
        factories.tensor(weights), num_samples, replacement, generator=generator
    ).tolist()
