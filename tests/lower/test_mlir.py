"""Lowering sweep: every registry primitive, lowered to MLIR, compiled for llvm-cpu and
compared with the NumPy interpreter. All samples share one module (one compile).

A primitive's cases are written here where they probe what the op database does not (NaN,
ties, integer and bool dtypes); any other primitive is swept on the samples recorded from
the op database (``tests/ops/recorded.py``), on the dtypes MLIR can lower."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

import staged
from staged import dtypes as dt
from staged.autodiff import REGISTRY, Aval
from staged.tracing.interpret import interpret
from staged.tracing.ir import Graph, Output
from staged.lower.mlir import TABLE, LoweringError, to_mlir
from staged.runtime.compiler import compile_mlir
from staged.runtime.device import device, to_host
from staged.autodiff.polynomials import POLYNOMIALS
from tests.ops import recorded

rng = np.random.default_rng(0)
F, I, L, B = dt.float32, dt.int32, dt.int64, dt.bool_


def arr(shape, d=F, low=-3.0, high=3.0):
    if d is B:
        return rng.random(shape) < 0.5
    if d.is_complex:
        return (rng.uniform(low, high, shape) + 1j * rng.uniform(low, high, shape)).astype(d.np)
    if d.is_floating_point:
        return rng.uniform(low, high, shape).astype(d.np)
    return rng.integers(int(low), int(high) + 1, shape).astype(d.np)


POSITIVE = {"log", "sqrt", "rsqrt", "log1p"}
UNARY = [
    "copy",
    "finite_grad",
    "neg",
    "conj",
    "exp",
    "log",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "sin",
    "cos",
    "relu",
    "abs",
    "sign",
    "logical_not",
]
INT_UNARY = {"copy", "neg", "conj", "relu", "abs", "sign", "logical_not"}
COMPLEX_UNARY = {
    "copy",
    "neg",
    "conj",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "sigmoid",
    "sin",
    "cos",
    "abs",
    "logical_not",
}
CMP = ["eq", "ne", "lt", "le", "gt", "ge"]
BINARY = [
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    *CMP,
    "logical_and",
    "logical_or",
]
NAN = np.array([[np.nan, 1.0, -2.0], [np.nan, 0.0, 3.0]], np.float32)
NAN_Y = np.array([[np.nan, np.nan, -2.0], [1.0, -0.0, 4.0]], np.float32)


def cases(name):
    """[(input arrays, params)] for primitive ``name``."""
    if name in UNARY:
        low = 0.1 if name in POSITIVE else -3.0
        out = [
            ([arr((2, 3), F, low)], {}),
            ([np.asarray(arr((), F, low))], {}),
            ([NAN], {}) if name not in POSITIVE else ([arr((4,), dt.float64, low)], {}),
        ]
        if name in INT_UNARY:
            out += [([arr((2, 3), I)], {}), ([arr((3,), L)], {})]
        if name in COMPLEX_UNARY:
            out.append(([arr((2, 2), dt.complex64, 0.2, 1.5)], {}))
        if name in ("logical_not", "conj", "abs", "relu", "sign"):
            out.append(([arr((5,), B)], {}))
        return out
    if name in BINARY:
        x, y = arr((2, 3)), arr((2, 3), low=0.5 if name == "div" else -3.0)
        y[0, 0] = x[0, 0]
        if name == "pow":
            x = np.abs(x) + 0.1
            return [
                ([x, y], {}),
                ([arr((2, 3), I, 0, 4), arr((2, 3), I, 0, 3)], {}),
                ([np.float32(-2.0), np.float32(3.0)], {}),
            ]
        out = [([x, y], {}), ([np.float32(1.5), np.float32(-0.5)], {})]
        if name != "div":
            out += [
                ([NAN, NAN_Y], {}),
                ([arr((2, 3), I), arr((2, 3), I)], {}),
                ([arr((3,), L, -9, 9), arr((3,), L, -9, 9)], {}),
            ]
        if name in (
            "add",
            "mul",
            "maximum",
            "minimum",
            "eq",
            "ne",
            "lt",
            "logical_and",
            "logical_or",
        ):
            out.append(([arr((6,), B), arr((6,), B)], {}))
        if name in ("add", "sub", "mul", "div", "eq", "ne"):
            out.append(([arr((2, 2), dt.complex64, 0.5), arr((2, 2), dt.complex64, 0.5)], {}))
        return out
    if name == "threshold_backward":  # the result at, below and above 0, and NaN
        return [
            ([arr((2, 3)), NAN], {"threshold": 0}),
            ([arr((4,), dt.float64), np.array([0.0, -0.0, 1e-30, -1.0])], {"threshold": 0}),
            ([arr((2, 3)), arr((2, 3))], {"threshold": 0.5}),
        ]
    if name in ("leaky_relu", "hardtanh"):  # NaN, the kinks, either side of them
        x = np.array([np.nan, 0.0, -0.0, -1.0, 1.0, -3.0, 0.5, 2.0], np.float32)
        bounds = {"min_val": -1.0, "max_val": 1.0}
        ps = [{"negative_slope": 0.2}] if name == "leaky_relu" else [bounds]
        return [([x], p) for p in ps] + [([x.astype(np.float64)], p) for p in ps]
    if name in ("leaky_relu_backward", "hardtanh_backward"):
        x = np.array([np.nan, 0.0, -0.0, -1.0, 1.0, -3.0, 0.5, 2.0], np.float32)
        p = (
            {"negative_slope": 0.2}
            if name == "leaky_relu_backward"
            else {"min_val": -1.0, "max_val": 1.0}
        )
        return [([arr((8,)), x], p), ([arr((8,), dt.float64), x.astype(np.float64)], p)]
    if name == "clamp_where":  # where's values (keep only steers tangents)
        return [
            ([arr((2, 3), B), arr((2, 3)), arr((2, 3))], {"keep": "ge"}),
            ([arr((4,), B), arr((4,), L), arr((4,), L)], {"keep": None}),
        ]
    if name == "where":
        return [
            ([arr((2, 3), B), arr((2, 3)), arr((2, 3))], {}),
            ([np.asarray(True), np.float32(1), np.float32(2)], {}),
            ([arr((4,), B), arr((4,), L), arr((4,), L)], {}),
        ]
    if name == "cast":
        src = {F: np.array([-2.7, -0.5, 0.0, 0.5, 1.9, 3.0, np.nan, 250.0], np.float32)}
        pairs = [
            (F, I),
            (F, L),
            (F, B),
            (F, dt.float64),
            (F, dt.float16),
            (F, dt.complex64),
            (I, F),
            (I, L),
            (I, B),
            (I, dt.int8),
            (L, I),
            (B, F),
            (B, I),
            (dt.uint8, I),
            (dt.uint8, F),
            (dt.float64, F),
            (dt.complex64, F),
            (dt.complex64, dt.complex128),
            (dt.complex64, B),
            (dt.int8, dt.uint8),
        ]
        out = []
        for s, d in pairs:
            x = (
                src[s][:6]
                if s is F and (d is I or d is L)
                else src.get(
                    s, arr((8,), s, -100, 100) if s is not dt.uint8 else arr((8,), s, 0, 255)
                )
            )
            out.append(([x], {"dtype": d}))
        out.append(([np.float32(2.5)], {"dtype": I}))
        return out
    if name in ("reduce_sum", "reduce_max", "reduce_min"):
        x = arr((2, 3, 4))
        out = [
            ([x], {"dims": (1,), "keepdim": False}),
            ([x], {"dims": (1,), "keepdim": True}),
            ([x], {"dims": (0, 2), "keepdim": False}),
            ([x], {"dims": (0, 2), "keepdim": True}),
            ([x], {"dims": (0, 1, 2), "keepdim": False}),
            ([x], {"dims": (0, 1, 2), "keepdim": True}),
            ([np.asarray(np.float32(3))], {"dims": (), "keepdim": False}),
            ([arr((3, 4), I)], {"dims": (0,), "keepdim": False}),
            ([arr((5,), B)], {"dims": (0,), "keepdim": False}),
            ([NAN], {"dims": (1,), "keepdim": False}),
            ([TIES], {"dims": (1,), "keepdim": True}),
            ([TIES], {"dims": (0,), "keepdim": False}),
        ]
        if name == "reduce_sum":
            out.append(([arr((2, 3), dt.complex64)], {"dims": (1,), "keepdim": False}))
        return out
    if name in ("argmax", "argmin"):
        x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-1, -5, -5, 4]], np.float32)
        return [
            ([x], {"dim": 1, "keepdim": False}),
            ([x], {"dim": 0, "keepdim": True}),
            ([NAN], {"dim": 1, "keepdim": False}),
            ([x.astype(np.int32)], {"dim": 1, "keepdim": False}),
            ([arr((6,), B)], {"dim": 0, "keepdim": False}),
            ([arr((7,))], {"dim": 0, "keepdim": True}),
            ([TIES], {"dim": 1, "keepdim": False}),
            ([TIES], {"dim": 0, "keepdim": False}),
            ([WITH_ZERO], {"dim": 1, "keepdim": False}),
            ([arr((3, 4), dt.uint8)], {"dim": 1, "keepdim": False}),
        ]
    if name == "reshape":
        return [
            ([arr((2, 3))], {"shape": (3, 2)}),
            ([arr((6,))], {"shape": (2, 1, 3)}),
            ([np.asarray(np.float32(2))], {"shape": (1, 1)}),
            ([arr((1, 1))], {"shape": ()}),
            ([arr((2, 3, 4))], {"shape": (4, 6)}),
            ([arr((1, 6), I)], {"shape": (6, 1)}),
            ([arr((2, 1, 3))], {"shape": (3, 2)}),
        ]
    if name == "expand":
        return [
            ([arr((1, 3))], {"shape": (4, 3)}),
            ([arr((2, 1, 1))], {"shape": (2, 3, 4)}),
            ([arr((1,), B)], {"shape": (5,)}),
            ([arr((1, 1), I)], {"shape": (2, 3)}),
            ([arr((2, 3))], {"shape": (2, 3)}),
        ]
    if name == "permute":
        return [
            ([arr((2, 3, 4))], {"perm": (2, 0, 1)}),
            ([arr((2, 3), I)], {"perm": (1, 0)}),
            ([arr((2, 3))], {"perm": (0, 1)}),
        ]
    if name == "matmul":
        return [
            ([arr((2, 3)), arr((3, 4))], {}),
            ([arr((2, 2, 3)), arr((2, 3, 4))], {}),
            ([arr((2, 1, 2, 3)), arr((2, 1, 3, 2))], {}),
            ([arr((3, 3), I), arr((3, 2), I)], {}),
            ([arr((2, 2), dt.complex64), arr((2, 2), dt.complex64)], {}),
        ]
    if name in ("slice", "slice_scatter"):
        p = {"starts": (1, 0), "stops": (4, 5), "steps": (2, 2)}
        whole = {"starts": (0,), "stops": (3,), "steps": (1,)}
        src = {"slice": [], "slice_scatter": [arr((2, 3))]}[name]
        return [
            ([arr((4, 5))] + src, p),
            ([arr((4, 5), I)] + [a.astype(np.int32) for a in src], p),
            ([arr((3,), B)] + ([arr((3,), B)] if src else []), whole),
        ]
    if name == "gather":
        return [
            ([arr((3, 4)), rng.integers(0, 4, (3, 2))], {"dim": 1}),
            ([arr((2, 3), L), rng.integers(0, 2, (4, 3))], {"dim": 0}),
            ([arr((2, 2), dt.complex64), rng.integers(0, 2, (2, 2))], {"dim": 0}),
        ]
    if name == "scatter_add":
        return [
            ([arr((3, 4)), rng.integers(0, 4, (3, 5)), arr((3, 5))], {"dim": 1}),
            ([arr((4, 2), I), rng.integers(0, 4, (6, 2)), arr((6, 2), I)], {"dim": 0}),
            ([arr((3,)), np.zeros(0, np.int64), arr((0,))], {"dim": 0}),
        ]
    if name == "scatter":  # repeated indices: the last write wins
        return [
            ([arr((3, 4)), np.array([[3, 3, 0], [1, 1, 1], [0, 2, 0]]), arr((3, 3))], {"dim": 1}),
            ([arr((4, 2), I), rng.integers(0, 4, (6, 2)), arr((6, 2), I)], {"dim": 0}),
            ([arr((3,)), np.zeros(0, np.int64), arr((0,))], {"dim": 0}),
        ]
    if name == "check":  # the identity here: the runtime reads the report
        return [([np.array([0])], {"error": "IndexError", "message": "index {}", "lo": 0, "hi": 3})]
    if name == "barrier":
        return [([arr((2, 3))], {}), ([arr((), I)], {})]
    if name == "concat":
        return [
            (
                [arr((2, 3)), arr((2, 1)), arr((2, 0)), arr((2, 2))],
                {"dim": 1, "sizes": (3, 1, 0, 2)},
            ),
            ([arr((1, 2), I), arr((3, 2), I)], {"dim": 0, "sizes": (1, 3)}),
        ]
    if name in ("im2col", "col2im"):
        w2 = {"kernel": (2, 3), "stride": (2, 1), "padding": ((1, 0), (1, 2)), "dilation": (1, 2)}
        w1 = {"kernel": (3,), "stride": (2,), "padding": ((1, 1),), "dilation": (1,)}
        if name == "im2col":
            return [
                ([arr((2, 3, 5, 4))], w2 | {"pad_value": -np.inf}),
                ([arr((1, 2, 7), I)], w1 | {"pad_value": 0}),
                ([arr((1, 1, 3, 6))], w2 | {"padding": ((0, 0), (0, 0)), "pad_value": 0.0}),
            ]
        return [
            ([arr((2, 3, 3, 3, 2, 3))], w2 | {"shape": (5, 4)}),
            ([arr((1, 4, 2, 3), I)], w1 | {"shape": (7,)}),
        ]
    if name == "uniform":
        state = np.array([7, 3], np.int64)
        return [
            ([state], {"shape": (3, 4), "dtype": F}),
            ([np.array([-1, 2**40], np.int64)], {"shape": (5,), "dtype": dt.float64}),
            ([state], {"shape": (), "dtype": dt.float16}),
        ]
    if name in MATH_CASES:
        return MATH_CASES[name]()
    return [
        (xs, p)
        for xs, p in recorded.samples(name)
        if not any(TABLE.reason(name, dt.from_numpy_dtype(x.dtype)) for x in xs[:1])
    ]


C = dt.complex64
HALVES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49, -2.51, np.nan], np.float32)
WITH_ZERO = np.array([[0.0, -0.0, 1.5], [-2.0, np.nan, 3.0]], np.float32)
COMPLEX_ZERO = np.array([0, 1 + 1j, -2 + 0.5j, -1j], np.complex64)
TIES = np.array([[3, 1, 2, 1, np.nan], [0, -1, 5, 5, 2]], np.float32)
LONG = np.round(rng.standard_normal((2, 1100)) * 20).astype(np.float32)  # many ties
LONG[0, ::97] = np.nan


def _unary_math(low=-3.0, high=3.0, complex_=False, extra=()):
    def cases():
        out = [
            ([arr((2, 3), F, low, high)], {}),
            ([arr((4,), dt.float64, low, high)], {}),
            ([np.asarray(arr((), F, low, high))], {}),
            *(([x], {}) for x in extra),
        ]
        return out + ([([arr((2, 2), C, 0.2, 1.2)], {})] if complex_ else [])

    return cases


def _remainders():
    y = arr((2, 3), F, 0.5)
    y[0] *= -1
    return [
        ([arr((2, 3), F, -7, 7), y], {}),
        ([NAN, NAN_Y], {}),
        ([np.array([7, -7, 7, -7, 5, 0], np.int64), np.array([3, 3, -3, -3, 0, 2], np.int64)], {}),
    ]


MATH_CASES = {
    **{
        n: _unary_math(complex_=n in ("tan", "sinh", "cosh"))
        for n in ("tan", "sinh", "cosh", "atan")
    },
    "asin": _unary_math(-0.95, 0.95),
    "acos": _unary_math(-0.95, 0.95),
    "erf": _unary_math(-4, 4, extra=(NAN, np.array([-np.inf, np.inf, 0.0], np.float32))),
    **{n: _unary_math(0.1, 5, complex_=True) for n in ("log2", "log10")},
    "exp2": _unary_math(complex_=True),
    **{n: _unary_math(extra=(HALVES,)) for n in ("floor", "ceil", "round", "trunc")},
    "sgn": lambda: [
        ([WITH_ZERO], {}),
        ([arr((5,), I)], {}),
        ([COMPLEX_ZERO], {}),
        ([arr((5,), B)], {}),
    ],
    "angle": lambda: [([WITH_ZERO], {}), ([COMPLEX_ZERO], {}), ([arr((3,), C)], {})],
    "real": lambda: [([COMPLEX_ZERO], {}), ([arr((2, 2), dt.complex128)], {}), ([WITH_ZERO], {})],
    "imag": lambda: [([COMPLEX_ZERO], {}), ([arr((2, 2), dt.complex128)], {})],
    "atan2": lambda: [
        ([arr((2, 3)), arr((2, 3))], {}),
        ([WITH_ZERO, WITH_ZERO[::-1].copy()], {}),
        ([arr((3,), dt.float16), arr((3,), dt.float16)], {}),
    ],
    "remainder": _remainders,
    "fmod": _remainders,
    "reduce_prod": lambda: [
        ([arr((2, 3, 4), F, 0.5, 1.5)], {"dims": (1,), "keepdim": False}),
        ([arr((2, 3, 4), F, 0.5, 1.5)], {"dims": (0, 2), "keepdim": True}),
        ([arr((3, 4), I, -3, 3)], {"dims": (0, 1), "keepdim": False}),
        ([arr((2, 3), C, 0.5, 1)], {"dims": (1,), "keepdim": False}),
    ],
    "cumsum": lambda: [
        ([arr((2, 3, 4))], {"dim": 1, "reverse": False}),
        ([arr((2, 3, 4))], {"dim": 2, "reverse": True}),
        ([arr((5,), L)], {"dim": 0, "reverse": False}),
        ([arr((2, 3), C)], {"dim": 0, "reverse": True}),
    ],
    "argsort": lambda: [
        ([TIES], {"dim": 1, "descending": False, "k": 5}),
        ([TIES], {"dim": 1, "descending": True, "k": 5}),
        ([TIES], {"dim": 0, "descending": True, "k": 1}),
        ([arr((3, 6), I)], {"dim": 1, "descending": False, "k": 3}),
        ([arr((7,), B)], {"dim": 0, "descending": True, "k": 7}),
        # from MERGE_MIN elements on, a merge sort: ties, NaN, padding
        ([LONG], {"dim": 1, "descending": False, "k": 1100}),
        ([LONG], {"dim": 1, "descending": True, "k": 7}),
        ([LONG.T.copy()], {"dim": 0, "descending": False, "k": 1030}),
    ],
}


def build(names, loc="sweep.py"):
    """One graph holding every case of ``names``; returns it, its inputs and the slice of
    outputs per name."""
    g, inputs, spans = Graph(), [], {}
    for name in names:
        prim, start = REGISTRY[name], len(g.outputs)
        for k, (xs, params) in enumerate(cases(name)):
            vals = []
            for x in xs:
                x = np.asarray(x)
                vals.append(g.add_input(Aval(x.shape, dt.from_numpy_dtype(x.dtype)), "arg", ""))
                inputs.append(x)
            aval = prim.abstract_eval(*(v.aval for v in vals), **params)
            out = g.add_op(prim, vals, params, aval, f"{loc}:{k + 1}")
            g.outputs.append(Output(out, "out", f"{name}#{k}"))
        spans[name] = (start, len(g.outputs))
    return g, inputs, spans


@pytest.fixture(scope="session", autouse=True)
def tmp_cache(tmp_path_factory):
    old = os.environ.get("STAGED_CACHE_DIR")
    os.environ["STAGED_CACHE_DIR"] = str(tmp_path_factory.mktemp("staged-cache"))
    yield
    os.environ.pop("STAGED_CACHE_DIR") if old is None else os.environ.update(STAGED_CACHE_DIR=old)


def run(g, inputs):
    m = device().load(compile_mlir(to_mlir(g)))
    res = m.invoke("main", inputs, [o.value.aval.dtype.np for o in g.outputs])
    return [to_host(r) for r in res]


# Primitives that iterate per element (scf.while): seconds of IREE each, so kept out of
# the one module below; their focused tests compile them on their edges and branches
LOOPS = {
    **dict.fromkeys(POLYNOMIALS, "test_orthogonal_polynomials_compiled"),
    "igamma": "test_incomplete_gamma_compiled_as_eager",
    "igammac": "test_incomplete_gamma_compiled_as_eager",
}


# IREE's compile time grows faster than the module: all 127 primitives in one module took
# 45 s of compiler CPU time, in modules of 40 primitives 33 s
_NAMES_PER_MODULE = 40


def _swept(names) -> dict:
    """{name: (graph, its outputs' span, compiled outputs, interpreted outputs)} of one
    module holding every case of ``names``."""
    g, inputs, spans = build(names)
    with np.errstate(all="ignore"):
        expected = interpret(g, *inputs)
    got = run(g, inputs)
    return {name: (g, span, got, expected) for name, span in spans.items()}


@pytest.fixture(scope="session")
def sweep(tmp_cache):
    names = [n for n in REGISTRY if n not in LOOPS and cases(n)]
    step = _NAMES_PER_MODULE
    with ThreadPoolExecutor(2) as pool:  # IREE compiles with the GIL released
        parts = pool.map(_swept, [names[i : i + step] for i in range(0, len(names), step)])
        return {name: got for part in parts for name, got in part.items()}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_primitive_matches_numpy(name, sweep):
    if name in LOOPS:
        pytest.skip(f"{name}: compiled by the op sweep (tests/ops) and {LOOPS[name]}")
    if name not in sweep:
        assert (TABLE.entry(name) or {}).get("unsupported"), (
            f"{name}: no lowering test cases and no recorded unsupported reason"
        )
        pytest.skip(f"no sample cases for {name}")
    g, span, got, expected = sweep[name]
    for i in range(*span):
        out, a, b = g.outputs[i], got[i], expected[i]
        aval = out.value.aval
        assert a.shape == aval.shape and a.dtype == aval.dtype.np, (out.name, a.dtype, a.shape)
        if aval.dtype.is_floating_point or aval.dtype.is_complex:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=out.name)
        else:
            np.testing.assert_array_equal(a, b, err_msg=out.name)


def test_constants_and_passthrough():
    g = Graph()
    x = g.add_input(Aval((3,), F), "arg", "x")
    consts = [
        np.array([1.5, -2.0, 1e-30], np.float32),
        np.full((2, 2), 7, np.int64),
        np.array([True, False, True]),
        np.asarray(np.float32(0.1)),
        np.array([1 + 2j, 3 - 1j], np.complex64),
        np.zeros((0, 3), np.float32),
    ]
    vals = [g.add_const(c, Aval(c.shape, dt.from_numpy_dtype(c.dtype))) for c in consts]
    y = g.add_op(REGISTRY["add"], (x, vals[0]), {}, Aval((3,), F))
    g.outputs = [Output(v, "out", "") for v in (y, x, *vals)]
    xin = arr((3,))
    for a, b in zip(run(g, [xin]), interpret(g, xin)):
        np.testing.assert_array_equal(a, b)


def test_equal_constants_lower_to_one_whether_or_not_they_shared_an_array():
    """Note [constants by value]: the text (the compile cache's key) of a graph does not
    depend on which of its equal constants came from one array; 0.0 and -0.0 stay two."""
    one, zero, neg = (np.full(2, v, np.float32) for v in (1.0, 0.0, -0.0))

    def lowered(*arrays):
        g, values = Graph(), {}
        x = g.add_input(Aval((2,), F), "arg", "x")
        for a in arrays:
            c = values.get(id(a)) or values.setdefault(id(a), g.add_const(a, Aval((2,), F)))
            x = g.add_op(REGISTRY["add"], (x, c), {}, Aval((2,), F))
        g.outputs = [Output(x, "out", "")]
        return to_mlir(g)

    text = lowered(one, one, zero, neg)
    assert text == lowered(one, one.copy(), zero, neg)
    assert text.count('dense<"0x0000803F">') == 1
    assert 'dense<"0x00000000">' in text and 'dense<"0x00000080">' in text


def test_unsupported_dtype_names_op_dtype_and_line():
    g = Graph()
    x = g.add_input(Aval((2,), I), "arg", "x")
    y = g.add_op(REGISTRY["div"], (x, x), {}, Aval((2,), I), "model.py:42")
    g.outputs.append(Output(y, "out", ""))
    with pytest.raises(LoweringError, match=r"div on int32 at model\.py:42: .*true division"):
        to_mlir(g)


def test_verifier_error_names_primitive_and_line():
    g = Graph()
    x = g.add_input(Aval((2, 3), F), "arg", "x")
    bad = g.add_op(REGISTRY["permute"], (x,), {"perm": (1, 0)}, Aval((2, 3), F), "net.py:7")
    g.outputs.append(Output(bad, "out", ""))
    with pytest.raises(LoweringError, match=r"permute at net\.py:7"):
        to_mlir(g)


def test_sums_of_broadcast_products_and_empty_scatters_compile():
    """Compiler failures the fuzzer found (IREE 3.13, llvm-cpu; Note [sums to a scalar]):
    a sum over every non-unit dim of a product with a broadcast operand, ``(w * x).sum()``
    and its gradients, fused into a contraction the vectorizer rejected; a scatter_add
    (gather's gradient) of an empty index reduced over an empty dim. One module."""
    sums = [
        (lambda w, x: (w * x).sum(), (3,), (2, 3)),
        (lambda w, x: (w * x).mean(), (64,), (32, 64)),
        (lambda w, x: (w * x).sum(), (4,), (2, 3, 4)),
        (lambda w, x: (w * x).sum(), (2, 1, 4), (2, 3, 4)),
        (lambda w, x: (w * x).sum((0, 2), keepdim=True), (1, 3), (2, 1, 3)),
        (lambda w, x: (w * x).sum(), (5000,), (2, 5000)),  # blocked first (Note [blocked sums])
    ]
    operands = [staged.tensor(arr(shape)) for _, ws, xs in sums for shape in (ws, xs)]
    x1 = staged.tensor(arr((1, 3)), requires_grad=True)
    x2 = staged.tensor(np.float32(-0.2), requires_grad=True)
    g = staged.tensor(arr((2, 1, 3)))

    def body(x1, x2, g, *ops):
        v0 = x1.expand(2, 1, 3)
        empty = v0[:, :, staged.tensor([], dtype=staged.int64)][staged.tensor([0, -1])]
        grads = staged.autograd.grad([v0 * x2, empty], [x1, x2], [g, staged.ones(2, 1, 0)])
        return [*grads, *(fn(*ops[2 * k : 2 * k + 2]) for k, (fn, _, _) in enumerate(sums))]

    got = staged.capture(body, x1, x2, g, *operands).compile("llvm-cpu")(x1, x2, g, *operands)
    for a, b in zip(got, body(x1, x2, g, *operands)):
        np.testing.assert_allclose(np.asarray(a), b.detach().numpy(), rtol=1e-5, atol=1e-3)


def test_float_to_int_casts_give_x86s_values_for_nan_and_out_of_range():
    """As NumPy's and torch's casts (x86's truncating conversions): NaN and values outside
    int32's or int64's range give its least value, 8- and 16-bit ints (and uint8) the
    int32 conversion's low bits. LLVM leaves those undefined: a NaN that IREE folded as a
    constant became 0 (fuzzer, AVX-512), a run-time one the least value. One module."""
    x = np.array([300.0, 1e10, np.nan, -1e10, 3e9, -3e9, 2.0**63, -(2.0**63), 70000.0, -2.5])
    x = x[None].repeat(2, 0).astype(np.float32)
    with np.errstate(over="ignore"):  # 1e10 and past are inf in float16
        x[1] = x[1].astype(np.float16)
    ints = ("int8", "int16", "int32", "int64", "uint8")

    def body(a, h):
        folded = a[:3].double()  # filled with NaN in the graph: IREE folds the casts
        folded.fill_(float("nan"))
        return [
            *(a.to(getattr(staged, d)) for d in ints),
            *(h.to(getattr(staged, d)) for d in ints),
            *(folded.to(getattr(staged, d)) for d in ints),
        ]

    a, h = staged.tensor(x[0]), staged.tensor(x[1].astype(np.float16))
    got = staged.capture(body, a, h).compile("llvm-cpu")(a, h)
    with np.errstate(invalid="ignore"):
        want = [
            *(x[0].astype(d) for d in ints),
            *(x[1].astype(np.float16).astype(d) for d in ints),
            *(np.full(3, np.nan).astype(d) for d in ints),
        ]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w)
    assert [np.asarray(g)[0] for g in got[-5:]] == [0, 0, -(2**31), -(2**63), 0]


@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (5,)])
def test_casts_to_bfloat16_round_in_one_element_tensors_too(shape):
    """IREE 3.13 dropped ``arith.truncf`` to bf16 in a one-element tensor: its cast back to
    float32 gave the float32 unrounded (a Muon step's bfloat16 rounding was lost). The
    cast rounds in integers now: torch's values, NaN and infinities included."""
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            rng.standard_normal(40).astype(np.float32) * 10,
            np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3.3895314e38, 1 + 2**-8], np.float32),
        ]
    )
    step = staged.compile(lambda x, h: (x.bfloat16().float(), h.bfloat16().float()))
    for v in values:
        x = np.full(shape, v, np.float32)
        with np.errstate(over="ignore"):
            h = x.astype(np.float16)
        got = step(staged.tensor(x), staged.tensor(h))
        want = (torch.tensor(x).bfloat16().float(), torch.tensor(h).bfloat16().float())
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=f"{v} {shape}")


def test_bools_and_ints_cast_to_bfloat16_compile_on_every_cpu():
    """A bool cast to bfloat16 and kept so (cross_entropy's mask, a compiled bfloat16 step)
    was ``uitofp i1 to bf16``, which LLVM lowers on CPUs without AVX512-BF16 (Ice Lake) to a
    call of ``__truncsfbf2`` that IREE's linker lacks: the module failed to compile there.
    Casts of integers go through float32 now, as torch's: torch's values."""
    x = np.array([-2.0, 0.0, 3.0, 7.0], np.float32)
    big = np.array([2**24 + 3, -(2**30) - 5, 255, 0], np.int64)
    step = staged.compile(
        lambda x, n: ((x > 0).bfloat16(), n.bfloat16(), n.to(staged.uint8).bfloat16())
    )
    got = step(staged.tensor(x), staged.tensor(big))
    tx, tn = torch.tensor(x), torch.tensor(big)
    want = ((tx > 0).bfloat16(), tn.bfloat16(), tn.to(torch.uint8).bfloat16())
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.float().numpy(), w.float().numpy())


def test_strided_unit_kernel_conv_beside_other_readers_of_its_input():
    """IREE 3.x miscompiled im2col's gather for a kernel-1 dim (``out * stride`` alone, once
    the unit kernel loop folded) where the input's fused producer had other readers: ResNet's
    1x1 stride-2 downsample, then the 3x3 conv of the same block input, gave wrong values
    (siamese_network's compiled step). Values and gradients against torch; one module."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 7)).astype(np.float32)
    w1, w3 = arr((4, 3, 1, 1)), arr((4, 3, 3, 3))
    v1 = arr((2, 3, 1, 5))  # a kernel of 1 along one dim only

    def step(lib):
        def body(x, w1, w3, v1):
            f = lib.nn.functional
            h = x.exp()
            a = f.conv2d(h, w1, stride=2) + f.conv2d(h, w3, stride=2, padding=1)
            b = f.conv2d(h, w1, stride=3) * f.conv2d(h, w3, padding=1)[:, :, ::3, ::3]
            c = (
                f.conv2d(h, v1, stride=(2, 1), padding=(0, 2))
                + f.conv2d(h, v1, padding=(0, 2))[:, :, ::2]
            )
            outs = [a, b, c, f.avg_pool2d(h, 1, 2) - f.max_pool2d(h, 3, 2, 1)]
            total = sum(o.sum() for o in outs)
            return [*outs, *lib.autograd.grad(total, [x, w1, v1])]

        return body

    inputs = (x, w1, w3, v1)
    args = [staged.tensor(a, requires_grad=True) for a in inputs]
    got = staged.capture(step(staged), *args).compile("llvm-cpu")(*args)
    want = step(torch)(*(torch.tensor(a, requires_grad=True) for a in inputs))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g.detach()), w.detach().numpy(), rtol=1e-4, atol=1e-4)
