"""Devices and compiled modules over ``iree.runtime``: load a vmfb, invoke functions on
device-resident arrays, move arrays between host and device."""
from __future__ import annotations

import atexit
import functools
import weakref

import numpy as np

DRIVERS = {"llvm-cpu": "local-task", "vulkan-spirv": "vulkan", "cuda": "cuda"}


class DeviceError(RuntimeError):
    """The driver or device for a backend is not available here."""


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
        self.hal = self.config.device

    def load(self, vmfb: bytes) -> "Module":
        return Module(self, vmfb)

    def to_device(self, array) -> "object":
        """A DeviceArray holding a copy of ``array``."""
        import iree.runtime as rt

        a = np.asarray(array, order="C")  # not ascontiguousarray: it makes 0-d arrays 1-d
        return rt.asdevicearray(self.hal, a, implicit_host_transfer=True)

    def __repr__(self) -> str:
        return f"<staged device {self.backend} ({self.driver})>"


@functools.lru_cache(maxsize=None)
def device(backend: str = "llvm-cpu") -> Device:
    return Device(backend)


def to_host(x) -> np.ndarray:
    """A writable NumPy copy of a DeviceArray (or array-like)."""
    if hasattr(x, "to_host"):
        x = x.to_host()
    return np.array(x, copy=True)


_LOADED: "weakref.WeakSet[Module]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    # Interpreter shutdown frees objects in no particular order; a VM context freed after
    # its instance segfaults, so close every loaded module first.
    for m in list(_LOADED):
        m.close()


class Module:
    """A loaded vmfb; ``invoke`` calls one of its functions."""

    def __init__(self, dev: Device, vmfb: bytes):
        import iree.runtime as rt

        self.device = dev
        self._rt = rt
        vm_module = rt.VmModule.copy_buffer(dev.config.vm_instance, vmfb)
        self.context = rt.VmContext(dev.config.vm_instance,
                                    modules=list(dev.config.default_vm_modules) + [vm_module])
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
        """Call ``fn_name`` on NumPy arrays or DeviceArrays of this device; returns the
        results as DeviceArrays (no copy to the host). MLIR integers are signless, so
        results read as signed unless ``result_dtypes`` (NumPy dtypes) says otherwise."""
        rt = self._rt
        hal = self.device.hal
        arg_list = rt.VmVariantList(len(args))
        for a in args:
            if not isinstance(a, rt.DeviceArray):
                a = self.device.to_device(a)
            arg_list.push_ref(a._buffer_view)
        f = self.function(fn_name)
        ret = rt.VmVariantList(1)
        self.context.invoke(f, arg_list, ret)
        out = []
        for i in range(len(ret)):
            bv = ret.get_as_object(i, rt.HalBufferView)
            dtype = _dtype(bv) if result_dtypes is None else np.dtype(result_dtypes[i])
            out.append(rt.DeviceArray(hal, bv, implicit_host_transfer=True,
                                      override_dtype=dtype))
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
