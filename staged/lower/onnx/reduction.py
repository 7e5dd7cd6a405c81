"""Reductions: ReduceSum/Max/Min with the dims as an axes tensor, ArgMax/ArgMin."""
from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...autodiff import REGISTRY
from .model import lowering


def _reduce(op_type: str, bool_op: str):
    def lower(b, op, x):
        d, dims = op.inputs[0].aval.dtype, op.params["dims"]
        if not dims:
            return x  # NumPy reduces over no axes: the value itself
        axes = b.const(np.array(dims, np.int64))
        return b.kernel(bool_op if d is dt.bool_ else op_type, [x], d, post=[axes],
                        keepdims=int(op.params["keepdim"]))
    return lower


lowering(REGISTRY["reduce_sum"])(_reduce("ReduceSum", "ReduceMax"))  # a boolean sum is any()
lowering(REGISTRY["reduce_max"])(_reduce("ReduceMax", "ReduceMax"))
lowering(REGISTRY["reduce_min"])(_reduce("ReduceMin", "ReduceMin"))
lowering(REGISTRY["reduce_prod"])(_reduce("ReduceProd", "ReduceMin"))  # a boolean product: all()


def _arg(op_type: str):
    def lower(b, op, x):
        return b.kernel(op_type, [x], op.inputs[0].aval.dtype, out=dt.int64,
                        axis=op.params["dim"], keepdims=int(op.params["keepdim"]))
    return lower


lowering(REGISTRY["argmax"])(_arg("ArgMax"))
lowering(REGISTRY["argmin"])(_arg("ArgMin"))
