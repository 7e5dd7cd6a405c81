"""Tensor subclasses and the ``__torch_function__`` protocol, each case run on staged and on
torch: results keep the subclass through functions, methods, operators and tensor
properties; a subclass's ``__torch_function__`` sees those calls, in torch's order, with
modes first; ``DisableTorchFunctionSubclass``, ``NotImplemented``, classes that are not
Tensor subclasses, and views, pickles and copies of subclass instances."""

import copy
import pickle

import numpy as np
import pytest
import torch

import staged

LIBS = pytest.mark.parametrize("lib", [staged, torch], ids=["staged", "torch"])


def _classes(lib):
    class Plain(lib.Tensor):
        pass

    seen = []

    class Logged(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs)

    return Plain, Logged, seen


@LIBS
def test_results_keep_the_subclass(lib):
    Plain, _, _ = _classes(lib)
    x = lib.tensor([[1.0, -2.0], [3.0, 4.0]]).as_subclass(Plain)
    results = {
        "method": x.exp(),
        "operator": x + 1,
        "reflected": 1 - x,
        "function": lib.exp(x),
        "binary function": lib.mul(x, 2),
        "nn.functional": lib.nn.functional.relu(x),
        "linalg": lib.linalg.norm(x),
        "indexing": x[0],
        "property": x.T,
        "reduction": x.sum(),
        "cat with a plain tensor": lib.cat([lib.ones(1, 2), x]),
        "clone": x.clone(),
        "detach": x.detach(),
    }
    assert {k: type(v) for k, v in results.items()} == dict.fromkeys(results, Plain)
    assert [type(t) for t in x.unbind(0)] == [Plain, Plain]  # members of tuples
    m = x.max(0)
    assert type(m).__name__ == "max" and type(m.values) is Plain and type(m.indices) is Plain
    assert isinstance(x.add_(1), Plain) and type(x.tolist()) is list
    assert results["operator"].tolist() == [[2.0, -1.0], [4.0, 5.0]]
    assert repr(lib.ones(2).as_subclass(Plain)) == "Plain([1., 1.])"


@LIBS
def test_parameters_and_their_subclasses_give_plain_tensors(lib):
    class MyParameter(lib.nn.Parameter):
        pass

    p = lib.nn.Parameter(lib.ones(2))
    q = MyParameter(lib.ones(2))
    assert (
        type(p * 2) is lib.Tensor and type(q + 1) is lib.Tensor and type(lib.exp(q)) is lib.Tensor
    )
    assert lib._C._disabled_torch_function_impl is type(p).__torch_function__


@LIBS
def test_a_subclass_sees_its_calls_in_torchs_order(lib):
    _, Logged, seen = _classes(lib)
    z = lib.ones(2, 3).as_subclass(Logged)
    w = lib.ones(4, 3)
    z.exp()
    z + 1
    1 - z
    z += 1
    lib.nn.functional.linear(z, w)
    lib.nn.functional.relu(z)
    z.T
    z.real
    len(z)
    lib.stack([w[0], z[0]])
    assert seen == [
        "exp",
        "add",  # torch hands operators over as the method they run
        "__rsub__",
        "add_",
        "linear",
        "relu",
        "__get__",
        "__get__",
        "__len__",
        "__getitem__",  # w[0] is plain: only z's indexing and the stack are seen
        "stack",
    ]


@LIBS
def test_gradients_flow_through_subclasses_as_torchs(lib):
    Plain, _, _ = _classes(lib)
    x = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
    y = (x * 1).as_subclass(Plain)
    assert y.grad_fn.name() == "AliasBackward0" and y._base is not None
    out = (lib.nn.functional.gelu(y) * y.exp()).sum()
    assert type(out) is Plain
    out.backward()
    w = lib.Tensor._make_subclass(Plain, lib.ones(2, dtype=lib.float64), True)
    assert type(w) is Plain and w.is_leaf and w.requires_grad
    (w * lib.tensor([3.0, 4.0], dtype=lib.float64)).sum().backward()
    return x.grad.tolist(), w.grad.tolist()


def test_gradients_equal_torchs():
    mine = test_gradients_flow_through_subclasses_as_torchs(staged)
    theirs = test_gradients_flow_through_subclasses_as_torchs(torch)
    for a, b in zip(mine, theirs):  # float64 gelu and exp: a few ulps
        np.testing.assert_allclose(a, b, rtol=1e-14)


@LIBS
def test_a_subclass_view_written_in_place_regenerates_its_grad_fn(lib):
    Plain, _, _ = _classes(lib)
    x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
    base = (x * 1).as_subclass(Plain)
    view = base[:2]
    base.mul_(x)  # the view's grad_fn must now go through the multiplication
    assert type(view) is Plain or type(view).__name__ == "Plain"
    assert view.grad_fn.name() == "AsStridedBackward0"
    (view * lib.tensor([1.0, 10.0], dtype=lib.float64)).sum().backward()
    assert x.grad.tolist() == [2.0, 40.0, 0.0]
    assert isinstance(view, Plain) and type(view.detach()) is Plain


@LIBS
def test_disabling_the_protocol(lib):
    Plain, Logged, seen = _classes(lib)
    z = lib.ones(2).as_subclass(Logged)
    with lib._C.DisableTorchFunctionSubclass():
        assert not lib._C._is_torch_function_enabled()
        assert type(z + 1) is lib.Tensor and type(lib.exp(z)) is lib.Tensor
    assert seen == [] and lib._C._is_torch_function_enabled()
    with lib._C.DisableTorchFunction():
        assert type(lib.exp(z)) is lib.Tensor
    assert lib.overrides.has_torch_function((z, 1)) and not lib.overrides.has_torch_function((1,))
    assert lib.overrides.has_torch_function_unary(z) and lib.overrides.is_tensor_like(z)
    assert not lib.overrides.is_tensor_like(np.ones(2))


@LIBS
def test_subclasses_go_before_their_bases_and_not_implemented_falls_through(lib):
    order = []

    class A(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            order.append(("A", [t.__name__ for t in types]))
            with lib._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

    class B(A):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            order.append(("B", [t.__name__ for t in types]))
            return NotImplemented

    class C(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return NotImplemented

    a, b = lib.ones(2).as_subclass(A), lib.ones(2).as_subclass(B)
    out = lib.add(a, b)
    assert order == [("B", ["B", "A"]), ("A", ["B", "A"])] and type(out) is lib.Tensor
    with pytest.raises(TypeError, match="all __torch_function__ handlers returned NotImplemented"):
        lib.add(lib.ones(2).as_subclass(C), 1)


@LIBS
def test_a_class_that_is_not_a_tensor_takes_part(lib):
    """torch's docs' ScalarTensor: ``torch.mean`` of one runs its own implementation."""
    handled = {}

    class ScalarTensor:
        def __init__(self, n, value):
            self._n, self._value = n, value

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func not in handled:
                return NotImplemented
            return handled[func](*args, **(kwargs or {}))

    handled[lib.mean] = lambda s: s._value
    handled[lib.add] = lambda s, other: s._value + other
    d = ScalarTensor(5, 2.0)
    assert lib.mean(d) == 2.0 and lib.add(d, 1.0) == 3.0
    assert lib.overrides.has_torch_function((d,))
    with pytest.raises(TypeError):
        lib.exp(d)


@LIBS
def test_modes_see_a_call_before_the_subclass(lib):
    _, Logged, seen = _classes(lib)
    modes = []

    class Mode(lib.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            modes.append((func.__name__, [t.__name__ for t in types]))
            return func(*args, **(kwargs or {}))

    z = lib.ones(2).as_subclass(Logged)
    with Mode():
        out = lib.nn.functional.relu(z)
    assert modes == [("relu", ["Logged"])] and seen == ["relu"] and type(out) is Logged


@LIBS
def test_handle_torch_function_in_a_python_function(lib):
    _, Logged, seen = _classes(lib)

    def double(x):
        if lib.overrides.has_torch_function_unary(x):
            return lib.overrides.handle_torch_function(double, (x,), x)
        return x * 2

    z = lib.ones(2).as_subclass(Logged)
    assert (
        type(double(z)) is Logged and seen[0] == "double" and double(lib.ones(1)).tolist() == [2.0]
    )


def test_pickles_and_copies_keep_the_subclass():
    lib = staged
    x = lib.tensor([1.0, 2.0]).as_subclass(_Pickled)
    x.tag = "kept"
    y = pickle.loads(pickle.dumps(x))
    z = copy.copy(x)
    assert type(y) is _Pickled and y.tag == "kept" and y.tolist() == [1.0, 2.0]
    assert type(z) is _Pickled
    w = copy.deepcopy(lib.Tensor._make_subclass(_Pickled, lib.ones(2)))
    assert type(w) is _Pickled  # (torch's refuses unless new_empty gives a _Pickled)


class _Pickled(staged.Tensor):  # module level: pickled by reference
    pass


def test_torchs_pickled_subclass_is_torchs():  # the oracle of the test above
    class_ = type("_TorchPickled", (torch.Tensor,), {"__module__": __name__})
    globals()["_TorchPickled"] = class_
    x = torch.tensor([1.0]).as_subclass(class_)
    assert type(pickle.loads(pickle.dumps(x))) is class_


def test_a_torchvision_style_subclass():
    """torchvision's TVTensor pattern: results unwrap to plain tensors, but for a few
    functions that keep the subclass, and metadata read without the protocol."""
    outs = {}
    for lib in (staged, torch):
        keep = {lib.Tensor.clone, lib.Tensor.to, lib.Tensor.detach, lib.Tensor.requires_grad_}

        class Box(lib.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                with lib._C.DisableTorchFunctionSubclass():
                    out = func(*args, **(kwargs or {}))
                if func in keep and isinstance(args[0], cls):
                    return out.as_subclass(cls) if isinstance(out, lib.Tensor) else out
                if isinstance(out, cls):
                    return out.as_subclass(lib.Tensor)
                return out

            @property
            def shape(self):
                with lib._C.DisableTorchFunctionSubclass():
                    return super().shape

        b = lib.tensor([[0.0, 1.0, 4.0, 5.0]]).as_subclass(Box)
        outs[lib.__name__] = [
            type(b.clone()).__name__,
            type(b.to(lib.float64)).__name__,
            type(b + 1).__name__,
            type(b.flip(-1)).__name__,
            type(b.add_(1)).__name__,
            tuple(b.shape),
            (b[:, 2:] - b[:, :2]).tolist(),
        ]
    assert outs["staged"] == outs["torch"]


@LIBS
def test_a_subclass_made_by_its_own_new_with_keywords(lib):
    """torchvision's ``BoundingBoxes(data, format=..., canvas_size=...)``: Python calls
    ``__init__`` with the same arguments after ``__new__``, and Tensor's does nothing then."""

    class Boxes(lib.Tensor):
        def __new__(cls, data, *, fmt):
            t = lib.as_tensor(data).as_subclass(cls)
            t.fmt = fmt
            return t

    b = Boxes([[1.0, 2.0, 3.0, 4.0]], fmt="XYXY")
    assert type(b) is Boxes and b.fmt == "XYXY" and b.tolist() == [[1.0, 2.0, 3.0, 4.0]]
    assert type(b[:, :2]) is Boxes and lib.Tensor([1.0]).tolist() == [1.0]
