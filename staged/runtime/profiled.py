"""A compiled call while ``staged.profiler.profile`` is open (Note [compiled calls]).

Note [compiled calls]: with no profile open a compiled call checks one flag
(``profiler.current``) and costs nothing more. With one open, the call is one event
``staged.compile [backend]`` (cat ``compiled``) holding its phases, in order:

- ``argument transfer``: host arrays (new data batches) uploaded to the device; state
  already there (parameters, optimizer buffers) is not copied. Its args count them.
- ``enqueue``: the IREE call, which queues the step on the device's timeline and returns
  (Note [asynchronous steps]); a step cut at collectives (``runtime/segmented.py``) has one
  per segment, with the host collectives (``all_reduce (host collective)``) between them.
- ``device execution``: from the end of the enqueue until the results are ready. The
  device starts as soon as the work is queued, so what this shows is the device time not
  hidden under the enqueue; a profiled call waits for its step, which unprofiled calls do
  not (their time shows where a result is read).
- ``result transfer``: the step's returned tensors copied to the host, as reading them
  would (state stays on the device).

``record_function`` blocks inside the traced function tag the ops they issued (Note
[phases]); a profiled call shows each as ``name [compiled, N ops]`` inside ``device
execution``, with the op counts per phase in its Chrome-trace args. These have no time of
their own (zero duration): IREE fuses ops across the blocks into dispatches, and its
Python runtime (3.13) reports no per-dispatch times (``HalDevice.begin_profiling`` raises:
no profile sink is exposed to Python). Per-dispatch times of a saved step come from IREE's
own tools: ``iree-run-module --device_profiling_mode=host-execution
--device_profiling_output=step.ireeprof ...`` then ``iree-profile statistics
step.ireeprof`` (docs/profiling.md).
"""

from __future__ import annotations

import time

import numpy as np

from ..autograd import profiler
from ..eager.tensor import Tensor
from ..tracing.pytree import flatten
from .device import DeviceValue
from .segmented import Segmented


class _Probe:
    """Stands in for a loaded Module during one profiled call: times the argument
    transfer and the enqueue of each invocation."""

    def __init__(self, module, prof):
        self.module, self.prof = module, prof
        self.device = getattr(module, "device", None)  # None: runs on NumPy (Interpreter)
        self.in_place = getattr(module, "in_place", ())  # Note [state in place]
        self.results = []
        self.enqueued = None

    def invoke(self, fn_name, args, result_dtypes=None, undo=None) -> list:
        dev, prof = self.device, self.prof
        moved, nbytes = [], 0
        e = prof._begin("argument transfer", "compiled_phase")
        try:
            for a in args:
                if dev is not None and not (isinstance(a, DeviceValue) and a.device is dev):
                    nbytes += int(getattr(a, "nbytes", 0))
                    a = dev.upload(a)
                moved.append(a)
        finally:
            prof._end(e)
        e.args.update(arrays=sum(a is not m for a, m in zip(args, moved)), bytes=nbytes)
        e = prof._begin("enqueue", "compiled_phase")
        e.args["function"] = fn_name
        try:
            res = self.module.invoke(fn_name, moved, result_dtypes, undo)
        finally:
            prof._end(e)
        self.enqueued = time.perf_counter_ns()
        self.results = res
        return res


def run(graph, leaves, module):
    """``graph._run(leaves, module)`` with its phases recorded in the open profile."""
    prof = profiler.current
    call = prof._begin(graph._event, "compiled")
    try:
        segmented = isinstance(module, Segmented)
        probe = _Probe(module.module if segmented else module, prof)
        if segmented:
            module.module = probe
        try:
            out = graph._run(leaves, module if segmented else probe)
        finally:
            if segmented:
                module.module = probe.module
        start = probe.enqueued or time.perf_counter_ns()
        for r in probe.results:
            if isinstance(r, DeviceValue) and r.ready is not None:
                r.wait()
                break  # one wait per call: the step signals all its results at once
        device = prof.add_event(
            "device execution",
            "compiled_phase",
            start,
            time.perf_counter_ns(),
            {"backend": graph.backend},
        )
        events = {}
        for path, n in _ranges(graph).items():  # untimed: see the Note
            at = prof._t0 + device.end_us * 1000
            events[path] = prof.add_event(
                f"{path[-1]} [compiled, {sum(n.values())} ops]",
                "compiled_range",
                at,
                at,
                {"ops": n, "timed": False},
                events.get(path[:-1], device),
            )
        e = prof._begin("result transfer", "compiled_phase")
        try:
            nbytes = 0
            for t in flatten(out, lambda o: False)[0]:
                if isinstance(t, Tensor) and type(t._payload) is not np.ndarray:
                    nbytes += t._host().nbytes
        finally:
            prof._end(e)
        e.args["bytes"] = nbytes
    finally:
        prof._end(call)
    return out


def _ranges(graph) -> dict:
    """``{range path: {phase: op count}}`` of the record_function blocks in the step's
    graph, parents before children, cached on the CompiledGraph."""
    found = getattr(graph, "_profiled_ranges", None)
    if found is None:
        found = {}
        for op in graph.captured.graph.ops:
            for k in range(1, len(op.ranges) + 1):
                counts = found.setdefault(op.ranges[:k], {})
                counts[op.phase] = counts.get(op.phase, 0) + 1
        graph._profiled_ranges = found
    return found
