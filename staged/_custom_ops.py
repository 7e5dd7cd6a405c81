"""``staged.ops`` (``torch.ops``): the operators defined through ``staged.library``, called
as ``ops.<namespace>.<name>(...)`` or ``ops.<namespace>.<name>.<overload>(...)``.

Each operator has a schema (torch's schema string, parsed) and kernels per dispatch key,
run as torch's dispatcher runs them on CPU tensors (Note [custom op dispatch]).
"""

from __future__ import annotations

import ast
import importlib
import os
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from . import dtypes
from ._where import warn_user
from .autograd.engine import gradient_edge
from .autograd.graph import increment_version
from .autograd.node import Node
from .eager import autocast
from .eager.grad_mode import _state, no_grad
from .eager.tensor import Tensor

REQUIRED = object()  # an Argument's default where it has none


class Argument(NamedTuple):
    """One argument (or return) of a schema; ``type`` is written without its alias
    annotation (``Tensor(a!)[]`` is ``Tensor[]``, ``is_write`` True)."""

    name: str
    type: str
    default: Any
    kwarg_only: bool
    is_write: bool
    text: str  # as written in the schema


class FunctionSchema(NamedTuple):
    """A parsed schema ``ns::name.overload(Tensor x, *, int k=1) -> Tensor``."""

    name: str
    overload_name: str
    arguments: tuple[Argument, ...]
    returns: tuple[Argument, ...]
    returns_text: str

    @property
    def is_mutable(self) -> bool:
        return any(a.is_write for a in self.arguments)

    def __str__(self) -> str:
        name = self.name + (f".{self.overload_name}" if self.overload_name else "")
        args, star = [], False
        for a in self.arguments:
            if a.kwarg_only and not star:
                args.append("*")
                star = True
            args.append(a.text)
        return f"{name}({', '.join(args)}) -> {self.returns_text}"


_ARG = re.compile(
    r"(?P<base>[A-Za-z_]\w*)(?:\((?P<alias>[^)]*)\))?(?P<suffix>(?:\[\d*\]|\?)*)"
    r"(?:\s+(?P<name>\w+))?(?:\s*=\s*(?P<default>.+))?"
)


def parse_schema(text: str, namespace: str = "") -> FunctionSchema:
    """``text`` (``name(args) -> returns``) parsed; ``namespace`` qualifies a bare name.
    Raises RuntimeError where it is not a schema."""
    m = re.fullmatch(r"\s*([\w:]+)(?:\.(\w+))?\s*\((.*)\)\s*->\s*(.+?)\s*", text, re.S)
    if m is None:
        raise RuntimeError(f"Expected a schema like 'name(Tensor x) -> Tensor', got: {text}")
    name, overload, args_text, ret = m.groups()
    if "::" not in name and namespace:
        name = f"{namespace}::{name}"
    arguments, kwarg_only = [], False
    for part in _split(args_text):
        if part == "*":
            kwarg_only = True
            continue
        arguments.append(_argument(part, kwarg_only, text))
    inner = ret[1:-1] if ret.startswith("(") and ret.endswith(")") else ret
    returns = tuple(_argument(p, False, text) for p in _split(inner))
    return FunctionSchema(name, overload or "", tuple(arguments), returns, ret)


def _split(text: str) -> list[str]:
    """``text`` split at its top-level commas."""
    parts, depth, start, quote = [], 0, 0, ""
    for i, c in enumerate(text):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    return parts + [last] if last or parts else parts


def _argument(part: str, kwarg_only: bool, schema: str) -> Argument:
    m = _ARG.fullmatch(part)
    if m is None:
        raise RuntimeError(f"Could not parse the argument '{part}' of the schema: {schema}")
    alias, typ = m["alias"], m["base"] + m["suffix"]
    default = REQUIRED if m["default"] is None else _default(m["default"].strip(), typ)
    is_write = alias is not None and alias.endswith("!")
    return Argument(m["name"] or "", typ, default, kwarg_only, is_write, part)


def _default(text: str, typ: str) -> Any:
    """A schema default as a Python value (a dtype's name as the dtype)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    try:
        return float(text)  # inf, nan, 1.
    except ValueError:
        pass
    dtype = getattr(dtypes, text, None)
    return dtype if typ.startswith("ScalarType") and dtype is not None else text


# the Python types an argument of each schema base type takes (bool is an int, as in
# torch; the rest are not checked)
_ACCEPTS: dict[str, tuple[type, ...]] = {
    "Tensor": (Tensor,),
    "int": (int,),
    "SymInt": (int,),
    "float": (float, int),
    "bool": (bool,),
    "str": (str,),
}
_AUTOGRAD = ("AutogradCPU", "Autograd")
_BACKEND = ("CPU", "CompositeExplicitAutograd", "CompositeImplicitAutograd")


# Note [custom op dispatch]: an OpOverload's kernels are looked up by dispatch key, the
# most specific first, as torch's dispatcher does for a CPU tensor: an Autograd kernel
# (``register_autograd``, custom_op's generated one, ``Library.impl(..., "Autograd")``)
# runs first and reaches the backend through ``below_autograd``; without one, a
# CompositeImplicitAutograd kernel runs as a decomposition (its ops record the graph);
# otherwise the backend kernel (CPU, then CompositeExplicitAutograd) runs under torch's
# "warn" autograd fallback: its ops record as they will, and backward through its outputs
# warns (``_warn_backward``) where they get gradients. Before all of them, while CPU
# autocast is on, an AutocastCPU kernel (which turns autocast off around its own calls,
# ``_C._ExcludeDispatchKeyGuard``). Keys of other devices (CUDA, Meta...) are kept and
# never chosen.
class OpOverload:
    """One overload of an operator: ``ops.ns.name.default``."""

    def __init__(self, schema: FunctionSchema):
        self._schema = schema
        self._name = schema.name
        self._namespace, self._opname = schema.name.split("::")
        self._overloadname = schema.overload_name or "default"
        self._kernels: dict[str, list[Callable]] = {}  # per key, the last registered wins
        self._bumps = False  # version counters of mutated args bumped (custom_op's)
        self._site = ""  # where it was defined
        self.__name__ = f"{self._opname}.{self._overloadname}"
        self.overloadpacket: OpOverloadPacket  # set by ``add``

    def name(self) -> str:
        """``ns::name.overload`` (``ns::name`` for the default overload), as torch's."""
        return self._name + ("" if self._overloadname == "default" else f".{self._overloadname}")

    def __repr__(self) -> str:
        return (
            f"<OpOverload(op='{self._namespace}.{self._opname}', overload='{self._overloadname}')>"
        )

    def __str__(self) -> str:
        return f"{self._namespace}.{self._opname}.{self._overloadname}"

    def kernel(self, keys) -> Callable | None:
        """The kernel of the first of ``keys`` that has one."""
        return next((self._kernels[k][-1] for k in keys if self._kernels.get(k)), None)

    def __call__(self, *args, **kwargs):
        args, kwargs = bind(self, args, kwargs)
        if autocast._active and autocast.is_enabled("cpu") and self._kernels.get("AutocastCPU"):
            return self._kernels["AutocastCPU"][-1](*args, **kwargs)  # it excludes itself
        fn = self.kernel(_AUTOGRAD)
        if fn is fallthrough_kernel:
            with no_grad():
                return below_autograd(self, args, kwargs)
        if fn is not None:
            return fn(*args, **kwargs)
        if self.kernel(_BACKEND[:2]) is None and self.kernel(_BACKEND[2:]) is not None:
            return self.kernel(_BACKEND[2:])(*args, **kwargs)
        out = below_autograd(self, args, kwargs)
        if _state.grad_enabled:
            _warn_backward(self, _tensors(args, kwargs), out)
        return out


def fallthrough_kernel():
    """A dummy kernel: registered to a key, the dispatcher goes on to the next key."""
    raise NotImplementedError("fallthrough_kernel() should never be called.")


def below_autograd(op: OpOverload, args: tuple, kwargs: dict):
    """``op``'s kernels past the Autograd key: mutated args' versions bumped (custom_op's
    ADInplaceOrView kernel), then the backend kernel."""
    if op._bumps:
        for i, a in enumerate(op._schema.arguments):
            if a.is_write:
                value = kwargs.get(a.name) if a.kwarg_only else args[i] if i < len(args) else None
                for t in value if isinstance(value, (list, tuple)) else (value,):
                    if isinstance(t, Tensor):
                        increment_version(t)
    fn = op.kernel(_BACKEND)
    if fn is None:
        raise NotImplementedError(
            f"Could not run '{op._name}' with arguments from the 'CPU' backend. This could "
            f"be because the operator doesn't exist for this backend. '{op._name}' has no "
            f"kernel registered for CPU, CompositeExplicitAutograd or CompositeImplicitAutograd."
        )
    return fn(*args, **kwargs)


def bind(op: OpOverload, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` checked against ``op``'s schema and given to kernels as torch
    gives them: the positional arguments up to the last one passed (by position or name,
    defaults filling the gaps) that is not its default, the keyword-only ones passed."""
    schema = op._schema
    arguments = schema.arguments
    if len(args) + len(kwargs) > len(arguments):
        raise RuntimeError(
            f"{op._name}() expected at most {len(arguments)} argument(s) but received "
            f"{len(args) + len(kwargs)} argument(s). Declaration: {schema}"
        )
    names = {a.name for a in arguments}
    for k in kwargs:
        if k not in names:
            raise RuntimeError(
                f"Unknown keyword argument '{k}' for operator '{op._name}'. Schema: {schema}"
            )
    positional, keyword, given = [], {}, 0
    for i, a in enumerate(arguments):
        if not a.kwarg_only and i < len(args):
            value = args[i]
        elif a.name in kwargs:
            value = kwargs[a.name]
        elif a.default is not REQUIRED:
            if not a.kwarg_only:
                positional.append(a.default)
            continue
        else:
            raise RuntimeError(
                f"{op._name}() is missing value for argument '{a.name}'. Declaration: {schema}"
            )
        _check(op, i, a, value)
        if a.kwarg_only:
            keyword[a.name] = value
        else:
            positional.append(value)
            given = len(positional)
    while given and _is_default(positional[given - 1], arguments[given - 1].default):
        given -= 1
    return tuple(positional[:given]), keyword


def _is_default(value, default) -> bool:
    """Whether ``value`` is the schema's ``default`` (torch drops such trailing args)."""
    if value is None or default is None or isinstance(value, Tensor):
        return value is default
    return type(value) is type(default) and value == default


def _check(op: OpOverload, i: int, arg: Argument, value) -> None:
    typ = arg.type
    optional = typ.endswith("?")
    typ = typ[:-1] if optional else typ
    if optional and value is None:
        return
    listed = typ.endswith("]")
    base = typ[: typ.index("[")] if listed else typ
    accepts = _ACCEPTS.get(base.rstrip("?"))
    if accepts is None:
        return
    if listed:
        if isinstance(value, (list, tuple)):
            ok = all(isinstance(v, accepts) or (v is None and base.endswith("?")) for v in value)
        else:  # an int for an int[N]
            ok = base in ("int", "SymInt") and isinstance(value, int)
    else:  # aten's operators take a number for a Tensor (torch's wrapped numbers)
        ok = isinstance(value, accepts) or (
            base == "Tensor"
            and op._namespace == "aten"
            and isinstance(value, (int, float, complex))
        )
    if not ok:
        found = "Tensor" if isinstance(value, Tensor) else type(value).__name__
        raise RuntimeError(
            f"{op._name}() Expected a value of type '{arg.type}' for argument '{arg.name}' "
            f"but instead found type '{found}'.\nPosition: {i}\nValue: {value!r}\n"
            f"Declaration: {op._schema}"
        )


def _tensors(args, kwargs):
    """The tensors among ``args`` and ``kwargs``, those in lists included."""
    for v in (*args, *kwargs.values()):
        if isinstance(v, Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (t for t in v if isinstance(t, Tensor))


def _warn_backward(op: OpOverload, inputs, out) -> None:
    """torch's "warn" autograd fallback: where an input requires grad, each output gets a
    backward that warns (an output the kernel recorded no graph for: one that gives None)."""
    inputs = [t for t in inputs if t._requires_grad]
    if not inputs:
        return
    message = (
        f"{op._name}: an autograd kernel was not registered to the Autograd key(s) but we "
        "are trying to backprop through it. This may lead to silently incorrect behavior. "
        "This behavior is deprecated and will be removed in a future version of PyTorch. "
        "If your operator is differentiable, please ensure you have registered an autograd "
        "kernel to the correct Autograd key (e.g. DispatchKey::Autograd, "
        "DispatchKey::CompositeImplicitAutograd). If your operator is not differentiable, or "
        "to squash this warning and use the previous behavior, please register "
        "torch::CppFunction::makeFallthrough() to DispatchKey::Autograd."
    )
    outs = [t for t in _tensors((out,) if not isinstance(out, tuple) else out, {})]
    loose = [t for t in outs if not t._requires_grad]
    node = _NotImplemented(message, inputs, len(loose)) if loose else None
    for nr, t in enumerate(loose):
        t.grad_fn, t._output_nr, t._requires_grad = node, nr, True
    for fn in {id(t.grad_fn): t.grad_fn for t in outs if t.grad_fn is not None}.values():
        if fn is not node:
            fn.register_prehook(lambda grads: warn_user(message))


class _NotImplemented(Node):
    """The backward of outputs a kernel without autograd support gave no graph: it warns
    and gives its inputs no gradient."""

    def __init__(self, message: str, inputs, num_outputs: int):
        super().__init__(tuple(gradient_edge(t)[:2] for t in inputs))
        self.message = message
        self.num_outputs = num_outputs

    def name(self) -> str:
        return "torch::autograd::NotImplemented"

    def apply(self, grads):
        warn_user(self.message)
        return [None] * len(self.next_functions)


class OpOverloadPacket:
    """An operator's overloads: ``ops.ns.name``; calling it calls the overload the
    arguments fit (the first that binds them)."""

    def __init__(self, namespace: str, name: str):
        self._qualified_op_name = f"{namespace}::{name}"
        self._namespace, self._name = namespace, name
        self.__name__ = name
        self._overloads: dict[str, OpOverload] = {}

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='{self._namespace}.{self._name}')>"

    def __getattr__(self, overload: str) -> OpOverload:
        try:
            return self.__dict__["_overloads"][overload]
        except KeyError:
            raise AttributeError(
                f"The underlying op of '{self._namespace}.{self._name}' has no overload "
                f"name '{overload}'"
            ) from None

    def overloads(self) -> list[str]:
        return list(self._overloads)

    def __call__(self, *args, **kwargs):
        overloads = list(self._overloads.values())
        for op in overloads[:-1]:
            try:
                bind(op, args, kwargs)
            except RuntimeError:
                continue
            return op(*args, **kwargs)
        return overloads[-1](*args, **kwargs)


class _Namespace:
    """``ops.<namespace>``: its operators as attributes."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, name: str) -> OpOverloadPacket:
        packet = PACKETS.get(f"{self._name}::{name}")
        if packet is None and self._name in MADE and not name.startswith("__"):
            packet = MADE[self._name](name)
        if packet is None or not packet._overloads:
            raise AttributeError(f"'_OpNamespace' '{self._name}' object has no attribute '{name}'")
        return packet


class _Ops:
    """``torch.ops``: ``ops.<namespace>.<name>``."""

    def __init__(self) -> None:
        self.loaded_libraries: set[str] = set()

    def load_library(self, path) -> None:
        """torch's loader of compiled operator libraries. staged cannot load them (they are
        built against libtorch) but for torchvision's ``_C`` extension, whose operators it
        defines itself (``staged.vision_ops``); any other raises OSError, as a library that
        fails to load does in torch."""
        path = os.fspath(path)
        folder, name = os.path.split(path)
        if os.path.basename(folder) == "torchvision" and name.startswith("_C."):
            importlib.import_module("staged.vision_ops").register()
            self.loaded_libraries.add(path)
            return
        raise OSError(
            f"Could not load this library: {path}: staged cannot load operator libraries "
            "compiled against libtorch; define the operators in Python with torch.library"
        )

    def __getattr__(self, namespace: str) -> _Namespace:
        if namespace.startswith("__"):
            raise AttributeError(namespace)
        return _Namespace(namespace)


PACKETS: dict[str, OpOverloadPacket] = {}  # "ns::name" -> its overloads
# namespaces whose operators are made on first use: namespace -> maker of ``ops.ns.<name>``
# (None where there is no such operator); aten's are staged's own ops (``_aten.py``)
MADE: dict[str, Callable[[str], OpOverloadPacket | None]] = {}
ops = _Ops()


def lookup(qualname: str) -> OpOverload | None:
    """The overload named ``ns::name`` or ``ns::name.overload``; None if undefined."""
    name, _, overload = qualname.partition(".")
    packet = PACKETS.get(name)
    return None if packet is None else packet._overloads.get(overload or "default")


def add(schema: FunctionSchema) -> OpOverload:
    """A new overload of ``schema``'s operator."""
    ns, name = schema.name.split("::")
    packet = PACKETS.setdefault(schema.name, OpOverloadPacket(ns, name))
    op = packet._overloads[schema.overload_name or "default"] = OpOverload(schema)
    op.overloadpacket = packet
    return op


def remove(op: OpOverload) -> None:
    """Undefine ``op`` (its Library was destroyed)."""
    packet = PACKETS.get(op._name)
    if packet is not None and packet._overloads.get(op._overloadname) is op:
        del packet._overloads[op._overloadname]
