"""Complex matrices in the LAPACK factorizations (``svd``, ``svdvals``, the nuclear and
2-norms, ``eig``/``eigvals``, ``pinv``/``pinverse``, ``inv_ex`` and ``cond``): torch's
values and gradients (torch's conjugate-Wirtinger convention), its phase errors; and what
``eig`` and the complex ones do under ``staged.compile``/capture (they have no
composition: a clear error naming the op)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import staged
from tests.checks import raises_like_torch, to_numpy

SHAPES = [(3, 3), (4, 2), (2, 4), (2, 3, 3)]
DTYPES = [np.complex64, np.complex128]


def _complex(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _value_and_grad(lib, a, loss):
    x = lib.tensor(a, requires_grad=True)
    out = loss(lib, x)
    (g,) = lib.autograd.grad(out, x)
    return to_numpy(out), to_numpy(g), g.dtype


def _close(lib_loss, a):
    tol = 2e-4 if a.dtype == np.complex64 else 1e-9
    want, gwant, _ = _value_and_grad(torch, a, lib_loss)
    got, ggot, gdtype = _value_and_grad(staged, a, lib_loss)
    assert gdtype.is_complex and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(ggot, gwant, rtol=tol, atol=tol)


SVD_LOSSES = {
    "svdvals": lambda lib, x: (lib.linalg.svdvals(x) ** 2 * lib.linalg.svdvals(x)).sum(),
    "matrix_norm_nuc": lambda lib, x: lib.linalg.matrix_norm(x, "nuc").sum(),
    "matrix_norm_2": lambda lib, x: (
        lib.linalg.matrix_norm(x, 2) + lib.linalg.matrix_norm(x, -2, keepdim=True).sum()
    ).sum(),
    "linalg_norm_nuc": lambda lib, x: lib.linalg.norm(x, "nuc", dim=(-2, -1)).sum(),
    # phase-invariant uses of the singular vectors: torch's full svd_backward
    "svd_vectors": lambda lib, x: (
        lambda U, S, Vh: (
            (U.abs() ** 2 * S.unsqueeze(-2)).sum()
            + ((U * S.unsqueeze(-2).to(U.dtype)) @ Vh).abs().sum()
            + (U @ Vh).real.sum()
        )
    )(*lib.linalg.svd(x, full_matrices=False)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", list(SVD_LOSSES))
def test_complex_svd_values_and_gradients_are_torchs(name, shape, dtype):
    _close(SVD_LOSSES[name], _complex(shape, dtype))


def test_torch_norm_nuc_of_a_complex_matrix():
    a = _complex((4, 3), np.complex128)
    _close(lambda lib, x: lib.norm(x, p="nuc"), a)
    _close(lambda lib, x: lib.norm(x, p="nuc", dim=(0, 1), keepdim=True).sum(), a)


def test_complex_singular_values_are_real_of_the_input_precision():
    for dtype, real in [(np.complex64, staged.float32), (np.complex128, staged.float64)]:
        a = _complex((2, 3, 4), dtype)
        S = staged.linalg.svdvals(staged.tensor(a))
        assert S.dtype is real
        np.testing.assert_allclose(to_numpy(S), np.linalg.svd(a, compute_uv=False), rtol=1e-5)
        U, S2, Vh = staged.linalg.svd(staged.tensor(a))
        assert S2.dtype is real and U.dtype.is_complex and tuple(U.shape) == (2, 3, 3)
        rebuilt = to_numpy(U[..., :3]) * to_numpy(S2)[..., None, :] @ to_numpy(Vh[..., :3, :])
        np.testing.assert_allclose(rebuilt, a, rtol=1e-4, atol=1e-4)


def test_a_loss_on_the_singular_vectors_phases_raises_torchs_error():
    a = _complex((3, 3), np.complex128)

    def fn(lib):
        x = lib.tensor(a, requires_grad=True)
        lib.autograd.grad(lib.linalg.svd(x)[0].real.sum(), x)

    raises_like_torch(fn, "svd_backward: The singular vectors in the complex case")


PINV_LOSSES = {
    "pinv": lambda lib, x: (lib.linalg.pinv(x).abs() ** 2).sum() + lib.linalg.pinv(x).real.sum(),
    # a singular value below rtol * largest counts as 0
    "pinv_rtol": lambda lib, x: (lib.linalg.pinv(x, rtol=0.4) * (1 + 2j)).real.sum(),
    "pinverse": lambda lib, x: (lib.pinverse(x) @ x).imag.sum() + lib.pinverse(x).abs().sum(),
    # Hermitian: LAPACK's eigh of the lower triangle
    "pinv_hermitian": lambda lib, x: (
        lib.linalg.pinv(x @ x.mH - 1.5, hermitian=True) * (2 - 1j)
    ).real.sum(),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", list(PINV_LOSSES))
def test_complex_pinv_values_and_gradients_are_torchs(name, shape, dtype):
    _close(PINV_LOSSES[name], _complex(shape, dtype))


def test_complex_pinv_takes_tolerance_tensors_over_the_batch():
    a = _complex((2, 3, 4), np.complex128, seed=2)
    got, want = (
        lib.linalg.pinv(lib.tensor(a), atol=lib.tensor([0.1, 1.5]), rtol=lib.tensor(0.2))
        for lib in (staged, torch)
    )
    assert got.dtype is staged.complex128
    np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=1e-12, atol=1e-12)


ORDS = ["fro", "nuc", 1, -1, math.inf, -math.inf]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("p", ORDS, ids=str)
def test_complex_cond_is_torchs(p, dtype):
    """Values of complex64 and complex128 matrices; the gradient is the finite differences'
    (torch's backward raises for all but 'nuc': it writes into ``inv_ex``'s output, saved
    for its gradient, in place), and torch's for 'nuc'."""
    a = _complex((2, 3, 3), dtype)
    got, want = (lib.linalg.cond(lib.tensor(a), p) for lib in (staged, torch))
    assert got.dtype.name == str(want.dtype)[6:]
    tol = 1e-5 if dtype == np.complex64 else 1e-12
    np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=tol)
    x = staged.tensor(a.astype(np.complex128), requires_grad=True)
    assert staged.autograd.gradcheck(lambda t: staged.linalg.cond(t, p), (x,))
    if p == "nuc":
        _close(lambda lib, x: lib.linalg.cond(x, p).sum(), a)


def test_complex_inv_ex_and_cond_of_singular_matrices_are_torchs():
    """inv_ex's info (LU's first zero pivot: a zero column's) and cond's inf, per matrix
    of a batch (torch's 'nuc' is ``sum(S) * sum(1 / S)``: NaN for a zero matrix, and where
    the smallest singular value is round-off, about 1 / eps); the invertible ones'
    inverses and gradients."""
    a = _complex((5, 3, 3), np.complex128)
    for i in range(3):
        a[i + 1, :, i] = 0
    a[4] = 0
    for lib in (staged, torch):
        inverse, info = lib.linalg.inv_ex(lib.tensor(a))
        assert info.dtype is lib.int32
        if lib is staged:
            got = to_numpy(inverse[0]), info.tolist()
    want = to_numpy(inverse[0]), info.tolist()
    assert got[1] == want[1] == [0, 1, 2, 3, 1]
    for lib in (staged, torch):  # staged.linalg.LinAlgError, torch's: RuntimeErrors
        with pytest.raises(RuntimeError, match=r"inv_ex: \(Batch element 1\): The diagonal elem"):
            lib.linalg.inv_ex(lib.tensor(a), check_errors=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    for p in ORDS:
        got, want = (to_numpy(lib.linalg.cond(lib.tensor(a), p)) for lib in (staged, torch))
        if p == "nuc":
            assert np.isnan(got[4]) and np.isnan(want[4])
            assert (got[1:4] > 1e14).all() and (want[1:4] > 1e14).all()
            got, want = got[:1], want[:1]
        else:
            assert np.isinf(got[1:]).all()
        np.testing.assert_allclose(got, want, rtol=1e-12)
    _close(lambda lib, x: lib.linalg.inv_ex(x).inverse.abs().sum(), a[:1])


EIG_LOSSES = {
    # symmetric in the eigenvalues and independent of the eigenvectors' phases
    "eigvals": lambda lib, x: (
        (lib.linalg.eigvals(x) ** 2).sum().real + lib.linalg.eigvals(x).abs().sum()
    ),
    "eig": lambda lib, x: (
        lambda L, V: (V.abs() ** 2 * L.real.unsqueeze(-2)).sum() + L.imag.pow(2).sum()
    )(*lib.linalg.eig(x)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)], ids=str)
@pytest.mark.parametrize("name", list(EIG_LOSSES))
def test_eig_of_complex_matrices_is_torchs(name, shape, dtype):
    _close(EIG_LOSSES[name], _complex(shape, dtype))


def test_eig_of_a_complex_matrix_decomposes_it():
    a = _complex((2, 4, 4), np.complex64)
    L, V = staged.linalg.eig(staged.tensor(a))
    assert L.dtype is staged.complex64 and V.dtype is staged.complex64
    L, V = to_numpy(L), to_numpy(V)
    np.testing.assert_allclose(a @ V, V * L[..., None, :], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(V, axis=-2), 1, rtol=1e-5)


def test_eig_gradient_of_a_real_matrix_stays_real():
    a = np.random.default_rng(1).standard_normal((3, 3))
    want, gwant, _ = _value_and_grad(torch, a, EIG_LOSSES["eig"])
    got, ggot, gdtype = _value_and_grad(staged, a, EIG_LOSSES["eig"])
    assert gdtype is staged.float64
    np.testing.assert_allclose(ggot, gwant, rtol=1e-9, atol=1e-9)


def test_a_loss_on_the_eigenvectors_phases_raises_torchs_error():
    a = _complex((3, 3), np.complex128)

    def fn(lib):
        x = lib.tensor(a, requires_grad=True)
        lib.autograd.grad(lib.linalg.eig(x)[1].real.sum(), x)

    raises_like_torch(fn, "linalg_eig_backward: The eigenvectors in the complex case")


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda lib: lib.linalg.eig(lib.ones(2, 2, dtype=lib.float16)), ['"linalg_eig_out_cpu"']),
        (lambda lib: lib.linalg.eigvals(lib.ones(2, 2, dtype=lib.float16)), ["'Half'"]),
        (lambda lib: lib.linalg.svdvals(lib.ones(2, 2, dtype=lib.int64)), ["linalg.svd: Exp"]),
        (lambda lib: lib.linalg.eig(lib.ones(2, 3, dtype=lib.complex64)), ["2 by 3 matrices"]),
        (
            lambda lib: lib.linalg.pinv(lib.ones(3, dtype=lib.complex64)),
            ["linalg.pinv(ComplexFloat{[3]}): expected a tensor with 2 or more dimensions"],
        ),
        (
            lambda lib: lib.linalg.pinv(lib.ones(2, 2, dtype=lib.complex64), atol=lib.tensor(1j)),
            ["atol tensor of complex type is not supported"],
        ),
        (
            lambda lib: lib.linalg.cond(lib.ones(2, 3, dtype=lib.complex128), "nuc"),
            ["linalg.cond(ord=nuc): A must be batches of square matrices"],
        ),
    ],
)
def test_errors_are_torchs(call, words):
    raises_like_torch(call, *words)


def _complex64(x):
    return x.to(staged.complex64)


# what has no composition: the op the error names
COMPILED = {
    "eig": (lambda x: staged.linalg.eig(x).eigenvalues, "linalg.eig (and eigvals)"),
    "eigvals": (staged.linalg.eigvals, "linalg.eig (and eigvals)"),
    "svdvals_complex": (lambda x: staged.linalg.svdvals(_complex64(x)), "linalg.svd of a complex"),
    "nuc_complex": (
        lambda x: staged.linalg.matrix_norm(_complex64(x), "nuc"),
        "linalg.svd of a complex",
    ),
    "pinv_complex": (lambda x: staged.linalg.pinv(_complex64(x)).abs(), "linalg.pinv of a complex"),
    "pinverse_complex": (
        lambda x: staged.pinverse(_complex64(x)).abs(),
        "linalg.pinv of a complex",
    ),
}


@pytest.mark.parametrize("name", list(COMPILED))
def test_what_has_no_composition_raises_naming_the_op_when_traced(name):
    """No wrong values: the trace stops at the op, before anything is compiled, and so does
    capture (vmap and forward AD bind the kernel: tests/test_complex_linalg_transforms.py)."""
    fn, op = COMPILED[name]
    a = staged.tensor(np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32))
    calls = {
        "compile": lambda: staged.compile(fn)(a),
        "capture": lambda: staged.capture(fn, a),
    }
    for where, call in calls.items():
        with pytest.raises(NotImplementedError, match="runs LAPACK eagerly only") as err:
            call()
        assert op in str(err.value) and "Call it eagerly" in str(err.value), where
    assert np.isfinite(to_numpy(fn(a))).all()  # eagerly it runs


def test_fallback_eager_runs_a_step_with_an_eager_only_op_eagerly(capsys):
    """``fallback="eager"`` catches the refusal: eager's values, and ``explain()`` says why."""
    a = staged.tensor(np.random.default_rng(1).standard_normal((3, 3)).astype(np.float32))
    step = staged.compile(COMPILED["eigvals"][0], fallback="eager")
    with pytest.warns(UserWarning):
        got = step(a)
    np.testing.assert_array_equal(to_numpy(got), to_numpy(staged.linalg.eigvals(a)))
    step.explain()
    assert "cannot be captured" in capsys.readouterr().out


SECOND_ORDER = {
    "svdvals": lambda L, x: L.linalg.svdvals(x),
    "svd_rebuilt": lambda L, x: (lambda U, S, Vh: (U * S.unsqueeze(-2).to(U.dtype)) @ Vh)(
        *L.linalg.svd(x, full_matrices=False)
    ),
    "svd_vectors": lambda L, x: (lambda U, S, Vh: (U.abs() ** 2 * S.unsqueeze(-2)).sum(-1))(
        *L.linalg.svd(x, full_matrices=False)
    ),
    "eigvals": lambda L, x: L.linalg.eigvals(x),
    "eig": lambda L, x: (lambda E, V: V.abs() ** 2 * E.real.unsqueeze(-2))(*L.linalg.eig(x)),
    "pinv": lambda L, x: L.linalg.pinv(x),
    "cond_nuc": lambda L, x: L.linalg.cond(x, "nuc"),
}


@pytest.mark.parametrize(
    "name, shape",
    [
        (n, s)
        for n in SECOND_ORDER
        for s in [(3, 3), (4, 3)]
        if s == (3, 3) or "svd" in n or n == "pinv"
    ],
)
def test_complex_gradients_of_gradients(name, shape):
    """Finite differences of the gradient (gradgradcheck), and torch's Hessian-vector
    product of a real loss."""
    a = _complex(shape, np.complex128, seed=3)
    fn = SECOND_ORDER[name]
    x = staged.tensor(a, requires_grad=True)
    assert staged.autograd.gradcheck(lambda t: fn(staged, t), (x,))
    assert staged.autograd.gradgradcheck(lambda t: fn(staged, t), (x,))
    v = _complex(shape, np.complex128, seed=4)

    def hvp(L):
        t = L.tensor(a, requires_grad=True)
        (g,) = L.autograd.grad(fn(L, t).abs().pow(2).sum(), t, create_graph=True)
        (h,) = L.autograd.grad((g * L.tensor(v).conj()).real.sum(), t)
        return to_numpy(h)

    np.testing.assert_allclose(hvp(staged), hvp(torch), rtol=1e-7, atol=1e-9)


# --- cdist: torch's matrix-product path for p = 2 ---------------------------------------------
@pytest.mark.parametrize(
    "rows, mode",
    [
        ((30, 40), None),  # past 25 rows: the product
        ((30, 40), "use_mm_for_euclid_dist_if_necessary"),
        ((5, 6), "use_mm_for_euclid_dist"),
        ((30, 40), "donot_use_mm_for_euclid_dist"),
        ((5, 6), None),  # the differences' norm
    ],
)
def test_cdist_takes_torchs_path_and_gives_its_values_and_gradients(rows, mode):
    rng = np.random.default_rng(1)
    # small whole numbers: both paths' sums are exact, so their distances are the roots of
    # the same numbers (torch's float32 sqrt is 1 ulp off at some), and a point in both sets
    # is exactly 0 apart (no NaN gradient there)
    a = rng.integers(-3, 4, (2, rows[0], 7)).astype(np.float32)
    b = rng.integers(-3, 4, (rows[1], 7)).astype(np.float32)
    b[0] = a[0, 0]
    out = []
    for ns in (staged, torch):
        x, y = ns.tensor(a, requires_grad=True), ns.tensor(b, requires_grad=True)
        kw = {} if mode is None else dict(compute_mode=mode)
        d = ns.cdist(x, y, **kw)
        (d * ns.arange(float(d.numel())).reshape(d.shape)).sum().backward()
        out.append([d.detach().numpy(), x.grad.numpy(), y.grad.numpy()])
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1.2e-7, atol=0)
    assert out[0][0][0, 0, 0] == 0 and np.isfinite(out[0][1]).all()
    for ours, theirs in zip(out[0][1:], out[1][1:]):  # sums of ratios, in other orders
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5 * np.abs(theirs).max())
    with pytest.raises(ValueError, match="not a valid value for compute_mode"):
        staged.cdist(staged.ones(2, 3), staged.ones(2, 3), compute_mode="fast")


def test_cdist_cancels_as_torchs_product_does_past_25_rows():
    # 1000.0625 ** 2 rounds to 1000125 in float32: the product's |x|^2 + |y|^2 - 2 x.y is 0
    for ns in (staged, torch):
        x, y = ns.tensor([[1000.0, 0.0]] * 30), ns.tensor([[1000.0625, 0.0]])
        assert ns.cdist(x, y)[0, 0].item() == 0.0
        assert ns.cdist(x[:25], y)[0, 0].item() == 0.0625  # 25 rows: the differences
        assert ns.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist")[0, 0].item() == 0.0625


@pytest.mark.parametrize("p", [float("inf"), 1.0, 3.0])
def test_cdist_gradient_at_tied_coordinates_is_torchs(p):
    """p = inf: each coordinate tied for the largest difference gets the whole gradient, as
    torch's _cdist_backward (split among them before, the infinity norm's way)."""
    rng = np.random.default_rng(0)
    a = np.round(rng.standard_normal((2, 4, 3)))
    b = np.round(rng.standard_normal((2, 5, 3)))
    out = []
    for ns in (staged, torch):
        x, y = ns.tensor(a, requires_grad=True), ns.tensor(b, requires_grad=True)
        ns.cdist(x, y, p=p).sum().backward()
        out.append([x.grad.numpy(), y.grad.numpy()])
    for ours, theirs in zip(*out):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
