"""Which compiled backends can run on this machine, as pytest skip markers that say why
not (shared by the backend tests, the op sweep and the model tests)."""
from __future__ import annotations

import pytest

from staged.runtime.device import DeviceError, device


def _usable(backend):
    try:
        device(backend)
    except DeviceError as err:
        return str(err)
    return None


VULKAN_MISSING = _usable("vulkan-spirv")
needs_vulkan = pytest.mark.skipif(
    VULKAN_MISSING is not None,
    reason=f"no Vulkan device ({VULKAN_MISSING}); `make test` installs Mesa's lavapipe "
           "(Debian package mesa-vulkan-drivers) when it runs as root with apt-get")

CUDA_MISSING = _usable("cuda")
needs_cuda = pytest.mark.skipif(CUDA_MISSING is not None,
                                reason=f"no CUDA device: {CUDA_MISSING}")
