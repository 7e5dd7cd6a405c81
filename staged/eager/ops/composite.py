"""Composites over primitives: no rules of their own, differentiated through their parts."""

from __future__ import annotations

import math

from .elementwise import erf, where
from .reduction import in_float32, logsumexp, sum


@in_float32
def log_softmax(x, dim):
    return x - logsumexp(x, dim, keepdim=True)


@in_float32
def softmax(x, dim):
    if x.numel() == 0:  # nothing to normalize (and an empty dim has no max)
        return x.exp()
    e = (x - x.amax(dim, keepdim=True).detach()).exp()
    return e / sum(e, dim, keepdim=True)


@in_float32
def gelu(x, approximate="none"):
    """``x * Phi(x)`` exactly (through erf), or PyTorch's tanh approximation."""
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return x * 0.5 * (inner.tanh() + 1)
    if approximate != "none":
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    return x * 0.5 * (erf(x * (1 / math.sqrt(2.0))) + 1)


@in_float32
def silu(x):
    return x * x.sigmoid()


@in_float32
def softplus(x, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta``, and ``x`` itself where ``beta x > threshold``.
    The exp sees 0 where the linear branch is taken, so its gradient there stays 0, not
    0 * inf."""
    bx = x * beta
    linear = bx > threshold
    soft = bx.where(~linear, 0).exp().log1p() / beta
    return where(linear, x, soft)
