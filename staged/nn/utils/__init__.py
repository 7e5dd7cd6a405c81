"""Gradient clipping (``clip_grad.py``), parameters as one vector, and bringing weights
in: PyTorch ``state_dict``s exported as NumPy arrays, ``.npz`` files and ``.safetensors``
files (with the optional ``safetensors`` package)."""

from __future__ import annotations

import inspect
import os

import numpy as np

from ...eager import ops
from ...eager.tensor import Tensor
from ..module import Module
from .clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_  # noqa: F401
from .clip_grad import clip_grads_with_norm_, get_total_norm  # noqa: F401


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


from . import prune, stateless  # noqa: E402, F401  (torch.nn.utils.prune, .stateless)
