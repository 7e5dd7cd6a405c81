"""What the multivariate normals need beyond ``staged.linalg``'s Cholesky factor and
triangular solve: ``cholesky_inverse`` and the batched matrix-vector product."""

from __future__ import annotations

from ..eager.factories import eye
from ..eager.tensor import Tensor
from ..linalg import solve_triangular


def cholesky_inverse(lower: Tensor) -> Tensor:
    """``torch.cholesky_inverse(lower)``: ``(lower @ lower.mT)^-1``."""
    inv = solve_triangular(lower, eye(lower.shape[-1], dtype=lower.dtype), upper=False)
    return inv.mT @ inv


def batch_mv(bmat: Tensor, bvec: Tensor) -> Tensor:
    """torch's ``_batch_mv``: matrix times vector, broadcast over batch dims."""
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)
