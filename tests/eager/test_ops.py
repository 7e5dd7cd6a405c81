"""Public ops against torch 2.13: values, dtypes and gradients, with broadcasting, scalar
operands, type promotion, reductions, matmul ranks, errors and in-place updates."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, compare_with_torch, to_torch


_rng = np.random.RandomState(0)  # CASES are built at import, before the seed fixture runs


def r(*shape, dtype=np.float64, low=-2.0, high=2.0):
    return _rng.uniform(low, high, shape).astype(dtype)


def ints(*shape, dtype=np.int64):
    return _rng.randint(-3, 4, shape).astype(dtype)


def bools(*shape):
    return _rng.random_sample(shape) < 0.5


F32 = np.float32
# (id, fn(ns, *args) with ns the staged or torch module, args)
CASES = [
    ("add-broadcast", lambda ns, x, y: x + y, (r(3, 1), r(4))),
    ("sub-alpha", lambda ns, x, y: ns.sub(x, y, alpha=2), (r(2, 3), r(3))),
    ("mul-scalar", lambda ns, x: x * 2.5, (r(2, 3),)),
    ("rsub-scalar", lambda ns, x: 2 - x, (r(2, 3),)),
    ("rdiv-scalar", lambda ns, x: 3 / x, (r(3, low=0.5),)),
    ("div-broadcast", lambda ns, x, y: x / y, (r(2, 1, 3), r(4, 1, low=0.5))),
    ("pow-scalar", lambda ns, x: x**3, (r(4),)),
    ("rpow-scalar", lambda ns, x: 2**x, (r(4),)),
    ("pow-tensor", lambda ns, x, y: x**y, (r(2, 3, low=0.5), r(3))),
    (
        "pow-zero-base",
        lambda ns, x, y: x**y,
        (np.array([0.0, 0.0, 0.0, 2.0]), np.array([2.0, 0.0, 0.5, 3.0])),
    ),
    ("neg-abs", lambda ns, x: -x.abs(), (r(5),)),
    ("int+float32", lambda ns, x, y: x + y, (ints(3), r(3, dtype=F32))),
    ("float32+float64-0dim", lambda ns, x, y: x * y, (r(3, dtype=F32), r())),
    ("float32-0dim+float64-0dim", lambda ns, x, y: x + y, (r(dtype=F32), r())),
    ("int+pyfloat", lambda ns, x: x + 1.5, (ints(3),)),
    ("int32+int64-0dim", lambda ns, x, y: x + y, (ints(3, dtype=np.int32), ints())),
    ("int/int", lambda ns, x, y: x / y, (ints(3), np.array([1, 2, 4]))),
    ("bool+int", lambda ns, x, y: x + y, (bools(3), ints(3))),
    ("bool*pyfloat", lambda ns, x: x * 0.5, (bools(3),)),
    ("bool-and-or", lambda ns, x, y: (x & y) | ~x, (bools(4), bools(4))),
    ("compare", lambda ns, x, y: (x < y).logical_and(x != 0), (r(3, 1), r(3))),
    ("compare-scalar", lambda ns, x: x >= 0.5, (r(4),)),
    ("exp-of-int", lambda ns, x: ns.exp(x), (ints(3),)),
    ("unary-chain", lambda ns, x: ns.tanh(ns.sin(x) * ns.cos(x)).sigmoid() + x.expm1(), (r(2, 3),)),
    ("log-sqrt-rsqrt", lambda ns, x: x.log() + x.sqrt() * x.rsqrt() + x.log1p(), (r(4, low=0.5),)),
    (
        "maximum-broadcast",
        lambda ns, x, y: ns.maximum(x, y) + ns.minimum(x, y) * 2,
        (r(2, 3), r(3)),
    ),
    ("where-scalar", lambda ns, c, x: ns.where(c, x, 0.0), (bools(2, 3), r(3))),
    ("clamp", lambda ns, x: x.clamp(-0.5, 0.7), (r(10),)),
    ("clamp-min", lambda ns, x: ns.clamp(x, min=0.1), (r(10),)),
    ("clamp-at-bounds", lambda ns, x: x.clamp(0.0, 1.0), (np.array([-1.0, 0.0, 0.5, 1.0, 2.0]),)),
    (
        "clamp-tensor-bound",
        lambda ns, x, lo: ns.clamp(x, min=lo),
        (np.array([-1.0, 0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
    ),
    ("clamp-int", lambda ns, x: x.clamp(max=1), (ints(5),)),
    ("sum-dims", lambda ns, x: x.sum((0, 2)), (r(2, 3, 4),)),
    ("sum-keepdim", lambda ns, x: x.sum(-1, keepdim=True), (r(2, 3),)),
    ("sum-all", lambda ns, x: x.sum(), (r(2, 3),)),
    ("sum-bool", lambda ns, x: x.sum(0), (bools(3, 2),)),
    ("sum-int32", lambda ns, x: x.sum(), (ints(3, dtype=np.int32),)),
    ("mean-dim", lambda ns, x: x.mean(1, keepdim=True), (r(3, 4),)),
    ("var-std", lambda ns, x: x.var(0) + x.std(1, keepdim=True), (r(3, 4),)),
    ("var-correction0", lambda ns, x: x.var(correction=0), (r(5),)),
    ("amax-dims", lambda ns, x: x.amax((0, 2), keepdim=True) + x.amin(1).sum(), (r(2, 3, 4),)),
    ("max-all", lambda ns, x: x.max() - x.min(), (r(3, 4),)),
    ("logsumexp", lambda ns, x: ns.logsumexp(x, 1), (r(3, 4) * 30,)),
    ("logsumexp-keepdim", lambda ns, x: ns.logsumexp(x, (0, 1), keepdim=True), (r(3, 4),)),
    ("softmax", lambda ns, x: ns.softmax(x, -1), (r(3, 4) * 30,)),
    ("softmax-dim0", lambda ns, x: x.softmax(0), (r(3, 4),)),
    ("log_softmax", lambda ns, x: ns.log_softmax(x, 1), (r(3, 4) * 30,)),
    ("matmul-1d-1d", lambda ns, a, b: a @ b, (r(3), r(3))),
    ("matmul-2d-1d", lambda ns, a, b: ns.matmul(a, b), (r(2, 3), r(3))),
    ("matmul-1d-2d", lambda ns, a, b: a @ b, (r(3), r(3, 4))),
    ("matmul-2d-2d", lambda ns, a, b: a @ b, (r(2, 3), r(3, 4))),
    ("matmul-3d-2d", lambda ns, a, b: a @ b, (r(5, 2, 3), r(3, 4))),
    ("matmul-1d-3d", lambda ns, a, b: a @ b, (r(3), r(2, 3, 4))),
    ("matmul-batch-broadcast", lambda ns, a, b: a @ b, (r(2, 1, 2, 3), r(4, 3, 5))),
    (
        "mm-bmm",
        lambda ns, a, b, c: ns.mm(a, b).sum() + ns.bmm(c, c.mT).sum(),
        (r(2, 3), r(3, 2), r(2, 3, 4)),
    ),
    ("matmul-float32", lambda ns, a, b: a @ b, (r(4, 3, dtype=F32), r(3, 2, dtype=F32))),
    ("reshape-view", lambda ns, x: x.reshape(-1, 2).view(2, 2, 3) * 2, (r(3, 4),)),
    ("permute-transpose", lambda ns, x: x.permute(2, 0, 1).transpose(0, 2) + 1, (r(2, 3, 4),)),
    ("t-T-mT", lambda ns, x, y: x.t() @ y.T + y.mT.sum(), (r(3, 2), r(4, 3))),
    ("squeeze-unsqueeze", lambda ns, x: x.unsqueeze(-1).squeeze(0).squeeze() * 3, (r(1, 3, 1),)),
    ("flatten", lambda ns, x: ns.flatten(x, 1) * 2, (r(2, 3, 4),)),
    ("expand", lambda ns, x, y: x.expand(2, 3, -1) * y, (r(3, 1), r(2, 3, 4))),
    ("broadcast_to", lambda ns, x: x.broadcast_to((2, 3)) * 2, (r(3),)),
    ("clone-to", lambda ns, x: x.clone().to(ns.float32).double() * 2, (r(3),)),
    ("scalar-operands-0dim", lambda ns, x: (x * 2 + 1) / x, (r(low=0.5),)),
    ("relu-at-zero", lambda ns, x: ns.relu(x), (np.array([-1.0, 0.0, 2.0]),)),
    ("abs-sign", lambda ns, x: x.abs() + ns.sign(x), (r(5),)),
]


@pytest.mark.parametrize("fn,args", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_op_matches_torch(fn, args):
    compare_with_torch(lambda *a: fn(staged, *a), lambda *a: fn(torch, *a), *args)


def test_relu_gradient_at_zero_is_zero():
    x = staged.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    staged.relu(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0]


TIES = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0], [5.0, 5.0, 5.0]])


@pytest.mark.parametrize("which", ["max", "min"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_with_dim_returns_values_and_indices(which, keepdim):
    x, tx = staged.tensor(TIES, requires_grad=True), to_torch(staged.tensor(TIES), True)
    out, tout = getattr(x, which)(1, keepdim=keepdim), getattr(tx, which)(1, keepdim=keepdim)
    values, indices = out
    assert out.values is values and out.indices is indices
    assert_close(values, tout.values)
    assert_close(indices, tout.indices)
    assert values.grad_fn is not None and indices.grad_fn is None
    values.sum().backward()
    tout.values.sum().backward()
    assert_close(x.grad, tx.grad)
    assert x.grad.sum().item() == 3  # one element per row: the chosen index only


def test_amax_splits_gradient_evenly_on_ties():
    x, tx = staged.tensor(TIES, requires_grad=True), to_torch(staged.tensor(TIES), True)
    x.amax(1).sum().backward()
    tx.amax(1).sum().backward()
    assert_close(x.grad, tx.grad)
    assert x.grad.tolist()[2] == pytest.approx([1 / 3] * 3)
    y, ty = staged.tensor(TIES, requires_grad=True), to_torch(staged.tensor(TIES), True)
    staged.maximum(y, staged.tensor(3.0, dtype=staged.float64)).sum().backward()
    torch.maximum(ty, torch.tensor(3.0, dtype=torch.float64)).sum().backward()
    assert_close(y.grad, ty.grad)


def test_argmax_argmin():
    x = r(3, 4)
    for which in ("argmax", "argmin"):
        for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
            assert_close(
                getattr(staged.tensor(x), which)(**kw), getattr(torch.tensor(x), which)(**kw)
            )


def test_mean_of_integer_tensor_raises():
    with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype"):
        staged.tensor([1, 2]).mean()


@pytest.mark.parametrize("shapes", [((2, 3), (4, 5)), ((5, 2, 3), (2, 4))])
def test_matmul_shape_mismatch_names_both_shapes(shapes):
    a, b = (staged.ones(*s) for s in shapes)
    with pytest.raises(RuntimeError) as err:
        a @ b
    with pytest.raises(RuntimeError):
        torch.ones(*shapes[0]) @ torch.ones(*shapes[1])
    sa, sb = ("x".join(map(str, s[-2:])) for s in shapes)
    assert sa in str(err.value) and sb in str(err.value), str(err.value)


def test_matmul_dtype_mismatch_raises():
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        staged.ones(2, 3) @ staged.ones(3, 2, dtype=staged.float64)


def test_matmul_vector_mismatch_and_0d():
    with pytest.raises(RuntimeError, match="inconsistent tensor size"):
        staged.ones(3) @ staged.ones(4)
    with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D"):
        staged.matmul(staged.ones(()), staged.ones(3))


def test_broadcasting_mismatch_message_matches_torch():
    with pytest.raises(RuntimeError) as err:
        line = sys._getframe().f_lineno + 1
        staged.ones(2, 3) + staged.ones(4)
    with pytest.raises(RuntimeError) as terr:
        torch.ones(2, 3) + torch.ones(4)
    site, _, message = str(err.value).partition(": ")  # the user's line, then torch's text
    assert site.endswith(f"test_ops.py:{line}") and message == str(terr.value)


def test_dimension_out_of_range():
    with pytest.raises(IndexError, match="Dimension out of range"):
        staged.ones(2, 3).sum(2)


# --- in-place ---------------------------------------------------------------------------
def test_inplace_on_leaf_requiring_grad_raises():
    x, tx = staged.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError) as terr:
        tx.add_(1)
    with pytest.raises(RuntimeError) as err:
        line = sys._getframe().f_lineno + 1
        x.add_(1)
    site, _, message = str(err.value).partition(": ")  # the user's line, torch's text, advice
    assert site.endswith(f"test_ops.py:{line}") and message.startswith(str(terr.value))
    assert "staged.no_grad()" in message
    with staged.no_grad():  # allowed outside grad mode, as in torch
        x.mul_(2)
    assert x.tolist() == [2.0, 2.0, 2.0] and x._version == 1 and x.is_leaf


def test_inplace_on_non_leaf_rewrites_grad_fn():
    xv, yv = r(3), r(3)
    x, y = staged.tensor(xv, requires_grad=True), staged.tensor(yv, requires_grad=True)
    tx, ty = torch.tensor(xv, requires_grad=True), torch.tensor(yv, requires_grad=True)
    a, ta = x * 2, tx * 2
    a.mul_(y)
    ta.mul_(ty)
    assert a.grad_fn.name() == ta.grad_fn.name() == "MulBackward0"
    assert a._version == ta._version == 1
    a.sum().backward()
    ta.sum().backward()
    assert_close(a, ta)
    assert_close(x.grad, tx.grad)
    assert_close(y.grad, ty.grad)


@pytest.mark.parametrize("op", ["add_", "sub_", "div_", "pow_"])
def test_inplace_chain_gradients_match_torch(op):
    xv, yv = r(2, 3, low=0.5), r(3, low=0.5)

    def f(ns, x, y):
        a = x.sin()  # saves x, not its output
        getattr(a, op)(y)
        return (a * x).sum(1)

    compare_with_torch(lambda *a: f(staged, *a), lambda *a: f(torch, *a), xv, yv)


def test_inplace_int_result_into_float_and_bad_cast():
    x = staged.zeros(3)
    x.add_(staged.tensor([1, 2, 3]))
    assert x.dtype is staged.float32 and x.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(
        RuntimeError, match="result type Float can't be cast to the desired output type Long"
    ):
        staged.tensor([1, 2]).mul_(1.5)


@pytest.mark.parametrize("modify", ["output", "input"])
def test_saved_tensor_modified_in_place_raises_at_backward(modify):
    x = staged.tensor([0.5, 1.0], requires_grad=True)
    h = x * 1  # a non-leaf that may be modified
    y = h.exp() if modify == "output" else h.sin()  # exp saves its output, sin its input
    (y if modify == "output" else h).add_(1)
    with pytest.raises(
        RuntimeError,
        match="one of the variables needed for gradient "
        "computation has been modified by an inplace "
        "operation",
    ) as err:
        y.sum().backward()
    assert "is at version 1; expected version 0 instead" in str(err.value)


def test_inplace_on_view_reaches_the_base_gradient():
    x = staged.ones(2, requires_grad=True)
    y = x * 1
    y.reshape(2, 1).mul_(3)
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
