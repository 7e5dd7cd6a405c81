"""The (seed, counter) state of the counter-based generator behind compiled dropout (Note
[counter-based RNG] in autodiff/random.py): one int64[2] tensor for the process, which
compiled steps keep as state, so ``manual_seed`` writes into that same tensor."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor


def _state(seed: int) -> np.ndarray:
    return np.array([int(seed) & (2 ** 64 - 1), 0], np.uint64).view(np.int64)


_rng_state = Tensor._wrap(_state(0), False)


def reseed(seed: int) -> None:
    _rng_state._payload = _state(seed)  # the same tensor: compiled steps see the reseed


def rng_state() -> Tensor:
    """The int64[2] (seed, counter) tensor dropout draws from and advances in place."""
    return _rng_state
