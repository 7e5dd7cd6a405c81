"""Forward-mode AD: dual tensors whose tangents ride along every primitive.

While a dual level is open, a layer around ``dispatch.apply`` looks up the tangents of a
primitive's inputs and, if any has one, gives the output the tangent from the
primitive's JVP rule (``autodiff.jvp_rule``). Closed, the layer is removed and ops pay
nothing. As in PyTorch there is one level at a time; tangents are dropped when it closes.

Note [tangents by tensor]: a tangent belongs to one Tensor object (PyTorch's forward
grad lives in its autograd meta): ``detach()`` and ``.data`` give tensors without one.
Tangents of tensors saved for backward travel with the SavedTensor (``saved_tangent``),
so a backward pass run inside the level carries tangents too: forward-over-reverse.

Note [tangents of views]: as in PyTorch, the tangent of a view is the view of its forward
base's tangent, where the forward base is the view's base, or the nearest ``make_dual`` or
``unpack_dual`` alias it was made from (an alias starts a new forward base). An in-place
write (``written``) gives the forward base the written value's tangent in the view's
region (zeros elsewhere if it had none) and every live view of it its region of that.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

from ..autodiff import jvp_rule
from ..autodiff import reshape as _alias_prim
from ..eager import dispatch, views
from ..eager.ops import inplace
from ..eager.factories import zeros_like
from ..eager.tensor import Tensor

_level = None  # the open level (0), or None
_tangents: dict[int, tuple[weakref.ref[Tensor], Any]] = {}  # id(tensor) -> (weakref, tangent)
_rules: dict[Any, Callable[..., Any]] = {}  # primitive -> its JVP function
_busy = [False]  # computing a JVP: its own ops carry no tangents
# id(last view step of an alias) -> weakref to the alias (a forward base)
_aliases: dict[int, weakref.ref[Tensor]] = {}
# the SavedTensors given a tangent in this level (Note [saved tangents close with the level])
_saved: list[weakref.ref[Any]] = []


class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal (a view without tangent) and the tangent."""

    primal: Tensor
    tangent: Tensor | None


def enter_dual_level() -> int:
    """Open a forward-AD level and return it (there can be only one)."""
    global _level
    if _level is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _level = 0
    dispatch.set_layer("forward_ad", _layer)
    inplace.after_write.append(written)
    return _level


def exit_dual_level(*, level=None) -> None:
    """Close the level: every tangent made in it is dropped."""
    global _level
    if _level is None:
        raise RuntimeError("Dual level must be a positive number.")  # PyTorch's words
    if level is not None and level != _level:
        raise RuntimeError(
            "Trying to exit a forward AD level that was not the last one that "
            "was created. This is not supported."
        )
    _level = None
    _tangents.clear()
    _aliases.clear()
    for ref in _saved:
        s = ref()
        if s is not None:
            s.saved_tangent = None
    _saved.clear()
    dispatch.set_layer("forward_ad", None)
    inplace.after_write.remove(written)


class dual_level:
    """Context manager for a forward-AD level (``with dual_level(): ...``).

    Example:
        >>> with forward_ad.dual_level():
        ...     x = forward_ad.make_dual(staged.tensor([1.0, 2.0]), staged.ones(2))
        ...     forward_ad.unpack_dual(x.exp()).tangent   # exp(x) * 1
    """

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False


def make_dual(tensor: Tensor, tangent: Tensor, *, level=None) -> Tensor:
    """A view of ``tensor`` whose tangent is ``tangent`` (same shape, float or complex)."""
    if _level is None:
        raise RuntimeError(
            "Trying to create a dual Tensor for forward AD but no level exists, "
            "make sure to enter_dual_level() first."
        )
    if level is not None and level != _level:
        raise RuntimeError(f"Invalid level {level}: only level {_level} is open")
    if not (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise ValueError(
            f"Expected primal to be floating point or complex, but got: {tensor.dtype}"
        )
    if not (tangent.dtype.is_floating_point or tangent.dtype.is_complex):
        raise ValueError(
            f"Expected tangent to be floating point or complex, but got: {tangent.dtype}"
        )
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(tensor.shape)} "
            f"while the given forward gradient is of size {list(tangent.shape)}."
        )
    dual = _alias(tensor)
    set_tangent(dual, tangent)
    return dual


def unpack_dual(tensor: Tensor, *, level=None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor``; the tangent is None outside a level or where
    ``tensor`` has none."""
    if _level is None:
        return UnpackedDualTensor(tensor, None)
    tangent = tangent_of(tensor)
    return UnpackedDualTensor(_alias(tensor) if tangent is not None else tensor, tangent)


def _alias(t: Tensor) -> Tensor:
    """A view of ``t`` that shares its data and graph but not its tangent."""
    prev, _busy[0] = _busy[0], True
    try:
        out = _alias_prim(t, shape=tuple(t.shape))
    finally:
        _busy[0] = prev
    if out._base is not None:  # a forward base of the views made from it
        key = id(out._view.steps[-1])
        # (mypy cannot infer a lambda with a default argument as the callback)
        _aliases[key] = weakref.ref(
            out,
            lambda _, k=key: _aliases.pop(k, None),  # type: ignore[misc]
        )
    return out


def tangent_of(t: Tensor):
    """The tangent of ``t`` at the open level, or None."""
    e = _tangents.get(id(t))
    return e[1] if e is not None and e[0]() is t else None


def set_tangent(t: Tensor, tangent) -> None:
    key = id(t)
    _tangents[key] = (
        weakref.ref(t, lambda _, k=key: _tangents.pop(k, None)),  # type: ignore[misc]
        tangent,
    )


def active() -> bool:
    return _level is not None


def written(t: Tensor, result: Tensor) -> None:
    """``t`` was overwritten in place by ``result``: it takes ``result``'s tangent (zeros
    if ``t`` or its forward base had one and ``result`` has none, as in PyTorch), and so do
    its forward base and the views of it (Note [tangents of views])."""
    tangent = tangent_of(result)
    base, steps = _forward_base(t)
    if tangent is None:
        if tangent_of(t) is None and tangent_of(base) is None:
            return
        tangent = zeros_like(t)
    if base is t:
        set_tangent(t, tangent)
    _busy[0] = True
    try:
        if base is not t:
            old = tangent_of(base)
            if old is None:
                old = zeros_like(base)
            set_tangent(base, views.select(t, steps, views.scatter(tangent, steps), old))
        vc = base._vc
        if vc is None or len(vc) == 1:
            return
        new = tangent_of(base)
        for r in vc[1].refs:
            v = r()
            if v is not None and v is not base:
                vb, vsteps = _forward_base(v)
                if vb is base:
                    set_tangent(v, views.replay(new, vsteps))
    finally:
        _busy[0] = False


def _forward_base(t: Tensor):
    """``(forward base of t, the view steps from it to t)`` (Note [tangents of views])."""
    if t._base is None:
        return t, ()
    steps = t._view.steps
    for k in range(len(steps) - 1, -1, -1):
        ref = _aliases.get(id(steps[k]))
        alias = ref() if ref is not None else None
        if alias is not None and alias._view.steps[-1] is steps[k]:
            return alias, steps[k + 1 :]
    return t._base, steps


def _layer(apply):
    def apply_dual(prim, inputs, params):
        out = apply(prim, inputs, params)
        if _busy[0] or not _tangents:
            return out
        tangents = [tangent_of(t) for t in inputs]
        if all(t is None for t in tangents):
            return out
        rule = _rules.get(prim)
        if rule is None:
            rule = _rules[prim] = jvp_rule(prim)
        _busy[0] = True
        try:
            t_out = rule(tuple(inputs), tangents, out, **params)
        finally:
            _busy[0] = False
        # an integer or bool result carries no tangent (a dual written into an int tensor)
        if t_out is not None and (out.dtype.is_floating_point or out.dtype.is_complex):
            set_tangent(out, t_out)
            node = out.grad_fn
            if node is not None:
                _remember_saved(node, inputs, out)
        return out

    return apply_dual


def _remember_saved(node, inputs, out) -> None:
    """Keep the tangents of what ``node`` saved, for a backward pass run in this level.

    Note [saved tangents close with the level]: the tangent of a saved output is often
    computed from that output (softmax's, exp's), so its graph leads back to ``node``:
    node -> SavedTensor -> tangent -> ... -> node, a cycle that would hold the whole
    graph, tangents and payloads until Python's cyclic collector ran (jacfwd(jacrev(f)),
    hessian). The tangents mean nothing once the level closes (``restore_tangent``
    needs an open one), so closing it drops them and the cycles with them."""
    saved = getattr(node, "saved", None)
    if not saved:
        return
    names = node.prim.inputs
    for name, s in saved.items():
        if name != "out" and name not in names:
            continue
        tangent = tangent_of(out if name == "out" else inputs[names.index(name)])
        if tangent is not None:
            s.saved_tangent = tangent
            _saved.append(weakref.ref(s))


def restore_tangent(t: Tensor, tangent) -> None:
    """Give a tensor unpacked from a SavedTensor the tangent saved with it."""
    if _level is not None:
        set_tangent(t, tangent)
