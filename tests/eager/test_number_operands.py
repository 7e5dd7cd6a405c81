"""Python numbers as operands, made once and kept (``_operands._number``): repeated and
nearby values give torch's results, and a kept constant cannot be written through."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged


@pytest.mark.parametrize(
    "dtype, values",
    [
        ("float32", [0.0, -0.0, 0.0, -0.0]),  # equal keys, different signs
        ("float32", [2, 2.0, 2, 2.0]),  # equal keys, different types
        ("float32", [float("nan"), float("nan"), float("inf"), -float("inf")]),
        ("uint8", [300, 300, -1, 44, 300]),  # wrapped as torch's
        ("int64", [2, 2.5, 2, 2.5]),  # an int tensor promoted by a float
    ],
)
def test_repeated_numbers_as_torch(dtype, values):
    x = np.array([[1, -2, 3, 0]]).astype(dtype)
    for op in ("mul", "add", "sub"):
        for v in values:
            got = getattr(staged, op)(staged.tensor(x), v)
            want = getattr(torch, op)(torch.tensor(x), v)
            assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1], (op, v)
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f"{op} {v!r}")
            assert np.array_equal(np.signbit(got.numpy()), np.signbit(want.numpy())), (op, v)


def test_kept_number_is_read_only():
    """The kept array and its memory are read-only: a writable view of it is refused, so
    a later ``x * 3`` cannot see a write."""
    x = staged.tensor([1.0, 2.0])
    c = staged.eager.ops._operands._number(3, x._payload.dtype, (2,))
    assert c._payload is staged.eager.ops._operands._number(3, x._payload.dtype, (2,))._payload
    with pytest.raises(ValueError):
        c._payload.view().flags.writeable = True
    np.testing.assert_array_equal((x * 3).numpy(), [3.0, 6.0])


def test_number_gradients_as_torch():
    grads = []
    for lib in (staged, torch):
        a = lib.tensor([1.0, -2.0], requires_grad=True)
        for _ in range(2):  # the second time with the kept constants
            (a * 2 - 1.5).mul(-0.0).sum().backward()
            (a * 2 - 1.5).sum().backward()
        grads.append(a.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    assert np.array_equal(np.signbit(grads[0]), np.signbit(grads[1]))


def test_unary_op_given_a_number_raises_torchs_type_error():
    with pytest.raises(TypeError) as want:
        torch.sgn(3)
    with pytest.raises(TypeError) as got:
        staged.sgn(3)
    assert str(got.value).endswith(str(want.value))
