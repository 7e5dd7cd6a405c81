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


def _none_available(*args, **kwargs):
    raise RuntimeError("Cannot access accelerator device when none is available.")


current_device_index = current_device_idx = set_device_index = set_device_idx = _none_available
synchronize = empty_cache = get_device_capability = get_memory_info = memory_stats = _none_available
memory_allocated = max_memory_allocated = memory_reserved = max_memory_reserved = _none_available
reset_peak_memory_stats = reset_accumulated_memory_stats = _none_available


class device_index:  # noqa: N801  (torch's name: a context manager)
    """``with device_index(i):`` makes device ``i`` current; ``None`` is a no-op, any
    index raises (no accelerator)."""

    def __init__(self, device, /):
        self.idx = device

    def __enter__(self):
        if self.idx is not None:
            _none_available()

    def __exit__(self, *exc):
        return False
