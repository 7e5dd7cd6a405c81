"""QR, eigh and the SVD (and pinv, lstsq, matrix_rank, cond, the 2/-2/'nuc' norms) under
capture, ``staged.compile``, forward-mode AD and vmap, where they are Householder QR and
Jacobi methods in staged's ops (``staged/linalg/_orthogonal.py``): against eager (LAPACK,
torch's backward formulas) and torch 2.13. Eigen- and singular vectors are defined up to
sign, so vectors are compared through sign-invariant functions of them (``V * V``,
reconstructions, orthogonality); tolerances are a few ulp times the size and the
conditioning: ``|A| / gap`` for vectors, ``cond(A)`` for QR and singular values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged.linalg._orthogonal import jacobi_eigh, jacobi_svd
from staged.tracing.interpret import interpret

L = staged.linalg
fwd = staged.autograd.forward_ad


def _rng(seed):
    return np.random.default_rng(seed)


def _spectrum(rng, shape, values):
    """Symmetric matrices ``Q diag(values) Q^T`` with random orthogonal ``Q``."""
    Q = np.linalg.qr(rng.standard_normal(shape))[0]
    return (Q * values[..., None, :]) @ np.swapaxes(Q, -1, -2)


def _gapped(rng, shape, gap=0.5):
    """Symmetric matrices whose eigenvalues are at least ``gap`` apart, of size ``~n``."""
    n = shape[-1]
    return _spectrum(rng, shape, np.cumsum(gap + rng.random(shape[:-1]), -1) - n)


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.detach())


def _captured(fn, *arrays, grad=False):
    """``fn``'s captured graph run by the interpreter (the checks dropped)."""
    cap = staged.capture(fn, *(staged.tensor(a, requires_grad=grad) for a in arrays))
    got = interpret(cap.graph, *arrays)
    return [g for g, o in zip(got, cap.graph.outputs) if o.kind != "check"]


def _invariant(name):
    """Sign-invariant functions of each factorization's results (of torch or staged)."""
    return {
        "qr": lambda lib, a: list(lib.linalg.qr(a)),
        "qr_complete": lambda lib, a: list(lib.linalg.qr(a, "complete")),
        "qr_r": lambda lib, a: [lib.linalg.qr(a, "r").R],
        "eigh": lambda lib, a: (lambda w, V: [w, V * V, (V * w.unsqueeze(-2)) @ V.mT])(
            *lib.linalg.eigh(a)
        ),
        "eigh_U": lambda lib, a: (lambda w, V: [w, V * V])(*lib.linalg.eigh(a, UPLO="U")),
        "eigvalsh": lambda lib, a: [lib.linalg.eigvalsh(a)],
        "svd": lambda lib, a: (lambda U, S, Vh: [U * U, S, Vh * Vh, (U * S.unsqueeze(-2)) @ Vh])(
            *lib.linalg.svd(a, full_matrices=False)
        ),
        "svdvals": lambda lib, a: [lib.linalg.svdvals(a)],
        "pinv": lambda lib, a: [lib.linalg.pinv(a)],
        "pinv_hermitian": lambda lib, a: [lib.linalg.pinv(a + a.mT, hermitian=True)],
        "lstsq": lambda lib, a: [lib.linalg.lstsq(a, a[..., :2].exp(), driver="gels").solution],
        "norms": lambda lib, a: [
            lib.linalg.matrix_norm(a, "nuc"),
            lib.linalg.matrix_norm(a, 2),
            lib.linalg.matrix_norm(a, -2),
            lib.linalg.cond(a),
        ],
    }[name]


CASES = [  # name, shape, symmetric input
    ("qr", (2, 5, 3), False),
    ("qr", (2, 3, 5), False),
    ("qr_complete", (2, 3, 5), False),
    ("eigh", (2, 4, 4), True),
    ("eigh_U", (5, 5), True),
    ("eigvalsh", (2, 3, 3), True),
    ("svd", (2, 5, 3), False),
    ("svd", (2, 3, 4), False),
    ("svdvals", (4, 4), False),
    ("pinv", (2, 5, 3), False),
    ("pinv_hermitian", (4, 4), True),
    ("lstsq", (2, 5, 3), False),
    ("norms", (2, 4, 4), False),
]


def _input(rng, shape, symmetric):
    if symmetric:
        return _gapped(rng, shape)
    a = rng.standard_normal(shape)
    return a + 2 * np.eye(*shape[-2:]) if shape[-1] == shape[-2] else a


def _loss(lib, outs, weights):
    return sum((o * lib.tensor(w)).sum() for o, w in zip(outs, weights))


@pytest.mark.parametrize(("name", "shape", "symmetric"), CASES)
def test_captured_values_and_gradients_are_eagers_and_torchs(name, shape, symmetric):
    rng = _rng(1)
    a = _input(rng, shape, symmetric)
    fn = _invariant(name)
    weights = [rng.standard_normal(tuple(o.shape)) for o in fn(torch, torch.tensor(a))]

    def step(x):
        outs = fn(staged, x)
        (g,) = staged.autograd.grad(_loss(staged, outs, weights), x)
        return [o.detach() for o in outs] + [g]

    got = _captured(step, a, grad=True)
    eager = step(staged.tensor(a, requires_grad=True))
    at = torch.tensor(a, requires_grad=True)
    want = fn(torch, at)
    _loss(torch, want, weights).backward()
    for g, e, w in zip(got, eager, [*want, at.grad]):
        np.testing.assert_allclose(g, _np(e), rtol=1e-11, atol=1e-11)
        np.testing.assert_allclose(g, _np(w), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("name", ["qr", "eigh", "svd"])
def test_a_captured_gradient_is_the_formula_not_the_sweeps_transposed(name):
    """The backward of a captured factorization is torch's formula (a few products), not
    the transpose of its composition: the step with the gradient is barely longer."""
    a = staged.tensor(_gapped(_rng(12), (4, 4)), requires_grad=True)

    def loss(x):
        return sum((o * o * o).sum() for o in _invariant(name)(staged, x))

    forward = len(staged.capture(loss, a).graph.ops)
    step = staged.capture(lambda x: staged.autograd.grad(loss(x), x), a)
    assert forward < len(step.graph.ops) < forward + 200


@pytest.mark.parametrize(("name", "shape", "symmetric"), CASES)
def test_tangents_and_vmap_are_torchs(name, shape, symmetric):
    rng = _rng(2)
    a, t = _input(rng, shape, symmetric), rng.standard_normal(shape)
    t = t + np.swapaxes(t, -1, -2) if symmetric else t
    fn = _invariant(name)
    with fwd.dual_level():
        got = fn(staged, fwd.make_dual(staged.tensor(a), staged.tensor(t)))
        got = [_np(fwd.unpack_dual(o).tangent) for o in got]
    want = torch.func.jvp(lambda x: fn(torch, x), (torch.tensor(a),), (torch.tensor(t),))[1]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, _np(w), rtol=1e-10, atol=1e-10)
    if len(shape) == 3:
        batched = staged.func.vmap(lambda x: fn(staged, x))(staged.tensor(a))
        for g, w in zip(batched, fn(torch, torch.tensor(a))):
            np.testing.assert_allclose(_np(g), _np(w), rtol=1e-11, atol=1e-11)


def test_qr_keeps_lapacks_signs_where_a_column_needs_no_reflection():
    """``dlarfg`` leaves a column whose tail is 0 (``R``'s pivot keeps its sign) and a zero
    column (pivot 0); the composition gives the same ``Q`` and ``R``, and the gradient of
    the smooth branch, torch's."""
    a = np.triu(_rng(3).standard_normal((4, 4))) + np.diag([2.0, -2.0, 2.0, -2.0])
    singular = np.array([[0.0, 1.0, 2.0], [0.0, 3.0, 1.0], [0.0, 1.0, 1.0]])
    for x in (a, singular, np.zeros((2, 3))):
        for g, w in zip(_captured(lambda x: tuple(L.qr(x)), x), L.qr(staged.tensor(x))):
            np.testing.assert_allclose(g, _np(w), atol=1e-14)
    tall = _rng(3).standard_normal((2, 5, 3))  # torch differentiates neither of these two
    for mode in ("complete", "r"):
        got = _captured(lambda x: tuple(L.qr(x, mode)), tall)
        for g, w in zip(got, torch.linalg.qr(torch.tensor(tall), mode)):
            if w.numel():
                np.testing.assert_allclose(g, _np(w), atol=1e-14)
    got = _captured(lambda x: staged.autograd.grad(L.qr(x).Q.sum(), x), a, grad=True)[0]
    at = torch.tensor(a, requires_grad=True)
    torch.linalg.qr(at).Q.sum().backward()
    np.testing.assert_allclose(got, _np(at.grad), atol=1e-13)


def test_eigh_reads_one_triangle_and_its_gradient_is_torchs():
    rng = _rng(4)
    a = _gapped(rng, (4, 4)) + np.triu(rng.standard_normal((4, 4)), 1)  # not symmetric
    for uplo in ("L", "U"):
        got = _captured(lambda x: tuple(L.eigh(x, uplo)), a)
        want = torch.linalg.eigh(torch.tensor(a), uplo)
        np.testing.assert_allclose(got[0], _np(want[0]), atol=1e-13)
        np.testing.assert_allclose(got[1] ** 2, _np(want[1]) ** 2, atol=1e-12)
        got = _captured(
            lambda x: staged.autograd.grad(L.eigvalsh(x, uplo).pow(3).sum(), x), a, grad=True
        )[0]
        at = torch.tensor(a, requires_grad=True)
        torch.linalg.eigvalsh(at, uplo).pow(3).sum().backward()
        np.testing.assert_allclose(got, _np(at.grad), atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [2, 5, 8, 16])
def test_the_fixed_sweeps_converge_on_hard_spectra(dtype, n):
    """The sweeps ``_sweeps`` counts reach LAPACK's accuracy on clustered eigenvalues
    (relative gaps 1e-6, a multiple eigenvalue to float32), graded matrices (entries from
    1 to 1e-12) and singular values from 1 to 1e-4: eigenvalues within ``n eps |A|``,
    ``V`` orthogonal and ``V diag(w) V^T == A`` within ``n eps |A|``, singular values
    within ``n eps cond(A)`` relative to each."""
    rng = _rng(5)
    eps, tol = np.finfo(dtype).eps, 4 * n * np.finfo(dtype).eps
    clustered = _spectrum(rng, (8, n, n), rng.choice([1.0, 1 + 1e-6, 2.0, -3.0], (8, n)))
    scale = np.logspace(0, -6, n)
    graded = _gapped(rng, (8, n, n)) * scale[:, None] * scale
    for a in (clustered, graded):
        w, V = (_np(x).astype(np.float64) for x in jacobi_eigh(staged.tensor(a.astype(dtype))))
        norm = np.abs(np.linalg.eigvalsh(a)).max(-1)[..., None]
        np.testing.assert_array_less(np.abs(w - np.linalg.eigvalsh(a)) / norm, tol)
        rebuilt = (V * w[..., None, :]) @ np.swapaxes(V, -1, -2)
        np.testing.assert_array_less(np.abs(rebuilt - a).max(-1) / norm, tol)
        np.testing.assert_array_less(np.abs(np.swapaxes(V, -1, -2) @ V - np.eye(n)), tol)
    left, right = np.linalg.qr(rng.standard_normal((2, 8, n, n)))[0]
    a = (left * np.logspace(0, -4, n)) @ right
    S = _np(jacobi_svd(staged.tensor(a.astype(dtype)), False)[1])
    want = np.linalg.svd(a.astype(dtype).astype(np.float64), compute_uv=False)
    # within n eps cond(A) relative to each (eigh(A^T A) would be eps cond(A)^2: 1e8 eps)
    np.testing.assert_array_less(np.abs(S - want) / want, n * eps * 1e4)


@pytest.fixture(scope="module")
def compiled_step():
    """One compiled float32 module (llvm-cpu) of every factorization and its gradient."""
    names = ["qr", "qr_complete", "eigh", "svd"]

    def step(a, s):
        outs = []
        for name in names:
            outs += _invariant(name)(staged, s if name == "eigh" else a)
        loss = sum((o * o).sum() for o in outs)
        return [o.detach() for o in outs] + list(staged.autograd.grad(loss, (a, s)))

    return step, staged.compile(step)


def test_a_compiled_step_equals_eager_within_float32_rounding(compiled_step):
    step, compiled = compiled_step
    rng = _rng(6)
    a = staged.tensor((rng.standard_normal((2, 4, 4)) + 2 * np.eye(4)).astype("float32"))
    s = staged.tensor(_gapped(rng, (2, 4, 4)).astype("float32"))
    want = step(a.requires_grad_(), s.requires_grad_())
    got = compiled(a, s)
    assert len(got) == len(want)
    for g, w in zip(got, want):  # |A| and cond(A) of a few units, gaps >= 0.5: ~1e3 ulp
        np.testing.assert_allclose(_np(g), _np(w), rtol=2e-4, atol=2e-4)


def test_the_factorizations_export_to_onnx(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    rng = _rng(7)
    a = staged.tensor(rng.standard_normal((5, 3)).astype("float32"))
    s = staged.tensor(_gapped(rng, (3, 3)).astype("float32"))

    def f(a, s):
        Q, R = L.qr(a)
        return Q.sum(-1) + R.sum() + L.svdvals(a).sum() + L.eigvalsh(s).sum()

    staged.onnx.export(f, (a, s), tmp_path / "f.onnx", with_gradients=False)
    session = ort.InferenceSession(str(tmp_path / "f.onnx"))
    feeds = {i.name: _np(t) for i, t in zip(session.get_inputs(), (a, s))}
    np.testing.assert_allclose(session.run(None, feeds)[0], _np(f(a, s)), rtol=1e-4, atol=1e-4)


def test_lstsq_residuals_that_depend_on_the_rank_say_so_under_capture():
    a = staged.tensor(_rng(8).standard_normal((5, 3)))
    with pytest.raises(NotImplementedError, match="driver='gelsd' gives residuals only where"):
        staged.capture(lambda x: L.lstsq(x, x, driver="gelsd").residuals, a)
    got = _captured(lambda x: L.lstsq(x, x, driver="gels").residuals, _np(a))[0]
    np.testing.assert_allclose(got, _np(L.lstsq(a, a, driver="gels").residuals), atol=1e-12)


def test_rank_and_torchs_top_level_forms_capture_as_eager():
    rng = _rng(9)
    a = rng.standard_normal((2, 5, 3)) @ rng.standard_normal((2, 3, 4))  # rank 3
    s = _spectrum(rng, (2, 4, 4), np.array([0.0, 1.0, -2.0, 3.0]))  # rank 3

    def fn(a, s):
        return (
            L.matrix_rank(a),
            L.matrix_rank(s, hermitian=True),
            staged.svd(a).V.abs(),
            staged.pinverse(a),
        )

    for g, w in zip(_captured(fn, a, s), fn(staged.tensor(a), staged.tensor(s))):
        np.testing.assert_allclose(g, _np(w), atol=1e-12)
    np.testing.assert_array_equal(_captured(fn, a, s)[0], [3, 3])


@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (1, 3), (2, 0, 0), (3, 0)])
def test_small_and_empty_matrices_capture_as_eager(shape):
    a = _rng(10).standard_normal(shape)
    k = min(shape[-2:])

    def fn(x):
        U, S, Vh = L.svd(x)  # signs aside
        return [*L.qr(x), U.abs(), S, Vh.abs(), L.pinv(x), L.eigvalsh(x[..., :k, :k])]

    for g, w in zip(_captured(fn, a), fn(staged.tensor(a))):
        np.testing.assert_allclose(g, _np(w), atol=1e-14)


def test_a_zero_singular_value_sorts_last():
    a = _rng(11).standard_normal((4, 3)) * [1.0, 0.0, 1.0]  # a zero column
    got = _captured(lambda x: tuple(L.svd(x, full_matrices=False)), a)
    np.testing.assert_allclose(got[1], _np(L.svdvals(staged.tensor(a))), atol=1e-14)
    np.testing.assert_allclose((got[0] * got[1]) @ got[2], a, atol=1e-14)
