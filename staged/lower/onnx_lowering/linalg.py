"""matmul: MatMul (batched over the leading dims, as NumPy)."""

from __future__ import annotations

from ...autodiff import REGISTRY
from .model import lowering, unsupported

unsupported("matmul", {"complex": "ONNX's MatMul has no complex element types"})


@lowering(REGISTRY["matmul"])
def _matmul(b, op, x, y):
    return b.kernel("MatMul", [x, y], op.out.aval.dtype)
