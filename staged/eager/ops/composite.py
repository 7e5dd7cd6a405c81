"""Composites over primitives: no rules of their own, differentiated through their parts."""
from __future__ import annotations

import math

from .elementwise import erf, where
from .reduction import logsumexp, sum


def log_softmax(x, dim):
    return x - logsumexp(x, dim, keepdim=True)


def softmax(x, dim):
    if x.numel() == 0:  # nothing to normalize (and an empty dim has no max)
        return x.exp()
    e = (x - x.amax(dim, keepdim=True).detach()).exp()
    return e / sum(e, dim, keepdim=True)


def _in_float32(fn):
    """Half-precision inputs compute in float32 and round once, as PyTorch's CPU kernels
    do for these activations (exp(20) overflows float16)."""
    def op(x, *args, **kwargs):
        if x.dtype.is_floating_point and x.dtype.itemsize < 4:
            return fn(x.float(), *args, **kwargs).to(x.dtype)
        return fn(x, *args, **kwargs)
    op.__name__, op.__doc__ = fn.__name__, fn.__doc__
    return op


@_in_float32
def gelu(x, approximate="none"):
    """``x * Phi(x)`` exactly (through erf), or PyTorch's tanh approximation."""
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return x * 0.5 * (inner.tanh() + 1)
    if approximate != "none":
        raise RuntimeError(f"approximate argument must be either none or tanh, got "
                           f"{approximate!r}")
    return x * 0.5 * (erf(x * (1 / math.sqrt(2.0))) + 1)


@_in_float32
def silu(x):
    return x * x.sigmoid()


@_in_float32
def softplus(x, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta``, and ``x`` itself where ``beta x > threshold``.
    The exp sees 0 where the linear branch is taken, so its gradient there stays 0, not
    0 * inf."""
    bx = x * beta
    linear = bx > threshold
    soft = bx.where(~linear, 0).exp().log1p() / beta
    return where(linear, x, soft)
