"""The backward engine against torch: graph structure, backward/grad options, hooks,
grad modes, non-leaf .grad, retain_grad and deep graphs."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, assert_raises_like_torch, to_torch


def leaves(*shapes):
    """Pairs of (staged, torch) float64 leaves holding the same random data."""
    out = []
    for s in shapes:
        t = staged.tensor(np.random.standard_normal(s), requires_grad=True)
        out.append((t, to_torch(t)))
    return out


def _structure(fn):
    """grad_fn names and next_functions as nested tuples, None where there is no edge."""
    if fn is None:
        return None
    return (
        fn.name().replace("torch::autograd::", ""),
        tuple((_structure(n), nr) for n, nr in fn.next_functions),
    )


def test_grad_fn_names_and_next_functions_match_torch():
    (x, tx), (w, tw) = leaves((2, 3), (3, 4))
    c = staged.tensor(np.ones((2, 4)))  # needs no grad: its edge is (None, 0)

    def graph(x, w, c):  # no broadcasting: staged records it as an explicit expand
        h = x @ w
        return (h.tanh() * c + h.exp() / c).sum()

    out, tout = graph(x, w, c), graph(tx, tw, torch.tensor(c.numpy()))
    assert _structure(out.grad_fn) == _structure(tout.grad_fn)
    mm = (
        out.grad_fn.next_functions[0][0]
        .next_functions[0][0]
        .next_functions[0][0]
        .next_functions[0][0]
    )
    assert mm.name() == "MmBackward0"
    # the edges end in each leaf's AccumulateGrad
    assert all(n.variable is t for (n, _), t in zip(mm.next_functions, (x, w)))
    assert x.grad_fn is None and x.is_leaf and not out.is_leaf


def test_backward_with_gradient_argument():
    ((x, tx),) = leaves((3,))
    g = np.array([1.0, -2.0, 0.5])
    (x * x).backward(gradient=staged.tensor(g))
    (tx * tx).backward(gradient=torch.tensor(g))
    assert_close(x.grad, tx.grad)


def test_implicit_grad_on_non_scalar_raises():
    x = staged.ones(3, requires_grad=True)
    with pytest.raises(
        RuntimeError, match="grad can be implicitly created only for scalar outputs"
    ):
        (x * 2).backward()


def test_backward_twice_through_freed_graph_raises_torch_message():
    x, tx = staged.tensor(1.5, requires_grad=True), torch.tensor(1.5, requires_grad=True)
    y, ty = x.exp() * x, tx.exp() * tx
    y.backward()
    ty.backward()
    with pytest.raises(RuntimeError) as terr:
        ty.backward()
    with pytest.raises(RuntimeError) as err:
        line = sys._getframe().f_lineno + 1
        y.backward()
    site, _, message = str(err.value).partition(": ")  # the user's line, then torch's text
    assert site.endswith(f"test_engine.py:{line}") and message == str(terr.value)


def test_retain_graph_and_accumulation_across_backwards():
    ((x, tx),) = leaves((3,))
    y, ty = (x.sin() * x).sum(), (tx.sin() * tx).sum()
    y.backward(retain_graph=True)
    ty.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    ty.backward()
    assert_close(x.grad, tx.grad)
    assert_close(x.grad, 2 * first)


def test_autograd_grad_does_not_touch_dot_grad():
    ((x, tx),) = leaves((3,))
    (gx,) = staged.autograd.grad((x**3).sum(), x)
    (tgx,) = torch.autograd.grad((tx**3).sum(), tx)
    assert_close(gx, tgx)
    assert x.grad is None


def test_autograd_grad_allow_unused_and_materialize():
    (x, _), (z, _) = leaves((2,), (2,))
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        staged.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = staged.autograd.grad(y, [x, z], allow_unused=True, retain_graph=True)
    assert gz is None and gx.tolist() == [2.0, 2.0]
    gx, gz = staged.autograd.grad(y, [x, z], materialize_grads=True)
    assert gz.tolist() == [0.0, 0.0] and gz.dtype is z.dtype
    with pytest.raises(ValueError, match="allow_unused"):
        staged.autograd.grad(y, [x], materialize_grads=True, allow_unused=False)


def test_autograd_grad_with_grad_outputs_for_several_outputs():
    ((x, tx),) = leaves((3,))
    u, v = np.random.standard_normal(3), np.random.standard_normal(3)
    (g,) = staged.autograd.grad([x.exp(), x * x], [x], [staged.tensor(u), staged.tensor(v)])
    (tg,) = torch.autograd.grad([tx.exp(), tx * tx], [tx], [torch.tensor(u), torch.tensor(v)])
    assert_close(g, tg)


def test_hessian_vector_product_with_create_graph():
    (x, tx), (w, tw) = leaves((4,), (4, 4))
    v = np.random.standard_normal(4)

    def hvp(ns, x, w):
        y = ((w @ x).tanh() * x).sum()
        (g,) = ns.autograd.grad(y, x, create_graph=True)
        assert g.requires_grad
        return ns.autograd.grad((g * ns.tensor(v)).sum(), [x, w])

    for a, b in zip(hvp(staged, x, w), hvp(torch, tx, tw)):
        assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_backward_inputs_touches_only_those_leaves():
    (x, tx), (y, ty) = leaves((3,), (3,))
    (x * y).sum().backward(inputs=[x])
    (tx * ty).sum().backward(inputs=[tx])
    assert_close(x.grad, tx.grad)
    assert y.grad is None and ty.grad is None


def test_tensor_hooks_modify_grad_in_registration_order():
    fired = {"staged": [], "torch": []}

    def run(ns, x, key):
        h = x * 2
        h.register_hook(lambda g: fired[key].append("h1") or g * 3)
        h.register_hook(lambda g: fired[key].append("h2") or g + 1)
        x.register_hook(lambda g: fired[key].append("leaf"))  # None: grad unchanged
        (h * h).sum().backward()

    ((x, tx),) = leaves((3,))
    run(staged, x, "staged")
    run(torch, tx, "torch")
    assert fired["staged"] == fired["torch"] == ["h1", "h2", "leaf"]
    assert_close(x.grad, tx.grad)


def test_removed_hook_does_not_fire():
    x = staged.ones(2, requires_grad=True)
    handle = x.register_hook(lambda g: g * 100)
    handle.remove()
    (x * 1).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_hook_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        staged.ones(2).register_hook(lambda g: g)


def test_no_grad_context_and_decorator():
    x = staged.ones(2, requires_grad=True)
    with staged.no_grad():
        y = x * 2
        assert not staged.is_grad_enabled()
        with staged.enable_grad():
            z = x * 2
    assert not y.requires_grad and y.grad_fn is None and z.requires_grad

    @staged.no_grad()
    def f(t):
        return t * 2

    @staged.enable_grad()
    def g(t):
        return t * 2

    assert not f(x).requires_grad and staged.is_grad_enabled()
    with staged.no_grad():
        assert g(x).requires_grad


def test_set_grad_enabled_context_function_and_decorator():
    x = staged.ones(2, requires_grad=True)
    with staged.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert staged.is_grad_enabled()
    staged.set_grad_enabled(False)  # function form: switches at once
    try:
        assert not staged.is_grad_enabled() and not (x * 2).requires_grad
    finally:
        staged.set_grad_enabled(True)
    assert staged.is_grad_enabled()

    @staged.set_grad_enabled(False)
    def f(t):
        return t * 2

    assert staged.is_grad_enabled()  # decorating changes nothing until called
    assert not f(x).requires_grad and staged.is_grad_enabled()


def test_grad_of_non_leaf_warns_and_is_none():
    x = staged.ones(2, requires_grad=True)
    y = x * 2
    y.sum().backward()
    with pytest.warns(UserWarning, match="not a leaf Tensor"):
        assert y.grad is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is not None  # leaves do not warn


def test_retain_grad():
    ((x, tx),) = leaves((3,))
    y, ty = x.exp(), tx.exp()
    y.retain_grad()
    ty.retain_grad()
    assert y.retains_grad
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(y.grad, ty.grad)
    assert_close(x.grad, tx.grad)


def test_requires_grad_rules():
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        staged.tensor([1, 2]).requires_grad_()
    y = staged.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf"):
        y.requires_grad_(False)
    d = y.detach()
    assert d.is_leaf and not d.requires_grad
    d.mul_(1)  # shares data and version counter with y
    assert y._version == 1


def test_deep_chain_has_no_recursion_limit():
    x = staged.tensor(1.0, dtype=staged.float64, requires_grad=True)
    y = x
    for _ in range(5000):
        y = y * 1.0001
    y.backward()
    assert x.grad.item() == pytest.approx(1.0001**5000)
    assert (staged.tensor(1.0, requires_grad=True) * 2).grad_fn is not None


def _run_twice(lib, make_loss, stash=None):
    """Two backward passes of ``make_loss(x, b, g)`` into the same leaves; the leaves'
    grads and the user's gradient tensor ``g`` afterwards, as NumPy arrays."""
    x = lib.ones(3, dtype=lib.float64, requires_grad=True)
    b = lib.ones(3, dtype=lib.float64, requires_grad=True)
    g = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)
    if stash is not None:
        b.register_hook(lambda grad: stash.append(grad))
    for _ in range(2):
        make_loss(x, b, g)
    return [np.array(t.detach().numpy()) for t in (x.grad, b.grad, g)]


@pytest.mark.parametrize(
    "case", ["root gradient", "fan-out of add", "sub", "expand", "hook keeps the gradient"]
)
def test_accumulated_grads_never_alias(case):
    # a gradient stored as one leaf's .grad and accumulated into in place must not be
    # another leaf's .grad, the user's gradient argument, or a tensor a hook kept
    losses = {
        "root gradient": lambda x, b, g: (x + b).backward(g),
        "fan-out of add": lambda x, b, g: ((x + b) * g).sum().backward(),
        "sub": lambda x, b, g: ((x - b) * g).sum().backward(),
        "expand": lambda x, b, g: ((x * 1 + b.sum()) * g).sum().backward(),
        "hook keeps the gradient": lambda x, b, g: ((x * b) * g).sum().backward(),
    }
    ours, theirs = [], []
    got = _run_twice(staged, losses[case], ours)
    want = _run_twice(torch, losses[case], theirs)
    for a, e in zip(got, want):
        np.testing.assert_array_equal(a, e)
    for a, e in zip(ours, theirs):  # what the hook kept was not accumulated into later
        np.testing.assert_array_equal(a.numpy(), e.numpy())


def test_gradient_sums_bind_the_strict_add():
    """Where gradients meet (a tensor used twice, ``.grad`` accumulated with create_graph,
    a retained non-leaf's gradient) the engine adds with the strict primitive, not the
    public ``+`` with its promotion and broadcasting: every gradient summed there has the
    dtype and shape of the tensor it belongs to (rules, Functions and hooks are checked)."""
    from pathlib import Path

    public_ops = str(Path(staged.__file__).parent / "eager" / "ops")
    called = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(public_ops):
            called.append(frame.f_code.co_name)

    results = []
    for lib in (staged, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = lib.tensor([3.0, 4.0])
        y = x * h
        y.retain_grad()
        losses = [(y * h).sum(), (y * y).sum()]
        if lib is staged:
            sys.setprofile(profile)
        try:
            lib.autograd.backward(losses, create_graph=True)
            lib.autograd.backward(losses[0], create_graph=True)
        finally:
            sys.setprofile(None)
        results.append([t.grad.detach().numpy() for t in (x, y)])
    assert "add" not in called and "__add__" not in called, called
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want)


@pytest.mark.parametrize(
    "hook",
    [
        lambda gi, go: (gi[0].double(), None),  # another dtype
        lambda gi, go: (gi[0][None], None),  # another shape
        lambda gi, go: (3, None),  # not a tensor
        lambda gi, go: (gi[0],),  # too few
    ],
    ids=["dtype", "shape", "int", "count"],
)
def test_node_post_hooks_may_not_change_a_gradients_dtype_or_shape(hook):
    errors = []
    for lib in (staged, torch):
        a = lib.tensor([1.0], requires_grad=True)
        b = a * 2
        b.grad_fn.register_hook(hook)
        with pytest.raises((RuntimeError, TypeError)) as e:
            (b + b * 1).sum().backward()
        errors.append((e.type, str(e.value)))
    assert errors[0] == errors[1]


def test_node_hooks_may_not_replace_a_none_gradient():
    errors = []
    for lib in (staged, torch):
        y = (lib.tensor([1.0]) * 2).requires_grad_()
        z = y * 3
        z.grad_fn.register_hook(lambda gi, go: (lib.ones(1), lib.ones(1)))
        with pytest.raises(RuntimeError) as e:
            z.sum().backward()
        errors.append(str(e.value))
        x = lib.tensor([1.0], requires_grad=True)
        w = x.exp()
        w.grad_fn.register_prehook(lambda go: (go[0].double(),))
        with pytest.raises(RuntimeError) as e:
            w.sum().backward()
        errors.append(str(e.value))
    assert errors[:2] == errors[2:]


@pytest.mark.parametrize("inputs", [[], ()])
def test_grad_with_no_inputs_raises_as_torch(inputs):
    """It returned ``()``."""

    def call(lib):
        y = lib.tensor(2.0, requires_grad=True)
        return lib.autograd.grad(y * y, inputs)

    assert_raises_like_torch(call)


@pytest.mark.parametrize("v", [1.3452465257518244e-43, -3.0, 2.5])
def test_prod_over_a_dim_of_size_one_differentiates_twice_as_torch(v):
    # fuzzer find: the partial x / x's second derivative cancelled to -6e26 at 1.3e-43
    a = np.array([[[0.5], [v]]])
    out = []
    for lib in (staged, torch):
        x = lib.tensor(a, requires_grad=True)
        (g,) = lib.autograd.grad(lib.prod(x, 0).sum(), x, create_graph=True)
        (h,) = lib.autograd.grad(g.sum(), x, allow_unused=True, materialize_grads=True)
        out.append((g.detach().numpy(), h.numpy()))
    for s, t in zip(*out):
        np.testing.assert_array_equal(s, t)
