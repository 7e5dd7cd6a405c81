"""The backward engine: dependency counting and a ready queue, never recursion.

Nodes run when every gradient flowing into them has arrived; among ready nodes the one
created last runs first (PyTorch's sequence-number order, AccumulateGrad first of all).
Each call is its own graph task, so several threads can run backward at once.

Note [hook order]: for each Node the engine runs, in this order: the tensor hooks of
its outputs (``Tensor.register_hook``; they may replace the gradient), the ``.grad`` of
outputs that ``retain_grad`` (this is PyTorch 2.13's order: the seed lists it after the
Node pre-hooks, but torch fills it before them), the Node's pre-hooks, the Node itself
(AccumulateGrad runs the post-accumulate-grad hooks of its leaf), the Node's post-hooks.
Tensor hooks and retain_grad run whenever the gradient of that tensor is computed, also
when its Node does not run (``autograd.grad`` with it in ``inputs``).

Note [gradient ownership]: the engine hands each gradient to the Node that consumes it
and keeps no reference of its own (``_call_node`` pops it from the input buffer; the
loop drops its output list). So a leaf's AccumulateGrad can tell from reference counts,
as PyTorch's does from ``use_count()``, whether a gradient is its alone and may become
``.grad`` without a copy, or is shared (the same tensor sent to two leaves by ``add``'s
VJP, the caller's ``gradient``, one a hook kept) and must be copied, since ``.grad`` is
later accumulated into in place.
"""

from __future__ import annotations

import heapq
import itertools
import sys
import threading
from collections.abc import Mapping
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from ..eager import factories as _factories
from ..eager.grad_mode import _state
from ..eager.interceptor import call_hook, tags
from ..eager.legacy_types import cpp_type_name
from .._where import at_user, warn_user
from ..eager.tensor import Size, Tensor
from . import anomaly, batched_grad, profiler
from .accumulate import accumulate_grad, add_grads
from .node import Node, sync

_ndarray = np.ndarray
_refcount = sys.getrefcount


def _sole_refs() -> tuple[int, int]:
    """``getrefcount`` of a gradient only a local holds and of its payload, counted as the
    loop counts them: Python counts the call's argument, code compiled by Cython does not
    (Note [native modules] in staged/_native.py)."""
    g = SimpleNamespace(_payload=object())
    return _refcount(g), _refcount(g._payload)


_SOLE, _SOLE_PAYLOAD = _sole_refs()


class GradientEdge(NamedTuple):
    """Where the gradient of a tensor enters the graph: ``node``'s input ``output_nr``
    (``ownership_token``: torch's field, which keeps a C++ graph alive; unused here)."""

    node: Node
    output_nr: int
    ownership_token: Node | None = None


class _Task(threading.local):
    current = None  # the graph task this thread is running (hooks ask it questions)


_task = _Task()
_task_ids = itertools.count()


class GraphTask:
    """One backward()/grad() call: its id, which Nodes it will execute (``nodes``, those
    reachable, unless ``needed``), the leaves' Nodes whose gradients ``autograd.grad``
    returns (``captured_leaves``), and the callbacks to run when it has finished
    (``queue_callback``)."""

    __slots__ = ("callbacks", "captured_leaves", "id", "needed", "nodes")

    def __init__(self, nodes, needed, captured_leaves=()):
        self.id = next(_task_ids)
        self.nodes, self.needed = nodes, needed
        self.captured_leaves = captured_leaves
        self.callbacks = []

    def will_execute(self, node) -> bool:
        """torch's ``_will_engine_execute_node``, and its refusal of a leaf whose gradient
        ``autograd.grad`` returns (``register_multi_grad_hook`` asks it)."""
        if self.needed is not None:
            if node in self.captured_leaves:
                raise RuntimeError(
                    "A leaf node was passed to _will_engine_execute_node but we are "
                    "currently running autograd.grad(). This is currently not supported."
                )
            return node in self.needed
        return node in self.nodes


def current_graph_task():
    """The graph task running on this thread, or None outside backward."""
    return _task.current


def queue_callback(callback) -> None:
    """Run ``callback()`` when the running backward pass has executed its last Node
    (PyTorch's ``Variable._execution_engine.queue_callback``; DDP waits for its
    all-reduces there)."""
    if _task.current is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    _task.current.callbacks.append(callback)


def _as_tuple(x):
    if x is None or type(x) is tuple:
        return x
    if isinstance(x, (Tensor, GradientEdge)):
        return (x,)
    return tuple(x)


def _as_inputs(x, what: str):
    """``inputs`` of ``grad()``/``backward()`` as a tuple, as torch reads them: a Tensor or
    GradientEdge, a ``dict`` (its values; no other Mapping) or any iterable of them."""
    if x is None:
        return None
    if type(x) is dict:
        x = tuple(x.values())
    elif isinstance(x, Mapping):
        raise TypeError(
            f"`inputs` argument to `{what}()` must be a dict, not {type(x).__name__}. "
            "Other Mapping types are not supported."
        )
    x = _as_tuple(x)
    if x is not None and len(x) == 0:
        raise RuntimeError(f"`inputs` argument to `{what}()` cannot be empty.")
    for t in x or ():
        if not isinstance(t, (Tensor, GradientEdge)):
            raise RuntimeError(
                "all inputs have to be Tensors or GradientEdges, but got " + type(t).__name__
            )
    return x


def _matched(outputs, grads):
    """``grads``, one per output: as torch's, more than there are outputs are ignored
    (zipped with them), fewer raise."""
    if grads is None:
        return None
    if len(grads) < len(outputs):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grads)} gradients")
    return grads[: len(outputs)]


def gradient_edge(t) -> GradientEdge:
    """The edge where ``t``'s gradient enters the graph (its grad_fn's input, or its
    AccumulateGrad for a leaf); a GradientEdge is returned as is."""
    if isinstance(t, GradientEdge):
        return t
    return GradientEdge(*_edge(t))


def _edge(t) -> tuple:
    """``gradient_edge(t)`` of a tensor as a plain ``(node, input_nr)``."""
    if t._base is not None and t._view.version != t._vc[0]:
        sync(t)
    fn = t.grad_fn
    if fn is not None:
        return fn, t._output_nr
    return t._grad_accumulator(), 0


def _shape(t) -> tuple:
    """The shape of an output: a tensor's, or the gradient's of a GradientEdge."""
    return _edge_aval(t)[0] if isinstance(t, GradientEdge) else tuple(t.shape)


def _edge_aval(edge: GradientEdge):
    """The shape and dtype of the gradient ``edge`` takes (as torch's input metadata): its
    leaf's, or what ``get_gradient_edge`` noted on its node."""
    node, nr = edge.node, edge.output_nr
    if node.variable is not None:
        return tuple(node.variable.shape), node.variable.dtype
    noted = node._edge_avals
    if noted is None or nr not in noted:
        raise RuntimeError(
            f"the shape of the gradient of {edge} is unknown: make the edge with "
            "torch.autograd.graph.get_gradient_edge(tensor)"
        )
    return noted[nr]


def _root_edges(tensors, what="tensors"):
    edges = []
    for i, t in enumerate(tensors):
        if isinstance(t, GradientEdge):
            edges.append(t)
            continue
        if not isinstance(t, Tensor):
            raise TypeError(at_user(f"{what}[{i}] must be a Tensor, got {type(t).__name__}"))
        if t.grad_fn is None and not t._requires_grad:
            raise RuntimeError(
                at_user(f"element {i} of tensors does not require grad and does not have a grad_fn")
            )
        edges.append(_edge(t))
    return edges


def _make_grads(outputs, grads):
    out = []
    for i, t in enumerate(outputs):
        g = None if grads is None else grads[i]
        if isinstance(t, GradientEdge):
            shape, dtype = _edge_aval(t)
            leaf = False
        else:
            p = t._payload
            if g is None and type(p) is _ndarray and p.size == 1 and p.dtype.kind in "fV":
                out.append(_factories._new(_ones(p.shape, p.dtype), False))  # ones_like's
                continue
            shape, dtype, leaf = tuple(t.shape), t.dtype, t.grad_fn is None
        if g is None:
            if not all(d == 1 for d in shape):
                raise RuntimeError(
                    at_user("grad can be implicitly created only for scalar outputs")
                    + f" (this one has shape "
                    f"{list(shape)}: reduce it, e.g. loss.sum() or "
                    "loss.mean(), or pass backward(gradient=...))"
                )
            if not dtype.is_floating_point:
                raise RuntimeError(
                    f"grad can be implicitly created only for real scalar outputs but got {dtype}"
                )
            edge = isinstance(t, GradientEdge)
            g = _factories.ones(*shape, dtype=dtype) if edge else _factories.ones_like(t)
        elif not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
        else:
            if tuple(g.shape) != shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of "
                    f"{g.shape} and output[{i}] has a shape of {Size(shape)}."
                )
            if g.dtype.is_complex != dtype.is_complex:
                raise RuntimeError(
                    f"For complex Tensors, both grad_output and output are "
                    f"required to have the same dtype. Mismatch in dtype: "
                    f"grad_output[{i}] has a dtype of {g.dtype} and "
                    f"output[{i}] has a dtype of {dtype}."
                )
            if leaf:
                g = g.detach().clone()  # it may be stored as a leaf's .grad and mutated
        out.append(g)
    return out


_ONES: dict = {}  # (shape, dtype) -> a one of that size-1 shape, copied for each backward


def _ones(shape, dtype):
    """``np.ones(shape, dtype)`` of a size-1 shape, a copy of a cached one (a third of
    the cost: np.ones fills a new empty array in Python)."""
    one = _ONES.get((shape, dtype))
    if one is None:
        one = _ONES[shape, dtype] = np.ones(shape, dtype)
    return one.copy()


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Compute gradients of ``tensors`` and accumulate them into leaves' ``.grad``."""
    tensors = _as_tuple(tensors)
    grad_tensors = _matched(tensors, _as_tuple(grad_tensors))
    if inputs is not None:
        inputs = _as_inputs(inputs, "backward")
        for t in inputs:
            if isinstance(t, Tensor):
                if t._requires_grad:
                    _edge(t)  # a stale view's grad_fn regenerated first, as torch's
                t.retain_grad()  # as torch: its .grad filled by later backwards too
    if retain_graph is None:
        retain_graph = create_graph
    edges = _root_edges(tensors)
    grads = _make_grads(tensors, grad_tensors)
    _execute(edges, grads, retain_graph, create_graph, inputs, accumulate=True)


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    allow_unused=None,
    is_grads_batched=False,
    materialize_grads=False,
    *,
    only_inputs=True,
):
    """Return the gradients of ``outputs`` (tensors or GradientEdges) with respect to
    ``inputs`` (no ``.grad`` is touched): a tuple, or for a ``dict`` of inputs a dict with
    its keys. ``is_grads_batched``: the first dim of each grad_output is a batch of
    cotangents, and each result has that batch dim first (``batched_grad.py``).
    ``only_inputs`` is torch's deprecated flag, ignored with its warning."""
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when "
            "materialize_grads=True, but got: allow_unused=False."
        )
    allow_unused = materialize_grads or bool(allow_unused)
    outputs = _as_tuple(outputs)
    keys = inputs.keys() if type(inputs) is dict else None
    inputs = _as_inputs(inputs, "grad")
    if not only_inputs:
        warn_user(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To "
            "accumulate gradient for other parts of the graph, please use "
            "torch.autograd.backward.",
            FutureWarning,
        )
    grad_outputs = _matched(outputs, _as_tuple(grad_outputs))
    edges = _root_edges(outputs, "outputs")  # torch checks the outputs before the inputs
    for t in inputs:
        if isinstance(t, Tensor) and not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        grads = batched_grad.check_batched(outputs, grad_outputs, _make_grads, _shape)
        result = batched_grad.run_batched(
            lambda gs: _execute(
                edges, _make_grads(outputs, gs), retain_graph, create_graph, inputs, False
            ),
            grads,
            len(inputs),
        )
    else:
        grads = _make_grads(outputs, grad_outputs)
        result = _execute(edges, grads, retain_graph, create_graph, inputs, accumulate=False)
    for i, g in enumerate(result):
        if g is None:
            if materialize_grads and isinstance(inputs[i], GradientEdge):
                raise RuntimeError(
                    "materialize_grads cannot be used when the given input is a GradientEdge"
                )
            if materialize_grads:
                result[i] = _factories.zeros_like(inputs[i], requires_grad=create_graph)
            elif not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not "
                    "have been used in the graph. Set allow_unused=True if this "
                    "is the desired behavior."
                )
    return tuple(result) if keys is None else dict(zip(keys, result))


def _discover(roots):
    """Dependency counts of every node reachable from ``roots`` (a root reached from no
    other root counts 0), in the order discovered."""
    deps = dict.fromkeys(roots, 0)
    stack = list(roots)
    while stack:
        for nxt, _ in stack.pop().next_functions:
            if nxt is None:
                continue
            if nxt in deps:
                deps[nxt] += 1
            else:
                deps[nxt] = 1
                stack.append(nxt)
    return deps


def _needed(order, targets):
    """Nodes from which some target can be reached (only those need to run)."""
    needed = set(targets)
    changed = True
    while changed:  # order is the discovery order; iterate to a fixed point
        changed = False
        for node in reversed(order):
            if node in needed:
                continue
            for nxt, _ in node.next_functions:
                if nxt in needed:
                    needed.add(node)
                    changed = True
                    break
    return needed


def _execute(root_edges, root_grads, retain_graph, create_graph, inputs, accumulate):
    roots = []
    buffers = {}
    for edge, g in zip(root_edges, root_grads):
        node = edge[0]
        if node not in buffers:
            roots.append(node)
        _arrive(buffers, node, edge[1], g)
    deps = _discover(roots)

    visit = runs = captures = None  # None: every node runs, nothing is captured
    captured = []
    captured_leaves: set = set()
    if inputs is not None:
        captures = {}  # {(node, nr): [indices into inputs]}
        for i, t in enumerate(inputs):
            captures.setdefault(t[:2] if isinstance(t, GradientEdge) else _edge(t), []).append(i)
        targets = {n for n, _ in captures}
        if not accumulate:
            captured_leaves = {n for n in targets if not n.next_functions}
        visit = _needed(list(deps), targets)
        runs = (
            visit
            if accumulate
            else {
                # grad(): a target's Node runs only if another target lies beyond it
                n
                for n in visit
                if n not in targets or any(nxt in visit for nxt, _ in n.next_functions)
            }
        )
        captured = [None] * len(inputs)
    checked = profiler.current is not None or anomaly.enabled
    general = checked or inputs is not None
    opts = (retain_graph, checked, captures, captured, runs, visit)  # _run_general's

    # Note [plain nodes]: without profiler, anomaly mode or ``inputs``, a Node that is
    # ``_plain`` (one output, no Node or tensor hooks; node.py), has its gradient and no
    # retain_grad is called right in the loop, a leaf's AccumulateGrad without tensor
    # hooks accumulates there; any other goes through _run_general, which takes the same
    # decisions with every feature checked.

    tick = itertools.count()
    if len(roots) == 1:  # backward() of one tensor: no ready queue to start from
        ready = []
        node = roots[0] if deps[roots[0]] == 0 else None
    else:
        ready = [(-n._seq, next(tick), n) for n in roots if deps[n] == 0]
        heapq.heapify(ready)
        node = heapq.heappop(ready)[2] if ready else None
    pop, push = heapq.heappop, heapq.heappush
    prev = _state.grad_enabled
    _state.grad_enabled = create_graph
    prev_task, _task.current = _task.current, GraphTask(deps, visit, captured_leaves)
    prev_phase, tags.phase = tags.phase, "backward"  # Note [phases]
    try:
        while node is not None:
            g = buffers.pop(node, None)
            var = node.variable
            if (
                general
                or g is None
                or type(g) is dict
                or not node._plain
                or node._retain_grad
                or var is not None
                and var._hooks
            ):
                buf = g if type(g) is dict else {} if g is None else {0: g}
                g = None
                outs = _run_general(node, buf, opts)
                buf = None
            elif var is not None:  # a leaf: AccumulateGrad.apply, inline
                # g is ours alone: only this frame holds it (Note [gradient ownership])
                owned = (
                    (type(g) is Tensor or not g.is_sparse)  # Note [sparse gradients]
                    and _refcount(g) <= _SOLE
                    and _refcount(g._payload) <= _SOLE_PAYLOAD
                )
                with node._lock:
                    accumulate_grad(var, g, owned)
                g = None
                node = pop(ready)[2] if ready else None
                continue
            else:
                grads = [g]
                g = None  # the list holds the only reference
                outs = node._step(grads, retain_graph)
                grads = None
            single = None  # the one node this one made ready, while no other is ready
            for (nxt, nr), g in zip(node.next_functions, outs):
                if nxt is None:
                    continue
                if g is not None:
                    if nr == 0 and nxt not in buffers:
                        buffers[nxt] = g
                    else:
                        _arrive(buffers, nxt, nr, g)
                left = deps[nxt] - 1
                deps[nxt] = left
                if left == 0 and (visit is None or nxt in visit):
                    if single is None and not ready:
                        single = nxt
                        continue
                    if single is not None:
                        push(ready, (-single._seq, next(tick), single))
                        single = None
                    push(ready, (-nxt._seq, next(tick), nxt))
            outs = g = None  # hand gradients over: AccumulateGrad steals unshared ones
            node = single if single is not None else pop(ready)[2] if ready else None
        callbacks = _task.current.callbacks
        while callbacks:  # a callback may queue another
            callbacks.pop(0)()
    finally:
        _state.grad_enabled = prev
        _task.current = prev_task
        tags.phase = prev_phase
    return captured


def _arrive(buffers, node, nr, g):
    """Add gradient ``g`` of ``node``'s output ``nr`` to its input buffer: the tensor
    itself while only output 0 has one (most Nodes have one output), else ``{nr: g}``."""
    b = buffers.get(node)
    if b is None:
        buffers[node] = g if nr == 0 else {nr: g}
    elif type(b) is dict:
        b[nr] = add_grads(b[nr], g) if nr in b else g
    elif nr == 0:
        buffers[node] = add_grads(b, g)
    else:
        buffers[node] = {0: b, nr: g}


def _run_general(node, buf, opts):
    """One Node with whatever is on: its tensor hooks and retain_grad, the gradients
    ``inputs`` captures, whether it runs at all, profiler and anomaly checks."""
    retain_graph, checked, captures, captured, runs, visit = opts
    var = node.variable
    if node._tensor_pre_hooks or node._retain_grad or var is not None and var._hooks:
        _run_tensor_hooks(node, buf)
    if captures is not None:
        for nr, g in buf.items():
            for i in captures.get((node, nr), ()):
                captured[i] = g  # (backward() made each tensor input retain its grad)
        g = None
        if node not in runs:
            return (None,) * len(node.next_functions)
    if checked:
        return _run_node(node, buf, retain_graph, visit)
    return _call_node(node, buf, retain_graph, visit)


def _run_tensor_hooks(node, buf):
    hooks = node._tensor_pre_hooks
    var = node.variable
    if var is not None and var._hooks:
        hooks = {0: var._hooks}
    if hooks:
        for nr, fns in hooks.items():
            g = buf.get(nr)  # None: an output no gradient reached, which torch's hooks see
            for fn in tuple(fns.values()):
                r = call_hook(fn, g)
                if r is not None:
                    if g is None:
                        raise RuntimeError("can't replace a None gradient with a non-None value")
                    g = _checked_hook_value(fn, g, r)
            if g is not None:
                buf[nr] = g
    if node._retain_grad:
        for nr, ref in node._retain_grad.items():
            t = ref()
            if t is not None:
                _retain(t, buf.get(nr))


def _checked_hook_value(fn, g, r):
    """A tensor hook may replace the gradient, not change its shape or dtype (PyTorch's
    check: a broadcastable wrong shape would otherwise be summed away silently)."""
    name = getattr(fn, "__name__", fn)
    if not isinstance(r, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(r).__name__}'")
    if r.dtype is not g.dtype:
        raise RuntimeError(
            f"hook '{name}' has changed the type of value "
            f"(was {cpp_type_name(g.dtype)} got {cpp_type_name(r.dtype)})"
        )
    if tuple(r.shape) != tuple(g.shape):
        raise RuntimeError(f"hook '{name}' has changed the size of value")
    return r


def _retain(t, g):
    if g is None:
        return
    if t._grad is None:
        t._grad = g if _state.grad_enabled else g.detach().clone()
    else:
        t._grad = add_grads(t._grad, g)


def _run_node(node, buf, retain_graph, needed):
    """``_call_node`` with anomaly checks and profiling (the engine calls ``_call_node``
    directly when both are off)."""
    if profiler.current is not None:
        return profiler.run_node(_checked_call, node, buf, retain_graph, needed)
    return _checked_call(node, buf, retain_graph, needed)


def _checked_call(node, buf, retain_graph, needed):
    if not anomaly.enabled:
        return _call_node(node, buf, retain_graph, needed)
    try:
        outs = _call_node(node, buf, retain_graph, needed)
        if anomaly.check_nan:
            anomaly.check_outputs(node, outs)
    except Exception:
        anomaly.report_error(node)
        raise
    return outs


def _call_node(node, buf, retain_graph, needed=None):
    """Pre-hooks, the Node, post-hooks (Note [hook order]); frees it unless retained.
    The gradients are taken out of ``buf`` (Note [gradient ownership]). ``needed``: the
    Nodes this graph task runs or captures, when ``inputs`` limits it; a gradient into
    any other is not computed (torch's ``should_compute_output``: its hooks see None)."""
    n = node.num_outputs
    if node._pre_hooks:
        grads = tuple(buf.get(i) for i in range(_arity(n, buf)))
        for fn in tuple(node._pre_hooks.values()):
            r = call_hook(fn, grads)
            if r is not None:
                grads = _hook_result(fn, r, grads)
        grads = list(grads)
    elif n == 1 and len(buf) == 1 and 0 in buf:
        grads = [buf.pop(0)]
    else:
        grads = [buf.pop(i, None) for i in range(_arity(n, buf))]
    for g in grads:
        if g is not None:
            g = None  # no reference of ours left: the Node may keep the gradient
            outs = node.apply(grads) if needed is None else node._apply_needed(grads, needed)
            break
    else:
        outs = (None,) * len(node.next_functions)
    if node._post_hooks:
        outs = tuple(outs)
        for fn in tuple(node._post_hooks.values()):
            r = call_hook(fn, outs, tuple(grads))
            if r is not None:
                outs = _hook_result(fn, r, outs)
    if not retain_graph:
        node.release_variables()
    return outs


def _hook_result(fn, r, before):
    """A Node hook's gradients in place of ``before``: as many, each None or a tensor of
    the dtype and shape it replaces (PyTorch's checks, as for tensor hooks)."""
    if type(r) is not tuple:
        raise TypeError(f"expected tuple, but hook returned '{type(r).__name__}'")
    if len(r) != len(before):
        raise RuntimeError(
            f"hook '{getattr(fn, '__name__', fn)}' has returned an incorrect "
            f"number of values (got {len(r)}, but expected {len(before)})"
        )
    for g, new in zip(before, r):
        if new is not None:
            if g is None:
                raise RuntimeError("can't replace a None gradient with a non-None value")
            _checked_hook_value(fn, g, new)
    return r


def _arity(n, buf):
    return max(n, max(buf) + 1) if buf else n
