"""Lazy modules (torch's ``torch.nn.modules.lazy``) and what they hold until their first
forward: ``UninitializedParameter``/``UninitializedBuffer``, whose shape is not known yet.

A lazy module (``LazyLinear``, ``LazyConv2d``, ``LazyBatchNorm1d`` ...) registers a forward
pre-hook that, at the first call, reads the input's size, materializes its parameters and
buffers, initialises them as the module it becomes does (``reset_parameters``, so in
torch's order and from torch's stream), removes the hook and turns into that module
(``LazyLinear`` into ``Linear``). An uninitialized parameter refuses every use but
``materialize``: its data is an empty array of its dtype, kept in the slot a materialized
tensor uses (Note [uninitialized payload]).
"""

from __future__ import annotations

import itertools

from ... import dtypes as dt
from ...eager.factories import empty
from ...eager.interceptor import current_interceptor
from ...eager.tensor import Tensor
from ..parameter import Parameter

# Note [uninitialized payload]: Tensor keeps its data in the ``_payload`` slot; the
# uninitialized kinds shadow it with a property that raises (so every op refuses them,
# with torch's words) and keep their placeholder in the slot itself, which ``materialize``
# fills before it changes the class to Parameter or Tensor: the same object, as torch's.
_SLOT = Tensor.__dict__["_payload"]


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


class LazyModuleMixin:
    """A module whose parameter shapes come from its first input: until then it holds
    uninitialized parameters; its first call materializes and initialises them
    (``initialize_parameters``) and turns the module into ``cls_to_become``. Lazy modules
    must run once eagerly (a dry run) before ``staged.compile`` traces them. Loading a
    ``state_dict`` materializes the uninitialized entries it holds in its shapes first
    (torch's ``_lazy_load_hook``); the module stays lazy until its first call."""

    cls_to_become: type | None = None
    _parameters: dict
    _buffers: dict

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(
            self._infer_parameters, with_kwargs=True
        )

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """As ``Module._save_to_state_dict``, holding uninitialized entries as they are
        (torch's)."""
        own = {}
        super()._save_to_state_dict(own, prefix, True)
        for k, v in own.items():
            lazy_or_extra = is_lazy(v) or k == prefix + "_extra_state"
            destination[k] = v if keep_vars or lazy_or_extra else v.detach()

    def _load_from_state_dict(self, state_dict, prefix, *args):
        """Materialize each uninitialized entry the checkpoint holds, in its shape."""
        for name, v in itertools.chain(self._parameters.items(), self._buffers.items()):
            value = state_dict.get(prefix + name)
            if is_lazy(v) and hasattr(value, "shape") and not is_lazy(value):
                v.materialize(tuple(value.shape))
        super()._load_from_state_dict(state_dict, prefix, *args)

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {type(self).__name__}"
        )

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer of this module is still uninitialized."""
        return any(
            is_lazy(v) for v in itertools.chain(self._parameters.values(), self._buffers.values())
        )

    def _infer_parameters(self, module, args, kwargs=None):
        if current_interceptor() is not None:
            raise RuntimeError(
                f"{type(self).__name__} is a lazy module whose parameters are not initialized "
                "yet: call it once eagerly (a dry run with an input of the right size) before "
                "staged.compile traces it"
            )
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {type(self).__name__} has not been fully initialized")
        module._initialize_hook.remove()
        delattr(module, "_initialize_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self):
        raise RuntimeError(
            "Modules with uninitialized parameters can't be used with `DataParallel`. Run a "
            "dummy forward pass to correctly initialize the modules"
        )
