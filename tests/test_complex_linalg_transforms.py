"""Complex ``solve``, ``inv``, ``det``, ``slogdet`` and the triangular, LU and Cholesky
solves, and the SVD, ``svdvals``, ``pinv``, ``eig``, ``eigvals`` and the SVD's ``cond``
and ``matrix_norm`` orders, under forward-mode AD (``func.jvp``, dual tensors,
``jacfwd``, ``hessian``) and ``vmap`` (also of ``jacrev`` and ``jvp``): torch.func's values
and tangents (its conjugate-Wirtinger convention), complex64 and complex128, with and
without batch dims of the operands; what torch refuses (complex jacrev/jacfwd, losses that
depend on the singular vectors' or eigenvectors' phases) raises as torch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged.autodiff.avals import EagerOnlyError
from tests.checks import assert_close, raises_like_torch

DTYPES = [np.complex64, np.complex128]
BATCHES = [(), (2,)]  # the operands' own batch dims


def _complex(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _operands(seed, batch, dtype):
    """``A`` (well conditioned: 4I plus unit noise, so results are O(1)) and ``B`` (3x2)."""
    rng = np.random.default_rng(seed)
    A = _complex(rng, (*batch, 3, 3), dtype) + 4 * np.eye(3, dtype=dtype)
    return A, _complex(rng, (*batch, 3, 2), dtype)


def _tol(dtype) -> float:
    # a few ulps of O(1) results times the condition number (< 10) and the size
    return 1e4 * np.finfo(dtype).eps


# each of (A, B) -> output(s), for torch and staged alike
OPS = {
    "solve": lambda L, A, B: L.linalg.solve(A, B),
    "solve_vector": lambda L, A, B: L.linalg.solve(A, B[..., 0]),
    "solve_left_false": lambda L, A, B: L.linalg.solve(A, B.mT, left=False),
    "inv": lambda L, A, B: L.linalg.inv(A),
    "inv_ex": lambda L, A, B: L.linalg.inv_ex(A).inverse,
    "solve_ex": lambda L, A, B: L.linalg.solve_ex(A, B).result,
    "det": lambda L, A, B: L.linalg.det(A),
    "slogdet": lambda L, A, B: tuple(L.linalg.slogdet(A)),
    "logdet": lambda L, A, B: L.logdet(A),
    "solve_triangular": lambda L, A, B: L.linalg.solve_triangular(A.triu(), B, upper=True),
    "lu_solve": lambda L, A, B: L.linalg.lu_solve(*L.linalg.lu_factor(A), B),
    "cholesky": lambda L, A, B: L.linalg.cholesky(A @ A.mH),
    "cholesky_solve": lambda L, A, B: L.cholesky_solve(B, L.linalg.cholesky(A @ A.mH)),
}


def _both(fn):
    """``fn(lib)`` for torch and staged, each output compared (values, shape, dtype)."""
    want, got = fn(torch), fn(staged)
    return want, got


def _assert_outputs(got, want, dtype):
    got, want = (x if isinstance(x, tuple) else (x,) for x in (got, want))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w, rtol=_tol(dtype), atol=_tol(dtype))


def _flat(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("batch", BATCHES, ids=["unbatched", "batched"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("name", list(OPS))
def test_jvp_is_torchs(name, dtype, batch):
    primals, tangents = _operands(0, batch, dtype), _operands(1, batch, dtype)

    def run(L):
        f = lambda A, B: OPS[name](L, A, B)  # noqa: E731
        out, tangent = L.func.jvp(f, tuple(map(L.tensor, primals)), tuple(map(L.tensor, tangents)))
        return (*_flat(out), *_flat(tangent))

    _assert_outputs(run(staged), run(torch), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("name", list(OPS))
def test_dual_tensors_are_torchs(name, dtype):
    primals, tangents = _operands(2, (2,), dtype), _operands(3, (2,), dtype)

    def run(L):
        fw = L.autograd.forward_ad
        with fw.dual_level():
            duals = [fw.make_dual(L.tensor(p), L.tensor(t)) for p, t in zip(primals, tangents)]
            out = _flat(OPS[name](L, *duals))
            return tuple(x for o in out for x in fw.unpack_dual(o)[:2])

    _assert_outputs(run(staged), run(torch), dtype)


def _of_real(L, fn, A0):
    """``fn`` (of ``A``) as a real function of ``x`` (2, *A0.shape), ``A = A0 + x[0] + i
    x[1]``, with the real and imaginary parts of its outputs stacked: torch.func's jacfwd
    and jacrev take real inputs and outputs only (and torch's vmap no ``imag`` of a conj
    view)."""

    def f(x):
        out = [o.resolve_conj() for o in _flat(fn(A0 + L.complex(x[0], x[1])))]
        parts = [p for o in out for p in ((o.real, o.imag) if o.is_complex() else (o,))]
        return L.cat([p.reshape(-1) for p in parts])

    return f


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("name", list(OPS))
def test_jacfwd_is_torchs(name, dtype):
    A0, B = _operands(4, (), dtype)
    x = np.random.default_rng(5).standard_normal((2, 3, 3)).astype(np.finfo(dtype).dtype)

    def run(L):
        f = _of_real(L, lambda A: OPS[name](L, A, L.tensor(B)), L.tensor(A0))
        return L.func.jacfwd(f)(L.tensor(x))

    _assert_outputs(run(staged), run(torch), dtype)


@pytest.mark.parametrize("in_dims", [0, (0, None), (None, 0)], ids=["both", "A", "B"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("name", list(OPS))
def test_vmap_is_torchs(name, dtype, in_dims):
    ops = _operands(6, (2,), dtype)
    dims = (in_dims, in_dims) if isinstance(in_dims, int) else in_dims
    ops = [o if d == 0 else o[0] for o, d in zip(ops, dims)]

    def run(L):
        f = lambda A, B: OPS[name](L, A, B)  # noqa: E731
        return L.func.vmap(f, in_dims=in_dims)(*map(L.tensor, ops))

    _assert_outputs(run(staged), run(torch), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("name", list(OPS))
def test_vmap_of_jacrev_and_of_jvp_is_torchs(name, dtype):
    A0, B = _operands(7, (), dtype)
    rdtype = np.finfo(dtype).dtype
    xs = np.random.default_rng(8).standard_normal((2, 2, 3, 3)).astype(rdtype)
    primals, tangents = _operands(9, (2,), dtype), _operands(10, (2,), dtype)

    def run(L):
        f = _of_real(L, lambda A: OPS[name](L, A, L.tensor(B)), L.tensor(A0))
        loss = lambda x: f(x).square().sum()  # noqa: E731
        per_example = L.func.vmap(L.func.jacrev(loss))(L.tensor(xs))
        f = lambda A, B: OPS[name](L, A, B)  # noqa: E731
        jvp = L.func.vmap(lambda p, q, t, u: L.func.jvp(f, (p, q), (t, u))[1])
        return (per_example, *_flat(jvp(*map(L.tensor, (*primals, *tangents)))))

    _assert_outputs(run(staged), run(torch), dtype)


def test_nested_vmap_binds_the_kernels_batched():
    """vmap over vmap of solve, det and slogdet, against torch (the LAPACK kernels' rules
    see a batch dim of an outer level)."""
    A, B = _operands(11, (2, 3), np.complex128)

    def run(L):
        f = lambda A, B: (L.linalg.solve(A, B), L.linalg.det(A), *L.linalg.slogdet(A))  # noqa: E731
        return L.func.vmap(L.func.vmap(f), in_dims=(1, 1))(L.tensor(A), L.tensor(B))

    _assert_outputs(run(staged), run(torch), np.complex128)


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
def test_det_and_slogdet_gradients_are_torchs(dtype):
    """The VJPs, eagerly: ``g conj(det) A^-H``, and the sign's phase term of slogdet."""
    (A, _), (G, _) = _operands(12, (2,), dtype), _operands(13, (2,), dtype)

    def run(L):
        a = L.tensor(A, requires_grad=True)
        sign, logabsdet = L.linalg.slogdet(a)
        w = L.tensor(G[..., 0, :2])
        loss = (L.linalg.det(a) * w[..., 0]).real + (sign * w[..., 1]).imag + logabsdet
        return L.autograd.grad(loss.sum(), a)[0]

    _assert_outputs(run(staged), run(torch), dtype)


@pytest.mark.parametrize("op", ["inv", "solve"])
def test_a_singular_matrix_in_the_batch_raises_a_linalg_error(op):
    """As torch's: a LinAlgError (a RuntimeError) saying the matrix is singular (torch's
    message also names the batch element, staged's under vmap does not)."""
    A, B = _operands(14, (2,), np.complex128)
    A[1] = 0
    for L in (torch, staged):
        f = L.linalg.inv if op == "inv" else lambda A: L.linalg.solve(A, L.tensor(B[0]))
        with pytest.raises(L.linalg.LinAlgError, match="input matrix is singular") as err:
            L.func.vmap(f)(L.tensor(A))
        assert isinstance(err.value, RuntimeError)


# --- the SVD, eig, pinv and what is built on them: no composition of complex matrices, so
# forward AD takes torch's JVP formulas and vmap binds LAPACK on the batch -----------------
FACTORIZATIONS = {  # A -> output(s); LAPACK's phases of U, Vh and the eigenvectors are torch's
    "svd": lambda L, A: tuple(L.linalg.svd(A, full_matrices=False)),
    "svd_full": lambda L, A: tuple(L.linalg.svd(A)),
    "svdvals": lambda L, A: L.linalg.svdvals(A),
    "pinv": lambda L, A: L.linalg.pinv(A),
    "pinv_hermitian": lambda L, A: L.linalg.pinv(A + A.mH, hermitian=True),
    "eig": lambda L, A: tuple(L.linalg.eig(A)),
    "eigvals": lambda L, A: L.linalg.eigvals(A),
    "cond": lambda L, A: L.linalg.cond(A),
    "cond_-2": lambda L, A: L.linalg.cond(A, -2),
    "cond_nuc": lambda L, A: L.linalg.cond(A, "nuc"),
    "norm_2": lambda L, A: L.linalg.matrix_norm(A, 2),
    "norm_-2": lambda L, A: L.linalg.matrix_norm(A, -2),
    "norm_nuc": lambda L, A: L.linalg.matrix_norm(A, "nuc"),
}
SQUARE_ONLY = {"eig", "eigvals", "cond_nuc", "pinv_hermitian"}
SHAPES = [(3, 3), (2, 3, 3), (4, 3), (2, 3, 4)]


def _matrix(seed, shape, dtype):
    return _complex(np.random.default_rng(seed), shape, dtype)


def _cases(shapes=SHAPES):
    return [
        pytest.param(name, shape, id=f"{name}-{'x'.join(map(str, shape))}")
        for name in FACTORIZATIONS
        for shape in shapes
        if shape[-1] == shape[-2] or name not in SQUARE_ONLY
    ]


def _ftol(dtype) -> float:
    # tangents of singular vectors and eigenvectors divide by gaps of O(1) random matrices
    return 1e5 * np.finfo(dtype).eps


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize(("name", "shape"), _cases())
def test_factorization_jvp_is_torchs(name, shape, dtype):
    A, T = _matrix(20, shape, dtype), _matrix(21, shape, dtype)

    def run(L):
        f = lambda A: FACTORIZATIONS[name](L, A)  # noqa: E731
        out, tangent = L.func.jvp(f, (L.tensor(A),), (L.tensor(T),))
        return (*_flat(out), *_flat(tangent))

    got, want = run(staged), run(torch)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, rtol=_ftol(dtype), atol=_ftol(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize(("name", "shape"), _cases([(2, 3, 3), (2, 4, 3)]))
def test_factorization_dual_tensors_and_vmap_are_torchs(name, shape, dtype):
    A, T = _matrix(22, shape, dtype), _matrix(23, shape, dtype)

    def run(L):
        fw = L.autograd.forward_ad
        with fw.dual_level():
            dual = fw.make_dual(L.tensor(A), L.tensor(T))
            outs = [x for o in _flat(FACTORIZATIONS[name](L, dual)) for x in fw.unpack_dual(o)]
        f = lambda A: FACTORIZATIONS[name](L, A)  # noqa: E731
        batched = L.func.vmap(f)(L.tensor(A))
        # a batch dim in the middle, and a nested vmap over both
        inner = L.func.vmap(L.func.vmap(f), in_dims=1)(L.tensor(np.stack([A, T], 1)))
        return (*outs, *_flat(batched), *_flat(inner))

    got, want = run(staged), run(torch)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, rtol=_ftol(dtype), atol=_ftol(dtype))


def _loss_of_real(L, name, A0):
    """``sum |output|^2`` as a real function of ``x`` (2, *A0.shape), ``A = A0 + x[0] + i
    x[1]``: invariant under the phases of singular vectors and eigenvectors."""

    def f(x):
        outs = _flat(FACTORIZATIONS[name](L, A0 + L.complex(x[0], x[1])))
        return sum(o.abs().square().sum() for o in outs)

    return f


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize(("name", "shape"), _cases([(3, 3), (4, 3)]))
def test_factorization_jacobians_and_hessians_are_torchs(name, shape, dtype):
    """jacfwd of the real and imaginary parts, jacfwd of jacfwd, jacfwd of jacrev (the
    Hessian: forward AD over the kernels' backward formulas), vmapped jacrev and jvp."""
    A0 = _matrix(24, shape, dtype)
    rdtype = np.finfo(dtype).dtype
    xs = np.random.default_rng(25).standard_normal((2, 2, *shape)).astype(rdtype)
    # torch's svd backward under vmap: "vmap over torch.allclose isn't supported", so its
    # gradients by forward mode stand for jacrev's
    svd = name.startswith("svd")

    def run(L):
        x = L.tensor(xs[0])
        loss = _loss_of_real(L, name, L.tensor(A0))
        rev = L.func.jacfwd if L is torch and svd else L.func.jacrev
        return [
            L.func.jacfwd(_of_real(L, lambda A: FACTORIZATIONS[name](L, A), L.tensor(A0)))(x),
            L.func.jacfwd(L.func.jacfwd(loss))(x),
            L.func.jacfwd(rev(loss))(x),
            L.func.vmap(rev(loss))(L.tensor(xs)),
            L.func.vmap(L.func.jvp, in_dims=(None, 0, 0))(
                loss, (L.tensor(xs),), (L.tensor(xs[::-1].copy()),)
            )[1],
        ]

    got, want = run(staged), run(torch)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, rtol=_ftol(dtype), atol=_ftol(dtype) * max(1.0, float(np.abs(w).max())))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", ["eig", "eigvals"])
def test_real_eig_under_jvp_and_vmap_is_torchs(name, dtype):
    """A real ``A``'s eigendecomposition (complex results) was eager-only too."""
    rng = np.random.default_rng(26)
    A, T = (rng.standard_normal((2, 3, 3)).astype(dtype) for _ in range(2))

    def run(L):
        f = lambda A: FACTORIZATIONS[name](L, A)  # noqa: E731
        out, tangent = L.func.jvp(f, (L.tensor(A),), (L.tensor(T),))
        return (*_flat(out), *_flat(tangent), *_flat(L.func.vmap(f)(L.tensor(A))))

    got, want = run(staged), run(torch)
    if name == "eig":  # float32: NumPy's and torch's LAPACK may negate an eigenvector
        got = _phases_of(want[1], got, [1, 3, 5])
    tol = 1e4 * np.finfo(dtype).eps
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, rtol=tol, atol=tol)


def _phases_of(V, outs, vectors):
    """``outs`` with the eigenvectors (and their tangents) at ``vectors`` given the column
    phases of torch's ``V``: the phase is free, the tangent's moves with it."""
    V, W = V.numpy(), staged.tensor(np.asarray(outs[vectors[0]]))
    phase = (V.conj() * np.asarray(W)).sum(-2, keepdims=True)
    unit = staged.tensor((phase / abs(phase)).conj())
    return [o * unit if i in vectors else o for i, o in enumerate(outs)]


@pytest.mark.parametrize("name", ["svd", "svdvals", "pinv", "eig", "norm_nuc", "cond"])
def test_a_capture_refuses_them_and_fallback_eager_runs_them(name):
    """No composition of complex matrices to trace: capture raises EagerOnlyError naming the
    op (as for a real ``eig``); ``compile(fallback="eager")`` gives eager's values."""
    A = staged.tensor(_matrix(27, (3, 3), np.complex128))
    f = lambda A: FACTORIZATIONS[name](staged, A)  # noqa: E731
    op = "eig" if name == "eig" else "pinv" if name == "pinv" else "svd"
    with pytest.raises(EagerOnlyError, match=rf"linalg\.{op}.*runs LAPACK eagerly only.*capture"):
        staged.capture(f, A)
    with pytest.warns(UserWarning, match="cannot be captured"):
        got = staged.compile(f, fallback="eager")(A)
    for g, w in zip(_flat(got), _flat(f(A)), strict=True):
        assert_close(g, w, rtol=0, atol=0)


GAUGE = {  # losses that depend on the phases torch leaves free, and its words
    "svd_U": (lambda L, A: L.linalg.svd(A)[0].real.sum(), "svd_backward: The singular vectors"),
    "svd_Vh": (lambda L, A: L.linalg.svd(A)[2].imag.sum(), "depends on this phase term"),
    "eig_V": (lambda L, A: L.linalg.eig(A)[1].real.sum(), "linalg_eig_backward: The eigenvectors"),
}


@pytest.mark.parametrize("name", list(GAUGE))
def test_a_loss_depending_on_the_phases_raises_as_torchs(name):
    """Under vjp of a real function of a complex ``A``, as torch's: RuntimeError saying the
    loss depends on the vectors' phases (``e^{i phi}``); under grad and vmap of grad too
    (where torch skips eig's check, and under vmap raises a RuntimeError of its own: no
    vmap over allclose)."""
    loss, words = GAUGE[name]
    A = _matrix(28, (2, 3, 3), np.complex128)

    def vjp(L):
        return L.func.vjp(lambda A: loss(L, A), L.tensor(A[0]))[1](L.tensor(1.0, dtype=L.float64))

    raises_like_torch(vjp, words, "e^{i phi}")
    grad = staged.func.grad(lambda A: loss(staged, A))
    for call in (
        lambda: grad(staged.tensor(A[0])),
        lambda: staged.func.vmap(grad)(staged.tensor(A)),
    ):
        with pytest.raises(RuntimeError, match=r"specified up to multiplication by e\^\{i phi\}"):
            call()


COMPLEX_JACOBIANS = {
    "jacrev_output": lambda L: L.func.jacrev(lambda t: t * (1 + 1j))(L.ones(2)),
    "jacrev_input": lambda L: L.func.jacrev(lambda t: t.abs())(L.ones(2, dtype=L.complex64)),
    "jacrev_other_arg": lambda L: L.func.jacrev(lambda a, t: a * t.abs(), argnums=0)(
        L.ones(2), L.ones(2, dtype=L.complex128)
    ),
    "jacrev_second_output": lambda L: L.func.jacrev(lambda t: (t, t * 1j))(L.ones(2)),
    "jacfwd_input": lambda L: L.func.jacfwd(lambda t: t.abs())(L.ones(2, dtype=L.complex128)),
    "jacfwd_output": lambda L: L.func.jacfwd(lambda t: t * (1 + 1j))(L.ones(2)),
    "jacfwd_svd": lambda L: L.func.jacfwd(L.linalg.svdvals)(L.eye(2, dtype=L.complex64)),
    "hessian_input": lambda L: L.func.hessian(lambda t: t.abs().sum())(
        L.ones(2, dtype=L.complex128)
    ),
}


@pytest.mark.parametrize("name", list(COMPLEX_JACOBIANS))
def test_jacrev_and_jacfwd_refuse_complex_inputs_and_outputs_as_torch(name):
    """torch.func: "Expected all inputs (outputs) to be real", with the flat index."""
    with pytest.raises(RuntimeError) as theirs:
        COMPLEX_JACOBIANS[name](torch)
    with pytest.raises(RuntimeError) as ours:
        COMPLEX_JACOBIANS[name](staged)
    assert str(ours.value) == str(theirs.value)
    assert "to be real but received complex tensor at flattened input idx" in str(ours.value)
