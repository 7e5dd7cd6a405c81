"""Compiled steps with collectives on backends without a collective channel (Note
[segments] in ``staged/tracing/segments.py``): the step's graph is split at its
collectives, each segment lowered as a function ``segment<k>`` of one module. The split is
written down as a *program* (``program``: JSON, what a saved step keeps in its manifest):
per segment its function, the value ids it reads and returns, and the collectives run on
the host after it. ``Segments`` runs a program on the loaded module, the collectives
through the process group the eager impls use (``GROUP[0]``, MPI); ``Segmented`` stands
in for a live step's ``main``. The segments are enqueued asynchronously as any step; a
collective waits for the value it reduces and is started after the next segment is
enqueued; its result is uploaded when a segment (or the step's result) reads it.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..autodiff.collective import COLLECTIVES, GROUP
from ..autograd import profiler
from ..lower.mlir import to_mlir
from ..tracing.segments import split
from .compiler import to_boundary
from .device import DeviceValue

HOST_BACKENDS = ("llvm-cpu", "vulkan-spirv")  # no IREE collective channel (IREE #12810)
_HOST_OPS = {p.name for p in COLLECTIVES}


def has_collectives(graph) -> bool:
    return any(op.prim.name in _HOST_OPS for op in graph.ops)


def _runs(seg) -> bool:
    return bool(seg.graph.ops or seg.outputs)


def segmented_mlir(graph, options):
    """(the Split, the MLIR text of a module with one function per segment that runs);
    ``options`` are ``to_mlir``'s (compiler.lowering_options)."""
    plan = split(graph, lambda op: op.prim.name in _HOST_OPS)
    options = {**options, "in_place": False}  # its state crosses the host between segments
    texts = [
        to_mlir(s.graph, f"segment{k}", **options) for k, s in enumerate(plan.segments) if _runs(s)
    ]
    return plan, "\n".join(texts)


def program(graph, plan) -> dict:
    """The JSON-able program of ``graph`` split as ``plan``: the step's inputs ([id, kind,
    name]) and outputs ([id, dtype, kind, name]), and per segment its function (None:
    nothing to run), the ids it reads, the [id, dtype] it returns and its collectives
    (name, input id, [output id, dtype], static params)."""

    def typed(v):
        return [v.id, v.aval.dtype.name]

    return {
        "inputs": [[i.value.id, i.kind, i.name] for i in graph.inputs],
        "outputs": [[*typed(o.value), o.kind, o.name] for o in graph.outputs],
        "segments": [
            {
                "function": f"segment{k}" if _runs(s) else None,
                "inputs": [v.id for v in s.inputs],
                "outputs": [typed(v) for v in s.outputs],
                "collectives": [
                    {
                        "name": op.prim.name,
                        "input": op.inputs[0].id,
                        "output": typed(op.out),
                        "params": dict(op.params),
                    }
                    for op in host
                ],
            }
            for k, (s, host) in enumerate(zip(plan.segments, plan.host))
        ],
    }


class Segments:
    """A program run on its loaded module: ``run(args)`` takes the step's inputs in order
    (NumPy arrays or DeviceValues) and returns its outputs as DeviceValues."""

    def __init__(self, program: dict, module, narrow: dict):
        self.program, self.module = program, module
        self.device = module.device
        self.narrow = narrow  # {numpy dtype: the dtype it has at the module's edge}
        self.checked = False  # the first call checks that the ranks agree on each collective

    def to_device(self, a, dtype):
        """NumPy ``a`` on the device, held as the module's edge holds ``dtype``."""
        edge = self.narrow.get(np.dtype(dtype))
        dv = self.device.upload(
            a if edge is None else to_boundary(a, edge, "a collective's result")
        )
        dv.dtype = np.dtype(dtype)
        return dv

    def _start(self, ops, env, started: dict) -> None:
        """Start the collectives ``ops`` in program order (each waits for the segment that
        makes its input): ``started`` maps their output ids to (op, request, result)."""
        group = GROUP[0]
        start = getattr(group, "start", None)
        for op in ops:
            if op["input"] in started:  # a collective of a collective's result
                self._finish(op["input"], env, started)
            x = np.asarray(env[op["input"]])
            if start is None:  # this process alone (no process group)
                started[op["output"][0]] = (op, None, group.run(op["name"], x, op["params"]))
            else:
                request = start(op["name"], x, op["params"], not self.checked)
                started[op["output"][0]] = (op, request, None)

    def _finish(self, i, env, started: dict) -> None:
        """Wait for the started collective whose output is ``i``; its result on the device."""
        op, request, out = started.pop(i)
        out = request.wait() if request is not None else out
        d = op["output"][1]
        env[i] = self.to_device(np.asarray(out, d), d)

    def run(self, args, undo=None) -> list:
        """The step's outputs on its inputs ``args``. A segment's collectives are started
        once the next segment is enqueued (unless it reads them), so the device computes
        while they are waited for and carried; each is waited for when read (Note
        [segments])."""
        p = self.program
        env = {i: a for (i, *_), a in zip(p["inputs"], args)}
        segments = p["segments"]
        last = max((k for k, s in enumerate(segments) if s["function"]), default=-1)
        started: dict = {}
        queued: list = []  # the collectives of the segments enqueued last
        for k, seg in enumerate(segments):
            if seg["function"]:
                reads = seg["inputs"]
                if queued or started:
                    with _host():
                        if any(c["output"][0] in reads for c in queued):
                            self._start(queued, env, started)
                            queued = []
                        for i in reads:
                            if i in started:
                                self._finish(i, env, started)
                res = self.module.invoke(
                    seg["function"],
                    [env[i] for i in reads],
                    [np.dtype(d) for _, d in seg["outputs"]],
                    undo if k == last else None,
                )
                env.update((i, r) for (i, _), r in zip(seg["outputs"], res))
            if queued:
                with _host():
                    self._start(queued, env, started)
            queued = seg["collectives"]
        with _host():
            self._start(queued, env, started)
            for i in list(started):
                self._finish(i, env, started)
        self.checked = True
        return [
            r
            if isinstance(r := env[i], DeviceValue) and r.device is self.device
            else self.to_device(np.asarray(r), d)
            for i, d, *_ in p["outputs"]
        ]


def _host():
    """Where the host waits and communicates: a range of the open profile (Note [compiled
    calls]), if any."""
    if profiler.current is None:
        return contextlib.nullcontext()
    return profiler.record_function("host collectives", cat="compiled_phase")


class Segmented(Segments):
    """A live step's loaded module of segments, invoked like a whole step's ``main``."""

    def __init__(self, graph, plan, module, narrow: dict):
        super().__init__(program(graph, plan), module, narrow)
        self.plan = plan

    def invoke(self, fn_name, args, result_dtypes=None, undo=None) -> list:
        return self.run(args, undo)


def check_segmentable(graph, backend: str):
    """Whether ``graph`` must run in segments on ``backend``."""
    return backend in HOST_BACKENDS and has_collectives(graph)
