"""Graph IR -> ONNX (standard ``ai.onnx`` ops only), for onnxruntime, IREE and others."""

from .model import (
    DEFAULT_OPSET,
    EXTERNAL_MIN_BYTES,
    LOWERINGS,
    OPSETS,
    TABLE,  # noqa: F401
    ExportError,
    Sym,
    check_graph,
    lowering,
    to_onnx,
    unsupported,
)
from . import elementwise, indexing, linalg, nn, random, reduction, shape  # noqa: F401  (register)
from . import collective  # noqa: F401
