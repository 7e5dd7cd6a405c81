"""``__torch_dispatch__`` and ``Tensor._make_wrapper_subclass`` (Note [torch dispatch]), each
case run on staged and on torch: the aten operators a wrapper subclass is handed, in
torch's order; its metadata; ``to`` and casts; indexing, of it and by it; gradients through
calls with a wrapper among arguments that do not require grad; and staged's refusals."""

import numpy as np
import pytest
import torch

import staged

LIBS = pytest.mark.parametrize("lib", [staged, torch], ids=["staged", "torch"])


def _wrapper(lib):
    seen = []

    class Wrap(lib.Tensor):
        @staticmethod
        def __new__(cls, data):
            out = lib.Tensor._make_wrapper_subclass(
                cls, data.size(), strides=data.stride(), dtype=data.dtype, device=data.device
            )
            out._data = data
            return out

        __torch_function__ = lib._C._disabled_torch_function_impl

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            seen.append(str(func))

            def unwrap(x):
                if isinstance(x, (list, tuple)):
                    return type(x)(unwrap(y) for y in x)
                return x._data if isinstance(x, Wrap) else x

            out = func(*unwrap(args), **{k: unwrap(v) for k, v in (kwargs or {}).items()})
            if isinstance(out, lib.Tensor):
                return Wrap(out)
            return out

    return Wrap, seen


def _data(x):
    return x._data.numpy() if hasattr(x, "_data") else x.numpy()


@LIBS
def test_operators_are_handed_over_as_torchs_aten_overloads(lib):
    Wrap, seen = _wrapper(lib)
    a = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    w = Wrap(lib.tensor(a))
    results = [
        w + 1,
        w * w,
        lib.cat([w, w]),
        w.sum(1),
        w[0],
        w[:, 1:],
        w[1, ::2],
        w[lib.tensor([1, 0])],
        w.t(),
        lib.abs(w),
        w.clone(),
        w[None],
        w.view(3, 2),
        w.permute(1, 0),
        w.flip(0),
        lib.sort(w, dim=1, descending=True)[0],
    ]
    assert all(type(r) is Wrap for r in results[:-1])  # (sort's is a tuple: unwrapped)
    assert seen == [
        "aten.add.Tensor",
        "aten.mul.Tensor",
        "aten.cat.default",
        "aten.sum.dim_IntList",
        "aten.select.int",
        "aten.slice.Tensor",
        "aten.select.int",
        "aten.slice.Tensor",
        "aten.index.Tensor",
        "aten.t.default",
        "aten.abs.default",
        "aten.clone.default",
        "aten.unsqueeze.default",
        "aten.view.default",
        "aten.permute.default",
        "aten.flip.default",
        "aten.sort.default",
    ]
    want = [a + 1, a * a, np.concatenate([a, a]), a.sum(1), a[0], a[:, 1:], a[1, ::2]]
    want += [a[[1, 0]], a.T, np.abs(a), a, a[None], a.reshape(3, 2), a.T, a[::-1]]
    want += [-np.sort(-a, axis=1)]
    for got, ref in zip(results, want):
        np.testing.assert_array_equal(_data(got), ref)


@LIBS
def test_metadata_is_the_wrappers_own(lib):
    Wrap, seen = _wrapper(lib)
    w = Wrap(lib.zeros(2, 3, dtype=lib.int64))
    assert tuple(w.shape) == (2, 3) and w.dtype == lib.int64 and w.dim() == 2
    assert w.numel() == 6 and len(w) == 2 and w.stride() == (3, 1) and w.size(1) == 3
    assert str(w.device) == "cpu" and not w.is_meta and w.is_cpu
    assert seen == []


@LIBS
def test_to_and_casts_copy_only_where_something_changes(lib):
    Wrap, seen = _wrapper(lib)
    w = Wrap(lib.tensor([1, 2]))
    assert w.to(lib.int64) is w and w.long() is w and seen == []
    f = w.to(lib.float32)
    d = w.double()
    assert seen == ["aten._to_copy.default"] * 2
    assert f._data.dtype == lib.float32 and d._data.dtype == lib.float64


@LIBS
def test_a_plain_tensor_indexed_by_a_wrapper_hands_it_the_index(lib):
    Wrap, seen = _wrapper(lib)
    x = lib.tensor([10.0, 20.0, 30.0])
    out = x[Wrap(lib.tensor([2, 0]))]
    assert seen == ["aten.index.Tensor"]
    np.testing.assert_array_equal(_data(out), [30.0, 10.0])


@LIBS
def test_gradients_flow_through_calls_with_a_wrapper_among_the_arguments(lib):
    class Index(lib.Tensor):  # as PyTorch Geometric's: unhandled operators give plain tensors
        @staticmethod
        def __new__(cls, data):
            out = lib.Tensor._make_wrapper_subclass(cls, data.size(), dtype=data.dtype)
            out._data = data
            return out

        __torch_function__ = lib._C._disabled_torch_function_impl

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            def unwrap(x):
                if isinstance(x, (list, tuple)):
                    return type(x)(unwrap(y) for y in x)
                return x._data if isinstance(x, Index) else x

            return func(*unwrap(args), **(kwargs or {}))

    x = lib.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    idx = Index(lib.tensor([2, 0, 2]))
    out = lib.index_select(x, 0, idx) * lib.tensor([[1.0, 2.0]]) + x[idx]
    assert type(out) is lib.Tensor and out.requires_grad
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0, 3.0], [0.0, 0.0], [4.0, 6.0]])


def test_staged_refuses_a_wrapper_that_requires_grad():
    Wrap, _ = _wrapper(staged)
    w = Wrap(staged.tensor([1.0]))
    w.requires_grad_()
    with pytest.raises(NotImplementedError, match="requires grad.*below autograd"):
        w + 1
    with staged.no_grad():
        assert (w + 1)._data.tolist() == [2.0]


def test_a_function_without_an_aten_operator_that_reads_the_data_raises():
    Wrap, _ = _wrapper(staged)
    w = Wrap(staged.tensor([1.0, 2.0]))
    with pytest.raises(NotImplementedError):
        w.tolist()


def test_handlers_keyed_by_overloads_find_them_every_time():
    assert staged.ops.aten.cat.default is staged.ops.aten.cat.default
    handled = {staged.ops.aten.cat.default: "cat"}
    seen = []

    class Keyed(staged.Tensor):
        __torch_function__ = staged._C._disabled_torch_function_impl

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            seen.append(handled.get(func, "other"))
            return staged.zeros(1)

    k = staged.Tensor._make_wrapper_subclass(Keyed, (2,), dtype=staged.float32)
    staged.cat([k, k])
    k + 1
    assert seen == ["cat", "other"]
