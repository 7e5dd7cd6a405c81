"""nan_to_num against torch where its rule, ``grad * isfinite(x)``, meets NaN and inf: the
gradient and tangent are NaN where a non-finite ``x`` meets an inf or NaN cotangent
(``inf * 0``), as torch's, and the compiled (llvm-cpu) program gives eager's values."""

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfwd

import staged
from staged.autograd import forward_ad as sfwd

INF, NAN = float("inf"), float("nan")
X = [1.0, NAN, INF, -INF, 2.0, NAN, INF, -INF, -0.0]
G = [INF, NAN, INF, NAN, NAN, 3.0, -2.0, -INF, 5.0]
DTYPES = ["float16", "float32", "float64"]
PARAMS = [{}, {"nan": 1.5, "posinf": 3.0, "neginf": -4.0}, {"posinf": 1e10}, {"neginf": 7.0}]


def _same(got, want):
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())


@pytest.mark.parametrize("kw", PARAMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_values_gradient_and_tangent_match_torch(dtype, kw):
    sd, td = getattr(staged, dtype), getattr(torch, dtype)
    xs, xt = staged.tensor(X, dtype=sd, requires_grad=True), torch.tensor(X, dtype=td)
    xt.requires_grad_()
    gs, gt = staged.tensor(G, dtype=sd), torch.tensor(G, dtype=td)
    _same(xs.nan_to_num(**kw), xt.nan_to_num(**kw))
    _same(
        staged.autograd.grad(xs.nan_to_num(**kw), xs, gs)[0],
        torch.autograd.grad(xt.nan_to_num(**kw), xt, gt)[0],
    )
    with sfwd.dual_level(), tfwd.dual_level():
        got = sfwd.unpack_dual(sfwd.make_dual(xs.detach(), gs).nan_to_num(**kw)).tangent
        want = tfwd.unpack_dual(tfwd.make_dual(xt.detach(), gt).nan_to_num(**kw)).tangent
        _same(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_equals_eager(dtype):
    sd = getattr(staged, dtype)

    def step(x, g):
        y = x.nan_to_num(nan=1.5, neginf=-4.0)
        return y, staged.autograd.grad(y, x, g)[0]

    args = (staged.tensor(X, dtype=sd, requires_grad=True), staged.tensor(G, dtype=sd))
    for got, want in zip(staged.compile(step)(*args), step(*args), strict=True):
        _same(got, want)
