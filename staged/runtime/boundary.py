"""Compiled calls whose results are differentiated outside them (Note [autograd boundary]).

Note [autograd boundary]: ``model = torch.compile(model)`` followed by ``loss.backward()``
outside the call, as nanoGPT and PyTorch 2's tutorials write it, differentiates a compiled
call's results. A compiled module returns values, not nodes of an autograd graph, so such
a call runs as one custom autograd ``Function`` with two compiled halves:

- *forward*: the grad-mode trace compiled as it is (a ``CompiledGraph``: no backward in
  it), whose results become the outputs of one Node;
- *backward*: when the engine reaches that Node, ``vjp`` -- the forward recomputed and
  differentiated by ``autograd.grad`` with the Node's cotangents -- compiled as a step of
  its own, returning the gradients of the call's tensor arguments that require grad and of
  the state tensors (parameters) that do. The engine then accumulates them as for any
  Node, so ``.grad``, hooks on the parameters and DDP's post-accumulate hooks run eagerly,
  once.

The backward recomputes the forward (what activation checkpointing does) rather than
saving its intermediates: a compiled module's internals are not Python-visible values,
and recomputing keeps the two halves ordinary compiled steps, cached and guarded as any.
So it sees the forward's inputs exactly: the argument tensors are saved (an in-place
change before backward raises, as for any saved tensor; those the call itself writes in
place are kept as copies of what they were), the buffers the forward updated
(BatchNorm's running statistics) are put back to their values before it for the
recomputation and restored after it, and the generators the forward drew from (dropout)
are replayed from their states before it and restored after (Note [host draws]), so the
masks are the forward's and the random stream advances once. The cost is one more forward
in the backward, and a second compile for its module.

What this cannot reproduce runs eagerly instead, with one warning saying why: a body whose
trace stores new tensors (one-shot), uses collectives, draws from the in-graph counter
stream (``rng="counter"`` gives new numbers at every call), writes in place into an
argument that requires grad, or reads a parameter with a tensor hook (``autograd.grad`` in the recomputation would run it, and the engine again).
A double backward through the call (``create_graph=True``) raises.

Note [one trace per call]: the trace runs the body's Python, as torch.compile's does, and
only it: ``self.calls += 1``, ``print`` and the like happen once for the call that traces,
then never for calls its guards pass (a counter the body reads and writes on a Module is
set again after every call and guarded per value, Note [attribute writes]: equal to
eager's, call for call). So neither half traces the body again: the forward is the
grad-mode trace's graph, and the recomputation is that graph's ops run on the
recomputation's tensors through eager dispatch (``run_ops``, as Note [first eager call]
runs them, an op's inputs that did not require grad in the trace detached), traced once
per Node's key with the forward's draws (``Program.run`` again from the generators' states
before it) as arguments. Where the trace's autograd graph held more than its ops (a custom
Function's backward, a hook on an intermediate tensor: ``op_grads`` is None), its draws
program makes deferred calls, it read an argument's ``.grad``, or the batch is dynamic
(the graph is traced at one size; making it dynamic traces the body at a second size,
as for any step), the recomputation runs ``fn`` as before: the body's Python runs once
more, at the first backward of each trace.

Note [first eager call]: the call that finds a body must run eagerly has already traced it:
its Python ran once (``log.append(y)``, ``self.calls += 1``, ``print``), and what it stored
outside holds the trace's tensors, of no data. Running ``fn`` again would do all of that
twice and leave those tensors without data. So that call runs its trace instead: the
graph's ops on the call's own tensors through eager dispatch (``OnTensors``, a module for
``CompiledGraph._run``, which binds it as any compiled call), each op's inputs that did not
require grad in the trace detached (``Captured.op_grads``: ``detach()``, ``no_grad``
blocks), so autograd records the graph the trace's own autograd made, and the tensors the
body returned or stored that required grad get it (``_adopt``). Later calls run ``fn``.
Where that graph holds more than the ops (a custom Function's backward, a hook on an
intermediate tensor: ``op_grads`` is None), or the call runs collectives, or it writes an
argument that requires grad in place (eager code gives the argument the new history), the
first call runs ``fn`` too, its Python twice, and the warning says so.

A body that returns nothing requiring grad but stores a tensor that does outside itself
(``self.last = self.fc(x)``, ``log.append(y)``, with ``loss.detach()`` returned) is
one-shot: every call traces it, once. Its call runs as its graph the same way
(``stores_graph``), so the stored tensor gets eager's graph and a backward through it
reaches the parameters. Where ``op_grads`` is None, or the body ran a backward of its own
(eagerly that frees the graph), or ``reruns_fn`` says so, the tensor keeps no graph: a
backward through it raises ``STORED`` (compiled.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autodiff.random import uniform
from ..autograd import grad as autograd_grad
from ..autograd.function import Function
from ..eager.dispatch import apply
from ..eager.grad_mode import _state, enable_grad
from ..eager.tensor import Tensor
from ..tracing.capture import Captured, state_lock
from ..tracing.pytree import flatten, unflatten
from .background import Interpreter, _root
from .checks import StepCheck
from .segmented import has_collectives


def eager_reason(c: Captured) -> str | None:
    """Why the grad-mode trace ``c`` cannot run as a differentiable compiled call, or None."""
    if c.one_shot:
        return "its trace stores new tensors outside itself"
    if has_collectives(c.graph):
        return "it runs collectives"
    if any(op.prim is uniform for op in c.graph.ops):  # Note [counter-based RNG]
        return "it draws random numbers from the counter-based stream (rng='counter')"
    wrappers = dict(c.arg_wrappers)
    for i, k in c.arg_updates:
        if wrappers[i]._requires_grad:
            return (
                f"it writes its argument {c.graph.outputs[k].name}, which requires grad, in place"
            )
    for w in c.state:
        t = w.tensor
        if t._requires_grad and t._hooks:
            return f"state tensor {w.name} requires grad and has a tensor hook"
    return None


def reruns_fn(c: Captured) -> bool:
    """Whether the first call of an eager trace ``c`` runs ``fn`` again rather than its
    graph (Note [first eager call])."""
    wrappers = dict(c.arg_wrappers)
    return (
        c.op_grads is None
        or has_collectives(c.graph)
        or any(wrappers[i]._requires_grad for i, _ in c.arg_updates)
    )


def stores_graph(c: Captured) -> bool:
    """Whether the call that traced ``c`` runs as its graph (``run_traced``) so that the
    tensors requiring grad it stored outside get their graph (Note [first eager call])."""
    return bool(c.escaped_grad) and not reruns_fn(c)


def run_traced(entry, leaves):
    """The call that traced ``entry`` (a ``CompiledGraph``, whose module this replaces) run
    as its graph on the call's tensors, recorded by autograd (Note [first eager call])."""
    c = entry.captured
    module = entry.module = OnTensors(entry, leaves)
    entry._checks = None  # raised by the module, before the call writes anything
    for t, _ in c.escaped:  # a counter of the trace's (a view's is its base's): setting
        t._vc = [0]  # their data is no change to a parameter this call's graph saved
    out = entry.run(leaves)
    flat, _ = flatten(out, lambda o: False)
    for pos, (kind, k) in enumerate(c.out_leaves):
        if kind == "value" and k in c.grad_results:
            _adopt(flat[pos], module.made[k])
    for t, k in c.escaped:
        if k in c.escaped_grad:
            _adopt(t, module.made[k])
    return out


def _adopt(t: Tensor, made: Tensor) -> None:
    """``t``, holding ``made``'s data, takes its place in autograd's graph."""
    t._requires_grad, t.grad_fn, t._output_nr, t._vc = (
        made._requires_grad,
        made.grad_fn,
        made._output_nr,
        made._vc,
    )
    if made._base is not None:
        t._base, t._view = made._base, made._view


def bound(c: Captured, leaves) -> list:
    """The tensors bound to the inputs of ``c``'s graph before its draws, in ``_run``'s
    order: the arguments (each with its ``.grad`` where the trace read one), the state."""
    own = []
    for i, w in c.arg_wrappers:
        own.append(leaves[i])
        if w._grad is not None:
            own.append(leaves[i]._grad)
    return own + [w.tensor for w in c.state]


def run_ops(c: Captured, own: list) -> list:
    """The outputs of ``c``'s graph, its ops applied to ``own`` (the tensors bound to its
    inputs) through eager dispatch, each op's inputs that did not require grad in the trace
    detached (``Captured.op_grads``), so autograd records the graph the trace's made. An
    output behind the index checks' select is the value before it (``Captured.unchecked``:
    the select's operands require no grad in the trace); a failed check raises before
    these are used, and eager dispatch raises for an index out of range itself."""
    g = c.graph
    env = {v.id: Tensor._wrap(a) for v, a in g.consts}
    env.update((i.value.id, t) for i, t in zip(g.inputs, own))
    grads = c.op_grads or {}
    for op in g.ops:
        mask = grads.get(op.out.id) or (False,) * len(op.inputs)
        ins = [env[v.id] for v in op.inputs]
        ins = [t.detach() if t._requires_grad and not m else t for t, m in zip(ins, mask)]
        env[op.out.id] = apply(op.prim, ins, op.params)
    return [env[c.unchecked.get(k, o.value).id] for k, o in enumerate(g.outputs)]


class OnTensors(Interpreter):
    """Runs the graph of ``entry`` on the call's ``leaves`` and state tensors through eager
    dispatch, keeping the tensors of its outputs in ``made`` (Note [first eager call])."""

    def __init__(self, entry, leaves):  # (none of the Interpreter's tables are needed)
        self.entry, self.leaves, self.device = entry, leaves, entry.device  # (the profiler's)
        self.made: list = []

    def invoke(self, fn_name, args, result_dtypes=None, undo=None) -> list:
        c = self.entry.captured
        g = c.graph
        own = bound(c, self.leaves)  # then the draws
        own += [Tensor._wrap(np.asarray(a)) for a in args[len(own) :]]
        self.made = run_ops(c, own)
        adopted = {*c.grad_results, *c.escaped_grad}
        roots = {id(_root(a)) for _, a in g.consts}
        roots |= {id(_root(t._payload)) for t in own if type(t._payload) is np.ndarray}
        res = []  # the others each their own writable array, as a module's (Interpreter)
        for k, t in enumerate(self.made):
            a = t._payload
            if k not in adopted:
                a = np.asarray(a)
                r = id(_root(a))
                if r in roots or not a.flags.writeable:
                    a = a.copy()
                roots.add(r)
            res.append(a)
        if c.checks and c.check_output < len(g.outputs):  # Note [index checks]
            StepCheck(res[c.check_output], c.checks)()
        return res


class Differentiable:
    """The entry of a ``Compiled`` for a grad-mode key whose results require grad: runs
    the call as one ``_CompiledCall`` Node (Note [autograd boundary]), its forward the
    grad-mode trace compiled (``forward``, a ``CompiledGraph``). Answers to what
    ``Compiled`` asks of its entries (``guard_failure``, ``run``, ``captured``...)."""

    background = None
    fitted = None  # Compiled._fits's, as a CompiledGraph's
    number = 0

    def __init__(self, owner, forward, replays: bool):
        """``replays``: the recomputation runs the trace's graph, not ``fn`` (Note [one
        trace per call])."""
        self.owner, self.fwd = owner, forward
        captured = self.captured = forward.captured
        self.guard_failure = forward.guard_failure  # the grad-mode trace's guards
        self.times, self.cache = forward.times, forward.cache
        self.positions = [  # which result leaves require grad
            j
            for j, (kind, k) in enumerate(captured.out_leaves)
            if kind == "value" and k in captured.grad_results
        ]
        self.wrt_state = [w.tensor for w in captured.state if w.tensor._requires_grad]
        self.updated = [w.tensor for w, _ in captured.state_updates]
        self.written = {i for i, _ in captured.arg_updates}
        self.generators = list(
            {id(s[1]): s[1] for s in (captured.rng.steps if captured.rng else ())}.values()
        )
        self.replays = (
            replays
            and captured.op_grads is not None
            and not (captured.rng and captured.rng.calls)
            and not _reads_arg_grads(captured)
        )
        self._vjp: Any = None  # a Compiled of _vjp_body, made at the first backward

    def run(self, leaves):
        """The call on ``leaves``: the compiled forward, recorded as one Node."""
        wrt = [x for x in leaves if isinstance(x, Tensor) and x._requires_grad]
        holder: list = []
        outs = _CompiledCall.apply(self, leaves, holder, *wrt, *self.wrt_state)
        flat, tree = holder.pop()
        for j, t in zip(self.positions, outs if isinstance(outs, tuple) else (outs,)):
            flat[j] = t
        return unflatten(tree, flat)

    def forward(self, ctx, leaves, holder):
        """The compiled call, with what the backward needs kept on ``ctx``."""
        ctx.rng = [g.host_state() for g in self.generators]
        # copies of host data: a reference of ours would count as an alias of it, into
        # which the call would copy its writes (Note [aliased memory])
        ctx.before = [
            t._payload.copy() if type(t._payload) is np.ndarray else t._payload
            for t in self.updated
        ]
        # arguments the call writes in place are kept as copies of what they were; the
        # other tensors are saved (a change before backward raises, as for any Node)
        ctx.leaves = [
            x.detach().clone() if i in self.written else None if isinstance(x, Tensor) else x
            for i, x in enumerate(leaves)
        ]
        ctx.save_for_backward(
            *[x for i, x in enumerate(leaves) if isinstance(x, Tensor) and i not in self.written]
        )
        flat, tree = flatten(self.owner._run(self.fwd, leaves), lambda o: False)
        holder.append((flat, tree))
        return tuple(flat[j] for j in self.positions)

    def backward(self, ctx, cotangents) -> list:
        """The gradients of the call's grad-requiring tensor arguments, then of its
        grad-requiring state, from the compiled recomputation."""
        saved = iter(ctx.saved_tensors)
        leaves = [next(saved) if x is None else x for x in ctx.leaves]
        if self._vjp is None:
            o = self.owner
            body, dynamic = (self._replay, False) if self.replays else (self._vjp_body, o.dynamic)
            self._vjp = type(o)(body, o.backend, dynamic, None, o.device, o.rng, o.mode)
        # the state and generators as the forward found them, for this call only: other
        # threads' calls wait (the vjp's lock first, as its calls take it)
        with self._vjp._lock, state_lock:
            now = [g.host_state() for g in self.generators]
            after = [t._payload for t in self.updated]
            for g, s in zip(self.generators, ctx.rng):
                g.load_host_state(s)
            for t, p in zip(self.updated, ctx.before):
                t._payload = p
            try:
                if self.replays:  # the forward's draws, made again from its states
                    draws = self._draws(leaves)
                    with enable_grad():  # the recomputation is differentiated
                        grads = self._vjp(leaves, draws, list(cotangents))
                else:
                    args, kwargs = unflatten(self.captured.in_tree, leaves)
                    with enable_grad():
                        grads = self._vjp(args, kwargs, list(cotangents))
            finally:
                for g, s in zip(self.generators, now):
                    g.load_host_state(s)
                for t, p in zip(self.updated, after):
                    t._payload = p
        return list(grads)

    def _draws(self, leaves) -> list:
        """The host draws of the forward (Note [host draws]), its generators at their
        states before it."""
        c = self.captured
        if c.rng is None:
            return []
        shapes = self.fwd._draw_shapes(())  # (static: a replayed graph has one batch size)
        return [Tensor._wrap(np.asarray(a)) for a in c.rng.run(shapes)]

    def _replay(self, leaves, draws, cotangents):
        """The recomputation as the trace's graph on ``leaves`` (Note [one trace per
        call]), differentiated with ``cotangents``."""
        outs = run_ops(self.captured, bound(self.captured, leaves) + draws)
        return self._grads(
            leaves, [outs[self.captured.out_leaves[j][1]] for j in self.positions], cotangents
        )

    def _vjp_body(self, args, kwargs, cotangents):
        flat, _ = flatten(self.owner.fn(*args, **kwargs), lambda o: False)
        leaves, _ = flatten((args, kwargs), lambda o: False)
        return self._grads(leaves, [flat[j] for j in self.positions], cotangents)

    def _grads(self, leaves, outs, cotangents):
        wrt = [x for x in leaves if isinstance(x, Tensor) and x._requires_grad]
        return autograd_grad(outs, wrt + self.wrt_state, cotangents, allow_unused=True)


def _reads_arg_grads(c: Captured) -> bool:
    """Whether an op of ``c``'s graph reads an argument's ``.grad`` (an input ``bound``
    takes from the argument, which the recomputation's need not have)."""
    read = {v.id for op in c.graph.ops for v in op.inputs}
    pos = 0
    for _, w in c.arg_wrappers:
        if w._grad is not None and c.graph.inputs[pos + 1].value.id in read:
            return True
        pos += 1 if w._grad is None else 2
    return False


class _CompiledCall(Function):
    """One compiled call as a Node: ``forward`` runs the compiled forward,
    ``backward`` the compiled recomputation and vjp (Note [autograd boundary])."""

    @staticmethod
    def forward(ctx, call: Differentiable, leaves, holder, *wrt):
        ctx.call = call
        return call.forward(ctx, leaves, holder)

    @staticmethod
    def backward(ctx, *cotangents):
        if _state.grad_enabled:  # create_graph=True: the compiled backward is not recorded
            raise RuntimeError(
                "staged.compile: a compiled call's backward is not differentiable (a "
                "double backward, create_graph=True, through a call whose results were "
                "differentiated outside it, as torch.compile); compute the second "
                "derivative inside the compiled function, or call it uncompiled"
            )
        return (None, None, None, *ctx.call.backward(ctx, cotangents))
