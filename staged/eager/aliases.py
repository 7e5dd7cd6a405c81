"""Who else sees a tensor's memory: what a compiled step's write into a tensor must reach.

Note [aliased memory]: a compiled step's write into a tensor (its state, an argument
written in place) must reach every object that sees that tensor's memory, as an eager
in-place write does: its views, ``.data`` and ``detach()`` aliases, the arrays ``numpy()``
gave, the array ``from_numpy`` took. The step computes a new value, which by default
replaces the tensor's payload and stays on the device (``runtime/compiled.py``).

- A NumPy payload that another object also holds (its references counted against what the
  same count gives for an array only its tensor holds), or that is a view, gets the new
  value copied into its memory instead, waiting for the step (``seen_elsewhere``).
- A device value, or a symbolic one under capture, has no memory of ours to share: ``Tensor._aliased`` gives the alias the
  same value object and registers it on the tensor whose data it is (``register``). When
  that tensor's value is replaced by the next step's or by the host array it is read back
  into, its aliases that held the old value get the new one (``replaced``).

A tensor whose data is replaced otherwise (``t.data = u``) starts a new memory: older
aliases keep the old one, as in torch.
"""

from __future__ import annotations

import sys
import weakref

import numpy as np


class _Holder:
    __slots__ = ("_payload", "_alias")

    def __init__(self, payload, alias=None):
        self._payload = payload
        self._alias = alias


def _array_refs(t) -> int:
    """References to ``t``'s payload array and to the array it views, if it is a view,
    less the one of a root that only ``t`` holds: ``clone(g).detach()``'s clone, say,
    kept by the alias and seen by no one else."""
    b = t._payload.base
    n = sys.getrefcount(t._payload) + (0 if b is None else sys.getrefcount(b))
    root = getattr(t, "_alias", None)
    if root is not None and root._payload is t._payload:
        root = None
        if _root_refs(t) <= _LONE:
            n -= 1
    return n


def _root_refs(t) -> int:
    """References to ``t``'s root (``_alias``)."""
    root = getattr(t, "_alias", None)
    return sys.getrefcount(root)


_LONE = _root_refs(_Holder(None, _Holder(None)))  # a root only its alias holds
_ALONE = _array_refs(_Holder(np.empty(2)))
_ALONE_VIEW = _array_refs(_Holder(np.empty(2)[:1]))


def seen_elsewhere(t) -> bool:
    """Whether objects other than ``t`` may see its payload array's memory (False for a
    payload that is not a NumPy array)."""
    if type(t._payload) is not np.ndarray:
        return False
    if t._base is not None:
        return True
    b = t._payload.base
    if b is None:
        return _array_refs(t) > _ALONE
    if type(b) is not np.ndarray or b.base is not None:
        return True  # memory NumPy does not own, or of holders not counted here
    b = None
    return _array_refs(t) > _ALONE_VIEW


def register(root, alias) -> None:
    """``alias`` holds ``root``'s device value: it follows ``root``'s writes."""
    refs = getattr(root, "_aliases", None)
    if refs is None:
        refs = root._aliases = []
    elif len(refs) >= 8:
        refs[:] = [r for r in refs if r() is not None]
    refs.append(weakref.ref(alias))


def replaced(t, old, new) -> None:
    """``t``'s value ``old`` became ``new``: so did that of the tensor whose data it is
    and of that one's aliases, where they held ``old``."""
    root = getattr(t, "_alias", None)
    if root is None:
        root = t
    elif root._payload is old:
        root._payload = new
    follow(root, old, new)


def follow(root, old, new) -> None:
    """The aliases registered on ``root`` that held its value ``old`` now hold ``new``."""
    for r in getattr(root, "_aliases", None) or ():
        a = r()
        if a is not None and a._payload is old:
            a._payload = new
