"""``staged.compile(fn, mode="background")``: calls run at once while IREE compiles.

Note [background compiles]: a blocking compile makes the first call wait for trace, lower,
IREE compile and load (seconds). In background mode the first call runs ``fn`` itself,
untraced (Note [untraced first call] in compiled.py); the second traces ``fn`` as
always (hooks, grad modes and Python control flow are resolved then, as for a compiled
step), returns after running the *captured graph* on NumPy (``Interpreter``: each
primitive's eager impl, in graph order), and then hands lowering, compiling and loading
to one worker thread (lowering is Python: started during the traced call, it would take
the GIL from it). Later calls run the graph on NumPy until the module is loaded; the
first call after that runs it. So every call, eager or compiled, runs the same graph through the same
binding (``CompiledGraph._run``: arguments, state, live inputs, host draws in; new state,
``.grad`` writes, optimizer dicts out): what a call reads is what the previous call left,
whichever ran it, and nothing is applied twice or lost. Eager calls leave NumPy payloads,
which the first compiled call uploads; hooks' Python effects happen once per trace (and
at the untraced call), as for a compiled step. The hand-over happens at the start of a
call, under ``state_lock``: between two calls.

IREE runs as an ``iree-compile`` process (``compiler.compile_subprocess``), not through
the in-process API: a subprocess holds no GIL, does not take over the process's stderr
for seconds (the in-process compile redirects descriptor 2 to collect diagnostics, which
would swallow the user's warnings and progress bars), and can be killed at exit, where a
thread inside LLVM cannot. The compiled module is cached on disk as for blocking
compiles (same key), so a cached module is loaded at once.

Calls run eagerly where the interpreter can take them: a trace that creates state (an
optimizer's first step after its state was reset, ``one_shot``) serves one call and is
not compiled at all; with ``dynamic=True`` the interpreter runs the graph traced at the
second call's batch size, and a call at another size waits for the compile. A compile
that fails (an op IREE rejects, a module that does not load) leaves the trace running
eagerly: one warning per
compiled function, the reason in ``explain()``; should a ``dynamic=True`` call then come
at a batch size the interpreter lacks, ``fn`` itself runs eagerly. Steps with
collectives compile blocking (each rank must run its collectives the same way).
"""

from __future__ import annotations

import atexit
import operator
import os
import queue
import threading
import time
import warnings
from typing import Any, cast

import numpy as np

from .._locks import fork_safe
from ..tracing.pytree import unflatten
from .checks import StepCheck
from .compiler import compile_subprocess, kill_subprocesses
from .logs import Phases, compile_log

_ID = operator.attrgetter("id")


class Interpreter:
    """Stands in for a loaded module while the compile runs: ``invoke`` evaluates the
    graph with each primitive's NumPy impl, dropping values after their last use. Built
    once per trace: values live in a list indexed by their ids (below ``graph._next``)."""

    def __init__(self, graph, checks=(), check_output: int = -1, unchecked=None):
        """``unchecked``: ``Captured.unchecked``, the outputs' values before the checks'
        selects, returned instead (a bad check raises before the call writes anything, so
        the selects would only copy); ops no output needs are not run."""
        unchecked = unchecked or {}
        self.outputs = [unchecked.get(k, o.value).id for k, o in enumerate(graph.outputs)]
        self.dtypes = [i.value.aval.dtype.np for i in graph.inputs]
        self.inputs = [i.value.id for i in graph.inputs]
        self.env: list = [None] * graph._next  # the constants in place, copied per call
        for v, a in graph.consts:
            self.env[v.id] = a
        self.const_roots = {id(_root(a)) for _, a in graph.consts}
        # a report past the graph's outputs is a module's own (Note [int64 held in int32]):
        # NumPy computes int64 as it is
        self.rows = list(checks) if check_output < len(graph.outputs) else []
        self.check_output = check_output
        needed = set(self.outputs)  # by the ops after this one (walking back) or outputs
        self.steps = []  # (impl, input ids, params, output id, ids last used here)
        for op in reversed(graph.ops):
            if op.out.id in needed:
                ins = list(map(_ID, op.inputs))
                drops = [] if needed.issuperset(ins) else [i for i in ins if i not in needed]
                needed.update(ins)
                self.steps.append((op.prim.impl, ins, op.params, op.out.id, drops))
        self.steps.reverse()

    def invoke(self, fn_name, args, result_dtypes=None, undo=None) -> list:
        env = self.env.copy()
        roots = set(self.const_roots)  # outputs must not share memory with these
        for vid, a, dtype in zip(self.inputs, args, self.dtypes):
            a = np.asarray(a)  # a DeviceValue is waited for and read back
            env[vid] = a if a.dtype == dtype else a.astype(dtype)  # BOUNDARY
            roots.add(id(_root(a)))
        ndarray, asarray = np.ndarray, np.asarray
        with np.errstate(all="ignore"):  # as eager dispatch (Note [NumPy warnings])
            for impl, ins, params, out, drops in self.steps:
                r = impl(*[env[i] for i in ins], **params)
                env[out] = r if type(r) is ndarray else asarray(r)
                for i in drops:
                    env[i] = None
        res = []
        for vid in self.outputs:  # each result its own writable array, as a module's
            a = env[vid]
            r = id(_root(a))
            if r in roots or not a.flags.writeable:
                a = a.copy()
            else:
                roots.add(r)
            res.append(a)
        if self.rows:  # Note [index checks]: raised now, before the call writes anything
            StepCheck(res[self.check_output], self.rows)()
        return res


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


class Status:
    """What explain() says of a background compile: ``state`` (``compiling``,
    ``compiled``, ``failed``, ``eager`` for a one-shot trace, ``deferred`` for one compiled
    at its second call), the failure's ``reason``, the calls that ran each way, and the
    compile's wall time."""

    reason: str | None
    seconds: float | None

    def __init__(self, state: str, where: str = "in the background"):
        self.state, self.reason, self.seconds = state, None, None
        self.where = where  # how the compile ran: "in the background" or "at its second call"
        self.ran = {"eager": 0, "compiled": 0, "fn": 0}

    def __str__(self) -> str:
        eager = self.ran["eager"] + self.ran["fn"]
        ran = f"{eager} call{'s' if eager != 1 else ''} ran eagerly"
        if self.state == "eager":
            return f"not compiled (a one-shot trace serves one call): {ran}"
        if self.state == "deferred":
            return f"not compiled yet (it gave .grad to tensors that had none): {ran}"
        if self.state == "compiling":
            return f"compiling {self.where}; {ran} so far"
        if self.state == "compiled":
            return (
                f"compiled {self.where} in {self.seconds:.2f} s, while {ran}; "
                f"{self.ran['compiled']} ran compiled"
            )
        which = "background compile" if self.where == "in the background" else "compile"
        return f"the {which} failed, so the step runs eagerly ({ran}): {self.reason}"


class Compiling:
    """The background compile of one ``CompiledGraph`` (Note [background compiles]):
    its interpreter stands in for the module until the worker has loaded it. ``graph``:
    the graph to interpret (the trace at the first call's batch size for a dynamic
    step; default the entry's), taking calls whose ``batched`` leaves have dim 0
    ``batch``; ``fallback(leaves)`` runs the function eagerly; ``calls``: the
    ``CallLog`` of the compiled function (whose failure warns once)."""

    interpreter: Interpreter | None
    module: Any
    mlir: Any
    error: BaseException | None
    t0: float | None

    def __init__(
        self,
        entry,
        graph=None,
        batch=None,
        batched=(),
        fallback=None,
        calls=None,
        name: str = "the step",
        deferred: bool = False,
        blocking: bool = False,
    ):
        """``deferred``: compile only when the trace serves a second call (Note [deferred
        compiles] in compiled.py); ``blocking``: a call waits for the compile to finish."""
        c = entry.captured
        self.interpreter = Interpreter(
            c.graph if graph is None else graph, c.checks, c.check_output, c.unchecked
        )
        self.batch, self.batched = batch, tuple(batched)
        self.fallback, self.calls, self.name = fallback, calls, name
        self.status = Status(
            "eager" if c.one_shot else "deferred" if deferred else "compiling",
            "at its second call" if deferred and blocking else "in the background",
        )
        self.blocking = blocking
        self.where = "eager"
        self.done = threading.Event()
        self.module = self.mlir = self.error = None
        self.checks, entry._checks = entry._checks, None  # raised by the interpreter
        entry.module = self.interpreter
        self.t0 = None  # when the compile was submitted

    def start(self, entry) -> None:
        """Submit the compile (once): called when the call that traced has returned, so
        that lowering (Python, on the worker) does not hold the GIL from that call. A
        one-shot trace serves one call: it is not worth compiling."""
        if self.t0 is None and self.status.state == "compiling":
            self.t0 = time.perf_counter()
            submit(self, entry)

    def compile(self, entry) -> None:
        """Lower, compile and load (on the worker thread)."""
        p = Phases(f"compiling {self.name} in the background")  # not entered: no status line
        try:
            self.module, self.mlir = entry.build(p, compile_subprocess)
        except BaseException as err:  # noqa: BLE001 (reported at the next call, which
            self.error = err  # waits for done: whatever ended the compile must set it)
        entry.times.update(p.times)
        self.status.seconds = time.perf_counter() - cast(float, self.t0)  # set by start()
        compile_log.info(
            "background compile of %s %s in %.2f s: %s",
            self.name,
            "failed" if self.error else "done",
            self.status.seconds,
            p.summary(),
        )
        self.done.set()

    def ready(self, entry, leaves) -> bool:
        """Called under ``state_lock`` at the start of each call: switch ``entry`` to its
        module if it has been loaded (or to eager for good if the compile failed); then
        True where the module or the interpreter runs this call, False where only
        ``fallback`` can (a dynamic batch size not traced, once the compile failed)."""
        st = self.status
        if st.state == "compiled":
            st.ran["compiled"] += 1
            return True
        fits = self._fits(leaves)
        if st.state == "deferred" and st.ran["eager"]:  # a second call: compile now
            st.state = "compiling"
        if st.state == "compiling" and (self.blocking or self.done.is_set() or not fits):
            self.start(entry)
            self.done.wait()  # at once when done; else a batch only the module can run
            self._finish(entry)
        self.where = "compiled" if st.state == "compiled" else "eager" if fits else "fn"
        st.ran[self.where] += 1
        return self.where != "fn"

    def _fits(self, leaves) -> bool:
        return all(leaves[i]._payload.shape[0] == self.batch for i in self.batched)

    def _finish(self, entry) -> None:
        st = self.status
        if self.error is None:
            entry.module, entry.mlir, entry._checks = self.module, self.mlir, self.checks
            st.state, self.interpreter = "compiled", None
            return
        err = self.error
        st.state, st.reason = "failed", f"{type(err).__name__}: {err}"
        if self.calls is not None and not self.calls.warned:
            self.calls.warned = True
            warnings.warn(
                f"staged.compile: the background compile of {self.name} failed; "
                f"it keeps running eagerly (explain() has the reason). "
                f"{st.reason}",
                RuntimeWarning,
                stacklevel=6,
            )

    @property
    def label(self) -> str:
        """Where the last call ran, for ``CallLog``."""
        return {
            "compiled": "compiled",
            "fn": "eager: fn itself (a batch size the trace lacks; its compile failed)",
        }.get(self.where) or {
            "compiling": "eager while compiling in the background",
            "eager": "eager: a one-shot trace, not compiled",
            "deferred": "eager: compiled if the trace serves another call",
            "failed": "eager: its background compile failed",
        }[self.status.state]


def call_eagerly(fn, tree, leaves):
    """``fn`` on the flattened call ``leaves`` (``Compiling.fallback``)."""
    a, kw = unflatten(tree, leaves)
    return fn(*a, **kw)


class CallLog:
    """Which calls of a compiled function ran where: runs of consecutive calls with the
    same place, ``[where, trace number, first call, last call]``, newest last."""

    def __init__(self):
        self.count = 0
        self.runs: list = []
        self.warned = False  # a background compile's failure has been warned about

    def note(self, where: str, trace=None) -> None:
        self.count += 1
        last = self.runs[-1] if self.runs else None
        if last is not None and last[0] == where and last[1] == trace:
            last[3] = self.count
        else:
            self.runs.append([where, trace, self.count, self.count])
            del self.runs[:-20]

    def lines(self, n: int = 6) -> list:
        if not self.runs:
            return []
        shown = self.runs[-n:]
        out = [f"calls: {self.count} (which ran where, newest last):"]
        if len(self.runs) > len(shown):
            out.append(f"  ... {shown[0][2] - 1} earlier")
        for where, trace, first, last in shown:
            calls = f"call {first}" if first == last else f"calls {first}-{last}"
            out.append(f"  {calls}: {where}" + (f" (trace {trace})" if trace else ""))
        return out


# One worker thread compiles, oldest first (a second compile at once would only share the
# same cores): background modules and a dynamic step's static ones (Note [specialized batch
# sizes]); it is made again after a fork, which does not copy threads. A forked child starts
# with no jobs: those queued are its parent's (its worker compiled them before its own).
_jobs: queue.SimpleQueue = queue.SimpleQueue()
_worker: list[threading.Thread | None] = [None]
_worker_lock = fork_safe()


def _after_fork_in_child() -> None:
    global _jobs
    _jobs, _worker[0] = queue.SimpleQueue(), None


os.register_at_fork(after_in_child=_after_fork_in_child)


def submit(job, entry) -> None:
    """Have the worker call ``job.compile(entry)`` (after the jobs submitted before)."""
    with _worker_lock:
        t = _worker[0]
        if t is None or not t.is_alive():
            t = _worker[0] = threading.Thread(target=_work, name="staged-compile", daemon=True)
            t.start()
    _jobs.put((job, entry))


def drain(timeout: float | None = None) -> bool:
    """Wait until the worker has finished the compiles submitted so far (background
    modules, Note [specialized batch sizes]); False if it has not after ``timeout`` s."""
    done = threading.Event()
    submit(_Mark(done), None)
    return done.wait(timeout)


class _Mark:
    """A job that marks its place in the queue."""

    def __init__(self, done: threading.Event):
        self.done = done

    def compile(self, entry) -> None:
        self.done.set()


def _work() -> None:
    while True:
        item = _jobs.get()
        if item is None or _closing[0]:
            return
        job, entry = item
        job.compile(entry)
        del job, entry, item  # the entry may be dropped by its owner meanwhile


_closing = [False]


@atexit.register
def _close() -> None:
    """At exit, stop compiling (nobody will run the modules) and let the worker finish,
    so that it holds no device or module while IREE's runtime is torn down."""
    _closing[0] = True
    t = _worker[0]
    if t is None or not t.is_alive():
        return
    _jobs.put(None)
    kill_subprocesses()
    t.join(timeout=5)
    kill_subprocesses()  # one started meanwhile
