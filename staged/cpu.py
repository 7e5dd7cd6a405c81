"""``staged.cpu``: torch.cpu's answers (one CPU device, nothing to synchronize) and its
deprecated ``amp`` namespace, ``torch.amp``'s with device "cpu"."""

from __future__ import annotations

import warnings

from . import amp as _amp
from . import dtypes as _dt


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> str:
    return "cpu"


def set_device(device) -> None:
    """A no-op, as torch's: there is one CPU device (accelerate calls it per rank)."""


def synchronize(device=None) -> None:
    """A no-op: CPU work has finished when the call returns."""


def _deprecated(name: str) -> None:
    warnings.warn(
        f"`torch.cpu.amp.{name}(args...)` is deprecated. Please use "
        f"`torch.amp.{name}('cpu', args...)` instead.",
        FutureWarning,
        stacklevel=3,
    )


class amp:  # noqa: N801  (torch.cpu.amp, deprecated there: torch.amp with device "cpu")
    """``torch.cpu.amp.autocast`` (bfloat16 by default) and ``GradScaler``: ``staged.amp``'s
    for "cpu", with torch's deprecation warning."""

    @staticmethod
    def autocast(enabled=True, dtype=_dt.bfloat16, cache_enabled=True):
        _deprecated("autocast")
        return _amp.autocast("cpu", dtype, enabled, cache_enabled)

    @staticmethod
    def GradScaler(init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, **kw):  # noqa: N802
        _deprecated("GradScaler")
        return _amp.GradScaler("cpu", init_scale, growth_factor, backoff_factor, **kw)
