"""``staged._C``: the few entry points of torch's C extension that Python libraries call
on every use (torchvision's model constructors log their use through it)."""

from __future__ import annotations

import enum
import types

from . import _torch_function as _tf, dtypes
from .eager import autocast, devices
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


# the torch function protocol's switches (Note [the torch function protocol])
_disabled_torch_function_impl = _tf._disabled_torch_function_impl
DisableTorchFunctionSubclass = _tf.DisableTorchFunctionSubclass
DisableTorchFunction = _tf.DisableTorchFunction
_is_torch_function_enabled = _tf.enabled


class DispatchKey(enum.Enum):
    """torch's dispatch keys that Python libraries name when they register kernels."""

    Undefined = 0
    CPU = 1
    CUDA = 2
    Meta = 3
    XPU = 4
    AutogradCPU = 5
    AutogradCUDA = 6
    Autograd = 7
    AutocastCPU = 8
    AutocastCUDA = 9
    AutocastXPU = 10
    CompositeImplicitAutograd = 11
    CompositeExplicitAutograd = 12
    ADInplaceOrView = 13
    Python = 14


class DispatchKeySet:
    """A set of dispatch keys (``DispatchKeySet(key) | DispatchKeySet(other)``)."""

    def __init__(self, *keys: DispatchKey) -> None:
        self._keys = frozenset(keys)

    def __or__(self, other: DispatchKeySet) -> DispatchKeySet:
        return DispatchKeySet(*self._keys, *other._keys)

    def has(self, key: DispatchKey) -> bool:
        return key in self._keys

    def __repr__(self) -> str:
        return f"DispatchKeySet({', '.join(sorted(k.name for k in self._keys))})"


class _ExcludeDispatchKeyGuard:
    """Inside it, the kernels of the keys excluded do not run: an AutocastCPU kernel's
    calls, so excluded, run with CPU autocast off, as torch's. Excluding other keys
    changes nothing here (staged dispatches only the CPU, autograd and autocast keys)."""

    def __init__(self, keys: DispatchKeySet) -> None:
        self._off = keys.has(DispatchKey.AutocastCPU)
        self._was = False

    def __enter__(self):
        if self._off:
            self._was = autocast.is_enabled("cpu")
            autocast.set_enabled("cpu", False)
        return self

    def __exit__(self, *exc) -> None:
        if self._off:
            autocast.set_enabled("cpu", self._was)


class TensorType:
    """TorchScript's type of tensors (``torch.TensorType``), which annotations name: staged
    has no TorchScript, so nothing beyond the name and ``get()``."""

    @classmethod
    def get(cls) -> TensorType:
        return cls()


def _get_tracing_state():
    """None: staged has no TorchScript tracer (``torch.jit.is_tracing()`` is False)."""
    return None


def _get_default_device() -> str:
    """The default device's type, as torch's (``"cpu"``, or ``"meta"`` within one)."""
    return devices.get_default_device().type
