"""nn.Parameter: a leaf Tensor that Modules register as a parameter; and, as in torch's
``torch.nn.parameter``, the uninitialized parameter and buffer lazy modules hold until
their first forward (``staged/nn/modules/lazy.py``)."""

from __future__ import annotations


from .. import dtypes as dt
from .._torch_function import _disabled_torch_function_impl
from ..eager.factories import empty, tensor
from ..eager.ops.inplace import writable_view
from ..eager.ops.metadata import sent_by_descriptor
from ..eager.tensor import Tensor


def _home_payload(data: Tensor):
    """``data``'s payload, brought home (a meta tensor's metadata stays meta); where it is
    a read-only view whose elements are distinct (``arange(n).expand(1, -1)``, which
    transformers makes its ``position_ids`` buffer of), a writable one of the same memory,
    as torch's parameter shares ``data``'s storage and takes writes."""
    if data.is_meta:
        return data._payload
    p = data._host()
    if not p.flags.writeable and p.size:
        w = writable_view(data, p, False)
        if w is not None:
            return w
    return p


class Parameter(Tensor):
    """A Tensor that is a module parameter (``requires_grad=True`` by default)."""

    # functions of parameters give plain tensors, its subclasses' too (torch's)
    __torch_function__ = _disabled_torch_function_impl  # type: ignore[assignment]

    def __new__(cls, data=None, requires_grad=True):
        data = empty(0) if data is None else data
        t = object.__new__(cls)
        Tensor._init(
            t, _home_payload(data) if isinstance(data, Tensor) else tensor(data)._payload, False
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
        Tensor._init(t, _home_payload(data), data.requires_grad)
        t._vc = data._vc
        t.persistent = persistent
        return t

    def __init__(self, data=None, *, persistent=True):
        pass


# Note [uninitialized payload]: Tensor keeps its data in the ``_payload`` slot; the
# uninitialized kinds shadow it with a property that raises (so every op refuses them,
# with torch's words) and keep their placeholder in the slot itself, which ``materialize``
# fills before it changes the class to Parameter or Tensor: the same object, as torch's.
_SLOT = Tensor.__dict__["_payload"]


for _cls in (Parameter, Buffer):  # (Note [shared memory] in eager/shared_memory.py)
    sent_by_descriptor(_cls)


class UninitializedError(ValueError, AttributeError):
    """Using an uninitialized parameter: a ValueError, as torch's; also an AttributeError,
    so that ``getattr(t, "_payload", None)`` probes (which walk every live tensor) pass it."""


class UninitializedTensorMixin:
    """What the uninitialized parameter and buffer share (torch's)."""

    __slots__ = ()
    cls_to_become: type

    @property
    def _payload(self):
        raise UninitializedError(
            f"Attempted to use an uninitialized parameter in {type(self).__name__}. This error "
            "happens when you are using a `LazyModule` or explicitly manipulating "
            f"`staged.nn.parameter.{type(self).__name__}` objects. When using LazyModules Call "
            "`forward` with a dummy batch to initialize the parameters before calling staged "
            "functions"
        )

    @_payload.setter
    def _payload(self, value):
        _SLOT.__set__(self, value)

    @property
    def dtype(self):
        return dt.from_numpy_dtype(_SLOT.__get__(self).dtype)

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error usually "
            "happens in `load_state_dict` when trying to load an uninitialized parameter into "
            "an initialized one. Call `forward` to initialize the parameters before accessing "
            "their attributes."
        )

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Become a ``cls_to_become`` (Parameter or Tensor) of ``shape``, uninitialised
        data, this dtype (or ``dtype``)."""
        data = empty(*shape, device=device, dtype=self.dtype if dtype is None else dtype)
        _SLOT.__set__(self, data._payload)
        self.__class__ = self.cls_to_become

    def share_memory_(self):
        raise RuntimeError(
            "Can't share memory on an uninitialized parameter or buffer. Call `forward` to "
            "initialize the parameters before calling `module.share_memory()`."
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    def __reduce_ex__(self, proto):
        return (type(self), (self.requires_grad, None, self.dtype))

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, None, self.dtype)
        return memo[id(self)]


def _uninitialized(cls, requires_grad, device, dtype):
    t = object.__new__(cls)
    Tensor._init(t, empty(0, device=device, dtype=dtype)._payload, bool(requires_grad))
    return t


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter whose shape is not known yet (a lazy module's until its first forward):
    any use but ``materialize`` raises."""

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return _uninitialized(cls, requires_grad, device, dtype)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet (a lazy norm's running statistics)."""

    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        if not persistent:
            raise NotImplementedError(
                "UninitializedBuffer(persistent=False) is not supported: register it with "
                "module.register_buffer(name, buffer, persistent=False)"
            )
        return _uninitialized(cls, requires_grad, device, dtype)

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass


def is_lazy(param) -> bool:
    """Whether ``param`` is an ``UninitializedParameter`` or ``UninitializedBuffer``."""
    return isinstance(param, UninitializedTensorMixin)
