"""staged.sparse against torch 2.13: sparse COO tensors made and printed, coalesced,
converted; their products with dense tensors and the gradients of those (with respect to
the dense operand, the values, and a sparse leaf: torch's ``S.grad``), in reverse and
forward mode; sum, softmax, the operators, the errors; a GCN layer's compiled step."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

import staged
from tests.checks import raises_like_torch, to_numpy

I = [[0, 1, 1, 0, 2], [1, 0, 2, 1, 2]]  # (0, 1) twice: not coalesced
V = [1.0, 2.0, 3.0, 4.0, 5.0]
D = np.random.default_rng(0).standard_normal((3, 2))
TIGHT = dict(rtol=1e-12, atol=1e-12)  # float64, a handful of terms per entry


def sp(lib, indices=I, values=V, size=(3, 3), **kw):
    return lib.sparse_coo_tensor(indices, values, size, dtype=lib.float64, **kw)


def dense(lib, a=D, **kw):
    return lib.tensor(a, dtype=lib.float64, **kw)


def same_sparse(ours, theirs):
    assert ours.layout is staged.sparse_coo and theirs.layout is torch.sparse_coo
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.is_coalesced() == theirs.is_coalesced()
    assert ours._nnz() == theirs._nnz()
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    np.testing.assert_array_equal(to_numpy(ours._indices()), to_numpy(theirs._indices()))
    np.testing.assert_allclose(to_numpy(ours._values()), to_numpy(theirs._values()), **TIGHT)


def close(ours, theirs, **tol):
    np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), **(tol or TIGHT))


# --- making, printing, coalescing ------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.sparse_coo_tensor(I, V, (3, 3)),
        lambda lib: lib.sparse_coo_tensor(I, [1, 1, 1, 1, 1], (3, 3)),
        lambda lib: lib.sparse_coo_tensor(I, V, (3, 3), dtype=lib.float64, requires_grad=True),
        lambda lib: lib.sparse_coo_tensor(lib.zeros(2, 0, dtype=lib.int64), lib.zeros(0), (3, 3)),
        lambda lib: lib.sparse_coo_tensor(I, lib.ones(5, 2), (3, 3, 2)),
        lambda lib: lib.sparse_coo_tensor(I, lib.tensor(V, requires_grad=True), (3, 3)) * 2,
        lambda lib: lib.tensor([[0.0, 1.5], [2.0, 0.0]]).to_sparse(),
        lambda lib: lib.sparse_coo_tensor([[0, 7]], [1.0, 2.0]),  # size inferred
    ],
)
def test_sparse_tensors_are_made_and_print_as_torchs(make):
    ours, theirs = make(staged), make(torch)
    same_sparse(ours, theirs)
    assert repr(ours).replace("staged.", "torch.") == repr(theirs)
    assert ours.requires_grad == theirs.requires_grad and ours.is_leaf == theirs.is_leaf
    assert ours.is_sparse and ours.ndim == theirs.ndim and ours.sparse_dim() == theirs.sparse_dim()
    assert isinstance(ours, staged.Tensor) and staged.is_tensor(ours)


def test_indices_from_numpy_int32_transposed_and_values_cast_as_gcn_makes_them():
    edges = np.array([[0, 1], [1, 2], [2, 0], [0, 1]], dtype=np.int32)
    ours, theirs = (
        lib.sparse_coo_tensor(edges.T, lib.ones(4), (3, 3), dtype=lib.int64)
        for lib in (staged, torch)
    )
    same_sparse(ours, theirs)
    close(staged.eye(3) + ours, torch.eye(3) + theirs)  # dense + sparse: dense, promoted
    assert (staged.eye(3) + ours).dtype is staged.float32
    assert edges.flags.writeable  # the caller's array is copied, not frozen


def test_coalesce_sums_duplicates_and_sorts():
    ours, theirs = sp(staged).coalesce(), sp(torch).coalesce()
    same_sparse(ours, theirs)
    assert ours.coalesce() is ours
    close(ours.indices(), theirs.indices())
    close(ours.values(), theirs.values())
    unsorted = [[2, 0, 1], [0, 1, 2]]
    for lib in (staged, torch):
        s = lib.sparse_coo_tensor(unsorted, [1.0, 2.0, 3.0], (3, 3))
        assert not s.is_coalesced() and s.coalesce().is_coalesced()
        assert lib.sparse_coo_tensor([[1], [2]], [1.0], (3, 3)).is_coalesced()  # nnz 1
    same_sparse(*(sp(lib).t() for lib in (staged, torch)))
    same_sparse(*(sp(lib).coalesce().t() for lib in (staged, torch)))


def test_indices_and_values_of_an_uncoalesced_tensor_raise_torchs_error():
    raises_like_torch(lambda lib: sp(lib).indices(), "Cannot get indices on an uncoalesced")
    raises_like_torch(lambda lib: sp(lib).values(), "Cannot get values on an uncoalesced")


def test_coalesce_is_differentiable_with_respect_to_the_values():
    grads = []
    for lib in (staged, torch):
        v = lib.tensor(V, dtype=lib.float64, requires_grad=True)
        c = lib.sparse_coo_tensor(I, v, (3, 3)).coalesce()
        (c.values() * lib.arange(4, dtype=lib.float64)).sum().backward()
        grads.append(v.grad)
    close(*grads)


@pytest.mark.parametrize(
    "a, sparse_dim",
    [
        ([[0.0, 1.5], [2.0, 0.0]], None),
        ([[0.0, 1.5], [0.0, 0.0], [2.0, 3.0]], 1),  # hybrid: rows with any nonzero
        ([0.0, 3.0, 0.0, -1.0], None),
        ([[0.0, 0.0]], None),
        (np.arange(24.0).reshape(2, 3, 4) % 5, 2),
    ],
)
def test_to_sparse_and_to_dense_round_trip_as_torchs(a, sparse_dim):
    args = () if sparse_dim is None else (sparse_dim,)
    ours, theirs = (dense(lib, np.array(a)).to_sparse(*args) for lib in (staged, torch))
    same_sparse(ours, theirs)
    close(ours.to_dense(), theirs.to_dense())
    assert ours.to_sparse() is ours and ours.to_sparse_coo() is ours
    close(dense(staged, np.array(a)).to_sparse_coo().to_dense(), np.array(a))


def test_to_sparse_of_a_tensor_that_requires_grad_passes_the_gradient_at_its_nonzeros():
    grads = []
    for lib in (staged, torch):
        x = dense(lib, [[0.0, 2.0], [3.0, 0.0]], requires_grad=True)
        s = x.to_sparse()
        assert not s.is_leaf and s.grad_fn is not None
        (s * 3).to_dense().sum().backward()
        grads.append(x.grad)
    close(*grads)


def test_to_dense_sums_duplicates_and_differentiates_with_respect_to_the_values():
    close(sp(staged).to_dense(), sp(torch).to_dense())
    grads = []
    for lib in (staged, torch):
        v = lib.tensor(V, dtype=lib.float64, requires_grad=True)
        w = dense(lib, np.arange(9.0).reshape(3, 3))
        (lib.sparse_coo_tensor(I, v, (3, 3)).to_dense() * w).sum().backward()
        grads.append(v.grad)
    close(*grads)


# --- products ---------------------------------------------------------------------------
PRODUCTS = {
    "@": lambda lib, s, d: s @ d,
    "mm": lambda lib, s, d: lib.mm(s, d),
    "spmm": lambda lib, s, d: lib.spmm(s, d),
    "sparse.mm": lambda lib, s, d: lib.sparse.mm(s, d),
    "matmul": lambda lib, s, d: lib.matmul(s, d),
    "method": lambda lib, s, d: s.mm(d),
    "vector": lambda lib, s, d: s @ d[:, 0],
    "dense @ sparse": lambda lib, s, d: d.t() @ s,
    "vector @ sparse": lambda lib, s, d: d[:, 1] @ s,
    "mm(dense, sparse)": lambda lib, s, d: lib.mm(d.t(), s),
    "sparse.mm(dense, sparse)": lambda lib, s, d: lib.sparse.mm(d.t(), s),
    "addmm": lambda lib, s, d: lib.addmm(lib.ones(3, 2, dtype=lib.float64), s, d, beta=2, alpha=3),
    "sparse.addmm": lambda lib, s, d: lib.sparse.addmm(d, s, d, beta=0.5),
}


@pytest.mark.parametrize("product", PRODUCTS.values(), ids=PRODUCTS.keys())
def test_products_give_torchs_values_and_gradients(product):
    """Gradients with respect to the dense operand and to the values (``S`` not a leaf:
    torch's gradient of the values it was built from)."""
    results = []
    for lib in (staged, torch):
        v = lib.tensor(V, dtype=lib.float64, requires_grad=True)
        d = dense(lib, requires_grad=True)
        out = product(lib, lib.sparse_coo_tensor(I, v, (3, 3)), d)
        (out * out).sum().backward()
        results.append((out, v.grad, d.grad))
    for ours, theirs in zip(*results):
        close(ours, theirs)


def test_the_grad_of_a_sparse_leaf_is_torchs_sparse_gradient():
    """torch's S.grad (torch.sparse.mm) is the dense gradient at S's distinct places."""
    grads = []
    for lib in (staged, torch):
        s = sp(lib, requires_grad=True)
        assert s.is_leaf and s.grad is None
        out = lib.sparse.mm(s, dense(lib))
        (out * out).sum().backward()
        assert s.grad.layout is lib.sparse_coo
        grads.append(s.grad)
    close(grads[0].to_dense(), grads[1].to_dense())
    assert grads[0]._nnz() == grads[1]._nnz() == 4
    s = sp(staged, requires_grad=True)
    (s @ dense(staged)).sum().backward()
    s.grad = None
    assert s.grad is None


def test_a_coalesced_leaf_keeps_its_pattern_in_its_grad():
    grads = []
    for lib in (staged, torch):
        s = sp(lib).coalesce().detach().requires_grad_()
        lib.sparse.mm(s, dense(lib)).pow(3).sum().backward()
        grads.append(s.grad)
    close(grads[0]._values(), grads[1]._values())
    close(grads[0]._indices(), grads[1]._indices())


def test_forward_mode_gives_the_product_of_the_tangents():
    fwd = staged.autograd.forward_ad
    s_values, tv, td = (
        staged.tensor(V, dtype=staged.float64),
        staged.ones(5, dtype=staged.float64),
        dense(staged, D * 2),
    )
    with fwd.dual_level():
        v = fwd.make_dual(s_values, tv)
        d = fwd.make_dual(dense(staged), td)
        out = staged.sparse_coo_tensor(I, v, (3, 3)) @ d
        tangent = fwd.unpack_dual(out).tangent
    s = sp(staged)
    expected = s @ td + staged.sparse_coo_tensor(I, tv, (3, 3)) @ dense(staged)
    close(tangent, expected)


def test_product_errors_are_torchs():
    raises_like_torch(
        lambda lib: lib.mm(sp(lib), lib.ones(4, 2, dtype=lib.float64)),
        "Expected dim 0 size 3, got 4",
    )
    raises_like_torch(lambda lib: lib.mm(sp(lib), lib.ones(3, 2)), "expected scalar type Double")
    raises_like_torch(lambda lib: lib.mm(sp(lib).float(), dense(lib)), "found Double")
    with pytest.raises(RuntimeError, match="2-D sparse tensor"):
        staged.sparse_coo_tensor([[0], [0], [0]], [1.0]) @ staged.ones(1, 1)


@pytest.mark.parametrize(
    "product",
    [
        lambda lib, a, b: lib.mm(a, b.t()),
        lambda lib, a, b: a @ b.transpose(0, 1),
        lambda lib, a, b: a * b,
    ],
    ids=["mm", "matmul", "mul"],
)
def test_products_of_two_sparse_tensors_are_torchs(product):
    """sentence-transformers' sparse similarities: ``mm(a, b.T)`` and ``a * b``, sparse
    results whose values and gradients with respect to both operands' values are torch's."""
    results = {}
    for lib in (staged, torch):
        va = lib.tensor(V, dtype=lib.float64, requires_grad=True)
        vb = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
        a = lib.sparse_coo_tensor(I, va, (3, 3))
        b = lib.sparse_coo_tensor([[0, 1, 2], [1, 1, 2]], vb, (3, 3))
        out = product(lib, a, b)
        assert out.is_sparse
        dense = out.to_dense()
        (dense * lib.arange(9, dtype=lib.float64).reshape(3, 3)).sum().backward()
        results[lib.__name__] = (dense, va.grad, vb.grad)
    for ours, theirs in zip(results["staged"], results["torch"]):
        close(ours, theirs)


def test_rows_of_a_sparse_tensor_and_their_stack_are_torchs():
    """What sentence-transformers' SparseEncoder does with its embeddings: iterate over the
    rows, stack them back, index one, transpose."""
    d = np.array([[0.0, 1.5, 0.0, 2.0], [3.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    got = {}
    for lib in (staged, torch):
        s = lib.tensor(d).to_sparse()
        rows = list(s)
        stacked = lib.stack(rows)
        got[lib.__name__] = [
            [r.to_dense() for r in rows],
            [r._nnz() for r in rows],
            stacked.to_dense(),
            s[1].to_dense(),
            s.select(1, 3).to_dense(),
            [u.to_dense() for u in s.unbind(1)],
            s.transpose(0, 1).to_dense(),
        ]
        assert all(r.is_sparse for r in rows) and stacked.is_sparse
    ours, theirs = got["staged"], got["torch"]
    for o, t in zip(ours, theirs):
        if isinstance(o, list) and o and not isinstance(o[0], int):
            for a, b in zip(o, t):
                close(a, b)
        elif isinstance(o, list):
            assert o == t
        else:
            close(o, t)
    raises_like_torch(lambda lib: lib.tensor(d).to_sparse().select(0, 3), "out of range")


# --- sum, softmax, operators ------------------------------------------------------------
@pytest.mark.parametrize(
    "reduce",
    [
        lambda lib, s: lib.sparse.sum(s),
        lambda lib, s: lib.sum(s),
        lambda lib, s: s.sum(),
        lambda lib, s: lib.sparse.sum(s, 0),
        lambda lib, s: s.sum(1),
        lambda lib, s: lib.sparse.sum(s, (0, 1)),
        lambda lib, s: lib.sparse.sum(s, dtype=lib.float32),
        lambda lib, s: lib.sparse.sum(lib.sparse_coo_tensor(I, lib.ones(5, 2), (3, 3, 2)), 2),
        lambda lib, s: lib.sparse.sum(lib.sparse_coo_tensor(I, lib.ones(5, 2), (3, 3, 2)), 0),
    ],
)
def test_sum_is_torchs(reduce):
    ours, theirs = reduce(staged, sp(staged)), reduce(torch, sp(torch))
    if theirs.layout is torch.sparse_coo:
        same_sparse(ours, theirs)
    else:
        assert ours.layout is staged.strided and str(ours.dtype)[7:] == str(theirs.dtype)[6:]
        close(ours, theirs)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_over_the_specified_entries_is_torchs(fn, dim):
    """(torch's gradient for a negative dim is not its positive twin's, though its values
    are: the gradients are compared at the positive dim.)"""
    results = []
    w = np.arange(4.0) - 1.5
    for lib, d in ((staged, dim), (torch, dim % 2)):
        v = lib.tensor(V, dtype=lib.float64, requires_grad=True)
        out = getattr(lib.sparse, fn)(lib.sparse_coo_tensor(I, v, (3, 3)), d)
        (out.values() * lib.tensor(w)).sum().backward()
        results.append((out, v.grad))
    same_sparse(results[0][0], results[1][0])
    same_sparse(results[0][0], getattr(torch.sparse, fn)(sp(torch), dim))
    close(results[0][1], results[1][1])


OPERATORS = {
    "S * 2": lambda lib, s, d: s * 2,
    "2 * S": lambda lib, s, d: 2 * s,
    "S * 0-d": lambda lib, s, d: s * lib.tensor(3.0, dtype=lib.float64),
    "S * D": lambda lib, s, d: s * (d @ d.t()),
    "D * S": lambda lib, s, d: (d @ d.t()) * s,
    "S / 2": lambda lib, s, d: s / 2,
    "-S": lambda lib, s, d: -s,
    "S + S": lambda lib, s, d: s + s.coalesce(),
    "S - S": lambda lib, s, d: s - s * 3,
    "D + S": lambda lib, s, d: (d @ d.t()) + s,
    "D - S": lambda lib, s, d: (d @ d.t()) - s,
    "t": lambda lib, s, d: s.t(),
    "double": lambda lib, s, d: s.float().double(),
    "to": lambda lib, s, d: s.to(lib.float32).to("cpu", lib.float64),
}


@pytest.mark.parametrize("op", OPERATORS.values(), ids=OPERATORS.keys())
def test_operators_give_torchs_values_and_gradients(op):
    results = []
    for lib in (staged, torch):
        v = lib.tensor(V, dtype=lib.float64, requires_grad=True)
        d = dense(lib, requires_grad=True)
        out = op(lib, lib.sparse_coo_tensor(I, v, (3, 3)), d)
        assert out.layout is (lib.sparse_coo if out.is_sparse else lib.strided)
        full = out.to_dense() if out.is_sparse else out
        (full * full).sum().backward()
        results.append((out, full, v.grad, d.grad))
    (ours, *o), (theirs, *t) = results
    assert ours.is_sparse == theirs.is_sparse
    for a, b in zip(o, t):
        if b is not None:
            close(a, b)


def test_in_place_operators_rebind_to_the_sparse_result():
    s = sp(staged)
    s += sp(staged)
    s *= 2
    close(s.to_dense(), (sp(torch) * 4).to_dense())


def test_copies_pickles_and_detach_keep_the_tensor():
    s = sp(staged, requires_grad=True)
    for c in (copy.deepcopy(s), pickle.loads(pickle.dumps(s))):
        assert c is not s and c.requires_grad and c.is_leaf
        close(c.to_dense(), s.to_dense())
    d = s.detach()
    assert not d.requires_grad and d._values()._payload is s._values()._payload
    assert s.clone()._values() is not s._values()


# --- errors -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, words",
    [
        (
            lambda lib: sp(
                lib, indices=[[0, -1]], values=[1.0, 2.0], size=(3,), check_invariants=True
            ),
            ["found negative index -1 for dim 0"],
        ),
        (
            lambda lib: sp(lib, size=(2, 3), check_invariants=True),
            ["size is inconsistent with indices: for dim 0, size is 2 but found index 2"],
        ),
        (
            lambda lib: sp(lib, size=(3,)),
            ["'len(size) == sparse_dim + dense_dim' is not satisfied"],
        ),
        (
            lambda lib: sp(lib, values=V[:3]),
            ["indices and values must have same nnz", "from values: 3"],
        ),
        (
            lambda lib: lib.sparse_coo_tensor(I, lib.ones(5, 2), (3, 3, 3)),
            ["values has incorrect size, expected [5, 3], got [5, 2]"],
        ),
        (
            lambda lib: lib.sparse_coo_tensor(lib.tensor([0, 1]), lib.tensor([1.0, 2.0])),
            ["indices must be sparse_dim x nnz, but got: [2]"],
        ),
        (
            lambda lib: sp(lib) + dense(lib, np.ones((3, 3))),
            ["add(sparse, dense) is not supported. Use add(dense, sparse) instead."],
        ),
        (
            lambda lib: sp(lib) - dense(lib, np.ones((3, 3))),
            ["add(sparse, dense) is not supported"],
        ),
        (
            lambda lib: lib.ones(3, 1, dtype=lib.float64) + sp(lib),
            ["add: expected 'self' and 'other' to have same size, but self has size [3, 1]"],
        ),
        (
            lambda lib: sp(lib) + sp(lib, size=(4, 3)),
            ["add: expected sizes of 'self' and 'other' to match, but [3, 3] != [4, 3]"],
        ),
        (lambda lib: lib.ones(3).to_sparse(2), ["sparse_dim argument must be in [0,1] range"]),
        (
            lambda lib: lib.sparse_coo_tensor(I, [1, 2, 3, 4, 5], (3, 3), requires_grad=True),
            ["point", "can require gradients"],
        ),
        (lambda lib: sp(lib).numpy(), ["can't convert Sparse layout tensor to numpy"]),
    ],
)
def test_bad_arguments_raise_torchs_errors(call, words):
    raises_like_torch(call, *words)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda s: s.exp(), "exp"),
        (lambda s: s[0:1], "__getitem__"),
        (lambda s: s.view(-1), "view"),
        (lambda s: s == 1, "__eq__"),
        (lambda s: s.backward(), "backward"),
        (lambda s: s.T, "T"),
        (lambda s: s**2, "__pow__"),
    ],
)
def test_everything_else_raises_naming_the_op(call, name):
    with pytest.raises(NotImplementedError) as e:
        call(sp(staged))
    assert f"Could not run '{name}' with a sparse COO tensor" in str(e.value)
    assert "Call .to_dense() first" in str(e.value)


def test_a_dense_op_given_a_sparse_tensor_says_what_to_do():
    for call in (staged.exp, lambda s: staged.ones(3, 3).mm(s), lambda s: staged.cat([s, s])):
        with pytest.raises(
            NotImplementedError, match="dense.*is needed.*Call .to_dense\\(\\) first"
        ):
            call(sp(staged))
    assert getattr(sp(staged), "_payload", None) is None


def test_autograd_takes_a_sparse_tensor_through_its_values():
    s = sp(staged, requires_grad=True)
    loss = (s @ dense(staged)).sum()
    with pytest.raises(NotImplementedError, match="gradients with respect to their values"):
        staged.autograd.grad(loss, [s])
    row_sums = D.sum(1)  # d loss / d S[i, j] = sum_k D[j, k]
    (g,) = staged.autograd.grad(loss, [s._values()], retain_graph=True)
    close(g, row_sums[I[1]])
    loss.backward()
    close(s.grad.to_dense(), (sp(staged).to_dense().numpy() != 0) * row_sums[None, :])


def test_under_compile_a_sparse_argument_and_to_sparse_raise_clearly():
    with pytest.raises(NotImplementedError, match="takes them from its enclosing scope"):
        staged.compile(lambda s, d: s @ d)(sp(staged), dense(staged))
    with pytest.raises(RuntimeError, match="to_sparse\\(\\) has a data-dependent output shape"):
        staged.compile(lambda d: d.to_sparse().to_dense())(dense(staged))


# --- a GCN layer, compiled --------------------------------------------------------------
def test_a_compiled_gcn_step_gives_eagers_loss_gradients_and_parameters():
    """Two steps of a two-layer GCN (sparse normalised adjacency and sparse features from
    the enclosing scope) with SGD, compiled for llvm-cpu, against the same steps eagerly."""
    rng = np.random.default_rng(1)
    n, f, h, c = 12, 6, 5, 3
    a = (rng.random((n, n)) < 0.25).astype(np.float32)
    a = np.maximum(a, a.T) + np.eye(n, dtype=np.float32)
    deg = a.sum(1) ** -0.5
    adj = staged.tensor(deg[:, None] * a * deg[None, :]).to_sparse()
    feats = staged.tensor(
        rng.random((n, f)) * (rng.random((n, f)) < 0.4), dtype=staged.float32
    ).to_sparse()
    labels = staged.tensor(rng.integers(0, c, n))

    def model():
        staged.manual_seed(0)
        w1 = staged.nn.Parameter(staged.randn(f, h) * 0.3)
        w2 = staged.nn.Parameter(staged.randn(h, c) * 0.3)
        return [w1, w2], staged.optim.SGD([w1, w2], lr=0.5)

    def make_step(params, opt):
        def step():
            opt.zero_grad()
            x = staged.relu(staged.spmm(adj, staged.mm(feats, params[0])))
            out = staged.sparse.mm(adj, x @ params[1])
            loss = staged.nn.functional.cross_entropy(out, labels)
            loss.backward()
            opt.step()
            return loss

        return step

    runs = []
    for compiled in (False, True):
        params, opt = model()
        step = make_step(params, opt)
        step = staged.compile(step) if compiled else step
        losses = [step().item() for _ in range(3)]
        runs.append(
            (losses, [p.detach().clone() for p in params], [p.grad.clone() for p in params])
        )
    (l0, p0, g0), (l1, p1, g1) = runs
    np.testing.assert_allclose(l1, l0, rtol=1e-5)
    for a_, b_ in zip(p0 + g0, p1 + g1):
        np.testing.assert_allclose(to_numpy(b_), to_numpy(a_), rtol=1e-4, atol=1e-6)
