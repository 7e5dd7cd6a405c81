"""staged.linalg beyond the op sweep (values, gradients and compiled runs are swept in
tests/ops/db/math.py): torch's errors for bad arguments, a clear one for what is missing,
and the module under ``import torch`` of the compatibility shim."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import staged
from tests.checks import raises_like_torch


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda lib: lib.linalg.norm(lib.ones(2, 2, 2), ord=2), ["must be 1D or 2D", "Got 3D"]),
        (lambda lib: lib.linalg.vector_norm(lib.ones(3, dtype=lib.int64)), ["floating point"]),
        (lambda lib: lib.linalg.matrix_norm(lib.ones(3)), ["at least 2 dimensions"]),
        (lambda lib: lib.linalg.vector_norm(lib.ones(3), ord="fro"), ["must be Number, not str"]),
        (lambda lib: lib.linalg.matrix_norm(lib.ones(2, 2), ord=3), ["Order 3 not supported"]),
        (lambda lib: lib.linalg.multi_dot([lib.ones(2, 2)]), ["at least 2 tensors"]),
        (lambda lib: lib.linalg.matrix_power(lib.ones(2, 3), 2), ["square matrices"]),
        (lambda lib: lib.linalg.solve(lib.ones(2, 3), lib.ones(2)), ["2 by 3 matrices"]),
        (
            lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(4)),
            ["Incompatible shapes", "(3x3 and 4x1)"],
        ),
        (
            lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(3, dtype=lib.float64)),
            ["same dtype", "A of type Float and B of type Double"],
        ),
        (lambda lib: lib.linalg.inv(lib.ones(3)), ["at least 2 dimensions"]),
        (lambda lib: lib.linalg.det(lib.eye(2, dtype=lib.int64)), ["floating point"]),
    ],
)
def test_bad_arguments_raise_torchs_errors(call, words):
    raises_like_torch(call, *words)


def test_cholesky_of_a_matrix_that_is_not_positive_definite_raises_a_linalg_error():
    not_pd = [[1.0, 2.0], [2.0, 1.0]]
    with pytest.raises(torch.linalg.LinAlgError) as theirs:
        torch.linalg.cholesky(torch.tensor(not_pd))
    with pytest.raises(staged.linalg.LinAlgError) as ours:
        staged.linalg.cholesky(staged.tensor(not_pd))
    assert isinstance(ours.value, RuntimeError)  # as torch's, an except RuntimeError catches it
    assert str(theirs.value) in str(ours.value)


SINGULAR = [[1.0, 2.0], [2.0, 4.0]]


def test_a_singular_matrix_raises_a_linalg_error_eagerly_and_when_a_compiled_step_is_read():
    with pytest.raises(torch.linalg.LinAlgError) as theirs:
        torch.linalg.solve(torch.tensor(SINGULAR), torch.ones(2))
    with pytest.raises(staged.linalg.LinAlgError) as ours:
        staged.linalg.solve(staged.tensor(SINGULAR), staged.ones(2))
    assert str(theirs.value) in str(ours.value)
    with pytest.raises(staged.linalg.LinAlgError, match="inversion could not be completed"):
        staged.linalg.inv(staged.tensor(SINGULAR))
    step = staged.compile(lambda a, b: staged.linalg.solve(a, b) * 2)
    out = step(staged.tensor(SINGULAR), staged.ones(2))
    with pytest.raises(staged.linalg.LinAlgError, match="singular"):
        out.numpy()
    np.testing.assert_allclose(step(staged.eye(2) * 4, staged.ones(2)).numpy(), [0.5, 0.5])
    # no error for the determinants: 0, and a sign 0 with logabsdet -inf, as torch's
    assert staged.linalg.det(staged.tensor(SINGULAR)).item() == 0
    sign, logabsdet = staged.linalg.slogdet(staged.tensor(SINGULAR))
    assert (sign.item(), logabsdet.item()) == (0.0, -np.inf)


def test_a_compiled_step_with_a_cholesky_solve_and_norm_equals_eager():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3))
    spd = staged.tensor(a @ a.T + 3 * np.eye(3), requires_grad=True)
    b = staged.tensor(rng.standard_normal((3, 2)))

    def step(m, rhs):
        x = staged.linalg.solve_triangular(staged.linalg.cholesky(m), rhs, upper=False)
        loss = staged.linalg.vector_norm(x, ord=3) + staged.linalg.matrix_norm(x, ord=1)
        (g,) = staged.autograd.grad(loss, m)
        return loss.detach(), g

    want = step(spd, b)
    got = staged.compile(step)(spd, b)
    for w, o in zip(want, got):
        np.testing.assert_allclose(o.numpy(), w.numpy(), rtol=1e-12)


def test_a_compiled_cholesky_of_a_matrix_not_positive_definite_raises_when_read():
    step = staged.compile(lambda m: staged.linalg.cholesky(m).sum())
    good = staged.tensor([[4.0, 1.0], [1.0, 3.0]])
    assert step(good).item() == pytest.approx(2 + 0.5 + np.sqrt(3 - 0.25))
    out = step(staged.tensor([[1.0, 2.0], [2.0, 1.0]]))  # not positive-definite
    with pytest.raises(staged.linalg.LinAlgError, match="not positive-definite"):
        out.item()
    assert step(good).item() == pytest.approx(2 + 0.5 + np.sqrt(3 - 0.25))


def test_import_torch_linalg_under_the_shim():
    code = (
        "import staged; staged.as_torch()\n"
        "import torch, torch.linalg\n"
        "from torch.linalg import vector_norm\n"
        "print(torch.linalg is staged.linalg, float(vector_norm(torch.ones(4))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "2.0"], out.stderr
