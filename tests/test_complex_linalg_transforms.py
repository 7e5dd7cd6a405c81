"""Complex ``solve``, ``inv``, ``det``, ``slogdet`` and the triangular, LU and Cholesky
solves under forward-mode AD (``func.jvp``, dual tensors, ``jacfwd``) and ``vmap`` (also
of ``jacrev`` and ``jvp``): torch.func's values and tangents (its conjugate-Wirtinger
convention), complex64 and complex128, with and without batch dims of the operands."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close

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


def _of_real(L, name, A0, B):
    """``OPS[name]`` as a real function of ``x`` (2, 3, 3), ``A = A0 + x[0] + i x[1]``, with
    the real and imaginary parts of its outputs stacked: torch.func's jacfwd and jacrev
    take real inputs and outputs only (and torch's vmap no ``imag`` of a conj view)."""

    def f(x):
        out = [o.resolve_conj() for o in _flat(OPS[name](L, A0 + L.complex(x[0], x[1]), B))]
        parts = [p for o in out for p in ((o.real, o.imag) if o.is_complex() else (o,))]
        return L.cat([p.reshape(-1) for p in parts])

    return f


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("name", list(OPS))
def test_jacfwd_is_torchs(name, dtype):
    A0, B = _operands(4, (), dtype)
    x = np.random.default_rng(5).standard_normal((2, 3, 3)).astype(np.finfo(dtype).dtype)

    def run(L):
        return L.func.jacfwd(_of_real(L, name, L.tensor(A0), L.tensor(B)))(L.tensor(x))

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
        loss = lambda x: _of_real(L, name, L.tensor(A0), L.tensor(B))(x).square().sum()  # noqa: E731
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
