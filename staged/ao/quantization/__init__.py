"""``torch.ao.quantization``: ``QuantStub`` and ``DeQuantStub``, the identity Modules that
mark where a model's quantized region begins and ends (torchvision's quantizable models
hold them). staged has no quantized tensors, so nothing converts them: they stay the
identity, as torch's are before ``convert``."""

from __future__ import annotations

from ...nn.module import Module

__all__ = ["DeQuantStub", "QuantStub"]


class _Stub(Module):
    """The identity, its ``qconfig`` kept as given."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class QuantStub(_Stub):
    """Where quantization would begin: the identity."""


class DeQuantStub(_Stub):
    """Where quantization would end: the identity."""
