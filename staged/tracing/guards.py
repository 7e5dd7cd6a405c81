"""Re-trace guards: what a trace assumed of Python state, each able to say what changed.

Note [source guards]: a tensor the traced function reads through a global or a closure
cell is a state input of the graph, bound to the tensor object that was there at trace
time. Rebinding the name (``w = new_tensor``) leaves the graph reading the old object, so
the trace also records, for each such name, the object it found, and is reused only
while the name still holds that very object. Python numbers read the same way are baked
into the graph as constants and are guarded by value. The walk follows the functions and
modules reached through ``fn``'s globals and closure cells (a helper the step calls,
``config.w``). Of the objects so reached (a dict, a config object, a Module, the ``self``
of a bound method the step is), the members the walked code names (``cfg.scale``,
``cfg["scale"]``, ``self.alpha``, as attribute names or string constants) are guarded
too, numbers by value and tensors by identity, and dicts and plain objects among them
(``cfg.model.p``) are walked the same way. A list or tuple so reached that holds tensors
the trace read is guarded by its items (tensors by identity, numbers by value), as they
were before the trace: a body that empties it (``del saved[:]``) still depended on them.
A number the trace itself changes (a counter the body increments) is a side effect of the
trace, not guarded. Not seen: a member read under a name the code computes
(``getattr(cfg, k)``), the items of a list that holds no tensor the trace read, and what
library code reads of its own objects (a Module's parameters are guarded by the Module,
``Module._guard``).
"""

from __future__ import annotations

import argparse
import dis
import functools
import operator
import os
import sys
import sysconfig
import types
from typing import Any

_MISSING = object()
_NUMBERS = (bool, int, float, complex)


class Guard:
    """The trace is reused while ``get()`` is still ``same`` as its value at trace time;
    ``failure()`` otherwise says what changed: ``"<name>: <old> -> <new>"``."""

    __slots__ = ("name", "get", "value", "same", "show")

    def __init__(self, name: str, get, same=operator.eq, show=repr, value=_MISSING):
        self.name, self.get, self.same, self.show = name, get, same, show
        self.value = get() if value is _MISSING else value

    def failure(self):
        now = self.get()
        if self.same(now, self.value):
            return None
        return f"{self.name}: {self.show(self.value)} -> {self.show(now)}"


def _same_number(a, b) -> bool:
    return type(a) is type(b) and (a == b or (a != a and b != b))  # NaN equals NaN here


def _show(obj) -> str:
    if obj is _MISSING:
        return "<unbound>"
    shape, dtype = getattr(obj, "shape", None), getattr(obj, "dtype", None)
    if shape is not None and hasattr(obj, "_serial"):
        return f"tensor#{obj._serial} {getattr(dtype, 'name', dtype)}{list(shape)}"
    return repr(obj)


def source_guards(fn, tensors, before=None) -> list:
    """Guards on the globals and closure cells through which ``fn`` reads one of
    ``tensors`` (by identity) or a Python number (Note [source guards]). ``before``: the
    guards of a walk made before the trace; a number the trace itself changed (a counter
    the body increments) is a side effect of the trace, not guarded. Without ``before``
    (the walk before the trace) every list or tuple of tensors is guarded by its items,
    for the walk after it to keep those whose items the trace read."""
    ids = {id(t) for t in tensors}
    guards = _walk(fn, ids, any_list=before is None)
    if before is None:
        return guards
    old = {g.name: g for g in before}
    guards = [g for g in guards if g.name not in old or g.same(old[g.name].value, g.value)]
    # a list's items as they were before the trace, where the body emptied or refilled it
    # (REINFORCE's ``del policy.saved_log_probs[:]``) and read some of them
    kept = {g.name for g in guards}
    return guards + [
        g
        for g in before
        if g.same is _same_items and g.name not in kept and _items_read(g.value, ids)
    ]


def _walk(fn, ids, any_list=False) -> list:
    """The guards of ``source_guards``, ``ids`` the ids of the tensors the trace read;
    ``any_list``: guard every list of tensors by its items (the walk before the trace)."""
    lists = None if any_list else ids
    guards: list[Any] = []
    seen: set[int] = set()
    todo = [(f, 0) for f in _functions(fn)]
    owner = fn.__self__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(owner, (types.FunctionType, functools.partial)):  # its ``self``
        names = frozenset().union(*(_names(f.__code__)[1] for f, _ in todo))
        _members(guards, (ids, lists), "self", functools.partial(_constant, owner), names, set(), 0)
    while todo:
        f, depth = todo.pop()
        if id(f) in seen or depth > 4:
            continue
        seen.add(id(f))
        globs, names = _names(f.__code__)
        for name in sorted(globs & f.__globals__.keys()):
            get = functools.partial(_lookup, f.__globals__, name)
            todo += _watch(guards, (ids, lists), name, get, depth, names)
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            todo += _watch(
                guards, (ids, lists), name, functools.partial(_contents, cell), depth, names
            )
    return guards


def _watch(guards, read, name, get, depth, names) -> list:
    """Guard the binding ``name`` (read by ``get``) if it holds something the trace
    depends on; return the functions it leads to, to walk next. ``read``: (the ids of the
    tensors read, those of ``_items_read``)."""
    ids = read[0]
    value = get()
    guard = _value_guard(read, name, get, value)
    if guard is not None:
        guards.append(guard)
    elif isinstance(value, types.ModuleType) and not _is_library(value):
        for attr in sorted(names):  # ``config.w``: attribute names are in co_names too
            v = getattr(value, attr, None)
            if id(v) in ids:
                guards.append(
                    Guard(
                        f"{name}.{attr}",
                        functools.partial(getattr, value, attr, _MISSING),
                        operator.is_,
                        _show,
                        v,
                    )
                )
    else:
        _members(guards, read, name, get, names, set(), 0)
        return [(f, depth + 1) for f in _functions(value)]
    return []


def _value_guard(read, name, get, value) -> Guard | None:
    """The guard on ``value`` (read by ``get``) where the trace depends on it: a tensor it
    read by identity, a list or tuple of such by its items, a number by value."""
    ids, lists = read
    if id(value) in ids:
        return Guard(name, get, operator.is_, _show, value)
    if _items_read(value, lists):
        return _items_guard(name, get, value)
    if isinstance(value, _NUMBERS):
        return Guard(name, get, _same_number, value=value)
    return None


_PLAIN = (dict, types.SimpleNamespace, argparse.Namespace)


def _members(guards, read, name, get, names, seen, depth) -> None:
    """Guard the members of the object ``get()`` (a dict's string keys, an object's
    ``__dict__``) that ``names`` holds and that are numbers (by value) or tensors the trace
    read (by identity), or that the object's own code (its ``forward``, ``__call__``)
    names; walk those that are dicts or plain objects (Note [source guards]). ``read``:
    as ``_watch``'s."""
    obj = get()
    if id(obj) in seen or depth > 3:
        return
    seen.add(id(obj))
    names = names.union(*(_names(f.__code__)[1] for f in _functions(obj)))
    space = _attributes(obj)
    if space is None:
        return
    keys = set(space) | set(_submodules(space))
    for key in sorted(k for k in keys if isinstance(k, str) and k in names):
        v = _member(functools.partial(_constant, obj), key)
        at = f"{name}[{key!r}]" if isinstance(obj, dict) else f"{name}.{key}"
        member = functools.partial(_member, get, key)
        guard = _value_guard(read, at, member, v)
        if guard is not None:
            guards.append(guard)
        elif _attributes(v) is not None and (isinstance(v, _PLAIN) or not _is_library(type(v))):
            _members(guards, read, at, member, names, seen, depth + 1)


def _items_read(value, ids, depth: int = 0) -> bool:
    """``value`` is a list or tuple holding a tensor the trace read, or a tuple of them
    (actor-critic's ``SavedAction(log_prob, value)``); with ``ids`` None, any tensor."""
    return isinstance(value, (list, tuple)) and any(
        (hasattr(x, "_serial") if ids is None else id(x) in ids)
        or (depth == 0 and isinstance(x, tuple) and _items_read(x, ids, 1))
        for x in value
    )


def _items(get):
    v = get()
    return tuple(v) if isinstance(v, (list, tuple)) else v


def _same_items(a, b) -> bool:
    """The same items: tensors (and other objects) by identity, numbers by value."""
    return (
        type(a) is type(b) is tuple
        and len(a) == len(b)
        and all(x is y or (isinstance(x, _NUMBERS) and _same_number(x, y)) for x, y in zip(a, b))
    )


def _show_items(items) -> str:
    if not isinstance(items, tuple):
        return _show(items)
    shown = ", ".join(map(_show, items[:3])) + (", ..." if len(items) > 3 else "")
    return f"[{shown}] ({len(items)} items)"


def _items_guard(name: str, get, value) -> Guard:
    """A list or tuple of tensors the trace read (log-probabilities saved in a list, say),
    reused while it holds the same items: a list is changed in place, not rebound."""
    return Guard(name, functools.partial(_items, get), _same_items, _show_items, tuple(value))


def _attributes(obj) -> dict | None:
    """``vars(obj)`` of an instance (a dict itself for a dict), else None (a class, a
    function, a Python module, a tensor)."""
    if isinstance(obj, dict):
        return obj
    if isinstance(obj, (type, types.FunctionType, types.ModuleType, types.MethodType)):
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
    """``get()``'s member ``key``: a dict's item, an attribute or a Module's child."""
    space = _attributes(get())
    if space is None:
        return _MISSING
    v = space.get(key, _MISSING)
    return _submodules(space).get(key, _MISSING) if v is _MISSING else v


def _constant(value):
    return value


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
        if isinstance(c, str):  # a dict key: ``cfg["scale"]``
            names.add(c)
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
