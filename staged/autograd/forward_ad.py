"""Forward-mode AD: dual tensors whose tangents ride along every primitive.

While a dual level is open, a layer around ``dispatch.apply`` looks up the tangents of a
primitive's inputs and, if any has one, gives the output the tangent from the
primitive's JVP rule (``autodiff.jvp_rule``). Closed, the layer is removed and ops pay
nothing. As in PyTorch, ``dual_level`` opens one level at a time; tangents are dropped
when it closes. ``staged.func.jvp`` opens levels that nest (Note [nested levels]).

Note [nested levels]: each ``func.jvp`` opens a level of its own (functorch's levels;
JAX's JVP traces), numbered from 0 outermost, with its own tangents. Levels ``0..k-1``
*see* the primitives bound while level ``k``'s rules run, never level ``k`` or those
inside it: so an op gets a tangent at each level that sees it, outermost first (an inner
rule may read the output, whose outer tangents are then set), and the outer levels
differentiate the inner rules' primitives (forward over forward: the tangent of a tangent
is the mixed derivative). ``make_dual`` and ``unpack_dual`` at level ``k`` alias what the
levels outside ``k`` see, so the alias keeps their tangents. ``dual_level`` refuses to
nest, and a ``func.jvp`` level refuses to open inside it, as torch's do (one level, its
message); ``func.jvp`` levels nest among themselves.

Note [tangents by tensor]: a tangent belongs to one Tensor object (PyTorch's forward
grad lives in its autograd meta): ``detach()`` and ``.data`` give tensors without one.
Tangents of tensors saved for backward travel with the SavedTensor (``saved_tangent``,
one per level), so a backward pass run inside the level carries tangents too:
forward-over-reverse.

Note [tangents of views]: as in PyTorch, the tangent of a view is the view of its forward
base's tangent, where the forward base is the view's base, or the nearest ``make_dual`` or
``unpack_dual`` alias it was made from (an alias starts a new forward base). An in-place
write (``written``) gives the forward base the written value's tangent in the view's
region (zeros elsewhere if it had none) and every live view of it its region of that.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..autodiff import jvp_rule
from ..autodiff import reshape as _alias_prim
from ..eager import dispatch, views
from ..eager.ops import inplace
from ..eager.factories import empty_strided, zeros_like
from ..eager.tensor import Tensor

_NESTED = "Nested forward mode AD is not supported at the moment"  # PyTorch's words


class _Level:
    """An open level: its tangents, forward bases and the SavedTensors given tangents."""

    __slots__ = ("index", "user", "outer", "restore", "tangents", "aliases", "saved")

    def __init__(self, index: int, user: bool):
        self.index, self.user = index, user  # user: opened by dual_level, not func.jvp
        self.outer = tuple(_stack)  # the levels that see its rules
        self.restore = (_now.seen, _now.current)  # what its closing restores
        self.tangents: dict[int, tuple[weakref.ref[Tensor], Any]] = {}  # id -> (ref, tangent)
        # id(last view step of an alias) -> weakref to the alias (a forward base)
        self.aliases: dict[int, weakref.ref[Tensor]] = {}
        # Note [saved tangents close with the level]
        self.saved: list[weakref.ref[Any]] = []

    def get(self, t: Tensor):
        e = self.tangents.get(id(t))
        return e[1] if e is not None and e[0]() is t else None

    def set(self, t: Tensor, tangent) -> None:
        key, tangents = id(t), self.tangents
        tangents[key] = (
            weakref.ref(t, lambda _, k=key: tangents.pop(k, None)),  # type: ignore[misc]
            tangent,
        )


_stack: list[_Level] = []  # the open levels, outermost first
_open: list[Any] = [(), None]  # every open level, and the innermost: what ops are seen by


class _Now(threading.local):
    """Note [levels seen per thread]: the levels are the process's, as torch's are (a dual
    tensor made on one thread gets tangents on another), but which of them see the ops a
    thread binds now is that thread's: a rule running at level ``k`` hides its ops from
    ``k`` and the levels inside it (Note [nested levels]), and a custom Function's forward
    hides its ops from every level, as torch turns forward grad mode off thread-locally
    around it. With one setting for the process, an op on a dual tensor on another thread
    meanwhile got no tangent (``func.jvp`` returned zeros)."""

    seen: tuple[_Level, ...] | None = None  # the levels that see what is bound now (None: _open)
    current: _Level | None = None  # the level tangent_of and set_tangent default to (None: _open)
    busy = False  # a custom Function's forward: no level sees its ops (autograd/function.py)


_now = _Now()


def _seen() -> tuple[_Level, ...]:
    seen = _now.seen
    return _open[0] if seen is None else seen


def _current() -> _Level | None:
    current = _now.current
    return _open[1] if current is None else current


_rules: dict[Any, Callable[..., Any]] = {}  # primitive -> its JVP function


class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal (a view without tangent) and the tangent."""

    primal: Tensor
    tangent: Tensor | None


def _enter(user: bool) -> int:
    if _stack and (user or _stack[0].user):
        raise RuntimeError(_NESTED)
    level = _Level(len(_stack), user)
    _stack.append(level)
    _open[:] = [tuple(_stack), level]
    _now.seen = _now.current = None
    if level.index == 0:
        dispatch.set_layer("forward_ad", _layer)
        inplace.after_write.append(written)
    return level.index


def _exit() -> None:
    level = _stack.pop()
    _open[:] = [tuple(_stack), _stack[-1] if _stack else None]
    _now.seen, _now.current = level.restore
    level.tangents.clear()
    level.aliases.clear()
    for ref in level.saved:
        s = ref()
        if s is not None and s.saved_tangent is not None:
            s.saved_tangent.pop(level, None)
            if not s.saved_tangent:
                s.saved_tangent = None
    level.saved.clear()
    if not _stack:
        dispatch.set_layer("forward_ad", None)
        inplace.after_write.remove(written)


def enter_dual_level() -> int:
    """Open a forward-AD level and return it (there can be only one)."""
    return _enter(user=True)


def exit_dual_level(*, level=None) -> None:
    """Close the level: every tangent made in it is dropped."""
    if not _stack:
        raise RuntimeError("Dual level must be a positive number.")  # PyTorch's words
    if not _stack[-1].user or level is not None and level != _stack[-1].index:
        raise RuntimeError(
            "Trying to exit a forward AD level that was not the last one that "
            "was created. This is not supported."
        )
    _exit()


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


class transform_level:
    """Context manager for the level of one ``func.jvp``: these nest (Note [nested
    levels]); returns its index."""

    def __enter__(self):
        return _enter(user=False)

    def __exit__(self, *exc):
        _exit()
        return False


def _level(level) -> _Level:
    if level is None:
        return _stack[-1]
    if not (isinstance(level, int) and 0 <= level < len(_stack)):
        raise RuntimeError(f"Invalid level {level}: levels 0 to {len(_stack) - 1} are open")
    return _stack[level]


def make_dual(tensor: Tensor, tangent: Tensor, *, level=None) -> Tensor:
    """A view of ``tensor`` whose tangent is ``tangent`` (same shape, float or complex;
    a copy of it in ``tensor``'s layout where their strides or storage offsets differ)."""
    if not _stack:
        raise RuntimeError(
            "Trying to create a dual Tensor for forward AD but no level exists, "
            "make sure to enter_dual_level() first."
        )
    lv = _level(level)
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
    if (
        type(tangent._payload) is np.ndarray
        and type(tensor._payload) is np.ndarray
        and (
            tangent.stride() != tensor.stride()
            or tangent.storage_offset() != tensor.storage_offset()
        )
    ):  # torch's rule: a tangent laid out unlike its primal is copied into its layout
        layout = empty_strided(tensor.shape, tensor.stride(), dtype=tangent.dtype)
        tangent = layout.copy_(tangent)
    dual = _alias(tensor, lv.outer)
    lv.set(dual, tangent)
    return dual


def unpack_dual(tensor: Tensor, *, level=None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor``; the tangent is None outside a level or where
    ``tensor`` has none. Inside a level the primal is a view of ``tensor`` (as torch's
    ``_fw_primal``), even where it has no tangent."""
    if not _stack:
        return UnpackedDualTensor(tensor, None)
    lv = _level(level)
    return UnpackedDualTensor(_alias(tensor, lv.outer), lv.get(tensor))


def _alias(t: Tensor, seen: tuple[_Level, ...] = ()) -> Tensor:
    """A view of ``t`` that shares its data and graph, and its tangents at the levels
    ``seen`` (outermost ones) only: it is a forward base at the others."""
    prev, _now.seen = _now.seen, seen
    try:
        out = _alias_prim(t, shape=tuple(t.shape))
    finally:
        _now.seen = prev
    if out._base is not None:
        key = id(out._view.steps[-1])
        for lv in _stack[len(seen) :]:
            aliases = lv.aliases
            # (mypy cannot infer a lambda with a default argument as the callback)
            aliases[key] = weakref.ref(
                out,
                lambda _, k=key, d=aliases: d.pop(k, None),  # type: ignore[misc]
            )
    return out


def tangent_of(t: Tensor, level: int | None = None):
    """The tangent of ``t`` at ``level`` (the innermost open one by default), or None."""
    lv = _current() if level is None else _stack[level]
    return None if lv is None else lv.get(t)


def set_tangent(t: Tensor, tangent, level: int | None = None) -> None:
    (_current() if level is None else _stack[level]).set(t, tangent)  # type: ignore[union-attr]


def tangents(t: Tensor) -> list[tuple[int, Any]]:
    """``(level, tangent)`` of every open level where ``t`` has one, outermost first."""
    return [(lv.index, tg) for lv in _stack if (tg := lv.get(t)) is not None]


def active() -> bool:
    return bool(_stack)


def each_level(fn: Callable[[], None]) -> None:
    """Call ``fn`` once per open level, outermost first, with ``tangent_of`` and
    ``set_tangent`` at that level and its ops seen by the levels outside it (a custom
    Function's ``jvp``, Note [nested levels])."""
    prev = _now.seen, _now.current
    try:
        for lv in _seen():
            _now.seen, _now.current = lv.outer, lv
            fn()
    finally:
        _now.seen, _now.current = prev


def written(t: Tensor, result: Tensor) -> None:
    """``t`` was overwritten in place by ``result``: at each level, it takes ``result``'s
    tangent (zeros if ``t`` or its forward base had one and ``result`` has none, as in
    PyTorch), and so do its forward base and the views of it (Note [tangents of views]).
    Not in a custom Function's forward: its ``jvp`` gives the tangents (``mark_dirty``)."""
    if _now.busy:
        return
    prev = _now.seen
    try:
        for lv in _seen():
            _now.seen = lv.outer
            _write(lv, t, result)
    finally:
        _now.seen = prev


def _write(lv: _Level, t: Tensor, result: Tensor) -> None:
    tangent = lv.get(result)
    base, steps = _forward_base(lv, t)
    if tangent is None:
        if lv.get(t) is None and lv.get(base) is None:
            return
        tangent = zeros_like(t)
    if base is t:
        lv.set(t, tangent)
        new = tangent
    else:
        old = lv.get(base)
        if old is None:
            old = zeros_like(base)
        new = views.select(t, steps, views.scatter(tangent, steps), old)
        lv.set(base, new)
    vc = base._vc
    if vc is None or len(vc) == 1:
        return
    for r in vc[1].refs:
        v = r()
        if v is not None and v is not base:
            vb, vsteps = _forward_base(lv, v)
            if vb is base:
                lv.set(v, views.replay(new, vsteps))


def _forward_base(lv: _Level, t: Tensor):
    """``(forward base of t, the view steps from it to t)`` at ``lv`` (Note [tangents of
    views])."""
    if t._base is None:
        return t, ()
    steps = t._view.steps
    for k in range(len(steps) - 1, -1, -1):
        ref = lv.aliases.get(id(steps[k]))
        alias = ref() if ref is not None else None
        if alias is not None and alias._view.steps[-1] is steps[k]:
            return alias, steps[k + 1 :]
    return t._base, steps


def _layer(apply):
    def apply_dual(prim, inputs, params):
        out = apply(prim, inputs, params)
        now = _now
        if now.busy:
            return out
        seen = now.seen
        for lv in _open[0] if seen is None else seen:  # outermost first (Note [nested levels])
            found = lv.tangents
            if not found:
                continue
            tangents, some = [], False
            for t in inputs:  # lv.get, inlined: the hot path
                e = found.get(id(t))
                if e is not None and e[0]() is t:
                    tangents.append(e[1])
                    some = True
                else:
                    tangents.append(None)
            if some:
                _push(lv, prim, inputs, tangents, params, out)
        return out

    return apply_dual


def _push(lv: _Level, prim, inputs, tangents, params, out) -> None:
    """Give ``out`` its tangent at ``lv`` from ``prim``'s JVP rule."""
    rule = _rules.get(prim)
    if rule is None:
        rule = _rules[prim] = jvp_rule(prim)
    prev, _now.seen = _now.seen, lv.outer
    try:
        t_out = rule(tuple(inputs), tangents, out, **params)
    finally:
        _now.seen = prev
    # an integer or bool result carries no tangent (a dual written into an int tensor)
    if t_out is not None and (out.dtype.is_floating_point or out.dtype.is_complex):
        lv.set(out, t_out)
        node = out.grad_fn
        if node is not None:
            _remember_saved(lv, node, inputs, out)


def _remember_saved(lv: _Level, node, inputs, out) -> None:
    """Keep the tangents at ``lv`` of what ``node`` saved, for a backward pass run in it.

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
        _keep(lv, s, out if name == "out" else inputs[names.index(name)])


def keep_saved_tangents(saved, tensors) -> None:
    """Keep the tangents of ``tensors`` at every level that sees the ops bound now with
    their SavedTensors ``saved`` (None where nothing was saved): a custom Function saves
    after its ``jvp`` gave its outputs their tangents, as PyTorch's ``_save_variables``."""
    for lv in _seen():
        for s, t in zip(saved, tensors):
            if s is not None:
                _keep(lv, s, t)


def _keep(lv: _Level, s, t: Tensor) -> None:
    """``s`` (a SavedTensor of ``t``) keeps ``t``'s tangent at ``lv``, if it has one."""
    tangent = lv.get(t)
    if tangent is not None:
        if s.saved_tangent is None:
            s.saved_tangent = {}
        s.saved_tangent[lv] = tangent
        lv.saved.append(weakref.ref(s))


def restore_tangent(t: Tensor, saved_tangent) -> None:
    """Give a tensor unpacked from a SavedTensor the tangents saved with it (one per open
    level: closing one drops its own)."""
    for lv, tangent in saved_tangent.items():
        lv.set(t, tangent)
