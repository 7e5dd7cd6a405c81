"""Autograd mechanics, stale views: views made before their storage was written in place
(through the base, through the view or a sibling, or before the base first required
grad) against torch 2.13: requires_grad, is_leaf, grad_fn names (PyTorch regenerates
them as AsStridedBackward0), version counters, gradients and errors."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, both, raises_like_torch


def name(fn):
    return None if fn is None else fn.name().split("::")[-1]


def observe(t, first="requires_grad"):
    """What PyTorch's API shows of ``t``, reading ``first`` first (reads regenerate)."""
    if first == "requires_grad":
        rg = t.requires_grad
        return rg, t.is_leaf, name(t.grad_fn), t._version
    if first == "is_leaf":
        leaf = t.is_leaf
        return t.requires_grad, leaf, name(t.grad_fn), t._version
    fn = name(t.grad_fn)
    return t.requires_grad, t.is_leaf, fn, t._version


def arange(T, *shape, requires_grad=False):
    n = int(np.prod(shape))
    return T.tensor(np.linspace(-1.0, 2.0, n).reshape(shape), requires_grad=requires_grad)


def make_views(a):
    """Views of a 2x3 base through each view primitive, and chains of them."""
    return {
        "slice": a[1:],
        "select": a[0],
        "column": a[:, 2],
        "t": a.t(),
        "reshape": a.reshape(6),
        "view": a.view(3, 2),
        "expand": a[0].expand(4, 3),
        "view-of-view": a[:, 1:].t(),
        "unsqueeze-of-t": a.t().unsqueeze(0),
    }


def _write_mul(T, a, w):
    a.mul_(w)


def _write_add(T, a, w):
    a.add_(w)


def _write_copy(T, a, w):
    a.copy_(w * 2)


def _write_setitem(T, a, w):
    a[0] = w[0] * 3


def _write_view(T, a, w):
    a[1].add_(w[1] * w[1])  # through a fresh view: the base's grad_fn is CopySlices


WRITES = {
    "mul_": _write_mul,
    "add_": _write_add,
    "copy_": _write_copy,
    "setitem": _write_setitem,
    "view-add_": _write_view,
}


def _loss(T, views):
    coefs = np.arange(1.0, 1.0 + len(views))
    return sum((v * v * c).sum() for v, c in zip(views.values(), coefs))


@pytest.mark.parametrize("first", ["requires_grad", "is_leaf", "grad_fn", "use"])
@pytest.mark.parametrize("write", sorted(WRITES))
def test_views_made_before_the_base_first_required_grad(write, first):
    def run(T):
        a = T.ones(2, 3, dtype=T.float64)
        views = make_views(a)
        before = {k: observe(v) for k, v in views.items()}
        w = arange(T, 2, 3, requires_grad=True)
        WRITES[write](T, a, w)
        if first == "use":  # used by ops before anything reads them
            loss = _loss(T, views)
            seen = {k: observe(v) for k, v in views.items()}
        else:
            seen = {k: observe(v, first) for k, v in views.items()}
            loss = _loss(T, views)
        loss.backward()
        nexts = {k: name(v.grad_fn.next_functions[0][0]) for k, v in views.items()}
        return before, seen, nexts, name(a.grad_fn), loss, w.grad

    (before, seen, nexts, base, loss, g), (tb, tseen, tnexts, tbase, tloss, tg) = both(run)
    assert before == tb
    assert all(s[:3] == (False, True, None) for s in before.values())
    assert seen == tseen
    assert all(s[:3] == (True, False, "AsStridedBackward0") for s in seen.values())
    if write not in ("setitem", "copy_"):
        # staged writes a[0] = v as a slice_scatter of the whole base, and a.copy_(v) gives
        # the base v's grad_fn (torch: CopySlices, CopyBackwards)
        assert base == tbase and nexts == tnexts
    assert_close(loss, tloss)
    assert_close(g, tg)


@pytest.mark.parametrize("where", ["base", "view", "sibling", "base-no_grad"])
def test_views_of_a_base_that_requires_grad_regenerate_after_a_write(where):
    def run(T):
        x = arange(T, 2, 3, requires_grad=True)
        w = arange(T, 2, 3, requires_grad=True) * 0.5
        y = x * 1
        views = make_views(y)
        before = {k: observe(v) for k, v in views.items()}
        if where == "base":
            y.mul_(w)
        elif where == "view":
            views["select"].mul_(w[0])
        elif where == "sibling":
            y[:, 0].mul_(w[:, 0])
        else:
            with T.no_grad():
                y.mul_(2)
        seen = {k: observe(v) for k, v in views.items()}
        fresh = observe(y[1:])  # made after the write: named after its op
        loss = _loss(T, views) + (y * y).sum()
        loss.backward()
        return before, seen, fresh, name(y.grad_fn), loss, x.grad

    (before, seen, fresh, base, loss, g), (tb, tseen, tfresh, tbase, tloss, tg) = both(run)
    assert seen == tseen and base == tbase
    assert all(s[2] == "AsStridedBackward0" for s in seen.values())
    assert [b[:2] for b in before.values()] == [tb_[:2] for tb_ in tb.values()]
    assert fresh[:2] == tfresh[:2] and fresh[2] != "AsStridedBackward0"
    assert_close(loss, tloss)
    assert_close(g, tg)


def test_view_of_a_leaf_written_under_no_grad_leads_to_its_accumulator():
    def run(T):
        x = arange(T, 2, 3, requires_grad=True)
        v, vv = x[1:], x.t()[1:]
        with T.no_grad():
            x.mul_(2)
        out = (
            observe(v),
            observe(vv),
            name(v.grad_fn.next_functions[0][0]),
            name(vv.grad_fn.next_functions[0][0]),
        )
        ((v * v).sum() + (vv * 3).sum()).backward()
        return out, x.grad

    (obs, g), (tobs, tg) = both(run)
    assert obs == tobs and obs[2:] == ("AccumulateGrad", "AccumulateGrad")
    assert_close(g, tg)


def test_regenerated_grad_fn_is_made_once_per_write():
    def run(T):
        a = T.zeros(3, dtype=T.float64)
        v = a[1:]
        w = arange(T, 3, requires_grad=True)
        a.add_(w)
        f1 = v.grad_fn
        same = f1 is v.grad_fn
        a.mul_(w)
        f2 = v.grad_fn
        (v * v).sum().backward()
        return same, f1 is f2, name(f2.next_functions[0][0]), v._version, w.grad

    (same, ident, nxt, ver, g), (tsame, tident, tnxt, tver, tg) = both(run)
    assert (
        (same, ident, nxt, ver) == (tsame, tident, tnxt, tver) == (True, False, "MulBackward0", 2)
    )
    assert_close(g, tg)


def test_views_of_views_and_siblings_used_after_a_write_into_one_of_them():
    def run(T):
        a = T.zeros(4, 3, dtype=T.float64)
        rows, col, flat = a[1:], a[:, 1], a.view(12)
        rows_t = rows.t()
        w = arange(T, 3, 3, requires_grad=True)
        rows_t.copy_(w.t() * 2)  # a view of a view, written
        loss = (col * col).sum() + (flat * 2).sum() + (rows * rows_t.t()).sum()
        obs = [observe(t) for t in (rows, col, flat, rows_t)]
        loss.backward()
        return obs, name(a.grad_fn), a._version, loss, w.grad

    (obs, base, ver, loss, g), (tobs, tbase, tver, tloss, tg) = both(run)
    assert (obs, base, ver) == (tobs, tbase, tver)
    assert_close(loss, tloss)
    assert_close(g, tg)


def test_complex_real_and_imag_views_regenerate():
    def run(T):
        a = T.zeros(3, dtype=T.complex128)
        re, im = a.real, a.imag
        w = T.tensor(np.array([1 + 2j, -1j, 0.5]), requires_grad=True)
        a.add_(w * w)
        obs = observe(re), observe(im)
        ((re * re).sum() + (im * 3).sum()).backward()
        return obs, w.grad

    (obs, g), (tobs, tg) = both(run)
    assert obs == tobs
    assert_close(g, tg)


def test_double_backward_through_a_regenerated_view():
    def run(T):
        w = arange(T, 3, requires_grad=True)
        a = T.zeros(3, dtype=T.float64)
        v = a[1:]
        a.add_(w * w)
        (g,) = T.autograd.grad((v**3).sum(), w, create_graph=True)
        g.sum().backward()
        return g, w.grad

    for ours, theirs in zip(*both(run)):
        assert_close(ours, theirs)


def test_retain_grad_moves_to_the_new_grad_fn():
    def run(T):
        x = arange(T, 3, requires_grad=True)
        y = x * 1
        y.retain_grad()
        v = y[1:]
        v.retain_grad()
        y.mul_(3)  # y's and v's retain_grad follow their new grad_fns
        z = x * 1
        z.retain_grad()
        z[0].mul_(2)  # through a view: z's grad_fn becomes CopySlices
        ((v * v).sum() + y.sum() + (z * z).sum()).backward()
        return y.grad, v.grad, z.grad, x.grad

    for ours, theirs in zip(*both(run)):
        assert_close(ours, theirs)


@pytest.mark.parametrize("read", [True, False])
def test_hooks_stay_on_the_grad_fn_they_were_registered_on(read):
    """A hook registered on a stale view that already had hooks goes to its old grad_fn
    unless the grad_fn was read since the write (PyTorch keeps adding to the hooks dict
    of the old grad_fn until it is regenerated)."""

    def run(T):
        log = []
        x = arange(T, 3, requires_grad=True)
        y = x * 1
        v = y[1:]
        v.register_hook(lambda g: log.append("v-old"))
        y.mul_(2)
        if read:
            v.grad_fn
        v.register_hook(lambda g: log.append("v-new"))
        (v * v).sum().backward()
        return log

    ours, theirs = both(run)
    assert ours == theirs == (["v-new"] if read else [])


def test_first_hook_on_a_stale_view_goes_to_its_regenerated_grad_fn():
    # torch 2.13 crashes (segmentation fault) here unless u.grad_fn is read first;
    # staged regenerates u's grad_fn, as reading it first does in torch
    log = []
    x = staged.ones(3, requires_grad=True)
    y = x * 1
    u = y[:2]
    y.mul_(2)
    u.register_hook(lambda g: log.append(g.tolist()))
    assert u.grad_fn.name() == "AsStridedBackward0"
    (u * 3).sum().backward()
    assert log == [[3.0, 3.0]] and x.grad.tolist() == [6.0, 6.0, 0.0]


def test_increment_version_and_mark_dirty_make_views_stale():
    class AddOne(staged.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.mark_dirty(t)
            return t.add_(1)

        @staticmethod
        def backward(ctx, g):
            return g

    TAddOne = type(
        "AddOne",
        (torch.autograd.Function,),
        {"forward": AddOne.forward, "backward": AddOne.backward},
    )

    def run(T):
        fn = AddOne if T is staged else TAddOne
        x = arange(T, 3, requires_grad=True)
        y = x * 1
        v, u = y[1:], y[:2]
        T.autograd.graph.increment_version(y)
        first = observe(v)
        y2 = fn.apply(y)
        second = observe(u), name(y.grad_fn), y2 is y
        (u * v.sum()).sum().backward()
        return first, second, x.grad

    (a, b, g), (ta, tb, tg) = both(run)
    assert (a, b) == (ta, tb)
    assert_close(g, tg)


def test_writes_without_grad_leave_views_alone():
    def run(T):
        a = T.zeros(3)
        v = a[1:]
        a.add_(1)
        with T.no_grad():
            e = a[:2]
        with T.no_grad():
            a.add_(T.ones(3, requires_grad=True))
        return observe(v), observe(e), v.tolist(), repr(v)

    ours, theirs = both(run)
    assert ours[:3] == theirs[:3] == ((False, True, None, 2), (False, True, None, 2), [2.0, 2.0])
    assert ours[3].replace("staged", "") == theirs[3].replace("torch", "")


# --- errors: views made under no_grad / inference_mode ----------------------------------

NO_GRAD_INDIRECT = (
    "A view was created in no_grad mode and its base or another view of its "
    "base has been modified inplace with grad mode enabled. Given that this use "
    "case is ambiguous and error-prone, it is forbidden."
)


@pytest.mark.parametrize("read", ["grad_fn", "is_leaf", "op", "backward", "register_hook"])
@pytest.mark.parametrize("case", ["plain-base-given-grad", "nonleaf-base", "leaf-base-no_grad"])
def test_no_grad_view_of_a_written_base_raises_when_its_grad_fn_is_needed(case, read):
    def run(T):
        if case == "plain-base-given-grad":
            a = T.zeros(3)
            with T.no_grad():
                v = a[1:]
            a.add_(T.ones(3, requires_grad=True))
        elif case == "nonleaf-base":
            a = T.ones(3, requires_grad=True) * 1
            with T.no_grad():
                v = a[1:]
            a.mul_(2)
        else:
            a = T.ones(3, requires_grad=True)
            with T.no_grad():
                v = a[1:]
                a.mul_(2)
        assert v.requires_grad  # PyTorch: its base requires grad
        if read == "grad_fn":
            v.grad_fn
        elif read == "is_leaf":
            v.is_leaf
        elif read == "op":
            v * 2
        elif read == "backward":
            v.sum().backward()
        else:
            v.register_hook(lambda g: g)

    raises_like_torch(run, NO_GRAD_INDIRECT)


def test_no_grad_view_of_a_written_base_prints_an_invalid_grad_fn():
    def run(T):
        a = T.ones(3, requires_grad=True) * 1
        with T.no_grad():
            v = a[1:]
        a.mul_(2)
        return repr(v)

    ours, theirs = both(run)
    assert "grad_fn=<Invalid>" in ours and "grad_fn=<Invalid>" in theirs


def test_writing_into_a_no_grad_view_with_a_value_that_requires_grad_raises():
    def run(T):
        a = T.zeros(3)
        with T.no_grad():
            v = a[1:]
        v.add_(T.ones(2, requires_grad=True))

    raises_like_torch(
        run,
        "A view was created in no_grad mode and is being modified inplace with grad mode enabled.",
    )

    def leaf(T):  # the no_grad check comes before the view-of-a-leaf one, as in PyTorch
        x = T.ones(3, requires_grad=True)
        with T.no_grad():
            v = x[1:]
        v.mul_(2)

    raises_like_torch(leaf, "A view was created in no_grad mode and is being modified inplace")


def test_views_made_in_inference_mode_raise_pytorchs_errors():
    def indirect(T):
        x = T.ones(3, requires_grad=True) * 1
        with T.inference_mode():
            v = x[1:]
        x.mul_(2)
        v.grad_fn

    raises_like_torch(
        indirect,
        "A view was created in inference mode and its base or another "
        "view of its base has been modified inplace in normal mode.",
        "both inside the inference_mode block",
    )

    def direct(T):
        x = T.ones(3, requires_grad=True) * 1
        with T.inference_mode():
            v = x[1:]
        v.mul_(2)

    raises_like_torch(
        direct, "A view was created in inference mode and is being modified inplace in normal mode."
    )


# --- cost and memory --------------------------------------------------------------------


def test_settled_views_are_plain_tensors_and_views_are_held_weakly():
    a = staged.zeros(3)
    v = a[1:]
    a.add_(staged.ones(3, requires_grad=True))
    assert type(v) is not staged.Tensor  # stale until read
    v.grad_fn
    assert type(v) is staged.Tensor  # the ops' fast paths see a plain Tensor again
    for _ in range(1000):
        a.t()
    assert len(a._vc[1].refs) <= 16  # dead views are pruned
    ref = weakref.ref(v)
    gc.disable()
    try:
        del v
        assert ref() is None  # no cycle through the base's registry
    finally:
        gc.enable()


# --- where torch reads the grad_fn field without regenerating it -------------------------


@pytest.mark.parametrize("read", [True, False])
def test_unread_stale_view_is_a_leaf_to_inplace_retain_grad_and_requires_grad_(read):
    """torch's check_inplace, retain_grad and requires_grad_ test the view's grad_fn field:
    a view made before its base required grad, not read since, is a leaf to them."""

    def setup(T):
        w = arange(T, 3, requires_grad=True)
        a = T.zeros(3, dtype=T.float64)
        v = a[1:]
        a.add_(w * w)
        if read:
            v.grad_fn
        return w, a, v

    def write(T):
        w, a, v = setup(T)
        v.mul_(w[1:])
        (a * a).sum().backward()
        return w.grad

    def retain(T):
        w, a, v = setup(T)
        v.retain_grad()
        (v * v).sum().backward()
        return v.retains_grad, v._grad, w.grad

    def no_grad_flag(T):
        w, a, v = setup(T)
        v.requires_grad_(False)
        return v.requires_grad, v.is_leaf, name(v.grad_fn)

    if read:
        assert_close(*both(write))
        raises_like_torch(
            no_grad_flag, "you can only change requires_grad flags of leaf variables."
        )
    else:
        raises_like_torch(
            write, "a leaf Variable that requires grad is being used in an in-place operation."
        )
        assert both(no_grad_flag)[0] == both(no_grad_flag)[1] == (True, False, "AsStridedBackward0")
    (kept, g, wg), (tkept, tg, twg) = both(retain)
    assert kept == tkept == read
    assert (g is None) == (tg is None) == (not read)
    if read:
        assert_close(g, tg)
    assert_close(wg, twg)
