"""The (seed, counter) state of the counter-based generator behind compiled dropout and
the draws of ``rand``/``randn`` inside a traced step (Note [counter-based RNG] in
autodiff/random.py): one int64[2] tensor for the process, which compiled steps keep as
state, so ``manual_seed`` writes into that same tensor."""

from __future__ import annotations

import math

import numpy as np

from ... import autodiff as ad
from ..grad_mode import no_grad
from ..tensor import Tensor


def _state(seed: int) -> np.ndarray:
    return np.array([int(seed) & (2**64 - 1), 0], np.uint64).view(np.int64)


_rng_state = Tensor._wrap(_state(0), False)


def reseed(seed: int) -> None:
    _rng_state._payload = _state(seed)  # the same tensor: compiled steps see the reseed


def swap(state: np.ndarray) -> np.ndarray:
    """Make ``state`` (an int64[2] array) the (seed, counter) pair; returns the one it
    replaces."""
    old, _rng_state._payload = _rng_state._payload, state
    return old


def rng_state() -> Tensor:
    """The int64[2] (seed, counter) tensor dropout draws from and advances in place."""
    return _rng_state


_ADVANCE = np.array([0, 1], np.int64)


def rand_uniform(shape, dtype) -> Tensor:
    """Uniform ``[0, 1)`` numbers from the counter-based generator, advancing its counter;
    identical eagerly and in compiled steps."""
    state = rng_state()
    u = ad.uniform(state, shape=tuple(shape), dtype=dtype)
    with no_grad():
        state.add_(Tensor._wrap(_ADVANCE, False))
    return u


def rand_normal(shape, dtype) -> Tensor:
    """Standard normals from two counter-based uniforms (Box-Muller)."""
    r = ((1 - rand_uniform(shape, dtype)).log() * -2).sqrt()
    return r * (rand_uniform(shape, dtype) * (2 * math.pi)).cos()
