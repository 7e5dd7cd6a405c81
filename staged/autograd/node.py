"""Nodes of the backward graph: PrimitiveBackward for ops, AccumulateGrad for leaves,
CopySlices and AsStridedBackward0 for views written in place (Note [views] in eager/views.py)."""

from __future__ import annotations

import itertools
import sys
import threading
from functools import partial
from types import SimpleNamespace
from typing import Any

from ..eager.factories import zeros
from ..eager.ops.shape import cat
from ..eager.scalars import is_number, wrapped_number
from ..eager.tensor import Tensor
from ..eager.views import (
    _grad_fn,
    _requires_grad,
    check_writable,
    creation_error,
    multi_output_error,
    move_retain_grad,
    replay,
    scatter,
    select,
)
from . import anomaly
from .accumulate import accumulate_grad
from .hooks import add_hook
from .saved import SavedTensor

_next_seq = itertools.count().__next__


class Node:
    """A function of the backward graph (``grad_fn``).

    ``next_functions`` holds one ``(node, input_nr)`` edge per forward input, ``(None, 0)``
    where that input needs no gradient. A subclass implements ``apply(grads)``: one
    gradient (or None) per output in, one per edge out; ``release_variables()`` frees what
    it saved (``SavedTensor.release``). The engine runs the hooks around ``apply``
    (README, "Autograd mechanics").
    """

    # Note [node defaults]: what most Nodes never set (hooks, retain_grad, metadata) is a
    # class default, set in the instance's __dict__ (made on first write) by the few that
    # do: a Node is made with two slot writes, and the engine reads these the same way.
    __slots__ = ("next_functions", "_seq", "__dict__", "__weakref__")
    num_outputs = 1
    variable = None  # the leaf of an AccumulateGrad
    _pre_hooks: dict | None = None
    _post_hooks: dict | None = None
    _tensor_pre_hooks: dict | None = None  # {output_nr: {id: fn}} from Tensor.register_hook
    _retain_grad: dict | None = None  # {output_nr: weakref to the tensor}
    _metadata: dict | None = None
    _edge_avals: dict | None = None  # {output_nr: (shape, dtype)}: get_gradient_edge's
    # the engine calls it in its loop (Note [plain nodes] in engine.py): True for the
    # classes below that never have several outputs, False on an instance once a hook
    # is registered on it (even if later removed)
    _plain = False

    def __init__(self, next_functions=()):
        self.next_functions = next_functions
        self._seq = _next_seq()
        if anomaly.enabled:
            self.metadata["traceback_"] = anomaly.forward_stack()

    @property
    def metadata(self) -> dict:
        """A dict for the user (and anomaly mode's forward traceback), made on first use."""
        m = self._metadata
        if m is None:
            m = self._metadata = {}
        return m

    def name(self) -> str:
        return type(self).__name__

    # Note [C++ node names]: torch's Nodes written by hand in C++ (AccumulateGrad,
    # CopySlices, CopyBackwards: the last two also names staged's ops give the Nodes of
    # writes, staged/eager/ops/) answer ``name()`` with their namespace,
    # "torch::autograd::AccumulateGrad", which profiles, anomaly reports and version
    # errors show; their Python class (and a tensor's repr, ``grad_fn=<CopySlices>``) has
    # the bare name.

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    def apply(self, grads):
        raise NotImplementedError

    def release_variables(self) -> None:
        pass

    def _apply_needed(self, grads, needed):
        """``apply(grads)`` when only the gradients into Nodes in ``needed`` will be used
        (``backward(inputs=...)``, ``autograd.grad``): a Node that can leave the others out
        (as torch's generated Nodes do) returns None for them."""
        return self.apply(grads)

    def _step(self, grads, retain):
        """``apply(grads)``, then unless ``retain`` ``release_variables()``: how the engine
        calls a ``_plain`` Node (Note [plain nodes] in engine.py)."""
        outs = self.apply(grads)
        if not retain:
            self.release_variables()
        return outs

    def register_hook(self, fn):
        """Post-hook ``fn(grad_inputs, grad_outputs)``; may return new grad_inputs."""
        if self._post_hooks is None:
            self._post_hooks = {}
            self._plain = False
        return add_hook(self._post_hooks, fn)

    def register_prehook(self, fn):
        """Pre-hook ``fn(grad_outputs)``; may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = {}
            self._plain = False
        return add_hook(self._pre_hooks, fn)

    def _add_tensor_pre_hook(self, output_nr, fn):
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
            self._plain = False
        return add_hook(self._tensor_pre_hooks.setdefault(output_nr, {}), fn)


_node_init = Node.__init__


class PrimitiveBackward(Node):
    """Backward of one primitive application: calls the VJP rule of each input that needs
    a gradient, with what was saved for it. Each is of the primitive's subclass
    (``_node_class``), made by ``record``."""

    __slots__ = ("prim", "params", "rules", "saved", "_avals")
    _plain = True
    prim: Any
    params: dict
    rules: tuple
    saved: dict  # {name: SavedTensor}
    _avals: dict | None

    def name(self) -> str:
        return self.prim.node_name

    def apply(self, grads):
        return self._step(grads, True)

    def _apply_needed(self, grads, needed):
        rules = tuple(
            r if nxt is not None and nxt in needed else _NO_RULE
            for r, (nxt, _) in zip(self.rules, self.next_functions)
        )
        return self._step(grads, True, rules)

    def _step(self, grads, retain, rules=None):
        """``apply(grads)``, then unless ``retain`` ``release_variables()``: the engine's
        call (Note [plain nodes] in engine.py). ``rules``: those to run, if not all."""
        g = grads[0]
        if rules is None:
            rules = self.rules
        if g is None:
            out = [None] * len(rules)
        else:
            saved = {}  # each unpacked once per apply, as torch (unpack hooks), in plan order
            for n, s in self.saved.items():
                saved[n] = s.unpack()
            out = []
            for fn, names, rule in rules:  # (_save_plan)
                if names is None:  # no rule, or one given its arguments by name
                    out.append(None if rule is None else self._call(rule, g, saved))
                elif len(names) == 1:
                    out.append(fn(g, saved[names[0]]))
                else:
                    out.append(fn(g, *map(saved.__getitem__, names)))
        if not retain:
            for s in self.saved.values():
                s.release()
        return out

    def _call(self, rule, g, saved):
        """``rule`` given its arguments by name: saved tensors, avals, static parameters."""
        kw = {"g": g}
        for n in rule.saved_names:
            kw[n] = saved[n]
        for n in rule.avals:
            kw[n + "_aval"] = self._avals[n]
        params = self.params
        for n in rule.static:
            kw[n] = params[n]
        return rule.fn(**kw)

    def release_variables(self) -> None:
        for s in self.saved.values():
            s.release()


_refcount = sys.getrefcount


def _sole_refs() -> tuple[int, int]:
    """``getrefcount`` of a gradient only a list and a local hold and of its payload, as
    ``AccumulateGrad.apply`` counts them (Python counts the call's argument, Cython's
    compiled code does not: Note [native modules] in staged/_native.py)."""
    grads = [SimpleNamespace(_payload=object())]
    g = grads[0]
    return _refcount(g), _refcount(g._payload)


_SOLE, _SOLE_PAYLOAD = _sole_refs()
_new_lock = threading.Lock
_FIRST = float("inf")


_classes: dict = {}  # primitive -> its PrimitiveBackward subclass


def _node_class(prim) -> type:
    """The subclass of PrimitiveBackward for ``prim`` (one per primitive), named as
    PyTorch's (``MulBackward0``), with its ``grad_fn._saved_<name>`` / ``_raw_saved_<name>``
    attributes as properties (``self``, ``other`` and ``result`` as in PyTorch; static
    parameters too). Not a ``__getattr__``: that would slow every attribute read of every
    Node."""
    cls = _classes.get(prim)
    if cls is None:
        cls = _classes[prim] = _make_node_class(prim)
    return cls


def _make_node_class(prim) -> type:
    keys = {n: n for n in (*prim.inputs, "out", *prim.static)}
    if prim.inputs:
        keys["self"], keys["other"] = prim.inputs[0], prim.inputs[-1]
    keys["result"] = "out"
    keys.update(_TORCH_SAVED.get(prim.name, {}))
    ns: dict = {"__slots__": ()}
    for attr, key in keys.items():
        for raw in (False, True):
            name = ("_raw_saved_" if raw else "_saved_") + attr
            ns[name] = property(partial(_saved_value, key=key, raw=raw, attr=name))
    return type(prim.node_name, (PrimitiveBackward,), ns)


# torch's names of saved operands beyond self/other/result, by primitive
_TORCH_SAVED = {"pow": {"exponent": "y"}}


def _saved_value(node, key, raw, attr):
    if key in node.saved:
        if raw:
            return node.saved[key]
        t = node.saved[key].unpack()
        if not is_number(t):
            return t
        # torch saves a Scalar argument (an exponent) as the number, a number operand of a
        # Tensor argument (mul's other) as a 0-d wrapped-number tensor
        number = Tensor._wrap(wrapped_number(t))
        return number.item() if attr == "_saved_exponent" else number
    if key in node.params:
        return node.params[key]
    raise AttributeError(f"'{node.name()}' object has no attribute '{attr}'")


_NO_EDGE = (None, 0)
_NO_RULE = (None, None, None)  # an input whose gradient is not computed (_save_plan)
_new_node = object.__new__


def record(prim, inputs, result, params) -> None:
    """The recorder dispatch calls (``set_recorder``): ``result``'s grad_fn becomes a
    PrimitiveBackward of ``prim`` applied to ``inputs``, saving what its rules need."""
    edges = []
    key = 0  # bit i set: input i needs a gradient
    bit = 1
    for t in inputs:
        if t._requires_grad:
            if t._base is not None and t._vc is not None and t._view.version != t._vc[0]:
                sync(t)  # its base was written since its grad_fn was made
            fn = t.grad_fn
            edges.append((fn, t._output_nr) if fn is not None else (t._grad_accumulator(), 0))
            key |= bit
        else:
            edges.append(_NO_EDGE)
        bit <<= 1
    plan = prim.save_plans.get(key)
    if plan is None:
        needs = tuple(bool(key >> i & 1) for i in range(len(inputs)))
        plan = prim.save_plans[key] = _save_plan(prim, needs)
    node = _new_node(plan[2])
    _node_init(node, tuple(edges))
    result.grad_fn = node  # before saving: an output is saved without a cycle
    node.prim = prim
    node.params = params
    node.rules = plan[3]
    saved = {}
    for n, i in plan[0]:
        saved[n] = SavedTensor(result if i is None else inputs[i], node)
    node.saved = saved
    node._avals = {n: t._aval() for n, t in zip(prim.inputs, inputs)} if plan[1] else None


def _save_plan(prim, needs) -> tuple:
    """How a PrimitiveBackward of ``prim`` is made when ``needs`` says which inputs need a
    gradient: what it saves, ((name, input index, or None for the output), ...) in the
    order the rules name them; whether any rule wants the inputs' avals; its class; and
    for each input ``(fn, saved names, rule)``: the names None where the rule is given
    its arguments by name (``_call``), all three None where no rule runs."""
    plan: list = []
    avals = False
    rules: list = []
    for rule, need in zip(prim.vjp, needs):
        if not need or rule is None:
            rules.append(_NO_RULE)
            continue
        rules.append((rule.fn, rule.saved_names if rule.positional else None, rule))
        for n in rule.saved_names:
            if all(n != m for m, _ in plan):
                plan.append((n, None if n == "out" else prim.inputs.index(n)))
        avals = avals or bool(rule.avals)
    return tuple(plan), avals, _node_class(prim), tuple(rules)


class AccumulateGrad(Node):
    """The sink for a leaf tensor: accumulates the incoming gradient into ``.grad``."""

    __slots__ = ("variable", "_lock")
    _plain = True

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"  # Note [C++ node names]

    def __init__(self, variable):
        _node_init(self, ())
        self.variable = variable
        self._lock = _new_lock()
        self._seq = _FIRST  # runs as soon as it is ready, like PyTorch's

    def apply(self, grads):
        g = grads[0]
        # ours alone (Note [gradient ownership]): held by ``grads`` and ``g``
        owned = (
            g is not None
            and (type(g) is Tensor or not g.is_sparse)  # Note [sparse gradients]
            and _refcount(g) <= _SOLE
            and _refcount(g._payload) <= _SOLE_PAYLOAD
        )
        with self._lock:
            accumulate_grad(self.variable, g, owned)
        return ()


# --- views (Note [views] in eager/views.py) -----------------------------------------------
def sync(t):
    """PyTorch's ``grad_fn`` of a view: if its storage was written since its grad_fn was
    made, and it or its base requires grad, a new ``AsStridedBackward0`` (``_regenerated``)
    from the base's current edge. Returns the grad_fn."""
    fn = _grad_fn.__get__(t)
    base = t._base
    meta = t._view
    vc = t._vc
    if fn is None and not base._requires_grad or vc is None or meta.version == vc[0]:
        fresh = getattr(t.__class__, "_fresh_class", None)  # a stale view's (Note [stale views])
        if fresh is not None:
            t.__class__ = fresh
        return fn
    if meta.multi is not None:
        raise RuntimeError(multi_output_error(t, indirect=True))
    if not meta.grad_mode:
        raise RuntimeError(creation_error(meta, indirect=True))
    node = _regenerated(base, meta.steps)
    _grad_fn.__set__(t, node)
    nr, t._output_nr = t._output_nr, 0
    _requires_grad.__set__(t, True)
    meta.version = vc[0]
    fresh = getattr(t.__class__, "_fresh_class", None)
    if fresh is not None:
        t.__class__ = fresh
    if t._retains_grad:
        move_retain_grad(t, fn, nr)
    return node


def hook_node(t):
    """The grad_fn that a hook registered on view ``t`` goes to. As in PyTorch, while the
    view is stale a hook joins those already registered on its old grad_fn (PyTorch keeps
    adding to that dict until the grad_fn is regenerated); else the grad_fn is
    regenerated first."""
    fn = _grad_fn.__get__(t)
    if fn is not None and fn._tensor_pre_hooks is not None and t._output_nr in fn._tensor_pre_hooks:
        return fn
    return sync(t)


class CopySlices(Node):
    """The base's grad_fn after an in-place update of one of its views."""

    __slots__ = ("steps",)
    _plain = True

    def name(self) -> str:
        return "torch::autograd::CopySlices"  # Note [C++ node names]

    def __init__(self, base, steps, value):
        old = (base.grad_fn, base._output_nr) if base.grad_fn is not None else (None, 0)
        super().__init__((old, (value.grad_fn, value._output_nr)))
        self.steps = steps

    def apply(self, grads):
        g = grads[0]
        gv = replay(g, self.steps)
        rest = None
        if self.next_functions[0][0] is not None:
            # g with the written region zeroed, as torch's CopySlices: not g - scatter(gv),
            # which is inf - inf = NaN where g is infinite
            rest = select(gv, self.steps, 0, g)
        return [rest, gv]


class AsStridedBackward0(Node):
    """A view's grad_fn regenerated from its base (PyTorch's name for it): the gradient of
    the view placed in a base of zeros, to the base's edge."""

    __slots__ = ("steps",)
    _plain = True

    def __init__(self, base, steps):
        if base.grad_fn is not None:
            edge = (base.grad_fn, base._output_nr)
        elif base._requires_grad:
            edge = (base._grad_accumulator(), 0)
        else:
            edge = (None, 0)
        super().__init__((edge,))
        self.steps = steps

    def apply(self, grads):
        return [scatter(grads[0], self.steps)]


class MultiOutputBackward(Node):
    """The one Node of the pieces ``split``, ``chunk`` and ``unbind`` return (torch's
    ``SplitBackward0``, ``SplitWithSizesBackward0``, ``UnbindBackward0``; Note
    [multi-output views] in eager/views.py): the input's gradient is the pieces'
    concatenated along ``dim``, zeros for a piece that got none."""

    __slots__ = ("dim", "shapes", "dtype")

    def apply(self, grads):
        parts = []
        for g, shape in zip(grads, self.shapes):
            if g is None:
                g = zeros(shape, dtype=self.dtype)
            elif tuple(g.shape) != shape:  # an unbound piece: its dim put back
                g = g.reshape(shape)
            parts.append(g)
        return [cat(parts, self.dim)]


_multi: dict[str, type] = {}


def join(outs, name: str, x, dim: int, shapes) -> None:
    """Make ``outs``, pieces of ``x`` along ``dim`` (each of ``shapes`` there), the outputs
    of one Node named ``name``, in place of a Node each."""
    cls = _multi.get(name)
    if cls is None:
        cls = _multi[name] = type(name, (MultiOutputBackward,), {"__slots__": ()})
    fn = x.grad_fn
    node = cls(((fn, x._output_nr) if fn is not None else (x._grad_accumulator(), 0),))
    node.num_outputs = len(outs)
    node.dim, node.shapes, node.dtype = dim, [tuple(s) for s in shapes], outs[0].dtype
    for nr, t in enumerate(outs):
        t.grad_fn, t._output_nr = node, nr


# torch regenerates a view whose last step changes what as_strided cannot express (the conj
# bit, the dtype) by replaying that step: its grad_fn is named for it (ConjBackward0 ...),
# any other view's AsStridedBackward0. Same Node otherwise.
_REPLAYED = ("conj", "view_as_real", "view_as_complex")
_replayed: dict[str, type] = {}


def _regenerated(base, steps) -> AsStridedBackward0:
    prim = steps[-1][0]
    if prim.name not in _REPLAYED:
        return AsStridedBackward0(base, steps)
    cls = _replayed.get(prim.name)
    if cls is None:
        cls = _replayed[prim.name] = type(prim.node_name, (AsStridedBackward0,), {"__slots__": ()})
    return cls(base, steps)


def rebase(view, value) -> None:
    """After ``value`` was written into ``view``'s memory: the base's graph goes through
    CopySlices, and the view's grad_fn is regenerated from it."""
    base = view._base
    steps = view._view.steps
    check_writable(steps)
    old, old_nr = base.grad_fn, base._output_nr
    base.grad_fn = CopySlices(base, steps, value)
    base._output_nr = 0
    base._requires_grad = True
    if base._retains_grad:
        move_retain_grad(base, old, old_nr)
    sync(view)
