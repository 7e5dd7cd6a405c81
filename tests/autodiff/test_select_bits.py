"""The ``where`` primitive's eager kernel (``_select`` in staged/autodiff/elementwise.py)
selects from the operands' bits: np.where's result bit for bit (NaNs, -0.0, infinities),
with any operand broadcast from a smaller shape or a number, as masked_fill's value and
causal mask are."""

import numpy as np
import pytest

from staged.autodiff.elementwise import _select

RNG = np.random.default_rng(0)
SPECIAL = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5])
FULL = (8, 4, 16, 16)
SHAPES = [FULL, (1, 1, 16, 16), (4, 1, 16), (16,), ()]


def _values(shape, dtype):
    v = RNG.standard_normal(shape)
    v[RNG.random(shape) < 0.2] = RNG.choice(SPECIAL)
    return np.asarray(v, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("cs", SHAPES, ids=str)
@pytest.mark.parametrize("xs", SHAPES, ids=str)
@pytest.mark.parametrize("ys", SHAPES[:3], ids=str)
def test_select_is_np_wheres_bits(dtype, cs, xs, ys):
    c = RNG.random(cs) < 0.5
    c, x, y = np.broadcast_arrays(c, _values(xs, dtype), _values(ys, dtype))
    got, want = _select(c, x, y), np.where(c, x, y)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
