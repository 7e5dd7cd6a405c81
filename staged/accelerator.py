"""``staged.accelerator``: as ``torch.accelerator`` in a CPU-only build (Note [devices] in
``staged/eager/devices.py``): eager tensors live in host memory; compiled steps pick an
accelerator by ``staged.compile(step, backend=...)``."""

from __future__ import annotations


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def current_accelerator(check_available: bool = False):
    """None: no accelerator holds eager tensors."""
    return None
