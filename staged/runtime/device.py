"""Devices and compiled modules over ``iree.runtime``: load a vmfb, invoke its functions
on device-resident values, move data between host and device.

Note [device values]: results stay on the device as ``DeviceValue``s, which a Tensor can
hold as its payload (they have ``shape``, ``dtype`` and ``__array__``). Reading one back
maps the buffer when the device allows it (CPU) and otherwise copies it through a
host-visible staging buffer: importing a NumPy allocation, iree.runtime's default, fails
on Vulkan drivers that need page-aligned host pointers (lavapipe: 4096 bytes).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
import time
import weakref
from typing import Any

import numpy as np

from .._interrupts import deferred_interrupts
from .._locks import fork_safe
from .._where import at_user

DRIVERS = {"llvm-cpu": "local-task", "vulkan-spirv": "vulkan", "cuda": "cuda"}
# the IREE drivers that run what a backend compiles (the first is the default): an
# llvm-cpu module runs on the multi-threaded local-task driver or the single-threaded,
# caller-thread local-sync one
BACKEND_DRIVERS = {
    "llvm-cpu": ("local-task", "local-sync"),
    "vulkan-spirv": ("vulkan",),
    "cuda": ("cuda",),
}
_ALIASES = {"cpu": "local-task"}  # PyTorch's spelling
# Note [caching allocator]: a step's results and intermediates come from the local
# driver's own queue-allocation pools (IREE 3.13: TLSF over 64 MB slabs), which reuse
# freed blocks; the HAL allocator below serves only uploads. Wrapped in IREE's caching
# allocator, an upload that each call repeats (the data batch, state the step reads but
# does not write) reuses the buffer the last one freed instead of faulting fresh pages in:
# 3 MB in 160 instead of 270 us, 0.8 MB in 23 instead of 37 us (2-core x86_64). That
# allocator keeps the buffers freed to it (64, of any total size; once full, it keeps no
# more), each for a later request of exactly its size: the state a step writes, uploaded
# once at its first call and then replaced by its results (Note [state uploads] in
# compiled.py), stayed cached, unused, for the life of the process (a 2-layer transformer
# of width 768: 54 MB of its 249 MB peak). Such one-off uploads (``upload(once=True)``)
# skip the cache: buffers for export are not pooled.
ALLOCATORS = {"local-task": ["caching"], "local-sync": ["caching"]}


class DeviceError(RuntimeError):
    """The driver or device for a backend is not available here."""


class DeviceLostError(DeviceError):
    """The driver lost the device: what it held is gone (Note [lost devices])."""


# Note [lost devices]: a device the driver lost (VK_ERROR_DEVICE_LOST, which IREE reports
# as DATA_LOSS: a fault, a driver reset, on lavapipe often a step that failed on it: Note
# [failed steps]) fails every later use, the uploads of steps compiled afterwards included:
# one such loss made every later Vulkan test of a pytest worker fail (CI, 2026-12-07: 238
# tests). Staged retires a device it sees lost (``Device.retire``): ``device()`` makes a
# fresh one for the steps compiled from then on, while the steps and values on the lost
# one keep it and raise ``DeviceLostError``, which says what is gone and what to do. A
# failed step seen on Vulkan retires its device too (lavapipe lost it at 11 of 12
# failures injected as tests/runtime/test_lost_device.py does), so the next step compiled
# gets a working one; a retired device that was not lost goes on serving its steps.
# The markers: IREE's message for VK_ERROR_DEVICE_LOST, and its status code, all a lost
# device's semaphores answer a query with.
_LOST = ("DEVICE_LOST", "DATA_LOSS")


def _raise_if_lost(dev, err: RuntimeError) -> None:
    """Raise the DeviceLostError ``err`` stands for where it says the driver lost ``dev``
    (which is then retired)."""
    text = str(err)
    if isinstance(err, DeviceLostError) or not any(m in text for m in _LOST):
        return
    dev.retire()
    raise DeviceLostError(
        f"the {dev.backend} device {dev.name!r} was lost ({err}): the driver gave up on it "
        "(a step that failed or faulted on it, or a driver reset), and the values and "
        "compiled steps on it are gone, the tensors they updated included. Steps "
        "compiled from now on get a fresh device: build the model and optimizer again, "
        "load their state from a checkpoint (load_state_dict) and staged.compile the step "
        "(or staged.runtime.load it) again (Note [lost devices] in staged/runtime/device.py)"
    ) from err


class DeviceValue:
    """An array on an IREE device: a Tensor payload read back lazily (Note [device values]).
    ``ready`` is the (semaphore, value, Module) the step computing it signals when done,
    until a read has waited for it (Note [asynchronous steps]). ``check``, if set, raises
    when the step's index checks failed (``runtime/checks.py``). ``home`` is a host copy
    kept while the value cannot be read from its device: in a forked child, and after the
    buffers are released at exit (Note [fork])."""

    __slots__ = ("device", "view", "shape", "dtype", "ready", "check", "home", "__weakref__")
    home: np.ndarray | None

    def __init__(self, device: Device, view, dtype, ready=None):
        self.device = device
        self.view = view
        self.shape = tuple(view.shape)
        self.dtype = np.dtype(dtype)
        self.ready = ready
        self.check = self.home = None
        _LIVE.add(weakref.ref(self, _LIVE.discard))

    def _finish(self) -> None:
        """Block until the step computing this value has finished; raise its error."""
        if self.home is not None:
            return
        if self.device.forks != _FORKS[0]:
            check_process(self.device)
        if self.ready is not None:
            sem, value, module = self.ready
            try:
                _wait(sem, value)
            except RuntimeError as err:
                module.failed()
                _raise_if_lost(self.device, err)
                raise
            self.ready = None
            module.finished(value)

    def wait(self) -> None:
        """Block until the step computing this value has finished; raise its error, or
        that of its failed index check."""
        self._finish()
        if self.check is not None:
            self.check()
            self.check = None

    def __array__(self, dtype=None, copy=None):
        """A fresh writable host array (``copy`` is met whatever it says: a read is a copy)."""
        self.wait()
        home = self.home
        a = self.device.read(self.view, self.dtype) if home is None else home.copy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def keep_home(self, quiet_checks: bool = False) -> None:
        """Keep a host copy as ``home`` (Note [fork]); a failed index check stays to be
        raised when the value is read (``quiet_checks``: dropped); a failed step's value,
        which has no data, keeps none."""
        if self.home is not None or self.view is None or self.device.forks != _FORKS[0]:
            return
        if quiet_checks:
            self.check = None
        with contextlib.suppress(RuntimeError):  # (Note [failed steps] in compiled.py)
            if self.check is not None:
                self.check.failed()  # read now: a child cannot read the report
            self._finish()
            self.home = self.device.read(self.view, self.dtype)

    def release(self) -> None:
        """Drop the buffer and the call's fence at shutdown (``_bring_state_home`` in
        compiled.py); only ``home`` can be read after. A parent's value in a forked child
        is kept (Note [fork])."""
        if self.device.forks == _FORKS[0]:
            self.view = self.ready = self.check = None

    def __repr__(self) -> str:
        return f"<DeviceValue {self.dtype}{list(self.shape)} on {self.device.name}>"


class LostValue(DeviceValue):
    """What a tensor holds whose device buffer a failed call was writing in place (Note
    [state in place] in lower/mlir/in_place.py): its shape and dtype, and no values;
    reading it (or calling a step on it) raises ``DeviceError`` saying so."""

    __slots__ = ("reason",)
    has_data = False  # a write of all of it needs none (Tensor._host)

    def __init__(self, old: DeviceValue, reason: str):
        self.device, self.view, self.shape, self.dtype = old.device, None, old.shape, old.dtype
        self.ready = self.check = self.home = None
        self.reason = reason

    def _finish(self) -> None:
        raise DeviceError(self.reason)

    def keep_home(self, quiet_checks: bool = False) -> None:
        pass  # nothing to keep

    def __repr__(self) -> str:
        return f"<LostValue {self.dtype}{list(self.shape)} on {self.device.name}>"


# every DeviceValue alive (weak references: a set, not a WeakSet, whose iteration another
# thread's add can break); a fork or the exit copies them home without walking the heap
_LIVE: set = set()


def live_values() -> list[DeviceValue]:
    """The DeviceValues alive in this process."""
    return [v for r in list(_LIVE) if (v := r()) is not None]


def parse_device(backend: str, spec=None) -> tuple:
    """``(driver, index)`` for a ``device=`` argument: None (the default driver's default
    device), an int (that device of the default driver), or a string ``"driver"`` /
    ``"driver:index"`` naming one of ``BACKEND_DRIVERS[backend]`` (``"cpu"`` means
    ``"local-task"``). ``index`` is None for the driver's default device; indices count
    the devices ``iree.runtime.get_driver(driver).query_available_devices()`` lists."""
    if backend not in DRIVERS:
        raise ValueError(at_user(f"unknown backend {backend!r}; known: {', '.join(DRIVERS)}"))
    drivers = BACKEND_DRIVERS[backend]
    index: int | None
    if spec is None:
        return drivers[0], None
    if isinstance(spec, int) and not isinstance(spec, bool):
        driver, index = drivers[0], spec
    elif isinstance(spec, str):
        name, sep, idx = spec.strip().partition(":")
        driver = _ALIASES.get(name, name)
        if sep and not idx.isdigit():
            raise ValueError(
                f"device {spec!r}: expected 'driver' or 'driver:index' "
                f"(e.g. {drivers[0]!r} or '{drivers[0]}:0')"
            )
        index = int(idx) if sep else None
        if driver not in drivers:
            raise ValueError(
                f"device {spec!r} cannot run a {backend} step: {backend} runs on "
                f"the IREE driver{'s' if len(drivers) > 1 else ''} "
                f"{', '.join(drivers)}; available here: "
                f"{', '.join(available_devices(backend)) or 'none'}"
            )
    else:
        raise TypeError(
            f"device must be None, an int or a string like "
            f"'{drivers[0]}:0', got {type(spec).__name__}"
        )
    if index is not None and index < 0:
        raise ValueError(f"device index must be >= 0, got {index}")
    return driver, index


def available_devices(backend: str) -> list:
    """The devices that can run a ``backend`` step here, as ``"driver:index (name)"``."""
    import iree.runtime as rt

    out = []
    for driver in BACKEND_DRIVERS[backend]:
        try:
            infos = _get_driver(rt, driver).query_available_devices()
        except (RuntimeError, ValueError):  # the driver's library is not installed
            continue
        out += [
            f"{driver}:{i} ({info.get('name') or info.get('path') or 'default'})"
            for i, info in enumerate(infos)
        ]
    return out


# Note [MPI environment]: under mpiexec (PMI_SIZE, OMPI_COMM_WORLD_SIZE or MPIEXEC_HOSTNAME
# set) IREE gives every device it creates an MPI channel provider, for its own collective
# ops, loading libmpi.so itself, and fails where that is not on the library path (MPICH's
# wheel). staged runs collectives on the host (Note [segments]), so a device is created
# with those variables hidden from IREE.
_MPI_ENV = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPIEXEC_HOSTNAME")


@contextlib.contextmanager
def _without_mpi_env():
    hidden = {k: os.environ.pop(k) for k in _MPI_ENV if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(hidden)


# Note [idle pollers]: on Mesa's lavapipe (the CPU Vulkan driver CI tests on), opening an
# IREE Vulkan device starts two threads that wait on its timeline semaphores, and Mesa's
# wait for any of several semaphores is a spin loop when the driver cannot block on them:
# each thread kept a core busy (2 CPU seconds per idle second on 2 cores, measured here) for
# the device's life, the process's. On a busy machine they took two thirds of the CPU from
# the threads doing work. So the threads a Vulkan device's creation started that then run
# while it is idle get the lowest priority (nice 19): they still see every completion, and
# take the cores only when nothing else wants them. Linux only (/proc); a driver whose
# waits block starts no such thread, and nothing changes.
_POLL_PROBE_S = 0.02


def _thread_ids() -> set[int]:
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _runnable(tid: int) -> bool:
    """Whether the thread is running or waiting for a core (state R), not asleep."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "R"
    except (OSError, IndexError):
        return False


def _demote_pollers(before: set[int]) -> None:
    """Nice 19 for the threads started since ``before`` that stay runnable while the
    device is idle (Note [idle pollers]): asleep in no sample of the probe, however busy
    the machine is (a CPU-time threshold missed them under load)."""
    polling = _thread_ids() - before
    for _ in range(8):
        time.sleep(_POLL_PROBE_S / 8)
        polling = {t for t in polling if _runnable(t)}
        if not polling:
            return
    for t in polling:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, t, 19)


class Device:
    """One IREE HAL device for a backend (``device(backend, spec)`` shares one per device)."""

    def __init__(self, backend: str = "llvm-cpu", spec=None):
        import iree.runtime as rt

        self.driver, self.index = parse_device(backend, spec)
        self.backend = backend
        self.forks = _FORKS[0]  # Note [fork]
        where = f"IREE driver {self.driver!r}"
        allocators = ALLOCATORS.get(self.driver)
        try:
            drv = _get_driver(rt, self.driver)
            before = _thread_ids()
            with _without_mpi_env():  # Note [MPI environment]
                hal, where = self._create(drv, backend, allocators)
            if self.driver == "vulkan":
                _demote_pollers(before)
            self.config = rt.Config(device=hal)
        except (RuntimeError, ValueError) as err:
            if isinstance(err, DeviceError):
                raise
            cause = err.__cause__ or err.__context__
            raise DeviceError(
                f"backend {backend!r}: {where} has no usable device: "
                f"{err}{f' ({cause})' if cause else ''}"
            ) from None
        self._rt = rt
        self.hal = self.config.device
        self._allocate_copy = self.hal.allocator.allocate_buffer_copy
        self._local, self._usage = rt.MemoryType.DEVICE_LOCAL, rt.BufferUsage.DEFAULT
        self._once_usage = (
            rt.BufferUsage.DEFAULT | rt.BufferUsage.SHARING_EXPORT
            if allocators
            else rt.BufferUsage.DEFAULT
        )
        # device buffers in host memory: a failed step leaves them readable (Note [failed steps])
        self.host_memory = self.driver in BACKEND_DRIVERS["llvm-cpu"]
        # what a read asks of a buffer to map it (made once: Note [per-call costs] in compiled.py)
        self._mappable = int(rt.MemoryType.HOST_VISIBLE), int(rt.BufferUsage.MAPPING_SCOPED)

    def _create(self, drv, backend, allocators):
        """(the HAL device, how errors name it)."""
        where = f"IREE driver {self.driver!r}"
        if self.index is None:
            return drv.create_device_by_uri(self.driver, allocators=allocators), where
        infos = drv.query_available_devices()
        if self.index >= len(infos):
            raise DeviceError(
                f"backend {backend!r}: no device {self.driver}:{self.index} (the driver "
                f"lists {len(infos)}); available: "
                f"{', '.join(available_devices(backend)) or 'none'}"
            )
        where += f" device {self.index} ({infos[self.index].get('name')})"
        return drv.create_device(infos[self.index], allocators=allocators), where

    @property
    def name(self) -> str:
        return self.driver if self.index is None else f"{self.driver}:{self.index}"

    def retire(self) -> None:
        """Make ``device()`` hand out a fresh device in place of this one, which the steps
        and values on it keep (Note [lost devices])."""
        with _DEVICES_LOCK:
            for key in [k for k, d in _DEVICES.items() if d is self]:
                _RETIRED.append(_DEVICES.pop(key))

    def step_failed(self) -> None:
        """A step failed on this device, which loses it on Vulkan (Note [lost devices])."""
        if self.driver == "vulkan":
            self.retire()

    def load(self, vmfb: bytes) -> Module:
        return Module(self, self._rt.VmModule.copy_buffer(self.config.vm_instance, vmfb))

    def load_with(self, vm_module, extra_modules) -> Module:
        """Load a VM module after ``extra_modules`` (e.g. a parameters module)."""
        return Module(self, vm_module, extra_modules)

    def upload(self, array, once: bool = False) -> DeviceValue:
        """A DeviceValue holding a copy of ``array``; ``once``: no later call uploads it
        again, so its buffer skips the caching allocator (Note [caching allocator])."""
        a = np.asarray(array, order="C")  # not ascontiguousarray: it makes 0-d arrays 1-d
        try:
            view = self._allocate_copy(
                memory_type=self._local,
                allowed_usage=self._once_usage if once else self._usage,
                device=self.hal,
                buffer=a,
                element_type=_element_type(a.dtype),
            )
        except RuntimeError as err:
            _raise_if_lost(self, err)
            raise
        return DeviceValue(self, view, a.dtype)

    def read(self, view, dtype) -> np.ndarray:
        """A writable host copy of a buffer view's data, as ``dtype``."""
        raw = _raw_dtype(view.element_type)
        shape = tuple(view.shape)
        buf = view.get_buffer()
        visible, mapping = self._mappable
        try:
            if buf.memory_type() & visible and buf.allowed_usage() & mapping:
                a = np.array(view.map().asarray(shape, raw), copy=True)
            else:
                a = self._read_staged(buf, shape, raw)
        except RuntimeError as err:
            _raise_if_lost(self, err)
            raise
        return a if a.dtype == dtype else a.astype(dtype)

    def _read_staged(self, source, shape, raw) -> np.ndarray:
        rt = self._rt
        staging = self.hal.allocator.allocate_buffer(
            memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
            allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
            allocation_size=source.byte_length(),
        )
        sem = self.hal.create_semaphore(0)
        self.hal.queue_copy(
            source,
            staging,
            wait_semaphores=rt.HalFence.create_at(sem, 0),
            signal_semaphores=rt.HalFence.create_at(sem, 1),
        )
        # not a fence's wait: iree.runtime 3.13's spins, 20-70 ms of CPU a read on lavapipe
        # (a loaded 2-core machine) against 1 ms; and as calls wait (polling first), not
        # blocking in vkWaitSemaphores at once: CI's first run that did so lost its lavapipe
        # device there (VK_ERROR_DEVICE_LOST, once; not reproduced)
        _wait(sem, 1)
        return np.array(staging.map().asarray(shape, raw), copy=True)

    def __repr__(self) -> str:
        return f"<staged device {self.backend} ({self.name})>"


# Note [thread count]: IREE's local-task driver sizes its worker pool from the flag
# ``--task_topology_max_group_count`` when the driver is created, once per process, at the
# first llvm-cpu step (iree.runtime caches drivers and offers no way to make another).
# ``staged.set_num_threads(n)`` asks for ``n``: the flag is set when the driver is made, so
# it takes effect where no llvm-cpu step has run yet; later it warns that compiled steps
# keep the pool they have (NumPy's BLAS, the eager side, changes at once: _blas.py).
# Without it, ``OMP_NUM_THREADS`` sizes the pool, as it sizes torch's and NumPy's: a
# program run with OMP_NUM_THREADS=1 is single-threaded in every mode.
_task_threads: list[int | None] = [None]
_drivers: set = set()  # the IREE drivers this process has made (iree.runtime caches them)


def set_task_threads(n: int) -> bool:
    """Cap the local-task driver's workers at ``n``; False where its pool exists already."""
    _task_threads[0] = int(n)
    return "local-task" not in _drivers


def _omp_threads() -> int | None:
    """``OMP_NUM_THREADS`` where it is a positive count."""
    n = os.environ.get("OMP_NUM_THREADS", "")
    return int(n) if n.isdigit() and int(n) > 0 else None


def _get_driver(rt, name: str):
    n = _task_threads[0] if _task_threads[0] is not None else _omp_threads()
    if name == "local-task" and name not in _drivers and n is not None:
        rt.flags.parse_flags(f"--task_topology_max_group_count={n}")
    _drivers.add(name)
    if _FORKS[0]:  # iree.runtime's cached driver has the parent's workers (Note [fork])
        if name not in _child_drivers:
            from iree.runtime._binding import create_hal_driver

            _child_drivers[name] = create_hal_driver(name)
        return _child_drivers[name]
    return rt.get_driver(name)


# Note [fork]: IREE's task workers are threads, which a fork does not copy: a child forked
# after a compiled step ran (``multiprocessing``'s fork start method, Linux's default
# before Python 3.14) waited forever at its first read of a tensor the step had left on
# the device, or at a call of a step. So before a fork every DeviceValue keeps a host copy
# (``home``, which the child reads; the parent drops its copies after the fork and goes on
# reading its devices), and the child makes devices of its own from fresh drivers, keeping
# the parent's runtime objects (devices, modules, the values' buffers and fences)
# unreleased (releasing them could wait on the workers that are gone); a step of the
# parent's, used in the child, raises, saying what to do instead.
# The values are found by a registry (``_LIVE``), not a walk of the heap: ``gc.get_objects``
# hands out objects other threads are still building, and a thread building a tuple then
# failed (``SystemError: bad argument to internal function`` in ``tuple(...)``).
_FORKS = [0]  # forks between this process and its parent that made devices
_child_drivers: dict = {}
_LEFT_BY_PARENT: list = []


def _before_fork() -> None:
    for v in live_values():
        v.keep_home()


def _after_fork_in_parent() -> None:
    for v in live_values():
        if v.view is not None and v.device.forks == _FORKS[0]:  # (not released at exit)
            v.home = None


def _after_fork_in_child() -> None:
    if not (_DEVICES or _drivers):
        return
    values = [(v.view, v.ready) for v in live_values()]  # a tensor read here drops its value
    _LEFT_BY_PARENT.append((list(_DEVICES.values()), list(_LOADED), dict(_child_drivers), values))
    _DEVICES.clear()
    _LOADED.clear()
    _drivers.clear()
    _child_drivers.clear()
    _FORKS[0] += 1


def check_process(dev) -> None:
    """Raise where ``dev`` (a Device) was made by the process this one was forked from."""
    if dev.forks != _FORKS[0]:
        raise RuntimeError(
            at_user(
                "this compiled step (or a value it returned) was made before this process "
                "was forked: IREE's worker threads do not survive a fork, so the parent's "
                "steps cannot run here. Compile the step in this process (staged.compile "
                "here), or start processes with multiprocessing's 'spawn' or 'forkserver' "
                "method (Note [fork] in staged/runtime/device.py)"
            )
        )


_DEVICES: dict[tuple, Device] = {}
# retired devices, kept for the life of the process as _DEVICES keeps its own: freed with
# their last step and value, in no set order with those VM contexts, they crashed it
_RETIRED: list[Device] = []
_DEVICES_LOCK = fork_safe()
os.register_at_fork(
    before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
)


def device(backend: str = "llvm-cpu", spec=None) -> Device:
    """The shared Device for ``backend`` and a ``device=`` spec (see ``parse_device``).
    Made once under a lock: two threads' first calls made two devices, and the one not
    kept was freed under the modules loaded on it (SIGSEGV; tests/runtime/test_threads.py)."""
    key = (backend, *parse_device(backend, spec))
    dev = _DEVICES.get(key)
    if dev is None:
        with _DEVICES_LOCK:
            dev = _DEVICES.get(key)
            if dev is None:
                driver, index = key[1:]
                dev = _DEVICES[key] = Device(
                    backend, driver if index is None else f"{driver}:{index}"
                )
    return dev


def to_host(x) -> np.ndarray:
    """A writable NumPy copy of a DeviceValue (or any array-like)."""
    return x.__array__() if isinstance(x, DeviceValue) else np.array(x, copy=True)


_LOADED: weakref.WeakSet[Module] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    # Interpreter shutdown frees objects in no particular order; a VM context freed after
    # its instance segfaults, so close every loaded module first.
    for m in list(_LOADED):
        m.close()
    if _drivers:
        # Values a step left on the device may still be referenced when nanobind looks for
        # live objects at shutdown (a compiled timm ViT with gradient checkpointing: 139
        # lines of "nanobind: leaked instance ... of type ...HalDevice"): the process is
        # ending and its memory goes with it, so the report says nothing to the user.
        from iree.runtime import _binding

        _binding.disable_leak_checker()


class Module:
    """A loaded vmfb; ``invoke`` calls one of its functions."""

    _functions: dict[str, Any]
    _timeline: list[Any] | None
    _in_flight: list[tuple[int, Any, Any]]

    def __init__(self, dev: Device, vm_module, extra_modules=()):
        rt = dev._rt
        self.device = dev
        self._rt = rt
        self.context = rt.VmContext(
            dev.config.vm_instance,
            modules=[*dev.config.default_vm_modules, *extra_modules, vm_module],
        )
        self._module = vm_module
        self._functions = {}
        self._timeline = None  # [semaphore, last value] for coarse-fences functions
        self._in_flight = []  # (value, argument list, undo) of calls that may still be running
        self._lock = threading.Lock()
        self._leader: Module | None = None  # whose timeline it shares (Note [one timeline])
        self.in_place: frozenset = frozenset()  # state written in place (Note [state in place])
        self.max_in_flight = MAX_IN_FLIGHT  # its calls that may be in flight (Note [pool growth])
        _LOADED.add(self)

    @property
    def queue(self) -> Module:
        """The Module whose timeline orders this one's calls (not a reference to itself,
        which would keep a dropped module, and its device buffers, until a GC pass)."""
        return self._leader or self

    def share_queue(self, other: Module) -> None:
        """Order this module's calls on ``other``'s timeline (Note [one timeline]); before
        this one is first called."""
        self._leader = other.queue

    def close(self) -> None:
        """Wait for calls in flight, then release the VM context and module (before their
        device goes away)."""
        if self.queue._timeline is not None:
            try:
                _wait(*self.queue._timeline)
            except RuntimeError:
                pass  # a failed step: reported where its results are read
        self._release()

    def _release(self) -> None:
        """Drop the argument lists of past calls, then the VM context: freed after the
        context (the attributes' own order), a list's fences crashed the process when
        other threads were compiling (tests/runtime/test_threads.py)."""
        self._in_flight = []
        self._timeline = None
        self._functions = {}
        self.context = self._module = None

    __del__ = _release

    def finished(self, value: int) -> None:
        """A read saw the calls up to ``value`` finish: drop their argument lists and what
        they replaced (their undo), which a module called no more (a step traced again)
        kept for good; left to the next call where one is being enqueued now."""
        q = self.queue
        if q._lock.acquire(blocking=False):
            try:
                q._in_flight = [c for c in q._in_flight if c[0] > value]
            finally:
                q._lock.release()

    def failed(self) -> None:
        """A read found the timeline failed: undo the calls that may not have finished (on
        Vulkan the device is lost with it: Note [lost devices])."""
        self.device.step_failed()
        q = self.queue
        with q._lock:
            calls = q._in_flight
            q._in_flight = [(v, args, None) for v, args, _ in calls]
        q._undo(calls)

    def _undo(self, calls) -> None:
        """Note [failed steps]: undo calls newest first, back to the state before the
        oldest that was not yet seen to finish."""
        sem = self._timeline[0] if self._timeline is not None else None
        for _, _, undo in reversed(calls):
            if undo is not None:
                undo(sem)

    def function(self, name: str):
        """``(VmFunction, takes fences)`` for ``name``."""
        f = self._functions.get(name)
        if f is None:
            vf = self._module.lookup_function(name)
            if vf is None:
                raise KeyError(f"compiled module has no function {name!r}")
            f = self._functions[name] = (vf, vf.reflection.get("iree.abi.model") == "coarse-fences")
        return f

    def invoke(self, fn_name: str, args, result_dtypes=None, undo=None) -> list:
        """Call ``fn_name`` on NumPy arrays or DeviceValues; returns DeviceValues (no copy
        to the host). MLIR integers are signless, so results read as signed unless
        ``result_dtypes`` (NumPy dtypes) says otherwise. A coarse-fences function returns
        once its work is enqueued (Note [asynchronous steps]); should it fail, ``undo(sem)``
        is called (Note [failed steps])."""
        try:
            return self._invoke(fn_name, args, result_dtypes, undo)
        except RuntimeError as err:
            _raise_if_lost(self.device, err)
            raise

    def _invoke(self, fn_name: str, args, result_dtypes, undo) -> list:
        rt = self._rt
        dev = self.device
        if dev.forks != _FORKS[0]:
            check_process(dev)
        fn, fenced = self.function(fn_name)
        arg_list = rt.VmVariantList(len(args) + 2)
        ret = rt.VmVariantList(1)
        if not fenced:
            for a in args:
                arg_list.push_ref(_on_device(dev, a).view)
            self.context.invoke(fn, arg_list, ret)
            ready = None
        else:
            q = self.queue
            with q._lock:  # calls on one timeline are enqueued in order on it
                if q._timeline is None:
                    q._timeline = [dev.hal.create_semaphore(0), 0]
                sem, value = q._timeline
                try:
                    for a in args:
                        if type(a) is not DeviceValue or a.device is not dev:
                            a = dev.upload(a)
                        elif a.ready is not None and a.ready[0] is not sem:
                            a.wait()  # made by another module: ordered by waiting here
                        arg_list.push_ref(a.view)
                    arg_list.push_ref(rt.HalFence.create_at(sem, value))
                    arg_list.push_ref(rt.HalFence.create_at(sem, value + 1))
                    if value - sem.query() >= self.max_in_flight:  # raises if one failed
                        _wait(sem, value + 1 - self.max_in_flight)
                    done = sem.query()
                except RuntimeError:
                    try:
                        sem.query()
                    except RuntimeError:  # a call failed (and on Vulkan lost the device,
                        dev.step_failed()  # so an upload failed): its error, once undone
                        q._undo(q._in_flight)
                        q._timeline, q._in_flight = None, []  # the next call starts afresh
                        raise
                    raise
                with deferred_interrupts():  # the enqueue and its record (Note [interrupts])
                    q._in_flight = [c for c in q._in_flight if c[0] > done]
                    self.context.invoke(fn, arg_list, ret)
                    q._timeline[1] = value + 1
                    q._in_flight.append((value + 1, arg_list, undo))
            ready = (sem, value + 1, self)
        get, kind = ret.get_as_object, rt.HalBufferView
        views = [get(i, kind) for i in range(len(ret))]
        dtypes = map(_dtype, views) if result_dtypes is None else result_dtypes
        return [DeviceValue(dev, bv, d, ready) for bv, d in zip(views, dtypes)]


def _on_device(dev, a) -> DeviceValue:
    return a if isinstance(a, DeviceValue) and a.device is dev else dev.upload(a)


# Note [asynchronous steps]: llvm-cpu and vulkan-spirv steps are compiled with the
# coarse-fences ABI (compiler.STEP_FLAGS): a call enqueues the work on its module's
# timeline semaphore (waiting for the previous call's signal) and returns at once, as
# JAX's and PyTorch's CUDA calls do; its results carry the value the step signals
# (DeviceValue.ready) and reading one waits for it. Python work for the next call
# (arguments, the data batch, logging) then overlaps the step running on the workers:
# MLP 784-256-256-10 SGD steps at batch 32 took 0.90x the time of waiting for each (at
# batch 256, whose Python work is a tenth of the step, nothing was gained on two cores
# that the workers keep busy); on lavapipe 0.79x and 0.96x. (cuda keeps the synchronous
# ABI until it has run on a GPU.) At most MAX_IN_FLIGHT calls are in flight (one for a
# large step: Note [pool growth]): the next one waits for the oldest, so a loop that never
# reads a result does not queue (and hold the memory of) unboundedly many. Two, one
# running and the next queued behind it, keep the workers busy. Each call in flight holds
# its results and the state it replaced (its undo), and a queued call, which allocates as
# the call before it finishes, seldom reuses that call's intermediates (IREE 3.13's pools
# take a freed block only once its release is known to have passed), so each adds up to a
# step's outputs and intermediates to the peak: bench/scaling.py's steps called for 1 s
# unread peaked 42, 55, 61 MB over the process's start with 1, 2, 3 calls in flight
# (2-layer transformer of width 256), 82, 97, 110 (MLP at batch 4096), 194, 216, 270
# (width 768). Two ran as fast as three (interleaved blocks in one process, six of its
# workloads, 2-core x86_64: ratios 0.93-1.05, median 1.00);
# one was 3% slower (median over eight workloads, a 1.5-4 ms step up to 1.2x with the
# machine loaded): the workers park between calls and wait for the caller's thread to
# wake and enqueue the next. An argument made by another module is waited for before
# the call, the argument lists of calls in flight are kept (their buffers must outlive
# the work) until a read or the next call sees them finish (``Module.finished``), and a
# step's error surfaces where its results are read or at the next call.
# Command buffers are indirect (compiler.GLOBAL_FLAGS): bound when the queue runs them, as
# a call's buffers are allocated on the queue after the previous call.
#
# Note [pool growth]: with a call queued behind a running one, IREE 3.13's queue pools
# grew without bound for the data-tiled steps of bench/scaling.py's transformers of width
# 768 (2026-12-03, 2 workers, unread loops): RSS rose by about 32 MB a step with 2 layers
# (4.5 GB after 120 steps) and 120 MB with 4, not counted in the HAL allocator's statistics
# (trim() gave nothing back), and steps slowed from 140 to 220 ms (page faults). With one
# call in flight the 2-layer step stayed at 217 MB and 138 ms. Steps that did not grow with
# two: that one without data tiling (216 MB; 162 with one), widths 512 (202 MB; 138 with
# one) and 640, MLPs at batch 256 to 32768, transformers of width 64 and 256. Which sizes
# set it off is IREE's; a large step gains little from the overlap (its Python work is a
# small share of it) and holds a step's memory less with one call in flight, so a
# llvm-cpu step of 2**30 multiply-adds or more in matmuls (``compiler.one_call_in_flight``:
# about 10 ms and up on two cores; MLP batch 4096, transformers of width 256 and up) takes
# its calls one at a time (``Module.max_in_flight``, set by CompiledGraph.build): the next
# is enqueued once the last has finished. Below that, one call in flight made the MLP step
# at batch 256 (155M multiply-adds, 1.9 ms) 4% slower, so those keep two.
#
# Note [one timeline]: modules that take each other's results (a dynamic step's and its
# static modules per batch size, Note [specialized batch sizes]) share one timeline
# (``Module.share_queue``): a call on one is enqueued behind the other's last call on the
# device, instead of waiting for it here, so a loop that alternates batch sizes keeps its
# calls asynchronous; the calls in flight and a failure's undo are the timeline's,
# whichever module made each call, and the bound on them is the calling module's.
#
# Note [failed steps]: a step that fails on the device fails its timeline semaphore, and
# every call queued after it with it; the failure is seen where a result is read or at
# the next call. A call passes ``undo``, which puts back the state it replaced, and the
# module undoes, newest first, every call not yet seen to finish (at most MAX_IN_FLIGHT):
# state is then as it was before the oldest of them, and readable (what a call read was
# made by a call seen to finish). A call that finished but was not yet seen to is undone
# too: the error says the step failed, and the state is one that really was. (On Vulkan
# a failed timeline fails the device's queue too, lavapipe's at least: the state put
# back is on that device and reading it raises DATA_LOSS; only host copies would do; Note
# [lost devices].)
#
# The wait: IREE's own blocking wait spins on the calling thread once woken, until the
# worker that signalled it has finished its callback; with two cores and two workers
# that spin took a core from the workers for much of a step (a quarter of all CPU
# samples, MLP step above). Polling the semaphore and yielding the core between polls
# instead made that step 1.6x faster (batch 32: 2x). Polling stops after _POLL_S; longer
# waits block in IREE's wait, whose spin is then small next to the step.
_POLL_S = 0.02
MAX_IN_FLIGHT = 2
_yield = getattr(os, "sched_yield", lambda: time.sleep(0))


def _wait(sem, value) -> None:
    if sem.query() < value:  # raises if the step failed
        deadline = time.perf_counter() + _POLL_S
        while sem.query() < value and time.perf_counter() < deadline:
            _yield()
        sem.wait(value)  # returns at once when signalled; raises the step's error


@functools.cache
def _element_type(dtype: np.dtype):
    """IREE's element type for a NumPy dtype (iree.runtime's lookup, once per dtype)."""
    import iree.runtime as rt

    return rt.array_interop.map_dtype_to_element_type(dtype)


@functools.cache
def _raw_dtype(element_type) -> np.dtype:
    """The NumPy dtype iree.runtime maps an element type to (its lookup, once per type)."""
    import iree.runtime as rt

    return rt.HalElementType.map_to_dtype(element_type)


@functools.cache
def _dtypes() -> dict:
    import iree.runtime as rt
    from iree.runtime.dtypes import _DTYPE_TO_INFO

    out = {int(i.hal_type): np.dtype(i.dtype) for i in _DTYPE_TO_INFO.values()}
    for n in (8, 16, 32, 64):  # signless results (MLIR's iN) read as signed
        out[int(getattr(rt.HalElementType, f"INT_{n}"))] = np.dtype(f"int{n}")
    return out


def _dtype(bv) -> np.dtype:
    try:
        return _dtypes()[int(bv.element_type)]
    except KeyError:
        raise TypeError(f"no NumPy dtype for IREE element type {bv.element_type}") from None
