"""capture(fn, *args): run ``fn`` on symbolic tensors through the eager engine and record
one graph: forward, backward, hooks and optimizer updates.

Note [state]: a tensor that existed before the trace began and is read by an op (a
parameter, a ``.grad``, an optimizer buffer) becomes a *state* input: its payload is
swapped for a symbolic value while tracing, and restored afterwards. Writes to such
tensors (in-place ops, ``.grad`` assignments) are functionalized: the graph returns
their new values and the caller writes them back after each call. Tensors created
during the trace with concrete data are constants. Python dicts the trace may write
(an optimizer's ``state``, declared with ``Tracer.preserve``) are restored too, and a
compiled call writes what the trace left in them once its step is enqueued; so a trace
that raises, or whose step fails to lower, compile or run, leaves every tensor and
optimizer state exactly as before it. (A tensor the body made and stored elsewhere,
``self.cache = t``, is an escape (Note [escapes]): a failed trace leaves it symbolic.)

Note [one trace at a time]: the interceptor and the frozen heap (Note [escapes]) are
process-wide and a trace swaps the payloads of state tensors, so traces hold
``state_lock``, as compiled calls do while they read and replace state payloads: a
compiled call on another thread never sees a parameter's symbolic payload, nor loses an
update, whether it runs the same step or another one sharing the parameters. Eager code
takes no lock: eager code on one thread and compiled calls or traces on another that
share state need a lock of the caller's around both, as two eager threads would.

Note [views of state]: a view made before the trace (``w.t()`` that Linear saved for
the backward of an eager forward, ``p[0]``) of a parameter, or of a tensor the trace has
already made state, is read from its base's state value by its view steps, not as a
state input of its own: the two inputs would share memory, and a read of the view after
the step writes the base (an optimizer update) would see the value from before it, where
eager sees the write (the runtime refuses such inputs: Note [shared inputs] in
staged/runtime/shared_inputs.py). Read through the base, the view follows the base's
writes as a view made in the trace does (``refresh``). A view of any other tensor (the
training split ``X[:n]`` of a data set) stays an input of its own: reading the whole
base would upload all of it at each call.

Note [grads by owner]: a ``.grad`` the trace reads as state (a backward accumulating
into it) is the one its tensor holds at each call, not the object it held at the trace:
``opt.zero_grad()`` (set_to_none) drops it and the next eager backward makes a new one,
which the step, accumulating again, must read and write. So its ``Watched`` records the
tensor whose ``.grad`` it is (``owner``); a compiled call binds ``owner.grad`` at each
call, and its guard asks that it be set, of the traced shape and dtype, not that it be
the same object (``staged/runtime/compiled.py``).

Note [live inputs]: a Python number the traced code reads (an optimizer's ``lr``) would
be baked into the graph as a constant, silently stale once the caller changes it. Code
that knows a number varies between calls keeps it in a 0-d tensor and registers it with
``Tracer.live(t, get)``: ``t`` becomes a state input (even when made during the trace)
and the runtime sets it to ``get()`` before every call, so the change takes effect with
no re-trace. Where the number steers Python control flow (``if weight_decay:``) that
code guards the branch instead (``Tracer.guard``).

Note [data reads]: Python may read the data of a tensor from before the trace that no op
of the trace read (``n = counter.item()``, ``a, b = scale.tolist()``, ``print(buf)``):
``Tensor._host`` tells the tracer (``Tracer.data_read``). The number read is a constant
of the graph, right only while that tensor holds the same data, so the trace is guarded
on its version counter and its payload (in-place writes and a compiled call's write-back
bump the one, ``t.data = ...`` replaces the other). A step that writes the tensor itself
fails that guard at every call: its guard counts as a value the step writes (Note
[counters run eagerly] in runtime/compiled.py). A tensor an op already read is symbolic:
its ``.item()`` is a traced scalar (Note [traced items] in tracing/scalars.py), its other
reads raise ``CaptureError``.

Note [traced layouts]: eager's arrays have strides, and a draw that fills a tensor (a
dropout mask, ``bernoulli_``, ``rand_like``) fills it in its memory order, as torch's
does: a transposed view (``MultiheadAttention(batch_first=True)``'s output, which
``TransformerEncoderLayer`` drops out) gets its numbers in its base's order. A traced
value has no strides, so the tracer keeps eager's order of its dims in memory where it
is not row-major (``Tracer.orders``): a permutation permutes its operand's; an
elementwise op (NumPy's order "K") keeps its operands' where they agree, row-major where
they differ, as NumPy does; every other op makes a row-major result. ``contiguous()`` and a
first ``.grad`` made of a view, row-major copies in eager, are two reshapes of the value
(``shape.row_major``), which IREE folds away. ``Symbolic.order``
gives it to ``stride()``, ``is_contiguous()`` and the draws (``fills.like``). The step's
arguments and state are taken as row-major (a compiled call does not check that a
transposed one comes in).

Note [hooks' reads]: a hook the trace runs (a Module's forward or backward hook, a global
one, a state tensor's ``register_hook`` or post-accumulate hook) is the user's code as much
as the step's body, but the step's code does not name it: the walk of Note [source
guards] (staged/tracing/guards.py) never reached what it reads, so a hook clamping to
``cfg["clip"]`` or scaling by ``self.scale`` of a hook object kept the value it had at
the trace once the caller changed it (eager code reads the new one). Each such hook is
noted before it runs (``Tracer.hook``: ``Module._guard``, ``_watch``) and walked after
the trace as the step is (``source_guards(hook, ...)``), so what it reads re-traces when
it changes, and what it changes while traced warns as a side effect. A Module's hook is
called with the Module as its first argument (``m.calls += 1``, ``gi[0] * m.scale``): the
walk takes that parameter as a root (``_module_argument``), so the Module's plain values
the hook reads are guarded and those it writes replayed, as the step's own ``self.counter``
(Note [attribute writes] in tracing/guards.py); a hook on several Modules has each of
them walked so, its code once.

Note [constant data]: an op on constants only is folded where its result is no larger
than an operand (``_foldable``); a larger one (``cat`` of two ``arange``s, an outer
``==``) is a graph op even so. Where code then needs its data (SimCLR's mask
``labels[None] == labels[:, None]`` indexing the similarity matrix, ``bool()``,
``.item()``), ``Tracer.data_of`` computes it from the graph's constants with the ops'
NumPy impls, as eager code would, instead of raising: no argument, state or draw reaches
it, so every call has the same data. A constant of a dynamic size (``SymConst``) is not
data of the trace: that still raises.
"""

from __future__ import annotations

import functools
import gc
import importlib
import inspect
import itertools
import operator
import threading
import types
import weakref
from typing import Any
from dataclasses import dataclass, field

import numpy as np

from .._locks import fork_safe
from .. import autodiff as ad
from .. import dtypes as dt
from ..autodiff import Aval
from .._native import is_function
from .._where import warn_user
from ..autograd import anomaly
from ..autograd.hooks import fresh_id
from ..autograd.saved import default_hooks
from ..eager import interceptor
from ..eager.grad_mode import _state
from ..eager.ops._operands import expand_to, scalar_tensor
from ..eager.tensor import Tensor, _serial
from ..eager.views import refresh as refresh_view
from ..eager.views import refresh_stale
from .draws import Program, state_bytes
from .guards import (
    MISSING,
    Attributes,
    Guard,
    Position,
    as_entered,
    at_entry,
    entry_guard,
    entry_values,
    holds_tensor,
    replay,
    source_guards,
    store_dicts,
    undo_writes,
)
from .impure import report_draw, warn_impure_calls
from .ir import Graph, Output
from .names import output_names, state_names
from .pytree import flatten, unflatten
from .returned import consumed, recipe
from .scalars import TracedScalar, reads, relabel
from .symbolic import CaptureError, Symbolic, user_location

state_lock = fork_safe(threading.RLock())  # Note [one trace at a time]


@dataclass(eq=False)
class Watched:
    """A pre-trace tensor the trace read or wrote, with what to restore afterwards."""

    tensor: Tensor
    payload: object  # the data before the trace; dropped once restored
    aval: Aval  # its shape and dtype, kept for the re-trace guards
    meta: tuple  # (requires_grad, grad_fn, output_nr)
    grad: Tensor | None  # the .grad object before the trace
    value: Any = None  # the state input Value, if its data was read
    name: str = ""
    owner: Tensor | None = None  # a .grad read as state: the tensor whose .grad it is,
    # through which calls bind it (Note [grads by owner])


@dataclass(eq=False)
class GradWrite:
    """After each call, ``tensor.grad`` becomes: None, an existing tensor, or an output."""

    tensor: Tensor
    kind: str  # "none", "object" or "output"
    obj: object = None
    output: int = -1


@dataclass(eq=False)
class Captured:
    """A traced function: its graph plus how call arguments and results map onto it."""

    graph: Graph
    in_tree: object
    out_tree: object
    out_leaves: list  # per output leaf: ("value", output index) or ("py", obj)
    state: list  # [Watched] whose data is a state input, in input order
    state_updates: list  # [(Watched, output index)]
    grad_writes: list  # [GradWrite]
    arg_wrappers: list = field(default_factory=list)  # [(leaf index, Tensor)]; a wrapper
    # with a .grad at trace time takes the argument's .grad as the next input
    escaped: list = field(default_factory=list)  # [(Tensor, output index)]
    # the output indices of those that required grad in the trace: a first call run as its
    # graph on the call's tensors gives them that graph (Note [first eager call])
    escaped_grad: set = field(default_factory=set)
    # where there are grad_results, or escaped_grad in a body that ran no backward: per op
    # traced in grad mode (by output Value id), whether each input required grad; None
    # where the trace's autograd graph holds more than its ops (Note [first eager call])
    op_grads: dict | None = None
    # arguments the body wrote in place: [(leaf index, output index)], written back per call
    arg_updates: list = field(default_factory=list)
    # those of them whose shape or layout an in-place view op changed (``unsqueeze_()``,
    # ``t_()``): [leaf index]; a call whose index check fails leaves them as they came in
    # (Note [index checks])
    arg_reshaped: list = field(default_factory=list)
    # their view ops {leaf index: [(name, args)]}, which a call repeats on the caller's
    # tensor before writing its new data, where that tensor's memory is seen elsewhere
    # (a view, a base): torch writes a transposed view's data at its base's own positions
    arg_views: dict = field(default_factory=dict)
    dict_writes: list = field(default_factory=list)  # [(dict, its items after the trace)]
    guards: list = field(default_factory=list)  # [Guard]
    live: list = field(default_factory=list)  # [(Tensor, get)]: state set to get() per call
    constants: dict = field(default_factory=dict)  # argument name -> its non-tensor value
    checks: list = field(default_factory=list)  # [(error, message, lo, hi)], one a row of
    check_output: int = -1  # this output (Note [index checks])
    # output index -> its value before the checks' select: what a call that raises at a
    # bad check never returns, so background mode's interpreter skips the selects
    unchecked: dict = field(default_factory=dict)
    rng: Program | None = None  # the host's draws per call (Note [host draws])
    # results that require grad from a body that ran no backward (Note [autograd boundary])
    grad_results: list = field(default_factory=list)
    # from a body that ran one: out-leaf position -> whether the body's backward freed its
    # graph (Note [graphless results] in runtime/graphless.py)
    graphless: dict = field(default_factory=dict)
    # arguments whose requires_grad the body changed: [(leaf index, requires_grad)]
    arg_flags: list = field(default_factory=list)
    # out-leaf position -> (kind, root, ops): a tensor from before the call, or its alias,
    # returned as itself (Note [returned state] in tracing/returned.py)
    returned: dict = field(default_factory=dict)

    # hooks the body registered on state and left there: [(Watched, hook)] (Note [hooks the
    # body leaves])
    hooks_left: list = field(default_factory=list)
    # iterators the body advanced: [Position] (Note [iterators the body advances])
    advanced: list = field(default_factory=list)
    # the functions marked torch.compiler.disable it called, made after each call's graph:
    # [(fn, in_tree, leaves)] (Note [disabled calls] in tracing/scalars.py)
    host_calls: list = field(default_factory=list)
    # Module attributes the body set, set again after every call: [(module, name, value)]
    # (Note [attribute writes] in tracing/guards.py)
    attr_writes: list = field(default_factory=list)
    # arguments whose data Python read: {leaf index: "name (read at file:line)"}; a call
    # reuses the trace only with the same values there (Note [argument data])
    valued: dict = field(default_factory=dict)
    # the names of the values it writes so, as their guards name them (``run``,
    # ``self.steps``): Note [counters run eagerly] in runtime/compiled.py
    wrote: frozenset = frozenset()
    # [(module, name, value at entry)] of the tensor attributes requiring grad that a body
    # with no backward set: such a call runs eagerly (Note [autograd boundary]), from these
    attr_before: list = field(default_factory=list)
    # Module attributes the body set to a tensor it made, set to a result after every
    # call: [(module, name, output index, out-leaf position or -1, freed)] (Note [tensor
    # attributes])
    attr_outputs: list = field(default_factory=list)
    # the outputs of attributes that held a tensor the trace read (``self.ema = 0.9 *
    # self.ema + x``): where a check fails they keep its value, as state does, readable
    attrs_kept: set = field(default_factory=set)

    @property
    def one_shot(self) -> bool:
        """The body stored new tensors somewhere (an optimizer creating its buffers), left
        a hook on state or advanced an iterator: replaying the graph would not redo that,
        so the trace serves only its own call."""
        return bool(self.escaped or self.hooks_left or self.advanced)

    @property
    def gives_grads(self) -> bool:
        """The body gave a ``.grad`` to state whose ``.grad`` was None (a backward at a
        first call, or after ``zero_grad()``): where the tensors keep it, the next call
        traces again (their ``.grad`` is then state), and this trace served one call
        (Note [deferred compiles] in runtime/compiled.py)."""
        empty = {id(w.tensor) for w in self.state if w.grad is None and w.owner is None}
        return any(gw.kind != "none" and id(gw.tensor) in empty for gw in self.grad_writes)

    @property
    def one_shot_why(self) -> str:
        """What made the trace one-shot, for explain() and the re-trace reason."""
        return (
            "it made new state"
            if self.escaped
            else "it left a hook registered"
            if self.hooks_left
            else "it advanced an iterator"
        )

    def __str__(self) -> str:
        return str(self.graph)


class Tracer:
    """The interceptor capture installs (``eager.interceptor``) while tracing; ``rng``:
    where its random draws come from (Note [host draws])."""

    def __init__(self, rng: str = "host"):
        self.rng = rng
        self.program = Program()
        self.generators: dict = {}  # id -> (Generator, its state before the trace)
        self.slots: dict = {}  # id(state tensor got in the trace) -> (tensor, slot)
        self.graph = Graph()
        self.start = _serial()
        self.watched: dict[int, Watched] = {}
        self.consts: dict[tuple, tuple[Any, object, np.ndarray]] = {}
        self.created: list = []  # weakrefs to the symbolic payloads made, to find escapes
        self.scalars: list = []  # weakrefs to the traced scalars made (Note [traced items])
        self.orders: dict = {}  # value id -> eager's order of its dims in memory, where not
        # row-major (Note [traced layouts])
        self.host_calls: list = []  # [(fn, in_tree, leaf specs)]: Note [disabled calls]
        self.guards: dict = {}  # key -> Guard
        self.live_inputs: dict = {}  # id(tensor) -> (tensor, get)
        self.dicts: dict[int, tuple] = {}  # id -> (dict, its items before the trace)
        # id -> (dict, its items before the trace, its name): Note [tensor stores]
        self.stores: dict[int, tuple] = {}
        self.finished = False  # set when the trace is over: its symbolic values have no data
        self.checks: list = []  # [(report Value, check params)] (Note [index checks])
        self.kept: dict = {}  # output index -> the Value it keeps where a check fails
        self.constants: dict = {}  # argument name -> non-tensor value, built into the graph
        # id(hook), or (id(hook), id(the Module it is called with)) -> (the hook, its
        # source guards before the trace, its roots, whether walked whole)
        self.hooks: dict = {}
        self.results: dict = {}  # out-leaf position -> weakref to a result the body made
        self.args: set = set()  # ids of the arguments' stand-ins
        self.arg_views: dict = {}  # id -> [(name, args)]: in-place view ops on an argument
        self.entry: dict = {}  # the Modules' plain values at entry (guards.entry_values)
        self.grads: dict = {}  # Captured.op_grads
        # argument input id -> (leaf index, name, the caller's tensor) for the arguments
        # whose data the trace may read (Note [argument data]); what it read: Captured.valued
        self.arg_data: dict = {}
        self.valued: dict = {}

    def data_of(self, value, args: bool = False) -> np.ndarray | None:
        """The data of the graph value ``value`` where no input reaches it (Note [constant
        data]), by the NumPy impls of the ops that make it; None where one does. With
        ``args``, an argument of ``arg_data`` reaching it gives its data, which the trace
        then depends on (Note [argument data])."""
        produced = {op.out.id: op for op in self.graph.ops}
        consts = {v.id: a for v, a in self.graph.consts}
        needed, todo, read = set(), [value], {}
        while todo:
            v = todo.pop()
            if v.id in self.graph.sym_consts:  # a constant of a dynamic size
                return None
            if v.id in consts or v.id in needed:
                continue
            op = produced.get(v.id)
            if op is None:  # an input: an argument, state, a draw
                arg = self.arg_data.get(v.id) if args else None
                if arg is None:
                    return None
                consts[v.id] = np.asarray(arg[2]._payload)
                read[arg[0]] = f"{arg[1]} (read at {user_location()})"
                continue
            needed.add(v.id)
            todo += op.inputs
        for i, where in read.items():
            self.valued.setdefault(i, where)
        env = dict(consts)
        for op in self.graph.ops:  # in order: an op's inputs come first
            if op.out.id in needed:
                env[op.out.id] = np.asarray(
                    op.prim.impl(*(env[v.id] for v in op.inputs), **op.params)
                )
        return env[value.id]

    def owns_shape(self, t: Tensor, name: str, args: tuple) -> bool:
        """Whether ``t``'s shape may change in place by ``t.name(*args)`` (``unsqueeze_()``):
        a tensor the trace made, or an argument's stand-in, whose new payload goes out as an
        argument write and becomes the caller's tensor's (its new shape too) at each
        compiled call, which repeats the op on it first (``Captured.arg_views``). State
        from outside the trace keeps its shape: the next call's input has it."""
        if id(t) in self.args:
            self.arg_views.setdefault(id(t), []).append((name, args))
            return True
        return t._serial >= self.start

    # -- values --------------------------------------------------------------------------
    def _watch(self, t: Tensor) -> Watched:
        w = self.watched.get(id(t))
        if w is None:
            acc = t._grad_acc() if t._grad_acc is not None else None
            for d in (t._hooks, t._post_acc_hooks) + (
                (acc._pre_hooks, acc._post_hooks) if acc is not None else ()
            ):
                for fn in (d or {}).values():
                    self.hook(fn)
            w = Watched(
                t,
                t._payload,
                t._aval(),
                (t._requires_grad, t.grad_fn, t._output_nr),
                t._grad,
                name=f"tensor{t._serial}",
            )
            self.watched[id(t)] = w
        return w

    def lift(self, t: Tensor) -> None:
        """Make a pre-trace tensor's data a state input (before it is read or written).
        Lifted before, its concrete data is a constant written since (``zero_()`` of a
        small state tensor folds to one): that graph constant is its value now."""
        p = t._payload
        if isinstance(p, Symbolic) or t._serial >= self.start:
            return
        w = self.watched.get(id(t))
        if w is not None and w.value is not None:
            t._payload = Symbolic(self.value_of(t), self)
            return
        base = t._base
        if (
            base is not None
            and t._vc is not None
            and (base._requires_grad or isinstance(base._payload, Symbolic))
        ):  # Note [views of state]
            self.lift(base)
            self._watch(t)  # its payload is restored after the trace
            refresh_view(t)
            return
        if (
            base is not None
            and t._vc is not None
            and type(p) is np.ndarray
            and type(base._payload) is np.ndarray
            and np.may_share_memory(p, base._payload)
        ):  # written through its base in one memory: its data is current, not stale
            t._view.data_version = t._vc[0]  # (refresh_stale would lift the base, as written)
        self._add_state(t, f"state{len(self.graph.inputs)}")

    def _add_state(self, t: Tensor, name: str) -> None:
        w = self._watch(t)
        w.name = name
        w.value = self.graph.add_input(Aval(tuple(t._payload.shape), t.dtype), "state", name)
        t._payload = Symbolic(w.value, self)

    def guard(self, get, name: str, key=None, **how) -> None:
        """Python state the trace depended on (a module's training flag, its parameter
        objects): the trace is reused only while ``get()`` still returns the same value
        (``Guard``; ``how``: its ``same`` and ``show``). One guard per ``key``."""
        key = (name, len(self.guards)) if key is None else key
        if key not in self.guards:
            self.guards[key] = Guard(name, get, **how)

    def entered(self, module):
        """A context in which ``module``'s plain values (``training``) are as the call
        entered: the guards recorded in it hold for calls that enter as this one did
        (Note [attribute writes] in tracing/guards.py)."""
        return as_entered(module, self.entry)

    def hook(self, fn, module=None) -> None:
        """``fn``, a hook the trace may run (a Module's or a state tensor's), is the user's
        code as the step's own is: the Python values it reads are guarded, as the step's
        are, with those of ``module``, the Module it is called with (Note [hooks' reads]).
        Noted before it runs, to tell what the trace changed."""
        if _library(fn):
            return
        if id(fn) not in self.hooks:
            self.hooks[id(fn)] = (fn, source_guards(fn, ()), (), True)
            self.note_stores(fn)
        if module is None or (id(fn), id(module)) in self.hooks:  # walked once per Module
            return
        roots = _module_argument(fn, module)
        if roots:
            before = source_guards(fn, (), roots=roots, whole=False)
            self.hooks[id(fn), id(module)] = (fn, before, roots, False)

    def live(self, t: Tensor, get, name: str) -> None:
        """Make the 0-d tensor ``t`` a state input whose value the compiled step takes
        from ``get()`` at every call (an optimizer's learning rate: Note [live inputs])."""
        for _, what, where, sets in self.program.calls:
            if sets(t):  # Note [deferred calls]: it would read the value from before it
                raise CaptureError(
                    f"{user_location()}: {name} is read after {what} ({where}), which "
                    "a compiled step makes after its graph has read its hyper-parameters; "
                    f"call {what} after optimizer.step() (torch's order)"
                )
        if id(t) not in self.live_inputs:
            self.live_inputs[id(t)] = (t, get)
            if not isinstance(t._payload, Symbolic):
                taken, unique, k = {i.name for i in self.graph.inputs}, name, 1
                while unique in taken:  # two optimizers of one type: SGD...lr, SGD...lr#2
                    k += 1
                    unique = f"{name}#{k}"
                self._add_state(t, unique)

    def defer(self, call, what: str, sets) -> None:
        """Make ``call()`` (``what``: ``StepLR.step()``) at every call of the step, after
        it has read its live inputs, instead of now (Note [deferred calls] in draws.py);
        ``sets(t)``: the call changes the value of live input ``t``."""
        where = user_location()
        if self.rng != "host":
            raise CaptureError(
                f"{where}: {what} inside the step: a step traced with rng='counter' (saved "
                "with step.save, exported to ONNX) runs no Python at its calls, so it would "
                f"never make it again; call {what} outside the step, between its calls"
            )
        self.program.calls.append((call, what, where, sets))

    def impure(self, what: str) -> None:
        """The traced code drew a random tensor (``staged.randn``): its value is baked in
        (Note [impure calls])."""
        report_draw(what)

    def host_draw(self, gen, what: str, shape, dtype, fill):
        """A draw from ``gen`` (``fill(gen, shape)`` makes its array): with host draws a
        new ``draw`` input, which each call fills (Note [host draws]); else None."""
        if self.rng != "host":
            return None
        k = self.program.draws
        v = self.graph.add_input(Aval(shape, dtype), "draw", f"draw{k}")
        self.program.steps.append(("draw", gen, fill, k))
        self.program.whats.append((what, user_location()))
        return Symbolic(v, self)

    def rng_event(self, gen, kind: str, arg) -> None:
        """``gen``'s state was read (``arg``: the state tensor made), set (``arg``: the
        state given) or seeded (``arg``: the seed): recorded with host draws; the trace's
        changes to ``gen`` are undone when it ends."""
        if self.rng != "host":
            return
        if id(gen) not in self.generators:
            self.generators[id(gen)] = (gen, gen.host_state())
        steps = self.program.steps
        if kind == "get":
            self.slots[id(arg)] = (arg, len(self.slots))
            steps.append(("get", gen, len(self.slots) - 1))
        elif kind == "set":
            got = self.slots.get(id(arg))
            steps.append(
                ("set", gen, got[1])
                if got is not None and got[0] is arg
                else ("load", gen, state_bytes(arg))
            )
        else:
            steps.append(("seed", gen, arg))

    def note_stores(self, fn) -> None:
        """Note the dicts ``fn`` may store a tensor in, as they are before it runs (Note
        [tensor stores])."""
        for name, d in store_dicts(fn):
            if id(d) not in self.stores:
                self.stores[id(d)] = (d, dict(d), name)

    def preserve(self, d: dict) -> None:
        """A Python dict the trace may write (an optimizer's state): restored after the
        trace, and rewritten as the trace left it by each compiled call (Note [state])."""
        if id(d) not in self.dicts:
            self.dicts[id(d)] = (d, dict(d))

    def note_grad_write(self, t: Tensor) -> None:
        if t._serial < self.start:
            self._watch(t)

    def traced_item(self, t: Tensor):
        """``t.item()`` while tracing: its number where constants make it (Note [constant
        data]), else a ``TracedScalar`` (Note [traced items] in ``tracing/scalars.py``)."""
        refresh_stale(t)
        p = t._payload
        if not isinstance(p, Symbolic):  # a write made it concrete (``t.fill_(2)``)
            return t.item()
        if p.tracer is not self or self.finished:
            p.__array__()  # raises: the tensor of another trace, or of a finished one
        data = self.data_of(p.value)
        if data is not None:
            return np.asarray(data).reshape(()).item()
        out = TracedScalar(("value", p.value), self)
        self.scalars.append(weakref.ref(out))
        return out

    def host_call(self, fn, args, kwargs) -> None:
        """``fn(*args, **kwargs)``, a function marked ``torch.compiler.disable``, called
        while tracing: made by each compiled call after its graph, with the values its
        tensors and traced scalars have here (Note [disabled calls] in
        ``tracing/scalars.py``)."""
        where = user_location()
        name = getattr(fn, "__qualname__", repr(fn))
        if self.rng != "host":
            raise CaptureError(
                f"{where}: {name} is marked torch.compiler.disable, so each call runs it "
                "in Python; a step traced with rng='counter' (saved with step.save, "
                "exported to ONNX) runs no Python at its calls. Call it outside the step"
            )
        leaves, tree = flatten((args, kwargs), lambda o: False)
        specs = []
        for x in leaves:
            if isinstance(x, Tensor):
                if x._serial < self.start and not isinstance(x._payload, Symbolic):
                    self.lift(x)  # its value at this point of each call
                refresh_stale(x)
                specs.append(("value", self.value_of(x)))
            elif type(x) is TracedScalar:
                specs.append(("item", x.expr))
            else:
                specs.append(("py", x))
        self.host_calls.append((fn, tree, specs))

    def data_read(self, t: Tensor) -> None:
        """Python read the data of ``t``, a tensor from before the trace that no op read
        (``counter.item()``, ``mask.tolist()``): the trace is reused only while that data
        is unchanged (Note [data reads])."""
        if t._serial >= self.start or ("data", id(t)) in self.guards:
            return
        self.guard(
            functools.partial(_data_stamp, t),
            f"the data of tensor#{t._serial} (read at {user_location()})",
            key=("data", id(t)),
            show=_show_stamp,
        )

    def value_of(self, t: Tensor):
        refresh_stale(t)  # a sibling view or the base was written since
        p = t._payload
        if isinstance(p, Symbolic):
            if p.tracer is not self:
                raise CaptureError(
                    f"{user_location()}: a tensor from another staged trace "
                    "was used here (a symbolic tensor escaped its trace)"
                )
            return p.value
        # one constant per array and version: an in-place op on a tensor made in the step
        # (an optimizer's step count) is folded into its array, and a later read must see
        # it (the first value was read again, and Adam's second step in one call used the
        # first's bias correction); inference tensors count no versions: compared instead
        vc = t._vc
        key = (id(p), vc[0] if vc is not None else None)
        v: Any = self.consts.get(key)
        if v is None or (vc is None and not np.array_equal(v[2], p, equal_nan=True)):
            a = np.array(p)  # the graph's own copy: the tensor may be written later
            c = self.graph.add_const(a, Aval(a.shape, t.dtype))
            self.consts[key] = (c, p, a)  # keep p alive so its id stays unique
            return c
        return v[0]

    # -- the interceptor -----------------------------------------------------------------
    def __call__(self, prim, inputs, params):
        symbolic = False
        for t in inputs:
            if t._serial < self.start and not isinstance(t._payload, Symbolic):
                self.lift(t)
            refresh_stale(t)  # its base was written since: its data may be symbolic now
            if isinstance(t._payload, Symbolic):
                symbolic = True
        if not symbolic:
            aval = prim.shape_rule(*(t._aval() for t in inputs), **params)
            if _foldable(aval.shape, [t._payload.shape for t in inputs]):
                # constants only: fold eagerly (but never blow a scalar up into a big array)
                out = prim.impl(*(np.asarray(t._payload) for t in inputs), **params)
                return np.asarray(out)
        vals = []
        for t in inputs:  # refreshed above: a value of this trace needs no value_of
            p = t._payload
            vals.append(p.value if type(p) is Symbolic and p.tracer is self else self.value_of(t))
        aval = prim.shape_rule(*(v.aval for v in vals), **params)
        tags = interceptor.tags
        v = self.graph.add_op(
            prim, vals, params, aval, user_location(), tags.phase, tags.hook, tags.ranges
        )  # Note [phases]
        if _state.grad_enabled:
            self.grads[v.id] = tuple(t._requires_grad for t in inputs)
        if prim is ad.check:
            self.checks.append((v, params))
        if prim is _PERMUTE or prim is _EXPAND or (self.orders and prim in _KEEPS_LAYOUT):
            order = _order_of(prim, vals, params, self.orders)  # Note [traced layouts]
            if order is not None:
                self.orders[v.id] = order
        out = Symbolic(v, self)
        self.created.append(weakref.ref(out))
        return out

    # -- finishing -----------------------------------------------------------------------
    def output_value(self, t: Tensor):
        """A result's value: a tensor from before the trace that no op read (a parameter
        returned as is) is state too, read at each call, not its data at trace time."""
        if t._serial < self.start and not isinstance(t._payload, Symbolic):
            self.lift(t)
        return self.value_of(t)


_PERMUTE, _EXPAND = ad.shape.permute, ad.shape.expand
_KEEPS_LAYOUT = frozenset(  # NumPy's ufuncs (order "K"): the result laid out as the operands
    p
    for p in vars(importlib.import_module("staged.autodiff.elementwise")).values()
    if isinstance(p, ad.Primitive)
)


def _order_of(prim, vals, params, orders) -> tuple | None:
    """The order in memory of the dims of ``prim``'s result in eager, where not row-major
    (Note [traced layouts]): a permutation's of its operand's; an elementwise op's, that
    of its operands where they all have one (NumPy's, where they differ: row-major)."""
    if prim is _EXPAND:  # a broadcast (zero strides): it sets no order
        return BROADCAST
    if prim is _PERMUTE:
        inverse = np.argsort(params["perm"])
        before = orders.get(vals[0].id)
        before = range(len(inverse)) if before is None or before is BROADCAST else before
        order = tuple(int(inverse[d]) for d in before)
        return None if order == tuple(range(len(order))) else order
    found = {orders.get(v.id) for v in vals if v.aval.shape} - {BROADCAST}
    return found.pop() if len(found) == 1 else None


BROADCAST = ()  # ``Tracer.orders``' mark of a broadcast value: it follows the others


def _data_written(c: Captured, tracer: Tracer) -> frozenset:
    """The names of the data guards (Note [data reads]) on tensors the step writes: a
    value it changes at every call (Note [counters run eagerly] in runtime/compiled.py)."""
    written = {id(w.tensor) for w, _ in c.state_updates}
    return frozenset(
        g.name for key, g in tracer.guards.items() if key[0] == "data" and key[1] in written
    )


def _data_stamp(t: Tensor) -> tuple:
    """What changes with ``t``'s data: its version (in-place writes, a compiled call's
    write-back) and its payload (``t.data = ...``): Note [data reads]."""
    return (t._vc[0] if t._vc is not None else None, id(t._payload))


def _show_stamp(stamp: tuple) -> str:
    return f"version {stamp[0]}"


def _library(fn) -> bool:
    """A hook of staged's own (DDP's, a parametrization's): its reads are staged's to
    guard (``Module._guard``)."""
    f = fn.func if isinstance(fn, functools.partial) else fn
    f = f.__func__ if isinstance(f, types.MethodType) else f
    where = f.__module__ if is_function(f) else type(f).__module__
    return (where or "").startswith("staged.")


def _foldable(shape, shapes) -> bool:
    """An op on constants only is folded where its result is no larger than an operand
    (never blowing a scalar up into a big array), unless it makes an array of 0-d
    operands only (the expand of a scalar to ``(n,)``, one element at ``n = 1`` only).
    The rule decides alike at batch sizes ``n`` and ``n + 1``, as ``staged.compile(
    dynamic=True)`` needs (it compares traces at both, op for op: ``tracing/dynamic.py``);
    the rule before (one element more than the largest operand) folded the expand of a
    scalar to ``(n,)`` (a target check's bound) at ``n <= 2`` only, so a dynamic step
    whose first call had batch 1 or 2 raised ``DynamicError``."""
    return _numel(shape) <= max(map(_numel, shapes)) and (not shape or any(shapes))


VALUES_CAP = 1 << 16  # elements of an argument whose data the trace may read


def _readable(t: Tensor) -> bool:
    """Whether the trace may read argument ``t``'s data (Note [argument data]): lengths,
    indices, masks, whose values a call's key holds; not floats, which change at every
    call, nor a tensor too large to compare at each call."""
    return t.dtype.np.kind in "biu" and _numel(t._payload.shape) <= VALUES_CAP


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def capture(fn, *args, **kwargs) -> Captured:
    """Trace ``fn(*args, **kwargs)`` into a graph without running it on data.

    Example:
        >>> g = staged.capture(lambda x: (x * x).sum(), staged.ones(3))
        >>> print(g)  # one op a line
    """
    return trace(fn, args, kwargs)


def trace(fn, args, kwargs, rng: str = "host", values: bool = False) -> Captured:
    """``capture(fn, *args, **kwargs)`` drawing random numbers on the host at each call
    (``rng="host"``) or in the graph (``"counter"``): Note [host draws]. With ``values``
    the body may read the data of small integer and bool arguments, which the trace then
    holds as constants (Note [argument data])."""
    if rng not in ("host", "counter"):
        raise ValueError(f"rng must be 'host' or 'counter', got {rng!r}")
    leaves, in_tree = flatten((args, kwargs), lambda o: False)
    names = leaf_names(fn, args, kwargs)
    tracer = Tracer(rng)
    wrappers = []
    sym_leaves = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tensor):
            v = tracer.graph.add_input(leaf._aval(), "arg", names[i])
            if values and _readable(leaf):
                tracer.arg_data[v.id] = (i, names[i], leaf)
            w = Tensor._wrap(Symbolic(v, tracer), leaf._requires_grad)
            _take_hooks(w, leaf, names[i])
            if leaf.__dict__:  # a user's attributes (``x.scale``): the call's key holds them
                w.__dict__.update(leaf.__dict__)
            if leaf._requires_grad and leaf._grad is not None:  # accumulated into: an input
                gv = tracer.graph.add_input(leaf._grad._aval(), "arg", names[i] + ".grad")
                w._grad = Tensor._wrap(Symbolic(gv, tracer), False)
            wrappers.append((i, w))
            sym_leaves.append(w)
        else:
            tracer.constants[names[i]] = leaf
            sym_leaves.append(leaf)
    tracer.start = _serial()  # arg wrappers count as pre-trace tensors (their .grad is state)
    for _, w in wrappers:
        tracer._watch(w)
        tracer.args.add(id(w))
        if w._grad is not None:
            tracer._watch(w._grad)
    a, kw = unflatten(in_tree, sym_leaves)
    del sym_leaves
    originals = [(leaves[i], names[i]) for i, _ in wrappers]
    with state_lock, _marked(originals):  # Note [one trace at a time]
        captured = _trace(fn, tracer, a, kw, in_tree, wrappers)
    _name(captured, tracer, fn, names, leaves)
    if captured.hooks_left:
        _warn_hooks_left(captured)
    return captured


# Note [argument originals]: the step traces a stand-in of each tensor argument, whose
# .grad its backward fills. Code reaching the caller's own tensor another way (an
# optimizer given it, a module holding it) would read its .grad, which the trace never
# sets: the optimizer skipped it, and the compiled step never updated it (eagerly it
# trains). While the trace runs, the caller's tensors are of a class whose .grad raises.
_ORIGINALS: dict[int, str] = {}  # id(an argument's own tensor) -> its name, while traced
_ORIGINAL_CLASSES: dict[type, type] = {}


class _Original:
    """Mixed into an argument's own tensor's class while its stand-in is traced."""

    __slots__ = ()

    @property
    def grad(self):
        raise CaptureError(
            f"{user_location()}: {_ORIGINALS.get(id(self), 'a tensor argument')} is an "
            "argument of the compiled step and is also reached another way (an optimizer "
            "or a module holds it): the step computes the argument's gradient, which that "
            "other reference would not see. Pass it only as an argument, or let the step "
            "reach it only through what holds it (drop the argument)"
        )

    @grad.setter
    def grad(self, value):
        type(self).grad.fget(self)


def _original_class(cls: type) -> type:
    sub = _ORIGINAL_CLASSES.get(cls)
    if sub is None:
        sub = _ORIGINAL_CLASSES[cls] = type(cls.__name__, (_Original, cls), {"__slots__": ()})
    return sub


class _marked:
    """Context: the arguments' own tensors, (tensor, name) pairs, marked as ``_Original``."""

    def __init__(self, originals):
        self.originals = [(t, type(t)) for t, _ in originals]
        self.names = {id(t): name for t, name in originals}

    def __enter__(self):
        _ORIGINALS.update(self.names)
        for t, cls in self.originals:
            t.__class__ = _original_class(cls)

    def __exit__(self, *exc):
        for t, cls in self.originals:
            t.__class__ = cls
        for k in self.names:
            _ORIGINALS.pop(k, None)


def _take_hooks(w: Tensor, leaf: Tensor, name: str) -> None:
    """The hooks of the argument ``leaf`` (``register_hook``, post-accumulate) on its
    symbolic stand-in ``w``, so the trace runs them as eager code would (a compiled step
    keys its traces on them)."""
    acc = leaf._grad_acc() if leaf._grad_acc is not None else None
    if acc is not None and (acc._pre_hooks or acc._post_hooks):
        raise CaptureError(
            f"{user_location()}: argument {name} has a hook on its grad accumulator, which "
            "staged.compile does not support; register it with register_hook or "
            "register_post_accumulate_grad_hook instead"
        )
    if leaf._hooks:
        w._hooks = dict(leaf._hooks)
    if leaf._post_acc_hooks:
        w._post_acc_hooks = dict(leaf._post_acc_hooks)


def _trace(fn, tracer: Tracer, a, kw, in_tree, wrappers) -> Captured:
    roots = list(tracer.constants.items())  # the non-tensor arguments: a Module passed in
    before = source_guards(fn, (), None, roots)  # Note [source guards]: what the body changes
    tracer.entry = entry_values(before)  # Note [attribute writes]
    thawed = _freeze_heap()  # Note [escapes]
    tracer.note_stores(fn)  # Note [tensor stores]
    first_hook = fresh_id()  # Note [hooks the body leaves]
    modes = _autograd_modes()
    try:
        prev = interceptor.set_interceptor(tracer)
        mode = (_state.grad_enabled, _state.inference)
        try:
            with warn_impure_calls(), interceptor.tagged("forward", ""):  # Note [phases]
                holder = [fn(*a, **kw)]  # the only reference, so _finish can drop it
            captured = _finish(tracer, holder, in_tree, wrappers)
        except BaseException:  # and its Python values: a failed trace changes nothing
            _undo_writes(fn, tracer, before, roots)
            replay([(d, k, was) for d, k, was, _, _ in _stores(tracer)])
            raise
        finally:
            interceptor.restore_interceptor(prev)
            _state.grad_enabled, _state.inference = mode
            _restore(tracer)  # also when the body raised: the caller's tensors are untouched
        g = captured.graph
        read = [w.tensor for w in tracer.watched.values()]
        # the user's own state first: a replaced child Module is named as such
        captured.guards[:0] = source_guards(fn, read, before, roots)
        for hook, hook_before, hook_roots, whole in tracer.hooks.values():  # Note [hooks' reads]
            captured.guards += source_guards(hook, read, hook_before, hook_roots, whole)
        guards = captured.guards  # Note [iterators the body advances]
        captured.advanced = [g for g in guards if isinstance(g, Position)]
        captured.guards = [g for g in guards if not isinstance(g, (Position, Attributes))]
        written = {  # Note [attribute writes], Note [binding writes]
            (id(m), g.at(k)): (m, k, *change, g.at(k))
            for g in guards
            if isinstance(g, Attributes)
            for m, changes in (g.value,)
            for k, change in changes.items()
        }
        values = [w for w in written.values() if not holds_tensor(w[2:4])]
        at_entry(captured.guards, [w[:4] for w in values])
        captured.attr_writes = [(m, k, after) for m, k, _, after, _ in values]
        captured.wrote = frozenset(w[4] for w in values) | _data_written(captured, tracer)
        stores = _stores(tracer)  # Note [tensor stores]
        tensors = _tensor_writes(g, [w for w in written.values() if holds_tensor(w[2:4])] + stores)
        ids = {id(t) for t in read}
        captured.guards += [entry_guard(at, d, k, was, ids) for d, k, was, _, at in stores]
        for w in tensors:  # Note [tensor stores]: an output of its own, not its base's
            _sever(w[3], tracer)
        escaped, grad = _escaped(tracer)  # after the restore: only the body's own stores remain
        _refuse_kept_scalars(fn, tracer, before, roots)
        escaped = _attr_outputs(captured, tracer, escaped, tensors)
        for t in escaped:
            g.outputs.append(Output(t._payload.value, "escaped", f"tensor{t._serial}"))
            captured.escaped.append((t, len(g.outputs) - 1))
            if id(t) in grad:
                captured.escaped_grad.add(len(g.outputs) - 1)
            for pos, ref in tracer.results.items():  # returned as itself (an optimizer buffer)
                if ref() is t:
                    captured.returned[pos] = ("escaped", t, ())
        prev = interceptor.set_interceptor(tracer)  # the checks' ops join the graph
        try:
            with interceptor.tagged(phase="checks"):  # Note [phases]: not the step's own ops
                _apply_checks(captured, tracer)
        finally:
            interceptor.restore_interceptor(prev)
        captured.hooks_left = _hooks_left(tracer, first_hook)
        backward = any(op.phase == "backward" for op in g.ops)
        # Note [autograd boundary], Note [first eager call] in runtime/boundary.py
        if captured.grad_results or (captured.escaped_grad and not backward):
            captured.op_grads = _op_grads(
                tracer, first_hook, len(captured.hooks_left), _grad_args(captured, tracer)
            )
        captured.guards.append(
            Guard("autograd", _autograd_modes, operator.eq, _show_modes, value=modes)
        )
    finally:
        tracer.finished = True
        tracer.consts.clear()  # the arrays it kept alive: no longer the trace's to hold
        tracer.entry.clear()
        if thawed:
            gc.unfreeze()
    return captured


def _name(c: Captured, tracer: Tracer, fn, arg_names, leaves) -> None:
    """Name the graph's state inputs and outputs after what holds them (``fc1.weight``,
    ``opt.state[fc1.weight].exp_avg``) and its results after what ``fn`` returns (``loss``):
    Note [state names]. Live inputs keep their own names; a name is made unique with
    ``#2``."""
    try:
        found, outs = (
            state_names(fn, arg_names, leaves, c.dict_writes),
            output_names(fn, c.out_tree),
        )
    except Exception:  # noqa: BLE001 (names are cosmetic: a user object that the walk
        found, outs = {}, []  # cannot read must not fail the trace)
    args = {id(w): arg_names[i] for i, w in c.arg_wrappers}  # named on their .grad outputs
    live = {id(t) for t, _ in c.live}
    g = c.graph
    taken = {i.name for i in g.inputs if i.kind == "arg"}
    taken |= {w.name for w in tracer.watched.values() if id(w.tensor) in live}
    renamed = {}
    for t, old, w in [(w.tensor, w.name, w) for w in tracer.watched.values()] + [
        (t, g.outputs[k].name, None) for t, k in c.escaped
    ]:
        new = args.get(id(t)) or found.get(id(t))
        if new is None or id(t) in live:
            continue
        unique, k = new, 1
        while unique in taken and id(t) not in args:
            k += 1
            unique = f"{new}#{k}"
        taken.add(unique)
        renamed[old] = unique
        if w is not None:
            w.name = unique
    for i in g.inputs:
        i.name = renamed.get(i.name, i.name)
    for o in g.outputs:
        if o.kind in ("state", "grad", "escaped"):
            o.name = renamed.get(o.name, o.name)
    for (kind, k), name in zip(c.out_leaves, outs):
        if kind == "value":
            g.outputs[k].name = name
        elif kind == "item":  # Note [traced items]: the tensors its number reads
            read = reads(k)
            for j, (_, o) in enumerate(read):
                if g.outputs[o].name == f"out{o}":  # not a result or another's already
                    g.outputs[o].name = f"{name}.item" if len(read) == 1 else f"{name}.item{j}"
    for i, k in c.arg_updates:  # an argument's new value
        g.outputs[k].name = arg_names[i]


def leaf_names(fn, args, kwargs) -> list:
    """A name per argument leaf, in flatten order: the parameter's name, with a path for
    nested leaves (``x``, ``batch.0``, ``cfg.lr``); ``arg<i>`` where the signature can't
    tell."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    named = [p.name for p in params if p.kind in kinds]  # those positional arguments bind to
    rest = next((p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
    top = [
        named[i] if i < len(named) else f"{rest}.{i - len(named)}" if rest else f"arg{i}"
        for i in range(len(args))
    ]
    names = []
    for name, value in zip(top + list(kwargs), list(args) + list(kwargs.values())):
        leaves, _ = flatten(value, lambda o: False)
        if len(leaves) == 1 and not isinstance(value, (tuple, list, dict)):
            names.append(name)
        else:
            names.extend(f"{name}.{j}" for j in range(len(leaves)))
    return names


def _finish(tracer: Tracer, holder, in_tree, wrappers) -> Captured:
    g = tracer.graph
    out_leaves_raw, out_tree = flatten(holder.pop(), lambda o: False)
    out_leaves = []
    wanted = []  # (position, output) of the results the caller could differentiate (Note
    # [autograd boundary])
    returned = {}  # Note [returned state]
    args = {id(w): i for i, w in wrappers}
    for pos, leaf in enumerate(out_leaves_raw):
        if type(leaf) is TracedScalar:  # Note [traced items]
            out_leaves.append(("item", relabel(leaf.expr, functools.partial(_item_output, g))))
        elif isinstance(leaf, Tensor):
            g.outputs.append(Output(tracer.output_value(leaf), "out", f"out{len(g.outputs)}"))
            out_leaves.append(("value", len(g.outputs) - 1))
            how = _returned(tracer, leaf, args)
            if how is not None:
                returned[pos] = how
            if leaf._requires_grad and _state.grad_enabled and (how is None or how[2]):
                wanted.append((pos, len(g.outputs) - 1))  # an alias that requires
                # grad too: the tensor itself needs no Node
            if how is None and leaf._serial >= tracer.start:  # an escape, maybe
                tracer.results[pos] = weakref.ref(leaf)
        else:
            out_leaves.append(("py", leaf))
    graphless = {}  # Note [graphless results]: position -> whether its graph was freed
    if any(op.phase == "backward" for op in g.ops):  # the body differentiated itself
        graphless = {pos: consumed(out_leaves_raw[pos]) for pos, _ in wanted if pos not in returned}
        wanted = []
    for pos, _ in wanted:  # the call's Node makes them
        returned.pop(pos, None)
    differentiable = [k for _, k in wanted]
    out_leaves_raw = leaf = how = None  # so only the body's own references keep tensors alive
    arg_updates = []  # arguments written in place: their new values go out, and back
    arg_before = []  # (output index, the argument's value as it came in, of its shape)
    arg_reshaped = []  # the arguments whose layout it changed (unsqueeze_()): leaf indices
    arg_views = {}  # their in-place view ops: {leaf index: [(name, args)]}
    for i, w in wrappers:
        cur = w._payload
        came: Any = tracer.watched[id(w)].payload
        if cur is not came:
            if not isinstance(cur, Symbolic):
                raise CaptureError(
                    "the data of an argument was replaced by a concrete array during the "
                    "trace (x.data = ...); not supported"
                )
            g.outputs.append(Output(cur.value, "arg", f"arg{i}"))
            arg_updates.append((i, len(g.outputs) - 1))
            if id(w) not in tracer.arg_views:
                arg_before.append((len(g.outputs) - 1, came.value))
            else:  # no old value in the new layout: the call keeps it should a check fail
                arg_reshaped.append(i)
                arg_views[i] = tracer.arg_views[id(w)]
    arg_flags = [  # x.requires_grad_() on an argument: set on the caller's at each call
        (i, w._requires_grad)
        for i, w in wrappers
        if w._requires_grad != tracer.watched[id(w)].meta[0]
    ]
    arg_grads = {id(w) for _, w in wrappers if w._requires_grad}
    state, updates, grad_writes = [], [], []
    # outputs in the tensors' creation order, not the order the trace first touched them:
    # a re-trace that touches them in another order (zero_grad() writing the .grad that
    # the first call found None) then gives the same module, served by the compile cache
    for w in sorted(tracer.watched.values(), key=lambda w: w.tensor._serial):
        t = w.tensor
        if w.value is not None:
            state.append(w)
            cur = t._payload
            if isinstance(cur, Symbolic) and cur.value is not w.value:
                g.outputs.append(Output(cur.value, "state", w.name))
                updates.append((w, len(g.outputs) - 1))
            elif not isinstance(cur, Symbolic):
                raise CaptureError(
                    "the data of a captured tensor was replaced by a concrete "
                    "array during the trace (t.data = ...); not supported"
                )
        gr = t._grad
        if id(t) in arg_grads:  # an argument's .grad came in as an input: always goes out
            if gr is None:
                grad_writes.append(GradWrite(t, "none"))
            else:
                g.outputs.append(Output(tracer.output_value(gr), "grad", w.name))
                grad_writes.append(GradWrite(t, "output", output=len(g.outputs) - 1))
            continue
        if gr is w.grad:  # unchanged object; in-place changes to it are its own state
            continue
        if gr is None:
            grad_writes.append(GradWrite(t, "none"))
        elif gr._serial < tracer.start and not isinstance(gr._payload, Symbolic):
            grad_writes.append(GradWrite(t, "object", gr))
        else:
            g.outputs.append(Output(tracer.output_value(gr), "grad", w.name))
            grad_writes.append(GradWrite(t, "output", output=len(g.outputs) - 1))
            for pos, ref in tracer.results.items():  # a new .grad returned: the .grad itself
                if ref() is gr:
                    returned[pos] = ("grad", t, ())
    for w in tracer.watched.values():  # Note [grads by owner]
        gw = tracer.watched.get(id(w.grad)) if w.grad is not None else None
        if gw is not None and gw.value is not None and id(w.tensor) not in args:
            gw.owner = w.tensor
    state.sort(key=lambda w: w.value.id)
    g.inputs = [i for i in g.inputs if i.kind != "draw"] + [
        i for i in g.inputs if i.kind == "draw"
    ]  # Note [host draws]: after the state
    dict_writes = [(d, dict(d)) for d, before in tracer.dicts.values() if _changed(d, before)]
    _guard_dicts(tracer)
    tracer.kept = {i: w.value for w, i in updates}
    tracer.kept.update(arg_before)
    for write in grad_writes:  # a .grad read as state (accumulated into) keeps its old value
        read = tracer.watched.get(id(tracer.watched[id(write.tensor)].grad))
        if write.kind == "output" and read is not None and read.value is not None:
            tracer.kept[write.output] = read.value
    return Captured(
        g,
        in_tree,
        out_tree,
        out_leaves,
        state,
        updates,
        grad_writes,
        wrappers,
        guards=list(tracer.guards.values()),
        live=list(tracer.live_inputs.values()),
        dict_writes=dict_writes,
        constants=tracer.constants,
        rng=tracer.program if tracer.program.steps or tracer.program.calls else None,
        grad_results=differentiable,
        graphless=graphless,
        arg_updates=arg_updates,
        arg_reshaped=arg_reshaped,
        arg_views=arg_views,
        arg_flags=arg_flags,
        returned=returned,
        host_calls=[(fn, tree, _host_leaves(g, specs)) for fn, tree, specs in tracer.host_calls],
        valued=tracer.valued,
    )


def _host_leaves(g: Graph, specs: list) -> list:
    """The leaves of a disabled function's arguments as ``scalars.results`` reads them from
    a call's outputs (Note [disabled calls])."""
    out = functools.partial(_item_output, g)
    return [
        ("value", out(s)[1])
        if s[0] == "value"
        else ("item", relabel(s[1], out))
        if s[0] == "item"
        else s
        for s in specs
    ]


def _item_output(g: Graph, leaf: tuple) -> tuple:
    """``("out", k)``: the output ``k`` that gives a traced scalar's tensor (Note [traced
    items]), one per value."""
    v = leaf[1]
    for k, o in enumerate(g.outputs):
        if o.value is v and o.kind == "out":
            return ("out", k)
    g.outputs.append(Output(v, "out", f"out{len(g.outputs)}"))
    return ("out", len(g.outputs) - 1)


def _returned(tracer: Tracer, leaf: Tensor, args: dict) -> tuple | None:
    """The recipe of a result that is a tensor from before the trace or aliases one
    (Note [returned state]), or None."""
    found = recipe(leaf, tracer.start)
    if found is None:
        return None
    root, ops = found
    if id(root) in args:
        return None if any(op[0] == "view" for op in ops) else ("arg", args[id(root)], ops)
    w = tracer.watched.get(id(root))
    if w is None or isinstance(w.payload, Symbolic):  # an argument's .grad stand-in
        return None
    return ("state", w, ops)


_GONE = object()


def _guard_dicts(tracer: Tracer) -> None:
    """The trace binds the tensors it found in the dicts it preserved (an optimizer's state)
    and each call leaves them as the trace did: so it serves only while they hold those
    entries. ``opt.state.clear()``, a new ``momentum_buffer``, a loaded optimizer state dict
    re-trace (the step went on with the old buffers, the dict's new ones untouched)."""
    dicts = [d for d, _ in tracer.dicts.values()]
    if not dicts:
        return
    sizes = list(map(len, dicts))
    entries = [(d, k, v) for d in dicts for k, v in d.items()]
    owners, keys, values = zip(*entries) if entries else ((), (), ())
    gone = itertools.repeat(_GONE)

    def entries_now() -> str:  # at C speed: it runs at every call
        kept = list(map(len, dicts)) == sizes and all(
            map(operator.is_, map(dict.get, owners, keys, gone), values)
        )
        return "as traced" if kept else "entries added, removed or replaced"

    tracer.guard(entries_now, "optimizer state", value="as traced", show=str)


def _changed(d: dict, before: dict) -> bool:
    return d.keys() != before.keys() or any(d[k] is not before[k] for k in d)


def _apply_checks(c: Captured, tracer: Tracer) -> None:
    """Note [index checks]: the reports of the trace's checks become one ``check`` output
    of ``c``, its last (k int64, 0 where fine); where one is bad, each output of
    ``tracer.kept`` is the value it keeps (the old state; an argument written in place, a
    Module's tensor attribute: what it came in with) and floating point results (and .grad
    not read from state) are NaN. Sets ``c.checks`` (rows of (error, message, lo, hi)),
    ``c.check_output`` and ``c.unchecked``."""
    if not tracer.checks:
        return
    g = tracer.graph

    def sym(v):
        return Tensor._wrap(Symbolic(v, tracer), False)

    k = len(tracer.checks)
    reports = [sym(v) for v, _ in tracer.checks]
    table = reports[0] if k == 1 else ad.concat(*reports, dim=0, sizes=(1,) * k)
    # the largest report, elementwise, 16 reports at a time behind barriers: one chain of k
    # maxima made one dispatch binding every report (46 of 141 in the op sweep's float32
    # module on vulkan-spirv, whose devices allow 32; a reduction of the table instead made
    # IREE 3.13 miscompile another case of that module, linalg_cholesky, on every backend)
    worst = None
    for i, r in enumerate(reports):
        if i and i % 16 == 0:
            worst = ad.barrier(worst)
        r = ad.reshape(r, shape=())
        worst = r if worst is None else ad.maximum(worst, r)
    # a key is never negative: a report below 0 is the identity of a max over no entries
    # (INT64_MIN on llvm-cpu), a dynamic batch of 0, where nothing can be out of range. The
    # clamps come after the concat and the maxima: one per report, fused into the concat,
    # made a dispatch of a binding per check (146 in the op sweep, where 64 is IREE's limit)
    zero = scalar_tensor(0, dt.int64)
    table = ad.maximum(table, expand_to(zero, (k,)))
    ok = ad.le(worst, zero)
    old = tracer.kept
    scalars: dict[Any, list] = {}  # dtype -> [(output index, new, alt)] of the 0-d outputs
    unchecked = {}
    for i, o in enumerate(g.outputs):
        aval = o.value.aval
        keep = old.get(i)
        if keep is None and not (o.kind in ("out", "grad") and aval.dtype.is_floating_point):
            continue
        unchecked[i] = o.value
        alt = sym(keep) if keep is not None else scalar_tensor(float("nan"), aval.dtype)
        shape = tuple(aval.shape)
        if not shape and keep is not None:
            scalars.setdefault(aval.dtype, []).append((i, o.value, alt))
            continue
        sel = ad.where(expand_to(ok, shape), sym(o.value), expand_to(alt, shape))
        g.outputs[i] = Output(sel._payload.value, o.kind, o.name)
    for rows in scalars.values():
        sels = (
            [ad.where(ok, sym(v), alt) for _, v, alt in rows]
            if len(rows) <= _FEW
            else _select_scalars(g, sym, ok, rows)
        )
        for (i, _, _), sel in zip(rows, sels):
            g.outputs[i] = Output(sel._payload.value, g.outputs[i].kind, g.outputs[i].name)
    g.outputs.append(Output(table._payload.value, "check", "check"))
    c.checks = [(p["error"], p["message"], p["lo"], p["hi"]) for _, p in tracer.checks]
    c.check_output, c.unchecked = len(g.outputs) - 1, unchecked


# 0-d states selected one by one, at most: IREE gathers 0-d ops into one dispatch, of 3 or 4
# buffers a state (old, new, the select, its input), which may bind 32 at most
_FEW = 4


def _select_scalars(g: Graph, sym, ok, rows) -> list:
    """``where(ok, new, alt)`` of the 0-d (new Value, alt Tensor) state pairs in ``rows``,
    as one select of vectors. IREE gathers the 0-d ops of a function into one dispatch
    (FormScalarDispatches), up to a 0-d value that a larger op reads: 0-d selects of many
    states (AdamW's 18 step counters) made one dispatch of 36 buffers, over the 32 one may
    bind. So each new value is read, right after the op that makes it, by a barrier (which
    stops the gathering there) that the vector select reads. A barrier costs fusion (a
    compiled MLP step took 1.5x the time with one on its loss), hence only past ``_FEW``."""
    made = {id(op.out): j for j, op in enumerate(g.ops)}
    news, barriers = [], []
    for _, v, _ in rows:
        b = ad.barrier(sym(v))
        barriers.append((made.get(id(v), -1), g.ops.pop()))
        news.append(ad.reshape(b, shape=(1,)))
    for j, op in sorted(barriers, key=lambda m: m[0], reverse=True):
        g.ops.insert(j + 1, op)
    alts = [ad.reshape(a, shape=(1,)) for _, _, a in rows]
    n = len(rows)

    def stack(ts):
        return ts[0] if n == 1 else ad.concat(*ts, dim=0, sizes=(1,) * n)

    sel = ad.where(expand_to(ok, (n,)), stack(news), stack(alts))
    return [
        ad.reshape(ad.slice(sel, starts=(j,), stops=(j + 1,), steps=(1,)), shape=())
        for j in range(n)
    ]


# Note [escapes]: a tensor made during the trace that the body stored somewhere that
# outlives it (an optimizer's new momentum buffer) is found as a live referrer of one of
# the trace's symbolic payloads, once the trace's own garbage (reference cycles included)
# is collected. Collecting and walking the whole heap cost 0.1-0.7 s per trace with torch
# and JAX imported, so the heap that existed before the trace is frozen (gc.freeze: moved
# to the permanent generation, which neither gc.collect nor gc.get_referrers looks at)
# and only what the trace allocated is walked. Tensors that existed before the trace and
# hold trace data are the watched ones (lifted to state, restored), never escapes. The
# heap is unfrozen afterwards, unless something had frozen it before (a fork server's
# gc.freeze): then it stays frozen, as that caller asked. Asking costs nothing when nothing
# is frozen, but CPython's gc.get_freeze_count walks the frozen list: 33 ms a trace with
# torch's heap frozen (the op sweep froze it, and its 1563 captures took 77 s, not 5).


# Note [tensor attributes]: llama2.c's model stores its loss on itself in ``forward``
# (``self.last_loss = F.cross_entropy(...)``) and its step reads it from there. Such a
# tensor is stored outside the trace, so it was an escape (Note [escapes]), and the trace
# one-shot: every call traced again. An attribute of a Module the walk reaches (Note
# [attribute writes] in tracing/guards.py) that the body sets to a tensor it made is
# instead an output of the graph (kind ``"attr"``), and after every call the attribute is
# set to a new tensor of that output's value, made as a result is (``requires_grad`` and
# a ``GraphlessResult`` where the body ran a backward: Note [graphless results]); it is
# the returned tensor itself where the body also returns it. The trace is guarded on what
# the attribute held as the call entered, not on the tensor it set: absent, a value
# (``None``) by value, a tensor the trace did not read as being a tensor (so the previous
# call's loss re-traces nothing), and a tensor the trace read (``self.ema = 0.9 * self.ema
# + loss``) by identity, since the graph reads that tensor: such a step traces at every
# call, each trace exact; where an index check fails, the attribute keeps that tensor's
# value (as state, readable), and one the trace did not read gets a result that raises
# when read (Note [index checks]). A tensor that requires grad set by a body that ran no backward
# stays an escape: the caller would differentiate it outside the call, which runs eagerly
# (Note [autograd boundary]). Not seen: a Module's buffers (``self.buf = t`` of a
# registered buffer) and a Module the walk does not reach; these stay escapes.


# Note [tensor stores]: a forward hook that logs activations (``acts[name] =
# out.detach()``, a feature extractor's, a perceptual loss's) stores a tensor the trace
# made in a dict of its own, as ``self.last = y`` does on a Module (Note [tensor
# attributes]): an escape, so every call traced again and ran eagerly. The plain dicts
# that the step's and its hooks' code names (``store_dicts``: globals, closure cells, a
# bound method's object's attributes) are noted as the trace enters them (``note_stores``),
# and an item of one that the trace set to a tensor it made is an output of kind
# ``"attr"``, set after every call as an attribute is, with the same entry guard on what
# the item held (absent, a tensor the trace did not read...): a hook storing at every
# call traces twice (absent, then a tensor), then compiles for good.
def _stores(tracer: Tracer) -> list:
    """The items ``(dict, key, before, tensor, name shown)`` that the trace set to a
    tensor it made in the dicts of ``tracer.stores`` (Note [tensor stores])."""
    return [
        (d, k, before.get(k, MISSING), v, f"{name}[{k!r}]")
        for d, before, name in tracer.stores.values()
        for k, v in list(d.items())
        if isinstance(v, Tensor)
        and isinstance(v._payload, Symbolic)
        and v._payload.tracer is tracer
        and before.get(k) is not v
    ]


def _sever(t, tracer: Tracer) -> None:
    """Drop what the trace's tensor ``t``, stored as an attribute or item, holds of the
    tensor it views or aliases (``out.detach()``'s ``out``, and through its ``grad_fn``
    what that saved): each call sets a tensor of its own there, so they are no escape."""
    if isinstance(t, Tensor) and isinstance(t._payload, Symbolic) and t._payload.tracer is tracer:
        if getattr(t, "_alias", None) is not None:
            del t._alias
        if t._base is not None:
            t._base = t._view = None


def _tensor_writes(g: Graph, writes) -> list:
    """The tensor attribute writes ``(module, name, before, after, name shown)``, each with
    ``grad`` appended: None where ``after`` does not require grad, else whether the body's
    backward freed its graph (Note [graphless results]), or ``"outside"`` where the body
    ran none; asked before ``_escaped`` drops the graphs (Note [tensor attributes])."""
    backward = any(op.phase == "backward" for op in g.ops)
    return [(m, k, before, t, at, _grad(t, backward)) for m, k, before, t, at in writes]


def _grad(t, backward: bool):
    if not isinstance(t, Tensor) or not t._requires_grad:
        return None
    return consumed(t) if backward else "outside"


def _attr_outputs(c: Captured, tracer: Tracer, escaped: list, writes) -> list:
    """Make the tensors of ``writes`` (``_tensor_writes``) that the body made outputs of
    ``c``'s graph, set on their Modules after each call (until then they hold what they
    held at entry), or replay them as objects (a tensor from before the trace, a value);
    the other ``escaped`` tensors are returned (Note [tensor attributes])."""
    made = {id(t) for t in escaped}
    outputs: dict[int, int] = {}
    for m, k, before, t, at, grad in writes:
        if id(t) not in made:
            c.attr_writes.append((m, k, t))
            continue
        if grad == "outside":  # stays an escape: the call runs eagerly, from ``before``
            c.attr_before.append((m, k, before))
            continue
        replay([(m, k, before)])
        if id(t) not in outputs:
            c.graph.outputs.append(Output(t._payload.value, "attr", at))
            outputs[id(t)] = len(c.graph.outputs) - 1
            w = tracer.watched.get(id(before))  # a tensor the trace read (self.ema)
            if w is not None and w.value is not None and w.value.aval == t._payload.value.aval:
                tracer.kept[outputs[id(t)]] = w.value  # kept where a check fails
                c.attrs_kept.add(outputs[id(t)])
        pos = next((p for p, ref in tracer.results.items() if ref() is t), -1)
        c.attr_outputs.append((m, k, outputs[id(t)], pos, grad))
    return [t for t in escaped if id(t) not in outputs]


def _freeze_heap() -> bool:
    """Freeze the pre-trace heap; True if ``gc.unfreeze()`` should undo it afterwards."""
    thaw = gc.get_freeze_count() == 0
    gc.freeze()
    return thaw


def _undo_writes(fn, tracer: Tracer, before, roots) -> None:
    """Put back the Python values the body and its hooks changed (a failed trace)."""
    undo_writes(fn, before, roots)
    for hook, hook_before, hook_roots, whole in tracer.hooks.values():
        undo_writes(hook, hook_before, hook_roots, whole)


def _refuse_kept_scalars(fn, tracer: Tracer, before, roots) -> None:
    """Raise where the body kept a traced scalar outside its results (Note [traced
    items]): alive after the trace (``_escaped`` collected), something outside holds it."""
    kept = [s for s in (r() for r in tracer.scalars) if s is not None]
    if kept:
        _undo_writes(fn, tracer, before, roots)
        raise CaptureError(
            f"{kept[0].where}: the number read by .item() here was stored outside the "
            "compiled step's results (in a list, an attribute, a global, or an object it "
            "returned): a compiled call gives such a number only as a result. Return it "
            "from the step (in a tuple, list or dict) and store it after the call"
        )


def _escaped(tracer: Tracer) -> tuple[list, set]:
    """Tensors made during the trace that the body stored somewhere that outlives it
    (Note [escapes]: only objects allocated since the trace began are walked), and the
    ids of those that required grad."""
    gc.collect()
    alive = [s for s in (r() for r in tracer.created) if s is not None]
    if not alive:
        return [], set()
    mine = {id(w.tensor) for w in tracer.watched.values()}
    found = {}
    for r in gc.get_referrers(*alive):
        if isinstance(r, Tensor) and id(r) not in mine and isinstance(r._payload, Symbolic):
            found[id(r)] = r
    grad = {k for k, t in found.items() if t._requires_grad}
    for t in found.values():  # its graph was symbolic: keep the data only
        t.grad_fn, t._requires_grad = None, False
    return sorted(found.values(), key=lambda t: t._serial), grad


def _autograd_modes() -> tuple:
    """What the engine's work in a trace depends on beyond grad mode: anomaly mode (its NaN
    checks are the trace's) and the saved_tensors_hooks blocks open around the call (they
    pack what the trace saves). Compared with ``==``: the hooks by identity, at C speed."""
    return (anomaly.enabled, anomaly.check_nan, *default_hooks())


def _show_modes(modes) -> str:
    on, nan, stack, disabled = modes
    anomaly_mode = ("on" if nan else "on without NaN checks") if on else "off"
    hooks = "disabled" if disabled is not None else len(stack)
    return f"anomaly mode {anomaly_mode}, saved-tensor hooks {hooks}"


# Note [hooks the body leaves]: ``p.register_hook(fn)`` in the step, on a parameter or
# other state, stays registered after the call, and eager code adds one more at every
# call (three calls: the gradient clamped, or doubled, three times). A compiled call runs
# no Python, so it would go on running the hooks the trace saw. Such a trace is one-shot
# (Note [one-shot traces] in runtime/compiled.py): every call traces again, with the hooks
# then registered, and runs as eager code would; it warns once. Hooks the step removes
# again (``handle.remove()`` after its backward) leave nothing behind and compile as usual.
# Handle ids grow, so the hooks left are those with an id above one drawn before the trace.


def _hooks_left(tracer: Tracer, first: int) -> list:
    """[(Watched, hook)] of the hooks the body registered on state and did not remove
    (an argument's stand-in is the trace's own)."""
    left = []
    for w in tracer.watched.values():
        t = w.tensor
        if id(t) in tracer.args:
            continue
        acc = t._grad_acc() if t._grad_acc is not None else None
        for d in (t._hooks, t._post_acc_hooks) + (
            (acc._pre_hooks, acc._post_hooks) if acc is not None else ()
        ):
            left += [(w, fn) for k, fn in (d or {}).items() if k > first]
    return left


def _grad_args(c: Captured, tracer: Tracer) -> set:
    """The ids of the graph inputs of the arguments that required grad as the trace began."""
    ids, pos = set(), 0
    for _, w in c.arg_wrappers:
        if tracer.watched[id(w)].meta[0]:
            ids.add(c.graph.inputs[pos].value.id)
        pos += 1 if w._grad is None else 2
    return ids


def _op_grads(tracer: Tracer, first_hook: int, left: int, args: set) -> dict | None:
    """``Captured.op_grads``, where these alone make the trace's autograd graph: each input
    that required grad is an input of the graph that did or the result of such an op (not a
    custom Function's, nor a tensor made to require grad), and the body made no hook but the
    ``left`` it left on state (Note [first eager call] in runtime/boundary.py); else None."""
    if fresh_id() - first_hook - 1 != left:
        return None
    carry = {w.value.id for w in tracer.watched.values() if w.value is not None and w.meta[0]}
    carry |= args
    for op in tracer.graph.ops:
        mask = tracer.grads.get(op.out.id)
        if mask is None:
            continue
        if any(m and v.id not in carry for v, m in zip(op.inputs, mask)):
            return None
        if any(mask) and op.prim.vjp is not None and op.out.aval.dtype.np.kind in "fcV":
            carry.add(op.out.id)
    return tracer.grads


def _warn_hooks_left(c: Captured) -> None:
    sites = sorted({f"{getattr(fn, '__qualname__', fn)} on {w.name}" for w, fn in c.hooks_left})
    warn_user(
        f"staged.compile: the step registered {', '.join(sites)} and left it registered: "
        "eager code adds one more at every call, which a compiled call cannot repeat, so "
        "every call is traced again and run without compiling. Register the hook once, "
        "outside the step, or remove it in the step (handle.remove())"
    )


def _restore(tracer: Tracer) -> None:
    for w in tracer.watched.values():
        t = w.tensor
        t._payload = w.payload
        w.payload = None  # holding device arrays past the trace outlives IREE at exit
        t._requires_grad, t.grad_fn, t._output_nr = w.meta
        t._grad = w.grad
    for d, before in reversed(tracer.dicts.values()):
        d.clear()
        d.update(before)
    for gen, before in tracer.generators.values():  # Note [host draws]
        gen.load_host_state(before)


def _module_argument(fn, module) -> tuple:
    """The root ``(name, module)`` of a Module's hook ``fn``: its first parameter, which
    the Module is passed in; none for a hook taking ``*args``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ()
    if params and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        return ((params[0].name, module),)
    return ()
