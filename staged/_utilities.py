"""torch's small top-level utilities: dtype promotion queries, ``typename``, the deprecated
``set_default_tensor_type``, interop threads, the warn-always flag and ``_assert``."""

from __future__ import annotations

import warnings
from typing import Any

from . import _where
from . import dtypes as dt
from .eager.factories import tensor
from .eager.legacy_types import dtype_of, type_name
from .eager.storage import TypedStorage, UntypedStorage
from .eager.ops._operands import promote_types as _promote_values
from .eager.tensor import Tensor

_flags: dict[str, Any] = {"interop_threads": 1}


def promote_types(type1, type2) -> dt.DType:
    """The dtype both promote to, as torch's ``promote_types``."""
    return dt.result_type([dt.as_dtype(type1), dt.as_dtype(type2)], [])


def result_type(tensor1, tensor2) -> dt.DType:
    """The dtype an op on ``tensor1`` and ``tensor2`` (tensors or Python numbers) computes in."""
    return _promote_values(tensor1, tensor2)


def can_cast(from_, to) -> bool:
    """torch's casting rule: not a float to an integer, a complex to a real, or a number
    to bool."""
    a, b = dt.as_dtype(from_), dt.as_dtype(to)
    return not (
        (a.is_floating_point and not (b.is_floating_point or b.is_complex))
        or (a.is_complex and not b.is_complex)
        or (a is not dt.bool_ and b is dt.bool_)
    )


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    return tensor(
        s, dtype=dtype or dt.get_default_dtype(), device=device, requires_grad=requires_grad
    )


def typename(obj) -> str:
    """``'torch.FloatTensor'`` for a tensor, else the object's qualified type name."""
    if isinstance(obj, Tensor):
        return type_name(obj.dtype)
    t = obj if isinstance(obj, type) else type(obj)
    module = "" if t.__module__ in ("builtins", None) else t.__module__ + "."
    return module + t.__qualname__


def is_storage(obj) -> bool:
    """Whether ``obj`` is a storage (``t.untyped_storage()``, ``t.storage()``)."""
    return isinstance(obj, (UntypedStorage, TypedStorage))


def set_default_tensor_type(t) -> None:
    """Deprecated in torch 2.1: the dtype of a legacy type (``staged.DoubleTensor`` or its
    name) becomes the default, as ``set_default_dtype``."""
    warnings.warn(
        "torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
        "torch.set_default_dtype() and torch.set_default_device() as alternatives.",
        UserWarning,
        stacklevel=2,
    )
    dt.set_default_dtype(dtype_of(t))


def set_num_interop_threads(n: int) -> None:
    """Recorded only: staged runs no inter-op thread pool."""
    if n <= 0:
        raise RuntimeError("Number of inter-op threads must be positive")
    _flags["interop_threads"] = int(n)


def get_num_interop_threads() -> int:
    return _flags["interop_threads"]


def set_warn_always(b: bool) -> None:
    """Warnings torch gives once a process (``_where.warn_once``) given every time."""
    _where.warn_always = bool(b)


def is_warn_always_enabled() -> bool:
    return _where.warn_always


def _assert(condition, message) -> None:
    """``assert condition, message`` as a function (torchvision's ViT checks its input size
    with it; torch's is traceable by torch.fx). A tensor condition is read by ``bool``."""
    assert condition, message
