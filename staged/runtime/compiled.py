"""staged.compile(fn): guards -> capture -> lower -> IREE compile -> invoke, with the
step's state (parameters, ``.grad``, optimizer buffers) kept on the device between calls.

Note [one-shot traces]: a trace whose body stores new tensors outside itself (an
optimizer's first step creating its buffers, ``Captured.one_shot``) serves only its own
call: the next call must trace again, with those tensors as state. Compiling it would cost
a whole IREE compile (seconds, as long as the steady step's) for one call, so in every mode
it runs on NumPy through background mode's ``Interpreter`` (the same graph and binding as a
compiled call: Note [background compiles]), and a training step compiles once, at its
second call. Collectives included: the interpreter runs them through the process group
(their eager impls: each checked, in graph order, the order the segments start them), and
every rank's one-shot call is the same call (the trace is one-shot where it makes the same
state on every rank), so the ranks run it alike. Compiling it cost a DDP training step two
IREE compiles on each new shape (the compiled cases of tests/distributed/probe.py on 2
ranks: 14 modules where 9 serve).

A tensor the body stored outside itself that required grad in the trace (``log.append(y)``,
a Module's ``self.last = y`` in a body that returns ``loss.detach()``: Note [tensor
attributes]) gets the graph eager code gives it: the call runs as its graph through eager
dispatch (Note [first eager call] in ``boundary.py``). Where that cannot give it (a custom
Function or hook in the body: ``op_grads`` is None; a backward in the body) it comes back
requiring grad, with a ``GraphlessResult`` whose backward raises ``STORED`` (Note
[graphless results]), not as a constant a later backward would silently skip.

Note [deferred compiles]: a trace whose backward gave ``.grad`` to state whose ``.grad``
was None (``Captured.gives_grads``: a training step's first call, or each call after a
``zero_grad()`` outside the step) is usually traced again at the next call, which finds
those ``.grad`` set (they are then state the step reads). So it runs on NumPy as a one-shot
trace does and is compiled only when it serves a second call (``Compiling(deferred=True)``):
that call waits for the compile (or, in background mode, starts it). A plain-SGD training
step's first call waited for a compile (1.2 s for an MLP) whose module served that call
alone (or the cache served it to the next trace, where that lowered to the same text;
probe 17 compiled 26 IREE modules, now 24). Not for ``dynamic=True`` steps or graphs with
collectives, which compile as before.

A call whose results require grad and whose body runs no backward (``torch.compile(model)``
then ``loss.backward()`` outside) becomes a ``Differentiable`` entry: Note [autograd
boundary] in ``boundary.py``.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import gc
import sys
import threading
import types
import warnings
from types import FrameType
from collections.abc import Callable, Container
from typing import Any, NamedTuple

import numpy as np

from .._interrupts import deferred_interrupts
from .._locks import fork_safe
from .. import _global_flags
from .._where import STAGED_DIR, at_user, warn_user
from .._malloc import trim
from ..tracing.capture import Captured, state_lock
from ..tracing.names import is_module
from ..tracing.capture import capture as _capture
from ..tracing.capture import trace as _trace
from ..tracing.draws import draw_shapes
from ..tracing.capture import leaf_names
from ..tracing.dynamic import DynamicError, generalize, is_static, mismatch, resize, substitute
from ..autodiff.avals import EagerOnlyError
from ..lower.table import LoweringError
from ..tracing.symbolic import CaptureError
from ..tracing.pytree import flatten, flatten_call, unflatten
from ..tracing.returned import rebuild, same_recipe
from ..tracing.scalars import results
from ..tracing.guards import Guards, is_value as _is_value, replay
from ..eager.interceptor import current_interceptor
from ..eager import autocast as _autocast
from ..eager.grad_mode import _state, no_grad
from ..eager.random import fork_rng
from ..autograd import profiler
from ..eager.tensor import Tensor
from ..nn.module import Module
from ..nn.optimized import OptimizedModule
from ..eager.aliases import replaced, seen_elsewhere
from ..eager.views import bumped
from ..lower.mlir import to_mlir
from ..lower.mlir.module import checked
from .. import viz
from . import compile_config, deploy, profiled
from .background import CallLog, Compiling, Interpreter, call_eagerly
from .boundary import Differentiable, eager_reason, reruns_fn, run_traced, stores_graph
from .checks import Checks, with_overflow_checks
from .shared_inputs import PAYLOAD, SharedInputs
from .specialized import Specialized, specialized
from .state_guards import StateGuards, hook_ids, hooked
from .compiler import (
    STEP_FLAGS,
    UNSUPPORTED_DTYPES,
    CompileError,
    compile_mlir,
    compile_subprocess,
    lowering_options,
    narrowing,
    one_call_in_flight,
    to_boundary,
    tuning_flags,
)
from .device import DeviceValue, LostValue, check_process, live_values
from .device import device as get_device
from .explain import explain_text
from .graphless import GraphlessResult, graphless
from .logs import Phases, compile_log
from .segmented import Segmented, check_segmentable, has_collectives, segmented_mlir


log = compile_log  # Note [compile messages]

STORED = (
    "staged.compile: this tensor, which a compiled call stored outside itself, requires "
    "grad but carries no autograd graph: eagerly a backward through it would reach the "
    "parameters (or raise, where the call's own backward freed its graph), compiled it "
    "holds values only (Note [one-shot traces]). Return it from the compiled function "
    "instead (a result differentiated outside gets the call's graph), call the function "
    "uncompiled, or .detach() it to use it as a constant"
)


class Traced(Captured):
    """What ``staged.capture`` returns: a captured graph that can also be lowered,
    compiled and exported (these live here, above capture, in the layering)."""

    def to_mlir(self) -> str:
        return to_mlir(self.graph)

    def compile(self, backend: str = "llvm-cpu", device=None) -> CompiledGraph:
        return CompiledGraph(self, backend, device)

    def export_onnx(self, path, opset: int = 21):
        """Write the graph as ONNX (``staged.onnx.export_captured``; needs the onnx extra)."""
        from ..onnx import export_captured

        return export_captured(self, path, opset=opset)


def capture(fn, *args, **kwargs) -> Traced:
    """Trace ``fn(*args, **kwargs)`` into a graph without running it on data; print it,
    ``.to_mlir()``, ``.compile(backend)`` or ``.export_onnx(path)``."""
    c = _capture(fn, *args, **kwargs)
    c.__class__ = Traced
    return c  # type: ignore[return-value]  # a Traced now: its class was just set


# Note [per-call costs]: a call's Python work (bench/call_overhead.py; issue 20, item 5)
# is made of what each trace fixes once: ``_bind`` keeps the results a failed index check
# raises on, a call skips the steps its trace has none of (.grad writes, argument writes,
# graphless or rebuilt results, attribute writes), the trace that served the last call is
# the first whose guards are checked (its key's other traces are stale in a loop), a state
# guard tells "no hooks" without building the hook ids, the other guards are checked in a
# few C-level passes (Note [one pass] in tracing/guards.py), and the device keeps its enum
# values and per-dtype element types (``Device.upload``, ``Device.read``).
class CompiledGraph:
    """One trace compiled for one backend, callable on the flattened argument leaves."""

    background = None  # a Compiling while its module compiles (Note [background compiles])
    specialized: Specialized | None = None  # a dynamic step's (Note [specialized batch sizes])
    batch_one = None  # a dynamic step's at batch size 1, for a saved step (Note [batch size 1])
    fitted = None  # a dynamic step's {batch size: whether it serves it} (``Compiled._fits``)
    number = 0  # which trace of its Compiled made it (explain())
    _live: list[tuple[Any, Any, Any]]
    _narrow: list[Any] | None

    def __init__(
        self,
        captured: Captured,
        backend: str = "llvm-cpu",
        device=None,
        phases: Phases | None = None,
        background=None,
    ):
        """``background(self)``, if given, makes the ``Compiling`` that builds the module
        on a worker thread and stands in for it meanwhile."""
        captured = with_overflow_checks(captured, lowering_options(backend)["int64_checks"])
        self.captured = captured
        self.backend = backend
        self.cache: dict[str, Any] = {}  # "cache": "hit" or "miss", "key" (compile_mlir's stats)
        self.device = get_device(backend, device)
        if background is not None:
            self.mlir, self.times = None, phases.times if phases is not None else {}
            self._bind(device)
            self.background = background(self)
            return
        own = phases is None  # else the caller's, which it shows and closes
        p: Any  # a Phases: here phases is None only where own
        with (
            Phases(f"compiling a step of {len(captured.graph.ops)} ops")
            if own
            else contextlib.nullcontext(phases) as p
        ):
            self.module, self.mlir = self.build(p)
        self.times = p.times  # seconds per phase (explain())
        self._bind(device)

    def build(self, p: Phases, builder=None, graph=None, stats=None) -> tuple:
        """Lower, compile (``builder``: ``compile_mlir``'s ``build``) and load ``graph``
        (default the captured one; a static one of the same inputs and outputs for Note
        [specialized batch sizes], whose cache ``stats`` go to that dict), timing each
        phase in ``p``: (the loaded module, its MLIR text)."""
        graph = self.captured.graph if graph is None else graph
        backend = self.backend
        segmented = check_segmentable(graph, backend)  # Note [segments]
        with p("lower"):
            check_dtypes(graph, backend)
            if segmented:
                plan, mlir = segmented_mlir(graph, lowering_options(backend, graph))
            else:
                mlir = to_mlir(graph, check=False, **lowering_options(backend, graph))
        build = builder or compile_subprocess
        with p("IREE compile"):  # the MLIR is verified only if the cache misses

            def verified_build(text, flags):
                return build(checked(text), flags)

            vmfb = compile_mlir(
                mlir,
                backend,
                STEP_FLAGS.get(backend, ()),
                self.cache if stats is None else stats,
                verified_build,
                tuning_flags(graph, backend),
            )
        trim()  # the lowering's garbage out of the step's peak (Note [heap after lowering])
        module: Any
        with p("load"):
            module = self.device.load(vmfb)
        if one_call_in_flight(graph, backend):  # Note [pool growth] in device.py
            module.max_in_flight = 1
        module.in_place = frozenset(getattr(mlir, "in_place", ()))  # Note [state in place]
        if segmented:
            module = Segmented(graph, plan, module, narrowing(backend))
        return module, mlir

    def _bind(self, device) -> None:
        """How calls bind arguments and state to the module's inputs and outputs."""
        captured, backend = self.captured, self.backend
        narrow = narrowing(backend)
        self._out_dtypes = [o.value.aval.dtype.np for o in captured.graph.outputs]
        self._guards = _state_guards(captured)
        self._captured_guards = Guards(captured.guards)  # Note [one pass] in tracing/guards.py
        names, pos = {}, 0
        for i, w in captured.arg_wrappers:  # the inputs' order in _run
            names[i] = captured.graph.inputs[pos].name
            pos += 1 if w._grad is None else 2
        self._arg_names = names
        self._owned = [w for w in captured.state if w.owner is not None]
        self._bind_state()
        at = {id(w): pos + j for j, w in enumerate(captured.state)}  # in the inputs
        self._written_at = [at[id(w)] for w, _ in captured.state_updates]
        self._unshared = [False] * len(self._written)
        # per live input: (value, its device copy, dtype); uploaded again only on a change
        self._live = [(None, None, np.dtype(t._payload.dtype)) for t, _ in captured.live]
        self._narrow = [
            (narrow[d], f"input {i.name}") if (d := i.value.aval.dtype.np) in narrow else None
            for i in captured.graph.inputs
        ]
        if not any(self._narrow):
            self._narrow = None
        self._event = (
            f"staged.compile [{backend}]"
            if device is None
            else f"staged.compile [{backend} {self.device.name}]"
        )
        self._checks = Checks(captured.checks) if captured.checks else None
        self._checked = [  # the results a failed check raises on reading
            k
            for k, o in enumerate(captured.graph.outputs)
            if o.kind in ("out", "grad", "arg", "attr") and k not in captured.attrs_kept
        ]
        if captured.rng is not None:  # Note [host draws]: their shapes at each call
            self._draw_shapes = draw_shapes(
                captured.graph, len(captured.graph.inputs) - captured.rng.draws
            )

    def _bind_state(self) -> None:
        """What calls check and write of the state tensors bound now."""
        self._shared = SharedInputs(self.captured, self._arg_names)  # Note [shared inputs]
        self._written = [w.tensor for w, _ in self.captured.state_updates]

    def _rebind(self) -> None:
        """Bind each .grad read as state to the one its owner holds now (Note [grads by
        owner] in tracing/capture.py): zero_grad(set_to_none) and a backward since the
        last call made a new one."""
        moved = False
        for w in self._owned:
            g = w.owner._grad
            if g is not w.tensor and g is not None:
                w.tensor, moved = g, True
        if moved:
            self._bind_state()

    def guard_failure(self):
        """Why this trace can't serve the current call, or None when it can."""
        return _guard_failure(self._guards, self._captured_guards)

    def _set_live(self, host: bool = False) -> None:
        """Set the live inputs (Note [live inputs]) to their values now, on the device
        (on the host for the ``Interpreter``): an upload costs tens of microseconds, so
        only a changed value is uploaded."""
        for k, (t, get) in enumerate(self.captured.live):
            v, on_device, dtype = self._live[k]
            now = get()
            if host:
                t._payload = np.asarray(now, dtype)  # the next compiled call uploads it
            elif t._payload is not on_device or now != v or type(now) is not type(v):
                on_device = self.device.upload(np.asarray(now, dtype))
                self._live[k] = (now, on_device, dtype)
                t._payload = on_device

    def run(self, leaves):
        """Enqueue the step on ``leaves`` and write its new state back; holds ``state_lock``
        from reading the state to replacing it (Note [one trace at a time]), so calls on
        other threads that share state serialize their read-modify-write, and it is only
        the enqueue that they wait for, not the step."""
        check_process(self.device)  # before any upload (Note [fork] in device.py)
        with state_lock:
            if self._owned:
                self._rebind()
            self._shared.check(leaves)
            if self.background is not None and not self.background.ready(self, leaves):
                return self.background.fallback(leaves)  # Note [background compiles]
            module = (  # Note [specialized batch sizes]
                self.module if self.specialized is None else self.specialized.module(self, leaves)
            )
            if profiler.active() is None:  # the one check a call makes for the profiler
                return self._run(leaves, module)
            return profiled.run(self, leaves, module)  # Note [compiled calls]

    def _upload_once(self, inputs, shared) -> None:
        """Note [state uploads]: state this call writes, held on the host where no other
        object sees it, is uploaded once: the call replaces it with its results, so its
        device copy skips the caching allocator, which would keep it, unused, for good
        (Note [caching allocator]). Its host copy stays until the call is seen to finish,
        as what a failure puts back (Note [failed steps]), except where device buffers are
        host memory that a failure leaves readable (llvm-cpu): there the device copy
        replaces it at once, so a first call does not hold the state twice (no object but
        the tensor saw the host copy). (Narrowed inputs, ``BOUNDARY``, are left to the
        call.)"""
        upload, swap = self.device.upload, self.device.host_memory
        for t, k, seen in zip(self._written, self._written_at, shared):
            if not seen and type(inputs[k]) is np.ndarray:
                inputs[k] = upload(inputs[k], once=True)
                if swap:
                    t._payload = inputs[k]  # the same values: no version bump

    def _run(self, leaves, module):
        """The call on ``leaves``, run by ``module`` (``self.module``, or a static module of
        the same inputs and outputs: Note [specialized batch sizes])."""
        c = self.captured
        host = isinstance(module, Interpreter)  # runs on NumPy: nothing to upload
        if c.live:
            self._set_live(host)
        # which written memory other objects see (Note [aliased memory] in
        # eager/aliases.py), asked before this call holds references to it
        written = self._written
        shared = (
            [type(t._payload) is np.ndarray and seen_elsewhere(t) for t in written]
            if written and np.ndarray in set(map(type, map(PAYLOAD, written)))
            else self._unshared
        )
        shared_args = [seen_elsewhere(leaves[i]) for i, _ in c.arg_updates] if c.arg_updates else ()
        inputs = []
        for i, w in c.arg_wrappers:
            inputs.append(leaves[i]._payload)
            if w._grad is not None:
                inputs.append(leaves[i]._grad._payload)
        inputs += [w.tensor._payload for w in c.state]
        if shared is not self._unshared and self._narrow is None and not host:
            self._upload_once(inputs, shared)
        if c.rng is not None:  # Note [host draws]: made now, from torch's stream
            inputs += c.rng.run(self._draw_shapes(inputs))
        if self._narrow:
            inputs = [
                to_boundary(p, *d) if d and isinstance(p, np.ndarray) else p
                for p, d in zip(inputs, self._narrow)
            ]
        if self._checks is not None and getattr(module, "in_place", ()):
            # a finished call's failure drops this call: before it is enqueued, as one
            # that writes its state in place cannot be taken back (Note [state in place])
            self._checks.raise_pending()
        undo = _Undo()
        res = module.invoke("main", inputs, self._out_dtypes, undo)
        with deferred_interrupts():  # all of the call's writes or none (Note [interrupts])
            out = self._commit(leaves, res, undo, shared, shared_args, module)
        for fn, tree, called in c.host_calls:  # Note [disabled calls]
            a, kw = unflatten(tree, results(called, res))
            fn(*a, **kw)
        if c.graphless or c.attr_outputs or c.returned:
            self._rebuild(leaves, res, out)
        return unflatten(c.out_tree, out)

    def _commit(self, leaves, res, undo: _Undo, shared, shared_args, module=None) -> list:
        """The call's results ``res`` written where the step wrote (its state, .grad,
        arguments, dicts, attributes) and its check tracked; returns its outputs."""
        c = self.captured
        in_place = getattr(module, "in_place", ())
        kept: Container[int] = ()  # the arguments this call leaves as they came in
        if self._checks is not None:  # Note [index checks]
            if not in_place:  # else asked before the call (``_run``)
                self._checks.raise_pending()  # a finished call's failure: this one is dropped
            check = self._checks.track(res[c.check_output], [res[k] for k in self._checked])
            if c.arg_reshaped and check.failed():  # waits: their shape is set now
                kept = c.arg_reshaped
        for (w, k), seen in zip(c.state_updates, shared):  # on the device until read
            _store(undo, w.tensor, res[k], seen, in_place=w.name in in_place)
        if c.grad_writes:
            self._write_grads(leaves, res, undo)
        for t, k in c.escaped:
            undo.set_payload(t, res[k])
            if k in c.escaped_grad:  # Note [one-shot traces]
                to = [leaves[i] for i, _ in c.arg_wrappers] + [w.tensor for w in c.state]
                t._requires_grad, t.grad_fn = True, GraphlessResult(to, STORED)
        for (i, k), seen in zip(c.arg_updates, shared_args):  # writes into its arguments
            if i not in kept:
                _store(undo, leaves[i], res[k], seen, c.arg_views.get(i, ()))
        for d, items in c.dict_writes:  # what the trace left in an optimizer's state
            undo.set_items(d, items)
        if c.attr_writes:
            replay(c.attr_writes)  # ``model.train()`` in the body (Note [attribute writes])
        for i, flag in c.arg_flags:  # x.requires_grad_() in the body
            leaves[i]._requires_grad = flag
        return results(c.out_leaves, res)

    def _write_grads(self, leaves, res, undo: _Undo) -> None:
        """The .grad writes of a call (``Captured.grad_writes``)."""
        c = self.captured
        wrapper_leaf = {id(w): leaves[i] for i, w in c.arg_wrappers}
        for gw in c.grad_writes:
            undo.set_grad(
                wrapper_leaf.get(id(gw.tensor), gw.tensor),
                None
                if gw.kind == "none"
                else gw.obj
                if gw.kind == "object"
                else Tensor._wrap(res[gw.output]),
            )

    def _rebuild(self, leaves, res, out: list) -> None:
        """The results of a call made of more than its outputs (Note [graphless results],
        Note [returned state], attribute outputs), set in ``out``."""
        c = self.captured
        to: list = []
        if c.graphless or c.attr_outputs:  # Note [graphless results]
            to = [leaves[i] for i, _ in c.arg_wrappers] + [w.tensor for w in c.state]
        for pos, freed in c.graphless.items():
            out[pos] = graphless(res[c.out_leaves[pos][1]], freed, to)
        for pos, (kind, root, ops) in c.returned.items():  # Note [returned state]
            out[pos] = rebuild(_root(kind, root, leaves), ops)
        if c.attr_outputs:
            _set_attributes(c.attr_outputs, res, out, to)

    def __call__(self, *args, **kwargs):
        leaves, _ = flatten_call(args, kwargs)
        return self.run(leaves)

    def save(self, directory, names=None, fn=None, target_cpu="host"):
        """Write a deployable copy (see ``staged.runtime.deploy``) with the current state."""
        with state_lock:
            if self._owned:
                self._rebind()  # the .grad objects the next call would read
            return deploy.save(self, directory, names, fn, target_cpu)


def _set_attributes(attrs, res, out, to) -> None:
    """Set each Module attribute of ``attrs`` (``Captured.attr_outputs``) to its tensor of
    this call's results ``res``: the result returned as ``out[pos]``, else one made as a
    result is (Note [tensor attributes] in tracing/capture.py)."""
    made: dict[int, Tensor] = {}  # one tensor per output: ``self.a = self.b = t``
    for m, key, k, pos, freed in attrs:
        t = made.get(k)
        if t is None:
            t = (
                out[pos]
                if pos >= 0
                else Tensor._wrap(res[k])
                if freed is None
                else graphless(res[k], freed, to)
            )
            made[k] = t
        (m if isinstance(m, dict) else vars(m))[key] = t  # Note [tensor stores]: a dict's item


def _root(kind: str, root, leaves) -> Tensor:
    """The tensor a returned alias is made of at this call (Note [returned state])."""
    if kind == "state":
        return root.tensor
    return leaves[root] if kind == "arg" else root._grad if kind == "grad" else root


class _Undo:
    """What one call replaced, to put back should its step fail (Note [failed steps])."""

    def __init__(self):
        self.payloads, self.grads, self.dicts = [], [], []
        self.in_place: list = []  # the tensors whose device buffer the call writes

    def set_payload(self, t: Tensor, new, in_place: bool = False) -> None:
        self.payloads.append((t, t._payload, new))
        if in_place:
            self.in_place.append(t)
        t._payload = new
        if t._vc is not None:
            t._vc[0] += 1

    def set_grad(self, t: Tensor, new) -> None:
        self.grads.append((t, t._grad, new))
        t._grad = new

    def set_items(self, d: dict, items: dict) -> None:
        self.dicts.append((d, dict(d), items))
        d.clear()
        d.update(items)

    def __call__(self, sem) -> None:
        """Undo, where nothing replaced this call's writes since; what is put back was
        made by a call seen to finish, so it need not wait for ``sem``."""
        with state_lock:
            for t, old, new in self.payloads:
                if t._payload is new:
                    if isinstance(old, DeviceValue) and any(t is u for u in self.in_place):
                        old = LostValue(old, _LOST)
                    t._payload = old
                    replaced(t, new, old)
                    if t._vc is not None:
                        t._vc[0] += 1
                    if isinstance(old, DeviceValue) and old.ready and old.ready[0] is sem:
                        old.ready = None
            for t, old, new in self.grads:
                if t._grad is new:
                    t._grad = old
            for d, old, new in self.dicts:
                if all(d.get(k) is v for k, v in new.items()):
                    d.clear()
                    d.update(old)


_LOST = (
    "this tensor's values are lost: a compiled step that writes it in place, holding one "
    "copy of its state (Note [state in place] in staged/lower/mlir/in_place.py), failed "
    "on the device while its buffer may have been half written; load it again (a "
    "state_dict from a checkpoint) before training on"
)


def _store(
    undo: _Undo, t: Tensor, new, seen_elsewhere: bool, view_ops=(), in_place: bool = False
) -> None:
    """``t``'s data set to ``new``, what the step wrote into it: copied into its memory
    where other objects see that (Note [aliased memory] in ``eager/aliases.py``), after
    the in-place view ops the step made on it (``t_()``, ``unsqueeze_()``: ``view_ops``,
    ``Captured.arg_views``) are made on it eagerly, so its data lands where torch's does
    (a transposed view's at its base's own positions) and it has torch's strides."""
    if seen_elsewhere:
        if view_ops:
            with no_grad():
                for name, args in view_ops:
                    getattr(t, name)(*args)
        np.copyto(t._host(), np.asarray(new))
        if t._vc is not None:
            t._vc[0] += 1
            bumped(t._vc)
        return
    old = t._payload
    undo.set_payload(t, new, in_place)
    replaced(t, old, new)


def check_dtypes(graph, backend: str) -> None:
    """Raise CompileError, naming the op and its line, for a dtype ``backend`` refuses."""
    refused = UNSUPPORTED_DTYPES.get(backend)
    if not refused:
        return
    for op in graph.ops:
        name = op.out.aval.dtype.name
        if name in refused:
            raise CompileError(
                f"{op.prim.name} at {op.loc or 'an unknown line'}: {name} on "
                f"{backend}: {refused[name]}"
            )
    for i in graph.inputs:
        if i.value.aval.dtype.name in refused:
            raise CompileError(
                f"input {i.name}: {i.value.aval.dtype.name} on {backend}: "
                f"{refused[i.value.aval.dtype.name]}"
            )


def _state_guards(c: Captured):
    """What must still hold of the state for this trace to be reused."""
    grads_read = {id(w.tensor) for w in c.state if w.owner is None}
    named = {id(g.value): g.name for g in c.guards}  # a global's or closure's name
    guards = []
    for w in list(c.state) + [w for w in _watched_writes(c) if w not in c.state]:
        t = w.tensor
        g = w.grad
        grad = None if g is None else (g if id(g) in grads_read else True)
        guards.append(
            (
                t,
                w.owner,  # a .grad bound through its owner (Note [grads by owner])
                w.aval.shape,
                w.aval.dtype.np,
                w.meta[0],
                grad,
                named.get(id(t), f"state tensor {w.name}"),
                hook_ids(t),
            )
        )
    return StateGuards(guards)


def _guard_failure(guards: StateGuards, captured_guards: Guards):
    """Why a trace whose state guards are ``guards`` (``_state_guards``) and whose other
    guards are ``captured_guards`` can't serve the current call, or None when it can."""
    return guards.failure() or captured_guards.failure()


def _watched_writes(c: Captured):
    by_tensor = {id(w.tensor): w for w in c.state}
    return [by_tensor[id(gw.tensor)] for gw in c.grad_writes if id(gw.tensor) in by_tensor]


def _leaf_key(x, batched=False):
    if isinstance(x, Tensor):
        p = x._payload
        shape = ("batch",) + tuple(p.shape[1:]) if batched else tuple(p.shape)
        return (
            "T",
            shape,
            np.dtype(p.dtype).str,
            x._requires_grad,
            x._requires_grad and x._grad is not None,
            hook_ids(x) if x._requires_grad and hooked(x) else (),  # the trace runs them
            _attributes_key(x.__dict__),  # the trace reads them
        )
    try:
        hash(x)
    except TypeError:
        raise TypeError(
            f"staged.compile: arguments must be tensors, Python scalars or "
            f"(nested) tuples, lists and dicts of them; got {type(x).__name__}"
        ) from None
    return ("py", type(x).__name__, x)


def _data_key(leaves, i: int):
    """What a call's key holds of leaf ``i``, an argument whose data a trace read (Note
    [argument data]): its bytes, dtype and shape."""
    x = leaves[i] if i < len(leaves) else None
    if not isinstance(x, Tensor):
        return None
    a = np.asarray(x._payload)
    return a.dtype.str, a.shape, a.tobytes()


def _attributes_key(attributes: dict) -> tuple:
    """A tensor argument's attributes set by the user (``x.scale = 2.0``), which its
    stand-in in the trace carries: values (numbers, strings, tuples of those) by value,
    other objects by identity (a trace per object; one changed in place goes unseen)."""
    return tuple(
        (k, v if _is_value(v) else ("object", id(v))) for k, v in sorted(attributes.items())
    )


# Note [untraced first call]: in background mode the first call runs ``fn`` itself, as
# eager code, and the second call traces it: the first result comes after one eager step
# (the user asked not to wait), not after a trace and a run of the captured graph on NumPy
# (3.4-6.7x an eager step: the trace is half of it), and the trace, made at the second
# call, finds the state the first call made (an optimizer's buffers, ``.grad``), so it is
# rarely one-shot. Eager code is the semantics a compiled step keeps, so the results are
# the same to float rounding (fused eager kernels against their captured decompositions,
# as between any eager and compiled call); results that are views of an argument are
# copied, as compiled results are (``_unaliased``). Python side effects of ``fn`` (a
# print, a hook's) happen at call 1 and again at the trace. Not with ``rng="counter"``,
# whose compiled calls draw from a stream eager code does not.
UNTRACED = "eager, untraced (background mode's first call)"


def _unaliased(out, args, kwargs):
    """``out`` with each tensor that shares an argument's memory (a view of it; not the
    argument itself) copied, as a compiled call's results are: a write to one of them does
    not reach the argument (Note [untraced first call])."""
    given = [a for a in flatten_call(args, kwargs)[0] if isinstance(a, Tensor)]
    arrays = [a._payload for a in given if type(a._payload) is np.ndarray]
    leaves, tree = flatten(out, lambda o: False)
    aliased = [
        isinstance(o, Tensor)
        and type(o._payload) is np.ndarray
        and all(o is not a for a in given)
        and any(np.may_share_memory(o._payload, a) for a in arrays)
        for o in leaves
    ]
    if not any(aliased):
        return out
    return unflatten(tree, [o.clone() if a else o for o, a in zip(leaves, aliased)])


class Compiled:
    """The callable ``staged.compile(fn)`` returns."""

    def __init__(
        self,
        fn,
        backend="llvm-cpu",
        dynamic=None,
        fallback=None,
        device=None,
        rng="host",
        mode="blocking",
        specialize=True,
    ):
        if fallback not in (None, "eager"):
            raise ValueError(at_user(f"fallback must be None or 'eager', got {fallback!r}"))
        if mode not in ("blocking", "background"):
            raise ValueError(
                at_user(
                    f"mode must be 'blocking' or 'background' (or one of torch.compile's: "
                    f"{', '.join(map(repr, _TORCH_MODES))}), got {mode!r}"
                )
            )
        self.mode = mode  # Note [background compiles]
        self.calls = CallLog()  # which calls ran where (explain())
        if rng not in ("host", "counter"):
            raise ValueError(at_user(f"rng must be 'host' or 'counter', got {rng!r}"))
        self.rng = rng  # Note [host draws]
        get_device(backend, device)  # fail early, with the runtime's reason, if it cannot run
        self.fn = fn
        self.backend = backend
        self.device = device
        self.fallback = fallback
        self.dynamic = bool(dynamic)
        self.automatic = dynamic is None  # Note [automatic dynamic]
        self._sizes: dict = {}  # per dynamic key: the batch sizes traced statically
        self._static: set = set()  # dynamic keys whose batch could not be made dynamic
        self._valued: dict = {}  # Note [argument data]: leaf index -> what read its data
        self._value_traces: dict = {}  # key but the values -> the values traced
        self.specialize = bool(specialize)  # Note [specialized batch sizes]
        self.traces = 0
        self._entries: dict = {}
        self._calls = 0  # compiled calls so far: an entry's ``used`` is its last
        self._last = None
        self._last_key = None
        self._rewrites = 0  # re-traces in a row for a value the last trace wrote
        self.last_retrace_reason = None
        self._warned_stores = False
        self._limits: set = set()  # the limits past which calls ran eagerly, warned once
        self._warned_boundary = False
        self.history: list = []  # per trace: why, and what it made (explain())
        self._lock = fork_safe(threading.RLock())  # (a parent's step raises in a child)
        # a Module's attributes are read through __getattr__, never copied (they change)
        functools.update_wrapper(self, fn, updated=() if is_module(fn) else ("__dict__",))

    def __get__(self, obj, objtype=None):
        """``@staged.compile`` on a method: ``obj.method(x)`` calls the compiled function with
        ``obj`` first, as its guards' root (without it, ``obj.f(x)`` called ``f`` with ``x``
        as ``self``: a silent wrong result, or a TypeError naming a missing argument)."""
        if obj is None or not isinstance(self.fn, types.FunctionType):
            return self
        return types.MethodType(self, obj)

    def __call__(self, *args, **kwargs):
        if current_interceptor() is not None:  # called by a function being traced: inline
            return self.fn(*args, **kwargs)  # it (and take no lock under state_lock)
        with self._lock:  # concurrent first calls trace once; calls pick and run in turn
            return self._call(args, kwargs)

    def _call(self, args, kwargs):
        if self.mode == "background" and self.calls.count == 0 and self.rng == "host":
            self.calls.note(UNTRACED)  # Note [untraced first call]
            return _unaliased(self.fn(*args, **kwargs), args, kwargs)
        leaves, tree = flatten_call(args, kwargs)
        batch, batched = _batch(leaves) if self.dynamic else (None, ())
        key = self._key(tree, leaves, batched)
        if batched and not self._fits(key, batch, args, kwargs, absent=batch != 1):
            batched = frozenset()  # Note [batch size 1], Note [automatic dynamic]
            key = self._key(tree, leaves, batched)
        static_key = key
        if self.automatic and key not in self._entries:  # Note [automatic dynamic]
            batch, batched, key = self._automatic(tree, leaves, key, args, kwargs)
        entries = self._entries.get(key)
        last_key, self._last_key = self._last_key, static_key
        if entries is _EAGER:
            self.calls.note("eager (see the trace history)")
            return self.fn(*args, **kwargs)
        reasons = {}
        last = self._last
        if entries and last in entries:  # the trace that served last is the likeliest
            entries = (
                [last, *(e for e in entries if e is not last)]
                if entries[0] is not last
                else entries
            )
        for entry in entries or ():
            why = entry.guard_failure()
            if why is None:
                self._last = entry
                self._calls += 1
                self._rewrites = 0
                entry.used = self._calls
                return self._run(entry, leaves)
            reasons[entry] = why
        one_shot = self._last is not None and self._last.captured.one_shot
        self.last_retrace_reason = (  # what changed since the trace used last, if it is one
            reasons.get(self._last) or next(iter(reasons.values()))
            if reasons
            else "first call"
            if self.traces == 0 and self.calls.count == 0
            else "first trace (call 1 ran untraced)"
            if self.traces == 0
            else f"the previous call was one-shot: {self._last.captured.one_shot_why}"
            if one_shot
            else _key_change(last_key, static_key, leaf_names(self.fn, args, kwargs))
        )
        if not reasons and last_key and len(last_key) > 6 and last_key[:6] == static_key[:6]:
            self.last_retrace_reason = f"new data in {self._read()}"  # Note [argument data]
        if batched and not self.dynamic and not entries:
            self.last_retrace_reason += (
                f" (its {_ordinal(len(self._sizes[key]))} batch size: dynamic=None makes the "
                "batch dynamic)"
            )
        counter = self._counter(reasons)
        if counter is not None:  # Note [counters run eagerly]
            why = (
                f"it changes {counter} at every call, and a compiled call must then be "
                f"traced again each time ({RETRACE_LIMIT} traces in a row)"
            )
            return self._run_eagerly(
                key,
                args,
                kwargs,
                why,
                "a counter the step changes",
                f"eagerly from now on, since {why}. Keep such a counter outside the step "
                "(count calls in the loop) or in a tensor (`self.steps += 1` on a tensor "
                "is part of the graph)",
            )
        if (
            self._valued
            and len(self._value_traces.get(key[:-1], ())) >= VALUE_TRACES
            and not isinstance(entries, list)
        ):  # Note [argument data]
            return self._past_limit(
                args,
                kwargs,
                f"{VALUE_TRACES} traces for the data of {self._read()}",
                "new argument data",
                f"staged.compile: {self.name} reads the data of {self._read()}, and "
                f"{VALUE_TRACES} traces for other data of it were made: calls with new "
                "data there run eagerly from now on (as torch.compile breaks its graph "
                "there). Compute what the step needs of it inside the step with tensor "
                "ops, or pass the derived Python values instead",
            )
        if self.traces > compile_config.recompile_limit:  # Note [the recompile limit]
            return self._past_limit(
                args,
                kwargs,
                f"the recompile limit ({compile_config.recompile_limit})",
                "the recompile limit",
                f"staged.compile: {self.name} would be re-traced and compiled for the "
                f"{_ordinal(self.traces)} time (more than {compile_config.recompile_limit}"
                ", the recompile limit: torch._dynamo.config.recompile_limit), this time "
                f"because {self.last_retrace_reason}; as torch's, calls its traces do not "
                "serve run eagerly from now on. Pass values that change between calls as "
                "tensors, keep the sizes of dims other than the batch (dim 0, dynamic by "
                "itself) fixed (pad them), or raise the limit",
            )
        log.info("tracing %s: %s", self.name, self.last_retrace_reason)
        if batched and batch == 0:
            raise DynamicError(
                "staged.compile(dynamic=True) traces with the call's batch, "
                "and this call's batch size is 0: call it first with a "
                "non-empty batch (the compiled step then runs batch size 0 too)"
            )
        try:
            try:
                entry = self._trace_and_compile(args, kwargs, leaves, tree, batch, batched)
            except DynamicError as err:
                if not batched or self.dynamic:
                    raise
                self._static.add(key)  # Note [automatic dynamic]: static from now on
                log.info("%s stays static: %s", self.name, err)
                self.last_retrace_reason += f"; it stays static, since {err}"
                batch, batched, key = None, frozenset(), static_key
                entry = self._trace_and_compile(args, kwargs, leaves, tree, batch, batched)
        except (CaptureError, DynamicError, EagerOnlyError, LoweringError, CompileError) as err:
            if self.fallback != "eager" and not compile_config.suppress_errors:
                self._note_retrace(err)
                raise
            why = (
                "its batch dimension cannot be made dynamic"
                if isinstance(err, DynamicError)
                else "IREE could not compile it"
                if isinstance(err, CompileError)
                else "it cannot be lowered"
                if isinstance(err, LoweringError)
                else "it cannot be captured"
            )
            why = f"{why}: {err}"
            return self._run_eagerly(
                key,
                args,
                kwargs,
                why,
                "fallback='eager'",
                f"eagerly for these arguments, since {why}",
            )
        except Exception as err:
            self._note_retrace(err)
            raise
        valued = (entry if isinstance(entry, Captured) else entry.captured).valued
        if valued.keys() - self._valued.keys():  # Note [argument data]
            self._valued.update(valued)
            static_key = key = self._key(tree, leaves, batched)
        if self._valued:
            self._value_traces.setdefault(key[:-1], set()).add(key[-1])
        if isinstance(entry, Captured):  # Note [autograd boundary]: it runs eagerly
            why = eager_reason(entry)
            if why is not None:
                names = [entry.graph.outputs[k].name for k in entry.grad_results]
                why = (
                    f"it returns {', '.join(names)}, which require grad, to a backward "
                    f"outside, and {why}"
                )
                warned, self._warned_boundary = self._warned_boundary, True
                rerun = reruns_fn(entry)  # Note [first eager call] in boundary.py
                if rerun:
                    replay(entry.attr_before)  # what the trace set there has no data
                    why += "; this call runs its Python again, after its trace"
                return self._run_eagerly(
                    key,
                    args,
                    kwargs,
                    why,
                    "autograd outside",
                    None if warned and not rerun else f"eagerly, since {why}",
                    None
                    if rerun
                    else functools.partial(  # (no module: run_traced gives it one)
                        run_traced,
                        CompiledGraph(entry, self.backend, self.device, None, lambda _: None),
                        leaves,
                    ),
                )
        if batched:  # traced at these in _generalize
            entry.fitted = {batch: True, batch + 1: True}
            if isinstance(entry, CompiledGraph) and not entry.captured.one_shot:
                entry.batch_one = self._at_one(args, kwargs, leaves, tree, batched, entry)
                entry.fitted[1] = entry.batch_one == "same"  # Note [batch size 1]
        self._calls += 1
        entry.used = self._calls
        if not entry.captured.one_shot:
            self._keep(self._entries.setdefault(key, []), entry)
        elif one_shot and entry.captured.escaped and not self._warned_stores:  # a 2nd in a row
            self._warned_stores = True
            warn_user(_stores_each_call(self.fn, entry.captured))
        self.traces += 1
        entry.number = self.traces
        self._last = entry
        self._remember(entry)
        return self._run(entry, leaves)

    def _past_limit(self, args, kwargs, limit: str, note: str, warning: str):
        """Run this call eagerly, past ``limit`` (Note [the recompile limit], Note
        [argument data]): noted in the call log, and the first time in the trace history
        and as a warning."""
        self.calls.note(f"eager ({note})")
        if limit not in self._limits:
            self._limits.add(limit)
            self._remember(eager=limit)
            warn_user(warning)
        return self.fn(*args, **kwargs)

    def _read(self) -> str:
        """The arguments whose data the traces read, and where (Note [argument data])."""
        return ", ".join(self._valued.values())

    def _trace_and_compile(self, args, kwargs, leaves, tree, batch, batched):
        """The entry for this call: its trace compiled, or a ``Differentiable`` where it
        returns results that require grad to a backward outside (Note [autograd
        boundary]), or its ``Captured`` where that must run eagerly."""
        entry = self._compile(args, kwargs, leaves, tree, batch, batched)
        if isinstance(entry, Captured) and eager_reason(entry) is None:
            forward = self._compile(args, kwargs, leaves, tree, batch, batched, entry)
            entry = Differentiable(self, forward, replays=not batched)
        return entry

    def _automatic(self, tree, leaves, key, args, kwargs):
        """(batch, batched, key) for a call no trace has had its signature, under
        ``dynamic=None``: its batch made dynamic where a trace already serves every size of
        it that fits it, or where it is the ``AUTOMATIC_AT``-th batch size seen, else
        static (Note [automatic dynamic])."""
        n, batched = _batch(leaves)
        if not batched or n < 2:
            return None, frozenset(), key
        dynamic = self._key(tree, leaves, batched)
        if dynamic in self._entries:
            if self._fits(dynamic, n, args, kwargs):
                return n, batched, dynamic
            return None, frozenset(), key
        sizes = self._sizes.setdefault(dynamic, set())
        sizes.add(n)
        if len(sizes) < AUTOMATIC_AT or dynamic in self._static:
            return None, frozenset(), key
        return n, batched, dynamic

    def _at_one(self, args, kwargs, leaves, tree, batched, entry):
        """What the step does at batch size 1, for a saved dynamic step, which checks in no
        Python (Note [batch size 1]): ``"same"`` where the dynamic graph computes it,
        ``"differs"`` where a trace at 1 has other ops, or the error it raises there
        (``[type name, message]``: BatchNorm's in training). Traced on the call's first
        rows (Python only), its warnings not shown: no call ran at 1 (a ``var(0)`` there
        warns that no degree of freedom is left)."""
        one = [resize(x, {0: 1}) if i in batched else x for i, x in enumerate(leaves)]
        a, kw = unflatten(tree, one)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = _trace(self.fn, a, kw, self.rng, values=True).graph
        except Exception as err:
            return [type(err).__name__, str(err)]
        return "same" if mismatch(entry.captured.graph, g, {"batch": 1}) is None else "differs"

    def _fits(self, key, n: int, args, kwargs, absent: bool = True) -> bool:
        """Whether the dynamic entry for ``key`` computes what the step does at batch size
        ``n`` (Note [batch size 1], Note [automatic dynamic]): decided once per size, by a
        trace at ``n`` (Python only) compared with its graph, which raises what eager code
        raises there (at 1, by ``_at_one`` when the entry was made). ``absent`` where no
        entry serves the call."""
        entries = self._entries.get(key)
        if not entries or entries is _EAGER:
            return absent
        if all(e.fitted and e.fitted.get(n) for e in entries):  # each call: no guard check
            return True
        entry = next((e for e in entries if e.guard_failure() is None), None)
        if entry is None:
            return absent
        if entry.fitted is None:
            entry.fitted = {}
        fitted = entry.fitted  # kept by a saved step (Note [batch size 1])
        if n not in fitted:
            c0, c = entry.captured, _trace(self.fn, args, kwargs, self.rng, values=True)
            why = mismatch(c0.graph, c.graph, {"batch": n})
            if why is None and (
                c.out_tree != c0.out_tree or not _same(c.out_leaves, c0.out_leaves)
            ):
                why = f"it returns other Python values ({_py_leaves(c)})"
            if why is not None:
                log.info("batch size %d of %s gets its own trace: %s", n, self.name, why)
            fitted[n] = why is None
        return fitted[n]

    def _keep(self, entries: list, entry) -> None:
        """Add ``entry`` to ``entries`` (the traces of one key, checked in turn at each call),
        dropping the least recently used beyond ``MAX_ENTRIES``: a step whose state keeps
        changing (a number it reads, new at each call) would otherwise add a trace to
        check at every call, for good."""
        entries.append(entry)
        if len(entries) > MAX_ENTRIES:
            old = min(entries, key=lambda e: e.used)
            entries.remove(old)

    def _key(self, tree, leaves, batched) -> tuple:
        key: tuple = (
            tree,
            tuple(_leaf_key(x, i in batched) for i, x in enumerate(leaves)),
            _state.grad_enabled,
            _state.inference,
            _autocast.trace_key(),  # the casts a trace under autocast records
            _global_flags.trace_key(),
        )
        if self._valued:  # Note [argument data]
            key += (tuple(_data_key(leaves, i) for i in self._valued),)
        return key

    def _counter(self, reasons) -> str | None:
        """The value a trace wrote (Note [binding writes] in tracing/guards.py) whose change
        fails that trace's guard now, once such failures have made ``RETRACE_LIMIT`` traces
        in a row of this function (whatever the call signatures); None otherwise. A call
        served by a trace, or one re-traced for another reason, starts the count again."""
        if not reasons:  # a new call signature: it tells nothing
            return None
        failed = [
            g.name
            for entry in reasons
            for c in (getattr(entry, "captured", entry),)
            if c.wrote
            for g in c.guards
            if g.name in c.wrote and g.failure() is not None
        ]
        if not failed:
            self._rewrites = 0
            return None
        self._rewrites += 1
        return failed[0] if self._rewrites >= RETRACE_LIMIT else None

    def _run_eagerly(self, key, args, kwargs, why: str, note: str, warning: str | None, first=None):
        """These arguments run eagerly from now on (``fallback="eager"``, or Note [autograd
        boundary]), warning ``running <fn> {warning}`` unless it is None; this call by
        ``first()`` where given (Note [first eager call] in boundary.py)."""
        if warning is not None:
            name = self.name
            warn_user(f"staged.compile: running {name} {warning}")
        self._entries[key] = _EAGER
        self._remember(eager=why)
        self.calls.note(f"eager ({note})")
        return self.fn(*args, **kwargs) if first is None else first()

    @property
    def name(self) -> str:
        """The compiled function's name in messages (a Module's: its class)."""
        return fn_name(self.fn)

    def __getattr__(self, name):
        """A compiled Module answers for the Module (``train()``, ``parameters()``,
        ``state_dict()``...), as torch.compile's wrapper does."""
        fn = self.__dict__.get("fn")
        if is_module(fn):
            return getattr(fn, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _note_retrace(self, err: Exception) -> None:
        """A re-trace that fails says, in a note under the error, what changed since the
        trace that ran before (``x: shape (2, 4) -> (2, 5)``): the error itself names the
        line of the step where it failed."""
        if self.traces:
            name = getattr(self.fn, "__name__", "the step")
            err.add_note(f"staged.compile re-traced {name} because {self.last_retrace_reason}")

    def _run(self, entry: CompiledGraph | Differentiable, leaves):
        if isinstance(entry, Differentiable):  # its forward is a call of its own
            return entry.run(leaves)
        bg = entry.background
        try:  # a tensor it stored gets its graph: Note [first eager call] in boundary.py
            out = run_traced(entry, leaves) if stores_graph(entry.captured) else entry.run(leaves)
        finally:
            if bg is not None:
                bg.start(entry)  # after the first call (Note [background compiles])
        self.calls.note("compiled" if bg is None else bg.label, entry.number)
        return out

    def _compile(
        self, args, kwargs, leaves, tree, batch, batched, grad_trace=None
    ) -> CompiledGraph | Captured:
        """Trace, lower, compile and load the step for this call, timing each phase
        (Note [compile messages]); only its trace if its results require grad and it runs
        no backward (Note [autograd boundary]), which ``grad_trace`` is when given: it is
        then compiled as the forward of its ``Differentiable``, its Python not run again."""
        name = self.name
        with Phases(f"compiling {name}") as p:
            with p("trace"):
                captured = grad_trace or _trace(self.fn, args, kwargs, self.rng, values=True)
                if captured.grad_results and grad_trace is None:
                    return captured
                traced = captured.graph  # at this call's batch size (what eager calls run)
                if batched and not captured.one_shot:
                    captured = self._generalize(captured, leaves, tree, batch, batched)
                    self.last_retrace_reason += (
                        f" (dynamic batch: traced at batch sizes {batch} and {batch + 1}, "
                        "compiled once for every batch size)"
                    )
            log.debug("graph of %s:\n%s", name, captured.graph)
            # a one-shot trace serves one call: the interpreter runs it, as in background
            # mode, rather than IREE compiling a module for it (Note [one-shot traces])
            collectives = has_collectives(captured.graph)
            background_ok = self.mode == "background" and not collectives
            # Note [deferred compiles]
            deferred = captured.gives_grads and not (captured.one_shot or batched or collectives)
            if captured.one_shot or background_ok or deferred:
                background = functools.partial(  # Note [background compiles]
                    Compiling,
                    graph=traced,
                    batch=batch,
                    batched=batched if traced is not captured.graph else (),
                    fallback=functools.partial(call_eagerly, self.fn, captured.in_tree),
                    calls=self.calls,
                    name=name,
                    deferred=deferred,
                    blocking=not background_ok,
                )
                entry = CompiledGraph(captured, self.backend, self.device, p, background)
                self._specialize(entry, traced, name)
                log.info(
                    "traced %s (%d ops) in %.2f s; %s",
                    name,
                    len(captured.graph.ops),
                    sum(p.times.values()),
                    f"one-shot ({captured.one_shot_why}), so it runs on NumPy and is not compiled"
                    if captured.one_shot
                    else "it gave .grad to tensors that had none, so it runs on NumPy and is "
                    "compiled when it serves a second call"
                    if deferred
                    else "compiling in the background",
                )
                return entry
            entry = CompiledGraph(captured, self.backend, self.device, p)
            self._specialize(entry, traced, name)
        log.info(
            "compiled %s (%d ops, %s) in %.2f s: %s; IREE module %s",
            name,
            len(captured.graph.ops),
            self.backend,
            sum(p.times.values()),
            p.summary(),
            "from the cache" if entry.cache.get("cache") == "hit" else "compiled",
        )
        return entry

    def _specialize(self, entry: CompiledGraph, traced, name: str) -> None:
        """Give a dynamic entry static modules for the batch sizes it is called at (Note
        [specialized batch sizes]) unless ``specialize=False``; ``traced`` is the graph at
        the call's own size, which the entry's is not where it was made dynamic."""
        if self.specialize and traced is not entry.captured.graph:
            entry.specialized = specialized(entry, name, self.mode == "background")

    def _remember(self, entry=None, eager=None) -> None:
        """A line of the re-trace history that explain() shows (the newest 50)."""
        self.history.append(
            {"reason": self.last_retrace_reason, "eager": eager}
            if eager
            else {
                "reason": self.last_retrace_reason,
                "ops": len(entry.captured.graph.ops),
                "one_shot": entry.captured.one_shot and entry.captured.one_shot_why,
                "times": entry.times,
                "cache": entry.cache.get("cache"),
                "background": entry.background and entry.background.status,
                "differentiable": isinstance(entry, Differentiable),
            }
        )
        del self.history[:-50]

    def _generalize(self, c0: Captured, leaves, tree, n0: int, batched) -> Captured:
        """``c0`` with every size that follows the batch made dynamic: trace again at
        other batch sizes and compare (``staged.tracing.dynamic``)."""
        name = self.name
        advice = (  # under dynamic=None the step stays static (Note [automatic dynamic])
            ". Compile it with dynamic=False (one trace per batch size) or fallback='eager'"
            if self.dynamic
            else ""
        )
        returned = dict(c0.returned)  # those every trace agrees on (a slice by the batch
        # size of a state tensor is a value)

        def retrace(n):
            grown = [resize(x, {0: n}) if i in batched else x for i, x in enumerate(leaves)]
            a, kw = unflatten(tree, grown)
            try:
                c = _trace(self.fn, a, kw, self.rng, values=True)
            except CaptureError:
                raise
            except Exception as err:
                raise DynamicError(
                    f"tracing {name} again at batch size {n} failed "
                    f"({type(err).__name__}: {err}); does every argument whose "
                    f"dim 0 is {n0} hold a batch?"
                ) from err
            if c.one_shot or [w.tensor for w in c.state] != [w.tensor for w in c0.state]:
                raise DynamicError(
                    f"at batch size {n}, {name} reads or creates other state "
                    f"than at batch size {n0}"
                )
            if c.out_tree != c0.out_tree or not _same(c.out_leaves, c0.out_leaves):
                raise DynamicError(
                    f"{name} returns Python values that depend on the batch "
                    f"size ({_py_leaves(c0)} at {n0}, {_py_leaves(c)} at {n})"
                )
            for pos in [p for p, r in returned.items() if not same_recipe(r, c.returned.get(p))]:
                del returned[pos]
            return c.graph

        try:
            subst, consts = generalize(c0.graph, n0, retrace, "batch")
        except DynamicError as err:
            raise DynamicError(
                f"{name} cannot be compiled for every batch size: {err}" + advice
            ) from None
        g = substitute(c0.graph, subst, consts)
        arg_grads = {
            gw.output
            for gw in c0.grad_writes
            if gw.kind == "output" and any(gw.tensor is w for _, w in c0.arg_wrappers)
        }
        for k, o in enumerate(g.outputs):
            if (
                o.kind not in ("out", "arg", "attr")
                and k not in arg_grads
                and not is_static(o.value.aval.shape)
            ):
                raise DynamicError(
                    f"the new value of {o.name} (state {name} keeps between calls) would "
                    f"have shape {o.value.aval}, which follows the batch size; state must "
                    "not depend on it" + advice
                )
        return dataclasses.replace(c0, graph=g, returned=returned)

    def save(self, directory, names=None, target_cpu="host"):
        """Save the step as last called, with the current state, for
        ``staged.runtime.load(directory)``. ``names`` maps state tensors to names (e.g.
        ``{p: k for k, p in model.state_dict(keep_vars=True).items()}``); by default they
        are those the trace gave them (``0.weight``, ``opt.state[0.weight].exp_avg``).
        ``target_cpu`` (llvm-cpu): ``"host"``, this machine's CPU, or an x86-64 level
        (``"x86-64-v3"``: AVX2 machines) for a step deployed on other machines; ``load``
        refuses a CPU that lacks what the code uses."""
        if self._last is None:
            raise RuntimeError(
                at_user("call the compiled step once before saving it: saving needs its trace")
            )
        if self._last.captured.one_shot:
            raise RuntimeError(
                at_user(
                    "the last call created new state (e.g. optimizer "
                    "buffers on the first step); call the step once more "
                    "before saving"
                )
            )
        why = self._last.guard_failure()  # the next call would re-trace: the trace is stale
        if why is not None:
            raise RuntimeError(
                at_user(
                    f"the step's last trace no longer matches the Python state it read "
                    f"({why}), so saving it would deploy the step as it was; call the "
                    "step once more (it re-traces) before saving"
                )
            )
        if self._last.captured.valued:  # Note [argument data]
            raise CaptureError(
                at_user(
                    f"the step reads the data of {self._read()}, and its trace holds what "
                    "it read: a saved step cannot check that a call brings the same data. "
                    "Compute what the step needs of it with tensor ops, or pass the derived "
                    "Python values as arguments"
                )
            )
        # Note [host draws], Note [disabled calls]: a saved step runs no Python
        if self._last.captured.rng is not None or self._last.captured.host_calls:
            twin = _counter_twin(self.fn, self._last)
            return deploy.save(twin, directory, names, self.fn, target_cpu)
        return self._last.save(directory, names, self.fn, target_cpu)

    def explain(self, verbose: bool = False, file=None) -> None:
        """Print what was compiled, on one screen: the graph's size by phase (forward,
        backward, optimizer) with the user's lines, its segments, arguments, results and
        state by name (``fc1.weight``, ``opt.state[fc1.weight].exp_avg``), the guards,
        the re-trace history with reasons, the compile and cache times and the backend.
        ``verbose=True`` adds IREE's dispatch count, the whole graph and its MLIR.
        Returns None, so that a REPL does not echo it again; ``explanation()`` returns
        the text."""
        print(self.explanation(verbose), file=file or sys.stdout)

    def explanation(self, verbose: bool = False) -> str:
        """The text ``explain()`` prints."""
        return explain_text(self, verbose)

    def graph(self, format: str = "svg"):
        """A picture of the step as last called (``staged.viz.make_step_dot``): forward,
        backward and optimizer ops coloured apart, hooks outlined, each op with its shape
        and dtype. ``format="svg"`` (text; needs Graphviz's ``dot``), ``"png"`` (bytes),
        or ``"dot"`` for the DOT text alone."""
        if self._last is None:
            raise RuntimeError(
                "call the compiled step once before drawing it: the picture is of its trace"
            )
        name = self.name
        return viz.render(viz.make_step_dot(self._last.captured.graph, f"{name}: "), format)

    def graphs(self):
        return [e.captured.graph for es in self._entries.values() if es is not _EAGER for e in es]


class _Twin(NamedTuple):
    """What ``deploy.save`` reads of a CompiledGraph."""

    captured: Captured
    backend: str


def _counter_twin(fn, entry) -> _Twin:
    """``entry``'s step traced again with its draws in the graph, from the counter-based
    stream (Note [host draws]): a deployed step runs no host code. Traced on zeros shaped
    as the arguments (a trace reads no argument data); the generators are left as they
    were."""
    c = entry.captured
    if any(not is_static(i.value.aval.shape) for i in c.graph.inputs):
        raise RuntimeError(
            "this step draws random numbers on the host at every call (Note "
            "[host draws]) and has a dynamic batch: compile it with "
            "staged.compile(..., rng='counter') to save it"
        )
    tensors, consts = dict(c.arg_wrappers), iter(c.constants.values())
    leaves = []
    for i in range(len(tensors) + len(c.constants)):
        w = tensors.get(i)
        if w is None:
            leaves.append(next(consts))
            continue
        aval = w._aval()
        t = Tensor._wrap(np.zeros(aval.shape, aval.dtype.np), w._requires_grad)
        if w._grad is not None:
            t._grad = Tensor._wrap(np.zeros(aval.shape, aval.dtype.np), False)
        leaves.append(t)
    a, kw = unflatten(c.in_tree, leaves)
    with fork_rng():
        return _Twin(_trace(fn, a, kw, "counter"), entry.backend)


MAX_ENTRIES = 8  # traces kept per call signature (torch.compile's cache_size_limit)
# Note [counters run eagerly]: a value the step writes (Note [binding writes] in
# tracing/guards.py) that changes at every call (``self.steps += 1``, the tutorial's
# ``run[0] += 1``) fails the guard of the trace that wrote it at the next call: each call
# traces again (exact, the graph from the compile cache, but a trace costs more than an
# eager step). After this many such traces in a row (whatever the call signatures) its
# calls run eagerly, each signature from its next trace on, with a warning saying which value and what to do, as torch.compile falls back to eager code
# past its recompile limit. A value that alternates (``model.train()`` in the step,
# ``model.eval()`` between calls) keeps its traces and never gets here.
RETRACE_LIMIT = 4

# Note [automatic dynamic]: under ``dynamic=None`` (torch.compile's default, and
# staged.compile's) a step is traced for the batch size it is called with, and its
# ``AUTOMATIC_AT``-th batch size (dim 0 of the tensor arguments that share the first
# one's, all else the same) is traced with the batch dynamic (``_generalize``): one
# module then serves every size no static trace does, and the sizes it runs often get
# static modules of their own (Note [specialized batch sizes]). torch.compile makes a
# changed size dynamic at its second value; staged waits for a third, since the commonest
# change is an epoch's last, partial batch, which two static modules run at a static
# step's speed, and a dynamic module costs 1.2-1.65x a static one until specialized.
# The traces at two sizes that make the batch dynamic cannot see a branch on the size that
# both take alike (``if x.shape[0] > 64:``), so each new size is traced once more (Python
# only: ``_fits``) and compared with the dynamic graph, as Note [batch size 1] does for
# size 1; a size where they differ gets a static trace of its own. A step whose batch
# cannot be dynamic (``DynamicError``: ``x[:-1]``, a branch on the size the two traces
# see) stays static for those arguments, a trace per size, as it was, with the reason in
# the trace history; batch sizes 0 and 1 are always traced statically. ``dynamic=False``
# traces every size statically, ``dynamic=True`` makes the batch dynamic at the first; both
# check each new size with ``_fits`` (a branch on the size is never served wrongly).
AUTOMATIC_AT = 3

# Note [argument data]: Python in the step may read the data of a small integer or bool
# argument (``pack_padded_sequence(x, lengths)`` reads ``lengths.tolist()``; ``out[mask]``
# with the mask passed in; ``idx.tolist()``): the trace gets it from the caller's tensor
# (``Tracer.data_of`` with ``args``) and holds what Python made of it as constants, so
# the trace is right only for those values. The call's key then holds that argument's
# bytes (``_data_key``; every later key of this function does, once one trace read it),
# and a call with other data traces again. A full-batch GNN's ``out[train_mask]`` traces
# once; lengths that change at every batch would trace at every call, so after
# ``VALUE_TRACES`` traces for other data of the same signature a call with new data runs
# eagerly (one warning), where torch.compile breaks its graph. Floats (data that changes
# at every call) and arguments over ``VALUES_CAP`` elements still raise ``CaptureError``;
# ``.item()`` of an argument is a traced scalar (Note [traced items]), not a read. A saved
# step, which checks nothing in Python, refuses such a trace.
VALUE_TRACES = 4


def _stores_each_call(fn, captured) -> str:
    """The warning for a function whose calls keep storing new tensors outside it (the
    first optimizer step does once; ``losses.append(loss)`` or ``self.ema = self.ema * 0.5
    + x`` in the body do at every call)."""
    made = {op.out.id: op.loc for op in captured.graph.ops}
    sites = sorted(
        {made.get(o.value.id) or "?" for o in captured.graph.outputs if o.kind == "escaped"}
    )
    return (
        f"staged.compile: {fn_name(fn)} stored new "
        f"tensors made at {', '.join(sites)} outside itself at two calls in a row (appended "
        "them to a list, stored them in a dict, or bound them to a global, an attribute or "
        "a buffer): a call that makes new "
        "state is traced again, so every call re-traces. Update state in place "
        "(self.ema.mul_(0.5).add_(x)), return the tensor from the function, or store it "
        "outside the compiled function"
    )


def _key_change(old, new, names) -> str:
    """What differs between two calls' keys, naming the argument: ``x: shape (32, 784)
    -> (33, 784)``, ``lr: 0.1 -> 0.05``, ``grad mode: enabled -> disabled``."""
    if old is None or old[0] != new[0]:
        return (
            "new argument structure"
            if old is None
            else f"argument structure: {_tree(old[0])} -> {_tree(new[0])}"
        )
    changes = [
        f"{n}: {c}" for n, a, b in zip(names, old[1], new[1]) if a != b for c in _leaf_change(a, b)
    ]
    for what, i in (("grad mode", 2), ("inference mode", 3)):
        if old[i] != new[i]:
            changes.append(f"{what}: {_on(old[i])} -> {_on(new[i])}")
    if old[4] != new[4]:
        changes.append(f"autocast: {old[4] or 'disabled'} -> {new[4] or 'disabled'}")
    changes += [
        f"{what}: {a} -> {b}"
        for what, a, b in zip(_global_flags.TRACE_KEY, old[5], new[5])
        if a != b
    ]
    return "; ".join(changes) or "new arguments"


def _leaf_change(a, b) -> list:
    if a[0] != b[0] or a[0] == "py":
        return [f"{_show_leaf(a)} -> {_show_leaf(b)}"]
    fields = ("shape", "dtype", "requires_grad", ".grad", "hooks", "attributes")
    show: tuple[Callable[[Any], str], ...] = (
        lambda s: str(s),
        lambda d: np.dtype(d).name,
        str,
        lambda g: "a tensor" if g else "None",
        lambda h: str(len(h)),
        lambda a: "{" + ", ".join(f"{k}: {v!r}" for k, v in a) + "}",
    )
    return [f"{f} {sh(x)} -> {sh(y)}" for f, sh, x, y in zip(fields, show, a[1:], b[1:]) if x != y]


def _show_leaf(k) -> str:
    return repr(k[2]) if k[0] == "py" else f"a tensor of shape {k[1]}"


def _tree(t) -> str:
    return (
        "*"
        if t == "*"
        else f"{t[0]}{{{', '.join(map(repr, t[1]))}}}"
        if t[0] == "dict"
        else f"{getattr(t[0], '__name__', t[0])}[{len(t[1])}]"
    )


def _on(flag) -> str:
    return "enabled" if flag else "disabled"


# Note [batch size 1]: code may do something else at batch size 1 than at other sizes
# (BatchNorm raises in training, a size-1 dim broadcasts, a branch on ``x.shape[0] == 1``)
# where the traces at two larger sizes that a dynamic step is generalized from cannot see
# it. So the dynamic entry serves batch size 1 only once a trace at 1 is what its graph
# computes at 1 (``dynamic.mismatch``: same ops, shapes, shape parameters and constants),
# decided by a trace at 1 on the first rows of the call that makes the dynamic trace
# (``_at_one``; ``CompiledGraph.batch_one``): where that trace raises, a call at 1 is
# traced statically and raises what eager code raises (again at the next such call, as
# eager code raises again), and a mismatch gives batch size 1 its own static trace, as
# torch.compile specializes sizes 0 and 1. A saved step keeps the verdict in its manifest
# and raises that error, or refuses batch 1, itself (``deploy._at_one``); it also refuses
# the sizes ``_fits`` found to differ (``batch_differs``), and cannot check others. A first call
# with batch 1 also traces statically; the dynamic trace waits for a batch of 2 or more,
# whose sizes n and n + 1 are what it generalizes from.
def _batch(leaves):
    """(batch size, indices of the leaves that hold a batch): dim 0 of the first tensor
    argument, and every tensor argument whose dim 0 has that size."""
    sizes = [
        (i, x._payload.shape[0])
        for i, x in enumerate(leaves)
        if isinstance(x, Tensor) and len(x._payload.shape)
    ]
    if not sizes:
        return None, frozenset()
    n = sizes[0][1]
    return n, frozenset(i for i, s in sizes if s == n)


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. NumPy arrays among Python outputs
        return False


def _py_leaves(c) -> list:
    """The Python values among ``c``'s results; a traced scalar's expression (Note
    [traced items]) as such: ``loss.item() * x.size(0)`` holds the batch size."""
    return [
        x if kind == "py" else f".item() expression {x}"
        for kind, x in c.out_leaves
        if kind != "value"
    ]


# Note [the recompile limit]: a function traced more than ``recompile_limit`` times
# (torch._dynamo.config's, 8) re-traces at almost every call (a size or a number that keeps
# changing), each a compile of seconds. As torch's does at its limit, a call that none of
# its traces serves then runs eagerly, with one warning saying why it was re-traced last;
# its traces keep serving the calls they match.
_EAGER = "eager"  # an _entries value: these arguments run eagerly (fallback="eager", or
# Note [autograd boundary])


def compile(
    fn=None,
    *,
    backend: str = "llvm-cpu",
    device=None,
    dynamic: bool | None = None,
    fallback=None,
    rng: str = "host",
    mode: str | None = "blocking",
    specialize: bool = True,
    fullgraph: bool = False,
    options: dict | None = None,
    disable: bool = False,
):
    """Compile ``fn`` (forward, backward, optimizer steps and all) with IREE.

    ``device`` picks the device of the backend's IREE driver that runs the step: None (the
    driver's default device), an index into the devices the driver lists, or a string
    ``"driver"`` / ``"driver:index"`` (``"local-task"``, ``"local-sync:0"``, ``"vulkan:0"``,
    ``"cuda:1"``; ``staged.runtime.device.available_devices(backend)`` lists them). An
    unknown device raises ``DeviceError`` listing the available ones.

    The first call traces ``fn`` on symbolic tensors; later calls with the same argument
    shapes, dtypes, requires_grad and grad mode run the compiled module without running
    the Python body. Parameters and ``.grad`` fields the step changes are written back to
    the caller's tensors (their data stays on the device until read). A call re-traces
    when what the trace read changed: a Module's training flag or parameter objects, a
    tensor or number read through a global or closure that was rebound (Note [source
    guards]); ``last_retrace_reason`` names what changed (``x: shape (32, 784) -> (33,
    784)``); past 8 re-traces (``torch._dynamo.config.recompile_limit``) a call that no
    trace serves runs eagerly, with one warning (Note [the recompile limit]). Optimizer hyper-parameters (``lr``, ``betas``,
    ...) are read at every call, so a scheduler needs no re-trace. Python ``random``,
    ``numpy.random`` and clock reads while tracing warn: their value is frozen.

    Random draws from staged's generators (dropout masks, ``rand``/``randn``, ``nn.init``,
    ``Tensor.uniform_``, ...) are made on the host at every call, from torch's stream,
    exactly as eager code draws them (``rng="host"``): a seeded step gives eager's (and
    torch's) numbers and leaves the generators in eager's state. ``rng="counter"`` draws
    ``rand``/``randn`` and dropout masks in the graph instead, from a counter-based stream
    (new at every call, reproducible after ``manual_seed``, not torch's numbers), as
    deployed steps do; other draws are then frozen at trace time (Note [host draws]).

    The batch, dim 0 of the tensor arguments (those sharing the first one's size), is
    static at first: with ``dynamic=None``, the default, a third batch size makes it
    dynamic (Note [automatic dynamic]); ``dynamic=False`` traces every size.
    With ``dynamic=True`` the batch is dynamic at the first call: one trace and one compile serve every batch size; what
    cannot follow the batch raises ``DynamicError`` (``staged.tracing.dynamic``). A batch
    size called twice gets a static module of its own, compiled from the same trace at
    that call (with ``mode="background"``: in the background), which runs its calls from
    then on at a static step's speed (at most 4 sizes; Note [specialized batch sizes] in
    ``staged/runtime/specialized.py``);
    ``specialize=False`` runs every call on the dynamic module.

    Code that needs tensor data while tracing (``.item()``, a Python branch on a value)
    raises ``CaptureError`` naming the line; with ``fallback="eager"`` such a function (or
    one whose batch cannot be dynamic, or that cannot be lowered or compiled) runs eagerly instead,
    with a warning saying why.

    ``mode="background"``: the first call traces ``fn`` and returns at once, running the
    traced graph eagerly on NumPy while IREE compiles it in a separate process; calls run
    eagerly until the module is loaded and compiled from the next call on, with the same
    results and state (Note [background compiles] in ``staged/runtime/background.py``).
    A compile that fails leaves the step running eagerly, with one warning. The default,
    ``"blocking"``, compiles before the first call returns.

    ``explain()`` shows what was compiled and which calls ran where; ``STAGED_LOG=info`` logs every trace with its
    reason and compile times, ``STAGED_LOG=debug`` also its graph (Note [compile
    messages]).

    torch.compile's arguments mean here (Note [torch.compile's arguments]): ``backend``
    ``"inductor"`` is ``"llvm-cpu"``, ``"eager"`` and ``"aot_eager"`` (torch's backends
    that run the captured graph eagerly) and ``disable=True`` return ``fn`` itself; ``mode``
    None, ``"default"``, ``"reduce-overhead"``, ``"max-autotune"`` and
    ``"max-autotune-no-cudagraphs"`` are ``"blocking"``;
    ``fullgraph`` is what staged always does (a whole graph, or ``CaptureError``);
    ``options`` (inductor's) change nothing.

    Example:
        >>> step = staged.compile(train_step)
        >>> loss = step(x, y)
    """
    if fn is None:
        return functools.partial(
            compile,
            backend=backend,
            device=device,
            dynamic=dynamic,
            fallback=fallback,
            rng=rng,
            mode=mode,
            specialize=specialize,
            fullgraph=fullgraph,
            options=options,
            disable=disable,
        )
    if callable(backend):
        raise TypeError(
            at_user(
                "staged.compile compiles with IREE and cannot hand the graph to a custom "
                f"torch.compile backend ({getattr(backend, '__name__', backend)!r}): pass "
                "backend='inductor' (IREE's llvm-cpu), 'llvm-cpu', 'vulkan-spirv' or 'cuda'"
            )
        )
    if disable or backend in UNCOMPILED_BACKENDS:
        return fn
    kwargs = dict(
        backend=TORCH_BACKENDS.get(backend, backend),
        dynamic=None if dynamic is None else bool(dynamic),
        fallback=fallback,
        device=device,
        rng=rng,
        mode="blocking" if mode is None or mode in _TORCH_MODES else mode,
        specialize=specialize,
    )
    compiled = Compiled(fn, **kwargs)
    # a Module's is a Module: Note [optimized modules] in staged/nn/optimized.py
    return OptimizedModule(fn, compiled, kwargs) if isinstance(fn, Module) else compiled


def fn_name(fn) -> str:
    """``fn``'s qualified name; a Module's (or another callable object's) class name."""
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


# Note [torch.compile's arguments]: ``import staged as torch`` makes torch.compile this
# function, so torch's own arguments must mean what they can here. Its modes tune
# inductor (CUDA graphs, autotuning): IREE's code is the same for all, a blocking compile.
# Its ``"eager"``/``"aot_eager"`` backends run the graph torch captured with eager kernels:
# the function's own numbers, which the function itself gives. ``fullgraph=False`` lets
# torch split a function at what it cannot capture; staged never splits (what it cannot
# capture raises ``CaptureError`` naming the line, or runs eagerly with
# ``fallback="eager"`` or ``torch._dynamo.config.suppress_errors``).
TORCH_BACKENDS = {"inductor": "llvm-cpu"}
UNCOMPILED_BACKENDS = ("eager", "aot_eager")
_TORCH_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@atexit.register
def _bring_state_home() -> None:
    """Copy device-resident tensor data to the host, then release every device buffer,
    before the interpreter tears IREE down: a buffer freed after its device segfaults
    during shutdown GC. That includes buffers no Tensor holds: the index-check report of a
    call whose results were never read, kept by its compiled step (``runtime/checks.py``;
    a compiled CNN held at module level crashed at exit), and the semaphores and buffers
    in the locals of staged's frames that a kept exception's traceback holds (a caught
    OverflowError kept until exit crashed it): those frames are cleared."""
    values = live_values()
    for value in values:
        value.keep_home(quiet_checks=True)  # a failed index check raised at the reads
    for value in values:
        value.release()
    frames = [
        obj
        for obj in gc.get_objects()
        if type(obj) is FrameType and obj.f_code.co_filename.startswith(STAGED_DIR)
    ]
    for frame in frames:
        with contextlib.suppress(RuntimeError):  # one still running (this call's callers)
            frame.clear()
