"""``torch._dynamo.utils``: ``is_compile_supported``, which libraries ask before choosing a
compiled path (torchvision's ``roi_align``)."""

from __future__ import annotations


def is_compile_supported(device_type: str) -> bool:
    """Whether ``staged.compile`` compiles steps whose tensors live on ``device_type``:
    the CPU's (staged's eager tensors live there; its GPU backends take them from it)."""
    return device_type == "cpu"
