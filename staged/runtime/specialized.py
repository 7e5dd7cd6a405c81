"""Static modules for the batch sizes a ``dynamic=True`` step is called at.

Note [specialized batch sizes]: a dynamic step's module serves every batch size, but its
code reads the sizes at run time (loops and buffers of unknown extent, no static tiling):
on a quiet 2-core machine it cost 1.65x a static step's time (MLP at batch 32), 1.20x
(CNN), 1.64x (transformer), all of it in the module's own run. So a batch size the
dynamic module has served ``SPECIALIZE_AT`` times is compiled again with the size put in:
the same generalized graph (``dynamic.specialize``, no trace). A blocking step compiles it
at that call, which then runs it, as a re-trace would be compiled: which call first runs
the static module does not depend on timing, so a run's results are the same every time
(a static module may round differently from the dynamic one: another tiling of a
reduction). With ``mode="background"`` it is compiled on the background worker (Note
[background compiles]: IREE in a subprocess, without the GIL), and calls at that size run
it from the first call after it is loaded.
Both modules take the same inputs (arguments, state, live inputs, host draws) and return
the same outputs in the same order, so ``CompiledGraph._run`` binds them alike: the state
is in the tensors, on the device, whichever module wrote it last, and both modules queue
their calls on one timeline, so a call on the other module runs after the previous
call's, without waiting for it (Note [one timeline] in ``device.py``). The switch is made
at the start of a call, under ``state_lock``: nothing is lost or applied twice.

The second call at a size, not the first, starts its compile: a size called once (an
epoch's last, partial batch) costs no compile, and a loop at one size waits one call more.
At most ``MAX_SPECIALIZED`` sizes per dynamic trace are compiled, the first ones to come
back; they are kept, not evicted, since a step whose batch size changes at every call
would otherwise compile without end; other sizes run the dynamic module. Size 0 runs
the dynamic module (there is nothing to speed up). A compile that fails leaves its size
on the dynamic module, with the reason in ``explain()``. The static module goes through
the compile cache as any: with a warm cache it is loaded, not compiled.
``staged.compile(..., specialize=False)`` keeps every call on the dynamic module.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from ..autodiff.avals import Sym
from ..tracing.dynamic import specialize
from .background import submit
from .compiler import compile_subprocess
from .logs import Phases, compile_log

SPECIALIZE_AT = 2  # calls at a batch size before its static module is compiled
MAX_SPECIALIZED = 4  # static modules per dynamic trace


def specialized(entry, name: str, background: bool) -> Specialized | None:
    """The ``Specialized`` of a dynamic ``CompiledGraph`` (its static modules compiled on
    the background worker or, blocking, at the call that asks); None where no argument
    has a dynamic size."""
    c, pos = entry.captured, 0
    for i, w in c.arg_wrappers:
        for axis, s in enumerate(c.graph.inputs[pos].value.aval.shape):
            if isinstance(s, Sym):
                return Specialized(name, (i, axis, s.k), background)
        pos += 1 if w._grad is None else 2
    return None


class Specialized:
    """The static modules of one dynamic ``CompiledGraph``, by batch size."""

    def __init__(self, name: str, at: tuple, background: bool):
        self.name = name
        self.background = background
        self.at = at  # (leaf index, axis, k): the leaf's size on that axis is k * batch
        self.seen: Counter = Counter()  # calls per size not (yet) specialized
        self.jobs: dict[int, _Job] = {}  # every size compiled or compiling, in order
        self.dynamic_calls = 0

    def module(self, entry, leaves):
        """The module that runs this call: its size's static module where loaded, else
        the dynamic one (starting the size's compile at its ``SPECIALIZE_AT``-th call)."""
        if not _ready(entry):  # the graph runs on NumPy meanwhile
            return entry.module
        i, axis, k = self.at
        n = leaves[i]._payload.shape[axis] // k
        job = self.jobs.get(n)
        if job is None and n and len(self.jobs) < MAX_SPECIALIZED:
            job = self._count(entry, n)
        if job is not None and job.done.is_set() and job.error is None:
            job.calls += 1
            return job.module
        self.dynamic_calls += 1
        return entry.module

    def _count(self, entry, n: int) -> _Job | None:
        """A call at size ``n``: its ``SPECIALIZE_AT``-th compiles its static module
        (blocking) or starts that compile (background): the job."""
        self.seen[n] += 1
        if self.seen[n] < SPECIALIZE_AT:
            return None
        del self.seen[n]
        job = self.jobs[n] = _Job(n, self.name, _loaded(entry.module), self.background)
        if len(self.jobs) == MAX_SPECIALIZED:
            self.seen.clear()  # no other size will be
        if self.background:
            submit(job, entry)
        else:
            job.compile(entry)
        return job

    def lines(self) -> list:
        """What ``explain()`` says of them."""
        head = (
            f"static modules for batch sizes called {SPECIALIZE_AT} times (at most "
            f"{MAX_SPECIALIZED}; the dynamic module ran {self.dynamic_calls} calls)"
        )
        if not self.jobs:
            return [f"{head}: none yet"]
        return [f"{head}:", *(f"  batch {n}: {job}" for n, job in self.jobs.items())]


class _Job:
    """The background compile of one batch size's static module."""

    module: Any
    mlir: str | None
    error: BaseException | None

    def __init__(self, n: int, name: str, queue, background: bool):
        self.n, self.name = n, name
        self.builder = compile_subprocess  # Note [compiler process]
        self.queue = queue  # the dynamic module, whose timeline it shares (Note [one timeline])
        self.done = threading.Event()
        self.module = self.mlir = self.error = None
        self.stats: dict = {}  # compile_mlir's: "cache" hit or miss, "key"
        self.seconds = 0.0
        self.calls = 0

    def compile(self, entry) -> None:
        """Specialize, lower, compile and load (on the worker thread, or the caller's)."""
        t0 = time.perf_counter()
        p = Phases(f"compiling {self.name} for batch size {self.n}")  # not entered: no line
        try:
            graph = specialize(entry.captured.graph, {"batch": self.n})
            self.module, self.mlir = entry.build(p, self.builder, graph, self.stats)
            _loaded(self.module).share_queue(self.queue)
        except BaseException as err:  # noqa: BLE001 (the dynamic module keeps serving;
            self.error = err  # whatever ended the compile must set done)
        self.seconds = time.perf_counter() - t0
        compile_log.info(
            "static module of %s for batch size %d %s in %.2f s: %s",
            self.name,
            self.n,
            f"failed ({type(self.error).__name__}: {self.error})" if self.error else "loaded",
            self.seconds,
            p.summary(),
        )
        self.done.set()

    def __str__(self) -> str:
        if not self.done.is_set():
            return "compiling in the background"
        if self.error is not None:
            return (
                f"its compile failed, so it runs the dynamic module: "
                f"{type(self.error).__name__}: {self.error}"
            )
        how = "loaded from the cache" if self.stats.get("cache") == "hit" else "compiled"
        calls = f"{self.calls} call{'s' if self.calls != 1 else ''}"
        return f"{how} in {self.seconds:.2f} s; {calls} ran it"


def _loaded(module):
    """The loaded ``device.Module`` of a step's module (a ``Segmented`` holds one)."""
    return getattr(module, "module", module)


def _ready(entry) -> bool:
    """Whether the dynamic module itself is loaded (Note [background compiles])."""
    bg = entry.background
    return bg is None or bg.status.state == "compiled"
