"""staged.linalg.ldl_factor, ldl_factor_ex and ldl_solve against torch 2.13 (LAPACK's
?sytrf/?hetrf and ?sytrs/?hetrs, Bunch-Kaufman pivoting, uplo='L'): the pivots and info
exactly, LD within round-off (``n * eps * cond(A)`` relative to its largest entry; both run
the same pivot sequence in the same precision), the solutions against torch's and NumPy's
``solve``; real, complex symmetric and complex Hermitian matrices, batched, with 2x2
pivots and singular D; torch's errors for bad arguments; no gradient, as in torch; and
the eager-only error under capture, compile, forward AD and vmap."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged.autodiff import FUSED
from tests.checks import raises_like_torch

L, T = staged.linalg, torch.linalg
# the kernels (Fused, no decomposition), checked here (tests/autodiff/test_fused.py)
KERNELS = {"linalg_ldl_factor_ex", "linalg_ldl_solve"}
DTYPES = ("float32", "float64", "complex64", "complex128")
KINDS = ("random", "zero", "small", "singular")


def _full(a, hermitian):
    """The matrices LAPACK reads: the lower triangle of ``a``, mirrored (a Hermitian
    one's diagonal taken real)."""
    herm = hermitian and np.iscomplexobj(a)
    low = np.tril(a, -1)
    d = np.diagonal(a, 0, -2, -1)
    diag = d.real if herm else d
    return (
        low + (low.conj() if herm else low).swapaxes(-1, -2) + diag[..., None] * np.eye(a.shape[-1])
    )


def _matrices(rng, shape, dtype, kind):
    """Symmetric (Hermitian) indefinite matrices with random data in the upper triangle
    (never read) and, for a Hermitian one, on the diagonal's imaginary part (ignored).
    ``kind``: "random"; "zero" (zero diagonal: 2x2 pivots); "small" (a tiny diagonal, so
    pivots swap); "singular" (a zero row and column: info > 0)."""
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    n = shape[-1]
    if kind == "zero":
        a[..., range(n), range(n)] = 0
    if kind == "small":
        a[..., range(n), range(n)] *= 1e-3
    if kind == "singular":
        a[..., n // 2, :] = 0
        a[..., :, n // 2] = 0
    return np.tril(a) + np.triu(rng.standard_normal(shape), 1)


def _tolerance(a, hermitian, dtype):
    """``10 n eps cond`` of the matrices LAPACK factors (the largest over the batch), less
    their zero rows and columns (a singular D's zero blocks, which are exact)."""
    n = a.shape[-1]
    full = _full(a.astype(np.complex128), hermitian)
    used = np.flatnonzero((full != 0).any(-1).reshape(-1, n).any(0))
    cond = np.linalg.cond(full[..., used[:, None], used]).max() if used.size else 1.0
    return 10 * n * np.finfo(dtype).eps * cond


def _factor(lib, a, hermitian):
    return lib.linalg.ldl_factor_ex(lib.tensor(a), hermitian=hermitian)


# --- the factorization ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hermitian", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_pivots_info_and_LD_are_torchs(dtype, hermitian, kind):
    rng = np.random.default_rng([DTYPES.index(dtype), hermitian, KINDS.index(kind)])
    for n in range(1, 9):
        a = _matrices(rng, (3, n, n), dtype, kind).astype(dtype)
        ours, theirs = _factor(staged, a, hermitian), _factor(torch, a, hermitian)
        assert ours.pivots.dtype is staged.int32 and ours.info.dtype is staged.int32
        np.testing.assert_array_equal(ours.pivots.numpy(), theirs.pivots.numpy())
        np.testing.assert_array_equal(ours.info.numpy(), theirs.info.numpy())
        assert ours.LD.dtype is getattr(staged, dtype) and ours.LD.shape == theirs.LD.shape
        want = theirs.LD.numpy()
        if kind == "singular":
            assert (theirs.info.numpy() > 0).all()
        scale = np.abs(want).max()
        np.testing.assert_allclose(
            ours.LD.numpy(), want, rtol=0, atol=_tolerance(a, hermitian, dtype) * scale
        )


def test_2x2_pivots_and_swaps_are_lapacks():
    """A zero diagonal takes 2x2 blocks (negative, repeated pivots); a small diagonal
    entry swaps a larger one in (a positive pivot elsewhere than the row)."""
    cases = [
        np.array([[0.0, 1], [1, 0]]),
        np.array([[0.0, 1, 2, 3], [1, 0, 4, 5], [2, 4, 0, 6], [3, 5, 6, 0]]),
        np.array([[1e-3, 2, 1], [2, 5, 1], [1, 1, 3]]),
        np.array([[1.0, 2, 3], [2, 4, 5], [3, 5, 6]]),
    ]
    seen = set()
    for a in cases:
        ours, theirs = L.ldl_factor(staged.tensor(a)), T.ldl_factor(torch.tensor(a))
        np.testing.assert_array_equal(ours.pivots.numpy(), theirs.pivots.numpy())
        np.testing.assert_allclose(ours.LD.numpy(), theirs.LD.numpy(), rtol=1e-13, atol=1e-13)
        piv = ours.pivots.numpy()
        seen |= {
            "2x2" if (piv < 0).any() else "",
            "swap" if (piv > 0).any() and (piv != np.arange(1, len(piv) + 1)).any() else "",
        }
    assert {"2x2", "swap"} <= seen


def test_a_larger_batch_and_more_rows_match_torch():
    rng = np.random.default_rng(3)
    a = _matrices(rng, (2, 5, 24, 24), "float64", "small")
    ours, theirs = _factor(staged, a, False), _factor(torch, a, False)
    np.testing.assert_array_equal(ours.pivots.numpy(), theirs.pivots.numpy())
    np.testing.assert_allclose(ours.LD.numpy(), theirs.LD.numpy(), rtol=0, atol=1e-9)


def test_singular_D_raises_in_ldl_factor_and_check_errors_only():
    """info is 1 + the index of the first zero column; ldl_factor and check_errors=True
    raise (torch 2.13 with an internal "Unknown error code"), ldl_factor_ex does not."""
    a = np.diag([2.0, 0.0, 3.0])
    out = L.ldl_factor_ex(staged.tensor(a))
    assert out.info.item() == T.ldl_factor_ex(torch.tensor(a)).info.item() == 2
    raises_like_torch(lambda lib: lib.linalg.ldl_factor(lib.tensor(a)), "torch.linalg.ldl_factor")
    raises_like_torch(
        lambda lib: lib.linalg.ldl_factor_ex(
            lib.tensor(np.stack([np.eye(3), a])), check_errors=True
        ),
        "torch.linalg.ldl_factor_ex",
    )
    with pytest.raises(
        staged.linalg.LinAlgError, match=r"\(Batch element 1\).*diagonal element 2 is zero"
    ):
        L.ldl_factor(staged.tensor(np.stack([np.eye(3), a])))


def test_empty_and_real_hermitian_are_torchs():
    for shape in [(0, 0), (2, 0, 0), (0, 3, 3)]:
        ours, theirs = L.ldl_factor_ex(staged.zeros(*shape)), T.ldl_factor_ex(torch.zeros(*shape))
        for o, t in zip(ours, theirs):
            assert tuple(o.shape) == tuple(t.shape)
    a = _matrices(np.random.default_rng(4), (4, 4), "float64", "zero")
    ours, theirs = _factor(staged, a, True), _factor(torch, a, True)  # real: symmetric
    np.testing.assert_array_equal(ours.pivots.numpy(), theirs.pivots.numpy())
    np.testing.assert_allclose(ours.LD.numpy(), theirs.LD.numpy(), rtol=1e-12, atol=1e-12)


# --- the solve ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl_solve_is_torchs_and_solves(dtype, hermitian):
    rng = np.random.default_rng(5)
    for n in range(1, 9):
        for kind in ("random", "small", "zero")[: 2 + (n > 1)]:  # a 1x1 zero is singular
            a = _matrices(rng, (2, n, n), dtype, kind).astype(dtype)
            b = rng.standard_normal((2, n, 3)).astype(dtype)
            LD, piv, _ = _factor(staged, a, hermitian)
            got = L.ldl_solve(LD, piv, staged.tensor(b), hermitian=hermitian).numpy()
            LDt, pivt, _ = _factor(torch, a, hermitian)
            want = T.ldl_solve(LDt, pivt, torch.tensor(b), hermitian=hermitian).numpy()
            tol = _tolerance(a, hermitian, dtype)
            scale = np.abs(want).max()
            np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale)
            exact = np.linalg.solve(_full(a.astype(np.complex128), hermitian), b)
            np.testing.assert_allclose(got, exact, rtol=0, atol=tol * scale)


def test_ldl_solve_broadcasts_batches():
    rng = np.random.default_rng(6)
    a = _matrices(rng, (2, 4, 4), "float64", "zero")
    LD, piv = L.ldl_factor(staged.tensor(a))
    LDt, pivt = T.ldl_factor(torch.tensor(a))
    b = rng.standard_normal((1, 4, 2))
    got = L.ldl_solve(LD, piv, staged.tensor(b))  # B's batch broadcasts to LD's
    want = T.ldl_solve(LDt, pivt, torch.tensor(b))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
    b = rng.standard_normal((3, 2, 4, 2))  # and LD's to B's (torch 2.13 crashes there)
    got = L.ldl_solve(LD, piv, staged.tensor(b)).numpy()
    np.testing.assert_allclose(got, np.linalg.solve(_full(a, False), b), rtol=1e-9, atol=1e-10)
    got = L.ldl_solve(LD[0], piv[0], staged.tensor(b)).numpy()  # unbatched, as torch
    want = T.ldl_solve(LDt[0], pivt[0], torch.tensor(b)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_ldl_solve_takes_any_integer_pivots_and_singular_D_gives_inf_or_nan():
    a = _matrices(np.random.default_rng(7), (3, 3), "float64", "zero")
    LD, piv = L.ldl_factor(staged.tensor(a))
    b = staged.ones(3, 1, dtype=staged.float64)
    want = L.ldl_solve(LD, piv, b).numpy()
    for d in (staged.int64, staged.int16, staged.int8):
        np.testing.assert_array_equal(L.ldl_solve(LD, piv.to(d), b).numpy(), want)
    LD0, piv0, _ = L.ldl_factor_ex(staged.tensor(np.diag([2.0, 0.0, 3.0])))
    assert not np.isfinite(L.ldl_solve(LD0, piv0, b).numpy()).all()


# --- errors ---------------------------------------------------------------------------------
def _solve_args(lib, LD=None, pivots=None, B=None):
    a = np.array([[0.0, 1, 2], [1, 0, 3], [2, 3, 1]])
    LD0, piv0 = lib.linalg.ldl_factor(lib.tensor(a))
    return (
        LD0 if LD is None else LD(lib, LD0),
        piv0 if pivots is None else pivots(lib, piv0),
        lib.ones(3, 2, dtype=lib.float64) if B is None else B(lib),
    )


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda lib: lib.ones(3, 4), "A must be batches of square matrices, but they are 3 by 4"),
        (lambda lib: lib.ones(3), "The input tensor A must have at least 2 dimensions"),
        (lambda lib: lib.ones(3, 3, dtype=lib.int64), "Expected a floating point or complex"),
        (lambda lib: lib.ones(3, 3, dtype=lib.bool), "Expected a floating point or complex"),
        (lambda lib: lib.ones(3, 3, dtype=lib.float16), "not implemented for 'Half'"),
    ],
)
def test_ldl_factor_errors_are_torchs(make, fragment):
    raises_like_torch(lambda lib: lib.linalg.ldl_factor(make(lib)), fragment)


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({"LD": lambda lib, LD: LD[:, :2]}, "A must be batches of square matrices"),
        ({"LD": lambda lib, LD: LD[0]}, "The input tensor A must have at least 2 dimensions"),
        ({"LD": lambda lib, LD: LD.to(lib.int32)}, "Expected a floating point or complex"),
        ({"B": lambda lib: lib.ones(3, 2)}, "Expected b and A to have the same dtype"),
        ({"B": lambda lib: lib.ones(4, 2, dtype=lib.float64)}, "Incompatible matrix sizes"),
        ({"B": lambda lib: lib.ones(3, dtype=lib.float64)}, "Dimension out of range"),
        ({"pivots": lambda lib, p: p[:2]}, "Expected LD.shape[:-1] and pivots.shape to be"),
        ({"pivots": lambda lib, p: p.double()}, "Expected pivots to be integers. Got Double"),
        ({"pivots": lambda lib, p: p.bool()}, "Expected pivots to be integers. Got Bool"),
        ({"pivots": lambda lib, p: p * 2}, "must all satisfy |pivot| <= LD.size(-2)"),
        ({"pivots": lambda lib, p: p * 0}, "must all satisfy |pivot| >= 1"),
        (
            {
                "LD": lambda lib, LD: LD.expand(2, 3, 3),
                "pivots": lambda lib, p: p.expand(2, 3),
                "B": lambda lib: lib.ones(3, 3, 2, dtype=lib.float64),
            },
            "The size of tensor a (3) must match the size of tensor b (2)",
        ),
    ],
)
def test_ldl_solve_errors_are_torchs(args, fragment):
    raises_like_torch(lambda lib: lib.linalg.ldl_solve(*_solve_args(lib, **args)), fragment)


def test_pivots_that_are_not_lapacks_blocks_raise():
    """A negative pivot not repeated in the next entry is no block structure LAPACK makes
    (torch reads past the matrix there): it raises, naming the fix."""
    LD, piv, B = _solve_args(staged)
    with pytest.raises(RuntimeError, match="2x2 block .* Did you properly pass"):
        L.ldl_solve(LD, staged.tensor([1, 2, -3], dtype=staged.int32), B)
    with pytest.raises(RuntimeError, match="2x2 block"):
        L.ldl_solve(LD, staged.tensor([-3, -2, 3], dtype=staged.int32), B)


# --- no gradient, eager only ----------------------------------------------------------------
def test_a_gradient_request_raises_torchs_error():
    a = np.array([[0.0, 1, 2], [1, 0, 3], [2, 3, 1]])
    for lib in (staged, torch):
        A = lib.tensor(a, requires_grad=True)
        LD, piv, info = lib.linalg.ldl_factor_ex(A)
        assert LD.requires_grad and not piv.requires_grad and not info.requires_grad
        with pytest.raises(RuntimeError, match="derivative for aten::linalg_ldl_factor_ex is not"):
            LD.sum().backward()
        B = lib.ones(3, 2, dtype=lib.float64, requires_grad=True)
        for LDi, Bi in ((LD.detach(), B), (LD.detach().requires_grad_(), B.detach())):
            X = lib.linalg.ldl_solve(LDi, piv, Bi)
            assert X.grad_fn.name() == "torch::autograd::NotImplemented"
            with pytest.raises(RuntimeError, match="derivative for aten::linalg_ldl_solve is not"):
                X.sum().backward()


_A = staged.tensor(np.array([[0.0, 1, 2], [1, 0, 3], [2, 3, 1]]))
_LD, _PIVOTS = L.ldl_factor(_A)


@pytest.mark.parametrize(
    "fn, name",
    [
        (lambda a: L.ldl_factor(a).LD, "ldl_factor"),
        (lambda a: L.ldl_factor_ex(a).pivots, "ldl_factor"),
        (lambda b: L.ldl_solve(_LD, _PIVOTS, b), "ldl_solve"),  # the factors from outside
    ],
)
def test_capture_compile_forward_ad_and_vmap_say_eager_only(fn, name):
    a = _A
    message = rf"linalg\.{name}.*runs LAPACK eagerly only"
    with pytest.raises(NotImplementedError, match=message + ".*staged.compile"):
        staged.capture(fn, a)
    with pytest.raises(NotImplementedError, match=message):
        staged.compile(fn)(a)
    fwd = staged.autograd.forward_ad
    with fwd.dual_level():
        with pytest.raises(NotImplementedError, match=message + ".*forward-mode AD"):
            fn(fwd.make_dual(a, staged.ones_like(a)))
    with pytest.raises(NotImplementedError, match=message + ".*vmap"):
        staged.func.vmap(fn)(a.expand(2, 3, 3))


def test_names_are_torchs():
    assert KERNELS <= set(FUSED)
    assert {"ldl_factor", "ldl_factor_ex", "ldl_solve"} <= set(L.__all__)
    assert not hasattr(torch, "ldl_factor") and not hasattr(staged, "ldl_factor")
    assert not hasattr(torch.Tensor, "ldl_factor") and not hasattr(staged.Tensor, "ldl_factor")
    for fn, fields in (("ldl_factor", "LD pivots"), ("ldl_factor_ex", "LD pivots info")):
        ours, theirs = getattr(L, fn)(staged.eye(2)), getattr(T, fn)(torch.eye(2))
        assert len(ours) == len(theirs) == len(fields.split())
        for field in fields.split():
            assert tuple(getattr(ours, field).shape) == tuple(getattr(theirs, field).shape)
