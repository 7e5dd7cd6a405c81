"""What torch's higher-order ops share: ``dim`` made non-negative as torch's
``canonicalize_dim`` makes it (a 0-dim tensor counts as one dim)."""

from __future__ import annotations


def canonicalize_dim(rank: int, dim):
    """``dim`` in ``[0, rank)``; an IndexError with torch's message outside
    ``[-rank, rank)``."""
    rank = max(rank, 1)
    if 0 <= dim < rank:
        return dim
    wrapped = dim + rank if dim < 0 else dim
    if not 0 <= wrapped < rank:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], "
            f"but got {dim})"
        )
    return wrapped
