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
import functools
import weakref

import numpy as np

DRIVERS = {"llvm-cpu": "local-task", "vulkan-spirv": "vulkan", "cuda": "cuda"}


class DeviceError(RuntimeError):
    """The driver or device for a backend is not available here."""


class DeviceValue:
    """An array on an IREE device: a Tensor payload read back lazily (Note [device values])."""

    __slots__ = ("device", "view", "shape", "dtype")

    def __init__(self, device: "Device", view, dtype):
        self.device = device
        self.view = view
        self.shape = tuple(view.shape)
        self.dtype = np.dtype(dtype)

    def __array__(self, dtype=None, copy=None):
        a = self.device.read(self.view, self.dtype)
        return a if dtype is None else a.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"<DeviceValue {self.dtype}{list(self.shape)} on {self.device.backend}>"


class Device:
    """One IREE HAL device for a backend (``device(backend)`` shares one per backend)."""

    def __init__(self, backend: str = "llvm-cpu"):
        import iree.runtime as rt

        if backend not in DRIVERS:
            raise ValueError(f"unknown backend {backend!r}; known: {', '.join(DRIVERS)}")
        self.backend, self.driver = backend, DRIVERS[backend]
        try:
            self.config = rt.Config(self.driver)
        except (RuntimeError, ValueError) as err:
            cause = err.__cause__ or err.__context__
            raise DeviceError(f"backend {backend!r}: IREE driver {self.driver!r} has no "
                              f"usable device: {err}{f' ({cause})' if cause else ''}") from None
        self._rt = rt
        self.hal = self.config.device

    def load(self, vmfb: bytes) -> "Module":
        return Module(self, self._rt.VmModule.copy_buffer(self.config.vm_instance, vmfb))

    def load_with(self, vm_module, extra_modules) -> "Module":
        """Load a VM module after ``extra_modules`` (e.g. a parameters module)."""
        return Module(self, vm_module, extra_modules)

    def upload(self, array) -> "DeviceValue":
        """A DeviceValue holding a copy of ``array``."""
        rt = self._rt
        a = np.asarray(array, order="C")  # not ascontiguousarray: it makes 0-d arrays 1-d
        view = self.hal.allocator.allocate_buffer_copy(
            memory_type=rt.MemoryType.DEVICE_LOCAL, allowed_usage=rt.BufferUsage.DEFAULT,
            device=self.hal, buffer=a, element_type=rt.array_interop.map_dtype_to_element_type(
                a.dtype))
        return DeviceValue(self, view, a.dtype)

    def read(self, view, dtype) -> np.ndarray:
        """A writable host copy of a buffer view's data, as ``dtype``."""
        rt = self._rt
        raw = rt.HalElementType.map_to_dtype(view.element_type)
        shape = tuple(view.shape)
        buf = view.get_buffer()
        if (buf.memory_type() & int(rt.MemoryType.HOST_VISIBLE)
                and buf.allowed_usage() & int(rt.BufferUsage.MAPPING_SCOPED)):
            a = np.array(view.map().asarray(shape, raw), copy=True)
        else:
            a = self._read_staged(buf, shape, raw)
        return a if a.dtype == dtype else a.astype(dtype)

    def _read_staged(self, source, shape, raw) -> np.ndarray:
        rt = self._rt
        staging = self.hal.allocator.allocate_buffer(
            memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
            allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
            allocation_size=source.byte_length())
        sem = self.hal.create_semaphore(0)
        self.hal.queue_copy(source, staging, wait_semaphores=rt.HalFence.create_at(sem, 0),
                            signal_semaphores=rt.HalFence.create_at(sem, 1))
        rt.HalFence.create_at(sem, 1).wait()
        return np.array(staging.map().asarray(shape, raw), copy=True)

    def __repr__(self) -> str:
        return f"<staged device {self.backend} ({self.driver})>"


@functools.lru_cache(maxsize=None)
def device(backend: str = "llvm-cpu") -> Device:
    return Device(backend)


def to_host(x) -> np.ndarray:
    """A writable NumPy copy of a DeviceValue (or any array-like)."""
    return np.array(x.__array__() if isinstance(x, DeviceValue) else x, copy=True)


_LOADED: "weakref.WeakSet[Module]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    # Interpreter shutdown frees objects in no particular order; a VM context freed after
    # its instance segfaults, so close every loaded module first.
    for m in list(_LOADED):
        m.close()


class Module:
    """A loaded vmfb; ``invoke`` calls one of its functions."""

    def __init__(self, dev: Device, vm_module, extra_modules=()):
        rt = dev._rt
        self.device = dev
        self._rt = rt
        self.context = rt.VmContext(dev.config.vm_instance, modules=[
            *dev.config.default_vm_modules, *extra_modules, vm_module])
        self._module = vm_module
        self._functions = {}
        _LOADED.add(self)

    def close(self) -> None:
        """Release the VM context and module (before their device goes away)."""
        self._functions = {}
        self.context = self._module = None

    def function(self, name: str):
        f = self._functions.get(name)
        if f is None:
            f = self._module.lookup_function(name)
            if f is None:
                raise KeyError(f"compiled module has no function {name!r}")
            self._functions[name] = f
        return f

    def invoke(self, fn_name: str, args, result_dtypes=None) -> list:
        """Call ``fn_name`` on NumPy arrays or DeviceValues; returns DeviceValues (no copy
        to the host). MLIR integers are signless, so results read as signed unless
        ``result_dtypes`` (NumPy dtypes) says otherwise."""
        rt = self._rt
        dev = self.device
        arg_list = rt.VmVariantList(len(args))
        for a in args:
            if not (isinstance(a, DeviceValue) and a.device is dev):
                a = dev.upload(a)
            arg_list.push_ref(a.view)
        ret = rt.VmVariantList(1)
        self.context.invoke(self.function(fn_name), arg_list, ret)
        out = []
        for i in range(len(ret)):
            bv = ret.get_as_object(i, rt.HalBufferView)
            dtype = _dtype(bv) if result_dtypes is None else result_dtypes[i]
            out.append(DeviceValue(dev, bv, dtype))
        return out


@functools.lru_cache(maxsize=None)
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
