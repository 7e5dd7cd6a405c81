"""``torch.utils._pytree``: nested containers (pytrees) flattened to their leaves and a
``TreeSpec`` of their structure, and rebuilt from them; torch 2.13's Python API, node
registry, key paths and JSON format (``treespec_dumps``), so libraries that register their
classes at import (transformers' ``ModelOutput`` and caches) and programs written against
torch's module run unchanged. A leaf is anything whose exact type is not a registered node
(a namedtuple counts as the node ``namedtuple``). staged's ``return_types`` are namedtuples
where torch's are structseqs; they flatten as torch's do: each its own node type, no
context, ``SequenceKey`` paths, and no serialized name."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import threading
import types
import warnings
from collections import OrderedDict, defaultdict, deque, namedtuple
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from enum import Enum
from typing import Any, Generic, NamedTuple, Protocol, TypeAlias, TypeVar

from .. import return_types

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

Context = Any
PyTree = Any
FlattenFn = Callable[[PyTree], tuple[list[Any], Context]]
UnflattenFn = Callable[[Iterable[Any], Context], PyTree]
DumpableContext = Any  # anything json can dump
ToDumpableContextFn = Callable[[Context], DumpableContext]
FromDumpableContextFn = Callable[[DumpableContext], Context]
ToStrFunc = Callable[["TreeSpec", list[str]], str]  # deprecated in torch
MaybeFromStrFunc = Callable[[str], tuple[Any, Context, str] | None]  # deprecated in torch
FlattenWithKeysFn = Callable[[PyTree], tuple[list[tuple["KeyEntry", Any]], Any]]
FlattenFunc, UnflattenFunc, FlattenWithKeysFunc = FlattenFn, UnflattenFn, FlattenWithKeysFn


class KeyEntry(Protocol):
    def __hash__(self) -> int: ...

    def __eq__(self, other: object) -> bool: ...

    def __str__(self) -> str: ...

    def get(self, parent: Any) -> Any: ...


KeyPath = tuple[KeyEntry, ...]

DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL = 1
NO_SERIALIZED_TYPE_NAME_FOUND = "NO_SERIALIZED_TYPE_NAME_FOUND"


class NodeDef(NamedTuple):
    type: type[Any]
    flatten_fn: FlattenFn
    unflatten_fn: UnflattenFn
    flatten_with_keys_fn: FlattenWithKeysFn | None


class _SerializeNodeDef(NamedTuple):
    typ: type[Any]
    serialized_type_name: str
    to_dumpable_context: ToDumpableContextFn | None
    from_dumpable_context: FromDumpableContextFn | None


_NODE_REGISTRY_LOCK = threading.RLock()
SUPPORTED_NODES: dict[type[Any], NodeDef] = {}
SUPPORTED_SERIALIZED_TYPES: dict[type[Any], _SerializeNodeDef] = {}
SERIALIZED_TYPE_TO_PYTHON_TYPE: dict[str, type[Any]] = {}
CONSTANT_NODES: set[type] = set()


# --- registering node types -------------------------------------------------------------------
def register_pytree_node(
    cls: type[Any],
    flatten_fn: FlattenFn,
    unflatten_fn: UnflattenFn,
    *,
    serialized_type_name: str | None = None,
    to_dumpable_context: ToDumpableContextFn | None = None,
    from_dumpable_context: FromDumpableContextFn | None = None,
    flatten_with_keys_fn: FlattenWithKeysFn | None = None,
) -> None:
    """Register ``cls`` as a node: ``flatten_fn(x) -> (children, context)``,
    ``unflatten_fn(children, context) -> x``; ValueError if it is registered already."""
    with _NODE_REGISTRY_LOCK:
        if cls in SUPPORTED_NODES:
            raise ValueError(f"{cls} is already registered as pytree node.")
        _private_register_pytree_node(
            cls,
            flatten_fn,
            unflatten_fn,
            serialized_type_name=serialized_type_name,
            to_dumpable_context=to_dumpable_context,
            from_dumpable_context=from_dumpable_context,
            flatten_with_keys_fn=flatten_with_keys_fn,
        )


def _register_pytree_node(
    cls: type[Any],
    flatten_fn: FlattenFn,
    unflatten_fn: UnflattenFn,
    to_str_fn: ToStrFunc | None = None,
    maybe_from_str_fn: MaybeFromStrFunc | None = None,
    *,
    serialized_type_name: str | None = None,
    to_dumpable_context: ToDumpableContextFn | None = None,
    from_dumpable_context: FromDumpableContextFn | None = None,
    flatten_with_keys_fn: FlattenWithKeysFn | None = None,
) -> None:
    """The deprecated name older libraries call (transformers before torch 2.2): registers
    again over an earlier registration, with a warning."""
    warnings.warn(
        "`torch.utils._pytree._register_pytree_node` is deprecated. "
        "Please use `torch.utils._pytree.register_pytree_node` instead.",
        FutureWarning,
        stacklevel=2,
    )
    if to_str_fn is not None or maybe_from_str_fn is not None:
        warnings.warn(
            "`to_str_fn` and `maybe_from_str_fn` is deprecated. "
            "Please use `to_dumpable_context` and `from_dumpable_context` instead.",
            FutureWarning,
            stacklevel=2,
        )
    _private_register_pytree_node(
        cls,
        flatten_fn,
        unflatten_fn,
        serialized_type_name=serialized_type_name,
        to_dumpable_context=to_dumpable_context,
        from_dumpable_context=from_dumpable_context,
        flatten_with_keys_fn=flatten_with_keys_fn,
    )


def _private_register_pytree_node(
    cls: type[Any],
    flatten_fn: FlattenFn,
    unflatten_fn: UnflattenFn,
    *,
    serialized_type_name: str | None = None,
    to_dumpable_context: ToDumpableContextFn | None = None,
    from_dumpable_context: FromDumpableContextFn | None = None,
    flatten_with_keys_fn: FlattenWithKeysFn | None = None,
) -> None:
    """Register (or, with a warning, re-register) ``cls`` as a node."""
    if (to_dumpable_context is None) ^ (from_dumpable_context is None):
        raise ValueError(
            f"Both to_dumpable_context and from_dumpable_context for {cls} must "
            "be None or registered."
        )
    with _NODE_REGISTRY_LOCK:
        if cls in SUPPORTED_NODES:
            warnings.warn(
                f"{cls} is already registered as pytree node. "
                "Overwriting the previous registration.",
                stacklevel=2,
            )
        SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)
        name = (
            NO_SERIALIZED_TYPE_NAME_FOUND if serialized_type_name is None else serialized_type_name
        )
        SUPPORTED_SERIALIZED_TYPES[cls] = _SerializeNodeDef(
            cls, name, to_dumpable_context, from_dumpable_context
        )
        SERIALIZED_TYPE_TO_PYTHON_TYPE[name] = cls


def _deregister_pytree_node(cls: type[Any]) -> None:
    with _NODE_REGISTRY_LOCK:
        del SUPPORTED_NODES[cls]
        del SERIALIZED_TYPE_TO_PYTHON_TYPE[SUPPORTED_SERIALIZED_TYPES.pop(cls).serialized_type_name]
        CONSTANT_NODES.discard(cls)


def register_dataclass(
    cls: type[Any],
    *,
    field_names: list[str] | None = None,
    drop_field_names: list[str] | None = None,
    serialized_type_name: str | None = None,
) -> None:
    """Register a class built from its fields (a dataclass: its ``init`` fields, less
    ``drop_field_names``); fields that are None are kept in the context, not as leaves."""
    drop = drop_field_names or []
    if not dataclasses.is_dataclass(cls):
        if field_names is None:
            raise ValueError(
                "field_names must be specified with a list of all fields used to "
                f"initialize {cls}, as it is not a dataclass."
            )
    elif field_names is None:
        field_names = [f.name for f in dataclasses.fields(cls) if f.init]
    else:
        init = {f.name for f in dataclasses.fields(cls) if f.init} - set(drop)
        if init != set(field_names):
            msg = "field_names does not include all dataclass fields.\n"
            if missing := init - set(field_names):
                msg += (
                    f"Missing fields in `field_names`: {missing}. If you want "
                    "to include these fields in the pytree, please add them "
                    "to `field_names`, otherwise please add them to "
                    "`drop_field_names`.\n"
                )
            if unexpected := set(field_names) - init:
                msg += (
                    f"Unexpected fields in `field_names`: {unexpected}. "
                    "Please remove these fields, or add them to `drop_field_names`.\n"
                )
            raise ValueError(msg)
    names = field_names

    def flatten(obj: Any) -> tuple[list[Any], Context]:
        values = [getattr(obj, n) for n in names]
        kept = [n for n, v in zip(names, values) if v is not None]
        return [v for v in values if v is not None], [kept, [n for n in names if n not in kept]]

    def unflatten(values: Iterable[Any], context: Context) -> Any:
        kept, none = context
        return cls(**dict(zip(kept, values, strict=True)), **dict.fromkeys(none))

    def flatten_with_keys(obj: Any) -> tuple[list[tuple[KeyEntry, Any]], Context]:
        values, (kept, _) = flatten(obj)
        return [(GetAttrKey(k), v) for k, v in zip(kept, values, strict=True)], kept

    _private_register_pytree_node(
        cls,
        flatten,
        unflatten,
        serialized_type_name=serialized_type_name,
        flatten_with_keys_fn=flatten_with_keys,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ConstantNode(Generic[T]):
    value: T


def register_constant(cls: type[Any]) -> None:
    """Register a hashable type whose instances are nodes with no leaves: the object itself
    is kept in the spec's context (a ``ConstantNode``)."""
    if cls.__eq__ is object.__eq__:
        raise TypeError(
            "register_constant(cls) expects `cls` to have a non-default `__eq__` implementation."
        )
    if cls.__hash__ is None:
        raise TypeError(
            "register_constant(cls) expects `cls` to have a non-default `__hash__` implementation."
        )
    with _NODE_REGISTRY_LOCK:
        _private_register_pytree_node(
            cls,
            _constant_flatten,
            lambda _, context: context.value,
            flatten_with_keys_fn=_constant_flatten,
        )
        CONSTANT_NODES.add(cls)


def _constant_flatten(x: Any) -> tuple[list[Any], Context]:
    return [], ConstantNode(x)


def is_constant_class(cls: type[Any]) -> bool:
    return isinstance(cls, type) and cls in CONSTANT_NODES


def _register_namedtuple(cls: type[Any], *, serialized_type_name: str) -> None:
    """Give the namedtuple ``cls`` a serialized name, so specs holding it can be dumped."""
    _private_register_pytree_node(
        cls,
        _namedtuple_flatten,
        _namedtuple_unflatten,
        serialized_type_name=serialized_type_name,
        to_dumpable_context=_namedtuple_serialize,
        from_dumpable_context=_namedtuple_deserialize,
        flatten_with_keys_fn=_namedtuple_flatten_with_keys,
    )


# --- key paths --------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey(Generic[T]):
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def get(self, sequence: Sequence[T]) -> T:
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True, slots=True)
class MappingKey(Generic[K, T]):
    key: K

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def get(self, mapping: Mapping[K, T]) -> T:
        return mapping[self.key]


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    name: str

    def __str__(self) -> str:
        return f".{self.name}"

    def get(self, obj: Any) -> Any:
        return getattr(obj, self.name)


def keystr(kp: KeyPath) -> str:
    """A key path as ``[0]['a'].b``."""
    return "".join(str(k) for k in kp)


def key_get(obj: Any, kp: KeyPath) -> Any:
    """The value at the key path ``kp`` in ``obj``."""
    for k in kp:
        obj = k.get(obj)
    return obj


# --- namedtuples and structseqs (optree's tests) ------------------------------------------------
def is_namedtuple(obj: object | type) -> bool:
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def is_namedtuple_class(cls: type) -> bool:
    return (
        isinstance(cls, type)
        and issubclass(cls, tuple)
        and isinstance(getattr(cls, "_fields", None), tuple)
        and all(type(f) is str for f in cls._fields)  # type: ignore[attr-defined]
        and callable(getattr(cls, "_make", None))
        and callable(getattr(cls, "_asdict", None))
    )


def is_namedtuple_instance(obj: object) -> bool:
    return is_namedtuple_class(type(obj))


Py_TPFLAGS_BASETYPE: int = 1 << 10  # the type may be subclassed (CPython's object.h)


def is_structseq(obj: object | type) -> bool:
    return is_structseq_class(obj if isinstance(obj, type) else type(obj))


def is_structseq_class(cls: type) -> bool:
    """A C ``PyStructSequence`` (``os.stat_result``); staged's return types are not one."""
    return (
        isinstance(cls, type)
        and cls.__bases__ == (tuple,)
        and all(
            isinstance(getattr(cls, a, None), int)
            for a in ("n_fields", "n_sequence_fields", "n_unnamed_fields")
        )
        and not cls.__flags__ & Py_TPFLAGS_BASETYPE
    )


def is_structseq_instance(obj: object) -> bool:
    return is_structseq_class(type(obj))


# --- the built-in nodes -----------------------------------------------------------------------
def _tuple_flatten(d: tuple[T, ...]) -> tuple[list[T], Context]:
    return list(d), None


def _tuple_flatten_with_keys(d: tuple[T, ...]) -> tuple[list[tuple[KeyEntry, T]], Context]:
    return [(SequenceKey(i), v) for i, v in enumerate(d)], None


def _tuple_unflatten(values: Iterable[T], context: Context) -> tuple[T, ...]:
    return tuple(values)


def _list_flatten(d: list[T]) -> tuple[list[T], Context]:
    return d, None


def _list_flatten_with_keys(d: list[T]) -> tuple[list[tuple[KeyEntry, T]], Context]:
    return [(SequenceKey(i), v) for i, v in enumerate(d)], None


def _list_unflatten(values: Iterable[T], context: Context) -> list[T]:
    return list(values)


def _dict_flatten(d: dict[Any, T]) -> tuple[list[T], Context]:
    return list(d.values()), list(d.keys())


def _dict_flatten_with_keys(d: dict[Any, T]) -> tuple[list[tuple[KeyEntry, T]], Context]:
    return [(MappingKey(k), v) for k, v in d.items()], list(d.keys())


def _dict_unflatten(values: Iterable[T], context: Context) -> dict[Any, T]:
    return dict(zip(context, values, strict=True))


def _namedtuple_flatten(d: tuple) -> tuple[list[Any], Context]:
    return list(d), type(d)


def _namedtuple_flatten_with_keys(d: tuple) -> tuple[list[tuple[KeyEntry, Any]], Context]:
    return [(GetAttrKey(f), v) for f, v in zip(d._fields, d, strict=True)], type(d)  # type: ignore[attr-defined]


def _namedtuple_unflatten(values: Iterable[T], context: Context) -> tuple:
    return context(*values)


def _namedtuple_serialize(context: Context) -> DumpableContext:
    node = SUPPORTED_SERIALIZED_TYPES.get(context)
    if node is None or node.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
        why = "didn't register" if node is None else "couldn't find"
        raise NotImplementedError(
            f"Can't serialize TreeSpec of namedtuple class {context} because we "
            f"{why} a serializated_type_name. Please register using "
            "`_register_namedtuple`."
        )
    return node.serialized_type_name


def _namedtuple_deserialize(dumpable_context: DumpableContext) -> Context:
    if dumpable_context not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
        raise NotImplementedError(
            f"Can't deserialize TreeSpec of namedtuple class {dumpable_context} "
            "because we couldn't find a serializated name."
        )
    return SERIALIZED_TYPE_TO_PYTHON_TYPE[dumpable_context]


def _ordereddict_flatten(d: OrderedDict[Any, T]) -> tuple[list[T], Context]:
    return list(d.values()), list(d.keys())


def _ordereddict_unflatten(values: Iterable[T], context: Context) -> OrderedDict[Any, T]:
    return OrderedDict(zip(context, values, strict=True))


_ordereddict_flatten_with_keys = _dict_flatten_with_keys
_odict_flatten, _odict_unflatten = _ordereddict_flatten, _ordereddict_unflatten


def _defaultdict_flatten(d: defaultdict[Any, T]) -> tuple[list[T], Context]:
    return list(d.values()), [d.default_factory, list(d.keys())]


def _defaultdict_flatten_with_keys(
    d: defaultdict[Any, T],
) -> tuple[list[tuple[KeyEntry, T]], Context]:
    return [(MappingKey(k), v) for k, v in d.items()], [d.default_factory, list(d.keys())]


def _defaultdict_unflatten(values: Iterable[T], context: Context) -> defaultdict[Any, T]:
    default_factory, keys = context
    return defaultdict(default_factory, _dict_unflatten(values, keys))


def _defaultdict_serialize(context: Context) -> DumpableContext:
    default_factory, keys = context
    return {
        "default_factory_module": default_factory.__module__,
        "default_factory_name": default_factory.__qualname__,
        "dict_context": keys,
    }


def _defaultdict_deserialize(dumpable_context: DumpableContext) -> Context:
    fields = {"default_factory_module", "default_factory_name", "dict_context"}
    if not isinstance(dumpable_context, dict):
        raise AssertionError("dumpable_context must be a dict")
    if set(dumpable_context) != fields:
        raise AssertionError(f"dumpable_context keys must be {fields}, got {set(dumpable_context)}")
    module = importlib.import_module(dumpable_context["default_factory_module"])
    factory = getattr(module, dumpable_context["default_factory_name"])
    return [factory, dumpable_context["dict_context"]]


def _deque_flatten(d: deque[T]) -> tuple[list[T], Context]:
    return list(d), d.maxlen


def _deque_flatten_with_keys(d: deque[T]) -> tuple[list[tuple[KeyEntry, T]], Context]:
    return [(SequenceKey(i), v) for i, v in enumerate(d)], d.maxlen


def _deque_unflatten(values: Iterable[T], context: Context) -> deque[T]:
    return deque(values, maxlen=context)


def _builtin(cls: Any, flatten: Any, unflatten: Any, keys: Any, name: str, *dumpable: Any) -> None:
    to, frm = dumpable or (None, None)
    _private_register_pytree_node(
        cls,
        flatten,
        unflatten,
        serialized_type_name=name,
        to_dumpable_context=to,
        from_dumpable_context=frm,
        flatten_with_keys_fn=keys,
    )


_builtin(tuple, _tuple_flatten, _tuple_unflatten, _tuple_flatten_with_keys, "builtins.tuple")
_builtin(list, _list_flatten, _list_unflatten, _list_flatten_with_keys, "builtins.list")
_builtin(dict, _dict_flatten, _dict_unflatten, _dict_flatten_with_keys, "builtins.dict")
_builtin(
    namedtuple,
    _namedtuple_flatten,
    _namedtuple_unflatten,
    _namedtuple_flatten_with_keys,
    "collections.namedtuple",
    _namedtuple_serialize,
    _namedtuple_deserialize,
)
_builtin(
    OrderedDict,
    _ordereddict_flatten,
    _ordereddict_unflatten,
    _ordereddict_flatten_with_keys,
    "collections.OrderedDict",
)
_builtin(
    defaultdict,
    _defaultdict_flatten,
    _defaultdict_unflatten,
    _defaultdict_flatten_with_keys,
    "collections.defaultdict",
    _defaultdict_serialize,
    _defaultdict_deserialize,
)
_builtin(deque, _deque_flatten, _deque_unflatten, _deque_flatten_with_keys, "collections.deque")

STANDARD_DICT_TYPES: frozenset[type] = frozenset({dict, OrderedDict, defaultdict})
BUILTIN_TYPES: frozenset[Any] = frozenset(
    {tuple, list, dict, namedtuple, OrderedDict, defaultdict, deque}
)


def _register_return_type(cls: type) -> None:
    """As torch.return_types registers each of its structseqs."""
    register_pytree_node(
        cls,
        _tuple_flatten,
        lambda values, _: cls(*values),
        flatten_with_keys_fn=_tuple_flatten_with_keys,
    )


_RETURN_TYPES = frozenset(return_types.all_return_types)
for _cls in _RETURN_TYPES:
    _register_return_type(_cls)


def _get_node_type(tree: Any) -> Any:
    """``type(tree)``, but ``namedtuple`` for a namedtuple, even one registered itself (as
    torch; staged's return types excepted, which are structseqs in torch)."""
    kind = type(tree)
    if kind not in _RETURN_TYPES and is_namedtuple_class(kind):
        return namedtuple
    return kind


def tree_is_leaf(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> bool:
    """Whether ``tree`` is a leaf: ``is_leaf(tree)``, or its type is no registered node."""
    if is_leaf is not None and is_leaf(tree):
        return True
    return _get_node_type(tree) not in SUPPORTED_NODES


# --- TreeSpec ---------------------------------------------------------------------------------
@dataclasses.dataclass(init=False, frozen=True, repr=False, slots=True)
class TreeSpec:
    """A pytree's structure: the root's node type (None for a leaf), the context its
    flatten function returned, and the children's specs."""

    type: Any
    _context: Context
    _children: list[TreeSpec]
    num_nodes: int = dataclasses.field(init=False)
    num_leaves: int = dataclasses.field(init=False)
    num_children: int = dataclasses.field(init=False)

    def __init__(self, type: Any, context: Context, children_specs: list[TreeSpec]) -> None:
        if type is None and (context is not None or children_specs):
            what = "a context" if context is not None else "children"
            raise AssertionError(f"leaf node should not have {what}")
        leaf = type is None
        for name, value in [
            ("type", type),
            ("_context", context),
            ("_children", children_specs),
            ("num_nodes", 1 + sum(c.num_nodes for c in children_specs)),
            ("num_leaves", 1 if leaf else sum(c.num_leaves for c in children_specs)),
            ("num_children", len(children_specs)),
        ]:
            object.__setattr__(self, name, value)

    def __repr__(self, indent: int = 0) -> str:
        inner = indent + 2
        children = (",\n" + " " * inner).join(c.__repr__(inner) for c in self._children)
        return f"TreeSpec({self.type.__name__}, {self._context}, [{children}])"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, TreeSpec)
        return (
            str(self.type) == str(other.type)
            and self._context == other._context
            and self._children == other._children
        )

    def __hash__(self) -> int:
        kind, context = self.type, self._context
        if kind is defaultdict:
            context = (context[0], tuple(context[1]))
        elif kind in (dict, OrderedDict):
            context = tuple(context)
        elif isinstance(context, ConstantNode):
            context = context.value
        elif kind is not None and kind not in BUILTIN_TYPES:
            context = None  # a user node's context may be unhashable
        return hash((kind, context, tuple(self._children)))

    @property
    def context(self) -> Context:
        return self._context

    @property
    def children_specs(self) -> list[TreeSpec]:
        warnings.warn(
            "`treespec.children_specs` is deprecated. "
            "Use `treespec.child(index)` to access a single child, "
            "or `treespec.children()` to get all children.",
            FutureWarning,
            stacklevel=2,
        )
        return self._children

    def is_leaf(self) -> bool:
        return self.num_nodes == 1 and self.num_leaves == 1

    def children(self) -> list[TreeSpec]:
        return self._children.copy()

    def child(self, index: int) -> TreeSpec:
        return self._children[index]

    def flatten_up_to(self, tree: PyTree) -> list[PyTree]:
        """The subtrees of ``tree`` at this spec's leaves (ValueError where ``tree`` does not
        have this spec as a prefix); dicts of the three standard kinds match each other."""
        subtrees: list[PyTree] = []
        _flatten_up_to(self, tree, subtrees)
        return subtrees

    def unflatten(self, leaves: Iterable[Any]) -> PyTree:
        """The pytree of this structure holding ``leaves``."""
        if not isinstance(leaves, (list, tuple)):
            leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(
                f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} "
                f"but the spec refers to a pytree that holds {self.num_leaves} "
                f"items ({self}).",
            )
        return _build(self, iter(leaves))


# Note [no recursive closures] (staged/tracing/pytree.py): the walks are module functions.
def _build(spec: TreeSpec, leaves: Iterator[Any]) -> PyTree:
    if spec.is_leaf():
        return next(leaves)
    children = [_build(c, leaves) for c in spec._children]
    return SUPPORTED_NODES[spec.type].unflatten_fn(children, spec._context)


def _flatten_up_to(spec: TreeSpec, node: PyTree, subtrees: list[PyTree]) -> None:
    if spec.is_leaf():
        subtrees.append(node)
        return
    kind = _get_node_type(node)
    if spec.type not in BUILTIN_TYPES:  # a user's node type must match exactly
        if kind != spec.type:
            raise ValueError(f"Type mismatch; expected {spec.type!r}, but got {kind!r}.")
        children, context = SUPPORTED_NODES[kind].flatten_fn(node)
        if len(children) != spec.num_children:
            raise ValueError(
                f"Node arity mismatch; expected {spec.num_children}, but got {len(children)}."
            )
        if context != spec._context:
            raise ValueError(f"Node context mismatch for custom node type {spec.type!r}.")
    else:
        dicts = spec.type in STANDARD_DICT_TYPES and kind in STANDARD_DICT_TYPES
        if not dicts and kind != spec.type:
            raise ValueError(f"Node type mismatch; expected {spec.type!r}, but got {kind!r}.")
        if len(node) != spec.num_children:
            raise ValueError(
                f"Node arity mismatch; expected {spec.num_children}, but got {len(node)}."
            )
        if dicts:  # keys must match; the default_factory of a defaultdict need not
            keys = spec._context[1] if spec.type is defaultdict else spec._context
            if set(node) != set(keys):
                missing, extra = set(keys) - set(node), set(node) - set(keys)
                msg = f"; missing key(s): {missing}" if missing else ""
                msg += f"; extra key(s): {extra}" if extra else ""
                raise ValueError(f"Node keys mismatch{msg}.")
            children = [node[k] for k in keys]
        else:
            children, context = SUPPORTED_NODES[kind].flatten_fn(node)
            if kind is not deque and context != spec._context:  # a deque's maxlen need not
                raise ValueError(
                    f"Node context mismatch for node type {spec.type!r}; "
                    f"expected {spec._context!r}, but got {context!r}.",
                )
    for subtree, subspec in zip(children, spec._children, strict=True):
        _flatten_up_to(subspec, subtree, subtrees)


PyTreeSpec: TypeAlias = TreeSpec


class LeafSpec(TreeSpec):
    """The spec of a leaf (deprecated in torch: ``spec.is_leaf()`` says it)."""

    __slots__ = ()

    def __init__(self) -> None:
        warnings.warn(
            "`isinstance(treespec, LeafSpec)` is deprecated, "
            "use `isinstance(treespec, TreeSpec) and treespec.is_leaf()` instead.",
            FutureWarning,
            stacklevel=2,
        )
        TreeSpec.__init__(self, None, None, [])

    def __repr__(self, indent: int = 0) -> str:
        return "*"


with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    _LEAF_SPEC = LeafSpec()  # every leaf's spec


def treespec_leaf() -> LeafSpec:
    return _LEAF_SPEC


def treespec_tuple(iterable: Iterable[TreeSpec] = (), /) -> TreeSpec:
    children = list(iterable)
    if any(not isinstance(c, TreeSpec) for c in children):
        raise ValueError(f"Expected a tuple of TreeSpec values, got: {children!r}.")
    return TreeSpec(tuple, None, children)


def treespec_dict(
    mapping: Mapping[Any, TreeSpec] | Iterable[tuple[Any, TreeSpec]] = (), /, **kwargs: TreeSpec
) -> TreeSpec:
    dct = dict(mapping, **kwargs)
    if any(not isinstance(c, TreeSpec) for c in dct.values()):
        raise ValueError(f"Expected a dictionary of TreeSpec values, got: {dct!r}.")
    return TreeSpec(dict, list(dct.keys()), list(dct.values()))


# --- flattening, mapping ----------------------------------------------------------------------
def tree_flatten(
    tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None
) -> tuple[list[Any], TreeSpec]:
    """The leaves of ``tree`` in order, and its structure."""
    leaves: list[Any] = []
    return leaves, _flatten(tree, is_leaf, leaves)


def _flatten(node: PyTree, is_leaf: Callable[[PyTree], bool] | None, leaves: list) -> TreeSpec:
    kind = _get_node_type(node)
    if is_leaf is not None and is_leaf(node) or kind not in SUPPORTED_NODES:
        leaves.append(node)
        return _LEAF_SPEC
    children, context = SUPPORTED_NODES[kind].flatten_fn(node)
    return TreeSpec(kind, context, [_flatten(c, is_leaf, leaves) for c in children])


def tree_unflatten(leaves: Iterable[Any], treespec: TreeSpec) -> PyTree:
    """The pytree of structure ``treespec`` holding ``leaves`` (the two either way round)."""
    if not isinstance(treespec, TreeSpec):
        if not isinstance(leaves, TreeSpec):
            raise TypeError(
                f"Expected `treespec` to be an instance of "
                f"PyTreeSpec but got item of type {type(treespec)}."
            )
        leaves, treespec = treespec, leaves
    return treespec.unflatten(leaves)


def tree_iter(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> Iterator[Any]:
    if tree_is_leaf(tree, is_leaf):
        yield tree
    else:
        for child in SUPPORTED_NODES[_get_node_type(tree)].flatten_fn(tree)[0]:
            yield from tree_iter(child, is_leaf)


def tree_leaves(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> list[Any]:
    return list(tree_iter(tree, is_leaf))


def tree_structure(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> TreeSpec:
    return tree_flatten(tree, is_leaf)[1]


def arg_tree_leaves(*args: PyTree, **kwargs: PyTree) -> list[Any]:
    """``tree_leaves((args, kwargs))``."""
    return [x for a in (*args, *kwargs.values()) for x in tree_iter(a)]


def tree_map(
    func: Callable[..., Any],
    tree: PyTree,
    *rests: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> PyTree:
    """``tree`` with each leaf ``x`` replaced by ``func(x, *xs)``, ``xs`` the subtrees at
    that place of ``rests`` (each of which has ``tree``'s structure as a prefix)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    return spec.unflatten(map(func, leaves, *[spec.flatten_up_to(r) for r in rests]))


def tree_map_(
    func: Callable[..., Any],
    tree: PyTree,
    *rests: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> PyTree:
    """``func`` called on each leaf (and ``rests`` as in ``tree_map``) for its effect;
    returns ``tree``."""
    leaves, spec = tree_flatten(tree, is_leaf)
    deque(map(func, leaves, *[spec.flatten_up_to(r) for r in rests]), maxlen=0)
    return tree


TypeAny = type[Any] | tuple[type[Any], ...] | types.UnionType


def map_only(type_or_types_or_pred: TypeAny | Callable[[Any], bool], /) -> Callable:
    """A decorator: the function applies to the arguments of the type(s), or that the
    predicate accepts, and passes the others through."""
    if isinstance(type_or_types_or_pred, (type, tuple, types.UnionType)):
        kinds = type_or_types_or_pred
        pred: Callable[[Any], bool] = lambda x: isinstance(x, kinds)
    elif callable(type_or_types_or_pred):
        pred = type_or_types_or_pred
    else:
        raise TypeError("Argument must be a type, a tuple of types, or a callable.")

    def wrapper(func: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(func)
        def wrapped(x: Any) -> Any:
            return func(x) if pred(x) else x

        return wrapped

    return wrapper


def tree_map_only(
    type_or_types_or_pred: TypeAny | Callable[[Any], bool],
    /,
    func: Callable[[Any], Any],
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> PyTree:
    return tree_map(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_map_only_(
    type_or_types_or_pred: TypeAny | Callable[[Any], bool],
    /,
    func: Callable[[Any], Any],
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> PyTree:
    return tree_map_(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_all(
    pred: Callable[[Any], bool], tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None
) -> bool:
    return all(map(pred, tree_iter(tree, is_leaf)))


def tree_any(
    pred: Callable[[Any], bool], tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None
) -> bool:
    return any(map(pred, tree_iter(tree, is_leaf)))


def tree_all_only(
    type_or_types: TypeAny,
    /,
    pred: Callable[[Any], bool],
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> bool:
    return all(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(
    type_or_types: TypeAny,
    /,
    pred: Callable[[Any], bool],
    tree: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> bool:
    return any(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def _broadcast_to_and_flatten(
    tree: PyTree, treespec: TreeSpec, is_leaf: Callable[[PyTree], bool] | None = None
) -> list[Any] | None:
    """``tree`` (a prefix of ``treespec``'s structure: vmap's in_dims) repeated over the
    leaves of the full structure, flat; None where it is no prefix."""
    full = treespec.unflatten([0] * treespec.num_leaves)
    out: list[Any] = []
    try:
        tree_map_(
            lambda x, sub: out.extend([x] * tree_structure(sub, is_leaf).num_leaves),
            tree,
            full,
            is_leaf=is_leaf,
        )
    except ValueError:
        return None
    return out


# --- key paths of leaves ----------------------------------------------------------------------
def tree_flatten_with_path(
    tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None
) -> tuple[list[tuple[KeyPath, Any]], TreeSpec]:
    """As ``tree_flatten``, each leaf with its key path (ValueError for a node type
    registered without ``flatten_with_keys_fn``)."""
    _, spec = tree_flatten(tree, is_leaf)
    return list(_key_paths((), tree, is_leaf)), spec


def tree_leaves_with_path(
    tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None
) -> list[tuple[KeyPath, Any]]:
    return list(_key_paths((), tree, is_leaf))


def _key_paths(
    path: KeyPath, tree: PyTree, is_leaf: Callable[[PyTree], bool] | None
) -> Iterator[tuple[KeyPath, Any]]:
    if is_leaf and is_leaf(tree):
        yield path, tree
        return
    kind = _get_node_type(tree)
    node = SUPPORTED_NODES.get(kind)
    if node is None:
        yield path, tree
        return
    if node.flatten_with_keys_fn is None:
        raise ValueError(
            f"Did not find a flatten_with_keys_fn for type: {kind}. "
            "Please pass a flatten_with_keys_fn argument to register_pytree_node."
        )
    for k, child in node.flatten_with_keys_fn(tree)[0]:
        yield from _key_paths((*path, k), child, is_leaf)


def tree_map_with_path(
    func: Callable[..., Any],
    tree: PyTree,
    *rests: PyTree,
    is_leaf: Callable[[PyTree], bool] | None = None,
) -> PyTree:
    """As ``tree_map``, ``func`` taking each leaf's key path first."""
    pairs, spec = tree_flatten_with_path(tree, is_leaf)
    columns = list(zip(*pairs, strict=True)) + [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(func(*xs) for xs in zip(*columns, strict=True))


# --- JSON (torch.export's format, protocol 1) ---------------------------------------------------
class EnumEncoder(json.JSONEncoder):
    def default(self, obj: object) -> Any:
        if isinstance(obj, Enum):
            fqn = f"{obj.__class__.__module__}:{obj.__class__.__qualname__}"
            return {"__enum__": True, "fqn": fqn, "name": obj.name}
        return super().default(obj)


def enum_object_hook(obj: dict[str, Any]) -> Any:
    if "__enum__" not in obj:
        return obj
    module, _, name = obj["fqn"].partition(":")
    cls: Any = importlib.import_module(module)
    for attr in name.split("."):
        cls = getattr(cls, attr)
    return cls[obj["name"]]


def _treespec_to_json(spec: TreeSpec) -> dict[str, Any]:
    if spec.is_leaf():
        return {"type": None, "context": None, "children_spec": []}
    if spec.type not in SUPPORTED_SERIALIZED_TYPES:
        raise NotImplementedError(f"Serializing {spec.type} in pytree is not registered.")
    node = SUPPORTED_SERIALIZED_TYPES[spec.type]
    if node.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise NotImplementedError(
            f"No registered serialization name for {spec.type} found. "
            "Please update your _register_pytree_node call with a `serialized_type_name` kwarg."
        )
    if node.to_dumpable_context is None:
        try:
            context = json.dumps(spec._context, cls=EnumEncoder)
        except TypeError as e:
            raise TypeError(
                "Unable to serialize context. "
                "Please make the context json dump-able, or register a "
                "custom serializer using _register_pytree_node."
            ) from e
    else:
        context = node.to_dumpable_context(spec._context)
    children = [_treespec_to_json(c) for c in spec._children]
    return {"type": node.serialized_type_name, "context": context, "children_spec": children}


def _json_to_treespec(schema: DumpableContext) -> TreeSpec:
    if schema["type"] is None and schema["context"] is None and not schema["children_spec"]:
        return _LEAF_SPEC
    if schema["type"] not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
        raise NotImplementedError(f"Deserializing {schema['type']} in pytree is not registered.")
    kind = SERIALIZED_TYPE_TO_PYTHON_TYPE[schema["type"]]
    node = SUPPORTED_SERIALIZED_TYPES[kind]
    if node.from_dumpable_context is None:
        try:
            context = json.loads(schema["context"], object_hook=enum_object_hook)
        except TypeError as e:
            raise TypeError(
                "Unable to deserialize context. "
                "Please make the context json load-able, or register a "
                "custom serializer using _register_pytree_node.",
            ) from e
    else:
        context = node.from_dumpable_context(schema["context"])
    return TreeSpec(kind, context, [_json_to_treespec(c) for c in schema["children_spec"]])


def _unknown_protocol(protocol: Any) -> ValueError:
    return ValueError(
        f"Unknown protocol {protocol}. "
        f"Available protocols: [{DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL}]"
    )


def treespec_dumps(treespec: TreeSpec, protocol: int | None = None) -> str:
    """``treespec`` as JSON, torch's string for the same structure."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(
            f"Expected `treespec` to be an instance of "
            f"PyTreeSpec but got item of type {type(treespec)}."
        )
    protocol = DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL if protocol is None else protocol
    if protocol != DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL:
        raise _unknown_protocol(protocol)
    return json.dumps((protocol, _treespec_to_json(treespec)), cls=EnumEncoder)


@functools.lru_cache
def treespec_loads(serialized: str) -> TreeSpec:
    """The spec ``treespec_dumps`` wrote."""
    protocol, schema = json.loads(serialized)
    if protocol != DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL:
        raise _unknown_protocol(protocol)
    return _json_to_treespec(schema)


class _Asterisk(str):
    def __repr__(self) -> str:
        return "*"


def treespec_pprint(treespec: TreeSpec) -> str:
    """The structure printed as its pytree with ``*`` for each leaf."""
    return repr(treespec.unflatten([_Asterisk("*")] * treespec.num_leaves))


__all__ = [
    "PyTree",
    "Context",
    "FlattenFn",
    "UnflattenFn",
    "DumpableContext",
    "ToDumpableContextFn",
    "FromDumpableContextFn",
    "PyTreeSpec",
    "TreeSpec",
    "LeafSpec",
    "keystr",
    "key_get",
    "register_pytree_node",
    "tree_is_leaf",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_unflatten",
    "tree_iter",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_structure",
    "tree_map",
    "tree_map_with_path",
    "tree_map_",
    "tree_map_only",
    "tree_map_only_",
    "tree_all",
    "tree_any",
    "tree_all_only",
    "tree_any_only",
    "treespec_dumps",
    "treespec_loads",
    "treespec_pprint",
    "is_namedtuple",
    "is_namedtuple_class",
    "is_namedtuple_instance",
    "is_structseq",
    "is_structseq_class",
    "is_structseq_instance",
]
