"""torch's NumPy-style names and linalg shortcuts beyond their values (which the op sweep
checks): where they exist (function, method, alias, property), their errors on bad
arguments, and what needs data that a capture does not have."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import message

NAMES = (
    "unbind tensor_split hsplit vsplit dsplit ravel concat concatenate reshape_as unfold "
    "rot90 diag_embed diagflat tril_indices triu_indices adjoint sum_to_size inner ger vdot "
    "dist addmv addr signbit copysign logical_xor isneginf isposinf "
    "isreal isin aminmax msort argwhere cov corrcoef trapezoid trapz cumulative_trapezoid "
    "rsub is_complex is_nonzero is_same_size is_signed inverse det logdet slogdet "
    "matrix_power cholesky"
).split()


@pytest.mark.parametrize("name", NAMES)
def test_a_function_and_a_method_where_torch_has_them(name):
    assert hasattr(staged, name) == hasattr(torch, name)
    for method in (name, name + "_"):
        assert hasattr(staged.Tensor, method) == hasattr(torch.Tensor, method), method


# every row fails in torch 2.13
CASES = {
    "unbind of a 0-d tensor": lambda t: t.unbind(t.tensor(1.0)),
    "tensor_split of a 0-d tensor": lambda t: t.tensor_split(t.tensor(1.0), 2),
    "tensor_split into 0 sections": lambda t: t.tensor_split(t.arange(5), 0),
    "tensor_split at float indices": lambda t: t.tensor_split(t.arange(5), t.tensor([1.0])),
    "tensor_split at a matrix of indices": lambda t: t.tensor_split(t.arange(5), t.tensor([[1]])),
    "hsplit of a 0-d tensor": lambda t: t.hsplit(t.tensor(1.0), 2),
    "hsplit into sections that do not divide": lambda t: t.hsplit(t.ones(2, 3), 2),
    "vsplit of a 1-D tensor": lambda t: t.vsplit(t.ones(6), 2),
    "dsplit into 0 sections": lambda t: t.dsplit(t.ones(1, 2, 3), 0),
    "unfold wider than the dim": lambda t: t.arange(5.0).unfold(0, 6, 1),
    "unfold of a negative size": lambda t: t.arange(5.0).unfold(0, -1, 1),
    "unfold with step 0": lambda t: t.arange(5.0).unfold(0, 2, 0),
    "mH of a vector": lambda t: t.ones(3).mH,
    "adjoint of a vector": lambda t: t.adjoint(t.ones(3)),
    "sum_to_size to a size that does not expand": lambda t: t.ones(2, 3).sum_to_size(2, 2),
    "rot90 about one dim": lambda t: t.rot90(t.ones(2, 3), 1, [0]),
    "rot90 of a vector": lambda t: t.rot90(t.ones(3)),
    "rot90 about a dim twice": lambda t: t.rot90(t.ones(2, 3), 1, [0, -2]),
    "diag_embed into one dim": lambda t: t.diag_embed(t.ones(2, 3), 1, 0, 0),
    "tril_indices of negative rows": lambda t: t.tril_indices(-1, 4),
    "triu_indices of float dtype": lambda t: t.triu_indices(3, 4, dtype=t.float32),
    "inner of other last dims": lambda t: t.inner(t.ones(2, 3), t.ones(2, 4)),
    "inner of other dtypes": lambda t: t.inner(t.ones(3), t.ones(3, dtype=t.float64)),
    "vdot of matrices": lambda t: t.vdot(t.ones(2, 3), t.ones(3)),
    "vdot of other lengths": lambda t: t.vdot(t.ones(3), t.ones(4)),
    "dist of integers": lambda t: t.dist(t.arange(3), t.arange(3)),
    "addmv of other dtypes": lambda t: t.addmv(
        t.ones(3), t.ones(3, 2, dtype=t.float64), t.ones(2, dtype=t.float64)
    ),
    "addmv of a mismatched input": lambda t: t.addmv(t.ones(2), t.ones(3, 2), t.ones(2)),
    "addr of a matrix vec1": lambda t: t.addr(t.ones(3, 2), t.ones(3, 1), t.ones(2)),
    "signbit of complex": lambda t: t.signbit(t.tensor([1j])),
    "copysign of complex": lambda t: t.copysign(t.tensor([1j]), t.tensor([-1.0])),
    "isposinf of complex": lambda t: t.isposinf(t.tensor([1j])),
    "isin of bools": lambda t: t.isin(t.tensor([True]), t.tensor([True])),
    "aminmax of an empty tensor": lambda t: t.aminmax(t.ones(0, 3)),
    "aminmax over an empty dim": lambda t: t.aminmax(t.ones(2, 0), dim=1),
    "cov of a 3-D input": lambda t: t.cov(t.ones(2, 3, 4)),
    "cov of float fweights": lambda t: t.cov(t.ones(2, 3), fweights=t.tensor([1.0, 2, 1])),
    "cov of negative fweights": lambda t: t.cov(t.ones(2, 3), fweights=t.tensor([1, -2, 1])),
    "cov of aweights summing to 0": lambda t: t.cov(t.ones(2, 3), aweights=t.zeros(3)),
    "corrcoef of a 3-D input": lambda t: t.corrcoef(t.ones(2, 3, 4)),
    "trapezoid of a 0-d tensor": lambda t: t.trapezoid(t.tensor(3.0)),
    "trapezoid of bools": lambda t: t.trapezoid(t.tensor([True])),
    "trapezoid of an x per other dim": lambda t: t.trapezoid(t.ones(3, 4), t.arange(4.0), dim=0),
    "trapezoid with a complex dx": lambda t: t.trapezoid(t.ones(3), dx=1j),
    "is_nonzero of no values": lambda t: t.is_nonzero(t.tensor([])),
    "is_nonzero of two values": lambda t: t.is_nonzero(t.tensor([1.0, 2.0])),
    "det of a vector": lambda t: t.det(t.ones(3)),
}


def _raised(fn, lib):
    with pytest.raises(Exception) as info:
        fn(lib)
    return info.value


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_arguments_raise_torchs_error(name):
    want, got = _raised(CASES[name], torch), _raised(CASES[name], staged)
    assert isinstance(got, type(want)), (type(got), got, type(want), want)
    assert message(got).splitlines()[0].startswith(str(want).splitlines()[0].rstrip("."))


def test_mT_and_mH_of_a_0d_tensor_are_the_identity_and_conj():
    """torch 2.13 returns them (with a deprecation warning); staged does, without one."""
    z = staged.tensor(1 + 2j)
    assert z.mT is z
    assert z.mH.item() == 1 - 2j
    a = staged.tensor([[1 + 1j, 2j], [3, 4 - 1j]])
    np.testing.assert_array_equal(np.asarray(a.mH.resolve_conj()), np.asarray(a).conj().T)
    np.testing.assert_array_equal(
        np.asarray(staged.adjoint(a).resolve_conj()), np.asarray(a).conj().T
    )


def test_the_linalg_shortcuts_are_staged_linalgs():
    a = staged.tensor([[4.0, 1.0], [1.0, 3.0]])
    la = staged.linalg
    for got, want in (
        (a.inverse(), la.inv(a)),
        (a.det(), la.det(a)),
        (a.logdet(), la.slogdet(a).logabsdet),
        (a.matrix_power(3), la.matrix_power(a, 3)),
        (a.cholesky(True), la.cholesky(a, upper=True)),
        (staged.cholesky(a), la.cholesky(a)),
    ):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert staged.slogdet(a) == la.slogdet(a)
    assert np.isnan(staged.logdet(staged.tensor([[0.0, 1.0], [1.0, 0.0]])).item())  # det -1


def test_ops_reading_their_data_name_themselves_under_capture():
    x = staged.arange(6.0)
    for fn in (
        lambda x: staged.argwhere(x),
        lambda x: staged.tensor_split(x, (x[:2] > 0).long().sum()),
    ):
        with pytest.raises(RuntimeError, match="data-dependent output shape"):
            staged.capture(fn, x)
