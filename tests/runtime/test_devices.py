"""staged.compile(device=...): which device of the backend's IREE driver runs the step."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import staged
from staged.runtime.device import DeviceError, available_devices, device, parse_device
from tests.backends import train_against_eager


def test_device_specs_parse_like_torch_devices():
    assert parse_device("llvm-cpu") == ("local-task", None)
    assert parse_device("llvm-cpu", 0) == ("local-task", 0)
    assert parse_device("llvm-cpu", "local-sync:0") == ("local-sync", 0)
    assert parse_device("llvm-cpu", "cpu") == ("local-task", None)
    assert parse_device("cuda", "cuda:1") == ("cuda", 1)
    assert parse_device("vulkan-spirv", "vulkan") == ("vulkan", None)
    with pytest.raises(ValueError, match=r"cannot run a llvm-cpu step.*local-task, local-sync"):
        parse_device("llvm-cpu", "cuda:0")
    with pytest.raises(ValueError, match="'driver:index'"):
        parse_device("llvm-cpu", "local-task:first")
    with pytest.raises(TypeError, match="device must be None, an int or a string"):
        parse_device("llvm-cpu", 1.5)
    assert "local-task:0 (default)" in available_devices("llvm-cpu")


@pytest.mark.parametrize("spec", ["local-sync", "local-task:0", 0])
def test_llvm_cpu_step_runs_on_the_chosen_device(spec):
    (step,) = train_against_eager(devices=(spec,))
    assert step._last.device.driver == parse_device("llvm-cpu", spec)[0]
    assert step._last.device is device("llvm-cpu", spec)  # one Device per device


def test_state_moves_between_devices_between_calls():
    # parameters left on a local-sync device by one step are read by a local-task step
    a, b = train_against_eager(devices=("local-sync", "local-task"))
    assert a._last.device is not b._last.device


def test_unknown_device_is_a_clear_error_listing_the_available_ones():
    with pytest.raises(
        DeviceError,
        match=r"no device local-task:7.*available: "
        r"local-task:0 \(default\), local-sync:0",
    ):
        staged.compile(lambda x: x * 2, device="local-task:7")
    with pytest.raises(ValueError, match="cannot run a llvm-cpu step"):
        staged.compile(lambda x: x * 2, device="vulkan:0")


def test_deployed_step_loads_on_a_chosen_device(tmp_path):
    (step,) = train_against_eager()
    step.save(tmp_path / "d")
    loaded = staged.runtime.load(tmp_path / "d", device="local-sync")
    assert loaded.device.name == "local-sync"
    x, y = staged.randn(16, 6), staged.randint(0, 3, (16,))
    np.testing.assert_allclose(loaded(x, y).item(), step(x, y).item(), rtol=1e-5)


def _vulkan_missing():
    try:
        device("vulkan-spirv")
    except DeviceError as err:
        return str(err)
    return None


VULKAN_MISSING = _vulkan_missing()


@pytest.mark.skipif(VULKAN_MISSING is not None, reason=f"no Vulkan device ({VULKAN_MISSING})")
def test_vulkan_device_by_index_and_unknown_index():
    (step,) = train_against_eager("vulkan-spirv", ("vulkan:0",))
    assert step._last.device.name == "vulkan:0"
    n = len([d for d in available_devices("vulkan-spirv") if d.startswith("vulkan:")])
    with pytest.raises(DeviceError, match=rf"no device vulkan:{n}.*available: vulkan:0 \("):
        staged.compile(lambda x: x * 2, backend="vulkan-spirv", device=f"vulkan:{n}")


def test_cpu_steps_enqueue_and_wait_on_their_fence(tmp_path):
    """Note [asynchronous steps]: llvm-cpu steps take the coarse-fences ABI; consecutive
    calls run in order on the module's timeline."""
    (step,) = train_against_eager()
    entry = step._last
    assert entry.module.function("main")[1]  # takes fences
    sem, value = entry.module._timeline
    assert sem.query() == value >= 2  # the two calls after the one-shot first trace
    step.save(tmp_path / "d")  # the deployed module keeps the synchronous ABI
    assert not staged.runtime.load(tmp_path / "d")._vm.function("main")[1]


def test_a_failed_step_raises_from_the_wait():
    from staged.runtime.device import _wait

    sem = device().hal.create_semaphore(0)
    sem.fail("the step failed")
    with pytest.raises(RuntimeError, match="the step failed"):
        _wait(sem, 1)


def test_calls_from_two_threads_on_one_step_each_get_their_own_results():
    import threading

    f = staged.compile(lambda x: x * 2 + 1)
    xs = [staged.full((64,), float(i)) for i in range(40)]
    f(xs[0])
    bad = []

    def worker(part):
        for x in part:
            if not np.array_equal(f(x).numpy(), x.numpy() * 2 + 1):
                bad.append(x)

    threads = [threading.Thread(target=worker, args=(xs[k::2],)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


_IDLE_THREADS = """
import os, time
import numpy as np
import staged
from staged.runtime.device import _thread_ids
def _cpu_ns(tid):
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[0])
    except OSError:  # the thread has ended
        return 0
step = staged.compile(lambda x: (x * 2).sum(), backend="vulkan-spirv")
assert step(staged.tensor(np.ones(4, np.float32))).item() == 8
time.sleep(0.2)
start = {t: _cpu_ns(t) for t in _thread_ids()}
time.sleep(0.5)
for t, ns in start.items():
    share = (_cpu_ns(t) - ns) / 0.5e9
    if share > 0.25:
        print(t, open(f"/proc/self/task/{t}/comm").read().strip(), round(share, 2),
              os.getpriority(os.PRIO_PROCESS, t))
"""


@pytest.mark.skipif(VULKAN_MISSING is not None, reason=f"no Vulkan device ({VULKAN_MISSING})")
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads threads from /proc")
def test_threads_that_poll_an_idle_vulkan_device_run_at_the_lowest_priority():
    """Note [idle pollers]: lavapipe's semaphore waits spin; nothing that runs while the
    process is idle may compete with real work."""
    p = subprocess.run([sys.executable, "-c", _IDLE_THREADS], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    busy = [line.split() for line in p.stdout.splitlines()]
    assert all(b[-1] == "19" for b in busy), busy
