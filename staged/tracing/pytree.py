"""Flatten nested tuples, lists and dicts of tensors and Python values, and rebuild them."""

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
    leaves = []

    def walk(o):
        if isinstance(o, (tuple, list)) and not is_leaf(o):
            return (type(o).__name__, tuple(walk(x) for x in o))
        if isinstance(o, dict):
            keys = tuple(o)
            return ("dict", keys, tuple(walk(o[k]) for k in keys))
        leaves.append(o)
        return "*"

    return leaves, walk(obj)


def unflatten(tree, leaves):
    it = iter(leaves)

    def build(t):
        if t == "*":
            return next(it)
        if t[0] == "dict":
            return {k: build(s) for k, s in zip(t[1], t[2])}
        items = [build(s) for s in t[1]]
        return tuple(items) if t[0] == "tuple" else items

    return build(tree)
