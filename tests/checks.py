"""Shared test helpers: staged <-> torch conversion, assert_close, running one program
under both libraries, and JAX-style random-direction
gradient checks in float64 (``check_grads``)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import staged


def both(fn):
    """Run ``fn(lib)`` with staged and with torch."""
    return fn(staged), fn(torch)


def close(ours, theirs, rtol=1e-5, atol=1e-6):
    """Two pytrees of tensors (or numbers) are equal leaf by leaf."""
    if isinstance(theirs, dict):
        assert ours.keys() == theirs.keys()
        for k in theirs:
            close(ours[k], theirs[k], rtol, atol)
    elif isinstance(theirs, (tuple, list)):
        assert isinstance(ours, (tuple, list)) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            close(a, b, rtol, atol)
    else:
        assert_close(ours, theirs, rtol, atol)


def compare(fn, rtol=1e-5, atol=1e-6):
    close(*both(fn), rtol=rtol, atol=atol)


_SITE = re.compile(r"^(\S+\.py|<[^>]+>):\d+: ")  # a file, or eval's <string>


def batches(sizes, seed=1) -> list:
    """(x, y) per size ``n``: float32 (n, 3) features and labels in {0, 1} (the trust
    probes' compiled-vs-eager training steps)."""
    rng = np.random.default_rng(seed)
    return [
        (
            staged.tensor(rng.standard_normal((n, 3)).astype(np.float32)),
            staged.tensor(rng.integers(0, 2, n)),
        )
        for n in sizes
    ]


def message(e: BaseException) -> str:
    """``e``'s message without the user's ``file:line: `` that staged's errors start with
    (docs/errors.md), to compare with torch's."""
    return _SITE.sub("", str(e))


def raises_like_torch(fn, *fragments):
    """``fn(lib)`` raises the same exception type under staged and torch, and staged's
    message holds torch's words ``fragments``."""
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(type(theirs.value)) as ours:
        fn(staged)
    for f in fragments:
        assert f in str(theirs.value) and f in str(ours.value), (f, str(ours.value))
    return str(ours.value)


def to_numpy(t) -> np.ndarray:
    if isinstance(t, staged.Tensor):
        return np.asarray(t.detach().resolve_conj())
    if isinstance(t, torch.Tensor):
        return t.detach().resolve_conj().numpy()
    return np.asarray(t)


def to_torch(t, requires_grad=None) -> torch.Tensor:
    """A torch leaf with the data of ``t`` (requires_grad copied from ``t`` unless given)."""
    rg = t.requires_grad if requires_grad is None else requires_grad
    return torch.tensor(to_numpy(t)).requires_grad_(rg)


def from_torch(t, requires_grad=None) -> staged.Tensor:
    rg = t.requires_grad if requires_grad is None else requires_grad
    return staged.tensor(to_numpy(t).copy(), requires_grad=rg)


def _dtype_name(t) -> str:
    return str(t.dtype).rpartition(".")[2]


def assert_close(actual, expected, rtol=1e-7, atol=1e-7, check_dtype=True):
    """Values, shape and (for two tensors) dtype of ``actual`` equal ``expected``'s."""
    if check_dtype and all(
        isinstance(t, (staged.Tensor, torch.Tensor)) for t in (actual, expected)
    ):
        assert _dtype_name(actual) == _dtype_name(expected), (actual.dtype, expected.dtype)
    a, e = to_numpy(actual), to_numpy(expected)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def _is_float(a) -> bool:
    return np.asarray(a).dtype.kind in "fc"


def _tensors(xs):
    return [staged.tensor(x, requires_grad=_is_float(x)) for x in xs]


def _directions(xs):
    return [np.random.standard_normal(np.shape(x)) if _is_float(x) else None for x in xs]


def _inner(a, b) -> float:
    return float(np.sum(to_numpy(a) * to_numpy(b)))


def numerical_jvp(f, xs, vs, eps=1e-6) -> np.ndarray:
    """Central difference of ``f`` (staged tensors -> tensor) at ``xs`` along ``vs``."""

    def at(sign):
        shifted = [x if v is None else x + sign * eps * v for x, v in zip(xs, vs)]
        return to_numpy(f(*_tensors(shifted)))

    return (at(1) - at(-1)) / (2 * eps)


def vjp_along(f, xs):
    """``(inputs, grads, u)``: grads of ``<u, f(inputs)>`` for a random cotangent ``u``
    (zeros where ``f`` is a constant: a piecewise constant op's gradient is one, as torch's)."""
    ins = _tensors(xs)
    out = f(*ins)
    u = np.random.standard_normal(out.shape)
    wrt = [t for t in ins if t.requires_grad]
    if not out.requires_grad:
        return wrt, [staged.zeros_like(t) for t in wrt], u
    grads = staged.autograd.grad(out, wrt, staged.tensor(u), materialize_grads=True)
    return wrt, grads, u


def check_grads(f, xs, order=1, eps=1e-6, rtol=1e-5, atol=1e-8):
    """``<u, J v>`` from the VJP equals the finite difference of ``<u, f>`` along ``v``;
    at order 2 the same check runs on the VJP itself (built with create_graph=True)."""
    xs = [np.asarray(x, np.float64) if _is_float(x) else np.asarray(x) for x in xs]
    vs = _directions(xs)
    _, grads, u = vjp_along(f, xs)
    analytic = sum(_inner(g, v) for g, v in zip(grads, (v for v in vs if v is not None)))
    numeric = _inner(numerical_jvp(f, xs, vs, eps), u)
    np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol)
    if order > 1:
        ws = [staged.tensor(np.random.standard_normal(np.shape(x))) for x in xs if _is_float(x)]

        def first_order(*ins):  # <w, vjp(x; u)> as a function of x and u, as in JAX
            *ins, u = ins
            wrt = [t for t in ins if t.requires_grad]
            gs = staged.autograd.grad(f(*ins), wrt, u, create_graph=True, materialize_grads=True)
            return sum((g * w).sum() for g, w in zip(gs, ws))

        check_grads(first_order, xs + [u], order - 1, eps, rtol, atol)


def compare_with_torch(fn, tfn, *args, rtol=1e-6, atol=1e-6, grad=True):
    """Run ``fn`` on staged tensors and ``tfn`` on torch tensors built from ``args`` (NumPy
    arrays; anything else is passed as is); compare outputs (value, shape, dtype) and, for
    float outputs, the gradients of every float input under a random cotangent."""

    def build(make):
        return [make(a) if isinstance(a, np.ndarray) else a for a in args]

    ins = build(lambda a: staged.tensor(a, requires_grad=grad and _is_float(a)))
    tins = build(lambda a: torch.tensor(a, requires_grad=grad and _is_float(a)))
    out, tout = fn(*ins), tfn(*tins)
    assert_close(out, tout, rtol, atol)
    if not (grad and tout.requires_grad):
        return out
    u = np.random.standard_normal(tuple(tout.shape)).astype(to_numpy(tout).dtype)
    wrt = [t for t in ins if isinstance(t, staged.Tensor) and t.requires_grad]
    twrt = [t for t in tins if isinstance(t, torch.Tensor) and t.requires_grad]
    grads = staged.autograd.grad(out, wrt, staged.tensor(u), allow_unused=True)
    tgrads = torch.autograd.grad(tout, twrt, torch.tensor(u), allow_unused=True)
    for g, tg in zip(grads, tgrads):
        assert (g is None) == (tg is None)
        if g is not None:
            assert_close(g, tg, rtol, atol)
    return out


def assert_raises_like_torch(call) -> None:
    """``call(staged)`` raises what ``call(torch)`` raises: the same exception type and
    message (``staged.`` for ``torch.`` in names, or torch's own where staged says it: the
    legacy type names, ``torch.FloatTensor``)."""
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(staged)
    want = str(theirs.value)
    assert message(ours.value) in (want, want.replace("torch.", "staged."))


def fault(value, reason: str):
    """A case of a probe's parametrization known to differ from torch: a strict xfail whose
    ``reason`` gives both results (it fails the probe once fixed)."""
    return pytest.param(value, marks=pytest.mark.xfail(strict=True, reason=reason), id=value)


def same_tree(ours, want, leaf, where: str = "") -> None:
    """``ours`` and ``want``, nested lists of leaves, agree: lists item by item, leaves by
    ``leaf(ours, want, where)`` where it compared them (it returns True), the rest equal in
    type and value."""
    if isinstance(want, list):
        assert isinstance(ours, list) and len(ours) == len(want), (where, ours, want)
        for i, (a, b) in enumerate(zip(ours, want)):
            same_tree(a, b, leaf, f"{where}[{i}]")
    elif not leaf(ours, want, where):
        assert type(ours) is type(want) and ours == want, (where, ours, want)


def same_outcome(ours, want, words: str | None, same) -> None:
    """Two ``(how, result)`` outcomes of one case, staged's and torch's, agree: both
    ``"ok"`` with ``same(ours, want)``, or both ``"raised"`` with the same exception type
    and message (``words``: messages that both hold those words)."""
    (how, ours), (want_how, want) = ours, want
    assert how == want_how, (ours, want)
    if how == "ok":
        same(ours, want)
        return
    assert ours[0] is want[0], (ours, want)
    if words is None:
        assert ours[1] == want[1], (ours[1], want[1])
    else:
        assert words in ours[1] and words in want[1], (words, ours[1], want[1])
