"""Bringing weights in: PyTorch ``state_dict``s exported as NumPy arrays, ``.npz`` files
and ``.safetensors`` files (with the optional ``safetensors`` package)."""
from __future__ import annotations

import os

import numpy as np


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
        raise ImportError("load_safetensors needs the safetensors package "
                          "(pip install safetensors)") from e
    return load_numpy_state_dict(module, load_file(os.fspath(path)), strict)
