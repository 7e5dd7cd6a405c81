"""Names for a trace's inputs and outputs, from where the traced function reaches them.

Note [state names]: a graph's state inputs and outputs are named as PyTorch names the
same tensors: a parameter or buffer by its ``state_dict`` key (``fc1.weight``; with the
module's variable in front when the step reaches several modules: ``model.fc1.weight``),
its ``.grad`` as ``fc1.weight.grad``, an optimizer's buffer as
``opt.state[fc1.weight].exp_avg`` (the optimizer's variable, the parameter's name, torch's
state key: ``exp_avg``, ``exp_avg_sq``, ``momentum_buffer``, ``step``), a tensor read
through a global or a closure cell by that variable; results by what the function returns
(``return loss`` -> ``loss``; ``return loss, {"logits": z}`` -> ``loss``, ``logits``).

The names come from a walk of the objects the function reaches, once per trace and after
it (so they cost nothing per call): its arguments, then the globals and closure cells its
code reads, the functions and user modules reached through those (as Note [source guards]
walks them), a bound method's ``self`` and the attributes of objects of the user's own
classes (``self.model``), lists, tuples and string-keyed dicts, breadth first (the shortest
path names an object) and a few levels deep. Modules are recognised by
``named_parameters``/``named_buffers``/``modules``, optimizers by ``param_groups`` and a
``state`` dict (tracing sits below ``nn`` and ``optim``, so it may not import them). A
state tensor the walk does not reach keeps a positional name (``state7``); a name is never
guessed from the data. The (seed, counter) state of the counter-based generator that
dropout draws from (``rng="counter"``, Note [counter-based RNG]) is ``rng_state``, the
name an ONNX export gives it (Note [exported RNG state] in staged/onnx.py); a step saved
before it was named (``state4``) keeps its manifest's name, which is all its loader
reads. Walking the objects the caller can reach, rather than recording
names while the trace lifts tensors, is what gives ``fc1.weight`` and ``opt``: the trace
sees tensors and modules, but not the variables and ``state_dict`` paths that hold them.
"""

from __future__ import annotations

import ast
import collections
import functools
import inspect
import sys
import textwrap
import types
from typing import Any

from ..eager.random.counter import rng_state
from ..eager.tensor import Tensor
from .guards import _functions, _is_library, _names

RNG_STATE = "rng_state"  # the name of the counter-based generator's (seed, counter) state
_DEPTH = 4  # levels of objects walked below the function
_OBJECTS = 2000  # objects walked at most
_ITEMS = 64  # items of a list, tuple or dict walked at most


def state_names(fn, arg_names, leaves, dict_writes=()) -> dict:
    """``id(tensor) -> name`` for the parameters, buffers, ``.grad`` fields, optimizer
    state and tensors ``fn`` reaches (Note [state names]). ``leaves`` are the call's
    argument leaves, named ``arg_names``; ``dict_writes`` the ``(dict, items after the
    trace)`` of a trace, whose new optimizer buffers are named too."""
    found = _reachable(fn, arg_names, leaves)
    names, tensors = {}, []

    def put(t, name):
        if isinstance(t, Tensor) and id(t) not in names:
            names[id(t)] = name
            tensors.append(t)

    modules = [
        (p, o, [*o.named_parameters(), *o.named_buffers()]) for p, o in found if is_module(o)
    ]
    inner = {id(m) for _, o, _ in modules for m in o.modules() if m is not o}
    roots = [
        (p, ts)
        for p, m, ts in modules
        if id(m) not in inner  # not torch's:
        and any(isinstance(t, Tensor) for _, t in ts)
    ]
    for path, ts in roots:
        prefix = "" if len(roots) == 1 or not path else path + "."
        for k, t in ts:
            put(t, prefix + k)
    for path, t in found:
        put(t, path)
    after = {id(d): items for d, items in dict_writes}
    for path, opt in found:
        if not _is_optimizer(opt):
            continue
        # torch's state_dict numbering, for parameters the walk did not name
        index: dict[int, int] = {}
        for group in opt.param_groups:
            for p in group.get("params", ()):
                index.setdefault(id(p), len(index))
        for state in (opt.state, after.get(id(opt.state), {})):
            for p, st in state.items():
                if not isinstance(st, dict):
                    continue
                pname = names.get(id(p)) or str(index.get(id(p), "?"))
                for k, v in [*st.items(), *after.get(id(st), {}).items()]:
                    put(v, f"{path}.state[{pname}].{k}")
    for t in tensors[:]:
        if t._grad is not None:
            put(t._grad, names[id(t)] + ".grad")
    put(rng_state(), RNG_STATE)  # dropout's (seed, counter), as ONNX names it
    return names


def output_names(fn, out_tree) -> list:
    """A name per output leaf: what ``fn`` returns (``loss``), dict keys, else ``out``,
    ``out.0``, ``out.1.logits`` (as ``staged run`` names them)."""
    top = _returned(fn)
    names = []

    def walk(t, name, depth):
        if t == "*":
            names.append(name)
        elif t[0] == "dict":
            for k, s in zip(t[1], t[2]):  # a key names its value, after a given name
                positional = name == "out" or name.startswith("out.")
                walk(s, str(k) if positional and isinstance(k, str) else f"{name}.{k}", depth + 1)
        else:
            for i, s in enumerate(t[1]):
                given = top[i] if depth == 0 and top and len(top) == len(t[1]) else None
                walk(s, given or f"{name}.{i}", depth + 1)

    if out_tree == "*" and top and len(top) == 1 and top[0]:
        return list(top)
    walk(out_tree, "out", 0)
    return names


def _returned(fn):
    """The names ``fn``'s ``return`` statements give its results (``return loss, z`` ->
    ``["loss", "z"]``; None for an element that is not a plain name), when every return
    agrees; else None."""
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    if not isinstance(fn, types.FunctionType) or fn.__name__ == "<lambda>":
        return None
    return _returns(fn.__code__)


@functools.lru_cache(maxsize=256)
def _returns(code: types.CodeType):
    """``_returned`` of the function of ``code`` (parsed once: every trace asks)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(code)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    f = tree.body[0] if tree.body else None
    if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    results = set()
    todo: list[ast.AST] = list(f.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            v = node.value
            elts = v.elts if isinstance(v, (ast.Tuple, ast.List)) else [v]
            results.add(tuple(e.id if isinstance(e, ast.Name) else None for e in elts))
        elif not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
        ):
            todo.extend(ast.iter_child_nodes(node))
    return list(results.pop()) if len(results) == 1 else None


def _reachable(fn, arg_names, leaves) -> list:
    """``(path, object)`` of the tensors, modules and optimizers ``fn`` reaches, breadth
    first (Note [state names])."""
    found: list[Any] = []
    seen: set[int] = set()
    todo = collections.deque((n, x, 0) for n, x in zip(arg_names, leaves))
    todo.append(("", fn, 0))
    while todo and len(seen) < _OBJECTS:
        path, obj, depth = todo.popleft()
        if (
            id(obj) in seen
            or depth > _DEPTH
            or obj is None
            or isinstance(obj, (str, bytes, int, float, complex, type))
        ):
            continue
        seen.add(id(obj))
        if isinstance(obj, Tensor) or is_module(obj) or _is_optimizer(obj):
            if path or is_module(obj):  # the function may be a module itself
                found.append((path, obj))
            continue
        todo.extend(_children(path, obj, depth))
    return found


def _children(path, obj, depth) -> list:
    """What the walk visits next from ``obj``: ``(path, object, depth)``."""
    out, d = [], depth + 1
    if isinstance(obj, types.MethodType):
        out.append((path.rpartition(".")[0] or "self", obj.__self__, d))
    for f in _functions(obj):
        globs = _names(f.__code__)[0]
        out += [(n, f.__globals__[n], d) for n in sorted(globs & f.__globals__.keys())]
        for n, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            try:
                out.append((n, cell.cell_contents, d))
            except ValueError:  # an empty cell
                pass
    if isinstance(obj, types.ModuleType):
        if not _is_library(obj):
            out += [
                (f"{path}.{k}", v, d)
                for k, v in list(vars(obj).items())[:_OBJECTS]
                if not k.startswith("__")
            ]
    elif isinstance(obj, (list, tuple)):
        out += [(f"{path}[{i}]", v, d) for i, v in enumerate(obj[:_ITEMS])]
    elif isinstance(obj, dict):
        out += [
            (f"{path}[{k!r}]", v, d) for k, v in list(obj.items())[:_ITEMS] if isinstance(k, str)
        ]
    elif _users_own(obj):
        out += [(f"{path}.{k}" if path else k, v, d) for k, v in vars(obj).items()]
    return out


def _users_own(obj) -> bool:
    """An instance of a class defined in the user's code (not staged's, not a library's)."""
    mod = sys.modules.get(type(obj).__module__)
    return (
        hasattr(obj, "__dict__")
        and mod is not None
        and (mod.__name__ == "__main__" or not _is_library(mod))
    )


def is_module(obj) -> bool:
    """A Module, by its traversal methods (staged.nn is not imported below it)."""
    return all(
        callable(getattr(type(obj), a, None))
        for a in ("named_parameters", "named_buffers", "modules")
    )


def _is_optimizer(obj) -> bool:
    return (
        isinstance(getattr(obj, "param_groups", None), list)
        and isinstance(getattr(obj, "state", None), dict)
        and not isinstance(obj, type)
    )
