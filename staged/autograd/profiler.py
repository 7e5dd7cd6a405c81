"""The autograd profiler: ``with profile() as prof:`` records every primitive, every
backward Node, every ``record_function`` block and every compiled call with its CPU
time; ``prof.key_averages().table()`` and ``prof.export_chrome_trace(path)`` show them.

While a profile is open a layer around ``dispatch.apply`` times each primitive (named
by the primitive: ``mul``, ``reduce_sum`` ...) and the engine times each Node
(``MulBackward0``, ``torch::autograd::AccumulateGrad``); closed, neither costs anything. With
``profile_memory=True`` an op's memory is the size of the result it allocated (frees
are not tracked); with ``with_stack=True`` each event keeps the user's call stack.

Note [profiled threads]: a profile records the thread that opened it, as torch's does
(its op callbacks are the thread's own): ops, backward Nodes, ``record_function`` blocks
and compiled calls of other threads, running meanwhile, are not its events (they were,
mixed in as if the profiled code had run them). The layer stays the process's; ``active``
is what a recording site asks.
"""

from __future__ import annotations

import functools
import math
import json
import os
import sys
import threading
import time
from types import FrameType
from typing import Any
from dataclasses import dataclass, field

import numpy as np

from .._where import STAGED_DIR
from ..autodiff.linalg import matmul_flops
from ..autodiff.primitive import REGISTRY
from ..eager import dispatch, interceptor

current = None  # the open profile, or None
_MATMUL = REGISTRY["matmul"]


def _profiler_enabled() -> bool:
    """Whether a profile is recording (torch's ``torch.autograd._profiler_enabled``)."""
    return current is not None


def active():
    """The open profile if this thread opened it, else None (Note [profiled threads])."""
    prof = current
    return prof if prof is not None and prof._owner == threading.get_ident() else None


@dataclass(eq=False)
class FunctionEvent:
    """One timed call: an op, a backward Node, a ``record_function`` block, a compiled call."""

    name: str
    cat: str  # "cpu_op", "backward", "user_annotation", "compiled"
    start_us: float
    thread: int
    input_shapes: tuple = ()
    stack: tuple = ()
    end_us: float = 0.0
    self_cpu_memory_usage: int = 0
    children: list = field(default_factory=list)
    parent: FunctionEvent | None = None
    args: dict = field(default_factory=dict)  # shown in the Chrome trace (Note [compiled calls])
    flops: int = 0  # of a matmul, with ``with_flops=True``

    @property
    def key(self) -> str:
        return self.name

    @property
    def cpu_time_total(self) -> float:
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.children)

    @property
    def cpu_memory_usage(self) -> int:
        return self.self_cpu_memory_usage + sum(c.cpu_memory_usage for c in self.children)

    count = 1


@dataclass(eq=False)
class FunctionEventAvg:
    """Events of one key summed (``key_averages``)."""

    key: str
    input_shapes: tuple = ()
    stack: tuple = ()
    count: int = 0
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    cpu_memory_usage: int = 0
    self_cpu_memory_usage: int = 0
    flops: int = 0

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / max(self.count, 1)

    def add(self, e) -> None:
        self.count += 1
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        self.cpu_memory_usage += e.cpu_memory_usage
        self.self_cpu_memory_usage += e.self_cpu_memory_usage
        self.flops += e.flops


_SORT_KEYS = (
    "cpu_time",
    "cpu_time_total",
    "self_cpu_time_total",
    "cpu_memory_usage",
    "self_cpu_memory_usage",
    "count",
)


class EventList(list):
    """A list of events with PyTorch's ``table`` and ``export_chrome_trace``."""

    def __init__(self, events=(), *, profile=None):
        super().__init__(events)
        self._profile = profile

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def table(
        self,
        sort_by=None,
        row_limit=100,
        max_name_column_width=55,
        header=None,
        top_level_events_only=False,
    ) -> str:
        """PyTorch's profiler table: one row per event (or key), sorted descending."""
        prof = self._profile
        return _table(
            self,
            sort_by,
            row_limit,
            max_name_column_width,
            header,
            top_level_events_only,
            memory=prof is not None and prof.profile_memory,
            total=prof.self_cpu_time_total if prof is not None else self.self_cpu_time_total,
        )

    def key_averages(
        self, group_by_input_shapes=False, group_by_stack_n=0, group_by_overload_name=False
    ) -> EventList:
        """The events averaged per name (and input shapes, top stack frames if asked;
        staged's ops have no overloads). torch names the first argument
        ``group_by_input_shapes`` here and ``group_by_input_shape`` on a profile."""
        groups: dict[Any, Any] = {}
        for e in self:
            key = (
                e.key,
                str(e.input_shapes) if group_by_input_shapes else None,
                tuple(e.stack[:group_by_stack_n]) if group_by_stack_n else None,
            )
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg(
                    e.key,
                    e.input_shapes if group_by_input_shapes else (),
                    tuple(e.stack[:group_by_stack_n]) if group_by_stack_n else (),
                )
            avg.add(e)
        return EventList(groups.values(), profile=self._profile)

    def export_stacks(self, path, metric: str = "self_cpu_time_total") -> None:
        """A flame graph's input: per event recorded ``with_stack=True``, its stack
        outermost first, ``;``-joined, and its ``metric`` in whole µs, as torch's."""
        if metric not in ("self_cpu_time_total", "self_cuda_time_total"):
            raise ValueError(f"metric should be self_cpu_time_total, got {metric!r}")
        with open(path, "w") as f:
            for e in self:
                if e.stack:
                    value = e.self_cpu_time_total if metric == "self_cpu_time_total" else 0
                    f.write(f"{';'.join(reversed(e.stack))} {int(value)}\n")

    def export_chrome_trace(self, path, metadata=None) -> None:
        pid = os.getpid()
        trace = [
            {
                "name": "process_name",
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "args": {"name": "python (staged)"},
            }
        ]
        for e in self:
            args: dict[str, Any] = {}
            if e.input_shapes:
                args["Input Dims"] = [list(s) for s in e.input_shapes]
            if e.stack:
                args["Call stack"] = ";".join(e.stack)
            if e.self_cpu_memory_usage:
                args["Self CPU Mem"] = e.self_cpu_memory_usage
            args.update(getattr(e, "args", ()))
            trace.append(
                {
                    "name": e.name,
                    "cat": e.cat,
                    "ph": "X",
                    "ts": e.start_us,
                    "dur": e.cpu_time_total,
                    "pid": pid,
                    "tid": e.thread,
                    "args": args,
                }
            )
        with open(path, "w") as f:
            json.dump({**(metadata or {}), "traceEvents": trace, "displayTimeUnit": "ms"}, f)


class _Stack(threading.local):
    open = None  # the innermost open event of this thread

    def __init__(self):
        self.open = None


class profile:
    """Record CPU time of ops, backward Nodes and ``record_function`` blocks.

    Example:
        >>> with staged.autograd.profiler.profile() as prof:
        ...     y = (x ** 2).sum(); y.backward()
        >>> print(prof.key_averages().table(sort_by="self_cpu_time_total"))
    """

    def __init__(
        self,
        enabled=True,
        *,
        record_shapes=False,
        profile_memory=False,
        with_stack=False,
        with_flops=False,
    ):
        self.enabled = enabled
        self.with_flops = with_flops
        # with flops, fused kernels run as their primitives, whose matmuls are counted
        self._layer_name = "profiler_flops" if with_flops else "profiler"
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.function_events = None
        self._events = []
        self._lock = threading.Lock()
        self._stack = _Stack()
        self._t0 = 0
        self._owner = None  # the thread recorded (Note [profiled threads])
        self._metadata: dict[str, Any] = {}

    def __enter__(self):
        global current
        if not self.enabled:
            return self
        if current is not None:
            raise RuntimeError("Profiler is already enabled on this thread")
        self._t0 = time.perf_counter_ns()
        self._owner = threading.get_ident()
        current = self
        dispatch.set_layer(self._layer_name, _layer)
        return self

    def __exit__(self, *exc):
        global current
        if not self.enabled:
            return False
        current = None
        dispatch.set_layer(self._layer_name, None)
        self.function_events = EventList(
            sorted(self._events, key=lambda e: e.start_us), profile=self
        )
        return False

    def _check_finished(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def events(self) -> EventList:
        self._check_finished()
        return self.function_events

    def key_averages(
        self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False
    ) -> EventList:
        self._check_finished()
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n)

    def table(
        self,
        sort_by=None,
        row_limit=100,
        max_name_column_width=55,
        header=None,
        top_level_events_only=False,
    ) -> str:
        self._check_finished()
        return self.function_events.table(
            sort_by, row_limit, max_name_column_width, header, top_level_events_only
        )

    def export_chrome_trace(self, path) -> None:
        self._check_finished()
        self.function_events.export_chrome_trace(path, self._metadata)

    def export_stacks(self, path, metric: str = "self_cpu_time_total") -> None:
        self._check_finished()
        self.function_events.export_stacks(path, metric)

    def add_metadata(self, key: str, value: str) -> None:
        """``key: value`` at the top of the Chrome traces this profile exports."""
        self._metadata[key] = value

    def add_metadata_json(self, key: str, value: str) -> None:
        """``key``: ``value`` parsed as JSON, as ``add_metadata``."""
        self._metadata[key] = json.loads(value)

    @property
    def self_cpu_time_total(self) -> float:
        self._check_finished()
        return sum(e.self_cpu_time_total for e in self.function_events)

    def __str__(self) -> str:
        return self.table() if self.function_events is not None else "<unfinished profile>"

    # -- recording ---------------------------------------------------------------------
    def _begin(self, name, cat, inputs=()) -> FunctionEvent:
        shapes = tuple(tuple(t.shape) for t in inputs) if self.record_shapes else ()
        e = FunctionEvent(
            name,
            cat,
            (time.perf_counter_ns() - self._t0) / 1000,
            threading.get_ident(),
            shapes,
            _user_stack() if self.with_stack else (),
        )
        e.parent = self._stack.open
        self._stack.open = e
        return e

    def _end(self, e: FunctionEvent) -> None:
        e.end_us = (time.perf_counter_ns() - self._t0) / 1000
        self._stack.open = e.parent
        if e.parent is not None:
            e.parent.children.append(e)
        with self._lock:
            self._events.append(e)

    def add_event(
        self,
        name: str,
        cat: str,
        start_ns: int,
        end_ns: int,
        args=None,
        parent: FunctionEvent | None = None,
    ) -> FunctionEvent:
        """Record an event that already happened, from ``time.perf_counter_ns()`` readings
        (a compiled step's device execution: Note [compiled calls]), as a child of
        ``parent`` or else of the innermost open event."""
        e = FunctionEvent(
            name, cat, (start_ns - self._t0) / 1000, threading.get_ident(), args=dict(args or {})
        )
        e.end_us = (end_ns - self._t0) / 1000
        e.parent = self._stack.open if parent is None else parent
        if e.parent is not None:
            e.parent.children.append(e)
        with self._lock:
            self._events.append(e)
        return e


def _user_stack() -> tuple:
    """``file(line): function`` of the caller's frames outside staged, innermost first."""
    out = []
    f: FrameType | None = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if not os.path.abspath(fn).startswith(STAGED_DIR):
            out.append(f"{fn}({f.f_lineno}): {f.f_code.co_name}")
        f = f.f_back
    return tuple(out)


def _layer(apply):
    def apply_profiled(prim, inputs, params):
        prof = active()
        if prof is None:
            return apply(prim, inputs, params)
        e = prof._begin(prim.name, "cpu_op", inputs)
        try:
            out = apply(prim, inputs, params)
        finally:
            prof._end(e)
        if prof.profile_memory:
            e.self_cpu_memory_usage = _nbytes(out)
        if prof.with_flops and prim is _MATMUL:
            e.flops = matmul_flops(inputs[0].shape, inputs[1].shape)
        return out

    return apply_profiled


def _nbytes(t) -> int:
    return np.dtype(t.dtype.np).itemsize * t.numel()


def run_node(run, node, *args):
    """The engine runs each Node through here while a profile is open."""
    prof = active()
    if prof is None:
        return run(node, *args)
    e = prof._begin(node.name(), "backward")
    try:
        return run(node, *args)
    finally:
        prof._end(e)


class emit_nvtx:  # noqa: N801  (torch's name)
    """CUDA's NVTX ranges for every op: entering it raises, as on torch's CPU builds."""

    def __init__(self, enabled=True, record_shapes=False) -> None:
        self.enabled = enabled

    def __enter__(self):
        if self.enabled:
            raise AssertionError("Torch not compiled with CUDA enabled")
        return self

    def __exit__(self, *exc) -> None:
        pass


class record_function:
    """Label a block (``with record_function("name"):``) or a function (as a decorator)
    in the profile; a no-op when no profile is open. Inside a function that
    ``staged.compile`` traces, the ops issued in the block are tagged with its name, and
    a profiled call of the compiled step shows the block with their count (Note
    [compiled calls])."""

    def __init__(self, name: str, args=None, cat: str = "user_annotation"):
        self.name = name
        self.args = args
        self.cat = cat
        self._event = None
        self._ranges = None

    def __enter__(self):
        prof = active()
        if prof is not None:
            self._event = (prof, prof._begin(self.name, self.cat))
        if interceptor.active is not None and self.cat == "user_annotation":  # tracing
            self._ranges = interceptor.tags.ranges
            interceptor.tags.ranges = self._ranges + (self.name,)
        return self

    def __exit__(self, *exc):
        if self._ranges is not None:
            interceptor.tags.ranges, self._ranges = self._ranges, None
        if self._event is not None:
            prof, e = self._event
            self._event = None
            prof._end(e)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args, self.cat):
                return fn(*args, **kwargs)

        return wrapper


# -- the table, laid out as PyTorch lays it out ---------------------------------------------
def _flops_unit(flops: int) -> tuple[float, str]:
    """torch's: the scale and name of the unit a count of ``flops`` shows in."""
    units = ("FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs")
    at = int(max(0.0, min(math.log10(flops) / 3, len(units) - 1.0)))
    return 10.0 ** (-3 * at), units[at]


def _format_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_memory(nbytes: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


def _percent(x, total) -> str:
    return f"{100 * x / total:.2f}%" if total else "0.00%"


def _table(
    events, sort_by, row_limit, max_name_width, header, top_level_only, memory, total
) -> str:
    if not events:
        return ""
    if sort_by is not None:
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"sort_by must be one of {', '.join(_SORT_KEYS)}; got {sort_by!r}")
        events = sorted(events, key=lambda e: getattr(e, sort_by), reverse=True)
    if top_level_only:
        events = [e for e in events if getattr(e, "parent", None) is None]
    if row_limit is not None and row_limit > 0:
        events = events[:row_limit]
    name_w = min(max(len(e.key) for e in events) + 4, max_name_width)
    shapes = any(e.input_shapes for e in events)
    stacks = any(e.stack for e in events)
    columns = [
        ("Name", name_w),
        ("Self CPU %", 12),
        ("Self CPU", 12),
        ("CPU total %", 12),
        ("CPU total", 12),
        ("CPU time avg", 12),
    ]
    if memory:
        columns += [("CPU Mem", 12), ("Self CPU Mem", 12)]
    columns.append(("# of Calls", 12))
    if shapes:
        columns.append(
            ("Input Shapes", max(len(str(list(map(list, e.input_shapes)))) for e in events) + 4)
        )
    if stacks:
        columns.append(("Source Location", max(len(s) for e in events for s in e.stack[:1]) + 4))
    counted = [e.flops for e in events if e.flops > 0]
    if counted:  # torch's column, scaled to its smallest count
        scale, unit = _flops_unit(min(counted))
        columns.append((f"Total {unit}", 12))
    line = "  ".join("-" * w for _, w in columns) + "  "

    def row(cells):
        return "  ".join(f"{c:>{w}}" for c, (_, w) in zip(cells, columns)) + "  "

    out = [header] if header else []
    out += [line, row([n for n, _ in columns]), line]
    for e in events:
        name = e.key if len(e.key) <= name_w else e.key[: name_w - 3] + "..."
        cells = [
            name,
            _percent(e.self_cpu_time_total, total),
            _format_time(e.self_cpu_time_total),
            _percent(e.cpu_time_total, total),
            _format_time(e.cpu_time_total),
            _format_time(e.cpu_time_total / e.count),
        ]
        if memory:
            cells += [_format_memory(e.cpu_memory_usage), _format_memory(e.self_cpu_memory_usage)]
        cells.append(str(e.count))
        if shapes:
            cells.append(str(list(map(list, e.input_shapes))))
        if stacks:
            cells.append(e.stack[0] if e.stack else "")
        if counted:
            cells.append(f"{e.flops * scale:8.3f}" if e.flops > 0 else "--")
        out.append(row(cells))
    out += [line, f"Self CPU time total: {_format_time(total)}", ""]
    return "\n".join(out)
