"""Lazy modules (torch's ``torch.nn.modules.lazy``) and what they hold until their first
forward: ``UninitializedParameter``/``UninitializedBuffer`` (in ``staged/nn/parameter.py``,
torch's place), whose shape is not known yet.

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

from ...eager.interceptor import current_interceptor
from ..parameter import (  # noqa: F401  (torch.nn.modules.lazy's names too)
    Parameter,
    UninitializedBuffer,
    UninitializedError,
    UninitializedParameter,
    UninitializedTensorMixin,
    is_lazy,
)


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
