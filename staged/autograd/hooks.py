"""RemovableHandle: what every ``register_*hook`` returns."""

from __future__ import annotations

import itertools

_ids = itertools.count()


class RemovableHandle:
    """Removes its hook from the dict(s) it was registered in."""

    def __init__(self, *hook_dicts):
        self.id = next(_ids)
        self._dicts = hook_dicts

    def remove(self) -> None:
        for d in self._dicts:
            d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def fresh_id() -> int:
    """An id no handle has; every handle made later has a larger one (capture finds the
    hooks a traced body registered by it)."""
    return next(_ids)


def add_hook(hooks: dict, fn, prepend: bool = False) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    if prepend:
        hooks_items = list(hooks.items())
        hooks.clear()
        hooks[handle.id] = fn
        hooks.update(hooks_items[:-1])
    return handle
