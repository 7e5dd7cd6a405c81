"""Signed zeros, NaN and wrapping that test_trust_probe5.py's fixed inputs do not reach:
relu and remainder zeros eagerly in every float dtype (against torch), the known-zero
forms of Note [folded zeros] on both compiled backends, and ONNX's integer powers with a
run-time exponent and float16 products rounded before they are widened."""

from __future__ import annotations

import math
import tempfile

import numpy as np
import onnxruntime as ort
import pytest

import staged
import torch
from tests.backends import needs_vulkan

nan, inf = math.nan, math.inf
_X = [nan, -0.0, 0.0, inf, -inf, 1.0, -1.0, 2.5, -0.5, 0.5, 3.0, -7.0]
_Y = [1.0, 1.0, -1.0, 2.0, 2.0, 1.0, -1.0, -2.5, 0.5, -0.5, -3.0, 3.5]


def _same(got, want) -> None:
    """Equal, NaN where ``want`` has it, and the sign of every other entry (zeros too)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(got, want)
    num = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_eager_relu_and_remainder_zeros(dtype):
    x, y = (staged.tensor(v).to(getattr(staged, dtype)) for v in (_X, _Y))
    tx, ty = (torch.tensor(v).to(getattr(torch, dtype)) for v in (_X, _Y))
    for got, want in (
        (staged.relu(x), torch.relu(tx)),
        (staged.remainder(x, y), torch.remainder(tx, ty)),
        (x % 0.5, tx % 0.5),
    ):
        assert got.dtype == x.dtype
        _same(got.float(), want.float())


def _known_zeros(x):
    return x * 0, 0 * x, x * -0.0, -0.0 * x, x + 0, 0 + x, x + -0.0, 0 - x, x - 0, x - x


@pytest.mark.parametrize("backend", ["llvm-cpu", pytest.param("vulkan-spirv", marks=needs_vulkan)])
def test_known_zero_forms(backend):
    """Note [folded zeros]: lavapipe folded each of these to 0, x or -x."""
    x = staged.tensor(np.array(_X, np.float32))
    got = staged.compile(_known_zeros, backend=backend)(x)
    for g, w in zip(got, _known_zeros(x), strict=True):
        _same(g, w)


def _onnx(fn, *args):
    captured = staged.capture(fn, *args)
    path = tempfile.mkdtemp() + "/m.onnx"
    captured.export_onnx(path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = dict(zip([i.name for i in sess.get_inputs()], (np.asarray(a) for a in args)))
    outs = [o.name for o in sess.get_outputs() if o.name.startswith("out.")]
    return sess.run(outs, feed)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64"])
def test_onnx_integer_power_of_a_runtime_exponent(dtype):
    """Square and multiply, wrapping as eagerly (onnxruntime's Pow goes through doubles);
    a negative exponent gives +-1 of +-1 and 0 of the rest."""
    top = np.iinfo(dtype).max
    if dtype == "uint8":
        xs, ys = [0, 1, 2, 3, 5, top, 7, 16], [0, 1, 2, 3, 7, 8, 9, 200]
    else:
        xs = [0, 1, -1, 2, -2, 3, -3, top, -top - 1, 7, 0, 1, -1, 2, -5]
        ys = [0, 5, 3, 7, 9, 0, 1, 2, 3, 40, -1, -3, -4, -1, -2]
    x, y = (staged.tensor(np.array(v, dtype)) for v in (xs, ys))
    (got,) = _onnx(lambda a, b: a**b, x, y)
    want = np.asarray(x**y)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_onnx_float16_results_are_rounded():
    """Each float16 op's result is rounded to float16 before the next op and before it is
    widened (onnxruntime computes float16 ops in float32 and dropped the graph's own casts
    back and forth around them)."""
    x = staged.tensor(np.array([50.0, -80.0, 1.5, 3e37, 1e-12, 0.1, 2049.0], np.float32))

    def fn(v):
        h = v.half()
        return (h * 1000).float(), (h * 3 + 1).float(), h.exp().float(), (h / 3).double()

    for g, w in zip(_onnx(fn, x), fn(x), strict=True):
        assert g.dtype == np.asarray(w).dtype
        _same(g, w)
