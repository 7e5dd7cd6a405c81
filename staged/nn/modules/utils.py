"""``torch.nn.modules.utils``: ``consume_prefix_in_state_dict_if_present``."""

from __future__ import annotations

from typing import Any


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
