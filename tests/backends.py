"""Which compiled backends can run on this machine, as pytest skip markers that say why
not (shared by the backend tests, the op sweep and the model tests), and a small
training step checked against eager on a backend and device."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import staged
from models.common import classification_step
from staged import nn, optim
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
    "(Debian package mesa-vulkan-drivers) when it runs as root with apt-get",
)

CUDA_MISSING = _usable("cuda")
needs_cuda = pytest.mark.skipif(CUDA_MISSING is not None, reason=f"no CUDA device: {CUDA_MISSING}")


def train_against_eager(backend="llvm-cpu", devices=(None,), steps=3):
    """A compiled SGD-with-momentum step per device in ``devices`` (in turn, on the same
    parameters), each called ``steps`` times and checked call for call against eager;
    returns the compiled steps."""
    staged.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    ref = copy.deepcopy(model)

    def make(m):
        return classification_step(m, optim.SGD(m.parameters(), lr=0.1, momentum=0.9))

    x, y = staged.randn(16, 6), staged.randint(0, 3, (16,))
    body, estep = make(model), make(ref)
    compiled = [staged.compile(body, backend=backend, device=d) for d in devices]
    for cstep in compiled:
        for _ in range(steps):
            np.testing.assert_allclose(cstep(x, y).item(), estep(x, y).item(), rtol=1e-4)
    for pc, pe in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-4, atol=1e-6)
    return compiled
