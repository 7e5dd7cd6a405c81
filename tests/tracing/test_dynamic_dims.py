"""staged.tracing.dynamic: the graph of a function traced at two batch sizes, generalized
into one with symbolic sizes (the analysis staged.compile(dynamic=True) and the ONNX
exporter's dynamic_axes share)."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from staged.tracing.capture import capture
from staged.tracing.dynamic import DynamicError, Sym, SymConst, generalize, resize, substitute


def _generalized(fn, x):
    def retrace(n):
        return capture(fn, resize(x, {0: n})).graph

    g = capture(fn, x).graph
    return substitute(g, *generalize(g, x.shape[0], retrace))


def test_shapes_params_and_constants_that_follow_the_batch():
    w = staged.randn(6, 2)

    def fn(x):
        flat = x.reshape(x.shape[0] * 2, 3)  # 2 * batch rows
        return (flat.reshape(x.shape[0], 6) @ w).mean(), x.var(0)

    g = _generalized(fn, staged.randn(4, 6))
    b = Sym("batch")
    assert g.inputs[0].value.aval.shape == (b, 6)
    reshapes = [op for op in g.ops if op.prim.name == "reshape"]
    assert reshapes[0].params["shape"] == (Sym("batch", 2), 3)
    assert reshapes[0].out.aval.shape == (2 * b, 3)
    kinds = sorted((c.kind, c.offset) for c in g.sym_consts.values())
    assert ("mul", -1.0) in kinds  # the variance's max(N - 1, 0), from a third trace
    text = str(g)
    assert "float32[2*batch,3]" in text and "const 1*max(batch-1,0)" in text
    assert str(SymConst("div", 0.5, b)) == "0.5/batch"


def test_what_cannot_be_dynamic_raises_naming_the_op():
    with pytest.raises(
        DynamicError,
        match=r"changes structure.*op \d+ is mul at "
        r".*test_dynamic_dims\.py:\d+ at batch 4 but add",
    ):
        _generalized(lambda x: x * 2 if x.shape[0] == 4 else x + 2, staged.randn(4, 3))
    with pytest.raises(DynamicError, match=r"reshape at .*: the rank changes"):
        _generalized(
            lambda x: x.reshape(2, -1) if x.shape[0] == 4 else x.reshape(-1), staged.randn(4, 4)
        )
    with pytest.raises(
        DynamicError,
        match=r"\(batch 4 vs 5: ops 2 vs 1; the first 1 ops "
        r"agree, up to exp at .*test_dynamic_dims\.py:\d+\)",
    ):
        _generalized(lambda x: x.exp().sum(0) if x.shape[0] == 4 else x.exp(), staged.randn(4, 4))
    with pytest.raises(DynamicError, match=r"only multiples of it can be dynamic"):
        _generalized(lambda x: x[:-1], staged.randn(4, 3))
    with pytest.raises(DynamicError, match="from an empty dimension"):
        resize(staged.randn(0, 3), {0: 2})
    with pytest.raises(DynamicError, match="product of two dynamic dimensions"):
        Sym("batch") * Sym("batch")
    np.testing.assert_array_equal(
        resize(staged.tensor([1.0, 2.0]), {0: 5}).numpy(), [1, 2, 1, 2, 1]
    )
