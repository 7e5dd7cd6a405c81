"""``torch.nn.modules.utils``: ``consume_prefix_in_state_dict_if_present`` and the
argument parsers layers (and users' layers) take sizes with: ``_single``, ``_pair``,
``_triple``, ``_quadruple``, ``_ntuple``."""

from __future__ import annotations

import collections.abc
from typing import Any


def _ntuple(n: int, name: str = "parse"):
    """A parser: an iterable as a tuple of its items, anything else repeated ``n`` times."""

    def parse(x):
        return tuple(x) if isinstance(x, collections.abc.Iterable) else (x,) * n

    parse.__name__ = name
    return parse


_single, _pair = _ntuple(1, "_single"), _ntuple(2, "_pair")
_triple, _quadruple = _ntuple(3, "_triple"), _ntuple(4, "_quadruple")


def _renamed(d: dict, key: str, prefix: str) -> None:
    """``d[key]`` moved (to the end) under ``key`` less its first ``len(prefix)`` chars."""
    d[key[len(prefix) :]] = d.pop(key)


def consume_prefix_in_state_dict_if_present(state_dict: dict[str, Any], prefix: str) -> None:
    """Strip ``prefix`` from the keys of ``state_dict`` that start with it, in place (each
    renamed entry moves to the end), as torch's: a DataParallel model's ``"module."`` before
    ``load_state_dict`` into the bare model. In its ``_metadata`` too, except the ``""`` key;
    there ``prefix`` without its dots (``"module"``) is stripped as well, becoming ``""``."""
    for key in list(state_dict):
        if key.startswith(prefix):
            _renamed(state_dict, key, prefix)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is None:
        return
    bare = prefix.replace(".", "")
    for key in list(metadata):
        if key and (key == bare or key.startswith(prefix)):
            _renamed(metadata, key, prefix)
