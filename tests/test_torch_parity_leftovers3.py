"""More leftover differences from torch 2.13, each checked against torch: the grad_fn
names of indexing and the view ops, conv_transpose with a bias of another dtype and
average pooling of int64, the warning of a complex-to-real cast, embedding_bag's index
error, and complex LU and Cholesky factorizations and solves with their gradients."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
import torch

import staged
from staged import viz
from tests import jobs
from tests.checks import assert_close, message, raises_like_torch


# --- grad_fn names of indexing and the view ops ----------------------------------------------
def _idx(lib):
    return lib.tensor([0, 2])


_VIEWS = {
    "x[0]": lambda x, lib: x[0],
    "x[-1]": lambda x, lib: x[-1],
    "x[0-d tensor]": lambda x, lib: x[lib.tensor(1)],
    "x[np.int64]": lambda x, lib: x[np.int64(1)],
    "x[(0,)]": lambda x, lib: x[(0,)],
    "x[1:3]": lambda x, lib: x[1:3],
    "x[0:3] whole": lambda x, lib: x[0:3],
    "x[::2]": lambda x, lib: x[::2],
    "x[:]": lambda x, lib: x[:],
    "x[:, :]": lambda x, lib: x[:, :],
    "x[...]": lambda x, lib: x[...],
    "x[None]": lambda x, lib: x[None],
    "x[:, None]": lambda x, lib: x[:, None],
    "x[..., None]": lambda x, lib: x[..., None],
    "x[None, 0]": lambda x, lib: x[None, 0],
    "x[0, None]": lambda x, lib: x[0, None],
    "x[0, 1]": lambda x, lib: x[0, 1],
    "x[0, :]": lambda x, lib: x[0, :],
    "x[0, 1:3]": lambda x, lib: x[0, 1:3],
    "x[1:3, 0]": lambda x, lib: x[1:3, 0],
    "x[:, 1:3, None, :]": lambda x, lib: x[:, 1:3, None, :],
    "x[:, :, 0]": lambda x, lib: x[:, :, 0],
    "x[idx]": lambda x, lib: x[_idx(lib)],
    "x[0, idx]": lambda x, lib: x[0, _idx(lib)],
    "x[:, idx, 0]": lambda x, lib: x[:, _idx(lib), 0],
    "x[[0, 1]]": lambda x, lib: x[[0, 1]],
    "x[mask]": lambda x, lib: x[x > 5],
    "x[True]": lambda x, lib: x[True],
    "select": lambda x, lib: x.select(1, 2),
    "select -1": lambda x, lib: x.select(-1, 0),
    "narrow": lambda x, lib: x.narrow(1, 1, 2),
    "unsqueeze": lambda x, lib: x.unsqueeze(0),
    "unsqueeze 0-d": lambda x, lib: x[0, 0, 0].unsqueeze(0),
    "squeeze()": lambda x, lib: x.squeeze(),
    "squeeze() of none": lambda x, lib: x[:, :, 0].squeeze(),
    "squeeze(dim)": lambda x, lib: x.squeeze(2),
    "squeeze(dims)": lambda x, lib: x.squeeze((0, 2)),
    "squeeze_()": lambda x, lib: x.clone().squeeze_(),
    "squeeze_(dim)": lambda x, lib: x.clone().squeeze_(2),
    "squeeze_(dims)": lambda x, lib: x.clone().squeeze_((0, 2)),
    "unsqueeze_": lambda x, lib: x.clone().unsqueeze_(0),
    "t_": lambda x, lib: x[:, :, 0].clone().t_(),
    "transpose_": lambda x, lib: x.clone().transpose_(0, 1),
    "swapdims_": lambda x, lib: x.clone().swapdims_(0, 1),
    "diagonal": lambda x, lib: x.diagonal(),
    "diagonal offset": lambda x, lib: lib.diagonal(x, 1, 1, 0),
    "diag 2-d": lambda x, lib: lib.diag(x[:, :, 0]),
    "expand": lambda x, lib: x.expand(2, 3, 4, 5),
    "expand same": lambda x, lib: x.expand(-1, 4, 1),
    "expand_as same": lambda x, lib: x.expand_as(x),
    "broadcast_to same": lambda x, lib: lib.broadcast_to(x, (3, 4, 1)),
    "unbind": lambda x, lib: x.unbind(1)[1],
    "split": lambda x, lib: x.split(3, 1)[1],
    "split sizes": lambda x, lib: x.split([1, 3], 1)[1],
    "split_with_sizes": lambda x, lib: x.split_with_sizes([1, 3], 1)[0],
    "chunk": lambda x, lib: x.chunk(2, 1)[1],
    "unsafe_split": lambda x, lib: x.unsafe_split(2, 1)[0],
    "unsafe_chunk": lambda x, lib: x.unsafe_chunk(2, 1)[1],
    "unsafe_split_with_sizes": lambda x, lib: x.unsafe_split_with_sizes([1, 3], 1)[0],
    "tensor_split": lambda x, lib: x.tensor_split(2, 1)[0],
    "unfold": lambda x, lib: x.unfold(1, 2, 1),
    "flatten": lambda x, lib: x.flatten(),
    "flatten 0-d": lambda x, lib: x[0, 0, 0].flatten(),
    "flatten(1)": lambda x, lib: x.flatten(1),
    "flatten transposed": lambda x, lib: x.transpose(0, 1).flatten(),
    "reshape": lambda x, lib: x.reshape(12),
    "reshape same": lambda x, lib: x.reshape(3, 4, 1),
    "reshape transposed": lambda x, lib: x.transpose(0, 1).reshape(12),
    "reshape transposed viewable": lambda x, lib: x.transpose(0, 1).reshape(4, 3),
    "reshape expanded": lambda x, lib: x.expand(2, 3, 4, 1).reshape(24),
    "reshape expanded viewable": lambda x, lib: x[0, 0].expand(3, 1).reshape(3),
    "reshape sliced": lambda x, lib: x[:, 1:3].reshape(6),
    "reshape rows": lambda x, lib: x[1:3].reshape(8),
    "reshape_as transposed": lambda x, lib: x.transpose(0, 1).reshape_as(x.transpose(0, 1)),
    "view": lambda x, lib: x.view(12),
    "view_as": lambda x, lib: x.view_as(x),
    "unflatten transposed": lambda x, lib: x.transpose(0, 1).unflatten(0, (2, 2)),
    "ravel transposed": lambda x, lib: x.transpose(0, 1).ravel(),
    "atleast_2d 1-d": lambda x, lib: lib.atleast_2d(x[:, 0, 0]),
    "atleast_2d 0-d": lambda x, lib: lib.atleast_2d(x[0, 0, 0]),
    "atleast_3d 2-d": lambda x, lib: lib.atleast_3d(x[:, :, 0]),
    "transpose": lambda x, lib: x.transpose(0, 1),
    "permute": lambda x, lib: x.permute(2, 0, 1),
}


@pytest.mark.parametrize("op", list(_VIEWS), ids=str)
def test_view_grad_fn_names_and_gradients_are_torchs(op):
    data = np.arange(12.0).reshape(3, 4, 1)
    results = {}
    for lib in (staged, torch):
        x = lib.tensor(data, requires_grad=True)
        y = _VIEWS[op](x, lib)
        name = y.grad_fn.name()
        (y * lib.arange(y.numel()).reshape(y.shape)).sum().backward()
        results[lib] = name, x.grad
    (ours, g), (theirs, tg) = results[staged], results[torch]
    assert ours == theirs
    assert_close(g, tg, 0, 0)


def test_flatten_of_one_dim_is_the_tensor_itself_as_torchs():
    for lib in (staged, torch):
        x = lib.ones(3, requires_grad=True)
        assert x.flatten() is x and x.flatten(0, 0) is x
        assert lib.ones(2, 3).flatten(1, 1).grad_fn is None


def test_renamed_nodes_are_classes_of_their_name_made_once():
    x = staged.ones(3, 4, requires_grad=True)
    a, b = x.mean(0).grad_fn, x.mean(1).grad_fn  # mean's Node, named for a dim
    assert type(a) is type(b) and type(a).__name__ == a.name() == "MeanBackward1"
    assert b._saved_dims == (1,)  # the kernel's saved values stay
    s = x[1].grad_fn  # x[i]: its own kernel, with torch's saved dim and index
    assert type(s).__name__ == s.name() == "SelectBackward0"
    assert (s._saved_dim, s._saved_index) == (0, 1)
    # an op whose node torch names as staged does keeps the primitive's own class
    for fn in (x[1:3].grad_fn, x.reshape(12).grad_fn, x.expand(2, 3, 4).grad_fn):
        assert "name" not in vars(type(fn)) and type(fn).__name__ == fn.name()


def test_make_dot_labels_the_renamed_nodes():
    x = staged.ones(3, 4, requires_grad=True)
    src = viz.make_dot(x[0].unsqueeze(0)[:, None].sum()).source
    for label in ("SelectBackward0", "UnsqueezeBackward0", "SumBackward0"):
        assert label in src, label
    assert "ViewBackward0" not in src


def test_multi_output_pieces_keep_torchs_error_with_their_new_names():
    for lib in (staged, torch):
        x = lib.ones(4, requires_grad=True).clone()
        piece = x.split(2)[1]
        with pytest.raises(RuntimeError) as e:
            piece.mul_(2)
        assert message(e.value).startswith("Output 1 of Split is a view")


# --- conv_transpose with a bias of another dtype, average pooling of int64 -------------------
@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize(
    "x_dtype, bias_dtype",
    [("float32", "float64"), ("float32", "float16"), ("float16", "float64"), ("float64", "int64")],
)
def test_conv_transpose_adds_a_bias_of_another_dtype_as_torch(n, x_dtype, bias_dtype):
    rng = np.random.default_rng(n)
    x, w = rng.standard_normal((1, 2) + (3,) * n), rng.standard_normal((2, 3) + (2,) * n)
    b = rng.standard_normal(3) * 10
    results = {}
    for lib in (staged, torch):
        fn = getattr(lib.nn.functional, f"conv_transpose{n}d")
        xd, bd = getattr(lib, x_dtype), getattr(lib, bias_dtype)
        bias = lib.tensor(b).to(bd)
        bias.requires_grad_(bias.is_floating_point())
        y = fn(lib.tensor(x).to(xd), lib.tensor(w).to(xd), bias, stride=2)
        y.float().sum().backward() if bias.requires_grad else None
        results[lib] = y, bias.grad
    (y, g), (ty, tg) = results[staged], results[torch]
    tol = 2e-3 if "float16" in (x_dtype, bias_dtype) else 1e-6
    assert_close(y, ty, tol, tol)
    if tg is not None:
        assert_close(g, tg, 0, 0)


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib: lib.nn.functional.conv_transpose3d(
            lib.ones(1, 2, 3, 3, 3), lib.ones(2, 2, 2, 2, 2), lib.ones(2, dtype=lib.float64)
        ),
        lambda lib: lib.nn.functional.conv_transpose2d(
            lib.ones(1, 2, 3, 3), lib.ones(2, 2, 2, 2, dtype=lib.float64), lib.ones(2)
        ),
        lambda lib: lib.nn.functional.conv2d(
            lib.ones(1, 2, 3, 3), lib.ones(2, 2, 2, 2), lib.ones(2, dtype=lib.float64)
        ),
        lambda lib: lib.nn.functional.conv_transpose2d(
            lib.ones(1, 2, 3, 3), lib.ones(2, 2, 2, 2), lib.ones(2, dtype=lib.complex64)
        ),
    ],
    ids=["transpose3d bias", "transpose2d weight", "conv2d bias", "complex bias"],
)
def test_convolution_dtype_errors_stay_torchs(fn):
    with pytest.raises(RuntimeError) as theirs:
        fn(torch)
    with pytest.raises(RuntimeError) as ours:
        fn(staged)
    assert message(ours.value) == str(theirs.value)


_POOLS = {
    "avg_pool1d": lambda F, x: F.avg_pool1d(x.reshape(2, 1, 12), 3, 2, 1, ceil_mode=True),
    "avg_pool2d": lambda F, x: F.avg_pool2d(x.reshape(1, 2, 3, 4), 2, 1),
    "avg_pool2d no pad count": lambda F, x: F.avg_pool2d(
        x.reshape(2, 3, 4), 2, 2, 1, count_include_pad=False
    ),
    "avg_pool2d divisor": lambda F, x: F.avg_pool2d(x.reshape(1, 2, 3, 4), 2, divisor_override=3),
    "avg_pool3d": lambda F, x: F.avg_pool3d(x.reshape(1, 2, 2, 3, 2), 2, 1),
    "lp_pool2d": lambda F, x: F.lp_pool2d(x.reshape(1, 2, 3, 4).abs(), 2, 2),
}


@pytest.mark.parametrize("op", list(_POOLS), ids=str)
def test_average_pooling_of_int64_is_torchs(op):
    data = np.random.default_rng(3).integers(-50, 50, 24)
    ours = _POOLS[op](staged.nn.functional, staged.tensor(data))
    theirs = _POOLS[op](torch.nn.functional, torch.tensor(data))
    assert_close(ours, theirs, 1e-6, 0)


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib: lib.nn.functional.avg_pool2d(lib.ones(1, 2, 2, dtype=lib.int32), 2),
        lambda lib: lib.nn.functional.avg_pool1d(lib.ones(1, 2, dtype=lib.uint8), 2),
        lambda lib: lib.nn.functional.avg_pool2d(lib.ones(1, 2, 2, dtype=lib.bool), 2),
        lambda lib: lib.nn.functional.adaptive_avg_pool1d(lib.ones(1, 4, dtype=lib.int64), 2),
        lambda lib: lib.nn.functional.adaptive_avg_pool2d(lib.ones(1, 4, 4, dtype=lib.int64), 2),
        lambda lib: lib.nn.functional.avg_pool3d(lib.ones(1, 2, 2, 2, dtype=lib.int32), 2),
        lambda lib: lib.nn.functional.adaptive_avg_pool3d(lib.ones(1, 4, 4, 4).long(), 2),
    ],
    ids=[
        "avg2d int32",
        "avg1d uint8",
        "avg2d bool",
        "adaptive1d",
        "adaptive2d",
        "avg3d",
        "adaptive3d",
    ],
)
def test_integer_pooling_refusals_are_torchs(fn):
    with pytest.raises(NotImplementedError) as theirs:
        fn(torch)
    with pytest.raises(NotImplementedError) as ours:
        fn(staged)
    assert message(ours.value) == str(theirs.value)


# --- the warning of a complex-to-real cast ---------------------------------------------------
_CASTS = [
    "c.to(lib.float32)",
    "c.type(lib.float64)",
    "c.float()",
    "c.long()",
    "lib.zeros(2).copy_(c)",
    "z = lib.zeros(2); z[:] = c",
    "lib.zeros(2).fill_(c[0])",
]
_WARNINGS = """
c = lib.tensor([1 + 2j, -3j])
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    lib.ones(2).to(lib.float64).long(); c.bool(); c.to(lib.complex128)  # nothing to say
    print(len(w))
    {cast}
    {cast}
    print([str(m.message).split(" (Triggered")[0] for m in w], w and w[0].category.__name__)
"""
# Note [a fresh process per case]: torch's copy_ warns once a process (TORCH_WARN_ONCE), so
# each case runs in a process of its own: forked from one that imported the library and
# warned of nothing, whose warn-once state it starts with, as a new process would (one
# interpreter per case and library started 14, each importing torch or staged).
_FORKS = """
import os, sys, traceback, warnings
import {lib} as lib
for case in {cases!r}:
    sys.stdout.flush()
    if os.fork() == 0:
        try:
            exec(case)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        sys.stdout.flush()
        os._exit(0)
    print("exit", os.waitstatus_to_exitcode(os.wait()[1]), "--", flush=True)
"""


@pytest.fixture(scope="module")
def cast_warnings():
    """{lib: {cast: what its process printed, and its exit status}} (Note [a fresh process
    per case])."""
    cases = [_WARNINGS.format(cast=cast) for cast in _CASTS]
    outs = {}
    for lib in ("staged", "torch"):
        done = jobs.run([sys.executable, "-c", _FORKS.format(lib=lib, cases=cases)], timeout=240)
        assert done.returncode == 0, done.stderr
        printed = done.stdout.split(" --\n")[:-1]
        assert len(printed) == len(_CASTS), (done.stdout, done.stderr)
        outs[lib] = dict(zip(_CASTS, printed))
    return outs


@pytest.mark.parametrize("cast", _CASTS, ids=str)
def test_a_complex_to_real_cast_warns_once_a_process_as_torch(cast, cast_warnings):
    ours, theirs = cast_warnings["staged"][cast], cast_warnings["torch"][cast]
    assert ours.endswith("exit 0"), ours
    assert ours == theirs
    assert "['Casting complex values to real discards the imaginary part'] UserWarning" in ours


def test_the_cast_warning_names_the_callers_line_and_real_casts_say_nothing(monkeypatch):
    monkeypatch.setattr(staged._where, "_WARNED_ONCE", set())
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        staged.arange(3).to(staged.float32).half().to(staged.complex64).bool()
        assert not w
        staged.tensor([1j]).to(staged.float32)
        staged.tensor([1j]).to(staged.float32)
        assert [m.filename for m in w] == [__file__]  # once a process, as torch's
        staged.set_warn_always(True)  # then every time, as torch's
        try:
            staged.tensor([1j]).to(staged.float32)
            staged.tensor([1j]).to(staged.float32)
        finally:
            staged.set_warn_always(False)
    assert [m.filename for m in w] == [__file__] * 3


def test_complex_to_bool_is_true_where_either_part_is_nonzero_as_torch():
    data = np.array([1j, 0, 2, 1 - 1j, np.nan * 1j])
    assert_close(staged.tensor(data).bool(), torch.tensor(data).bool(), 0, 0)


# --- embedding_bag's index error -------------------------------------------------------------
@pytest.mark.parametrize("which", ["input", "offsets"])
def test_embedding_bag_index_dtype_error_is_torchs(which):
    def fn(lib):
        ints, floats = lib.tensor([0, 1]), lib.tensor([0.0])
        inp, offsets = (floats, lib.tensor([0])) if which == "input" else (ints, floats)
        return lib.nn.functional.embedding_bag(inp, lib.ones(3, 2), offsets)

    with pytest.raises(RuntimeError) as theirs:
        fn(torch)
    with pytest.raises(RuntimeError) as ours:
        fn(staged)
    assert message(ours.value) == str(theirs.value)


# --- complex LU and Cholesky: factorizations, solves and gradients ---------------------------
def _complex(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _hermitian(lib, a):
    """A Hermitian positive-definite matrix made from ``a`` (a leaf: its gradient too)."""
    return a @ a.mH + 3 * lib.eye(a.shape[-1], dtype=a.dtype)


_FACTORIZATIONS = {
    "lu_factor": lambda lib, a, b: [lib.linalg.lu_factor(a).LU],
    "lu_factor_ex": lambda lib, a, b: [lib.linalg.lu_factor_ex(a).LU],
    "lu": lambda lib, a, b: list(lib.linalg.lu(a)),
    "lu_unpack": lambda lib, a, b: list(lib.lu_unpack(*lib.linalg.lu_factor(a))),
    "lu_solve": lambda lib, a, b: [lib.linalg.lu_solve(*lib.linalg.lu_factor(a), b)],
    "lu_solve adjoint": lambda lib, a, b: [
        lib.linalg.lu_solve(*lib.linalg.lu_factor(a), b, adjoint=True)
    ],
    "lu_solve right": lambda lib, a, b: [
        lib.linalg.lu_solve(*lib.linalg.lu_factor(a), b.mT, left=False)
    ],
    "lu_solve right adjoint": lambda lib, a, b: [
        lib.linalg.lu_solve(*lib.linalg.lu_factor(a), b.mT, left=False, adjoint=True)
    ],
    "cholesky": lambda lib, a, b: [lib.linalg.cholesky(_hermitian(lib, a))],
    "cholesky upper": lambda lib, a, b: [lib.linalg.cholesky(_hermitian(lib, a), upper=True)],
    "cholesky_ex": lambda lib, a, b: [lib.linalg.cholesky_ex(_hermitian(lib, a)).L],
    "cholesky_ex upper": lambda lib, a, b: [
        lib.linalg.cholesky_ex(_hermitian(lib, a), upper=True).L
    ],
    "cholesky_solve": lambda lib, a, b: [
        lib.cholesky_solve(b, lib.linalg.cholesky(_hermitian(lib, a)))
    ],
    "cholesky_solve upper": lambda lib, a, b: [
        lib.cholesky_solve(b, lib.linalg.cholesky(_hermitian(lib, a), upper=True), upper=True)
    ],
}


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("case", list(_FACTORIZATIONS), ids=str)
def test_complex_lu_and_cholesky_values_and_gradients_are_torchs(case, dtype):
    """Values, conj bits, and the .grad of a real loss (torch's convention for a complex
    leaf)."""
    arrays = _complex((2, 3, 3), dtype, 0), _complex((2, 3, 2), dtype, 1)
    results = {}
    for lib in (staged, torch):
        a, b = (lib.tensor(v, requires_grad=True) for v in arrays)
        outs = _FACTORIZATIONS[case](lib, a, b)
        conj = [o.is_conj() for o in outs]
        sum((o.abs() ** 2 * (1 + lib.arange(o.shape[-1]))).sum() for o in outs).backward()
        results[lib] = [o.detach().resolve_conj() for o in outs], conj, a.grad, b.grad
    ours, theirs = results[staged], results[torch]
    tol = 2e-4 if dtype == "complex64" else 1e-10
    for o, t in zip(ours[0], theirs[0]):
        assert_close(o, t, tol, tol)
    assert ours[1] == theirs[1]
    for g, tg in zip(ours[2:], theirs[2:]):
        if tg is None:
            assert g is None
        else:
            assert_close(g, tg, 10 * tol, 10 * tol)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_lu_pivots_follow_lapacks_largest_re_plus_im(dtype):
    """LAPACK's izamax picks the largest |re| + |im|, not the largest modulus."""
    a = np.array([[1 + 1j, 2], [1.45, 1], [0.1j, 3]], dtype)  # |1+1j| < 1.45 < |re|+|im|
    ours = staged.linalg.lu_factor(staged.tensor(a))
    theirs = torch.linalg.lu_factor(torch.tensor(a))
    assert_close(ours.pivots, theirs.pivots, 0, 0)
    assert_close(ours.LU, theirs.LU, 1e-6, 1e-6)


def test_complex_not_positive_definite_and_singular_matrices_raise_as_torch():
    a = np.array([[1.0, 2j], [-2j, 1.0]], np.complex128)  # eigenvalues -1, 3
    errors = []
    for lib in (staged, torch):
        assert lib.linalg.cholesky_ex(lib.tensor(a)).info.item() == 2
        with pytest.raises(lib.linalg.LinAlgError) as e:
            lib.linalg.cholesky(lib.tensor(a))
        errors.append(message(e.value))
    assert errors[0] == errors[1]
    singular = np.array([[1, 1j], [1j, -1]], np.complex128)
    raises_like_torch(lambda lib: lib.linalg.lu_factor(lib.tensor(singular)), "U[2,2] is zero")


@pytest.mark.parametrize("sizes", [(2, 1), (1, 1), (2, 2, 1)])
def test_repeat_is_named_repeatbackward0_as_torchs(sizes):
    def run(L):
        x = L.arange(6.0).reshape(2, 3).requires_grad_()
        y = x.repeat(*sizes)
        (y * L.arange(float(y.numel())).reshape(y.shape)).sum().backward()
        return y.grad_fn.name(), x.grad.tolist()

    assert run(staged) == run(torch)
