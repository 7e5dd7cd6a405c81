"""Ops whose result cannot be written into (or computed for) the tensor's dtype raise
torch's error, type and message, instead of writing a wrong value: ``abs_`` of a complex
tensor (magnitudes into a complex tensor), rounding of complex and bool tensors, float
results written into integer and bool tensors, and composites that would cast a complex
operand to float. Each expression is evaluated with ``T = staged`` and ``T = torch``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged

C = np.array([1 + 2j, -3.5 - 4j], np.complex64)
F = np.array([0.5, -2.25], np.float32)
I = np.array([1, -2], np.int64)  # noqa: E741
B = np.array([True, False])


def _eval(lib, expr):
    ns = {"T": lib, "c": lib.tensor(C), "f": lib.tensor(F), "i": lib.tensor(I), "b": lib.tensor(B)}
    try:
        return eval(expr, ns), None  # noqa: S307  (the test's own expressions)
    except Exception as e:  # noqa: BLE001  (compared with torch's)
        return None, e


@pytest.mark.parametrize(
    "expr",
    [
        "c.abs_()",
        "c.absolute_()",
        "c[0].abs_()",
        *(f"T.{op}(c)" for op in ("floor", "ceil", "trunc", "round", "fix")),
        *(f"c.{op}_()" for op in ("floor", "ceil", "trunc", "round", "fix")),
        *(f"T.{op}(b)" for op in ("floor", "ceil", "trunc", "round")),
        *(f"b.{op}_()" for op in ("floor", "ceil", "trunc", "round")),
        "T.deg2rad(c)",
        "c.rad2deg_()",
        "T.xlogy(c, 2.0)",
        "c.xlogy_(f)",
        "T.special.xlog1py(c, 2.0)",
        "T.floor_divide(c, 2)",
        "T.div(c, 2, rounding_mode='trunc')",
        # float (or complex) results into integer and bool tensors
        *(f"{t}.{op}_()" for t in "ib" for op in ("sigmoid", "exp", "sqrt", "sin", "tanh")),
        *(f"{t}.div_(2)" for t in "ib"),
        *(f"{t}.true_divide_(2)" for t in "ib"),
        *(f"{t}.{op}_(0.5)" for t in "ib" for op in ("add", "mul", "pow", "sub")),
        *(f"{t}.{op}_(1j)" for t in "ib" for op in ("add", "mul")),
        "i.add_(f)",
        "f.add_(c)",
        "b.square_()",
        "b.neg_()",
    ],
)
def test_unwritable_result_raises_torchs_error(expr):
    (_, s), (_, t) = _eval(staged, expr), _eval(torch, expr)
    assert t is not None, f"torch's {expr} raised nothing"
    assert type(s) is type(t), (expr, s, t)
    assert str(t) in str(s), (expr, str(s), str(t))


@pytest.mark.parametrize(
    "expr",
    [
        "f.abs_()",
        "i.abs_()",
        "c.abs()",
        "T.floor(f)",
        "T.floor(i)",
        "i.trunc_()",
        "T.round(i)",
        "c.sgn_()",
        "c.div_(2)",
        "c.add_(f)",
        "f.floor_()",
        "T.deg2rad(i)",
        "T.xlogy(f, 2.0)",
    ],
)
def test_writable_result_matches_torch(expr):
    (s, se), (t, te) = _eval(staged, expr), _eval(torch, expr)
    assert se is None and te is None, (se, te)
    np.testing.assert_allclose(np.asarray(s), t.numpy(), rtol=1e-6)
    assert str(s.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
