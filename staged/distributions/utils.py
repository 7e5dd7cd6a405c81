"""torch.distributions.utils: parameters as tensors, and probabilities <-> logits."""

from __future__ import annotations

import numbers

from .. import dtypes as dt
from ..eager import ops
from ..eager.factories import tensor
from ..eager.tensor import Tensor


def broadcast_all(*values) -> tuple:
    """The values as tensors of one shape; Python numbers take the tensors' dtype (the
    default one without tensors)."""
    like = next((v for v in values if isinstance(v, Tensor)), None)
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, torch.Tensor")
    dtype = like.dtype if like is not None else dt.get_default_dtype()
    tensors = [v if isinstance(v, Tensor) else tensor(v, dtype=dtype) for v in values]
    return tuple(ops.broadcast_tensors(*tensors))


def clamp_probs(probs: Tensor) -> Tensor:
    eps = dt.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    ps = clamp_probs(probs)
    return ps.log() - ops.log1p(-ps) if is_binary else ps.log()


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    return logits.sigmoid() if is_binary else logits.softmax(-1)


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """torch's ``_sum_rightmost``: ``value`` summed over its ``dim`` last dims."""
    return value if dim == 0 else value.reshape(*value.shape[:-dim], -1).sum(-1)
