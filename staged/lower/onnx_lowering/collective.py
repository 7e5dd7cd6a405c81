"""Collectives have no ONNX form: exporting a step that calls one fails, naming the op and
the user's line."""

from ...autodiff.collective import COLLECTIVES
from ...autodiff.primitive import CLASSES
from .model import unsupported

WHY = "ONNX has no collective operators: export the model itself (ddp.module), not the DDP step"
for _prim in COLLECTIVES:
    unsupported(_prim.name, dict.fromkeys(CLASSES, WHY))
