"""The Cholesky factor and the lower-triangular solve that MultivariateNormal needs, as
differentiable compositions of staged's ops (staged has no ``linalg.cholesky`` or
``linalg.solve_triangular``): one column (row) of stacked tensors per step, so autograd
and tracing see ordinary ops; for the small ``n`` of an event the loop is cheap."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..eager import ops
from ..eager.factories import eye, tensor, zeros
from ..eager.interceptor import current_interceptor
from ..eager.ops.composite import isclose
from ..eager.tensor import Tensor


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


def cholesky(a: Tensor) -> Tensor:
    """``torch.linalg.cholesky(a)``: the lower ``L`` with ``L @ L.mT == a``. It factors
    ``(a + a.mT) / 2`` (``a`` itself when symmetric), so the gradient is symmetric as
    torch's is; eagerly, a matrix that is not positive-definite raises torch's error."""
    n = a.shape[-1]
    a = (a + a.mT) * 0.5
    cols: list[Tensor] = []
    for j in range(n):
        v = a[..., :, j]
        if j:
            c = ops.stack(cols, -1)
            v = v - (c * c[..., j : j + 1, :]).sum(-1)
        pivot = v[..., j : j + 1]
        if current_interceptor() is None and not bool((pivot > 0).all()):
            raise RuntimeError(
                "linalg.cholesky: The factorization could not be completed because the "
                f"input is not positive-definite (the leading minor of order {j + 1} is "
                "not positive-definite)."
            )
        d = pivot.sqrt()
        parts = [zeros(*v.shape[:-1], j, dtype=v.dtype), d, v[..., j + 1 :] / d]
        cols.append(ops.cat(parts, -1))
    return ops.stack(cols, -1)


def solve_triangular(lower: Tensor, b: Tensor) -> Tensor:
    """``torch.linalg.solve_triangular(lower, b, upper=False)``: ``X`` with
    ``lower @ X == b`` by forward substitution (batch dims broadcast)."""
    n = lower.shape[-1]
    rows: list[Tensor] = []
    for i in range(n):
        r = b[..., i, :]
        if i:
            r = r - (lower[..., i, :i].unsqueeze(-1) * ops.stack(rows, -2)).sum(-2)
        rows.append(r / lower[..., i, i : i + 1])
    return ops.stack(rows, -2)


def cholesky_inverse(lower: Tensor) -> Tensor:
    """``torch.cholesky_inverse(lower)``: ``(lower @ lower.mT)^-1``."""
    inv = solve_triangular(lower, eye(lower.shape[-1], dtype=lower.dtype))
    return inv.mT @ inv
