"""staged.linalg's factorizations against torch 2.13: values, gradients and gradients of
gradients (float64, batched), gradcheck, float32 within tolerances scaled by the condition
number, torch's results and errors for bad arguments, the eager-only LAPACK kernels'
(``eig``'s) error under capture and forward AD, and the compositions captured, compiled,
batched and differentiated forward. Singular and eigenvectors are only defined up to sign
(LAPACK builds differ), so each side is made positive in its largest entry first: that is
a constant of the data, and the gradients of the result are gauge-free."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from staged.autodiff import FUSED
from staged.autograd import gradcheck, gradgradcheck
from staged.tracing.interpret import interpret
from tests.checks import raises_like_torch

L, T = staged.linalg, torch.linalg
# the eager-only LAPACK kernels (tests/autodiff/test_fused.py checks the others against
# their decompositions; these have none): each is checked against torch here
KERNELS = {
    "linalg_svd",
    "linalg_svdvals",
    "linalg_eigh",
    "linalg_eigvalsh",
    "linalg_eig",
    "linalg_eigvals",
    "linalg_qr",
    "linalg_pinv",
    "linalg_lstsq",
}


def _rng(seed=0):
    return np.random.default_rng(seed)


def _well(rng, shape, dtype="float64"):
    """Matrices with condition numbers of a few units (square ones shifted off singular)."""
    a = rng.standard_normal(shape)
    if len(shape) > 1 and shape[-1] == shape[-2]:
        a = a + 2 * np.sign(rng.standard_normal(shape[:-1]))[..., None] * np.eye(shape[-1])
    return a.astype(dtype)


def _gauge(V) -> np.ndarray:
    """The sign making each column of ``V`` positive in its largest entry, shape
    ``(..., 1, k)``: a constant (of the data) to multiply the columns by."""
    V = np.asarray(V.detach()) if isinstance(V, staged.Tensor) else V.detach().numpy()
    i = np.abs(V).argmax(-2)[..., None, :]
    return np.sign(np.take_along_axis(V, i, -2))


def _col(lib, V):
    return lib.tensor(_gauge(V))


def _row(lib, V):
    return lib.tensor(np.swapaxes(_gauge(V), -1, -2))


def _raises_like_torch(call, *words) -> None:
    """``raises_like_torch``, where torch's ``LinAlgError`` is ``staged.linalg``'s."""
    with pytest.raises(Exception) as theirs:
        call(torch)
    expected = type(theirs.value)
    if issubclass(expected, torch.linalg.LinAlgError):
        expected = staged.linalg.LinAlgError
    with pytest.raises(expected) as ours:
        call(staged)
    for w in words:
        assert w in str(theirs.value) and w in str(ours.value), (w, str(ours.value))


def _np(t) -> np.ndarray:
    return np.asarray(t.detach()) if isinstance(t, staged.Tensor) else t.detach().numpy()


def _compare(fn, arrays, rtol=1e-9):
    """``fn(lib, *tensors)`` (a list of outputs) under staged and torch from the same
    float64 ``arrays``: outputs, the gradients of a random weighting of them, and those
    gradients' gradients along a random direction."""
    rng = _rng(1)
    ours = [staged.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out_s, out_t = fn(staged, *ours), fn(torch, *theirs)
    assert len(out_s) == len(out_t)
    for a, b in zip(out_s, out_t):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=rtol)
    ws = [rng.standard_normal(tuple(b.shape)) for b in out_t]
    loss_s = sum((o * staged.tensor(w)).sum() for o, w in zip(out_s, ws) if o.requires_grad)
    loss_t = sum((o * torch.tensor(w)).sum() for o, w in zip(out_t, ws) if o.requires_grad)
    gs = staged.autograd.grad(loss_s, ours, create_graph=True)
    gt = torch.autograd.grad(loss_t, theirs, create_graph=True)
    for a, b in zip(gs, gt):
        np.testing.assert_allclose(_np(a), _np(b), rtol=100 * rtol, atol=100 * rtol)
    vs = [rng.standard_normal(a.shape) for a in arrays]
    if not any(g.requires_grad for g in gs):  # a linear function: torch's are constant too
        pairs = [(g, torch.tensor(v)) for g, v in zip(gt, vs) if g.requires_grad]
        if pairs:
            ht = torch.autograd.grad(
                [g for g, _ in pairs], theirs, [v for _, v in pairs], allow_unused=True
            )
            assert not any(np.any(_np(h)) for h in ht if h is not None)
        return
    hs = staged.autograd.grad(
        sum((g * staged.tensor(v)).sum() for g, v in zip(gs, vs) if g.requires_grad),
        ours,
        allow_unused=True,
    )
    ht = torch.autograd.grad(
        sum((g * torch.tensor(v)).sum() for g, v in zip(gt, vs)), theirs, allow_unused=True
    )
    for a, b in zip(hs, ht):
        if b is None:
            assert a is None or not np.any(_np(a))
        else:
            np.testing.assert_allclose(_np(a), _np(b), rtol=100 * rtol, atol=100 * rtol)


# --- the LAPACK kernels -----------------------------------------------------------------------
def _svd(full):
    def fn(lib, a):
        U, S, Vh = lib.linalg.svd(a, full_matrices=full)
        k = S.shape[-1]
        return [U[..., :k] * _col(lib, U[..., :k]), S, Vh[..., :k, :] * _row(lib, U[..., :k])]

    return fn


def _eigh(lib, a):
    w, V = lib.linalg.eigh(a + a.mT)
    return [w, V * _col(lib, V)]


def _qr(mode):
    def fn(lib, a):
        Q, R = lib.linalg.qr(a, mode=mode)
        d = lib.tensor(np.sign(np.diagonal(_np(R), 0, -2, -1)))
        return [Q * d.unsqueeze(-2), R * d.unsqueeze(-1)]

    return fn


@pytest.mark.parametrize(
    "name, fn, shapes",
    [
        ("svd", _svd(False), [(2, 4, 3)]),
        ("svd wide", _svd(False), [(3, 5)]),
        ("svd full_matrices", _svd(True), [(4, 3)]),
        ("svdvals", lambda lib, a: [lib.linalg.svdvals(a)], [(2, 3, 4)]),
        ("eigh", _eigh, [(2, 4, 4)]),
        ("eigh UPLO=U", lambda lib, a: [lib.linalg.eigh(a, UPLO="U")[0]], [(3, 3)]),
        ("eigvalsh", lambda lib, a: [lib.linalg.eigvalsh(a + a.mT)], [(2, 3, 3)]),
        ("qr", _qr("reduced"), [(2, 5, 3)]),
        ("qr wide", _qr("reduced"), [(3, 5)]),
        ("qr complete", _qr("complete"), [(3, 3)]),
        ("pinv", lambda lib, a: [lib.linalg.pinv(a)], [(2, 4, 3)]),
        ("pinv wide", lambda lib, a: [lib.linalg.pinv(a)], [(3, 4)]),
        (
            "pinv hermitian",
            lambda lib, a: [lib.linalg.pinv(a + a.mT, hermitian=True)],
            [(2, 3, 3)],
        ),
        (
            "lstsq",
            lambda lib, a, b: list(lib.linalg.lstsq(a, b, driver="gelsd"))[:2],
            [(2, 5, 3), (2, 5, 2)],
        ),
        ("lstsq vector", lambda lib, a, b: [lib.linalg.lstsq(a, b).solution], [(5, 3), (5,)]),
        ("lstsq wide", lambda lib, a, b: [lib.linalg.lstsq(a, b)[0]], [(2, 3, 4), (2, 3, 2)]),
        ("norm 2", lambda lib, a: [lib.linalg.matrix_norm(a, 2)], [(2, 3, 4)]),
        ("norm -2", lambda lib, a: [lib.linalg.matrix_norm(a, -2)], [(3, 4)]),
        (
            "norm nuc",
            lambda lib, a: [lib.linalg.matrix_norm(a, "nuc", dim=(2, 0), keepdim=True)],
            [(3, 2, 4)],
        ),
        ("norm ord=2 of a matrix", lambda lib, a: [lib.linalg.norm(a, 2)], [(3, 4)]),
        ("cond", lambda lib, a: [lib.linalg.cond(a)], [(2, 3, 3)]),
        ("cond -2", lambda lib, a: [lib.linalg.cond(a, -2)], [(3, 4)]),
        (
            "eigvals",  # sums over the eigenvalues: their order is LAPACK's
            lambda lib, a: [(lib.linalg.eigvals(a) ** 2).real.sum(-1).unsqueeze(-1)],
            [(2, 4, 4)],
        ),
        (
            "eig",  # |V| and functions of L are free of V's phases
            lambda lib, a: [
                (lib.linalg.eig(a)[1].abs() * lib.linalg.eig(a)[0].real.unsqueeze(-2)).sum(-1),
                lib.linalg.eig(a)[0].abs().sum(-1, keepdim=True),
            ],
            [(2, 4, 4)],
        ),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_lapack_kernels_are_torchs(name, fn, shapes):
    rng = _rng(sum(map(ord, name)))
    _compare(fn, [_well(rng, s) for s in shapes])


@pytest.mark.parametrize(
    "fn, shapes",
    [
        (lambda a: list(L.svd(a, full_matrices=False)), [(3, 2)]),
        (lambda a: list(L.svd(a, full_matrices=False)), [(2, 3)]),
        (lambda a: list(L.eigh(a + a.mT)), [(3, 3)]),
        (lambda a: [x.abs() for x in L.eig(a)], [(3, 3)]),
        (lambda a: list(L.qr(a)), [(3, 2)]),
        (lambda a: list(L.qr(a)), [(2, 3)]),
        (L.pinv, [(3, 2)]),
        (lambda a, b: L.lstsq(a, b, driver="gelss")[:2], [(4, 2), (4, 1)]),
        (lambda a: L.matrix_norm(a, "nuc").unsqueeze(0), [(2, 3)]),
        (lambda a: L.cond(a).unsqueeze(0), [(3, 3)]),
    ],
)
def test_gradcheck_and_gradgradcheck(fn, shapes):
    rng = _rng(3)
    xs = [staged.tensor(_well(rng, s), requires_grad=True) for s in shapes]
    assert gradcheck(fn, xs)
    assert gradgradcheck(fn, xs)


@pytest.mark.parametrize(
    "name, fn, conditioned",
    [
        ("svdvals", lambda lib, a: lib.linalg.svdvals(a), False),
        ("eigvalsh", lambda lib, a: lib.linalg.eigvalsh(a + a.mT), False),
        ("pinv", lambda lib, a: lib.linalg.pinv(a), True),
        ("lstsq", lambda lib, a: lib.linalg.lstsq(a, a.mT[..., :2]).solution, True),
        ("qr", lambda lib, a: lib.linalg.qr(a).R.abs(), False),
        ("matrix_exp", lambda lib, a: lib.linalg.matrix_exp(a), True),
        ("lu_solve", lambda lib, a: lib.linalg.lu_solve(*lib.linalg.lu_factor(a), a.mT), True),
        ("inv_ex", lambda lib, a: lib.linalg.inv_ex(a).inverse, True),
    ],
)
def test_float32_within_the_condition_number(name, fn, conditioned):
    """float32 against torch's float64: values, and the gradient of their sum, within a
    few eps times the condition number."""
    a64 = _well(_rng(4), (2, 4, 4))
    cond = float(np.linalg.cond(a64).max()) if conditioned else 1.0
    ours = staged.tensor(a64.astype("float32"), requires_grad=True)
    theirs = torch.tensor(a64, requires_grad=True)
    out, ref = fn(staged, ours), fn(torch, theirs)
    assert out.dtype is staged.float32
    rel = 50 * np.finfo(np.float32).eps * cond**2
    np.testing.assert_allclose(_np(out), _np(ref), atol=rel * np.abs(_np(ref)).max())
    (g,) = staged.autograd.grad(out.sum(), ours)
    (gt,) = torch.autograd.grad(ref.sum(), theirs)
    np.testing.assert_allclose(_np(g), _np(gt), atol=10 * rel * np.abs(_np(gt)).max())


def test_each_lapack_kernel_is_one_node_named_as_torchs():
    """One Node each (Fused), listed in KERNELS, with torch's Node names."""
    a = staged.tensor(_well(_rng(5), (3, 3)), requires_grad=True)
    nodes = {
        "LinalgSvdBackward0": L.svd(a).S,
        "LinalgEighBackward0": L.eigh(a).eigenvalues,
        "LinalgEigBackward0": L.eig(a).eigenvalues,
        "LinalgQrBackward0": L.qr(a).R,
        "LinalgPinvBackward0": L.pinv(a),
        "LinalgLstsqBackward0": L.lstsq(a, a).solution,
    }
    for name, out in nodes.items():
        node = out.grad_fn
        while node.name() != name:  # the views that unpack the factors
            node = node.next_functions[0][0]
    assert KERNELS <= set(FUSED)
    assert not L.svdvals(a.detach()).requires_grad


def test_repeated_singular_values_and_eigenvalues_are_torchs():
    """svdvals/eigvalsh: a finite gradient where values repeat; the vectors' gradients are
    ill-defined there: NaN or inf where LAPACK returns the values exactly equal, else of
    the order of 1 / eps (which one depends on the machine's LAPACK kernels); the values
    alone used from svd stay finite."""
    q, _ = np.linalg.qr(_rng(6).standard_normal((3, 3)))
    for lib in (staged, torch):
        a = lib.tensor(q, requires_grad=True)
        (g,) = lib.autograd.grad(lib.linalg.svdvals(a).sum(), a)
        np.testing.assert_allclose(_np(g), q, atol=1e-12)  # U Vh
        (g,) = lib.autograd.grad(lib.linalg.svd(a).S.sum(), a)
        np.testing.assert_allclose(_np(g), q, atol=1e-12)
        (g,) = lib.autograd.grad(lib.linalg.svd(a).U.sum(), a)
        assert not np.isfinite(_np(g)).all() or np.abs(_np(g)).max() > 1e10, _np(g)
        s = lib.tensor(np.eye(3), requires_grad=True)
        (g,) = lib.autograd.grad(lib.linalg.eigh(s).eigenvalues.sum(), s)
        np.testing.assert_allclose(_np(g), np.eye(3), atol=1e-12)


def test_the_columns_full_matrices_adds_have_no_gradient_as_in_torch():
    a = _well(_rng(18), (4, 2))
    grads = []
    for lib in (staged, torch):
        x = lib.tensor(a, requires_grad=True)
        U, S, _ = lib.linalg.svd(x)
        (g,) = lib.autograd.grad(U[..., 2:].sum() + S.sum(), x)
        grads.append(_np(g))
    np.testing.assert_allclose(grads[0], grads[1], atol=1e-12)
    U, _, Vh = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(grads[0], U @ Vh, atol=1e-12)  # S's alone


def test_eig_of_a_loss_that_depends_on_phases_raises_torchs_error():
    a = _well(_rng(7), (4, 4))
    assert np.iscomplexobj(np.linalg.eigvals(a))

    def call(lib):
        x = lib.tensor(a, requires_grad=True)
        lib.linalg.eig(x).eigenvectors.real.sum().backward()

    raises_like_torch(call, "specified up to multiplication by e^{i phi}")
    w, V = L.eig(staged.tensor(a.astype("float32")))
    assert (w.dtype, V.dtype) == (staged.complex64, staged.complex64)


def test_qr_modes_and_their_gradients():
    a = _well(_rng(8), (2, 4, 3))
    for mode in ("reduced", "complete", "r"):
        Q, R = L.qr(staged.tensor(a), mode=mode)
        Qt, Rt = T.qr(torch.tensor(a), mode=mode)
        assert (tuple(Q.shape), tuple(R.shape)) == (tuple(Qt.shape), tuple(Rt.shape))
        np.testing.assert_allclose(np.abs(_np(R)), np.abs(_np(Rt)), atol=1e-12)
    Q, R = L.qr(staged.tensor(a), "complete")
    np.testing.assert_allclose(_np(Q @ R), a, atol=1e-12)

    def backward(mode):
        return lambda lib: (
            lib.linalg.qr(lib.tensor(a, requires_grad=True), mode=mode)[1].sum().backward()
        )

    raises_like_torch(backward("r"), "mode='r'", "mode='reduced'")
    raises_like_torch(backward("complete"), "not differentiable when mode='complete'")
    raises_like_torch(lambda lib: lib.linalg.qr(lib.ones(2, 2), mode="x"), "unrecognized mode 'x'")


def test_lstsq_results_follow_the_driver_as_torchs():
    rng = _rng(9)
    a, b = _well(rng, (2, 5, 3)), rng.standard_normal((2, 5, 2))
    deficient = a.copy()
    deficient[..., 2] = deficient[..., 1]
    for A in (a, deficient):
        for driver in (None, "gels", "gelsy", "gelsd", "gelss"):
            if driver == "gels" and A is deficient:
                continue  # QR of a rank-deficient matrix: LAPACK's garbage
            ours = L.lstsq(staged.tensor(A), staged.tensor(b), driver=driver)
            theirs = T.lstsq(torch.tensor(A), torch.tensor(b), driver=driver)
            assert type(ours).__name__ == "linalg_lstsq"  # torch's name
            for o, t in zip(ours, theirs):
                assert (tuple(o.shape), o.dtype.name) == (tuple(t.shape), str(t.dtype)[6:])
                np.testing.assert_allclose(_np(o), _np(t), atol=1e-10)
    x = L.lstsq(staged.tensor(a), staged.tensor(b), rcond=0.5, driver="gelsd")
    xt = T.lstsq(torch.tensor(a), torch.tensor(b), rcond=0.5, driver="gelsd")
    assert x.rank.tolist() == xt.rank.tolist() and x.residuals.numel() == 0


def test_pinv_and_matrix_rank_tolerances_are_torchs():
    rng = _rng(10)
    a = rng.standard_normal((2, 4, 2)) @ rng.standard_normal((2, 2, 3))  # rank 2
    a = a * np.array([1.0, 1e-3])[:, None, None]
    for kw in (
        {},
        {"atol": 0.5},
        {"rtol": 0.5},
        {"atol": 0.0, "rtol": 1e-12},
        {"atol": [0.0, 1.0]},
        {"hermitian": True},
    ):
        A = a[..., :3, :] + np.swapaxes(a[..., :3, :], -1, -2) if kw.get("hermitian") else a
        args = {k: (v if not isinstance(v, list) else np.array(v)) for k, v in kw.items()}
        for fn in ("pinv", "matrix_rank"):
            ours = getattr(L, fn)(
                staged.tensor(A),
                **{
                    k: staged.tensor(v) if isinstance(v, np.ndarray) else v for k, v in args.items()
                },
            )
            theirs = getattr(T, fn)(
                torch.tensor(A),
                **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in args.items()},
            )
            np.testing.assert_allclose(_np(ours), _np(theirs), atol=1e-8, err_msg=f"{fn} {kw}")
    assert (
        L.matrix_rank(staged.tensor(a), 1e-3).tolist()
        == T.matrix_rank(torch.tensor(a), 1e-3).tolist()
    )
    assert L.matrix_rank(staged.eye(3)).dtype is staged.int64


# --- the compositions ------------------------------------------------------------------------
def _spd(lib, a):
    return a @ a.mT + 3 * lib.eye(a.shape[-1], dtype=a.dtype)


@pytest.mark.parametrize(
    "name, fn, shapes",
    [
        ("lu_factor", lambda lib, a: list(lib.linalg.lu_factor(a))[:1], [(2, 4, 4)]),
        ("lu_factor tall", lambda lib, a: list(lib.linalg.lu_factor(a))[:1], [(5, 3)]),
        ("lu", lambda lib, a: list(lib.linalg.lu(a)), [(2, 3, 3)]),
        ("lu wide", lambda lib, a: list(lib.linalg.lu(a)), [(3, 5)]),
        (
            "lu_solve",
            lambda lib, a, b: [lib.linalg.lu_solve(*lib.linalg.lu_factor(a), b)],
            [(2, 3, 3), (2, 3, 2)],
        ),
        (
            "lu_solve adjoint",
            lambda lib, a, b: [lib.linalg.lu_solve(*lib.linalg.lu_factor(a), b, adjoint=True)],
            [(3, 3), (2, 3, 2)],
        ),
        (
            "lu_solve left=False",
            lambda lib, a, b: [lib.linalg.lu_solve(*lib.linalg.lu_factor(a), b, left=False)],
            [(3, 3), (2, 3)],
        ),
        (
            "lu_solve of a leaf LU",
            lambda lib, lu, b: [lib.linalg.lu_solve(lu, lib.tensor([2, 3, 3], dtype=lib.int32), b)],
            [(3, 3), (3, 1)],
        ),
        ("inv_ex", lambda lib, a: list(lib.linalg.inv_ex(a)), [(2, 3, 3)]),
        ("solve_ex", lambda lib, a, b: list(lib.linalg.solve_ex(a, b)), [(2, 3, 3), (3,)]),
        (
            "solve_ex left=False",
            lambda lib, a, b: list(lib.linalg.solve_ex(a, b, left=False)),
            [(3, 3), (2, 3)],
        ),
        ("cholesky_ex", lambda lib, a: list(lib.linalg.cholesky_ex(_spd(lib, a))), [(2, 3, 3)]),
        (
            "cholesky_ex upper",
            lambda lib, a: [lib.linalg.cholesky_ex(_spd(lib, a), upper=True)[0]],
            [(3, 3)],
        ),
        ("matrix_exp", lambda lib, a: [lib.linalg.matrix_exp(a)], [(2, 3, 3)]),
        ("matrix_exp squared", lambda lib, a: [lib.linalg.matrix_exp(4 * a)], [(3, 3)]),
        ("matrix_exp small", lambda lib, a: [lib.linalg.matrix_exp(a / 100)], [(3, 3)]),
        ("vander", lambda lib, x: [lib.linalg.vander(x)], [(2, 4)]),
        ("vander N", lambda lib, x: [lib.linalg.vander(x, N=2)], [(3,)]),
        ("tensorinv", lambda lib, a: [lib.linalg.tensorinv(a, ind=1)], [(6, 2, 3)]),
        ("tensorsolve", lambda lib, a, b: [lib.linalg.tensorsolve(a, b)], [(2, 3, 6), (2, 3)]),
        (
            "tensorsolve dims",
            lambda lib, a, b: [lib.linalg.tensorsolve(a, b, dims=(0,))],
            [(6, 2, 3), (2, 3)],
        ),
        (
            "householder_product",
            lambda lib, a, t: [lib.linalg.householder_product(a, t)],
            [(5, 3), (2,)],
        ),
        (
            "householder_product batched",
            lambda lib, a, t: [lib.linalg.householder_product(a, t)],
            [(2, 4, 4), (2, 4)],
        ),
        (
            "cholesky_solve",
            lambda lib, b, a: [lib.cholesky_solve(b, lib.linalg.cholesky(_spd(lib, a)))],
            [(2, 3, 2), (3, 3)],
        ),
        (
            "cholesky_solve upper",
            lambda lib, b, a: [
                lib.cholesky_solve(b, lib.linalg.cholesky(_spd(lib, a), upper=True), True)
            ],
            [(3, 2), (3, 3)],
        ),
        (
            "cholesky_inverse",
            lambda lib, a: [lib.cholesky_inverse(lib.linalg.cholesky(_spd(lib, a)))],
            [(2, 3, 3)],
        ),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_compositions_are_torchs(name, fn, shapes):
    rng = _rng(sum(map(ord, name)))
    arrays = [_well(rng, s) for s in shapes]
    if name == "lu_solve of a leaf LU":
        arrays[0] = np.triu(arrays[0]) + np.tril(arrays[0], -1) / 4
    _compare(fn, arrays)


def test_cholesky_solve_of_a_leaf_factor_has_its_triangles_gradient():
    """Only L's lower triangle is read: that part of the gradient is torch's."""
    rng = _rng(11)
    l, b = np.tril(_well(rng, (3, 3))), rng.standard_normal((3, 2))
    grads = []
    for lib in (staged, torch):
        x = lib.tensor(l, requires_grad=True)
        (g,) = lib.autograd.grad(lib.cholesky_solve(lib.tensor(b), x).sum(), x)
        grads.append(np.tril(_np(g)))
    np.testing.assert_allclose(*grads, atol=1e-10)


def test_singular_matrices_give_torchs_info_and_errors():
    singular = np.stack([np.eye(3), [[1.0, 2, 3], [2, 4, 6], [0, 1, 1]]])
    not_pd = np.stack([np.eye(2), [[1.0, 2], [2, 1]]])
    for fn, a in [
        (lambda lib, a: lib.linalg.inv_ex(a).info, singular),
        (lambda lib, a: lib.linalg.solve_ex(a, lib.ones(2, 3, 1, dtype=a.dtype)).info, singular),
        (lambda lib, a: lib.linalg.lu_factor_ex(a).info, singular),
        (lambda lib, a: lib.linalg.lu_factor_ex(a).pivots, singular),
        (lambda lib, a: lib.linalg.lu_factor_ex(a).LU, singular),
        (lambda lib, a: lib.linalg.cholesky_ex(a).info, not_pd),
        (lambda lib, a: lib.linalg.cond(a, 1), singular),
        (lambda lib, a: lib.linalg.cond(a, "fro"), np.zeros((2, 2))),  # 0 * inf: inf
    ]:
        ours, theirs = fn(staged, staged.tensor(a)), fn(torch, torch.tensor(a))
        assert ours.dtype.name == str(theirs.dtype)[6:]
        np.testing.assert_allclose(_np(ours), _np(theirs))
    zero_column = staged.tensor([[0.0, 1, 2], [0, 3, 4], [0, 5, 7]])
    LU, pivots, info = L.lu_factor_ex(zero_column)
    LUt, pivots_t, info_t = T.lu_factor_ex(torch.tensor(_np(zero_column)))
    # float32's rounding of 4 - 0.6 * 7 (eps * 7: LAPACK kernels differ by CPU)
    np.testing.assert_allclose(_np(LU), _np(LUt), atol=1e-6)
    assert (pivots.tolist(), info.item()) == (pivots_t.tolist(), info_t.item())
    for call, words in [
        (
            lambda lib: lib.linalg.inv_ex(lib.tensor(singular), check_errors=True),
            ["(Batch element 1): The diagonal element 3 is zero"],
        ),
        (
            lambda lib: lib.linalg.solve_ex(
                lib.tensor(singular), lib.ones(3, dtype=lib.float64), check_errors=True
            ),
            ["(Batch element 1): The solver failed"],
        ),
        (
            lambda lib: lib.linalg.cholesky_ex(lib.tensor(not_pd), check_errors=True),
            ["(Batch element 1): The factorization could not", "order 2"],
        ),
        (
            lambda lib: lib.linalg.cholesky(lib.tensor(not_pd)),
            ["linalg.cholesky: (Batch element 1)"],
        ),
        (
            lambda lib: lib.linalg.lu_factor(lib.tensor(singular)),
            ["(Batch element 1): U[3,3] is zero"],
        ),
        (
            lambda lib: lib.linalg.lu_factor_ex(lib.tensor(singular), check_errors=True),
            ["U[3,3] is zero"],
        ),
        (
            lambda lib: lib.linalg.lu_factor(lib.eye(2), pivot=False),
            ["LU without pivoting is not implemented on the CPU"],
        ),
        (lambda lib: lib.linalg.tensorinv(lib.zeros(2, 2, 4)), ["the input matrix is singular"]),
    ]:
        _raises_like_torch(call, *words)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda lib: lib.linalg.svd(lib.ones(2)), ["must have at least 2 dimensions"]),
        (
            lambda lib: lib.linalg.svd(lib.ones(2, 2, dtype=lib.int64)),
            ["floating point", "Got Long"],
        ),
        (
            lambda lib: lib.linalg.svd(lib.ones(2, 2), driver="gesvd"),
            ["`driver=` is only supported on CUDA"],
        ),
        (lambda lib: lib.linalg.eigh(lib.ones(2, 3)), ["square matrices", "2 by 3"]),
        (lambda lib: lib.linalg.eigh(lib.ones(2, 2), UPLO="X"), ["'L' or 'U', but got X"]),
        (lambda lib: lib.linalg.eig(lib.ones(2, 3)), ["square matrices"]),
        (lambda lib: lib.linalg.qr(lib.ones(3)), ["at least 2 dimensions"]),
        (lambda lib: lib.linalg.pinv(lib.ones(3)), ["expected a tensor with 2 or more dimensions"]),
        (lambda lib: lib.linalg.matrix_rank(lib.ones(3)), ["at least 2 dimensions"]),
        (lambda lib: lib.linalg.lstsq(lib.ones(3), lib.ones(3)), ["at least 2 dimensions"]),
        (
            lambda lib: lib.linalg.lstsq(lib.ones(3, 2), lib.ones(2, 3, 2)),
            ["(input.dim() - other.dim()) <= 1"],
        ),
        (
            lambda lib: lib.linalg.lstsq(lib.ones(3, 2), lib.ones(4, 1)),
            ["input.size(-2) should match other.size(-2)"],
        ),
        (
            lambda lib: lib.linalg.lstsq(lib.ones(3, 2), lib.ones(3, 1), driver="x"),
            ["should be one of (gels, gelsy, gelsd, gelss)"],
        ),
        (
            lambda lib: lib.linalg.lstsq(lib.ones(3, 2), lib.ones(3, 1, dtype=lib.float64)),
            ["same dtype"],
        ),
        (
            lambda lib: lib.linalg.cond(lib.ones(2, 3), 1),
            ["linalg.cond(ord=1): A must be batches of square matrices"],
        ),
        (lambda lib: lib.linalg.cond(lib.ones(2, 2), 3), ["invalid norm type: 3"]),
        (lambda lib: lib.linalg.cond(lib.ones(3)), ["at least 2 dimensions"]),
        (lambda lib: lib.linalg.matrix_norm(lib.ones(2, 2), ord=3), ["Order 3 not supported"]),
        (
            lambda lib: lib.linalg.lu_factor(lib.ones(3)),
            ["Expected tensor with 2 or more dimensions"],
        ),
        (
            lambda lib: lib.linalg.lu_solve(
                lib.eye(3), lib.tensor([1, 2, 3], dtype=lib.int32), lib.ones(3)
            ),
            ["B must have at least 2 dimensions"],
        ),
        (
            lambda lib: lib.linalg.lu_solve(
                lib.eye(3), lib.tensor([1, 2, 3], dtype=lib.int32), lib.ones(2, 1)
            ),
            ["Incompatible shapes", "(3x3 and 2x1)"],
        ),
        (
            lambda lib: lib.linalg.lu_solve(lib.eye(3), lib.tensor([1, 2, 3]), lib.ones(3, 1)),
            ["scalar type torch.int32"],
        ),
        (
            lambda lib: lib.linalg.lu_solve(
                lib.eye(3), lib.tensor([1, 2], dtype=lib.int32), lib.ones(3, 1)
            ),
            ["Number of pivots"],
        ),
        (lambda lib: lib.linalg.matrix_exp(lib.ones(2, 3)), ["square matrices"]),
        (lambda lib: lib.linalg.matrix_exp(lib.ones(3)), ["at least 2 dimensions"]),
        (lambda lib: lib.linalg.vander(lib.ones(3), N=1), ["N must be greater than 1."]),
        (lambda lib: lib.vander(lib.ones(2, 3)), ["one-dimensional"]),
        (lambda lib: lib.vander(lib.ones(3), N=-1), ["N must be non-negative."]),
        (lambda lib: lib.linalg.tensorinv(lib.ones(2, 3, 4), ind=1), ["but got 12 != 2"]),
        (lambda lib: lib.linalg.tensorinv(lib.ones(4, 2, 2), ind=0), ["strictly positive integer"]),
        (lambda lib: lib.linalg.tensorsolve(lib.ones(2, 3, 4), lib.ones(2, 3)), ["but got 4 != 6"]),
        (
            lambda lib: lib.linalg.householder_product(lib.ones(3), lib.ones(1)),
            ["at least 2 dimensions"],
        ),
        (
            lambda lib: lib.linalg.householder_product(lib.ones(2, 3), lib.ones(1)),
            ["input.shape[-2] must be greater"],
        ),
        (
            lambda lib: lib.linalg.householder_product(lib.ones(3, 2), lib.ones(3)),
            ["input.shape[-1] must be greater"],
        ),
        (
            lambda lib: lib.linalg.householder_product(lib.ones(3, 2), lib.ones(2, 1)),
            ["one dimension less than input"],
        ),
        (
            lambda lib: lib.linalg.householder_product(lib.ones(2, 3, 2), lib.ones(3, 1)),
            ["batch dimensions of tau", "[3]"],
        ),
        (
            lambda lib: lib.linalg.householder_product(
                lib.ones(3, 2), lib.ones(1, dtype=lib.float64)
            ),
            ["tau dtype Double does not match input dtype Float"],
        ),
        (
            lambda lib: lib.cholesky_solve(lib.ones(3), lib.eye(3)),
            ["b should have at least 2 dimensions"],
        ),
        (
            lambda lib: lib.cholesky_solve(lib.ones(3, 2), lib.eye(2)),
            ["Incompatible matrix sizes", "2 by 2", "3 by 2"],
        ),
        (
            lambda lib: lib.cholesky_solve(lib.ones(3, 2, dtype=lib.float64), lib.eye(3)),
            ["b of type Double and A of type Float"],
        ),
        (lambda lib: lib.cholesky_inverse(lib.ones(2, 3)), ["square matrices"]),
    ],
)
def test_bad_arguments_raise_torchs_errors(call, words):
    raises_like_torch(call, *words)


def test_complex_matrices_say_they_are_not_supported():
    z = staged.ones(2, 2, dtype=staged.complex64)
    for fn in (L.eigh, L.qr, L.matrix_exp):
        with pytest.raises(NotImplementedError, match="complex matrices are not supported"):
            fn(z)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib, h: lib.linalg.svd(h),
        lambda lib, h: lib.linalg.eigh(h),
        lambda lib, h: lib.linalg.qr(h),
        lambda lib, h: lib.linalg.inv(h),
        lambda lib, h: lib.linalg.det(h),
        lambda lib, h: lib.linalg.solve(h, h),
    ],
)
def test_lapack_has_no_half_precision_kernels(call):
    raises_like_torch(lambda lib: call(lib, lib.eye(3, dtype=lib.float16)), "Half")


# --- capture, compile, forward AD, vmap ---------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [lambda a: L.eig(a).eigenvalues, L.eigvals],
)
def test_the_lapack_kernels_say_they_are_eager_only_when_captured(fn):  # see test_linalg_compiled
    a = staged.tensor(_well(_rng(12), (3, 3)))
    with pytest.raises(
        NotImplementedError, match=r"linalg\.\w+ .*runs LAPACK eagerly only.*staged\.compile"
    ):
        staged.capture(fn, a)


def _captured_equals_eager(fn, *args):
    cap = staged.capture(fn, *args)
    got = interpret(cap.graph, *(np.asarray(a.detach()) for a in args))
    got = [g for g, o in zip(got, cap.graph.outputs) if o.kind != "check"]
    want = fn(*args)
    want = want if isinstance(want, (tuple, list)) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, _np(w), rtol=1e-10, atol=1e-12)


def test_the_compositions_capture_with_their_gradients():
    rng = _rng(13)
    a = staged.tensor(_well(rng, (2, 3, 3)), requires_grad=True)
    b = staged.tensor(rng.standard_normal((2, 3, 2)))
    tau = staged.tensor(rng.standard_normal((2, 2)))

    def step(a, b, tau):
        outs = [
            L.matrix_exp(a),
            L.lu_solve(*L.lu_factor(a), b),
            *L.lu(a),
            L.inv_ex(a).inverse,
            L.solve_ex(a, b).result,
            L.cholesky_ex(_spd(staged, a)).L,
            staged.cholesky_solve(b, L.cholesky(_spd(staged, a))),
            L.householder_product(a, tau),
            L.vander(a[..., 0]),
            L.tensorsolve(a[0], b[0, :, 0]),
        ]
        loss = sum(o.sum() for o in outs)
        (g,) = staged.autograd.grad(loss, a)
        return [o.detach() for o in outs] + [g, L.lu_factor_ex(a).pivots, L.inv_ex(a).info]

    _captured_equals_eager(step, a, b, tau)


def test_a_compiled_step_equals_eager_and_checks_what_torch_checks():
    rng = _rng(14)
    a = staged.tensor(_well(rng, (2, 2)), requires_grad=True)
    b = staged.tensor(rng.standard_normal((2, 1)))

    def step(a, b):
        x = L.lu_solve(*L.lu_factor(a), b)
        (g,) = staged.autograd.grad(x.sum(), a)
        return x.detach(), g

    compiled = staged.compile(step)
    for w, o in zip(step(a, b), compiled(a, b)):
        np.testing.assert_allclose(_np(o), _np(w), rtol=1e-12)
    out = compiled(
        staged.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=staged.float64, requires_grad=True), b
    )
    with pytest.raises(RuntimeError, match=r"U\[i,i\] is zero"):
        out[0].numpy()


def test_the_compositions_export_to_onnx(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    rng = _rng(19)
    a = staged.tensor(_well(rng, (3, 3), "float32"))
    b = staged.tensor(rng.standard_normal((3, 2)).astype("float32"))

    def f(a, b):
        x = L.lu_solve(*L.lu_factor(a), b) + staged.cholesky_solve(b, L.cholesky(_spd(staged, a)))
        return x + L.matrix_exp(a / 4).sum() + L.householder_product(a, a[0, :2]).sum()

    staged.onnx.export(f, (a, b), tmp_path / "f.onnx", with_gradients=False)
    session = ort.InferenceSession(str(tmp_path / "f.onnx"))
    feeds = {i.name: np.asarray(t) for i, t in zip(session.get_inputs(), (a, b))}
    np.testing.assert_allclose(session.run(None, feeds)[0], _np(f(a, b)), rtol=1e-5, atol=1e-5)


def test_matrix_exp_captured_squares_as_eager_and_checks_its_norm():
    a = staged.tensor(_well(_rng(15), (2, 3, 3)) * 8)
    _captured_equals_eager(L.matrix_exp, a)
    cap = staged.capture(L.matrix_exp, a)
    big = np.asarray(a) * 1e12
    assert cap.graph.outputs[-1].kind == "check"
    with pytest.raises(RuntimeError, match="squares at most 32 times"):
        interpret(cap.graph, big)  # as a compiled step raises when its results are read


def test_forward_mode_and_vmap_of_the_compositions_are_torchs():
    rng = _rng(16)
    a, t = _well(rng, (2, 3, 3)), rng.standard_normal((2, 3, 3))
    fns = [
        (lambda lib, x: lib.linalg.matrix_exp(x)),
        (lambda lib, x: lib.linalg.lu_solve(*lib.linalg.lu_factor(x), x.mT)),
        (lambda lib, x: lib.linalg.householder_product(x, x[..., 0, :2])),
    ]
    fwd = staged.autograd.forward_ad
    for fn in fns:
        with fwd.dual_level():
            tangent = fwd.unpack_dual(
                fn(staged, fwd.make_dual(staged.tensor(a), staged.tensor(t)))
            ).tangent
        want = torch.func.jvp(lambda x: fn(torch, x), (torch.tensor(a),), (torch.tensor(t),))[1]
        np.testing.assert_allclose(_np(tangent), _np(want), rtol=1e-10, atol=1e-12)
        batched = staged.func.vmap(lambda x: fn(staged, x))(staged.tensor(a))
        np.testing.assert_allclose(
            _np(batched), _np(fn(torch, torch.tensor(a))), rtol=1e-10, atol=1e-12
        )


# --- torch's top-level forms and Tensor methods ---------------------------------------------------
def test_torch_top_level_forms_and_methods():
    rng = _rng(17)
    a, sq, b = _well(rng, (2, 4, 3)), _well(rng, (3, 3)), rng.standard_normal((3, 2))
    sa, ta = staged.tensor(a), torch.tensor(a)
    U, S, V = staged.svd(sa)
    assert type(staged.svd(sa)).__name__ == "svd" and tuple(V.shape) == (2, 3, 3)
    np.testing.assert_allclose(_np(U @ staged.diag_embed(S) @ V.mT), a, atol=1e-12)
    np.testing.assert_allclose(_np(S), _np(torch.svd(ta).S), atol=1e-12)
    shapes = [tuple(x.shape) for x in sa.svd(some=False)]
    assert shapes == [tuple(x.shape) for x in ta.svd(some=False)]
    U0, _, V0 = staged.svd(sa, compute_uv=False)
    Ut0, _, Vt0 = torch.svd(ta, compute_uv=False)
    assert (tuple(U0.shape), tuple(V0.shape)) == (tuple(Ut0.shape), tuple(Vt0.shape))
    assert not np.any(_np(U0)) and not np.any(_np(V0))
    calls = [
        lambda lib: lib.tensor(a).pinverse(),
        lambda lib: lib.pinverse(lib.tensor(a), rcond=0.9),
        lambda lib: lib.tensor(sq).matrix_exp(),
        lambda lib: lib.matrix_exp(lib.tensor(sq)),
        lambda lib: lib.tensor(b).lu_solve(*lib.linalg.lu_factor(lib.tensor(sq))),
        lambda lib: lib.lu_solve(lib.tensor(b), *lib.linalg.lu_factor(lib.tensor(sq))),
        lambda lib: lib.lu(lib.tensor(sq))[0],
        lambda lib: lib.tensor(sq).lu(get_infos=True)[2],
        lambda lib: lib.qr(lib.tensor(a), some=False)[1].abs(),
        lambda lib: lib.tensor(a).qr()[1].abs(),
        lambda lib: lib.lu_unpack(*lib.linalg.lu_factor(lib.tensor(sq)))[0],
        lambda lib: lib.lu_unpack(*lib.linalg.lu_factor(lib.tensor(sq)), unpack_data=False)[1],
        lambda lib: lib.tensor(b).cholesky_solve(lib.linalg.cholesky(_spd(lib, lib.tensor(sq)))),
        lambda lib: lib.linalg.cholesky(_spd(lib, lib.tensor(sq))).cholesky_inverse(),
        lambda lib: lib.tensor(a[0]).orgqr(lib.tensor(b[:2, 0])),
        lambda lib: lib.orgqr(lib.tensor(a[0]), lib.tensor(b[:2, 0])),
        lambda lib: lib.vander(lib.tensor(b[:, 0])),
        lambda lib: lib.vander(lib.tensor([1, 2, 3]), N=4, increasing=True),
        lambda lib: lib.vander(lib.tensor(b[:, 0]), N=1),
        lambda lib: lib.vander(lib.tensor(b[:, 0]), N=0),
    ]
    for call in calls:
        with warnings.catch_warnings(record=True) as ours_warned:
            warnings.simplefilter("always")
            ours = call(staged)
        with warnings.catch_warnings(record=True) as theirs_warned:
            warnings.simplefilter("always")
            theirs = call(torch)
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert ours.dtype.name == str(theirs.dtype)[6:]
        np.testing.assert_allclose(_np(ours), _np(theirs), atol=1e-10)
        # torch's deprecation warnings (torch.qr, torch.lu, torch.lu_solve; torch gives each
        # once a process, staged every time, for Python's filters to show), at the caller
        said = {str(w.message)[:60] for w in ours_warned}
        assert {str(w.message)[:60] for w in theirs_warned} <= said
        assert all(w.filename == __file__ for w in ours_warned)
    for call in (
        lambda: staged.qr(sa),
        lambda: sa[0].qr(),
        lambda: staged.lu(staged.tensor(sq)),
        lambda: staged.lu_solve(staged.tensor(b), *L.lu_factor(staged.tensor(sq))),
    ):
        with pytest.warns(UserWarning, match="is deprecated in favor of torch.linalg"):
            call()


def test_torch_vander_gradient_is_linalg_vanders_flipped():
    """torch.vander's own backward fails in torch 2.13 (an in-place cumprod): its values
    and linalg.vander's gradient are torch's."""
    x = np.array([0.0, 1.5, -2.0, 0.5])
    ours = staged.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    w = np.arange(16.0).reshape(4, 4)
    (g,) = staged.autograd.grad((staged.vander(ours) * staged.tensor(w)).sum(), ours)
    (gt,) = torch.autograd.grad((T.vander(theirs).flip(-1) * torch.tensor(w)).sum(), theirs)
    np.testing.assert_allclose(_np(g), _np(gt), rtol=1e-12)


def test_the_public_names_are_torch_linalgs():
    assert set(L.__all__) <= set(dir(L))
    assert all(hasattr(T, n) for n in L.__all__ if not n[0].isupper())
