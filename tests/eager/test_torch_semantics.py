"""Eager behaviour that once differed silently from torch 2.13 (issue 15, item 8): each
case runs the same code on staged and on torch and compares errors, values and
gradients."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import staged


def outcome(fn, ns):
    """``("raises", type name, message)`` or ``("value", result)`` of ``fn(ns)``."""
    try:
        return ("value", fn(ns))
    except Exception as e:  # noqa: BLE001  (the exception is the result under test)
        # torch's dense permute names the sparse kernel in its message
        return ("raises", type(e).__name__, str(e).replace("permute(sparse_coo)", "permute()"))


def assert_same_error(fn):
    """``fn(staged)`` raises what ``fn(torch)`` raises: same class, same message."""
    want, got = outcome(fn, torch), outcome(fn, staged)
    assert want[0] == "raises", f"torch did not raise: {want}"
    assert got == want


def _x(ns):
    return ns.arange(12.0).reshape(3, 4)


BAD_DIMS = {
    "transpose": lambda ns: _x(ns).transpose(0, 7),
    "transpose-1d": lambda ns: ns.ones(3).transpose(0, 1),
    "flatten": lambda ns: _x(ns).flatten(0, 9),
    "flatten-0d": lambda ns: ns.tensor(1.0).flatten(0, 1),
    "flatten-order": lambda ns: _x(ns).flatten(1, 0),
    "permute-range": lambda ns: _x(ns).permute(0, 2),
    "permute-repeat": lambda ns: _x(ns).permute(1, 1),
    "permute-count": lambda ns: _x(ns).permute(0),
    "unsqueeze": lambda ns: _x(ns).unsqueeze(3),
    "squeeze": lambda ns: _x(ns).squeeze(-3),
    "sum": lambda ns: _x(ns).sum(2),
    "sum-repeat": lambda ns: _x(ns).sum((0, -2)),
    "mean": lambda ns: _x(ns).mean(-3),
    "amax-repeat": lambda ns: _x(ns).amax((1, 1)),
    "argmax-0d": lambda ns: ns.tensor(1.0).argmax(1),
    "softmax": lambda ns: ns.softmax(_x(ns), 2),
    "log_softmax": lambda ns: ns.log_softmax(_x(ns), -3),
    "logsumexp": lambda ns: ns.logsumexp(_x(ns), 2),
    "cumsum": lambda ns: _x(ns).cumsum(2),
    "sort": lambda ns: _x(ns).sort(2),
    "topk": lambda ns: _x(ns).topk(1, 2),
    "var": lambda ns: _x(ns).var(2),
    "cat": lambda ns: ns.cat([_x(ns), _x(ns)], 2),
    "stack": lambda ns: ns.stack([_x(ns), _x(ns)], -4),
    "split": lambda ns: _x(ns).split(1, 2),
    "chunk": lambda ns: _x(ns).chunk(2, -3),
}


def test_dims_are_checked_as_torch():
    """One shared check (``wrap_dim``) for every dim-taking op; dims in range still work."""
    for fn in (lambda ns: _x(ns).transpose(-1, 0), lambda ns: ns.tensor(2.0).transpose(0, -1),
               lambda ns: _x(ns).flatten(-1, 1), lambda ns: ns.tensor(2.0).flatten(-1, 0),
               lambda ns: _x(ns).permute(-1, 0), lambda ns: _x(ns).unsqueeze(-3)):
        np.testing.assert_array_equal(fn(staged).numpy(), fn(torch).numpy())
    wrong = {}
    for case, fn in BAD_DIMS.items():
        want, got = outcome(fn, torch), outcome(fn, staged)
        assert want[0] == "raises", case
        if got != want:
            wrong[case] = got
    assert not wrong


def test_view_that_needs_a_copy_raises_as_torch():
    assert_same_error(lambda ns: _x(ns).t().view(12))
    assert_same_error(lambda ns: _x(ns)[:, :2].view(6))
    for ns in (staged, torch):  # after .contiguous() it is a view again, sharing memory
        x = _x(ns)
        v = x.t().contiguous().view(12)
        np.testing.assert_array_equal(v.numpy(), [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11])
        w = x.view(2, 6)
        w[0, 0] = 100.0
        assert x[0, 0].item() == 100.0
        assert x.is_contiguous() and not x.t().is_contiguous()


def _hooked(hook, leaf=False):
    def fn(ns):
        a = ns.ones(4, requires_grad=True)
        b = a if leaf else a * 2
        b.register_hook(hook)
        (a * 2 if leaf else b).sum().backward()
        return a.grad
    return fn


def named_hook(g):
    return g[:1]


def test_tensor_hook_changing_the_gradient_shape_or_dtype_raises_as_torch():
    assert_same_error(_hooked(named_hook))
    assert_same_error(_hooked(lambda g: g.reshape(2, 2)))
    assert_same_error(_hooked(lambda g: g.sum(), leaf=True))
    assert_same_error(_hooked(lambda g: 3))
    for ns in (staged, torch):  # a dtype change is refused too (torch names its tensor types)
        with pytest.raises(RuntimeError, match="hook '<lambda>' has changed the type of value"):
            _hooked(lambda g: g.double())(ns)
    np.testing.assert_array_equal(_hooked(lambda g: g * 3)(staged).numpy(), [6.0] * 4)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
@pytest.mark.parametrize("shape", [(4, 5), (2, 5, 3)])
def test_cross_entropy_probability_targets_with_weight_match_torch(reduction, smoothing, shape):
    rng = np.random.default_rng(0)
    x, p = rng.standard_normal(shape), rng.random(shape)
    p /= p.sum(1, keepdims=True)
    w = rng.random(5) + 0.5
    out = {}
    for ns in (staged, torch):
        xt = ns.tensor(x, requires_grad=True)
        loss = ns.nn.functional.cross_entropy(xt, ns.tensor(p), weight=ns.tensor(w),
                                              reduction=reduction, label_smoothing=smoothing)
        loss.sum().backward()
        out[ns.__name__] = (loss.detach().numpy(), xt.grad.numpy())
    for got, want in zip(out["staged"], out["torch"]):  # float64: a few ulps of the sums
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_unreduced_class_index_losses_keep_the_spatial_shape():
    x = np.random.default_rng(1).standard_normal((2, 5, 3))
    t = np.array([[0, 1, 2], [3, 4, 0]])
    for name in ("cross_entropy", "nll_loss"):
        got, want = (getattr(ns.nn.functional, name)(ns.tensor(x), ns.tensor(t),
                                                     reduction="none") for ns in (staged, torch))
        assert tuple(got.shape) == tuple(want.shape) == (2, 3)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_std_of_a_constant_input_has_gradient_zero_as_torch():
    for shape, dim in (((4,), None), ((2, 3), -1), ((3, 2), 0)):
        grads = []
        for ns in (staged, torch):
            x = ns.full(shape, 2.5, dtype=ns.float64, requires_grad=True)
            ns.autograd.grad(x.std(dim).sum(), x, create_graph=True)[0].sum().backward()
            grads.append((x.grad.numpy(), x.std(dim).detach().numpy()))
        for got, want in zip(*grads):
            np.testing.assert_array_equal(got, want)
    x = staged.tensor([1.0, 2.0, 4.0], dtype=staged.float64, requires_grad=True)
    x.std().backward()  # away from 0 the gradient is unchanged: (x - mean) / (std (n - 1))
    np.testing.assert_allclose(x.grad.numpy(), (x.detach().numpy() - 7 / 3)
                               / (np.std([1, 2, 4], ddof=1) * 2), rtol=1e-14)
