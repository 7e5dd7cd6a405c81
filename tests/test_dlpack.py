"""DLPack exchange, as torch 2.13's: ``from_dlpack`` of NumPy arrays, torch tensors and
capsules shares their memory; ``Tensor.__dlpack__`` lets NumPy and torch share staged's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged


def test_a_numpy_array_is_shared_not_copied():
    a = np.arange(6.0).reshape(2, 3)
    t = staged.from_dlpack(a)
    assert t.dtype == staged.float64 and tuple(t.shape) == (2, 3)
    t[0, 1] = 9.0
    assert a[0, 1] == 9.0
    a[1, 2] = -1.0
    assert t[1, 2].item() == -1.0


def test_a_torch_tensor_keeps_its_strides_and_memory():
    x = torch.arange(6.0).reshape(2, 3).t()
    t = staged.from_dlpack(x)
    assert t.stride() == x.stride() == (1, 3)
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    t.mul_(2)
    assert x[2, 1].item() == 10.0


def test_copy_true_copies():
    a = np.ones(3, np.float32)
    t = staged.from_dlpack(a, copy=True)
    t.add_(1)
    assert a.tolist() == [1.0, 1.0, 1.0]


def test_numpy_and_torch_take_a_staged_tensor():
    t = staged.arange(4, dtype=staged.int32)
    a = np.from_dlpack(t)
    a[0] = 7
    assert t[0].item() == 7
    x = torch.from_dlpack(t)
    assert x.dtype == torch.int32 and x.tolist() == [7, 1, 2, 3]
    assert t.__dlpack_device__() == (1, 0)


def test_capsules_round_trip_once():
    t = staged.tensor([1.0, 2.0])
    capsule = staged.utils.dlpack.to_dlpack(t)
    u = staged.utils.dlpack.from_dlpack(capsule)
    u[0] = 5.0
    assert t[0].item() == 5.0
    with pytest.raises(RuntimeError, match="taken once"):
        staged.from_dlpack(capsule)


def test_a_torch_capsule_is_read():
    x = torch.tensor([3.0, 4.0])
    t = staged.from_dlpack(torch.utils.dlpack.to_dlpack(x))
    assert t.tolist() == [3.0, 4.0]


def test_refusals_say_why():
    with pytest.raises(BufferError, match="require gradient"):
        staged.ones(2, requires_grad=True).__dlpack__()
    with pytest.raises(TypeError, match="__dlpack__"):
        staged.from_dlpack([1, 2])
    with pytest.raises(RuntimeError, match="bfloat16"):
        staged.from_dlpack(torch.ones(2, dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match="CPU"):
        staged.from_dlpack(np.ones(2), device="cuda")
