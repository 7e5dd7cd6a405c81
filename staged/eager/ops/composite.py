"""Composites over primitives: no rules of their own, differentiated through their parts."""
from __future__ import annotations

from .reduction import logsumexp, sum


def log_softmax(x, dim):
    return x - logsumexp(x, dim, keepdim=True)


def softmax(x, dim):
    e = (x - x.amax(dim, keepdim=True).detach()).exp()
    return e / sum(e, dim, keepdim=True)
