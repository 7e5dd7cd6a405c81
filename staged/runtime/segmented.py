"""Compiled steps with collectives on backends without a collective channel (Note
[segments] in ``staged/tracing/segments.py``): the step's graph is split at its
collectives, each segment lowered as a function ``segment<k>`` of one module, and
``Segmented`` stands in for that module's ``main``: it calls the segments in turn and runs
the collectives between them on the host, through the process group the eager impls use
(``GROUP[0]``, MPI). The segments are enqueued asynchronously as any step; a collective
waits for the values it reduces, starts every collective of its group before waiting
for one, and uploads the results for the next segment.
"""

from __future__ import annotations

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


def segmented_mlir(graph, boundary=None):
    """(the Split, the MLIR text of a module with one function per non-empty segment)."""
    plan = split(graph, lambda op: op.prim.name in _HOST_OPS)
    texts = [
        to_mlir(s.graph, f"segment{k}", boundary=boundary)
        for k, s in enumerate(plan.segments)
        if s.graph.ops
    ]
    return plan, "\n".join(texts)


class Segmented:
    """A loaded module of segments, invoked like a whole step's ``main``."""

    def __init__(self, graph, plan, module, narrow: dict):
        self.graph, self.plan, self.module = graph, plan, module
        self.device = module.device
        self.narrow = narrow  # {numpy dtype: the dtype it has at the module's edge}
        self.checked = False  # the first call checks that the ranks agree on each collective

    def _to_device(self, a, dtype):
        """NumPy ``a`` on the device, held as the module's edge holds ``dtype``."""
        edge = self.narrow.get(np.dtype(dtype))
        dv = self.device.upload(
            a if edge is None else to_boundary(a, edge, "a collective's result")
        )
        dv.dtype = np.dtype(dtype)
        return dv

    def _collectives(self, ops, env) -> None:
        group = GROUP[0]
        start = getattr(group, "start", None)
        started = []
        for op in ops:
            x = np.asarray(env[op.inputs[0].id])  # waits for the segment that made it
            if start is None:  # this process alone (no process group)
                started.append((op, None, op.prim.impl(x, **op.params)))
            else:
                started.append((op, start(op.prim.name, x, op.params, not self.checked), None))
        for op, request, out in started:
            out = request.wait() if request is not None else out
            env[op.out.id] = self._to_device(
                np.asarray(out, op.out.aval.dtype.np), op.out.aval.dtype.np
            )

    def invoke(self, fn_name, args, result_dtypes=None, undo=None) -> list:
        env = {i.value.id: a for i, a in zip(self.graph.inputs, args)}
        env.update((v.id, a) for v, a in self.graph.consts)
        plan = self.plan
        last = max((k for k, s in enumerate(plan.segments) if s.graph.ops), default=-1)
        for k, seg in enumerate(plan.segments):
            if seg.graph.ops:
                res = self.module.invoke(
                    f"segment{k}",
                    [env[v.id] for v in seg.inputs],
                    [v.aval.dtype.np for v in seg.outputs],
                    undo if k == last else None,
                )
                env.update((v.id, r) for v, r in zip(seg.outputs, res))
            if plan.host[k]:
                if profiler.current is None:
                    self._collectives(plan.host[k], env)
                else:  # Note [compiled calls]: waits for the segment, then communicates
                    with profiler.record_function("host collectives", cat="compiled_phase"):
                        self._collectives(plan.host[k], env)
        self.checked = True
        out = []
        for o, d in zip(self.graph.outputs, result_dtypes):
            r = env[o.value.id]
            out.append(
                r
                if isinstance(r, DeviceValue) and r.device is self.device
                else self._to_device(np.asarray(r), d)
            )
        return out


def check_segmentable(graph, backend: str):
    """Whether ``graph`` must run in segments on ``backend``."""
    return backend in HOST_BACKENDS and has_collectives(graph)
