"""``staged.fx``: ``wrap``, which libraries call at import to mark a function as a leaf of
torch.fx's symbolic tracing (torchvision's Swin Transformer and stochastic depth). staged
has no symbolic tracer (``staged.compile`` traces by running), so there is nothing to mark,
and no ``GraphModule`` is ever made (the class exists for the libraries that name it)."""

from __future__ import annotations


def wrap(fn_or_name):
    """``fn_or_name``, unchanged (torch's ``wrap`` returns it too)."""
    return fn_or_name


class GraphModule:
    """torch.fx's traced Module. staged has no symbolic tracer (``staged.compile`` traces
    by running), so making one raises; libraries name the class in annotations and
    ``isinstance`` checks, which are False."""

    def __init__(self, *args, **kwargs) -> None:
        raise NotImplementedError(
            "torch.fx.GraphModule: staged has no torch.fx symbolic tracer; "
            "staged.compile(fn) traces a function by running it"
        )
