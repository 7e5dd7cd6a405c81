"""uint8, the one unsigned dtype, compiles and equals eager on llvm-cpu and vulkan-spirv:
SPIR-V's emulation of narrow integers has no unsigned compares, divisions or shifts, so
the MLIR lowering computes uint8 in i32 (``_in_int32`` in staged/lower/mlir/elementwise.py;
before, `lt`, `sign`, `remainder`, `fmod`, `floor_divide` and the shifts failed to compile
for Vulkan)."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from tests.backends import needs_vulkan

BINARY = (
    "add sub mul maximum minimum floor_divide remainder fmod lt le gt ge eq ne logical_and "
    "logical_or bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift"
).split()
UNARY = "abs sign bitwise_not logical_not".split()
X = np.array([200, 3, 7, 0, 255, 128], np.uint8)
Y = np.array([1, 9, 2, 5, 7, 12], np.uint8)


def _all_ops(x, y):
    return tuple(getattr(staged, n)(x, y) for n in BINARY) + tuple(
        getattr(staged, n)(x) for n in UNARY
    )


@pytest.mark.parametrize("backend", ["llvm-cpu", pytest.param("vulkan-spirv", marks=needs_vulkan)])
def test_uint8_ops_compile_and_equal_eager(backend):
    x, y = staged.tensor(X), staged.tensor(Y)
    got = staged.compile(_all_ops, backend=backend)(x, y)
    for name, g, want in zip(BINARY + UNARY, got, _all_ops(x, y)):
        assert g.dtype == want.dtype and g.tolist() == want.tolist(), name
