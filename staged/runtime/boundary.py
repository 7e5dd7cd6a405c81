"""Compiled calls whose results are differentiated outside them (Note [autograd boundary]).

Note [autograd boundary]: ``model = torch.compile(model)`` followed by ``loss.backward()``
outside the call, as nanoGPT and PyTorch 2's tutorials write it, differentiates a compiled
call's results. A compiled module returns values, not nodes of an autograd graph, so such
a call runs as one custom autograd ``Function`` with two compiled halves:

- *forward*: the body traced and compiled under ``no_grad`` (the key of an inference call,
  so the same module serves evaluation), whose results become the outputs of one Node;
- *backward*: when the engine reaches that Node, ``vjp`` -- the body run again and
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
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autodiff.random import uniform
from ..autograd import grad as autograd_grad
from ..autograd.function import Function
from ..eager.grad_mode import _state, enable_grad
from ..eager.tensor import Tensor
from ..tracing.capture import Captured, state_lock
from ..tracing.pytree import flatten, unflatten
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


class Differentiable:
    """The entry of a ``Compiled`` for a grad-mode key whose results require grad: runs
    the call as one ``_CompiledCall`` Node (Note [autograd boundary]). Answers to what
    ``Compiled`` asks of its entries (``guard_failure``, ``run``, ``captured``...)."""

    background = None
    number = 0

    def __init__(self, owner, captured: Captured, guard_failure):
        self.owner, self.captured = owner, captured
        self.guard_failure = guard_failure  # the grad-mode trace's guards
        self.times: dict = {}
        self.cache: dict = {}
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
        """The compiled no-grad call, with what the backward needs kept on ``ctx``."""
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
        args, kwargs = unflatten(self.captured.in_tree, list(leaves))
        flat, tree = flatten(self.owner.forward_of(self, args, kwargs), lambda o: False)
        holder.append((flat, tree))
        for j in self.positions:
            if not isinstance(flat[j], Tensor):
                raise RuntimeError(
                    "staged.compile: the call returned a tensor requiring grad when traced "
                    "with grad enabled, but not under no_grad; it cannot be differentiated "
                    "as one compiled call"
                )
        return tuple(flat[j] for j in self.positions)

    def backward(self, ctx, cotangents) -> list:
        """The gradients of the call's grad-requiring tensor arguments, then of its
        grad-requiring state, from the compiled recomputation."""
        saved = iter(ctx.saved_tensors)
        leaves = [next(saved) if x is None else x for x in ctx.leaves]
        args, kwargs = unflatten(self.captured.in_tree, leaves)
        if self._vjp is None:
            o = self.owner
            self._vjp = type(o)(self._vjp_body, o.backend, o.dynamic, None, o.device, o.rng, o.mode)
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
                with enable_grad():  # the recomputation is differentiated
                    grads = self._vjp(args, kwargs, list(cotangents))
            finally:
                for g, s in zip(self.generators, now):
                    g.load_host_state(s)
                for t, p in zip(self.updated, after):
                    t._payload = p
        return list(grads)

    def _vjp_body(self, args, kwargs, cotangents):
        flat, _ = flatten(self.owner.fn(*args, **kwargs), lambda o: False)
        leaves, _ = flatten((args, kwargs), lambda o: False)
        wrt = [x for x in leaves if isinstance(x, Tensor) and x._requires_grad]
        outs = [flat[j] for j in self.positions]
        return autograd_grad(outs, wrt + self.wrt_state, cotangents, allow_unused=True)


class _CompiledCall(Function):
    """One compiled call as a Node: ``forward`` runs the compiled no-grad module,
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
