"""ONNX lowering sweep: every registry primitive's MLIR-sweep cases (``cases``), lowered into
one ONNX model, run in onnxruntime and compared with the NumPy interpreter; plus the
lowering's errors, dynamic dims, metadata and external data."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from staged import dtypes as dt
from staged.autodiff import REGISTRY, Aval
from staged.tracing.interpret import interpret
from staged.tracing.ir import Graph, Output
from staged.lower.onnx_lowering import TABLE, ExportError, Sym, to_onnx
from tests.lower.test_mlir import cases

F = dt.float32
rng = np.random.default_rng(1)


def u(*shape, low=-3.0, high=3.0, d=np.float32):
    return rng.uniform(low, high, shape).astype(d)


_HALF = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 3.7], np.float32)
# more cases (the MLIR sweep's may be complex only, or missing): float32 and float64 each
EXTRA = {
    **{
        n: (lambda kw: lambda: [([u(2, 3, **kw)], {}), ([u(4, d=np.float64, **kw)], {})])(kw)
        for n, kw in {
            "tan": dict(low=-1.2, high=1.2),
            "sinh": {},
            "cosh": {},
            "atan": {},
            "asin": dict(low=-0.99, high=0.99),
            "acos": dict(low=-0.99, high=0.99),
            "log2": dict(low=0.1),
            "log10": dict(low=0.1),
            "exp2": {},
            "erf": {},
            "floor": {},
            "ceil": {},
            "trunc": {},
            "sgn": {},
            "angle": {},
            "real": {},
            "imag": {},
        }.items()
    },
    "round": lambda: [([_HALF], {}), ([_HALF.astype(np.float64)], {})],
    **{
        n: lambda: [
            ([u(2, 3), u(2, 3, low=0.5) * np.where(u(2, 3) > 0, 1, -1).astype(np.float32)], {}),
            ([np.arange(-4, 4), np.array([3, -3] * 4)], {}),
        ]
        for n in ("remainder", "fmod")
    },
    "atan2": lambda: [([u(2, 3), u(2, 3)], {}), ([u(4, d=np.float64), u(4, d=np.float64)], {})],
    "reduce_prod": lambda: [
        ([u(2, 3, 4, low=0.5, high=1.5)], {"dims": (1,), "keepdim": False}),
        ([np.arange(1, 7).reshape(2, 3)], {"dims": (0, 1), "keepdim": True}),
    ],
    "cumsum": lambda: [
        ([u(3, 4)], {"dim": 1, "reverse": False}),
        ([np.arange(6).reshape(2, 3)], {"dim": 0, "reverse": True}),
    ],
    "argsort": lambda: [
        (
            [np.array([[3, 1, 2, 1], [0, 0, -1, 5]], np.float32)],
            {"dim": 1, "descending": False, "k": 4},
        ),
        (
            [np.array([[3, 1, 2, 1], [0, 0, -1, 5]], np.float32)],
            {"dim": 1, "descending": True, "k": 2},
        ),
        ([np.arange(6)[::-1].reshape(3, 2).copy()], {"dim": 0, "descending": False, "k": 3}),
    ],
}


def all_cases(name):
    return cases(name) + EXTRA.get(name, lambda: [])()


def session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _supported(name, xs, params):
    prim = REGISTRY[name]
    avals = [Aval(np.shape(x), dt.from_numpy_dtype(np.asarray(x).dtype)) for x in xs]
    out = prim.abstract_eval(*avals, **params)
    return not any(TABLE.reason(name, a.dtype) or a.dtype.is_complex for a in (*avals, out))


def build(names):
    """One graph holding every ONNX-supported case of ``names``: (graph, inputs, spans)."""
    g, inputs, spans = Graph(), [], {}
    for name in names:
        prim, start = REGISTRY[name], len(g.outputs)
        for k, (xs, params) in enumerate(c for c in all_cases(name) if _supported(name, *c)):
            vals = []
            for x in xs:
                x = np.asarray(x)
                vals.append(
                    g.add_input(
                        Aval(x.shape, dt.from_numpy_dtype(x.dtype)), "arg", f"x{len(inputs)}"
                    )
                )
                inputs.append(x)
            out = g.add_op(
                prim,
                vals,
                params,
                prim.abstract_eval(*(v.aval for v in vals), **params),
                f"sweep.py:{k + 1}",
            )
            g.outputs.append(Output(out, "out", f"{name}.{k}"))
        spans[name] = (start, len(g.outputs))
    return g, inputs, spans


@pytest.fixture(scope="module")
def sweep():
    g, inputs, spans = build([n for n in REGISTRY if all_cases(n) and TABLE.entry(n)])
    model = to_onnx(g)
    onnx.checker.check_model(model, full_check=True)
    got = session(model).run(None, {i.name: x for i, x in zip(g.inputs, inputs)})
    with np.errstate(all="ignore"):
        expected = interpret(g, *inputs)
    return g, spans, got, expected


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_primitive_matches_numpy(name, sweep):
    g, spans, got, expected = sweep
    entry = TABLE.entry(name)
    assert entry and (entry["lowered"] or entry["unsupported"]), (
        f"{name}: no ONNX lowering and no reason it is unsupported"
    )
    if name not in spans or spans[name][0] == spans[name][1]:
        pytest.skip(f"no ONNX-supported sample cases for {name}")
    for i in range(*spans[name]):
        out, a, b = g.outputs[i], got[i], expected[i]
        aval = out.value.aval
        assert a.shape == aval.shape and a.dtype == aval.dtype.np, (out.name, a.dtype, a.shape)
        if aval.dtype.is_floating_point:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=out.name)
        else:
            np.testing.assert_array_equal(a, b, err_msg=out.name)


def test_missing_lowerings_are_listed_with_dtype_and_line():
    g = Graph()
    z = g.add_input(Aval((2,), dt.complex64), "arg", "z")
    x = g.add_input(Aval((2,), F), "arg", "x")
    a = g.add_op(REGISTRY["exp"], (z,), {}, Aval((2,), dt.complex64), "model.py:3")
    b = g.add_op(
        REGISTRY["exp"],
        (
            g.add_op(
                REGISTRY["cast"], (x,), {"dtype": dt.int32}, Aval((2,), dt.int32), "model.py:4"
            ),
        ),
        {},
        Aval((2,), dt.int32),
        "model.py:5",
    )
    g.outputs += [Output(a, "out", "a"), Output(b, "out", "b")]
    with pytest.raises(ExportError) as err:
        to_onnx(g)
    msg = str(err.value)
    assert "exp (complex64) at model.py:3: onnxruntime has no complex tensors" in msg
    assert "exp (int32) at model.py:5: NumPy computes it in floating point" in msg
    assert "model.py:4" not in msg  # the cast has a lowering
    g.ops, g.outputs = [], [Output(x, "out", "x")]
    with pytest.raises(ExportError, match="duplicate ONNX input/output names: 'x'"):
        to_onnx(g, input_names=["z", "x"])


def test_dynamic_dims_are_read_at_run_time():
    """A reshape to (batch * 3,) and an expand to (batch, 3) of a graph traced at batch 2."""
    n = Sym("batch")
    g = Graph()
    x = g.add_input(Aval((n, 3), F), "arg", "x")
    c = g.add_const(np.array([[1.0, 2.0, 3.0]], np.float32), Aval((1, 3), F))
    e = g.add_op(REGISTRY["expand"], (c,), {"shape": (n, 3)}, Aval((n, 3), F))
    s = g.add_op(REGISTRY["add"], (x, e), {}, Aval((n, 3), F))
    flat = g.add_op(
        REGISTRY["reshape"], (s,), {"shape": (Sym("batch", 3),)}, Aval((Sym("batch", 3),), F)
    )
    g.outputs.append(Output(flat, "out", "y"))
    model = to_onnx(g, sources={"batch": ("x", 0)})
    onnx.checker.check_model(model, full_check=True)
    assert [d.dim_param for d in model.graph.output[0].type.tensor_type.shape.dim] == ["3*batch"]
    for rows in (1, 5):
        xv = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
        (got,) = session(model).run(None, {"x": xv})
        np.testing.assert_array_equal(got, (xv + [1, 2, 3]).reshape(-1))
