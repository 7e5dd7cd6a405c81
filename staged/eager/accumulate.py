"""Gradient accumulation into a leaf's ``.grad`` (PyTorch's gradient layout rules)."""
from __future__ import annotations

import numpy as np

from .grad_mode import _state


def accumulate_grad(var, g) -> None:
    """``.grad`` is set to ``g`` the first time; later gradients are added in place, or
    out of place (a new tensor with a graph) when backward runs with create_graph=True."""
    if g is None:
        return
    if var._grad is None:
        if not _state.grad_enabled:
            g = g.detach()
            p = g._payload
            if type(p) is np.ndarray and (p.base is not None or not p.flags.writeable):
                g._payload = p.copy()  # own the memory: it is accumulated into in place later
        var._grad = g
    elif _state.grad_enabled:
        var._grad = var._grad + g
    else:
        var._grad.add_(g)
    if var._post_acc_hooks:
        for hook in tuple(var._post_acc_hooks.values()):
            hook(var)
