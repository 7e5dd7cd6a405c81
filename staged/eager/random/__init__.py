"""``staged.random``: PyTorch's CPU random streams (``torch.random``) rebuilt on NumPy.

After the same seed, staged's random functions give torch 2.13's values bit for bit: the
mt19937 generator (``generator.py``), the normal paths (``normal.py``, with avx_mathfun's
polynomials in ``avx_mathfun.py`` and exact fused multiply-adds in ``fma.py``), the
distributions (``distributions.py``) and a tensor's fill order (``fills.py``). Facts and
limits: shared/notes/RNG.md.
"""

from .generator import (
    Generator,
    default_generator,
    fork_rng,
    get_rng_state,  # noqa: F401
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
