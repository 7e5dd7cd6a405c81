"""Note [lost devices]: a device the driver lost (an injected loss; on lavapipe, a step that
failed on it) is retired, so steps compiled afterwards run on a fresh one, and what was
on the lost one raises DeviceLostError saying what to do."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest

import staged
from models.common import classification_step
from staged import nn
from staged.runtime.device import DeviceLostError, device
from tests.backends import needs_vulkan


def _training():
    staged.manual_seed(0)
    m = nn.Linear(8, 3)
    opt = staged.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    return m, opt, classification_step(m, opt)


def _checkpoint(m, opt):
    return (
        {k: v.detach().clone() for k, v in m.state_dict().items()},
        copy.deepcopy(opt.state_dict()),
    )


def _restored(weights, opt_state):
    m, opt, body = _training()
    m.load_state_dict(weights)
    opt.load_state_dict(opt_state)
    return m, opt, body


def _lost_upload(**kwargs):
    raise RuntimeError(
        "Failed to allocate buffer copy: c/runtime/src/iree/hal/drivers/vulkan/queue.c:6000: "
        "DATA_LOSS; [vkWaitSemaphores] VK_ERROR_DEVICE_LOST"
    )


def test_steps_compiled_after_a_lost_device_run_on_a_fresh_one(monkeypatch):
    """Before, every step of the process failed after the driver lost the device, those
    compiled afterwards included (CI: a pytest worker's 238 Vulkan tests). The loss is
    injected where CI saw it (an upload), so it is the same on every driver."""
    x, y = staged.randn(4, 8), staged.randint(0, 3, (4,))
    m, opt, body = _training()
    step = staged.compile(body)
    for _ in range(3):
        step(x, y).item()
    lost = device("llvm-cpu")
    checkpoint = _checkpoint(m, opt)
    monkeypatch.setattr(lost, "_allocate_copy", _lost_upload)
    for _ in range(2):  # the old step keeps its device
        with pytest.raises(DeviceLostError) as e:
            step(x, y)
        assert re.search(
            r"llvm-cpu device 'local-task' was lost \(.*VK_ERROR_DEVICE_LOST\).*build the "
            r"model and optimizer again, load their state from a checkpoint",
            str(e.value),
        )
    assert device("llvm-cpu") is not lost

    # rebuilt from the checkpoint and compiled again, training goes on as eagerly
    m, opt, body = _restored(*checkpoint)
    again = staged.compile(body)
    got = [again(x, y).item() for _ in range(3)]
    assert again._last.device is device("llvm-cpu")
    em, eopt, ebody = _restored(*checkpoint)
    want = [ebody(x, y).item() for _ in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for p, q in zip(m.parameters(), em.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


@needs_vulkan
def test_a_step_failed_on_vulkan_raises_or_goes_on_right_and_new_steps_run():
    """On lavapipe a failed step fails the device's queue (Note [failed steps]), at times
    only the call's timeline: later calls raise the step's error or the loss, or, where
    the device survived, train on from the state before the failed call."""
    x, y = staged.randn(4, 8), staged.randint(0, 3, (4,))
    m, opt, body = _training()
    step = staged.compile(body, backend="vulkan-spirv")
    em, eopt, ebody = _training()
    want = [ebody(x, y).item() for _ in range(8)]
    for k in range(3):
        assert step(x, y).item() == pytest.approx(want[k], rel=1e-5)
    failed = device("vulkan-spirv")
    step(x, y)
    failed_timeline = step._last.module._timeline[0]
    failed_timeline.fail("injected device failure")
    k = 3  # the failed call's update was undone
    for _ in range(4):
        try:
            got = step(x, y).item()
        except RuntimeError as err:
            assert re.search("injected device failure|was lost", str(err)), err
        else:
            assert got == pytest.approx(want[k], rel=1e-5)
            k += 1
    assert device("vulkan-spirv") is not failed
    other = staged.compile(lambda x: (x * 3).sum(), backend="vulkan-spirv")
    assert other(staged.ones(5)).item() == 15
    assert other._last.device is device("vulkan-spirv")


@needs_vulkan
def test_a_failed_step_read_on_vulkan_retires_its_device():
    """The step's own error where its result is read; the next step compiled needs no
    DeviceLostError first to get a working device."""
    step = staged.compile(lambda x: (x * 2).sum(), backend="vulkan-spirv")
    x = staged.ones(5)
    for _ in range(3):
        assert step(x).item() == 10
    failed = device("vulkan-spirv")
    out = step(x)
    step._last.module._timeline[0].fail("injected device failure")
    with pytest.raises(RuntimeError, match="injected device failure"):
        out.item()
    assert device("vulkan-spirv") is not failed
    other = staged.compile(lambda x: (x * 3).sum(), backend="vulkan-spirv")
    assert other(x).item() == 15
