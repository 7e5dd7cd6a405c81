"""Activation modules."""
from __future__ import annotations

from ...eager import ops
from ..module import Module


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return input.relu_() if self.inplace else ops.relu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    def forward(self, input):
        return ops.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return ops.sigmoid(input)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return ops.softmax(input, self.dim if self.dim is not None else -1)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input):
        return ops.log_softmax(input, self.dim if self.dim is not None else -1)


class GELU(Module):
    """``x * Phi(x)``; ``approximate="tanh"`` uses the tanh form."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return ops.gelu(input, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    def forward(self, input):
        return ops.silu(input)
