"""More leftover differences from torch 2.13, each checked against torch: the grad_fn
names of the transposes, NumPy ufuncs applied to a tensor, in-place updates of a view
whose elements share memory, torch's C++ type names in dtype-mismatch errors, and complex
``solve``/``inv``/``solve_triangular`` with their gradients."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, message, raises_like_torch

# torch's __array__ takes no copy= (NumPy 2 warns), nor its __array_wrap__ return_scalar=
pytestmark = [
    pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept"),
    pytest.mark.filterwarnings("ignore:__array_wrap__ must accept context"),
]


# --- the transposes' grad_fn names ----------------------------------------------------------
def _names(fn) -> list:
    """The grad_fn chain of ``fn(x)``'s result, by torch's names, to the leaf."""
    names = []
    node = fn.grad_fn
    while node is not None:
        names.append(node.name())
        node = node.next_functions[0][0] if node.next_functions else None
    return names


_TRANSPOSES = {
    "mT": lambda x: x.mT,
    "mH": lambda x: x.mH,
    "H": lambda x: x[0].H,
    "T 2-d": lambda x: x[0].T,
    "T 3-d": lambda x: x.T,
    "t": lambda x: x[0].t(),
    "t 1-d": lambda x: x[0, 0].t(),
    "transpose": lambda x: x.transpose(0, 2),
    "transpose 1-d": lambda x: x[0, 0].transpose(0, 0),
    "swapaxes": lambda x: x.swapaxes(0, 1),
    "permute": lambda x: x.permute(2, 0, 1),
    "adjoint": lambda x: x.adjoint(),
    "movedim": lambda x: x.movedim(0, 2),
}


@pytest.mark.filterwarnings("ignore:The use of `x.T` on tensors of dimension other than 2")
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("op", list(_TRANSPOSES), ids=str)
def test_transposes_grad_fn_names_and_gradients_are_torchs(op, dtype):
    data = np.arange(24.0).reshape(2, 3, 4) * (1 - 0.5j if dtype == "complex128" else 1)
    results = {}
    for lib in (staged, torch):
        x = lib.tensor(data, requires_grad=True)
        y = _TRANSPOSES[op](x)
        # the names up to the leaf's (torch's indexing is SelectBackward0, staged's View)
        node = y.grad_fn
        name, nxt = node.name(), node.next_functions[0][0]
        if name == "ConjBackward0":  # mH, H, adjoint of a complex tensor: conj(transpose)
            name, nxt = nxt.name(), nxt.next_functions[0][0]
        (y * lib.arange(y.numel()).reshape(y.shape)).abs().sum().backward()
        results[lib] = name, nxt is not None and nxt.name().endswith("AccumulateGrad"), x.grad
    (ours, ours_leaf, g), (theirs, theirs_leaf, tg) = results[staged], results[torch]
    assert ours == theirs
    assert ours_leaf == theirs_leaf
    assert_close(g, tg, 1e-12, 1e-12)


def test_transpose_node_name_is_its_class_name_and_keeps_saved_values():
    x = staged.ones(2, 3, requires_grad=True)
    node = x.mT.grad_fn
    assert type(node).__name__ == node.name() == "TransposeBackward0"
    assert node._saved_perm == (1, 0)
    assert type(x.t().grad_fn).__name__ == "TBackward0"
    assert x.permute(1, 0).grad_fn.name() == "PermuteBackward0"  # the primitive's own


# --- NumPy ufuncs on a tensor (torch's __array_wrap__) ---------------------------------------
_UFUNCS = {
    "sin": lambda t, lib: np.sin(t),
    "sin int": lambda t, lib: np.sin(t.to(lib.int64)),
    "sin uint8": lambda t, lib: np.sin(t.to(lib.uint8)),
    "exp half": lambda t, lib: np.exp(t.half()),
    "sqrt complex": lambda t, lib: np.sqrt(t.to(lib.complex64)),
    "sin dtype=": lambda t, lib: np.sin(t, dtype=np.float64),
    "add": lambda t, lib: np.add(t, t),
    "add ndarray": lambda t, lib: np.add(t, np.ones(3)),
    "ndarray add": lambda t, lib: np.add(np.ones(3), t),
    "multiply number": lambda t, lib: np.multiply(t, 2.0),
    "0-d": lambda t, lib: np.sin(t[0]),
    "add.reduce": lambda t, lib: np.add.reduce(t),
    "argmax": lambda t, lib: np.argmax(t),
    "cumsum": lambda t, lib: np.cumsum(t),
    "isfinite (bool)": lambda t, lib: np.isfinite(t),
    "greater (bool)": lambda t, lib: np.greater(t, 1.5),
    "strided": lambda t, lib: np.exp(t[::2]),
}


@pytest.mark.parametrize("op", list(_UFUNCS), ids=str)
def test_numpy_ufuncs_of_a_tensor_return_torchs_tensor(op):
    """torch wraps a ufunc's result as a tensor over its memory (bool as uint8)."""
    ours = _UFUNCS[op](staged.tensor([1.0, 2.0, 3.0]), staged)
    theirs = _UFUNCS[op](torch.tensor([1.0, 2.0, 3.0]), torch)
    assert type(theirs) is torch.Tensor and type(ours) is staged.Tensor
    assert_close(ours, theirs, 1e-6, 1e-6)


def test_numpy_ufuncs_with_two_results_and_an_out_array_as_torch():
    for lib in (staged, torch):
        t = lib.tensor([1.5, -2.25])
        frac, whole = np.modf(t)
        assert type(frac) is type(whole) is lib.Tensor
        assert frac.tolist() == [0.5, -0.25] and whole.tolist() == [1.0, -2.0]
        out = np.empty(2)
        assert np.sin(t, out=out) is out  # the out array, not a tensor
        # functions that are no ufuncs give what NumPy makes
        assert type(np.concatenate([t, t])) is np.ndarray


def test_numpy_ufunc_result_shares_its_memory_and_is_a_new_leaf():
    r = np.sin(staged.zeros(2))
    assert r.is_leaf and not r.requires_grad and r._base is None
    np.asarray(r)[0] = 5.0
    assert r.tolist() == [5.0, 0.0]


@pytest.mark.parametrize(
    "convert",
    [
        lambda t: np.sin(t),
        lambda t: np.add(np.ones(3), t),
        lambda t: np.multiply(t, t.detach()),
        lambda t: np.add.reduce(t),
    ],
    ids=["unary", "ndarray + t", "t * detached", "reduce"],
)
def test_numpy_ufunc_of_a_tensor_that_requires_grad_raises_as_torch(convert):
    raises_like_torch(
        lambda lib: convert(lib.ones(3, requires_grad=True)),
        "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.",
    )


@pytest.mark.parametrize(
    "reduce", [np.sum, np.mean, np.max, np.prod, np.any], ids=lambda f: f.__name__
)
def test_numpy_reductions_call_the_method_with_numpys_keywords_and_raise_as_torch(reduce):
    """``np.sum(t)`` calls ``t.sum(axis=None, dtype=None, out=None)``: torch's methods
    take no NumPy keywords, a TypeError (whose wording is its argument parser's)."""
    raises_like_torch(lambda lib: reduce(lib.ones(3)))


# --- in-place updates of a view whose elements share memory -------------------------------
_OVERLAP = "more than one element of the written-to tensor refers to a single memory location"


@pytest.mark.parametrize(
    "update",
    [
        lambda v: v.add_(1),
        lambda v: v.mul_(2),
        lambda v: v.sin_(),
        lambda v: v.__iadd__(1),
        lambda v: v.lerp_(v.detach().clone(), 0.5),
    ],
    ids=["add_", "mul_", "sin_", "+=", "lerp_"],
)
@pytest.mark.parametrize(
    "view",
    [lambda x: x.as_strided((2, 2), (1, 1)), lambda x: x.unfold(0, 3, 1)],
    ids=["as_strided", "unfold"],
)
def test_update_of_a_view_whose_elements_share_memory_raises(view, update):
    """torch runs such an update element by element, each reading what the previous one
    wrote (x[1] += 1 twice here), a result the docs of as_strided call undefined and that
    staged's out-of-place compute cannot give: staged raises torch's error for an
    expanded tensor's (repeated elements at stride 0) instead."""
    update(view(torch.arange(6.0)))  # torch: no error
    ours = staged.arange(6.0)
    with pytest.raises(RuntimeError) as e:
        update(view(ours))
    assert _OVERLAP in message(e.value)
    assert ours.tolist() == list(range(6))  # nothing written


def test_torch_updates_an_overlapping_view_element_by_element():
    """What torch does (and staged refuses): each element reads the previous writes."""
    x = torch.arange(6.0)
    x.as_strided((2, 2), (1, 1)).add_(1)
    assert x.tolist() == [1.0, 3.0, 3.0, 3.0, 4.0, 5.0]  # x[1] incremented twice


@pytest.mark.parametrize(
    "write",
    [lambda v, lib: v.fill_(7), lambda v, lib: v.copy_(lib.tensor([[10.0, 11.0], [12.0, 13.0]]))],
    ids=["fill_", "copy_"],
)
def test_writes_that_read_nothing_into_an_overlapping_view_are_torchs(write):
    """fill_ and copy_ read no element they write: torch's result (the last write of each
    element) is staged's."""
    results = []
    for lib in (staged, torch):
        x = lib.arange(6.0)
        write(x.as_strided((2, 2), (1, 1)), lib)
        results.append(x.tolist())
    assert results[0] == results[1]


@pytest.mark.parametrize(
    "size,stride",
    [((3, 3), (2, 3)), ((3, 3), (3, 2)), ((2, 3, 4), (12, 1, 3)), ((4, 2), (2, 1))],
)
def test_update_of_an_as_strided_view_of_distinct_elements_is_torchs(size, stride):
    """Strides that do not nest but repeat no element: written as torch does."""
    results = []
    for lib in (staged, torch):
        x = lib.arange(40.0)
        x.as_strided(size, stride, 1).mul_(2).add_(1)
        results.append(x.tolist())
    assert results[0] == results[1]


def test_update_of_a_non_overlapping_view_with_grad_is_torchs():
    results = []
    for lib in (staged, torch):
        w = lib.arange(8.0, requires_grad=True)
        x = w * 1
        x.unfold(0, 2, 2).mul_(3)
        (x * lib.arange(8.0)).sum().backward()
        results.append((x.tolist(), w.grad.tolist()))
    assert results[0] == results[1]


# --- dtype-mismatch messages name torch's types ---------------------------------------------
@pytest.mark.parametrize(
    "fn,words",
    [
        (
            lambda lib: lib.lerp(lib.ones(2), lib.ones(2, dtype=lib.float64), 0.5),
            "expected dtype float for `end` but got dtype double",
        ),
        (
            lambda lib: lib.lerp(lib.ones(2), lib.ones(2), lib.ones(2, dtype=lib.float64)),
            "expected dtype float for `weight` but got dtype double",
        ),
        (
            lambda lib: lib.lerp(lib.ones(2, dtype=lib.float16), lib.ones(2), 0.5),
            "expected dtype c10::Half for `end` but got dtype float",
        ),
        (
            lambda lib: lib.ones(2).lerp_(lib.ones(2, dtype=lib.complex64), 0.5),
            "expected dtype float for `end` but got dtype c10::complex<float>",
        ),
        (
            lambda lib: lib.matmul(lib.ones(2, 2), lib.ones(2, 2, dtype=lib.float64)),
            "expected m1 and m2 to have the same dtype, but got: float != double",
        ),
        (
            lambda lib: lib.ones(2, 2, dtype=lib.int64) @ lib.ones(2, 2, dtype=lib.int32),
            "expected m1 and m2 to have the same dtype, but got: long int != int",
        ),
        (
            lambda lib: lib.nn.functional.linear(lib.ones(2, 2), lib.ones(2, 2).half()),
            "expected m1 and m2 to have the same dtype, but got: float != c10::Half",
        ),
        (
            lambda lib: lib.nn.functional.conv2d(
                lib.ones(1, 1, 3, 3), lib.ones(1, 1, 2, 2, dtype=lib.float64)
            ),
            "expected scalar type Float but found Double",
        ),
        (
            lambda lib: lib.nn.functional.conv1d(
                lib.ones(1, 1, 3), lib.ones(1, 1, 2), lib.ones(1, dtype=lib.float64)
            ),
            "Input type (float) and bias type (double) should be the same",
        ),
        (
            lambda lib: lib.nn.functional.conv2d(
                lib.ones(1, 1, 3, 3),
                lib.ones(1, 1, 2, 2, dtype=lib.float64),
                lib.ones(1, dtype=lib.bfloat16),
            ),
            "Input type (float) and bias type (c10::BFloat16) should be the same",
        ),
        (
            lambda lib: lib.nn.functional.embedding(lib.ones(3), lib.ones(3, 2)),
            "Long, Int; but got torch.FloatTensor instead (while checking arguments for embedding)",
        ),
        (
            lambda lib: lib.embedding_renorm_(lib.ones(3, 2), lib.ones(2), 1.0, 2.0),
            "but got torch.FloatTensor instead (while checking arguments for embedding_renorm_)",
        ),
        (
            lambda lib: lib.nn.functional.avg_pool1d(lib.ones(1, 1, 3, dtype=lib.int32), 2),
            "not implemented for 'Int'",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_dtype_mismatch_messages_name_torchs_types(fn, words):
    raises_like_torch(fn, words)


def test_type_meta_names_are_torchs():
    for name in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16"):
        d = getattr(torch, name)
        with pytest.raises(RuntimeError) as e:
            torch.lerp(torch.ones(1), torch.ones(1, dtype=d), 0.5)
        assert str(e.value).endswith(f"got dtype {getattr(staged, name).type_meta}")


# --- complex solve, inv, solve_triangular -------------------------------------------------
def _complex(shape, dtype, seed, diagonal=0.0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    if diagonal and shape[-1] == shape[-2]:  # well conditioned
        a = a + diagonal * np.eye(shape[-1])
    return a.astype(dtype)


_SOLVES = {
    "solve": (lambda lib, A, B: lib.linalg.solve(A, B), (3, 3), (3, 2)),
    "solve vector": (lambda lib, A, B: lib.linalg.solve(A, B), (3, 3), (3,)),
    "solve batched": (lambda lib, A, B: lib.linalg.solve(A, B), (2, 3, 3), (2, 3, 2)),
    "solve broadcast": (lambda lib, A, B: lib.linalg.solve(A, B), (2, 3, 3), (3, 2)),
    "solve left=False": (
        lambda lib, A, B: lib.linalg.solve(A, B, left=False),
        (2, 3, 3),
        (2, 4, 3),
    ),
    "solve_ex": (lambda lib, A, B: lib.linalg.solve_ex(A, B).result, (2, 3, 3), (2, 3, 2)),
    "solve_ex left=False": (
        lambda lib, A, B: lib.linalg.solve_ex(A, B, left=False).result,
        (3, 3),
        (2, 3),
    ),
    "tensorsolve": (lambda lib, A, B: lib.linalg.tensorsolve(A, B), (2, 3, 6), (2, 3)),
    "inv": (lambda lib, A: lib.linalg.inv(A), (3, 3)),
    "inv batched": (lambda lib, A: lib.linalg.inv(A), (2, 3, 3)),
    "inverse": (lambda lib, A: lib.inverse(A), (2, 3, 3)),
    "inv_ex": (lambda lib, A: lib.linalg.inv_ex(A).inverse, (2, 3, 3)),
    **{
        f"solve_triangular upper={u} left={le} unitriangular={un}": (
            lambda lib, A, B, u=u, le=le, un=un: lib.linalg.solve_triangular(
                A, B, upper=u, left=le, unitriangular=un
            ),
            (2, 3, 3),
            (2, 3, 2) if le else (2, 2, 3),
        )
        for u in (True, False)
        for le in (True, False)
        for un in (False, True)
    },
    "solve_triangular broadcast": (
        lambda lib, A, B: lib.linalg.solve_triangular(A, B, upper=False, left=False),
        (2, 3, 3),
        (4, 3),
    ),
}


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("case", list(_SOLVES), ids=str)
def test_complex_solves_values_and_gradients_are_torchs(case, dtype):
    """Values, and the gradients of the real loss sum |X|^2 (the conjugate Wirtinger
    convention: torch's .grad of a complex leaf)."""
    fn, *shapes = _SOLVES[case]
    arrays = [_complex(s, dtype, i, 4.0 if i == 0 else 0.0) for i, s in enumerate(shapes)]
    results = []
    for lib in (staged, torch):
        leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        X = fn(lib, *leaves)
        (X.abs() ** 2).sum().backward()
        results.append((X, [t.grad for t in leaves]))
    (X, grads), (tX, tgrads) = results
    tol = 2e-4 if dtype == "complex64" else 1e-10
    assert_close(X, tX, tol, tol)
    for g, tg in zip(grads, tgrads):
        assert_close(g, tg, tol, tol)


def _linalg_errors(fn) -> tuple[str, str]:
    """The messages of ``fn(lib)``'s LinAlgError under staged and torch."""
    with pytest.raises(staged.linalg.LinAlgError) as ours:
        fn(staged)
    with pytest.raises(torch.linalg.LinAlgError) as theirs:
        fn(torch)
    return message(ours.value), str(theirs.value)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_singular_matrices_raise_and_report_as_torch(dtype):
    def zeros(lib):
        return lib.zeros(2, 2, dtype=getattr(lib, dtype))

    ours, theirs = _linalg_errors(lambda lib: lib.linalg.inv(zeros(lib)))
    assert (
        ours
        == theirs
        == (
            "linalg.inv: The diagonal element 1 is zero, the inversion could not be completed "
            "because the input matrix is singular."
        )
    )
    ours, theirs = _linalg_errors(lambda lib: lib.linalg.solve(zeros(lib), zeros(lib)[0]))
    assert ours == theirs
    for lib in (staged, torch):
        assert lib.linalg.inv_ex(zeros(lib)).info.item() == 1


def test_singular_inv_names_the_first_zero_pivot_and_the_batch_element_as_torch():
    def batch(lib):
        A = lib.ones(2, 3, 3, dtype=lib.float64)
        A[0] = lib.eye(3)
        return lib.linalg.inv(A)

    ours, theirs = _linalg_errors(batch)
    assert ours == theirs
    assert theirs.startswith("linalg.inv: (Batch element 1): The diagonal element 2 is zero")
    # singular in any rounding (halves and small integers): [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    # is not, its last float32 pivot is 0 or 1e-7 as the CPU's LAPACK kernel rounds
    ours, theirs = _linalg_errors(
        lambda lib: lib.linalg.inv(lib.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]]))
    )
    assert ours == theirs
    assert theirs.startswith("linalg.inv: The diagonal element 3 is zero")


@pytest.mark.parametrize(
    "a_dtype,b_dtype",
    [
        ("complex64", "complex128"),
        ("float64", "float32"),
        ("float32", "float64"),
    ],
)
def test_solve_triangular_result_has_as_dtype_as_torchs(a_dtype, b_dtype):
    """torch converts B to A's dtype (no promotion); the gradient of B has B's dtype."""
    results = []
    for lib in (staged, torch):
        a, b = _complex((3, 3), "complex128", 0, 4.0), _complex((3, 2), "complex128", 1)
        A = lib.tensor(a if "complex" in a_dtype else a.real).to(getattr(lib, a_dtype))
        B = lib.tensor(b if "complex" in b_dtype else b.real).to(getattr(lib, b_dtype))
        A.requires_grad_()
        B.requires_grad_()
        X = lib.linalg.solve_triangular(A, B, upper=True)
        (X.abs() ** 2).sum().backward()
        results.append((X, A.grad, B.grad))
    for ours, theirs in zip(*results):
        assert_close(ours, theirs, 1e-5, 1e-5)


def test_solve_triangular_of_a_complex_b_and_a_real_a_discards_its_imaginary_part_as_torch():
    # (torch also warns that the cast discards it; staged's .to(real) does not warn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        X, tX = (
            lib.linalg.solve_triangular(lib.eye(2), lib.tensor([[1 + 2j], [3 + 0j]]), upper=True)
            for lib in (staged, torch)
        )
    assert_close(X, tX)
