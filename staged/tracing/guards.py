"""Re-trace guards: what a trace assumed of Python state, each able to say what changed.

Note [source guards]: a tensor the traced function reads through a global or a closure
cell is a state input of the graph, bound to the tensor object that was there at trace
time. Rebinding the name (``w = new_tensor``) leaves the graph reading the old object, so
the trace also records, for each such name, the object it found, and is reused only
while the name still holds that very object. Python values read the same way (numbers,
strings, None, Enum members, tuples of those, short lists and sets of those or of such
lists, changed in place: ``scale = [2.0]``, ``flags = {"a"}``, ``sizes = [[1, 2], [3]]``;
small NumPy arrays: ``MEAN = np.array(...)``)
are baked into the graph as constants and are guarded by value, type included
(``same_value``). The walk follows the functions reached through ``fn``'s globals,
closure cells and mutable default arguments (``def hook(g, cfg=CFG)``; a helper the step
calls) and the objects so reached:
a dict, a config object, a Python module of the user's (``config.scale``), the ``self``
of a bound method the step is, the step's non-tensor arguments, and every Module among
them with all its children, however deep and through whatever container
(``nn.Sequential``, ``nn.ModuleList``, a plain list of Modules): a ``MyLayer`` inside
``nn.Sequential`` reads ``self.scale`` as surely as the step's own code would. Of each
object, the members that the walked code names (``cfg.scale``, ``cfg["scale"]``,
``self.alpha``, ``cfg[0]``, as attribute names or string, int or tuple constants) or that
the object's own code names (a user Module's ``forward``, ``__call__`` and the methods
they call) are guarded, values by value and tensors by identity, with the plain class
attributes of the user's classes it takes them from (``SCALE = 1.0`` in the class body,
read as ``self.SCALE``: ``_inherited``); a class of the user's reached by name
(``Config.lr``) is walked as an object is; dicts, plain and user objects among them
(``cfg.model.p``), and the dicts and objects of a list or tuple of at most
``_FEW_DICTS`` (an optimizer's ``param_groups``: ``opt.param_groups[0]["lr"]`` returned by
the step is a value of the trace; ``for c in LAYERS: x = x * c.scale``), are walked the
same way, and the functions they hold are walked for the globals they read. Where the
walked code reads an object's attributes all at once (``vars(cfg).values()``,
``dataclasses.asdict(cfg)``: ``_WHOLE_READS``), the values among a user object's
attributes are guarded whole too (``Fields``). A Module's children are guarded by identity
(``model[0] = nn.Linear`` brings parameters the trace never read). A list or tuple so reached that holds tensors
the trace read is guarded by its items (tensors by identity, numbers by value), as they
were before the trace: a body that empties it (``del saved[:]``) still depended on them.
A value the trace itself changes (a counter the body increments) is written again after
every compiled call and guarded on the value the call entered with (Note [binding
writes]; a Module's, Note [attribute writes]); one with no place to write it back (a
default argument rebound) warns, once per step and name (``_warn_side_effects``). A NumPy
array of more than ``_ARRAY_ITEMS`` items, too large to compare at every call, warns once
that its changes are not seen (``Unseen``). Not seen: a member read under a name or key
the code computes (``getattr(cfg, k)``; ``cfg[k]`` of a dict that holds more than
``_FEW_VALUES`` values or other objects: one of values only is guarded whole, ``Items``),
the items of a list that holds no tensor the trace read, Module, few dicts or objects or
few values only (its length is guarded: ``len(history)``, ``history[-1]`` of a list the
loop appends to), and what library code reads of its own objects (a Module's parameters and
the attributes staged's layers read are guarded by the Module when it is called,
``Module._guard``; ``scheduler.get_last_lr()`` inside a step is a constant of it).

Note [iterators the body advances]: ``x, y = next(it)`` in the step, ``it`` reached as
above, reads the next batch eagerly at every call; a compiled call replays the traced one
(its tensors are bound by identity, or constants), silently training on one batch. So the
walk also notes where each iterator it reaches stands (``_position``: a builtin or
``itertools`` iterator's ``__reduce__()``, its index, with the iterators it wraps, as in
``enumerate``/``zip``; a generator's frame, its instruction and locals; an iterator
object's ``__dict__``, as a DataLoader iterator's batch count), before and after the
trace. One that moved (a ``Position`` guard) makes the trace one-shot
(``Captured.advanced``): every call traces again and runs as eager code would; it warns
once. Positions are compared at the trace only, never per call. Not seen: a generator
that moved with nothing to show it (``while True: yield make_batch()``: the same
instruction, no locals) and iterators of C types with no ``__reduce__``.

Note [attribute writes]: a step that calls ``model.train()`` while the loop calls
``model.eval()`` between calls (pyGAT) changes ``training`` on every Module of the model at
every call. So the walk snapshots the plain values (``is_value``) in the ``__dict__`` of
each Module it reaches (an ``Attributes`` guard, compared before and after the trace, never
per call), as torch.compile records such writes: those the body changed on the same Module
(``_writes``) are set again after every compiled call (``Captured.attr_writes``,
``replay``), and every guard that reads one (``Sequential.training``, recorded when the
module was called, after the write; ``self.counter``, read by the body's code) is given
its value as the call enters (``at_entry``: the writes undone, the guards read, the writes
done again). The trace is then reused by calls that enter as it did: one trace entered in
eval mode, one in train mode. A body that changes a value and sets it back (``model.eval()``
for a validation batch, then ``model.train()``) leaves nothing to compare, so the guards a
Module's call records are recorded with its values as the call entered (``as_entered``,
``Tracer.entered``: put back for that moment from the snapshot before the trace): guarded
on ``True`` where the Module saw ``False``, they held for no call and every call
re-traced. A body that reads a value before writing it (``self.counter += 1``) gets a
trace per value, each exact. The tensors in those ``__dict__``s are snapshot too (by
identity): a tensor the body stores there (``self.last_loss = loss``, an attribute it may
also add) is Note [tensor attributes] in tracing/capture.py. Guarded more than needed: a
value the body writes before any read still re-traces a call entering with another one
(``model.train()`` first in the body, entered in eval mode). Not seen: a value attribute
added or deleted, a Module the walk does not reach; these keep the guards recorded when
the trace read them.

Note [owners]: an object the walk reaches by a name the code reads (``opt`` in a closure
or a global, ``self.opt``, ``OPTS["opt"]``, ``sched``, ``scaler``, a model ``m``) that
holds, a few attributes and containers deep, a tensor the trace read (``_holds_read``: an
optimizer's parameters and buffers, a scheduler's optimizer's, a GradScaler's scale, a
Module's parameters) is guarded by identity (``_owner_guard``; a short list of such by its
items): the graph updates that object's state, so a new optimizer, scheduler, scaler or
layer bound to the name (``opt = optim.SGD(...)`` for the next phase of training)
re-traces, as eager code would use the new one; the compiled calls went on updating the
old one, silently. Dicts, namespaces and the user's other objects are not guarded whole
(a dict of the same tensors rebuilt per call would re-trace every call): their members
are, one by one, as above; a Module's children are guarded by its ``children`` guard.

Note [binding writes]: a compiled call runs the graph, not the body's Python, so a value
the body changes through a global, a closure cell, a dict's item, an object's attribute or
a short list's items (``run[0] += 1`` in the style-transfer tutorial's LBFGS closure,
``self.steps += 1`` on a trainer, ``global_step += 1``) was changed by the traced call
only: a loop ``while run[0] <= n: opt.step(closure)`` never ended, and gradient
accumulation on ``self.i % 4`` repeated the traced call's choice at every call. So, as a
Module's attributes are (Note [attribute writes]), each such write is a ``Binding`` that
``replay`` makes again after every compiled call (the after value, copied into the list
for a list), and the trace is guarded on the value it entered with: exact for every call,
and a counter that changes at every call traces at every call (its graph, the same each
time, comes from the compile cache), until the calls run eagerly (``RETRACE_LIMIT`` in
runtime/compiled.py: Note [counters run eagerly]). A list that grew or shrank
(``calls.append(1)``) is not set again: appending, like printing, is a side effect of the
trace (JAX's semantics, which code counting its traces relies on), and warns.

Note [one pass]: every compiled call checks all of its trace's guards (three per Module:
parameters, ``training``, attributes and hooks), so ``Guards`` checks them in a few C-level
passes instead of a Python call of ``Guard.failure`` each (issue 20, item 5): the guards
are grouped by how they compare, each group's getters called by ``map`` and compared at
once: by their own ``same`` (``operator.eq``, ``operator.is_``...), and for ``same_value``
by identity where the getter returned the value itself at bind (``True``, a tensor, a
function), or as one flat list of items, types and lengths where the value is a flat tuple
of numbers and strings (a layer's ``in_features``, ``kernel_size``). A pass that finds
no difference proves what ``same_value`` would; one that finds one (or a getter that
raises) hands over to each guard in order, which names the first that fails, or passes
where the pass was only stricter (a NaN, an equal value that is another object): so
nothing is checked less, and ``explain()`` and the re-trace reasons read as before.

Note [children stamp]: the children guards (one per Module with children, each reading its
path from the global or closure cell the walk started at: ``model``, ``model[0]``,
``model[0].mlp``) and the parameters/buffers guards (one per Module) were the largest
passes of a deep model's check. A Module's ``_modules`` is a ``Children`` dict, its
``_parameters`` and ``_buffers`` ``Registered`` dicts (``Counted``, staged/nn/module.py),
whose every change (a child or parameter added, replaced, deleted, moved: ``model[0] =
...``, ``del model.fc``, ``model._modules["fc"] = ...``, ``lin._parameters["bias"] = p``,
a new such dict or ``__dict__`` set on a Module) sets a new ``version`` of its class. So
``_Tree`` and ``_Registries`` check those guards in full once, and after that, while the
``version`` is what it was then, only what a count cannot see: that each Module still
holds the same counted dicts (not others put in its ``__dict__`` directly); for children,
also that each path's start (``model``: a global, a cell, a list's item) is the same
object, and that no child is shadowed by an entry of its parent's ``__dict__``
(``vars(model)["0"] = other``, which attribute reads find first): every other step of a
path is a child of a Module so checked. A count that moved (any Module's children or
parameters changed: a Module built in the loop, say) checks them in full again, and stamps
the count if they hold. Not seen: a counted dict changed behind its class's methods
(``dict.__setitem__(m._modules, k, v)``).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dis
import enum
import functools
import itertools
import numbers
import operator
import os
import sys
import sysconfig
import types
import warnings
from typing import Any

import numpy as np

from ..eager.tensor import Tensor
from .scalars import TracedScalar

_MISSING = object()
MISSING = _MISSING  # what an absent attribute or item reads as, for ``replay`` to delete
# guarded by value; a traced scalar the body stored is seen as a value it wrote (and put
# back: Note [traced items]), the same only as itself
_VALUES = (numbers.Number, np.generic, str, bytes, type(None), enum.Enum, TracedScalar)


class Guard:
    """The trace is reused while ``get()`` is still ``same`` (by default ``same_value``) as
    its value at trace time; ``failure()`` otherwise says what changed:
    ``"<name>: <old> -> <new>"``."""

    __slots__ = ("name", "get", "value", "same", "show")

    def __init__(self, name: str, get, same=None, show=repr, value=_MISSING):
        same = same_value if same is None else same
        self.name, self.get, self.same, self.show = name, get, same, show
        self.value = get() if value is _MISSING else value

    def failure(self):
        now = self.get()
        if self.same(now, self.value):
            return None
        return f"{self.name}: {self.show(self.value)} -> {self.show(now)}"


class Guards:
    """A trace's guards checked in one pass (Note [one pass]); ``failure()`` says what the
    first guard that fails, in order, says."""

    __slots__ = ("guards", "_passes")

    def __init__(self, guards):
        self.guards = guards
        by: dict = {}  # id(kind) -> (kind, its guards)
        for g in guards:
            kind = _pass_kind(g)
            by.setdefault(id(kind), (kind, []))[1].append(g)
        self._passes = []  # each a function of no arguments: whether its guards hold
        for kind, gs in by.values():
            counted, gs = (  # Note [children stamp]
                _Tree.of(gs) if kind is _same_children else _Registries.of(kind, gs)
            )
            if counted is not None:
                self._passes.append(counted)
            if gs:
                self._passes.append(functools.partial(_holds, _pass(kind, gs)))

    def failure(self):
        """None where every guard holds, else what changed (``Guard.failure``)."""
        try:
            if all(map(_CALL, self._passes)):
                return None
        except Exception:  # noqa: BLE001 (a getter on what a guard before it saw change:
            pass  # the check in order says, or raises, as it did)
        return next(filter(None, map(Guard.failure, self.guards)), None)


_IDENTICAL, _FLAT = "identical", "flat"  # kinds of ``same_value`` guards (Note [one pass])
_SCALARS = frozenset({int, float, bool, complex, str, bytes, type(None)})
_CALL = operator.methodcaller("__call__")  # operator.call, which Python 3.10 lacks


def _pass_kind(g: Guard):
    """How ``Guards`` checks ``g`` (Note [one pass]): ``_IDENTICAL`` (reads its value
    itself: by identity first), ``_FLAT`` (a flat tuple of numbers and strings), else by
    its own ``same``."""
    if g.same is not same_value:
        return g.same
    try:
        if g.get() is g.value:
            return _IDENTICAL
    except Exception:  # noqa: BLE001 (checked, and raising, at the call as before)
        return same_value
    v = g.value
    return _FLAT if type(v) is tuple and _SCALARS.issuperset(map(type, v)) else same_value


def _pass(kind, guards) -> tuple:
    """``(kind, getters, values, what _same_flat compares)`` of ``guards`` of one kind."""
    values = tuple(g.value for g in guards)
    flat = None
    if kind is _FLAT:
        items = list(itertools.chain.from_iterable(values))
        flat = list(map(len, values)), items, list(map(type, items))
    return kind, tuple(g.get for g in guards), values, flat


def _holds(p) -> bool:
    """Whether every guard of the pass ``p`` (``_pass``) holds."""
    kind, gets, values, flat = p
    now = list(map(_CALL, gets))
    if kind is _IDENTICAL or kind is _FLAT:
        if all(map(operator.is_, now, values)) if kind is _IDENTICAL else _same_flat(now, *flat):
            return True
        kind = same_value
    return all(map(kind, now, values))


def _same_flat(now: list, lengths: list, flat: list, types: list) -> bool:
    """Whether ``now`` are tuples of ``lengths`` whose items, one after the other, are of
    ``types`` and equal to ``flat`` (the values' items): what ``same_value`` says of them
    (but of a NaN: left to it), at C speed."""
    if not all(map(operator.is_, map(type, now), itertools.repeat(tuple))):
        return False
    if list(map(len, now)) != lengths:
        return False
    items = list(itertools.chain.from_iterable(now))
    return list(map(type, items)) == types and items == flat


class _Counted:
    """Guards whose getters read only dicts that count their changes (Note [children
    stamp]), as one pass: checked in full until they hold, then, while the count is what
    it was, by ``same()``: what the count cannot see."""

    __slots__ = ("full", "count", "ok")

    def __init__(self, kind, guards, count):
        self.full = _pass(kind, guards)
        self.count, self.ok = count, None  # the counting class; its count when all held

    def same(self) -> bool:
        raise NotImplementedError

    def __call__(self) -> bool:
        version = self.count.version
        if version == self.ok and self.same():
            return True
        if not _holds(self.full):
            return False
        self.ok = version
        return True


def _counter(space, names):
    """The class counting the changes of the dicts ``names`` of ``space`` (a ``__dict__``),
    where they are all of one such class, else None."""
    kinds = {type(space.get(n)) for n in names} if space is not None else ()
    kind = next(iter(kinds)) if len(kinds) == 1 else None
    return kind if isinstance(getattr(kind, "version", None), int) else None


class _Tree(_Counted):
    """The children guards of Modules whose ``_modules`` count their changes."""

    __slots__ = ("starts", "objects", "modules", "kids", "parents", "keys")

    def __init__(self, guards, count, starts, edges):
        super().__init__(_same_children, [g for g, _ in guards], count)
        self.starts = tuple(get for get, _ in starts)  # the getters of the paths' starts
        self.objects = tuple(m for _, m in starts)
        self.modules = tuple(m for _, m in guards)
        self.kids = tuple(vars(m)["_modules"] for m in self.modules)
        self.parents = tuple(p for p, _ in edges)
        self.keys = tuple(k for _, k in edges)

    @staticmethod
    def of(guards) -> tuple:
        """``(the pass of those of the children guards ``guards`` it can count, or None,
        the others)``."""
        found, rest, count = {}, [], None  # id(path getter) -> (guard, module)
        for g in guards:
            get = g.get.args[0]  # ``g.get``: functools.partial(_children, get)
            try:
                obj = get()
            except Exception:  # noqa: BLE001 (checked, and raising, in order)
                obj = None
            kind = _counter(_attributes(obj), ("_modules",))
            if kind is None or count not in (None, kind) or id(get) in found:
                rest.append(g)
                continue
            count = kind
            found[id(get)] = g, obj
        if not found:
            return None, rest
        starts, edges = [], []
        for g, obj in found.values():
            get = g.get.args[0]  # a child's path: functools.partial(_member, parent's, key)
            parent = found.get(id(get.args[0])) if _is_step(get) else None
            if parent is not None and vars(parent[1])["_modules"].get(get.args[1]) is obj:
                edges.append((parent[1], get.args[1]))
            else:
                starts.append((get, obj))
        return _Tree(list(found.values()), count, starts, edges), rest

    def same(self) -> bool:
        return (
            all(map(operator.is_, map(_CALL, self.starts), self.objects))
            and all(map(operator.is_, map(_KIDS, map(vars, self.modules)), self.kids))
            and not any(map(operator.contains, map(vars, self.parents), self.keys))
        )


_KIDS = operator.itemgetter("_modules")


def _is_step(get) -> bool:
    """Whether the getter ``get`` reads a member of what another getter reads."""
    return isinstance(get, functools.partial) and get.func is _member and len(get.args) == 2


class _Registries(_Counted):
    """Guards whose getter is a method of an object that reads only that object's counted
    dicts (its function's ``counted_reads``: ``Module._state_objects`` reads
    ``_parameters`` and ``_buffers``): the same dicts, none changed."""

    __slots__ = ("objects", "reads")

    def __init__(self, kind, guards, count, names):
        super().__init__(kind, guards, count)
        self.objects = tuple(g.get.__self__ for g in guards)
        spaces = list(map(vars, self.objects))
        self.reads = tuple(
            (operator.itemgetter(n), tuple(map(operator.itemgetter(n), spaces))) for n in names
        )

    @staticmethod
    def of(kind, guards) -> tuple:
        """``(the pass of those of ``guards`` it can count, or None, the others)``."""
        by: dict = {}  # (names, counting class) -> guards
        rest = []
        for g in guards:
            names = getattr(getattr(g.get, "__func__", None), "counted_reads", None)
            count = names and _counter(_attributes(g.get.__self__), names)
            if count:
                by.setdefault((names, count), []).append(g)
            else:
                rest.append(g)
        if len(by) != 1:  # one kind of getter (a Module's): else each in full
            return None, guards
        (names, count), gs = next(iter(by.items()))
        return _Registries(kind, gs, count, names), rest

    def same(self) -> bool:
        spaces = list(map(vars, self.objects))
        return all(all(map(operator.is_, map(get, spaces), dicts)) for get, dicts in self.reads)


def same_value(a, b) -> bool:
    """The rule of every value guard: the same object, or values of the same type that are
    equal, NaN equal to NaN (a NaN attribute re-traces no call); tuples, lists and dicts
    item by item, in order. ``1``, ``1.0`` and ``True`` differ: ``x * 1`` keeps an int
    tensor's dtype where ``x * 1.0`` makes it float, and ``flag is True`` tells ``True``
    from ``1``. Other objects (tensors, functions, Modules) are the same only as
    themselves."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    kind = _KINDS.get(t) or _kind(t)
    if kind == "value":
        return bool(a == b) or (a != a and b != b)
    if kind == "array":
        return a.shape == b.shape and a.dtype == b.dtype and _equal_arrays(a, b)
    if kind == "object" or len(a) != len(b):
        return False
    if kind == "items":
        if all(map(operator.is_, a, b)):  # the common case, at C speed: a guard runs per call
            return True
        pairs = zip(a, b)
    else:
        pairs = zip(a.items(), b.items())  # in order
    for x, y in pairs:
        k = _KINDS.get(type(x))  # inline: equal numbers or strings, empty containers (hooks)
        if x is y or (
            type(x) is type(y)
            and (x == y if k == "value" else k in ("items", "dict") and not x and not y)
        ):
            continue
        if not same_value(x, y):
            return False
    return True


# type -> how ``same_value`` compares its objects (a cache)
_KINDS: dict[type, str] = {TracedScalar: "object"}


def _kind(t: type) -> str:
    kind = (
        "items"
        if issubclass(t, (tuple, list))
        else "dict"
        if issubclass(t, dict)
        else "value"
        if issubclass(t, (*_VALUES, set, frozenset))
        else "array"
        if issubclass(t, np.ndarray)
        else "object"
    )
    _KINDS[t] = kind
    return kind


def _equal_arrays(a, b) -> bool:
    """Equal items, NaN equal to NaN."""
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def is_value(v) -> bool:
    """A value a guard compares by value: a number, a string, None, an Enum member, a
    tuple of those."""
    return isinstance(v, _VALUES) or (type(v) is tuple and all(map(is_value, v)))


def _show(obj) -> str:
    if obj is _MISSING:
        return "<unbound>"
    shape, dtype = getattr(obj, "shape", None), getattr(obj, "dtype", None)
    if shape is not None and hasattr(obj, "_serial"):
        return f"tensor#{obj._serial} {getattr(dtype, 'name', dtype)}{list(shape)}"
    shown = repr(obj)  # a Module's is a screenful: its class and address then
    if "\n" not in shown and len(shown) <= 100:
        return shown
    if isinstance(obj, (list, tuple, set, frozenset, dict)):
        return f"{type(obj).__name__} of {len(obj)} items"
    return _show_owner(obj)


def source_guards(fn, tensors, before=None, roots=(), whole=True) -> list:
    """Guards on the globals and closure cells through which ``fn`` reads one of
    ``tensors`` (by identity) or a Python value (Note [source guards]), and on the members
    of ``roots`` ((name, object) pairs: the step's non-tensor arguments). ``before``: the
    guards of a walk made before the trace; a value the trace itself changed (a counter the
    body increments) is guarded on its value at entry and written again after every call
    (Note [attribute writes], Note [binding writes]), one that cannot be (a list it grew)
    warns. Without ``before`` (the walk before the trace)
    every list or tuple of tensors is guarded by its items, for the walk after it to keep
    those whose items the trace read. Not ``whole``: only the members of ``roots`` that
    ``fn``'s code names (a hook's Module argument, its globals walked once already)."""
    ids = {id(t) for t in tensors}
    guards = _walk(fn, ids, before is None, roots, whole)
    if before is None:
        return guards
    old = {g.name: g for g in before}
    moved = [  # Note [iterators the body advances]: kept as the mark of a one-shot trace
        g
        for g in guards
        if isinstance(g, Position) and g.name in old and not same_value(old[g.name].value, g.value)
    ]
    _warn_advanced(fn, [g.name for g in moved])
    _warn_unseen(fn, [g for g in guards if isinstance(g, Unseen)])
    writes = _writes(old, guards)  # Note [attribute writes]
    replayed = {w.at(k) for w in writes for k in w.value[1]}
    entry = [  # Note [tensor attributes]: guarded on what they held at entry
        entry_guard(w.at(k), w.value[0], k, change[0], ids)
        for w in writes
        for k, change in w.value[1].items()
        if holds_tensor(change)
    ]
    by_entry = {g.name for g in entry}
    guards = [
        g
        for g in guards
        if not isinstance(g, (Position, Attributes, Unseen)) and g.name not in by_entry
    ]
    changed = [g for g in guards if g.name in old and not g.same(old[g.name].value, g.value)]
    bound = [  # Note [binding writes]: a global, cell, item or attribute the body changed
        b
        for g in changed
        if g.name not in replayed and (b := _binding_write(g, old[g.name].value)) is not None
    ]
    replayed |= {b.name for b in bound}
    replayed |= {g.name for g in changed if _items_replayed(g, old[g.name].value, replayed)}
    # what the body wrote is replayed: guarded on its value at entry
    guards = [old[g.name] if g.name in replayed and g in changed else g for g in guards]
    changed = [g for g in changed if g.name not in replayed]
    # a list the body read and emptied (REINFORCE's ``del policy.rewards[:]``) stays
    # guarded by its items as they were before the trace (and warns: calls do not empty it)
    emptied = {g.name for g in changed if type(g.value) is list and not g.value}
    values = [(g.name, old[g.name].value, g.value) for g in changed if g.same is same_value]
    _warn_side_effects(fn, values)
    guards = [g for g in guards if g not in changed]
    # a list's items as they were before the trace, where the body emptied or refilled it
    # (``del policy.saved_log_probs[:]``) and read some of them
    kept = {g.name for g in guards}
    return (
        guards
        + [
            g
            for g in before
            if g.name not in kept
            and (g.name in emptied or g.same is _same_items and _items_read(g.value, ids))
        ]
        + moved
        + writes
        + bound
        + entry
    )


_warned: set = set()  # (the step's code, name) of the side effects reported


def _warn_side_effects(fn, changed) -> None:
    """Warn once per step and name that the trace of ``fn`` changed the Python values
    ``changed`` (``(name, before, after)``): compiled calls will not change them again."""
    new = _unwarned(fn, [c[0] for c in changed])
    what = ", ".join(f"{n} ({_show(a)} -> {_show(b)})" for n, a, b in changed if n in new)
    _warn_at(
        fn,
        new,
        f"changed {what} while it was traced. Compiled calls run the traced graph, not the "
        "step's Python, so they will not change it again (eager code would, at every call), "
        "and where it steers the step (`if self.i % 4 == 0: opt.step()`) every call does "
        "what the traced call did. Keep such Python state outside the compiled step, or "
        "pass it in as an argument (a Python number re-traces per value)",
    )


def _warn_advanced(fn, names) -> None:
    """Warn once per step and iterator that the trace of ``fn`` advanced the iterators
    ``names`` (Note [iterators the body advances])."""
    new = _unwarned(fn, names)
    _warn_at(
        fn,
        new,
        f"advanced the iterator {', '.join(new)} while it was traced. A compiled call would "
        "replay the traced batch, not take the next one, so every call is traced again "
        "and run without compiling, as eager code would. Pass the batch as an argument "
        "instead: `for x, y in loader: step(x, y)`",
    )


def _warn_unseen(fn, guards) -> None:
    """Warn once per step and name that the trace of ``fn`` read the NumPy arrays of the
    ``Unseen`` ``guards``, whose changes compiled calls do not see."""
    new = _unwarned(fn, [g.name for g in guards])
    what = ", ".join(
        f"{g.name} ({g.value.dtype}{list(g.value.shape)})" for g in guards if g.name in new
    )
    _warn_at(
        fn,
        new,
        f"reads the NumPy array {what}, too large to compare at every call: the contents "
        "it had when traced are constants of the compiled step, and a change made to it "
        "in place is not seen (eager code would read it anew). Make it a tensor outside "
        "the step (`t = torch.from_numpy(array)`, which the step then reads at every call "
        "and which shares its memory) or pass it in as a tensor argument",
    )


def _unwarned(fn, names) -> list:
    """Those of ``names`` not yet reported for the step ``fn``, now noted as reported."""
    code = _code(fn)
    new = [n for n in names if (code, n) not in _warned]
    _warned.update((code, n) for n in new)
    return new


def _code(fn):
    fs = _functions(fn)
    return fs[0].__code__ if fs else None


def _warn_at(fn, new, text: str) -> None:
    """``staged.compile: <step> <text>``, a warning pointing at the step's ``def``, if
    ``new`` names something."""
    if not new:
        return
    code = _code(fn)
    warnings.warn_explicit(
        f"staged.compile: {getattr(fn, '__qualname__', 'the step')} {text}",
        UserWarning,
        code.co_filename if code else "<unknown>",
        code.co_firstlineno if code else 0,
    )


def _walk(fn, ids, any_list=False, roots=(), whole=True) -> list:
    """The guards of ``source_guards``, ``ids`` the ids of the tensors the trace read;
    ``any_list``: guard every list of tensors by its items (the walk before the trace);
    ``roots``: (name, object) pairs walked as members are (the step's non-tensor
    arguments); not ``whole``: the roots only. Note [helpers' names]: an object's members
    are guarded where walked code names them, and a helper the step calls with the object
    (``helper(w, cfg)`` reading ``c["scale"]``) names them in its own code, so the walk is
    made again with the names of every function it reached (the first walk left
    ``cfg["scale"]`` unguarded: compiled calls kept 1.0 after the caller set 3.0)."""
    guards, reached = _walk_once(fn, ids, any_list, roots, whole, frozenset())
    for _ in range(4 if whole else 0):  # till no walk reaches new names (a method the
        extra = reached  # helper calls on the object names its own members)
        guards, reached = _walk_once(fn, ids, any_list, roots, whole, extra)
        if reached <= extra:
            break
    return guards


def _walk_once(fn, ids, any_list, roots, whole, extra) -> tuple[list, frozenset]:
    """``_walk``'s guards, each function's members named by its code or ``extra``, and the
    names of every function walked."""
    read = (ids, None if any_list else ids)
    guards: list[Any] = []
    todo = [(f, 0) for f in _functions(fn)]
    names = frozenset().union(extra, *(_names(f.__code__)[1] for f, _ in todo))
    reached = set(names)
    owner = fn.__self__ if isinstance(fn, types.MethodType) else fn
    if not whole:
        todo = []
    elif not isinstance(owner, (types.FunctionType, functools.partial)):  # its ``self``
        roots = (("self", owner), *roots)
    for name, obj in roots:
        _members(guards, todo, read, name, functools.partial(_constant, obj), names, set(), 0)
    walked: set[int] = set()
    while todo:
        f, depth = todo.pop()
        if id(f) in walked or depth > 4:
            continue
        walked.add(id(f))
        globs, names = _names(f.__code__)
        reached |= names
        names = names | extra
        for name in sorted(globs & f.__globals__.keys()):
            get = functools.partial(_lookup, f.__globals__, name)
            _watch(guards, todo, read, name, get, depth, names)
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            _watch(guards, todo, read, name, functools.partial(_contents, cell), depth, names)
        for name, get in _defaults(f):
            _watch(guards, todo, read, name, get, depth, names)
    return guards, frozenset(reached)


def _defaults(f) -> list:
    """(parameter, getter) of ``f``'s mutable default values: ``def hook(g, cfg=CFG)``
    reads ``cfg`` as surely as a closure cell. A number, string or None default changes
    only if ``__defaults__`` is rebound: not guarded, as each guard costs every call."""
    code, pos, kw = f.__code__, f.__defaults__ or (), f.__kwdefaults__ or {}
    names = code.co_varnames[code.co_argcount - len(pos) : code.co_argcount]
    out = [(n, functools.partial(_default, f, i)) for i, n in enumerate(names)]
    out += [(n, functools.partial(_kwdefault, f, n)) for n in kw]
    return [(n, get) for n, get in out if not is_value(get())]


def _default(f, i):
    d = f.__defaults__ or ()
    return d[i] if i < len(d) else _MISSING


def _kwdefault(f, name):
    return (f.__kwdefaults__ or {}).get(name, _MISSING)


def _watch(guards, todo, read, name, get, depth, names) -> None:
    """Guard the binding ``name`` (read by ``get``) if it holds something the trace
    depends on, else walk what it holds, adding the functions it leads to to ``todo``.
    ``read``: (the ids of the tensors read, those of ``_items_read``)."""
    value = get()
    guard = _value_guard(read, name, get, value)
    if guard is not None:
        guards.append(guard)
        guards += _tensor_fields(name, get, value, names)
        return
    _members(guards, todo, read, name, get, names, set(), depth)
    _append(guards, _owner_guard(read, name, get, value))
    _append(guards, _callable_guard(name, get, value))
    todo += [(f, depth + 1) for f in _functions(value)]


_CALLABLES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)


def _callable_guard(name, get, value) -> Guard | None:
    """An identity guard on a function the step reads by name (``act = F.relu`` rebound to
    ``torch.tanh``, ``self.act`` replaced, a new ``functools.partial``): the trace ran the
    one it found (compiled calls went on applying ``relu``, silently)."""
    return Guard(name, get, operator.is_, _show, value) if isinstance(value, _CALLABLES) else None


def _tensor_fields(name, get, value, names) -> list:
    """Value guards on the attributes a user set on the tensor ``value`` (``w.frozen =
    True``; read by ``get``) that the walked code names: a branch on one is baked into
    the trace as a Python value read elsewhere is."""
    if not isinstance(value, Tensor) or not value.__dict__:
        return []
    return [
        Guard(f"{name}.{k}", functools.partial(_member, get, k), value=v)
        for k, v in value.__dict__.items()
        if isinstance(k, str) and k in names and is_value(v)
    ]


def _append(guards, guard) -> None:
    if guard is not None:
        guards.append(guard)


def _owner_guard(read, name, get, value) -> Guard | None:
    """An identity guard on ``value`` where it is an optimizer, a scheduler, a Module or
    another library object holding a tensor the trace read, or a short list of such
    (Note [owners]), else None."""
    ids = read[0]
    if not ids or isinstance(value, (Tensor, *_PLAIN, types.ModuleType)) or is_value(value):
        return None
    if isinstance(value, (list, tuple)):  # ``optimizers = [opt_g, opt_d]``
        if len(value) > _FEW_DICTS or not _holds_read(value, ids):
            return None
        return Guard(name, functools.partial(_items, get), _same_items, _show_owners, tuple(value))
    space = _attributes(value)
    if space is None or not ("_modules" in space or _is_library(_defined(value))):
        return None  # the user's objects: guarded member by member
    if not _holds_read(space, ids):
        return None
    return Guard(name, get, operator.is_, _show_owner, value)


def _holds_read(v, ids, depth: int = 0, seen=None) -> bool:
    """``v`` is, or holds within a few attributes and containers (at most ``_OWNED``
    items of each), a tensor whose id is in ``ids``."""
    if isinstance(v, Tensor):
        return id(v) in ids
    seen = set() if seen is None else seen
    if depth > 5 or id(v) in seen or isinstance(v, (types.ModuleType, type)) or is_value(v):
        return False
    seen.add(id(v))
    if isinstance(v, dict):
        items = [*itertools.islice(v, _OWNED), *itertools.islice(v.values(), _OWNED)]
    elif isinstance(v, (list, tuple)):
        items = list(v[:_OWNED])
    else:
        space = _attributes(v)
        items = [] if space is None else list(itertools.islice(space.values(), _OWNED))
    return any(_holds_read(x, ids, depth + 1, seen) for x in items)


_OWNED = 64  # the items of each container that ``_holds_read`` looks at


def _show_owner(obj) -> str:
    return f"{type(obj).__name__} at {id(obj):#x}"


def _show_owners(items) -> str:
    return f"[{', '.join(map(_show_owner, items))}]" if isinstance(items, tuple) else _show(items)


def _value_guard(read, name, get, value) -> Guard | None:
    """The guard on ``value`` (read by ``get``) where the trace depends on it: a tensor it
    read by identity, a list or tuple of such by its items, a number, a string, None, a
    tuple of those or a short list of those by value (``same_value``; the list copied, as
    it is changed in place)."""
    ids, lists = read
    if id(value) in ids:
        return Guard(name, get, operator.is_, _show, value)
    if _items_read(value, lists):
        return _items_guard(name, get, value)
    if is_value(value):
        return Guard(name, get, value=value)
    if _few_values(value):  # ``scale = [2.0]``, ``flags = {"a"}``, ``sizes = [[1, 2], [3]]``
        return Guard(name, get, value=_copied(value))  # copied: changed in place
    if isinstance(value, np.ndarray):  # ``MEAN = np.array(...)``, changed in place
        if value.size > _ARRAY_ITEMS:
            return Unseen(name, get, value=value)
        return Guard(name, get, value=value.copy())
    if _position(value) is not None:
        return Position(name, functools.partial(_position_of, get))
    return None


def _few_values(v, depth: int = 0) -> bool:
    """``v`` is a list, set or tuple of at most ``_FEW_VALUES`` values, or of such lists
    (two deep), not itself a value: guarded by value."""
    return (
        type(v) in _FEW_KINDS
        and len(v) <= _FEW_VALUES
        and (depth > 0 or not is_value(v))
        and all(is_value(x) or (depth < 1 and _few_values(x, depth + 1)) for x in v)
    )


def _copied(v):
    """A copy of the lists and sets in ``_few_values``'s ``v``, its values shared."""
    return type(v)(map(_copied, v)) if type(v) in _FEW_KINDS and not is_value(v) else v


_FEW_KINDS = (list, set, frozenset, tuple)
_FEW_VALUES = 64  # a list, set or tuple of at most this many values is guarded by value
_ARRAY_ITEMS = 1 << 16  # a NumPy array of at most this many items is guarded by value


class Items(Guard):
    """A small dict of values, guarded whole (by ``same_value``, its items in order): a
    loop over its items or an item under a computed key (``for k, w in W.items()``,
    ``cfg[k]``) reads what no name in the code tells. Its items the body writes are
    replayed as its members' are (``_items_replayed``)."""

    __slots__ = ()

    def at(self, key) -> str:
        """The name of the guard on the item ``key``."""
        return f"{self.name}[{key!r}]"


class Fields(Items):
    """The values of a user object's ``__dict__``, guarded whole where the walked code
    reads an object's attributes all at once (``_WHOLE_READS``: ``vars(cfg).values()``,
    ``dataclasses.asdict(cfg)``), not by name."""

    __slots__ = ()

    def at(self, key: str) -> str:
        return f"{self.name.removesuffix(_DICT)}.{key}"


_DICT = ".__dict__"  # the suffix of a ``Fields`` guard's name
# names in the walked code that read all of an object's attributes
_WHOLE_READS = frozenset({"vars", "__dict__", "asdict", "astuple"})


def _value_fields(get) -> dict:
    """The members of ``get()``'s ``__dict__`` that are values (``is_value``)."""
    space = _attributes(get())
    return {} if space is None else {k: v for k, v in space.items() if is_value(v)}


def _values_only(d: dict) -> bool:
    return all(map(is_value, d)) and all(map(is_value, d.values()))


def _items_replayed(g: Guard, before, replayed) -> bool:
    """Whether ``g``, an ``Items`` guard that changed, changed only by the writes to its
    items that are ``replayed`` (``cfg["n"] += 1``: Note [binding writes])."""
    if not isinstance(g, Items) or type(before) is not dict or before.keys() != g.value.keys():
        return False
    changed = [k for k in before if not same_value(before[k], g.value[k])]
    return all(g.at(k) in replayed for k in changed)


class Unseen(Guard):
    """A NumPy array the step reads that is too large to compare at every call: the trace
    warns that its contents are constants of it (``_warn_unseen``); never checked."""

    __slots__ = ()


class Position(Guard):
    """Where an iterator the step reaches stands (Note [iterators the body advances]):
    compared before and after the trace, never per call."""

    __slots__ = ()


class Attributes(Guard):
    """A Module's plain value attributes (``training``, a counter), as ``(module, {name:
    value})`` (Note [attribute writes]): compared before and after the trace, never per
    call. Those the body changed come out of ``source_guards`` as one with ``(module,
    {name: (before, after)})``."""

    __slots__ = ()

    def at(self, key: str) -> str:
        """The name of the Module's attribute ``key`` (``model.fc.last_loss``)."""
        return f"{self.name[: -len(_FIELDS)]}.{key}"


_FIELDS = " attributes"  # the suffix of an ``Attributes`` guard's name


class Binding(Attributes):
    """A value the body changed through a global, a closure cell, a dict's item, an
    object's attribute or a list's items (Note [binding writes]), as ``(target, {key:
    (before, after)})`` for ``replay``."""

    __slots__ = ()

    def at(self, key) -> str:
        return self.name


def _binding_write(g: Guard, before) -> Binding | None:
    """The write the body made through the binding the value guard ``g`` reads, where
    ``replay`` can make it again (Note [binding writes]); None where it cannot (a default
    argument rebound, a list of dicts' item, a list grown or shrunk: ``calls.append(1)``)."""
    where = _place(g)
    if where is None or where[1] is None and len(before) != len(g.value):
        return None
    return Binding(g.name, g.get, value=(where[0], {where[1]: (before, g.value)}))


def _place(g: Guard) -> tuple | None:
    """Where ``replay`` sets the value the value guard ``g`` reads: ``(target, key)``, key
    None for a list's items or a closure cell; None where it cannot (a default argument)."""
    if (
        g.same is not same_value
        or isinstance(g, Items)  # its items' own guards replay them
        or isinstance(g.value, (set, frozenset, np.ndarray))
    ):
        return None  # changed in place: not for a write to make again
    func = getattr(g.get, "func", None)
    args: tuple = getattr(g.get, "args", ())
    if type(g.value) is list:  # its items, set in place (``run[0] += 1``), not lists
        if not all(map(is_value, g.value)):  # a list's list would be put back as a copy
            return None
        target = g.get()
        return (target, None) if type(target) is list else None
    if func is _lookup:  # a global: ``step += 1`` under ``global step``
        return args
    if func is _contents:  # a closure cell: ``nonlocal step``
        return (args[0], None)
    if func is _member:  # ``cfg["n"] += 1``, ``self.steps += 1``, ``config.n``
        obj = args[0]()
        return (obj, args[1]) if _attributes(obj) is not None else None
    return None


def undo_writes(fn, before, roots=(), whole=True) -> None:
    """Put back what a trace of ``fn`` that raised changed of the values the walk
    ``before`` it guards (Module attributes, and globals, cells, dicts' items, lists and
    objects' attributes holding numbers, strings or short lists: a counter, an append), as
    ``_restore`` puts back its tensors: a failed trace changes nothing, and
    ``fallback="eager"`` then runs the body once, not twice."""
    old = {g.name: g for g in before}
    guards = _walk(fn, set(), False, roots, whole)
    writes = [
        (w.value[0], k, change[0]) for w in _writes(old, guards) for k, change in w.value[1].items()
    ]
    for g in guards:
        was = old.get(g.name)
        if was is None or isinstance(g, Attributes) or g.same(was.value, g.value):
            continue
        where = _place(g)
        if where is not None:
            writes.append((*where, was.value))
    replay(writes)


def _fields(get):
    obj = get()
    space = _attributes(obj)
    if space is None:
        return _MISSING
    return obj, {
        k: v
        for k, v in space.items()
        if isinstance(k, str) and (is_value(v) or isinstance(v, Tensor))
    }


def _writes(old, guards) -> list:
    """``Attributes`` of the values and tensors the body changed on Modules it kept, and of
    the tensors it added (Note [attribute writes], Note [tensor attributes]); ``old``: the
    guards before the trace by name."""
    out = []
    for g in guards:
        was = old.get(g.name)
        if not isinstance(g, Attributes) or was is None or _MISSING in (g.value, was.value):
            continue
        (obj, now), (obj_was, then) = g.value, was.value
        changed = {
            k: (then.get(k, _MISSING), v)
            for k, v in now.items()
            if (k in then or isinstance(v, Tensor)) and not same_value(then.get(k, _MISSING), v)
        }
        if obj is obj_was and changed:
            out.append(Attributes(g.name, g.get, value=(obj, changed)))
    return out


def holds_tensor(change) -> bool:
    """Whether an attribute write ``(before, after)`` added a tensor attribute or replaced
    or dropped a tensor (Note [tensor attributes])."""
    return any(v is _MISSING or isinstance(v, Tensor) for v in change)


class _Marker:
    """What an entry guard keeps of a tensor the trace did not read (that it is one), or
    of an absent attribute."""

    __slots__ = ("shown",)

    def __init__(self, shown: str):
        self.shown = shown

    def __repr__(self) -> str:
        return self.shown


_A_TENSOR, _ABSENT = _Marker("a tensor"), _Marker("<unbound>")


def _kind_of(v):
    return _A_TENSOR if isinstance(v, Tensor) else _ABSENT if v is _MISSING else v


def _entry_kind(get):
    return _kind_of(get())


def entry_guard(name: str, module, key: str, before, ids) -> Guard:
    """The guard on the attribute ``key`` of ``module`` that the body replaced by or with a
    tensor, as the call enters (``before``; Note [tensor attributes]): a tensor the trace
    read by identity (the graph reads that one), another tensor as being one (the body
    replaces it unread), a value by value, an absent attribute as absent."""
    get = functools.partial(_member, functools.partial(_constant, module), key)
    if isinstance(before, Tensor) and id(before) in ids:
        return Guard(name, get, operator.is_, _show, before)
    return Guard(name, functools.partial(_entry_kind, get), show=_show, value=_kind_of(before))


def at_entry(guards, writes) -> None:
    """Give each of ``guards`` that reads an attribute the body wrote (``writes``:
    ``(module, name, before, after)``) its value as the call enters, before the writes
    (Note [attribute writes])."""
    if not writes:
        return
    replay([(m, k, before) for m, k, before, _ in writes])
    entry = [g.get() for g in guards]
    replay([(m, k, after) for m, k, _, after in writes])
    for g, v in zip(guards, entry):
        if not g.same(v, g.get()):
            g.value = v


def entry_values(guards) -> dict:
    """``id(module) -> (module, {name: value})``: the plain values of the Modules of the
    ``Attributes`` among ``guards`` (the walk before the trace), as the call entered."""
    return {
        id(obj): (obj, {k: v for k, v in values.items() if is_value(v)})
        for g in guards
        if isinstance(g, Attributes) and g.value is not _MISSING
        for obj, values in (g.value,)
    }


@contextlib.contextmanager
def as_entered(module, entry: dict):
    """``module``'s plain values put back as the call entered (``entry``: from
    ``entry_values``) for the duration, the body's writes restored after it: a guard
    recorded mid-body (``Module._guard`` after ``model.eval()``) is on the value at entry
    (Note [attribute writes]). One the body deleted stays deleted."""
    obj, values = entry.get(id(module), (None, {}))
    space = vars(module) if obj is module else {}
    now = {k: space[k] for k in values if k in space}
    back = [(module, k, v) for k, v in now.items() if not same_value(v, values[k])]
    replay([(module, k, values[k]) for _, k, _ in back])
    try:
        yield
    finally:
        replay(back)


def replay(writes) -> None:
    """Set each ``(target, key, value)`` of ``writes``, as the body did: a Module's or an
    object's attribute, a dict's item (a module's globals), a closure cell's contents or a
    list's items (key None; ``value`` copied into the list). The absent marker
    deletes an attribute or item (one put back as it entered)."""
    for obj, key, value in writes:
        if type(obj) is types.CellType:
            obj.cell_contents = value
            continue
        if type(obj) is list:
            obj[:] = value
            continue
        space = obj if isinstance(obj, dict) else vars(obj)
        if value is _MISSING:
            space.pop(key, None)
        else:
            space[key] = value


def _position_of(get):
    return _position(get())


def _position(it, depth: int = 0):
    """Where the iterator ``it`` stands, as far as Python shows it, as a value that
    ``same_value`` compares; None for what is not an iterator (or shows nothing)."""
    t = type(it)
    if depth > 3 or not hasattr(t, "__next__") or isinstance(it, type):
        return None
    if isinstance(it, types.GeneratorType):
        f = it.gi_frame
        if f is None:
            return ("finished",)
        return (f.f_lasti, _state(tuple(f.f_locals.items()), depth), _state(it.gi_yieldfrom))
    try:
        with warnings.catch_warnings():  # itertools' __reduce__ is deprecated in 3.12
            warnings.simplefilter("ignore", DeprecationWarning)
            if t.__reduce__ is not object.__reduce__:  # C iterators: the index, the iterators
                return _state(it.__reduce__()[1:], depth)  # they wrap (enumerate, zip)
    except Exception:  # noqa: BLE001 (a file object, a C iterator that cannot say)
        return None
    space = _attributes(it)  # an iterator object: its counters and the iterators it holds
    return None if space is None else _state(tuple(space.items()), depth)


def _state(v, depth: int = 0):
    """``v`` with the iterators in it (inside tuples of a few items) as their positions."""
    if type(v) is tuple and len(v) <= _FEW_DICTS:
        return tuple(_state(x, depth) for x in v)
    pos = _position(v, depth + 1)
    return v if pos is None else pos


_PLAIN = (dict, types.SimpleNamespace, argparse.Namespace)


def _members(guards, todo, read, name, get, names, seen, depth) -> None:
    """Guard the members of the object ``get()`` (a dict's string keys, an object's or a
    Python module's ``__dict__``) that ``names`` or the object's own code (its
    ``forward``, ``__call__`` and the methods they name) names and that are values or
    tensors the trace read (``_value_guard``); walk those that are dicts, plain objects,
    user objects or Modules, and every child of a Module and Module in a list or tuple,
    however deep (Note [source guards]: a ``MyLayer`` inside ``nn.Sequential``). The
    functions so found go to ``todo``, to walk their globals. ``read``: as ``_watch``'s."""
    obj = get()
    if id(obj) in seen or depth > 3:
        return
    seen.add(id(obj))
    if isinstance(obj, (list, tuple)):  # ``self.layers = [MyLayer(), MyLayer()]``
        if type(obj) is list:  # ``len(history)``, ``history[-1]`` of a list grown outside
            guards.append(Guard(f"len({name})", functools.partial(_length, get), value=len(obj)))
        few = len(obj) <= _FEW_DICTS  # ``opt.param_groups[0]["lr"]``, ``[Cfg(2.0), ...]``
        for i, x in enumerate(obj):  # Modules, and a few objects: not a list of data
            if "_modules" in (_attributes(x) or ()) or (few and _walked(x)):
                item = functools.partial(_item, get, i)
                _members(guards, todo, read, f"{name}[{i}]", item, names, seen, depth)
        return
    own = _methods(obj, names) if _walked(obj) else _methods(obj)
    todo += [(f, depth + 1) for f in own]
    names = names.union(*(_names(f.__code__)[1] for f in own))
    space = _attributes(obj)
    if space is None:
        return
    children = _submodules(space)
    if "_modules" in space:  # Note [attribute writes]
        guards.append(Attributes(f"{name}{_FIELDS}", functools.partial(_fields, get)))
    if children:  # a child replaced (``model[0] = nn.Linear(3, 2)``) brings new parameters
        guards.append(
            Guard(
                f"{name} children",
                functools.partial(_children, get),
                _same_children,
                _show_children,
            )
        )
    keys = {k for k in space if (isinstance(k, str) or obj is space) and k in names}
    keys |= set(children)
    if not isinstance(obj, (dict, type, types.ModuleType)):  # ``self.SCALE``, class-wide
        keys |= _class_values(obj, names)
    for key in sorted(keys, key=_order):
        v = _member(functools.partial(_constant, obj), key)
        at = f"{name}[{key!r}]" if isinstance(obj, dict) else f"{name}.{key}"
        member = functools.partial(_member, get, key)
        guard = _value_guard(read, at, member, v)
        if guard is not None:
            guards.append(guard)
            guards += _tensor_fields(at, member, v, names)
            continue
        # a Module's child adds no depth: models nest deeper than config objects do
        deeper = depth + (key not in children)
        if _walked(v) or isinstance(v, (list, tuple)):
            _members(guards, todo, read, at, member, names, seen, deeper)
        else:
            todo += [(f, depth + 1) for f in _functions(v)]
            _append(guards, _callable_guard(at, member, v))
        if key not in children:  # those are guarded by the children guard
            _append(guards, _owner_guard(read, at, member, v))
    if type(obj) is dict and len(obj) <= _FEW_VALUES and _values_only(obj):
        guards.append(Items(name, get, value=dict(obj)))  # ``for k, w in W.items()``
    elif _WHOLE_READS & names and not isinstance(obj, (dict, type, types.ModuleType)):
        fields = _value_fields(get)  # ``vars(cfg).values()``, ``asdict(cfg)``
        if "_modules" not in space and len(fields) <= _FEW_VALUES:
            whole = functools.partial(_value_fields, get)
            guards.append(Fields(f"{name}{_DICT}", whole, value=fields))


def _order(key) -> tuple:
    """Members in order: names, then a dict's other keys (``cfg[0]``)."""
    return (not isinstance(key, str), str(key))


_FEW_DICTS = 16  # a list of at most this many dicts is walked item by item (param groups)


def _walked(v) -> bool:
    """Walked by ``_members``: a dict, a plain object (a namespace), an object or a Python
    module of the user's, a Module (for its children; staged's own read their members
    themselves: ``Module._guard``)."""
    space = _attributes(v)
    return space is not None and (
        isinstance(v, _PLAIN) or "_modules" in space or not _is_library(_defined(v))
    )


def _defined(v):
    """Where ``v``'s code is: a Python module or a class itself, else its class."""
    return v if isinstance(v, (types.ModuleType, type)) else type(v)


def _methods(obj, names=frozenset()) -> list:
    """The user's functions calling ``obj`` runs (``_functions``), and the methods of its
    class that those or ``names`` (the walked code's) name, and that these name, ...: a
    ``forward`` calling ``self.helper()``, a helper calling ``box.weigh(t)``."""
    fs = _functions(obj)
    if isinstance(obj, types.ModuleType) or not (fs or names):
        return fs
    cls, found = type(obj), {id(f) for f in fs}
    todo: list = [frozenset(names), *(f.__code__ for f in fs)]
    while todo:
        code = todo.pop()
        for n in code if isinstance(code, frozenset) else _names(code)[1]:
            v = next((c.__dict__[n] for c in cls.__mro__ if n in c.__dict__), None)
            f = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
            if isinstance(f, types.FunctionType) and id(f) not in found and not _is_library(f):
                found.add(id(f))
                fs.append(f)
                todo.append(f.__code__)
    return fs


def _children(get):
    """A Module's children: (their names, themselves)."""
    space = _attributes(get())
    if space is None:
        return _MISSING
    children = _submodules(space)
    return tuple(children), tuple(children.values())


def _same_children(a, b) -> bool:
    """The same names, and the same children (by identity)."""
    return (
        type(a) is type(b) is tuple
        and a[0] == b[0]
        and len(a[1]) == len(b[1])
        and all(map(operator.is_, a[1], b[1]))
    )


def _show_children(children) -> str:
    if not isinstance(children, tuple):
        return _show(children)
    return ", ".join(f"{k}={type(m).__name__} at {id(m):#x}" for k, m in zip(*children))


def _item(get, i):
    """``get()[i]`` of a list or tuple, ``_MISSING`` where there is none."""
    v = get()
    return v[i] if isinstance(v, (list, tuple)) and -len(v) <= i < len(v) else _MISSING


def _items_read(value, ids, depth: int = 0) -> bool:
    """``value`` is a list or tuple holding a tensor the trace read, or a tuple of them
    (actor-critic's ``SavedAction(log_prob, value)``); with ``ids`` None, any tensor."""
    return isinstance(value, (list, tuple)) and any(
        (hasattr(x, "_serial") if ids is None else id(x) in ids)
        or (depth == 0 and isinstance(x, tuple) and _items_read(x, ids, 1))
        for x in value
    )


def _length(get):
    """``len(get())`` of a list, ``_MISSING`` for anything else."""
    v = get()
    return len(v) if type(v) is list else _MISSING


def _items(get):
    v = get()
    return tuple(v) if isinstance(v, (list, tuple)) else v


def _same_items(a, b) -> bool:
    """The same items (``same_value``: tensors by identity, numbers by value)."""
    return type(a) is tuple and same_value(a, b)


def _show_items(items) -> str:
    if not isinstance(items, tuple):
        return _show(items)
    shown = ", ".join(map(_show, items[:3])) + (", ..." if len(items) > 3 else "")
    return f"[{shown}] ({len(items)} items)"


def _items_guard(name: str, get, value) -> Guard:
    """A list or tuple of tensors the trace read (log-probabilities saved in a list, say),
    reused while it holds the same items: a list is changed in place, not rebound."""
    return Guard(name, functools.partial(_items, get), _same_items, _show_items, tuple(value))


def _attributes(obj):
    """``vars(obj)`` of an instance (a dict itself for a dict), or of a Python module or a
    class of the user's (``config.scale``, ``Config.scale``), else None (a function, a
    library's module or class, a tensor)."""
    if isinstance(obj, dict):
        return obj
    if isinstance(obj, types.ModuleType):
        return None if _is_library(obj) else vars(obj)
    if isinstance(obj, type):  # a class of the user's (``Config.scale``); an Enum's members
        return None if issubclass(obj, enum.Enum) or _is_library(obj) else obj.__dict__
    if isinstance(obj, (types.FunctionType, types.MethodType)):
        return None
    try:
        d = getattr(obj, "__dict__", None)
    except Exception:  # noqa: BLE001 (a user object's __getattr__ may raise anything)
        return None
    return d if type(d) is dict else None


def _submodules(space: dict) -> dict:
    """A Module's children (``self.block``), kept in its ``_modules``, not its ``__dict__``."""
    m = space.get("_modules")
    return m if isinstance(m, dict) else {}


def _member(get, key):
    """``get()``'s member ``key``: a dict's item, an attribute, a Module's child, or a
    class attribute of the user's (``self.SCALE``: ``_inherited``)."""
    obj = get()
    space = _attributes(obj)
    if space is None:
        return _MISSING
    v = space.get(key, _MISSING)
    if v is _MISSING:
        v = _submodules(space).get(key, _MISSING)
        if v is _MISSING and not isinstance(obj, (dict, types.ModuleType)):
            return _inherited(obj, key)
    return v


def _inherited(obj, key):
    """The attribute ``key`` that ``obj`` (an instance or a class) takes from a class of
    the user's in its MRO (``SCALE = 1.0`` in a Module's class body), ``_MISSING`` where
    none (a library class's comes first, or none has it)."""
    for c in (obj if isinstance(obj, type) else type(obj)).__mro__:
        if key in c.__dict__:
            return _MISSING if _is_library(c) else c.__dict__[key]
    return _MISSING


def _class_values(obj, names) -> set:
    """The names among ``names`` of the plain class attributes (``_inherited``: not
    functions or descriptors) that the instance ``obj`` takes from the user's classes."""
    found: set = set()
    for c in type(obj).__mro__:
        if _is_library(c):
            continue
        found.update(
            k
            for k, v in c.__dict__.items()
            if k in names and not callable(v) and not hasattr(type(v), "__get__")
        )
    space = _attributes(obj)
    return {k for k in found if k not in space and _inherited(obj, k) is not _MISSING}


def _constant(value):
    return value


def store_dicts(fn) -> list:
    """``[(name, dict)]``: the plain dicts that ``fn``'s code, and the user's functions it
    names, name, where it may store a tensor by item (``acts[name] = out`` in a forward
    hook: Note [tensor stores]): their globals, closure cells and, for a bound method,
    its object's attributes."""
    out, seen = [], set()
    todo = [(fn, 0)]
    while todo:
        obj, depth = todo.pop()
        owner = obj.__self__ if isinstance(obj, types.MethodType) else None
        for f in _functions(obj):
            if id(f) in seen or depth > 4:
                continue
            seen.add(id(f))
            globs, names = _names(f.__code__)
            found = [(n, f.__globals__.get(n)) for n in sorted(globs)]
            cells = zip(f.__code__.co_freevars, f.__closure__ or ())
            found += [(n, _contents(c)) for n, c in cells]
            if owner is not None and hasattr(owner, "__dict__"):
                attrs = sorted(n for n in names if isinstance(n, str))
                found += [(f"self.{n}", vars(owner).get(n)) for n in attrs]
            out += [(n, d) for n, d in found if type(d) in _STORE_DICTS]
            todo += [(v, depth + 1) for _, v in found if callable(v) and not isinstance(v, type)]
    return out


_STORE_DICTS = (dict, collections.defaultdict)


def _functions(obj) -> list:
    """The Python functions calling ``obj`` runs first: itself, a bound method's
    function, a partial's, a callable object's ``__call__``/``forward``."""
    if isinstance(obj, functools.partial):
        obj = obj.func
    if isinstance(obj, types.MethodType):
        obj = obj.__func__
    if isinstance(obj, types.FunctionType):
        return [] if _is_library(obj) else [obj]
    if isinstance(obj, type) or isinstance(obj, types.BuiltinFunctionType):
        return []
    fs = [getattr(type(obj), n, None) for n in ("__call__", "forward")]
    return [f for f in fs if isinstance(f, types.FunctionType) and not _is_library(f)]


def _is_library(obj) -> bool:
    """Code of staged itself, of the standard library or of an installed package: not
    the user's, so not walked (``obj``: a function, a Python module or a class)."""
    if isinstance(obj, type):
        obj = sys.modules.get(obj.__module__)
    path = (
        obj.__code__.co_filename
        if isinstance(obj, types.FunctionType)
        else getattr(obj, "__file__", None)
    )
    return not path or os.path.abspath(path).startswith(_LIBRARY_DIRS)


_LIBRARY_DIRS = tuple(
    {
        os.path.join(d, "")
        for d in (
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            *(
                os.path.abspath(sysconfig.get_paths()[k])
                for k in ("stdlib", "platstdlib", "purelib", "platlib")
            ),
        )
    }
)


_GLOBAL_READS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})


@functools.lru_cache(maxsize=1024)
def _names(code) -> tuple:
    """``(globals, names)``: the global names ``code`` and the code nested in it read, and
    all the names they use (attributes and string constants too). Only the first are
    bindings to guard: in ``for step in ...: opt.step()`` the global ``step`` is not what
    the step reads."""
    globs, names = set(), set(code.co_names)
    for ins in dis.get_instructions(code):
        if ins.opname in _GLOBAL_READS:
            globs.add(ins.argval)
    for c in code.co_consts:
        if isinstance(c, (str, int)) or type(c) is tuple and is_value(c):
            names.add(c)  # a dict key: ``cfg["scale"]``, ``cfg[0]``, ``cfg[0, 1]``
        elif isinstance(c, types.CodeType):
            g, n = _names(c)
            globs |= g
            names |= n
    return frozenset(globs), frozenset(names)


def _lookup(namespace, name):
    return namespace.get(name, _MISSING)


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _MISSING
