"""torch.distributions.utils: parameters as tensors, probabilities <-> logits, lazily
derived parameters, and the lower-triangle <-> vector maps."""

from __future__ import annotations

import functools
import numbers

from .. import dtypes as dt
from ..eager import ops
from ..eager.factories import arange, empty, tensor, zeros
from ..eager.grad_mode import enable_grad
from ..eager.tensor import Tensor

euler_constant = 0.57721566490153286060  # Euler-Mascheroni constant


def broadcast_all(*values) -> tuple:
    """The values as tensors of one shape; Python numbers take the first tensor's dtype
    (the default one without tensors)."""
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError(
            "Input arguments must all be instances of Number, torch.Tensor or objects "
            "implementing __torch_function__."
        )
    like = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = like.dtype if like is not None else dt.get_default_dtype()
    tensors = [v if isinstance(v, Tensor) else tensor(v, dtype=dtype) for v in values]
    return tuple(ops.broadcast_tensors(*tensors))


def standard_normal(shape, dtype) -> Tensor:
    """torch's ``_standard_normal``: ``empty(shape).normal_()`` (torch's draw)."""
    return empty(tuple(shape), dtype=dtype).normal_()


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """torch's ``_sum_rightmost``: ``value`` summed over its ``dim`` last dims."""
    return value if dim == 0 else value.reshape(*value.shape[: value.dim() - dim], -1).sum(-1)


def clamp_probs(probs: Tensor) -> Tensor:
    eps = dt.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    ps = clamp_probs(probs)
    return ps.log() - ops.log1p(-ps) if is_binary else ps.log()


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    return logits.sigmoid() if is_binary else logits.softmax(-1)


class lazy_property:
    """torch's ``lazy_property``: computed on first read (with grad enabled, so a value
    first read inside ``no_grad`` still carries its graph) and then stored on the
    instance; the class attribute reads as a property (``isinstance(..., property)``)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)  # type: ignore[arg-type]

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _LazyPropertyAndProperty(self.wrapped)
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _LazyPropertyAndProperty(lazy_property, property):
    def __init__(self, wrapped):
        property.__init__(self, wrapped)


def _tril_mask(n: int, diag: int) -> Tensor:
    r = arange(n)
    return r < r.reshape(-1, 1) + (diag + 1)


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The lower triangle (from diagonal ``diag``) of the last two dims, row by row."""
    n = mat.shape[-1]
    if not -n <= diag < n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    return mat[..., _tril_mask(n, diag)]


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The inverse of ``tril_matrix_to_vec``: zeros above diagonal ``diag``."""
    k = 1 + 2 * diag
    n = (-k + (k**2 + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if round(n) - n > dt.finfo(vec.dtype).eps:
        raise ValueError(
            f"The size of last dimension is {vec.shape[-1]} which cannot be expressed as "
            "the lower triangular part of a square D x D matrix."
        )
    n = round(n)
    mask = _tril_mask(n, diag).reshape(-1)
    flat = zeros(*vec.shape[:-1], n * n, dtype=vec.dtype)
    index = arange(n * n)[mask].expand(*vec.shape[:-1], -1)
    return flat.scatter(-1, index, vec).reshape(*vec.shape[:-1], n, n)
