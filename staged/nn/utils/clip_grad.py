"""``torch.nn.utils.clip_grad``: gradient clipping by total norm or by value, in place."""

from __future__ import annotations

import types
import warnings

import numpy as np

from ... import autodiff as ad
from ... import dtypes as dt
from ...eager import ops
from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_"]


def _tensors(parameters) -> list:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type``-norm of the tensors' norms (0-d; 0. for none). With
    ``error_if_nonfinite`` a NaN or infinite total raises ``RuntimeError``: eagerly at
    once, in a compiled step as its recorded check (no Python branch on the value)."""
    tensors = _tensors(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return Tensor._wrap(np.asarray(0.0, dt.get_default_dtype().np))
    with no_grad():
        total = ops.norm(ops.stack([ops.norm(t, norm_type) for t in tensors]), norm_type)
        if error_if_nonfinite:
            bad = ad.cast(ops.reshape(ops.logical_not(ops.isfinite(total)), (1,)), dtype=dt.int64)
            ad.check(
                bad,
                error="RuntimeError",
                lo=0,
                hi=1,
                message=(
                    f"The total norm of order {norm_type} for gradients from `parameters` is "
                    f"non-finite, so it cannot be clipped. To disable this error and scale the "
                    f"gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
                ),
            )
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients in place by ``min(max_norm / (total_norm + 1e-6), 1)``: always
    multiplied, never branched on, so it compiles."""
    grads = [p.grad for p in _tensors(parameters) if p.grad is not None]
    if not grads:
        return
    with no_grad():
        coef = ops.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clip the gradients' total ``norm_type``-norm to ``max_norm`` in place; returns the
    total norm before clipping (a 0-d tensor)."""
    is_generator = isinstance(parameters, types.GeneratorType)
    parameters = _tensors(parameters)
    if is_generator and not parameters:
        warnings.warn(
            "`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=2
        )
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp each gradient to ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _tensors(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """``clip_grad_norm_``'s old name: warns ``FutureWarning``, as torch's."""
    warnings.warn(
        "`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
        "`torch.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)
