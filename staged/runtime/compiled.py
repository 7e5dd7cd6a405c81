"""staged.compile(fn): guards -> capture -> lower -> IREE compile -> invoke, with the
step's state (parameters, ``.grad``, optimizer buffers) kept on the device between calls.
"""
from __future__ import annotations

import atexit
import functools
import gc

import numpy as np

from ..capture.capture import Captured, capture
from ..capture.pytree import flatten, unflatten
from ..eager.grad_mode import _state
from ..eager.profiler import record_function
from ..eager.tensor import Tensor
from ..lower.mlir import to_mlir
from .compiler import BOUNDARY, UNSUPPORTED_DTYPES, CompileError, compile_mlir
from .device import DeviceValue
from .device import device as get_device


class CompiledGraph:
    """One trace compiled for one backend, callable on the flattened argument leaves."""

    def __init__(self, captured: Captured, backend: str = "llvm-cpu"):
        self.captured = captured
        self.backend = backend
        _check_dtypes(captured.graph, backend)
        self.mlir = to_mlir(captured.graph)
        self.device = get_device(backend)
        self.module = self.device.load(compile_mlir(self.mlir, backend))
        self._out_dtypes = [o.value.aval.dtype.np for o in captured.graph.outputs]
        self._guards = _state_guards(captured)
        narrow = {np.dtype(a): np.dtype(b) for a, b in BOUNDARY.get(backend, {}).items()}
        self._narrow = [narrow.get(i.value.aval.dtype.np) for i in captured.graph.inputs]
        if not any(self._narrow):
            self._narrow = None

    def guards_hold(self) -> bool:
        for t, shape, dtype, requires_grad, grad in self._guards:
            p = t._payload
            if tuple(p.shape) != shape or p.dtype != dtype or t._requires_grad != requires_grad:
                return False
            if grad is None:
                if t._grad is not None:
                    return False
            elif grad is True:
                if t._grad is None:
                    return False
            elif t._grad is not grad:
                return False
        return True

    def run(self, leaves):
        c = self.captured
        inputs = [leaves[i]._payload for i, _ in c.arg_wrappers]
        inputs += [w.tensor._payload for w in c.state]
        if self._narrow:
            inputs = [p.astype(d) if d is not None and isinstance(p, np.ndarray) else p
                      for p, d in zip(inputs, self._narrow)]
        with record_function(f"staged.compile [{self.backend}]", cat="compiled"):
            res = self.module.invoke("main", inputs, self._out_dtypes)
        for w, k in c.state_updates:
            t = w.tensor
            t._payload = res[k]  # stays on the device until read (Note [payloads])
            t._vc[0] += 1
        wrapper_leaf = {id(w): leaves[i] for i, w in c.arg_wrappers}
        for gw in c.grad_writes:
            t = wrapper_leaf.get(id(gw.tensor), gw.tensor)
            t._grad = (None if gw.kind == "none" else gw.obj if gw.kind == "object"
                       else Tensor._wrap(res[gw.output]))
        for t, k in c.escaped:
            t._payload = res[k]
        out = [Tensor._wrap(res[x]) if kind == "value" else x for kind, x in c.out_leaves]
        return unflatten(c.out_tree, out)

    def __call__(self, *args, **kwargs):
        leaves, _ = flatten((args, kwargs), lambda o: False)
        return self.run(leaves)

    def save(self, directory, names=None):
        """Write a deployable copy (see ``staged.runtime.deploy``) with the current state."""
        from .deploy import save
        return save(self, directory, names)


def _check_dtypes(graph, backend: str) -> None:
    refused = UNSUPPORTED_DTYPES.get(backend)
    if not refused:
        return
    for op in graph.ops:
        name = op.out.aval.dtype.name
        if name in refused:
            raise CompileError(f"{op.prim.name} at {op.loc or 'an unknown line'}: {name} on "
                               f"{backend}: {refused[name]}")
    for i in graph.inputs:
        if i.value.aval.dtype.name in refused:
            raise CompileError(f"input {i.name}: {i.value.aval.dtype.name} on {backend}: "
                               f"{refused[i.value.aval.dtype.name]}")


def _state_guards(c: Captured):
    """What must still hold of the state for this trace to be reused."""
    grads_read = {id(w.tensor) for w in c.state}
    guards = []
    for w in list(c.state) + [w for w in _watched_writes(c) if w not in c.state]:
        t = w.tensor
        g = w.grad
        grad = None if g is None else (g if id(g) in grads_read else True)
        guards.append((t, w.aval.shape, w.aval.dtype.np, w.meta[0], grad))
    return guards


def _watched_writes(c: Captured):
    by_tensor = {id(w.tensor): w for w in c.state}
    return [by_tensor[id(gw.tensor)] for gw in c.grad_writes if id(gw.tensor) in by_tensor]


def _leaf_key(x):
    if isinstance(x, Tensor):
        p = x._payload
        return ("T", tuple(p.shape), np.dtype(p.dtype).str, x._requires_grad)
    try:
        hash(x)
    except TypeError:
        raise TypeError(f"staged.compile: arguments must be tensors, Python scalars or "
                        f"(nested) tuples, lists and dicts of them; got {type(x).__name__}") \
            from None
    return ("py", type(x).__name__, x)


class Compiled:
    """The callable ``staged.compile(fn)`` returns."""

    def __init__(self, fn, backend="llvm-cpu", dynamic=False):
        if dynamic:
            raise NotImplementedError("staged.compile(dynamic=True) is not supported yet: "
                                      "each new batch size is traced and compiled once")
        get_device(backend)  # fail early, with the runtime's reason, if it cannot run here
        self.fn = fn
        self.backend = backend
        self.traces = 0
        self._entries: dict = {}
        self._last = None
        self.last_retrace_reason = None
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        leaves, tree = flatten((args, kwargs), lambda o: False)
        key = (tree, tuple(_leaf_key(x) for x in leaves), _state.grad_enabled,
               _state.inference)
        entries = self._entries.setdefault(key, [])
        for entry in entries:
            if entry.guards_hold():
                self._last = entry
                return entry.run(leaves)
        self.last_retrace_reason = ("state changed (shape, dtype, requires_grad or .grad)"
                                    if entries else
                                    "first call" if self.traces == 0 else
                                    "new argument shapes/dtypes/requires_grad or grad mode")
        entry = CompiledGraph(capture(self.fn, *args, **kwargs), self.backend)
        if not entry.captured.one_shot:
            entries.append(entry)
        self.traces += 1
        self._last = entry
        return entry.run(leaves)

    def save(self, directory, names=None):
        """Save the step as last called, with the current state, for
        ``staged.runtime.load(directory)``. ``names`` maps state tensors to names (e.g.
        ``{p: k for k, p in model.state_dict(keep_vars=True).items()}``)."""
        if self._last is None:
            raise RuntimeError("call the compiled step once before saving it: saving needs "
                               "its trace")
        if self._last.captured.one_shot:
            raise RuntimeError("the last call created new state (e.g. optimizer buffers on "
                               "the first step); call the step once more before saving")
        return self._last.save(directory, names)

    def graphs(self):
        return [e.captured.graph for es in self._entries.values() for e in es]


def compile(fn=None, *, backend: str = "llvm-cpu", device=None, dynamic: bool = False):
    """Compile ``fn`` (forward, backward, optimizer steps and all) with IREE.

    The first call traces ``fn`` on symbolic tensors; later calls with the same argument
    shapes, dtypes, requires_grad and grad mode run the compiled module without running
    the Python body. Parameters and ``.grad`` fields the step changes are written back to
    the caller's tensors (their data stays on the device until read).

    Example:
        >>> step = staged.compile(train_step)
        >>> loss = step(x, y)
    """
    if fn is None:
        return lambda f: compile(f, backend=backend, device=device, dynamic=dynamic)
    return Compiled(fn, backend=backend, dynamic=dynamic)


@atexit.register
def _bring_state_home() -> None:
    """Copy device-resident tensor data to the host before the interpreter tears IREE
    down: a device buffer freed after its device segfaults during shutdown GC."""
    for obj in gc.get_objects():
        # type() rather than isinstance(): the latter runs other libraries' __getattr__
        if issubclass(type(obj), Tensor) and type(obj._payload) is DeviceValue:
            obj._host()
