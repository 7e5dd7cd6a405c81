"""``x.conj()`` of a complex tensor is a view (Note [conj views] in staged/eager/views.py),
as torch's conjugate-bit view: reads see writes into its base, writes into it (or into a
view, ``detach()`` or ``.data`` of it) reach the base conjugated, with torch's values,
versions, ``is_conj()``, ``_is_view()``, grad_fn names, leaf gradients and errors.
Also ``unsafe_split``/``unsafe_chunk`` pieces: no views, sharing their input's memory.
Each program runs with ``T = staged`` and ``T = torch``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged

X = np.array([[1 + 2j, -3 + 0.5j, 0.25 - 1j], [2 - 2j, 0j, -1.5 + 4j]], np.complex64)
W = np.array([[0.5 + 1j, 2 - 1j, -1 + 0.25j], [1j, 3, -0.5 - 0.5j]], np.complex64)


def _run(lib, code):
    ns = {"T": lib, "X": X, "W": W, "np": np}
    exec(code, ns)  # noqa: S102  (the test's own program)
    return {k: v for k, v in ns.items() if isinstance(v, (torch.Tensor, staged.Tensor))}


def _array(v):
    return v.resolve_conj().numpy(force=True)


def _node(v):
    fn = v.grad_fn
    return None if fn is None else fn.name().removeprefix("torch::autograd::")


def _version(v):
    """``v._version``, or None for an inference tensor (which has none)."""
    return None if v.is_inference() else v._version


def _same(code):
    """Run ``code`` on both; compare every tensor it names: values, dtype, version,
    is_conj, _is_view, requires_grad, grad_fn name, and ``.grad`` of leaves."""
    s, t = _run(staged, code), _run(torch, code)
    assert s.keys() == t.keys()
    for k in t:
        a, b = s[k], t[k]
        np.testing.assert_allclose(_array(a.detach()), _array(b.detach()), 1e-6, 1e-6, err_msg=k)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], k
        assert _version(a) == _version(b), k
        assert a.is_conj() == b.is_conj(), k
        if not b.is_inference():  # (torch's views in inference mode are no views)
            assert a._is_view() == b._is_view(), k
        assert a.requires_grad == b.requires_grad, k
        assert _node(a) == _node(b), k
        if b.is_leaf and b.requires_grad:
            assert (a.grad is None) == (b.grad is None), k
            if b.grad is not None:
                np.testing.assert_allclose(_array(a.grad), _array(b.grad), 1e-5, 1e-5, err_msg=k)


def _same_error(code, phrase=None):
    """Both raise the same type, staged with torch's message (or torch's ``phrase`` of it:
    staged's version-counter error names its own tensor and hint)."""
    errors = []
    for lib in (staged, torch):
        with pytest.raises(Exception) as e:  # noqa: PT011  (compared below)
            _run(lib, code)
        errors.append(e.value)
    s, t = errors
    assert type(s) is type(t), (s, t)
    want = str(t) if phrase is None else phrase
    assert want in str(t) and want in str(s), (str(s), str(t))


@pytest.mark.parametrize(
    "code",
    [
        # reads: the view sees every write into its base
        "x = T.tensor(X); y = x.conj(); x.add_(1)",
        "x = T.tensor(X); y = x.conj(); x[0, 1] = 5 - 1j",
        "x = T.tensor(X); y = x.conj(); r = y[1]; x.mul_(2j)",
        "x = T.tensor(X); y = x[:, 1:].conj(); x.copy_(T.tensor(W))",
        "x = T.tensor(X); y = x.conj(); z = y.t(); x.fill_(3j)",
        "x = T.tensor(X); y = x.conj(); s = x[0]; s.sub_(1j)",
        "x = T.tensor(X); y = x.conj(); x.detach().zero_()",
        "x = T.tensor(X); y = x.conj(); x.data.add_(1)",
        "x = T.tensor(X); y = x.conj(); p, q = x.unsafe_split(1); q.mul_(2j)",
        # conj views of aliases with version counters of their own
        "x = T.tensor(X); y = x.data.conj(); x.add_(1); y.mul_(2)",
        "x = T.tensor(X); d = x.detach(); p, q = d.unsafe_split(1); y = q.conj(); d.sub_(1j)\n"
        "y.add_(1)",
        # writes through the view reach the base, conjugated
        "x = T.tensor(X); y = x.conj(); y.add_(1j)",
        "x = T.tensor(X); y = x.conj(); y.mul_(T.tensor(W))",
        "x = T.tensor(X); y = x.conj(); y.copy_(T.tensor(W))",
        "x = T.tensor(X); y = x.conj(); y[1, 2] = 7 + 7j",
        "x = T.tensor(X); y = x.conj(); y[0].mul_(2j)",
        "x = T.tensor(X); y = x.conj(); y.t()[2].zero_()",
        "x = T.tensor(X); y = x.conj(); y.real.add_(1)",
        "x = T.tensor(X); y = x.conj(); i = y.imag; i.mul_(3)",
        "x = T.tensor(X); y = x.conj(); y.detach().add_(1j)",
        "x = T.tensor(X); y = x.conj(); y.data.add_(1j)",
        "x = T.tensor(X); y = x[1].conj(); y.fill_(2 - 1j); z = x.conj()",
        "x = T.tensor(X); y = x[:, ::2].conj(); y.sub_(1j); z = y.conj(); z.mul_(-1)",
        # a conj view of an expanded tensor: a row of it is written through
        "x = T.tensor(X[:1]); y = x.expand(2, 3).conj(); y[1].add_(1j); z = y[0]",
        "x = T.tensor(X); p, q = x.expand(2, 2, 3).unsafe_split(1); q[0].add_(1)",
        # two conj views, written in turn
        "x = T.tensor(X); y = x.conj(); z = x[0].conj(); y.add_(1j); z.mul_(2); y.sub_(1)",
        # torch's conjugate fallback runs in-place ops on copies of conj operands: no
        # overlap error, the result computed as from a copy
        "x = T.tensor(X); y = x.conj(); y[:, 1:].add_(y[:, :-1])",
        "x = T.tensor(X); y = x.conj(); y[:, 1:].mul_(x[:, :-1])",
        "x = T.tensor(X); y = x.conj(); x[:, 1:].sub_(y[:, :-1])",
        # unsafe_split of a conj view: pieces of a copy
        "x = T.tensor(X); y = x.conj(); p, q = y.unsafe_split(1); y.mul_(2); q.add_(1)",
        # is_conj and _is_view of what is made from a conj view
        "x = T.tensor(X); y = x.conj(); a = y.clone(); b = y + 1; c = y.resolve_conj()",
        "x = T.tensor(X); y = x.conj(); a = y.conj_physical(); b = y.contiguous(); c = y.detach()",
        "x = T.tensor(X); y = x.conj(); a = y.conj(); a.add_(1j); b = y.reshape(-1)",
        "x = T.tensor(X); y = x.conj(); a = y.real; b = y.imag; c = T.resolve_conj(y)",
        "x = T.tensor(X); a = x.resolve_conj(); b = x.conj_physical(); x.add_(1)",
        "r = T.tensor(X.real); y = r.conj(); y.add_(1)",
        # under no_grad and inference_mode
        "x = T.tensor(X)\nwith T.no_grad():\n    y = x.conj()\n    y.add_(1j)",
        "with T.inference_mode():\n    x = T.tensor(X); y = x.conj(); x.add_(1); y.mul_(2)\n"
        "    r = y.clone(); p, q = x.unsafe_chunk(2); q.sub_(1j); x.detach()[0] = 1",
    ],
)
def test_conj_view_matches_torch(code):
    _same(code)


@pytest.mark.parametrize(
    "code",
    [
        # x.mH, x.H, x.adjoint(): conj views of the transposed view, as torch's
        "x = T.tensor(X); y = x.mH; x.add_(1j)",
        "x = T.tensor(X); y = x.H; x[0, 1] = 5 - 1j",
        "x = T.tensor(X); y = x.adjoint(); y[2, 1] = 7 + 7j",
        "x = T.tensor(X); y = x.mH; y.mul_(T.tensor(W).mT); z = y[1]; z.sub_(1j)",
        "x = T.tensor(np.stack([X, W])); y = x.mH; y[1].mul_(2j); z = x.adjoint()",
        "x = T.tensor(X); y = x.mH.mH; a = x.mH.conj(); b = x.conj().mH; y.add_(1)",
        "x = T.tensor(X); y = x.mT; z = y.conj(); r = x.mH.real; z.add_(1j)",
        "x = T.tensor(X); y = x[:, 1:].H; y.fill_(2 - 1j); z = y.resolve_conj()",
        "r = T.tensor(X.real); a = r.mH; b = r.H; c = r.adjoint(); a.add_(1)",
    ],
)
def test_adjoint_views_match_torch(code):
    _same(code)


def test_conj_of_real_tensor_is_itself():
    x = staged.tensor([1.0, 2.0])
    assert x.conj() is x and staged.conj(x) is x and x.conj_physical() is x
    assert x.resolve_conj() is x


@pytest.mark.parametrize(
    "code",
    [
        # grad of conj is conj
        (
            "a = T.tensor(X, requires_grad=True); y = a.conj(); (y * T.tensor(W)).sum().abs()"
            ".backward()"
        ),
        # a write into a conj view: its base's grad_fn is CopySlices
        (
            "a = T.tensor(X, requires_grad=True); b = a.clone(); y = b.conj(); y.mul_(2j)\n"
            "(b * T.tensor(W)).sum().abs().backward()"
        ),
        (
            "a = T.tensor(X, requires_grad=True); w = T.tensor(W, requires_grad=True)\n"
            "b = a.clone(); y = b.conj(); y.add_(w * 2); (b.abs() ** 2).sum().backward()"
        ),
        (
            "a = T.tensor(X, requires_grad=True); b = a.clone(); y = b.conj()[1]\n"
            "y.mul_(T.tensor(W[0])); "
            "(b.real * 3 - b.imag).sum().backward()"
        ),
        # a write into the base: the conj view's grad_fn is regenerated from it
        (
            "a = T.tensor(X, requires_grad=True); b = a.clone(); y = b.conj(); b.mul_(1j)\n"
            "(y * T.tensor(W)).sum().abs().backward()"
        ),
        (
            "a = T.tensor(X, requires_grad=True); b = a.clone(); y = b[0].conj(); z = y.conj()\n"
            "b.sub_(2); (z.abs() + y.real).sum().backward()"
        ),
        # mH and adjoint(): conj views, ConjBackward0 also once regenerated after a write;
        # a view of one is regenerated as AsStridedBackward0, as torch's
        (
            "a = T.tensor(X, requires_grad=True); y = a.mH; z = a.adjoint()\n"
            "(y * T.tensor(W).mT).sum().abs().backward()"
        ),
        (
            "a = T.tensor(X, requires_grad=True); b = a.clone(); y = b.mH; y.mul_(2j)\n"
            "(b * T.tensor(W)).sum().abs().backward()"
        ),
        (
            "a = T.tensor(X, requires_grad=True); b = a.clone(); y = b.adjoint(); z = y[1]\n"
            "b.add_(1j); (y.abs() + z.real).sum().backward()"
        ),
        # views of another dtype are regenerated named for it too
        (
            "a = T.tensor(X, requires_grad=True); b = a.clone(); r = T.view_as_real(b)\n"
            "b.mul_(2j); (r * 3).sum().backward()"
        ),
        (
            "a = T.tensor(np.stack([X.real, X.imag], -1), requires_grad=True); b = a.clone()\n"
            "c = T.view_as_complex(b); b.mul_(2); (c * T.tensor(W)).real.sum().backward()"
        ),
        # a view of a leaf: torch's and staged's write into it under no_grad
        (
            "a = T.tensor(X, requires_grad=True)\nwith T.no_grad():\n    a.conj().add_(1j)\n"
            "a.abs().sum().backward()"
        ),
    ],
)
def test_conj_view_autograd_matches_torch(code):
    _same(code)


@pytest.mark.parametrize(
    ("code", "phrase"),
    [
        ("x = T.tensor(X); x.conj().numpy()", None),
        ("x = T.tensor(X); T.view_as_real(x.conj())", None),
        ("x = T.tensor(X); x.conj().detach().numpy()", None),
        # repeated elements of an expanded conj view are refused, as torch's
        ("x = T.tensor(X[:1]); x.expand(2, 3).conj().sigmoid_()", None),
        ("x = T.tensor(X[:1]); x.expand(2, 3).conj().fill_(1)", None),
        # copy_ is not run on copies: views of one conj copy overlap
        ("x = T.tensor(X); y = x.conj(); y[0, 1:].copy_(y[0, :-1])", None),
        ("a = T.tensor(X, requires_grad=True); a.conj().add_(1)", None),
        ("a = T.tensor(X, requires_grad=True); a.mH.add_(1)", None),
        ("x = T.tensor(X); x.mH.numpy()", None),
        ("x = T.tensor(X); T.view_as_real(x.adjoint())", None),
        ("a = T.tensor(X, requires_grad=True); a.conj()[0].mul_(2)", None),
        # the conj view shares its base's version counter: what an op saved of it is stale
        (
            "a = T.tensor(X, requires_grad=True); b = a.clone(); y = b.conj(); z = y * y\n"
            "b.add_(1); z.abs().sum().backward()",
            "has been modified by an inplace operation",
        ),
    ],
)
def test_conj_view_errors_match_torch(code, phrase):
    _same_error(code, phrase)


def test_conj_view_resolved_numpy_is_a_copy():
    x = staged.tensor(X)
    a = x.conj().resolve_conj().numpy()
    np.testing.assert_array_equal(a, X.conj())
    x.add_(1)
    np.testing.assert_array_equal(a, X.conj())


@pytest.mark.parametrize(
    "code",
    [
        # a write into a piece reaches the input, unseen by its autograd and version
        (
            "a = T.arange(6.0, requires_grad=True); b = a.clone()\n"
            "p, q, r = T.unsafe_split(b, 2); p.mul_(2); b.sum().backward()"
        ),
        (
            "a = T.arange(6.0, requires_grad=True); b = a.clone(); p, q = b.unsafe_chunk(2)\n"
            "q.add_(1); b.add_(1); (q * 2).sum().backward()"
        ),
        "x = T.arange(6.0); p, q = x.unsafe_split(3); x.add_(1); q[0] = 7",
        (
            "a = T.arange(6.0, requires_grad=True); b = a.clone()\n"
            "p, q = T.unsafe_split_with_sizes(b, [2, 4]); q.sub_(a[:4]); b.sum().backward()"
        ),
        (
            "a = T.arange(6.0, requires_grad=True)\nwith T.no_grad():\n    b = a.clone()\n"
            "    p, q = T.unsafe_chunk(b, 2)\np.mul_(2)"
        ),
    ],
)
def test_unsafe_split_pieces_match_torch(code):
    _same(code)


def test_split_pieces_still_refuse_writes():
    _same_error(
        "a = T.arange(6.0, requires_grad=True); p, q = a.clone().split(3); p.mul_(2)",
    )
