"""PyTorch's legacy tensor types (Note [legacy tensor types]) against torch 2.13."""

import numpy as np
import pytest
import torch

import staged

NAMES = [
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "ByteTensor",
    "CharTensor",
    "ShortTensor",
    "IntTensor",
    "LongTensor",
    "BoolTensor",
]


@pytest.mark.parametrize("name", NAMES)
def test_constructors_match_torch(name):
    S, T = getattr(staged, name), getattr(torch, name)
    assert S.dtype.name == str(T.dtype).removeprefix("torch.")
    assert repr(S) == f"<class 'staged.{name}'>"
    for args in [([1, 0, 2],), ([[1, 2], [3, 4]],), (np.array([1.0, 2.0]),), ((2, 3),)]:
        s, t = S(*args), T(*args)
        assert s.dtype.name == str(t.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(
            s.numpy().astype(np.float64), t.float().numpy().astype(np.float64)
        )
    for args in [(2, 3), (staged.Size([4]),), ()]:
        shape = tuple(a for a in args if isinstance(a, int)) or (tuple(args[0]) if args else (0,))
        assert (
            tuple(S(*args).shape)
            == tuple(T(*(torch.Size(a) if isinstance(a, staged.Size) else a for a in args)).shape)
            == shape
        )


def test_isinstance_and_type_conversions_match_torch():
    x, t = staged.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    for name in NAMES:
        assert isinstance(x, getattr(staged, name)) == isinstance(t, getattr(torch, name))
    assert not isinstance(np.zeros(2, np.float32), staged.FloatTensor)
    assert not isinstance(x, staged.cuda.FloatTensor)
    y = x.type(staged.DoubleTensor)
    assert y.dtype is staged.float64 and y.type() == t.type(torch.DoubleTensor).type()
    y.sum().backward()  # a differentiable cast, as torch's
    assert x.grad.tolist() == [1.0, 1.0]
    assert staged.ones(2).type("torch.LongTensor").dtype is staged.int64


def test_errors_match_torch():
    with pytest.raises(TypeError, match="data must be a sequence"):
        staged.FloatTensor(2.5)
    with pytest.raises(TypeError, match="expected staged.float32"):
        staged.FloatTensor(staged.ones(2, dtype=staged.float64))
    with pytest.raises(TypeError, match=r"torch.cuda.FloatTensor not available.*backend='cuda'"):
        staged.cuda.FloatTensor(2)
    with pytest.raises(ValueError, match="invalid type: 'torch.NoTensor'"):
        staged.ones(2).type("torch.NoTensor")


@pytest.mark.parametrize("dst", ["float64", "DoubleTensor", "torch.DoubleTensor", "HalfTensor"])
def test_module_type_casts_every_parameter_and_buffer_as_torch(dst):
    def arg(lib):
        return getattr(lib, dst) if hasattr(lib, dst) else dst

    s, t = staged.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    assert s.type(arg(staged)) is s
    t.type(arg(torch))
    for (n, a), (m, b) in zip(s.state_dict().items(), t.state_dict().items()):
        assert n == m and a.dtype.name == str(b.dtype).removeprefix("torch.")
