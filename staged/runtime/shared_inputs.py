"""Inputs of a compiled step that share memory while the step writes one of them.

Note [shared inputs]: a compiled step reads each input (an argument, a state tensor) as a
value of its own. Where two share memory (the same tensor passed twice, a view and its
base, a parameter also passed as an argument, parameters tied by ``b.data = a.data``)
and the step writes one, eager reads the write through the other; the graph would read
the value from before it. Such a call raises ``SharedInputsError``, naming both, rather
than compute on a stale copy. Checked on every call: the links between tensors (the same
tensor, a view's ``_base``, a ``.data``/``detach()`` alias's ``_alias``) and the NumPy
arrays of arguments and state tensors whose data is on the host (after a call, each
state tensor holds a device value of its own).
"""

from __future__ import annotations

import operator

import numpy as np

from ..eager.tensor import Tensor
from ..tracing.capture import Captured


PAYLOAD = operator.attrgetter("_payload")  # map()ped over many tensors: a loop in C


class SharedInputsError(RuntimeError):
    """Two inputs of a compiled step share memory and the step writes one of them."""


def owner(t: Tensor) -> Tensor:
    """The tensor whose memory ``t`` is: through views' bases and aliases' roots."""
    while True:
        nxt = t._base if t._base is not None else getattr(t, "_alias", None)
        if nxt is None:
            return t
        t = nxt


class SharedInputs:
    """The check of one trace's calls (Note [shared inputs])."""

    def __init__(self, captured: Captured, arg_names: dict):
        written_args = {i for i, _ in captured.arg_updates}
        self.args = [(i, name, i in written_args) for i, name in arg_names.items()]
        written = {id(w) for w, _ in captured.state_updates}
        self.state = [(w.tensor, w.name, id(w) in written) for w in captured.state]
        self.tensors = [w.tensor for w in captured.state]
        self.active = any(a[2] for a in self.args) or bool(written)
        # the state's owners, fixed with the tensors: id(owner) -> (name, written)
        self.owners: dict = {}
        for t, name, w in self.state:
            _meet(self.owners, id(owner(t)), name, w, _STATE)

    def check(self, leaves) -> None:
        """Raise ``SharedInputsError`` where this call's inputs share written memory."""
        if not self.active:
            return
        args: dict = {}  # id(owner tensor) -> (name, written), of the arguments
        arrays: dict = {}  # id(the memory's NumPy array) -> [(array, name, written, state)]
        for i, name, written in self.args:
            t = leaves[i]
            key = id(owner(t))
            other = self.owners.get(key)
            if other is not None and (written or other[1]):
                _refuse(name, other[0], written, other[1])
            _meet(args, key, name, written)
            if type(t._payload) is np.ndarray:
                _meet_array(arrays, t._payload, name, written)
        if np.ndarray in set(map(type, map(PAYLOAD, self.tensors))):  # before a first call
            for t, name, written in self.state:
                if type(t._payload) is np.ndarray:
                    _meet_array(arrays, t._payload, name, written, True)


def _meet(owners: dict, key: int, name: str, written: bool, fix: str = "") -> None:
    """Record an input whose memory's owner is ``key``; refuse a written shared one."""
    other = owners.get(key)
    if other is not None and (written or other[1]):
        _refuse(name, other[0], written, other[1], fix)
    owners[key] = (name, written or (other is not None and other[1]))


def _meet_array(arrays: dict, p: np.ndarray, name: str, written: bool, state=False) -> None:
    """``_meet`` for the memory of a NumPy payload ``p`` (``state``: of a state tensor)."""
    same = arrays.setdefault(id(p if p.base is None else p.base), [])
    for q, other_name, other_written, other_state in same:
        if (written or other_written) and np.shares_memory(p, q):
            fix = _STATE if state and other_state else ""
            _refuse(name, other_name, written, other_written, fix)
    same.append((p, name, written, state))


_ARGUMENTS = "Pass the tensor once (take the view inside the step), or pass a copy (.clone())."
# two state tensors (neither an argument): the step reaches both through Python state
_STATE = (
    "Both are state the step reads, not arguments: where one is a view made before the "
    "call of a tensor that requires no grad (a buffer's), make the view inside the step, or "
    "keep a .clone() of it; where two parameters were tied with b.data = a.data, tie the "
    "Parameter itself (dec.weight = enc.weight)."
)


def _refuse(a: str, b: str, a_written: bool, b_written: bool, fix: str = "") -> None:
    raise SharedInputsError(
        f"staged.compile: {a} and {b} share memory and the step writes "
        f"{a if a_written else b} in place; a compiled step reads each input as a value of "
        f"its own, so the other would not see the write. {fix or _ARGUMENTS}"
    )
