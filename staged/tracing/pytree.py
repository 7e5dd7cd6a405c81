"""Flatten nested tuples, lists and dicts of tensors and Python values, and rebuild them
(named tuples and other subclasses as their class)."""

from __future__ import annotations

import functools


def flatten_call(args, kwargs):
    """``flatten((args, kwargs), lambda o: False)`` of a call's arguments; the common call,
    positional arguments and no containers, without walking them."""
    if kwargs or any(isinstance(a, (tuple, list, dict)) for a in args):
        return flatten((args, kwargs), lambda o: False)
    return list(args), _positional(len(args))


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
    leaves.append(o)
    return "*"


def unflatten(tree, leaves):
    return _build(tree, iter(leaves))


def _build(t, it):
    if t == "*":
        return next(it)
    if t[0] == "dict":
        return {k: _build(s, it) for k, s in zip(t[1], t[2])}
    items = [_build(s, it) for s in t[1]]
    kind = t[0]
    if isinstance(kind, str):
        return tuple(items) if kind == "tuple" else items
    return kind(*items) if hasattr(kind, "_fields") else kind(items)
