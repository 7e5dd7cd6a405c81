"""Reductions and scans over more than 65535 entries on vulkan-spirv (Note [long
reductions on lavapipe] in ``lower/mlir/reduction.py``): in one kernel they came out wrong
on lavapipe (int32 amax of 70000 entries 6, not 100; the last running sum the last entry),
so they run in blocks there. Each case is checked against eager staged (NumPy)."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from tests.backends import needs_vulkan

N = 70000
A = np.arange(N) % 7
A[-1] = 100  # a wrong kernel that misses the last entries (or sees only them) shows
LONG = np.arange(200003) % 5  # its scan's block totals are scanned in blocks again

# (id, dtype, function, input)
CASES = [
    ("sum_f32", "float32", lambda x: x.sum(), A),
    ("amax_i32", "int32", lambda x: x.amax(), A),
    ("amin_i32", "int32", lambda x: (-x).amin(), A),
    ("argmax_i32", "int32", lambda x: x.argmax(), A),
    ("argmin_f32", "float32", lambda x: (-x).argmin(), A),
    ("amax_f32", "float32", lambda x: x.amax(), A),
    ("sum_i64_rows", "int64", lambda x: x.reshape(2, N // 2).sum(1), A),
    ("sum_i32", "int32", lambda x: x.sum(), A),
    ("sum_bool", "bool", lambda x: x.sum(), A),
    ("prod_i32", "int32", lambda x: (x == 100).int().add(1).prod(), A),
    ("any", "int32", lambda x: (x == 100).any(), A),
    ("all", "int32", lambda x: (x < 100).all(), A),
    ("mean_var_f32", "float32", lambda x: x.mean() + x.var(), A),
    ("cumsum_i64", "int64", lambda x: x.cumsum(0)[-3:], A),
    ("cumsum_f32", "float32", lambda x: x.cumsum(0)[-3:], A),
    ("cumsum_i32_flip", "int32", lambda x: x.flip(0).cumsum(0)[-3:], A),
    ("cumsum_i32_long", "int32", lambda x: x.cumsum(0)[::9973], LONG),
    ("cumprod_f32", "float32", lambda x: (x == 100).float().add(1).cumprod(0)[-2:], A),
    ("logcumsumexp_f32", "float32", lambda x: x.logcumsumexp(0)[-2:], A),
    ("cummax_f32", "float32", lambda x: x.cummax(0)[1][-2:], A),
    ("cummin_i32", "int32", lambda x: (-x).cummin(0)[0][-2:], A),
    (
        "amax_mid_keepdim",
        "float32",
        lambda x: x.reshape(1, N, 1).expand(2, N, 3).amax(1, keepdim=True),
        A,
    ),
    (
        "sum_mid_keepdim_i32",
        "int32",
        lambda x: x.reshape(1, N, 1).expand(2, N, 3).sum(1, keepdim=True),
        A,
    ),
    (
        "argmax_mid_keepdim",
        "int32",
        lambda x: x.reshape(1, N, 1).expand(2, N, 3).argmax(1, keepdim=True),
        A,
    ),
    ("cumsum_mid", "int32", lambda x: x.reshape(1, N, 1).expand(2, N, 3).cumsum(1)[:, -1], A),
]


@pytest.fixture(scope="module")
def results() -> dict:
    """{id: (eager result, vulkan-spirv result)}: every case is a result of one compiled
    step (one compile, not one a case), each on an argument of its own: no two cases share
    an input whose reductions IREE could merge."""
    xs = [staged.tensor(data.astype(dtype)) for _, dtype, _, data in CASES]
    step = staged.compile(
        lambda *xs: [fn(x) for (_, _, fn, _), x in zip(CASES, xs)], backend="vulkan-spirv"
    )
    got = step(*xs)
    return {c[0]: (c[2](x).numpy(), g.numpy()) for c, x, g in zip(CASES, xs, got)}


@needs_vulkan
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_long_reduction_on_vulkan(case, results):
    want, got = results[case]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5)
