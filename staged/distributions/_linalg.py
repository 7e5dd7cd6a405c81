"""What MultivariateNormal needs beyond ``staged.linalg``'s Cholesky factor and triangular
solve (compositions of staged's ops, one column or row per step: for the small ``n`` of
an event the loop is cheap): torch's positive-definite check and ``cholesky_inverse``."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..eager.factories import eye, tensor, zeros
from ..eager.ops.composite import isclose
from ..eager.tensor import Tensor
from ..linalg import solve_triangular


def is_positive_definite(a: Tensor) -> Tensor:
    """torch's ``PositiveDefinite()`` check, per matrix: square, symmetric to
    ``isclose(atol=1e-6)``, and a Cholesky factorisation that completes."""
    n = a.shape[-1]
    if a.shape[-2] != n:
        return zeros(a.shape[:-2], dtype=dt.bool_)
    sym = isclose(a, a.mT, atol=1e-6).all(-1).all(-1)
    if not bool(sym.all()):
        return sym
    flat = a.detach().numpy().reshape(-1, n, n)
    return tensor([_factors(m) for m in flat], dtype=dt.bool_).reshape(a.shape[:-2])


def _factors(m: np.ndarray) -> bool:
    try:
        np.linalg.cholesky(m)
    except np.linalg.LinAlgError:
        return False
    return True


def cholesky_inverse(lower: Tensor) -> Tensor:
    """``torch.cholesky_inverse(lower)``: ``(lower @ lower.mT)^-1``."""
    inv = solve_triangular(lower, eye(lower.shape[-1], dtype=lower.dtype), upper=False)
    return inv.mT @ inv
