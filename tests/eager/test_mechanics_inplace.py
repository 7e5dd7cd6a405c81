"""Autograd mechanics, in-place and views: version counters, the saved-tensor version
check, CopySlices / view replay, allow_mutation_on_saved_tensors; against torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, both, raises_like_torch


def test_version_counter_shared_by_views_and_detach_not_data():
    def run(T):
        x = T.ones(2, 3)
        v, d, data = x.view(6), x.detach(), x.data
        x.add_(1)
        v.mul_(2)
        T.autograd.graph.increment_version(d)
        return x._version, v._version, d._version, data._version

    assert both(run)[0] == both(run)[1] == (3, 3, 3, 0)


@pytest.mark.parametrize("where", ["input", "output"])
def test_saved_tensor_version_check_names_shape_and_versions(where):
    def run(T):
        x = T.ones(2, 3, requires_grad=True)
        h = x * 1
        y = (h * h) if where == "input" else h.exp()
        (h if where == "input" else y).add_(1)
        y.sum().backward()

    msg = raises_like_torch(
        run,
        "one of the variables needed for gradient computation has been "
        "modified by an inplace operation",
        "[2, 3]]",
        "is at version 1; expected version 0 instead",
    )
    # a saved input is named by its grad_fn now (h.add_ made it AddBackward0), as torch's
    assert ("output 0 of AddBackward0" if where == "input" else "output 0 of ExpBackward0") in msg


def test_inplace_on_leaf_and_view_of_leaf_raise():
    raises_like_torch(
        lambda T: T.ones(2, requires_grad=True).mul_(2),
        "a leaf Variable that requires grad is being used in an in-place operation.",
    )
    raises_like_torch(
        lambda T: T.ones(2, requires_grad=True).view(2, 1).mul_(2),
        "a view of a leaf Variable that requires grad is being used in an in-place operation.",
    )


def test_inplace_on_view_made_in_no_grad_raises():
    def run(T):
        y = T.ones(2, requires_grad=True) * 1
        with T.no_grad():
            v = y.view(2, 1)
        v.mul_(2)

    raises_like_torch(
        run,
        "A view was created in no_grad mode and is being modified inplace with grad mode enabled.",
    )


def test_inplace_on_expanded_view_raises():
    raises_like_torch(
        lambda T: (T.ones(2, requires_grad=True) * 1).expand(3, 2).mul_(2),
        "unsupported operation: more than one element of the written-to tensor "
        "refers to a single memory location.",
    )


def _grads(T, body, shape=(2, 3)):
    x = T.tensor(np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape), requires_grad=True)
    w = T.tensor(np.linspace(-1, 1, int(np.prod(shape))).reshape(shape), requires_grad=True)
    out = body(T, x, w)
    out.backward(T.ones_like(out) if out.ndim else None)
    return out, x.grad, w.grad


VIEW_BODIES = {
    # the seed's rule: the base's grad_fn is rebased, the view's grad_fn regenerated
    "reshape": lambda T, x, w: _then(y := x * 2, y.reshape(6).mul_(w.reshape(6))),
    "permute": lambda T, x, w: _then(y := x * 2, y.permute(1, 0).mul_(w.t())),
    "transposed-view-exp": lambda T, x, w: _then(y := x * w, y.t().exp_()),
    "view-of-view": lambda T, x, w: _then(
        y := x * 2, y.t().reshape(6).unsqueeze(0).mul_(w.t().reshape(1, 6))
    ),
    "view-then-use-base": lambda T, x, w: _then(y := x * 2, y.view(3, 2).sin_()) * w,
    "use-view-after": lambda T, x, w: _view_used_after(x, w),
    "sibling-view": lambda T, x, w: _sibling(x, w),
    "base-written-view-used": lambda T, x, w: _base_written(x, w),
    "copy-into-view": lambda T, x, w: _then(y := T.zeros(3, 2), y.t().copy_(x * w)),
    "zero-view": lambda T, x, w: _then(y := x * w, y.view(6).zero_()) + x,
}


def _then(base, _):
    return base


def _view_used_after(x, w):
    y = x * 2
    v = y.t()
    v.mul_(w.t())
    return v * v


def _sibling(x, w):
    y = x * 1
    a, b = y.view(6), y.t()
    a.mul_(w.view(6))
    return b * b  # b was made before a's write: its grad_fn must see it


def _base_written(x, w):
    y = x * 1
    v = y.t()
    y.mul_(w)
    return v.exp()


@pytest.mark.parametrize("name", sorted(VIEW_BODIES))
def test_inplace_through_views_gives_torch_gradients(name):
    (out, gx, gw), (tout, tgx, tgw) = both(lambda T: _grads(T, VIEW_BODIES[name]))
    assert_close(out, tout)
    assert_close(gx, tgx)
    if tgw is None:
        assert gw is None
    else:
        assert_close(gw, tgw)


def test_copyslices_rebases_base_and_regenerates_view():
    x = staged.ones(2, requires_grad=True)
    y = x * 1
    v = y.view(2, 1)
    old = y.grad_fn
    v.mul_(3)
    assert (
        y.grad_fn.name() == "torch::autograd::CopySlices" and y.grad_fn.next_functions[0][0] is old
    )
    # the view's grad_fn is regenerated from the base, named as torch names it
    assert v.grad_fn.name() == "AsStridedBackward0"
    assert v.grad_fn.next_functions[0][0] is y.grad_fn
    assert y._version == v._version == 1


def test_inplace_on_view_of_base_without_grad_makes_base_require_grad():
    def run(T):
        w = T.tensor([1.0, 2.0], requires_grad=True)
        z = T.zeros(2)
        z.view(2, 1).add_(w.view(2, 1) * 3)
        (z * z).sum().backward()
        return z.requires_grad, z.is_leaf, z.grad_fn.name().split("::")[-1], w.grad

    (rg, leaf, name, g), (trg, tleaf, tname, tg) = both(run)
    assert (rg, leaf, name) == (trg, tleaf, tname) == (True, False, "CopySlices")
    assert_close(g, tg)


def test_getitem_view_inplace():
    if not hasattr(staged.Tensor, "__getitem__"):
        pytest.skip("basic indexing (Tensor.__getitem__) has not landed yet")

    def run(T):
        x = T.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        y = x * 1
        y[0].mul_(2)
        y[:, 1].exp_()
        (y * y).sum().backward()
        return y, x.grad

    (y, g), (ty, tg) = both(run)
    assert_close(y, ty)
    assert_close(g, tg)


def test_setitem_with_values_requiring_grad():
    if not hasattr(staged.Tensor, "__setitem__"):
        pytest.skip("Tensor.__setitem__ has not landed yet")

    def run(T):
        x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        w = T.tensor([5.0], requires_grad=True)
        y = x * 2
        y[1:2] = w * w
        (y * y).sum().backward()
        return y, x.grad, w.grad

    for a, b in zip(*both(run)):
        assert_close(a, b)


def test_hook_before_inplace_binds_to_old_grad_fn():
    """The seed: hooks registered before ``t.cos_()`` see the gradient w.r.t. the value
    before it; hooks registered after see the gradient w.r.t. the new value."""

    def run(T):
        log = []
        t = T.tensor(1.0, requires_grad=True).sin()
        t.register_hook(lambda g: log.append(("before", round(g.item(), 6))))
        t.cos_()
        t.register_hook(lambda g: log.append(("after", round(g.item(), 6))))
        t.backward()
        return log

    ours, theirs = both(run)
    assert ours == theirs == [("after", 1.0), ("before", round(-np.sin(np.sin(1.0)), 6))]


def test_allow_mutation_on_saved_tensors_seed_example():
    def run(T):
        with T.autograd.graph.allow_mutation_on_saved_tensors():
            a = T.ones(2, 3, requires_grad=True)
            b = a.clone()
            out = (b**2).sum()
            b.sin_()
            out.sum().backward()
        return a.grad, b

    (g, b), (tg, tb) = both(run)
    assert_close(g, tg)  # 2 * b before sin_
    assert_close(b.detach(), tb.detach())
    # without it, the same program raises the version error
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        a = staged.ones(2, requires_grad=True)
        b = a.clone()
        out = (b**2).sum()
        b.sin_()
        out.backward()


def test_copy_gives_the_destination_a_node_of_its_own():
    # a hook on the destination sees its own gradient, not the source's whole gradient
    def run(lib):
        w = lib.ones(3, requires_grad=True)
        src = w * 2
        a = lib.zeros(3)
        a.copy_(src)
        seen = {}
        a.register_hook(lambda g: seen.__setitem__("a", g.clone()))
        src.register_hook(lambda g: seen.__setitem__("src", g.clone()))
        (a.sum() + 10 * src.sum()).backward()
        assert a.grad_fn is not src.grad_fn
        return [np.asarray(t.detach().numpy()) for t in (seen["a"], seen["src"], w.grad)]

    for got, want in zip(run(staged), run(torch)):
        np.testing.assert_array_equal(got, want)
