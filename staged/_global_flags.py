"""torch's process-wide switches that change nothing here, and why; each remembers its value
so a script can read back what it set.

- Deterministic algorithms: staged is deterministic on the CPU whatever the switch (NumPy's
  kernels and IREE's dispatches reduce in a fixed order), so ``use_deterministic_algorithms``
  only records the request.
- float32 matmul precision: float32 matmuls here always run in float32 ("highest");
  torch's "high"/"medium" allow TF32 or bfloat16 internally on some hardware.
- Flushing denormals: NumPy's and IREE's kernels keep subnormal numbers, so
  ``set_flush_denormal`` answers False, as torch's does on a CPU that cannot flush.
"""

from __future__ import annotations

import warnings
from typing import Any

from .dtypes import _default as _default_dtype

_state: dict[str, Any] = {
    "deterministic": False,
    "warn_only": False,
    "debug_mode": 0,
    "matmul": "highest",
}
_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    _state["deterministic"], _state["warn_only"] = bool(mode), bool(warn_only)
    _state["debug_mode"] = 0 if not mode else 1 if warn_only else 2


def are_deterministic_algorithms_enabled() -> bool:
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _state["warn_only"]


def set_deterministic_debug_mode(debug_mode) -> None:
    """torch's: 0/"default", 1/"warn", 2/"error" (warn and error turn deterministic on)."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(
                "invalid value of debug_mode, expected one of `default`, `warn`, `error`, "
                f"but got {debug_mode}"
            )
        debug_mode = _DEBUG_MODES[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(
            f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}"
        )
    mode = debug_mode
    use_deterministic_algorithms(mode != 0, warn_only=mode == 1)


def get_deterministic_debug_mode() -> int:
    return _state["debug_mode"]


def set_float32_matmul_precision(precision: str) -> None:
    if precision not in ("highest", "high", "medium"):  # torch warns and changes nothing
        warnings.warn(
            f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
            "setFloat32MatmulPrecision call has no effect.",
            stacklevel=2,
        )
        return
    _state["matmul"] = precision


def get_float32_matmul_precision() -> str:
    return _state["matmul"]


def trace_key() -> tuple:
    """What a compiled step's trace may have read of the process-wide settings (the
    switches here, the default dtype: ``torch.zeros(3)`` in the step): a trace serves only
    calls made under the settings it was made under."""
    return (_state["deterministic"], _state["warn_only"], _state["matmul"], _default_dtype[0])


TRACE_KEY = (
    "deterministic algorithms",
    "their warn_only",
    "float32 matmul precision",
    "default dtype",
)


def set_flush_denormal(mode: bool) -> bool:
    """False: staged cannot flush denormals (torch's answer where the CPU cannot)."""
    if not isinstance(mode, bool):
        raise RuntimeError(f"flush_denormal expects a bool, but got {type(mode).__name__}")
    return False
