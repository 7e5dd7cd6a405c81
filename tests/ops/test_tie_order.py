"""Which of tied entries sort, argsort, topk, kthvalue, mode and quantile's gradient pick:
torch's CPU kernels' (libstdc++'s std::sort, partial_sort and nth_element, ATen's
quickselect: Note [torch's order of ties] in staged/autodiff/_torch_order.hpp), on rows of
few distinct values with NaN, for every size where the algorithms change; a compiled step
keeps ties in index order, with the same values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged.autodiff import scan
from tests.checks import to_numpy

pytestmark = pytest.mark.skipif(
    scan._torch_order is None, reason="staged.autodiff._torch_order was not built (no C++ compiler)"
)

CASES = {
    "sort": lambda L, t, n: t.sort(1).indices,
    "sort descending": lambda L, t, n: t.sort(1, descending=True).indices,
    "sort stable": lambda L, t, n: t.sort(dim=1, stable=True, descending=True).indices,
    "argsort": lambda L, t, n: t.argsort(1),
    "sort dim 0": lambda L, t, n: t.T.sort(0).indices,
    "topk": lambda L, t, n: t.topk(min(3, n), 1).indices,
    "topk smallest": lambda L, t, n: t.topk(min(3, n), 1, largest=False).indices,
    "topk of half": lambda L, t, n: t.topk(max(1, n // 2), 1).indices,
    "topk unsorted": lambda L, t, n: t.topk(max(1, n // 2), 1, sorted=False),
    "kthvalue": lambda L, t, n: t.kthvalue(min(3, n), 1).indices,
    "kthvalue last": lambda L, t, n: t.kthvalue(n, 1).indices,
    "median": lambda L, t, n: t.median(1).indices,
}
DTYPES = ["float32", "float64", "float16", "int64", "int32", "uint8"]


def _rows(dtype, n):
    x = np.random.default_rng(n).integers(0, 4, (6, n)).astype(dtype)
    if x.dtype.kind == "f" and n > 3:
        x[0, 2] = np.nan
        x[1, :3] = np.nan
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [2, 5, 16, 17, 40, 200, 1000])  # std::sort insertion-sorts <= 16
@pytest.mark.parametrize("case", list(CASES))
def test_ties_come_out_in_torchs_order(case, n, dtype):
    x = _rows(dtype, n)
    want, got = (CASES[case](L, L.tensor(x), n) for L in (torch, staged))
    for w, g in zip(*(r if isinstance(r, tuple) else (r,) for r in (want, got)), strict=True):
        np.testing.assert_array_equal(to_numpy(g), w.numpy())


@pytest.mark.parametrize("n", [5, 17, 100])
def test_mode_is_at_torchs_index(n):
    x = _rows("int64", n)
    want, got = (L.tensor(x).mode(1) for L in (torch, staged))
    np.testing.assert_array_equal(to_numpy(got.indices), want.indices.numpy())
    np.testing.assert_array_equal(to_numpy(got.values), want.values.numpy())


def test_quantile_gradient_goes_to_torchs_tied_entries():
    y = np.round(np.random.RandomState(1).randn(7, 10), 1).astype(np.float32)
    grads = []
    for L in (torch, staged):
        t = L.tensor(y, requires_grad=True)
        L.quantile(t, 0.37, interpolation="midpoint").backward()
        grads.append(to_numpy(t.grad))
    np.testing.assert_array_equal(grads[1], grads[0])


def test_a_compiled_step_keeps_ties_in_index_order_with_the_same_values():
    x = staged.tensor(_rows("float32", 40))
    step = staged.compile(lambda t: (t.sort(1), t.topk(3, 1), t.kthvalue(3, 1)))
    for got, (values, _) in zip(step(x), (x.sort(1), x.topk(3, 1), x.kthvalue(3, 1))):
        np.testing.assert_array_equal(to_numpy(got.values), to_numpy(values))
    stable = x.sort(dim=1, stable=True)
    np.testing.assert_array_equal(to_numpy(step(x)[0].indices), to_numpy(stable.indices))
