"""Gradient clipping, parameters as one vector, and bringing weights in: PyTorch
``state_dict``s exported as NumPy arrays, ``.npz`` files and ``.safetensors`` files (with
the optional ``safetensors`` package)."""

from __future__ import annotations

import inspect
import os
import types
import warnings

import numpy as np

from ... import autodiff as ad
from ... import dtypes as dt
from ...eager import ops
from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor
from ..module import Module


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


def parameters_to_vector(parameters):
    """The parameters flattened and joined into one 1-D tensor."""
    return ops.cat([p.view(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D ``vec`` into the parameters' ``.data``."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    start = 0
    for p in parameters:
        n = p.numel()
        p.data = vec[start : start + n].view_as(p).data
        start += n


def load_numpy_state_dict(module, state_dict, strict=True):
    """Copy NumPy arrays (a ``{name: array}`` dict, or the path of an ``.npz`` file) into
    ``module``'s parameters and buffers, with ``load_state_dict``'s key checks.

    Example (export in PyTorch, load here):
        >>> np.savez("w.npz", **{k: v.numpy() for k, v in torch_model.state_dict().items()})
        >>> staged.nn.utils.load_numpy_state_dict(model, "w.npz")
    """
    if isinstance(state_dict, (str, os.PathLike)):
        with np.load(state_dict) as f:
            state_dict = {k: f[k] for k in f.files}
    return module.load_state_dict({k: np.asarray(v) for k, v in state_dict.items()}, strict)


def load_safetensors(module, path, strict=True):
    """Load a ``.safetensors`` file (e.g. written by ``safetensors.torch.save_file``) into
    ``module``; needs the ``safetensors`` package."""
    try:
        from safetensors.numpy import load_file
    except ImportError as e:
        raise ImportError(
            "load_safetensors needs the safetensors package (pip install safetensors)"
        ) from e
    return load_numpy_state_dict(module, load_file(os.fspath(path)), strict)


from . import rnn  # noqa: E402  (torch.nn.utils.rnn: padding and packing sequences)
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: E402
from .weight_norm import remove_weight_norm, weight_norm  # noqa: E402

# parametrize/parametrizations build on nn.modules, which imports this package
# (nn.modules.rnn: utils.rnn): staged/nn/__init__.py imports them, after nn.modules
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights  # noqa: E402
from .fusion import fuse_linear_bn_eval, fuse_linear_bn_weights  # noqa: E402


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` with its parameters and buffers left uninitialised
    (made on the meta device, then given empty storage), as torch's: the class must take
    a ``device`` argument."""
    if not issubclass(module_cls, Module):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    device = kwargs.pop("device", "cpu")
    return module_cls(*args, device="meta", **kwargs).to_empty(device=device)


from . import prune  # noqa: E402, F401  (torch.nn.utils.prune)
