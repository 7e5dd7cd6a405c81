"""``Variable``, torch's pre-0.4 wrapper, kept for old scripts: every tensor is one
(``isinstance(t, Variable)``), and ``Variable(t, requires_grad)`` is a new leaf on ``t``'s
data, as torch's."""

from __future__ import annotations

from ..eager.tensor import Tensor


class _VariableMeta(type):
    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    def __new__(cls, data, requires_grad=False, volatile=False):
        return data.detach().requires_grad_(requires_grad)
