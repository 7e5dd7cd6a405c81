"""``staged._C``: the few entry points of torch's C extension that Python libraries call
on every use (torchvision's model constructors log their use through it)."""

from __future__ import annotations

import types

from . import dtypes
from .eager import devices
from .eager.tensor import Tensor
from .nn.module import to_arguments


def _log_api_usage_once(event: str) -> None:
    """Nothing: torch logs API use only to a logger an organisation installs in C++, which
    staged has none of (torch's is a no-op by default too)."""


# the metaclass of ``Tensor`` (libraries annotate tensor types with it)
_TensorMeta = type(Tensor)


def _parse_to(*args, **kwargs) -> tuple:
    """``(device, dtype, non_blocking, memory_format)`` of a ``to(...)`` call's arguments."""
    device, dtype, non_blocking, memory_format = to_arguments(args, kwargs)
    return (
        None if device is None else devices.device(device),
        None if dtype is None else dtypes.as_dtype(dtype),
        non_blocking,
        memory_format,
    )


_nn = types.ModuleType("staged._C._nn", "torch._C._nn's helpers that libraries call")
_nn._parse_to = _parse_to  # type: ignore[attr-defined]
