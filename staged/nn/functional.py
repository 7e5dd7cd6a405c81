"""nn.functional: layers and losses as functions, composed from staged ops."""
from __future__ import annotations

from .. import dtypes as dt
from ..eager import ops
from ..eager.factories import arange
from ..eager.ops.indexing import check_range
from ..eager.ops.layers import (avg_pool1d, avg_pool2d, batch_norm, conv1d, conv2d,  # noqa: F401
                            dropout, embedding, layer_norm, max_pool1d, max_pool2d, one_hot,
                            pad, unfold)
from ..eager.ops.reduction import in_float32
from ..eager.tensor import Tensor

globals().update(ops.table.functional())  # relu, tanh, gelu ... (staged/eager/ops/table.py)


def linear(input, weight, bias=None):
    """``input @ weight.T + bias``."""
    if input.ndim > 2 and weight.ndim == 2:  # one 2-D matmul: NumPy is slow on a broadcast weight
        flat = ops.matmul(input.reshape(-1, input.shape[-1]), weight.mT)
        out = flat.reshape(*input.shape[:-1], weight.shape[0])
    else:
        out = ops.matmul(input, weight.mT if weight.ndim == 2 else weight)
    return out if bias is None else out + bias


def softmax(input, dim):
    return ops.softmax(input, dim)


def log_softmax(input, dim):
    return ops.log_softmax(input, dim)


def _reduce(loss, reduction, count=None):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / count if count is not None else loss.mean()
    raise ValueError(f"{reduction} is not a valid value for reduction")


@in_float32
def mse_loss(input, target, reduction="mean"):
    d = input - target
    return _reduce(d * d, reduction)


def _class_dim_last(x):
    """(N, C, d1, ...) -> (N*d1*..., C), so losses handle one class dim."""
    if x.ndim <= 2:
        return x
    perm = (0,) + tuple(range(2, x.ndim)) + (1,)
    return ops.reshape(ops.permute(x, perm), -1, x.shape[1])


def _check_targets(target, n):
    if target.dtype.is_floating_point or target.dtype.is_complex:
        return
    if target.ndim != 1 or target.shape[0] != n:
        raise ValueError(f"Expected input batch_size ({n}) to match target batch_size "
                         f"({target.shape[0] if target.ndim else 0}).")


def _per_element(loss, input, reduction):
    """An unreduced loss of (N, C, d1, ...) inputs has shape (N, d1, ...), as PyTorch's."""
    if reduction != "none" or input.ndim <= 2:
        return loss
    return ops.reshape(loss, (input.shape[0],) + tuple(input.shape[2:]))


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log likelihood of class-index targets, given log-probabilities."""
    return _per_element(_nll(_class_dim_last(input), ops.reshape(target, -1), weight,
                             ignore_index, reduction), input, reduction)


def _nll(logp, target, weight, ignore_index, reduction, smoothing=0.0):
    n, c = logp.shape
    _check_targets(target, n)
    check_range(target.to(dt.int64), 0, c, IndexError, "Target {} is out of bounds.",
                skip=ignore_index)
    onehot = arange(c) == ops.unsqueeze(target, 1)
    picked = ops.where(onehot, logp, 0.0).sum(1)
    valid = (target != ignore_index).to(logp.dtype)
    w = valid
    if weight is not None:
        w = ops.where(onehot, weight, 0.0).sum(1) * valid
    loss = -picked * w
    if smoothing:
        cls_w = weight if weight is not None else 1.0
        smooth = -(logp * cls_w).sum(1) * valid / c
        loss = loss * (1 - smoothing) + smooth * smoothing
    return _reduce(loss, reduction, w.sum() if reduction == "mean" else None)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """Cross entropy of logits against class indices (int64) or class probabilities.

    Example:
        >>> loss = F.cross_entropy(model(x), y)
    """
    if not isinstance(target, Tensor):
        raise TypeError(f"cross_entropy(): target must be a Tensor, got "
                        f"{type(target).__name__}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    logp = _class_dim_last(ops.log_softmax(input, 1 if input.ndim > 1 else 0))
    if target.dtype.is_floating_point:
        c = logp.shape[-1]
        probs = _class_dim_last(target)
        if label_smoothing:
            probs = probs * (1 - label_smoothing) + label_smoothing / c
        if weight is not None:  # per class; "mean" still divides by the batch size
            probs = probs * weight
        return _per_element(_reduce(-(logp * probs).sum(-1), reduction), input, reduction)
    if target.dtype is dt.bool_:
        raise RuntimeError("expected scalar type Long but found Bool")
    return _per_element(_nll(logp, ops.reshape(target, -1), weight, ignore_index, reduction,
                             label_smoothing), input, reduction)
