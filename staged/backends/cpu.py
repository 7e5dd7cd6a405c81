"""``staged.backends.cpu``: what this CPU's vector units are, as torch names them
(torchvision asks it to choose its uint8 resize path)."""

from __future__ import annotations

import os

import numpy as np

__all__ = ["get_cpu_capability"]

# NumPy's runtime detection of the CPU's features
_FEATURES = np._core._multiarray_umath.__cpu_features__  # type: ignore[attr-defined]


def get_cpu_capability() -> str:
    """``"AVX512"``, ``"AVX2"`` or ``"DEFAULT"``: the widest of torch's kernel builds this CPU
    runs (AVX-512 F/BW/VL/DQ; AVX2 with FMA), or ``ATEN_CPU_CAPABILITY`` where set, as torch
    reads it."""
    forced = os.environ.get("ATEN_CPU_CAPABILITY", "").upper()
    if forced in ("AVX512", "AVX2", "DEFAULT"):
        return forced
    if all(_FEATURES.get(f) for f in ("AVX512F", "AVX512BW", "AVX512VL", "AVX512DQ")):
        return "AVX512"
    if _FEATURES.get("AVX2") and _FEATURES.get("FMA3"):
        return "AVX2"
    return "DEFAULT"
