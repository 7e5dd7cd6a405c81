"""Sparse CSR tensors (Note [sparse CSR]) and the index helpers PyTorch Geometric builds
them with, each case against torch: construction and its checks, the index fields, repr,
conversions, products with every reduction and their gradients, the ops that keep the
layout, and those refused; ``torch._segment_reduce``; ``_coalesced_``."""

import pickle
import warnings

import numpy as np
import pytest
import torch

import staged

warnings.filterwarnings("ignore", message=".*[Ss]parse.*")  # torch's beta-state notices

LIBS = pytest.mark.parametrize("lib", [staged, torch], ids=["staged", "torch"])
CROW, COL = [0, 2, 2, 5, 6], [0, 3, 0, 1, 3, 2]  # 4 x 4, a row without entries
VALS = [1.5, -2.0, 3.0, 0.5, 4.0, -1.0]
D = np.arange(12.0).reshape(4, 3) / 4 - 1


def _csr(lib, requires_grad=False):
    v = lib.tensor(VALS, dtype=lib.float64, requires_grad=requires_grad)
    return lib.sparse_csr_tensor(lib.tensor(CROW), lib.tensor(COL), v, size=(4, 4)), v


@LIBS
def test_fields_layout_and_repr(lib):
    A, _ = _csr(lib)
    assert A.layout == lib.sparse_csr and A.layout != lib.sparse_csc
    assert not A.is_sparse and A.is_sparse_csr and A._nnz() == 6 and tuple(A.shape) == (4, 4)
    assert A.crow_indices().tolist() == CROW and A.col_indices().tolist() == COL
    assert A.values().tolist() == VALS
    assert repr(A).replace("staged.", "torch.") == (
        "tensor(crow_indices=tensor([0, 2, 2, 5, 6]),\n"
        "       col_indices=tensor([0, 3, 0, 1, 3, 2]),\n"
        "       values=tensor([ 1.5000, -2.0000,  3.0000,  0.5000,  4.0000, -1.0000]),\n"
        "       size=(4, 4), nnz=6, dtype=torch.float64, layout=torch.sparse_csr)"
    )


@LIBS
def test_conversions(lib):
    A, _ = _csr(lib)
    dense = A.to_dense()
    want = np.zeros((4, 4))
    for r in range(4):
        for k in range(CROW[r], CROW[r + 1]):
            want[r, COL[k]] += VALS[k]
    np.testing.assert_array_equal(dense.numpy(), want)
    coo = A.to_sparse_coo()
    assert coo.layout == lib.sparse_coo
    np.testing.assert_array_equal(coo.to_dense().numpy(), want)
    back = coo.to_sparse_csr()
    assert back.crow_indices().tolist() == CROW and back.col_indices().tolist() == COL
    from_dense = lib.tensor(want).to_sparse_csr()
    assert from_dense.crow_indices().tolist() == CROW and from_dense.col_indices().tolist() == COL
    assert lib.tensor(want).to_sparse(layout=lib.sparse_csr).col_indices().tolist() == COL
    assert A.to_sparse_csr() is A


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "amax", "amin"])
def test_mm_reductions_and_their_gradients(reduce):
    results = {}
    for lib in (staged, torch):
        A, v = _csr(lib, requires_grad=True)
        d = lib.tensor(D, requires_grad=True)
        out = lib.sparse.mm(A, d, reduce) if reduce != "sum" else lib.sparse.mm(A, d)
        (out * lib.tensor(np.arange(12.0).reshape(4, 3))).sum().backward()
        results[lib.__name__] = (out.detach().numpy(), v.grad.numpy(), d.grad.numpy())
    for got, want in zip(results["staged"], results["torch"]):
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)


def test_products_with_dense_operands_on_either_side():
    out = {}
    for lib in (staged, torch):
        A, v = _csr(lib, requires_grad=True)
        d = lib.tensor(D, requires_grad=True)
        left = lib.tensor(D.T.copy())
        total = (A @ d).sum() + (left @ A).pow(2).sum() + A.matmul(d[:, 0]).sum()
        total.backward()
        out[lib.__name__] = (total.item(), v.grad.numpy(), d.grad.numpy())
    assert out["staged"][0] == pytest.approx(out["torch"][0], rel=1e-15)
    for got, want in zip(out["staged"][1:], out["torch"][1:]):
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)


@LIBS
def test_ops_that_keep_the_pattern_keep_the_layout(lib):
    A, _ = _csr(lib)
    quarter = [A / 4] if lib is staged else []  # torch: "unsupported tensor layout"
    for B in (A.clone(), A.detach(), -A, A * 2, 2 * A, A.float(), A + A, *quarter):
        assert B.layout == lib.sparse_csr
        assert B.crow_indices().tolist() == CROW and B.col_indices().tolist() == COL
    np.testing.assert_array_equal((A * 2).values().numpy(), np.array(VALS) * 2)
    np.testing.assert_array_equal((A + A).to_dense().numpy(), 2 * A.to_dense().numpy())
    assert A.float().dtype == lib.float32
    assert A.sum().item() == sum(VALS)
    C = pickle.loads(pickle.dumps(A))
    assert C.layout == lib.sparse_csr and C.col_indices().tolist() == COL


def test_operations_without_a_csr_form_in_staged_are_refused():
    A, _ = _csr(staged)
    for call in (A.coalesce, A.indices, lambda: A[0], lambda: A.select(0, 1)):
        with pytest.raises(NotImplementedError, match="sparse CSR tensor.*to_sparse_coo"):
            call()
    with pytest.raises(NotImplementedError, match="sparse CSR"):
        staged.sparse.softmax(A, 1)


@pytest.mark.parametrize(
    "crow,col,size,match",
    [
        ([1, 2], [0, 1], None, "start at 0"),
        ([0, 2, 1], [0, 1], None, "never decrease"),
        ([0, 1, 3], [0, 1], None, "end at nnz"),
        ([0, 1, 2], [0, 4], (2, 3), r"col_indices must be in \[0, 3\)"),
        ([0, 1, 2], [0, -1], (2, 3), r"col_indices must be in"),
        ([0, 1, 2], [0, 1], (3, 3), "does not fit 2 compressed rows"),
    ],
)
def test_bad_indices_are_refused_never_read(crow, col, size, match):
    with pytest.raises(RuntimeError, match=match):
        staged.sparse_csr_tensor(
            staged.tensor(crow), staged.tensor(col), staged.ones(len(col)), size
        )


def test_a_coo_reduction_names_the_csr_layout():
    S = staged.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))
    with pytest.raises(RuntimeError, match="CSR first operand"):
        staged.sparse.mm(S, staged.ones(2, 2), "mean")


@LIBS
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod", "amax"])
def test_segment_reduce(lib, reduce):
    data = lib.tensor([[1.0, 2], [3, 4], [5, 6], [7, -8], [2, 2]], requires_grad=True)
    out = lib._segment_reduce(data, reduce, lengths=lib.tensor([2, 0, 3]))
    out2 = lib._segment_reduce(data, reduce, offsets=lib.tensor([0, 2, 2, 5]), initial=0.5)
    finite = out.detach().isfinite() & ~out.detach().isnan()
    (out[finite].sum() + (out2 * 3).sum()).backward()
    ref = {}
    for t in (torch,):
        d = t.tensor([[1.0, 2], [3, 4], [5, 6], [7, -8], [2, 2]], requires_grad=True)
        o = t._segment_reduce(d, reduce, lengths=t.tensor([2, 0, 3]))
        o2 = t._segment_reduce(d, reduce, offsets=t.tensor([0, 2, 2, 5]), initial=0.5)
        f = o.detach().isfinite() & ~o.detach().isnan()
        (o[f].sum() + (o2 * 3).sum()).backward()
        ref = dict(out=o.detach().numpy(), out2=o2.detach().numpy(), grad=d.grad.numpy())
    np.testing.assert_array_equal(out.detach().numpy(), ref["out"])
    np.testing.assert_array_equal(out2.detach().numpy(), ref["out2"])
    np.testing.assert_allclose(data.grad.numpy(), ref["grad"], rtol=1e-7)


def test_segment_reduce_checks_its_segments():
    with pytest.raises(RuntimeError, match="sum to data.size"):
        staged._segment_reduce(staged.ones(4), "sum", lengths=staged.tensor([2, 1]))
    with pytest.raises(RuntimeError, match="Either lengths or offsets"):
        staged._segment_reduce(staged.ones(4), "sum")


@LIBS
def test_index_conversions(lib):
    rows = lib.tensor([0, 0, 2, 2, 2])
    assert lib._convert_indices_from_coo_to_csr(rows, 4).tolist() == [0, 2, 2, 5, 5]
    assert lib._convert_indices_from_coo_to_csr(rows, 4, out_int32=True).dtype == lib.int32
    crow, col = lib.tensor([0, 2, 2, 5]), lib.tensor([2, 0, 0, 1, 2])
    coo = lib._convert_indices_from_csr_to_coo(crow, col)
    assert coo.tolist() == [[0, 0, 2, 2, 2], [2, 0, 0, 1, 2]]
    assert lib._convert_indices_from_csr_to_coo(crow, col, transpose=True).tolist() == [
        [2, 0, 0, 1, 2],
        [0, 0, 2, 2, 2],
    ]


@LIBS
def test_coalesced_flag_over_distinct_indices_out_of_order(lib):
    S = lib.sparse_coo_tensor([[1, 0, 2], [0, 2, 1]], [1.0, 2.0, 3.0], (3, 3))
    S = S._coalesced_(True)
    assert S.is_coalesced() and S.indices().tolist() == [[1, 0, 2], [0, 2, 1]]
    T = lib.sparse_coo_tensor([[1, 0], [0, 2]], [1.0, 2.0], (3, 3), is_coalesced=True)
    assert T.indices().tolist() == [[1, 0], [0, 2]]
    if lib is staged:  # torch's conversion takes the flag's word that they are sorted
        csr = S.to_sparse_csr()
        assert csr.crow_indices().tolist() == [0, 1, 2, 3]
        assert csr.col_indices().tolist() == [2, 0, 1]


def test_a_coalesced_flag_over_repeated_places_is_refused():
    S = staged.sparse_coo_tensor([[1, 1], [0, 0]], [1.0, 2.0], (3, 3))
    with pytest.raises(RuntimeError, match="repeat a place"):
        S._coalesced_(True)
    with pytest.raises(RuntimeError, match="repeat a place"):
        staged.sparse_coo_tensor([[1, 1], [0, 0]], [1.0, 2.0], (3, 3), is_coalesced=True)


@LIBS
def test_csc_tensors_and_the_transpose_between_layouts(lib):
    A, _ = _csr(lib)
    C = A.t()
    assert C.layout == lib.sparse_csc and tuple(C.shape) == (4, 4)
    assert C.ccol_indices().tolist() == CROW and C.row_indices().tolist() == COL
    np.testing.assert_array_equal(C.to_dense().numpy(), A.to_dense().numpy().T)
    assert C.t().layout == lib.sparse_csr and C.t().col_indices().tolist() == COL
    made = lib.sparse_csc_tensor(lib.tensor(CROW), lib.tensor(COL), lib.tensor(VALS), (4, 4))
    np.testing.assert_array_equal(made.to_dense().numpy(), C.to_dense().numpy())
    dense = A.to_dense()
    csc = dense.to_sparse_csc()
    np.testing.assert_array_equal(csc.to_dense().numpy(), dense.numpy())
    assert (
        csc.ccol_indices().tolist()
        == lib.tensor(dense.numpy().T.copy()).to_sparse_csr().crow_indices().tolist()
    )
    assert dense.to_sparse(layout=lib.sparse_csc).layout == lib.sparse_csc
    d = lib.tensor(D)
    np.testing.assert_allclose((C @ d).numpy(), dense.numpy().T @ D, rtol=1e-15)
    assert "ccol_indices=tensor([0, 2, 2, 5, 6])" in repr(C)


def test_a_csc_tensor_checks_its_indices():
    with pytest.raises(RuntimeError, match=r"row_indices must be in \[0, 2\)"):
        staged.sparse_csc_tensor(
            staged.tensor([0, 1, 2]), staged.tensor([0, 2]), staged.ones(2), (2, 2)
        )


def test_unsorted_columns_are_taken_as_listed_and_refused_only_when_checked():
    A = staged.sparse_csr_tensor(
        staged.tensor([0, 2, 2]), staged.tensor([1, 0]), staged.tensor([1.0, 2.0]), (2, 2)
    )
    np.testing.assert_array_equal(A.to_dense().numpy(), [[2.0, 1.0], [0.0, 0.0]])
    v = staged.tensor([1.0, 2.0], requires_grad=True)
    B = staged.sparse_csr_tensor(staged.tensor([0, 2, 2]), staged.tensor([1, 0]), v, (2, 2))
    staged.sparse.mm(B, staged.tensor([[1.0], [10.0]]), "mean").sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), [5.0, 0.5])  # each value its own column's
    for col in ([1, 0], [1, 1]):
        with pytest.raises(RuntimeError, match="sorted and distinct within each compressed row"):
            staged.sparse_csr_tensor(
                staged.tensor([0, 2, 2]),
                staged.tensor(col),
                staged.ones(2),
                (2, 2),
                check_invariants=True,
            )
    for lib in (staged, torch):  # torch's check says the same
        with pytest.raises(RuntimeError, match="sorted and distinct"):
            lib.sparse_csr_tensor(
                lib.tensor([0, 2, 2]),
                lib.tensor([1, 0]),
                lib.ones(2),
                (2, 2),
                check_invariants=True,
            )
