"""nn.Parameter: a leaf Tensor that Modules register as a parameter."""

from __future__ import annotations

from ..eager.factories import empty, tensor
from ..eager.tensor import Tensor


def _payload(data: Tensor):
    """``data``'s payload, brought home (a meta tensor's metadata stays meta)."""
    return data._payload if data.is_meta else data._host()


class Parameter(Tensor):
    """A Tensor that is a module parameter (``requires_grad=True`` by default)."""

    def __new__(cls, data=None, requires_grad=True):
        data = empty(0) if data is None else data
        t = object.__new__(cls)
        Tensor._init(
            t, _payload(data) if isinstance(data, Tensor) else tensor(data)._payload, False
        )
        if isinstance(data, Tensor):
            t._vc = data._vc
        t.requires_grad_(requires_grad)
        return t

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        # with a user's attributes (torch's ``_rebuild_parameter_with_state``); a deep copy
        # drops them, as torch's does
        return (Parameter, (Tensor._wrap(self._host()), self._requires_grad), self.__dict__ or None)

    def __deepcopy__(self, memo):
        p = Parameter(Tensor._wrap(self._payload if self.is_meta else self._host().copy()))
        p.requires_grad_(self._requires_grad)
        memo[id(self)] = p
        return p


class Buffer(Tensor):
    """torch's ``nn.Buffer``: a tensor marked as module state that is not a parameter,
    ``persistent`` or not (in ``state_dict``): assigned to a module attribute, it is
    registered as a buffer."""

    def __new__(cls, data=None, *, persistent=True):
        data = empty(0) if data is None else data
        t = object.__new__(cls)
        Tensor._init(t, _payload(data), data.requires_grad)
        t._vc = data._vc
        t.persistent = persistent
        return t

    def __init__(self, data=None, *, persistent=True):
        pass
