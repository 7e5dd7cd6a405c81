"""scatter / scatter_ and index_put / index_put_ beyond the op-database sweep (which checks
values, VJP, JVP, finite differences, capture and llvm-cpu of the out-of-place forms):
the in-place methods, torch's argument forms and errors, and a src larger than the index."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.backends import needs_vulkan
from tests.checks import assert_close, raises_like_torch

RNG = np.random.RandomState(3)


def _both(fn):
    return fn(staged), fn(torch)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter_forms():
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    idx = np.array([[0, 1, 2], [2, 0, 1]], np.int64)
    src = RNG.standard_normal((4, 6)).astype(np.float32)  # larger than the index
    for fn in (
        lambda ns: ns.tensor(x).scatter(0, ns.tensor(idx), ns.tensor(src)),
        lambda ns: ns.scatter(ns.tensor(x), 0, ns.tensor(idx), value=-1.5),
        lambda ns: ns.tensor(x).scatter(1, ns.tensor(idx), src=ns.tensor(src)),
        lambda ns: ns.tensor(x).scatter(-1, ns.tensor(idx), 2.0, reduce="add"),
        lambda ns: ns.tensor(x).scatter(0, ns.tensor(idx), ns.tensor(src), reduce="add"),
    ):
        ours, theirs = _both(fn)
        assert_close(ours, theirs)


def test_scatter_and_index_put_in_place():
    def run(ns):
        base = ns.zeros(3, 4, requires_grad=True)
        y = base * 1.0
        y[1:].scatter_(1, ns.tensor([[3], [0]]), ns.tensor([[5.0], [6.0]]))
        y.index_put_((ns.tensor([0, 0]), ns.tensor([1, 1])), ns.tensor(2.0), accumulate=True)
        y.index_put_((ns.tensor([2]),), ns.tensor([7.0, 8.0, 9.0, 10.0]))
        (y * ns.arange(12.0).reshape(3, 4)).sum().backward()
        return y, base.grad

    (y, g), (ty, tg) = _both(run)
    assert_close(y, ty)
    assert_close(g, tg)


def test_index_put_broadcast_accumulate_and_mask():
    x = RNG.standard_normal((3, 4)).astype(np.float64)
    for fn in (
        lambda ns: ns.tensor(x).index_put(
            (ns.tensor([[0], [2]]), ns.tensor([1, 3])), ns.tensor(1.5, dtype=ns.float64)
        ),
        lambda ns: ns.index_put(
            ns.tensor(x),
            (ns.tensor([1, 1, 1]),),
            ns.tensor([1.0, 2.0, 3.0, 4.0], dtype=ns.float64),
            accumulate=True,
        ),
        lambda ns: ns.tensor(x).index_put(
            (ns.tensor([True, False, True]),), ns.tensor([1.0], dtype=ns.float64), accumulate=True
        ),
        lambda ns: ns.tensor(x).index_put([ns.tensor([-1])], ns.tensor(0.0, dtype=ns.float64)),
    ):
        ours, theirs = _both(fn)
        assert_close(ours, theirs)


@pytest.mark.parametrize(
    "call,words",
    [
        (
            lambda ns: ns.zeros(3, 4).scatter(0, ns.tensor([[0]]), ns.ones(1, 1, dtype=ns.float64)),
            "scatter(): Expected self.dtype to be equal to src.dtype",
        ),
        (
            lambda ns: ns.zeros(3, 4).scatter(0, ns.tensor([[0]]), 1.0, reduce="mean"),
            "reduce argument must be either add or multiply",
        ),
        (lambda ns: ns.zeros(3, 4).scatter(0, ns.tensor([[5]]), 1.0), "out of bounds"),
        (
            lambda ns: ns.zeros(3, 4).scatter(0, ns.tensor([[0]]), ns.tensor(1.0)),
            "Index tensor must have the same number of dimensions as src tensor",
        ),
        (
            lambda ns: ns.zeros(3, 4).scatter(0, ns.tensor([0]), 1.0),
            "Index tensor must have the same number of dimensions as self tensor",
        ),
        (
            lambda ns: ns.zeros(3, 4).scatter(0, ns.tensor([[0.0]]), 1.0),
            "scatter(): Expected dtype int32/int64 for index",
        ),
        (
            lambda ns: ns.zeros(3).index_put(ns.tensor([0]), ns.tensor(1.0)),
            "must be tuple of Tensors, not Tensor",
        ),
        (lambda ns: ns.zeros(3).index_put((ns.tensor([0]),), 1.0), "must be Tensor, not float"),
        (
            lambda ns: ns.zeros(3).index_put((ns.tensor([0.0]),), ns.tensor(1.0)),
            "tensors used as indices must be long, int, byte or bool tensors",
        ),
        (
            lambda ns: ns.zeros(3).index_put((ns.tensor([3]),), ns.tensor(1.0)),
            "index 3 is out of bounds for dimension 0 with size 3",
        ),
        (
            lambda ns: ns.zeros(3).index_put((ns.tensor([0]),), ns.tensor(1.0, dtype=ns.float64)),
            (
                "Index put requires the source and destination dtypes match, got Float for the "
                "destination and Double for the source."
            ),
        ),
        (
            lambda ns: ns.zeros(3, requires_grad=True).index_put_(
                (ns.tensor([0]),), ns.tensor(1.0)
            ),
            "a leaf Variable that requires grad",
        ),
    ],
)
def test_errors_like_torch(call, words):
    raises_like_torch(call, words)


def test_scatter_multiply_says_unsupported():
    with pytest.raises(NotImplementedError, match="multiply"):
        staged.zeros(2).scatter(0, staged.tensor([0]), 2.0, reduce="multiply")


def test_compiled_scatter_step():
    def step(x, idx, w):
        y = x.scatter(1, idx, w * 2.0).index_put((idx[:, 1] - 1,), w[:, :1], accumulate=True)
        loss = (y**2).sum()
        loss.backward()
        return loss, w.grad

    x = staged.tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    idx = staged.tensor(np.array([[1, 3], [0, 2], [3, 1]], np.int64))
    w0 = RNG.standard_normal((3, 2)).astype(np.float32)
    eager = step(x, idx, staged.tensor(w0, requires_grad=True))
    compiled = staged.compile(step)(x, idx, staged.tensor(w0, requires_grad=True))
    for a, b in zip(compiled, eager):
        assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_onnx_export_runs_in_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime")

    def fn(x, w):
        idx = staged.tensor(np.array([[1, 3], [0, 2], [3, 1]], np.int64))
        y = x.scatter(1, idx, w * 2.0).index_put(
            (staged.tensor([2, 0, 2]),), w[:, :1], accumulate=True
        )
        return (y**2).sum()

    x = RNG.standard_normal((3, 4)).astype(np.float32)
    w = RNG.standard_normal((3, 2)).astype(np.float32)
    path = tmp_path / "scatter.onnx"
    staged.onnx.export(fn, (staged.tensor(x), staged.tensor(w, requires_grad=True)), path)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    loss, grad = sess.run(None, dict(zip(names, (x, w))))
    wt = staged.tensor(w, requires_grad=True)
    expected = fn(staged.tensor(x), wt)
    expected.backward()
    np.testing.assert_allclose(loss, np.asarray(expected.detach()), rtol=1e-5)
    np.testing.assert_allclose(grad, np.asarray(wt.grad), rtol=1e-5, atol=1e-6)


def test_scatter_reduce_amax_without_self_splits_among_the_sources_only():
    """include_self=False: x's own entry is not part of the result, so a tie with it takes
    no share of the gradient (torch 2.13 still counts it: src's gradient there is 0.5)."""
    x = staged.tensor([5.0, 1.0], requires_grad=True)
    src = staged.tensor([5.0, 3.0, 2.0], requires_grad=True)
    out = x.scatter_reduce(0, staged.tensor([0, 0, 1]), src, "amax", include_self=False)
    gx, gs = staged.autograd.grad(out.sum(), (x, src))
    assert out.tolist() == [5.0, 2.0]
    assert gx.tolist() == [0.0, 0.0] and gs.tolist() == [1.0, 0.0, 1.0]


@pytest.mark.parametrize("backend", ["llvm-cpu", pytest.param("vulkan-spirv", marks=needs_vulkan)])
def test_compiled_scatter_reduce_extremes_of_negative_int64(backend):
    """max and min start from a source that hits, not from INT64_MIN/MAX, which Vulkan's
    32-bit int64 wrapped (to 0 and -1: max of [-5, -3, -9] gave 0)."""
    x, i, s = staged.tensor([-5, -7, 3]), staged.tensor([0, 0, 1]), staged.tensor([-3, -9, -1])

    def f(x, i, s):
        return tuple(
            x.scatter_reduce(0, i, s, r, include_self=inc)
            for r in ("amax", "amin")
            for inc in (True, False)
        )

    for got, want in zip(staged.compile(f, backend=backend)(x, i, s), f(x, i, s)):
        assert got.tolist() == want.tolist()


# --- index_add_ written into the tensor's memory (Note [data-only writes]) -----------------
@pytest.mark.parametrize("index", [[4, 0, 2], [4, 0, 4, 4, 1]], ids=["distinct", "repeated"])
@pytest.mark.parametrize("dim", [0, 1])
def test_index_add_in_place_writes_the_memory_with_torchs_values(index, dim):
    rng = np.random.default_rng(3)
    base = rng.standard_normal((5, 5)).astype(np.float32)
    src = rng.standard_normal((5, 5)).astype(np.float32)
    src = src[: len(index)] if dim == 0 else src[:, : len(index)]
    results = []
    for ns in (staged, torch):
        x = ns.tensor(base)
        view = x[1:]
        before = (x.data_ptr(), x._version)
        assert x.index_add_(dim, ns.tensor(index), ns.tensor(src), alpha=0.5) is x
        assert (x.data_ptr(), x._version) == (before[0], before[1] + 1)
        assert np.array_equal(view.numpy(), x.numpy()[1:])  # the same memory
        results.append(x.numpy())
    np.testing.assert_array_equal(results[0], results[1])
    with pytest.raises(RuntimeError, match="out of bounds"):
        staged.tensor(base).index_add_(0, staged.tensor([5]), staged.ones(1, 5))
