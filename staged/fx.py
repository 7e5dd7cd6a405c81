"""``staged.fx``: ``wrap``, which libraries call at import to mark a function as a leaf of
torch.fx's symbolic tracing (torchvision's Swin Transformer and stochastic depth). staged
has no symbolic tracer (``staged.compile`` traces by running), so there is nothing to mark."""

from __future__ import annotations


def wrap(fn_or_name):
    """``fn_or_name``, unchanged (torch's ``wrap`` returns it too)."""
    return fn_or_name
