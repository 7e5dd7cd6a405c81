"""Re-trace guards: what a trace assumed of Python state, each able to say what changed.

Note [source guards]: a tensor the traced function reads through a global or a closure
cell is a state input of the graph, bound to the tensor object that was there at trace
time. Rebinding the name (``w = new_tensor``) leaves the graph reading the old object, so
the trace also records, for each such name, the object it found, and is reused only
while the name still holds that very object. Python numbers read the same way are baked
into the graph as constants and are guarded by value. The walk follows the functions and
modules reached through ``fn``'s globals and closure cells (a helper the step calls,
``config.w``), not arbitrary containers: a tensor kept in a dict or a plain object's
attribute and replaced there is not seen (a Module's parameters are guarded by the
Module, ``Module._guard``).
"""

from __future__ import annotations

import dis
import functools
import operator
import os
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


def source_guards(fn, tensors) -> list:
    """Guards on the globals and closure cells through which ``fn`` reads one of
    ``tensors`` (by identity) or a Python number (Note [source guards])."""
    ids = {id(t) for t in tensors}
    guards: list[Any] = []
    seen: set[int] = set()
    todo = [(f, 0) for f in _functions(fn)]
    while todo:
        f, depth = todo.pop()
        if id(f) in seen or depth > 4:
            continue
        seen.add(id(f))
        globs, names = _names(f.__code__)
        for name in sorted(globs & f.__globals__.keys()):
            get = functools.partial(_lookup, f.__globals__, name)
            todo += _watch(guards, ids, name, get, depth, names)
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            todo += _watch(guards, ids, name, functools.partial(_contents, cell), depth, names)
    return guards


def _watch(guards, ids, name, get, depth, names) -> list:
    """Guard the binding ``name`` (read by ``get``) if it holds something the trace
    depends on; return the functions it leads to, to walk next."""
    value = get()
    if id(value) in ids:
        guards.append(Guard(name, get, operator.is_, _show, value))
    elif isinstance(value, _NUMBERS):
        guards.append(Guard(name, get, _same_number, value=value))
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
        return [(f, depth + 1) for f in _functions(value)]
    return []


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
    the user's, so not walked."""
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
    all the names they use (attributes too). Only the first are bindings to guard: in
    ``for step in ...: opt.step()`` the global ``step`` is not what the step reads."""
    globs, names = set(), set(code.co_names)
    for ins in dis.get_instructions(code):
        if ins.opname in _GLOBAL_READS:
            globs.add(ins.argval)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
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
