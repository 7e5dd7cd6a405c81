"""``torch.onnx.symbolic_helper``: ``parse_args``, the decorator of TorchScript-based export's
symbolic functions (torchvision declares its operators' ONNX forms with it at import).
staged's exporter writes ONNX from its own traced graph and calls no symbolic function, so
the decorator returns the function as it is."""

from __future__ import annotations


def parse_args(*arg_descriptors):
    """A decorator that returns the symbolic function unchanged."""

    def decorator(fn):
        return fn

    return decorator
