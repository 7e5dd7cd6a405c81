"""The state guards of a compiled step: each state tensor (a parameter, an optimizer's
``exp_avg``, a ``.grad`` read through its owner) keeps the shape, dtype, requires_grad,
``.grad`` and hooks its trace saw.

Note [state pass]: a 12-block transformer with AdamW has 592 state tensors, and the loop
that checks each row in order (``first_failure``: a tuple made of the shape, dtypes
compared by value, a call to look for hooks) was the largest part of its per-call guard
check (issue 20, item 5). ``StateGuards`` checks a stamp instead, what each tensor held
when it was made, by identity where the loop compares values: the dtype and requires_grad
objects (equal to the trace's), whether ``.grad`` is None (the stamp's two groups), no
hook dicts, and the same grad accumulator reference, dead when stamped (a dead weakref
stays dead: no hook can be added to it unseen). Rows the stamp can't cover (hooks, a live
grad accumulator, a ``.grad`` read as state or through its owner) are checked by the loop
at every call. Where the stamp differs, the loop over all rows says which failed first,
so ``explain()`` and the re-trace reasons read as before, and where it finds none (a new
grad accumulator, a dtype that is another equal object) the stamp is made again. One
``map`` pass per check (``Guards``' way, Note [one pass] in tracing/guards.py) was slower
here, not faster: each pass reads every tensor again, and Python 3.11 reads a slot in
bytecode as fast as ``attrgetter`` does.
"""

from __future__ import annotations

import weakref

from ..eager.tensor import Tensor


def hook_ids(t: Tensor) -> tuple:
    """The hooks on ``t`` that a backward runs (``register_hook``, post-accumulate and its
    grad accumulator's): the trace ran those it found, so it serves while they are those."""
    acc = t._grad_acc() if t._grad_acc is not None else None
    dicts = (t._hooks, t._post_acc_hooks) + (
        (acc._pre_hooks, acc._post_hooks) if acc is not None else (None, None)
    )
    return tuple(k for d in dicts if d for k in d)  # handle ids: unique across dicts


def hooked(t: Tensor) -> bool:
    """Whether ``hook_ids(t)`` is not empty, without making it (a guard's common case)."""
    if t._hooks or t._post_acc_hooks:
        return True
    acc = t._grad_acc() if t._grad_acc is not None else None
    return acc is not None and bool(acc._pre_hooks or acc._post_hooks)


def first_failure(rows):
    """What the first of the state guards ``rows`` (``StateGuards.rows``) that no longer
    holds says, in order, or None."""
    for t, owner, shape, dtype, requires_grad, grad, name, hooks in rows:
        if owner is not None:
            t = owner._grad
            if t is None:
                return f"{name} (a .grad) was cleared"
        p = t._payload
        if tuple(p.shape) != shape or p.dtype != dtype:
            return f"{name}: {dtype}{list(shape)} -> {p.dtype}{list(p.shape)}"
        if t._requires_grad != requires_grad:
            return f"{name}: requires_grad {requires_grad} -> {t._requires_grad}"
        if (grad is None) != (t._grad is None) or (
            grad is not None and grad is not True and t._grad is not grad
        ):
            now = "None" if t._grad is None else "a tensor" if grad is None else "another tensor"
            return (
                f"{name}.grad was set or cleared: {'None' if grad is None else 'a tensor'} -> {now}"
            )
        if (
            hook_ids(t) != hooks
            if hooks  # else ``hooked(t)``, inline where it has no grad accumulator
            else t._hooks or t._post_acc_hooks or t._grad_acc is not None and hooked(t)
        ):
            return f"{name}: a hook was registered or removed"
    return None


class StateGuards:
    """A trace's state guards, ``rows`` of ``(tensor, owner whose .grad it is or None,
    shape, dtype, requires_grad, .grad: None, True (set) or the tensor read, name, hook
    ids)``, checked by a stamp (Note [state pass])."""

    __slots__ = ("rows", "stamp")
    stamp: tuple  # (no_grad, with_grad, loop): one object, so a thread sees all of one

    def __init__(self, rows: list):
        self.rows = rows
        self._stamp()

    def _stamp(self) -> None:
        """Stamp the rows of tensors without hooks that can't be given one unseen with
        what they hold now, where it is what the trace saw: ``(tensor, shape, dtype,
        requires_grad, grad accumulator ref)`` in ``no_grad`` where the .grad is None, in
        ``with_grad`` where it is set; leave the other rows to ``loop``."""
        no_grad: list[tuple] = []
        with_grad: list[tuple] = []
        loop: list[tuple] = []
        for r in self.rows:
            t, owner, shape, dtype, requires_grad, grad, _, hooks = r
            acc = t._grad_acc
            if (
                hooks
                or owner is not None  # its tensor is read through the owner at each call
                or isinstance(grad, Tensor)
                or t._hooks is not None
                or t._post_acc_hooks is not None
                or acc is not None
                and (type(acc) is not weakref.ref or acc() is not None)
            ):
                loop.append(r)
                continue
            d, rg = t._payload.dtype, t._requires_grad
            d, rg = d if d == dtype else dtype, rg if rg == requires_grad else requires_grad
            (no_grad if grad is None else with_grad).append((t, shape, d, rg, acc))
        self.stamp = no_grad, with_grad, loop

    def __len__(self) -> int:
        return len(self.rows)

    def failure(self):
        """None where every state guard holds, else what the first that fails says."""
        no_grad, with_grad, loop = self.stamp
        if stamped(no_grad, with_grad):
            return first_failure(loop) if loop else None
        why = first_failure(self.rows)
        if why is None:  # the stamp was stricter: a new grad accumulator, say
            self._stamp()
        return why


def stamped(no_grad: list, with_grad: list) -> bool:
    """Whether every row of a stamp (``StateGuards._stamp``) holds what it was stamped
    with: the loop's checks, by identity where they compare values. A loop per group,
    each reading a tensor once: a pass per check (``map``) reads each again, slower (Note
    [state pass])."""
    for t, shape, dtype, requires_grad, acc in no_grad:
        p = t._payload
        if (
            p.shape != shape
            or p.dtype is not dtype
            or t._requires_grad is not requires_grad
            or t._grad is not None
            or t._hooks is not None
            or t._post_acc_hooks is not None
            or t._grad_acc is not acc
        ):
            return False
    for t, shape, dtype, requires_grad, acc in with_grad:
        p = t._payload
        if (
            p.shape != shape
            or p.dtype is not dtype
            or t._requires_grad is not requires_grad
            or t._grad is None
            or t._hooks is not None
            or t._post_acc_hooks is not None
            or t._grad_acc is not acc
        ):
            return False
    return True
