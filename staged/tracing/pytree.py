"""Flatten nested tuples, lists, dicts and dataclasses of tensors and Python values, and
rebuild them (named tuples and other subclasses as their class)."""

from __future__ import annotations

import dataclasses
import functools


def flatten_call(args, kwargs):
    """``flatten((args, kwargs), lambda o: False)`` of a call's arguments; the common call,
    positional arguments and no containers, without walking them."""
    if kwargs or any(map(_CONTAINERS.__getitem__, map(type, args))):
        return flatten((args, kwargs), lambda o: False)
    return list(args), _positional(len(args))


class _Containers(dict):
    """type -> whether ``_walk`` walks its objects (a cache: ``flatten_call`` runs per call)."""

    def __missing__(self, kind: type) -> bool:
        walked = issubclass(kind, (tuple, list, dict)) or hasattr(kind, "__dataclass_fields__")
        self[kind] = walked
        return walked


_CONTAINERS = _Containers()


@functools.cache
def _positional(n: int):
    return flatten(((None,) * n, {}), lambda o: False)[1]


def flatten(obj, is_leaf):
    """Leaves in order and a hashable description of the structure around them."""
    leaves: list = []
    return leaves, _walk(obj, is_leaf, leaves)


# Note [no recursive closures]: a nested function that calls itself references itself
# through its closure cell, a cycle that only the cyclic collector frees, and with it
# everything the closure holds: the leaves, here the tensors a compiled step takes and
# returns. Freed that late, a step returning 16 MB held hundreds of results (gigabytes)
# between collections. The walks are module functions, their state passed along.
def _walk(o, is_leaf, leaves):
    if isinstance(o, (tuple, list)) and not is_leaf(o):
        kind = type(o)  # a subclass (a named tuple: sort's values and indices) by its class
        tag = kind.__name__ if kind is tuple or kind is list else kind
        return (tag, tuple(_walk(x, is_leaf, leaves) for x in o))
    if isinstance(o, dict):
        keys = tuple(o)
        return ("dict", keys, tuple(_walk(o[k], is_leaf, leaves) for k in keys))
    kind = type(o)
    if hasattr(kind, "__dataclass_fields__") and not is_leaf(o):  # a dict of its fields
        keys = tuple(f.name for f in dataclasses.fields(o))
        return ("dict", keys, tuple(_walk(getattr(o, k), is_leaf, leaves) for k in keys), kind)
    leaves.append(o)
    return "*"


def unflatten(tree, leaves):
    return _build(tree, iter(leaves))


def _build(t, it):
    if t == "*":
        return next(it)
    if t[0] == "dict":
        items = {k: _build(s, it) for k, s in zip(t[1], t[2])}
        return items if len(t) == 3 else _dataclass(t[3], items)
    items = [_build(s, it) for s in t[1]]
    kind = t[0]
    if isinstance(kind, str):
        return tuple(items) if kind == "tuple" else items
    return kind(*items) if hasattr(kind, "_fields") else kind(items)


def _dataclass(kind, fields: dict):
    """An instance of the dataclass ``kind`` holding ``fields``, as the body made it: its
    ``__init__`` and ``__post_init__`` ran there, so they are not run again (a frozen or
    slotted one too)."""
    o = kind.__new__(kind)
    for k, v in fields.items():
        object.__setattr__(o, k, v)
    return o
