"""``device=`` and ``dtype=`` on every layer, at the positions torch's signatures give them:
a positional device must not be taken for a dtype (scripts pass ``Linear(3, 4, True,
None, torch.float32)``), and a device other than the CPU fails as the factories do."""

from __future__ import annotations

import inspect

import pytest
import torch

import staged
from staged import nn
from tests.checks import message

# the required arguments of each layer whose torch counterpart takes device=
REQUIRED = {
    "Linear": (3, 4),
    "Conv1d": (2, 4, 3),
    "Conv2d": (2, 4, 3),
    "ConvTranspose1d": (2, 4, 3),
    "ConvTranspose2d": (2, 4, 3),
    "Bilinear": (2, 3, 4),
    "GroupNorm": (2, 4),
    "InstanceNorm1d": (3, 1e-5, 0.1, True, True),
    "InstanceNorm2d": (3, 1e-5, 0.1, True, True),
    "Embedding": (5, 3),
    "LayerNorm": (4,),
    "RMSNorm": (4,),
    "PReLU": (),
    "BatchNorm1d": (3,),
    "BatchNorm2d": (3,),
    "MultiheadAttention": (8, 2),
    "TransformerEncoderLayer": (8, 2),
    "TransformerDecoderLayer": (8, 2),
    "Transformer": (8, 2, 1, 1, 16),
    "RNNBase": ("LSTM", 3, 4),
    "RNN": (3, 4),
    "LSTM": (3, 4),
    "GRU": (3, 4),
    "RNNCellBase": (3, 4, True, 2),
    "RNNCell": (3, 4),
    "LSTMCell": (3, 4),
    "GRUCell": (3, 4),
    "Conv3d": (2, 4, 3),
    "ConvTranspose3d": (2, 4, 3),
    "BatchNorm3d": (3,),
    "SyncBatchNorm": (3,),
    "InstanceNorm3d": (3, 1e-5, 0.1, True, True),
    "EmbeddingBag": (5, 3),
    "AdaptiveLogSoftmaxWithLoss": (8, 10, [4]),
    "LazyLinear": (4,),
    **{f"LazyConv{n}d": (4, 3) for n in (1, 2, 3)},
    **{f"LazyConvTranspose{n}d": (4, 3) for n in (1, 2, 3)},
    **{f"LazyBatchNorm{n}d": () for n in (1, 2, 3)},
    **{f"LazyInstanceNorm{n}d": (1e-5, 0.1, True, True) for n in (1, 2, 3)},
}


def _torch_params(cls) -> list[inspect.Parameter]:
    """torch's parameters of ``cls``; RNN, LSTM and GRU take ``*args, **kwargs`` and pass
    them on to ``RNNBase`` after the mode (RNN first takes ``nonlinearity`` out of them)."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    if [p.name for p in params] == ["args", "kwargs"] and issubclass(cls, torch.nn.RNNBase):
        params = list(inspect.signature(torch.nn.RNNBase.__init__).parameters.values())[2:]
        if cls is torch.nn.RNN:
            params.insert(
                3, inspect.signature(torch.nn.RNNCell.__init__).parameters["nonlinearity"]
            )
    return params


def _layers():
    for name in dir(nn):
        cls = getattr(nn, name)
        if isinstance(cls, type) and issubclass(cls, nn.Module) and hasattr(torch.nn, name):
            if "device" in [p.name for p in _torch_params(getattr(torch.nn, name))]:
                yield name


def test_every_layer_taking_device_is_checked():
    assert sorted(_layers()) == sorted(REQUIRED)


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_signature_is_torchs(name):
    """The same parameter names, in the same order, of the same kinds (RNN and GRU pass
    ``proj_size, device, dtype`` on positionally, as torch's)."""
    theirs = [(p.name, p.kind) for p in _torch_params(getattr(torch.nn, name))]
    ours = [
        (p.name, p.kind) for p in list(inspect.signature(getattr(nn, name)).parameters.values())
    ]
    if name in ("RNN", "GRU"):
        assert ours[-2:] == [
            ("args", inspect.Parameter.VAR_POSITIONAL),
            ("kwargs", inspect.Parameter.VAR_KEYWORD),
        ]
        ours = ours[:-2] + theirs[len(ours) - 2 :]
    assert ours == theirs


def _positional(name, lib, device, dtype):
    """``REQUIRED[name]``, torch's defaults up to ``device``, then ``device, dtype``."""
    params = _torch_params(getattr(torch.nn, name))
    at = [p.name for p in params].index("device")
    args = REQUIRED[name]
    defaults = tuple(p.default for p in params[len(args) : at])
    return getattr(lib.nn, name)(*args, *defaults, device, dtype)


def _dtypes(module):
    return {p.dtype for p in module.parameters()} | {
        b.dtype for b in module.buffers() if b.dtype.is_floating_point
    }


@pytest.mark.parametrize("device", ["cpu", "cpu:0", staged.device("cpu"), None])
@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_device_and_dtype_positionally_and_by_keyword(name, device):
    torch_device = str(device) if isinstance(device, staged.device) else device
    assert _dtypes(_positional(name, torch, torch_device, torch.float64)) == {torch.float64}
    assert _dtypes(_positional(name, staged, device, staged.float64)) == {staged.float64}
    m = getattr(nn, name)(*REQUIRED[name], device=device, dtype=staged.float64)
    assert _dtypes(m) == {staged.float64}


@pytest.mark.parametrize("device", ["cuda", "cuda:1", "mps"])
@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_other_devices_fail_as_the_factories_do(name, device):
    with pytest.raises(Exception) as factory:
        staged.zeros(2, device=device)
    with pytest.raises(type(factory.value)) as positional:
        _positional(name, staged, device, None)
    with pytest.raises(type(factory.value)) as keyword:
        getattr(nn, name)(*REQUIRED[name], device=device)
    # (each error names the line that made it: the message after it is the same)
    assert message(positional.value) == message(keyword.value) == message(factory.value)


def test_flatten_parameters_is_a_no_op_as_on_torchs_cpu():
    for name in ("RNN", "LSTM", "GRU"):
        m = getattr(nn, name)(3, 4, 2)
        before = [(p, p.clone()) for p in m.parameters()]
        assert m.flatten_parameters() is None
        assert all(p is q for (p, _), q in zip(before, m.parameters(), strict=True))
        assert all(bool((p == old).all()) for p, old in before)
        assert getattr(torch.nn, name)(3, 4, 2).flatten_parameters() is None
