"""``torch.onnx.symbolic_opset11``: TorchScript-based export's opset-11 symbolic functions,
which symbolic functions of custom operators call on that exporter's graph. staged's
exporter has no such graph (it writes ONNX from its own traced one), so none is here:
the module exists for the libraries that import it (torchvision), and asking it for a
function raises AttributeError saying so."""

from __future__ import annotations


def __getattr__(name: str):
    raise AttributeError(
        f"torch.onnx.symbolic_opset11.{name}: staged's ONNX exporter writes its own traced "
        "graph and runs no TorchScript symbolic functions"
    )
