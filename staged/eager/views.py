"""Views: tensors sharing their base's memory and version counter, and how in-place
updates through them rewrite the graph (PyTorch's CopySlices and view replay).

Note [views]: a primitive declared ``view=True`` (reshape, expand, permute, slice ...)
returns a view: ``_base`` is the root base and ``_view`` a ViewMeta with the chain of
view steps (primitive, params, input payload) from the base; the input's payload is
kept for its shape and dtype only (it is the base's memory anyway). Writing into a view:

* the base's grad_fn becomes ``CopySlices(base's old edge, new value's edge)``: its
  backward gives the base's old graph the incoming gradient with the view's region
  zeroed, and the new value's graph the view of the gradient;
* the view's grad_fn is regenerated from the base (view replay): one
  ``AsStridedBackward0`` Node whose edge is the base's and whose backward places the
  gradient in a base of zeros through the view primitives' VJP rules (``scatter``).

Note [stale views]: every view written in place, directly or through its base or a
sibling, or made before its base first required grad, must answer as PyTorch does: its
``grad_fn`` (and ``is_leaf``) is regenerated when next read, and ``requires_grad`` is
true once its base requires grad. PyTorch checks the version counter on each read; here
the check costs nothing for tensors that are not stale views. The version counter
``_vc`` of a storage that has views is ``[version, _Views]``, the views held weakly
(``record``); an in-place write (``bumped``) turns the class of each live view into
``_StaleView``, whose ``grad_fn`` and ``_requires_grad`` are properties that run the
PyTorch logic (``sync``) and turn it back into a plain ``Tensor`` once it is settled.
So every reader (ops, custom Functions, the engine, the user) sees the regenerated
grad_fn, and ordinary tensors and fresh views keep plain slot reads. A view made under
``no_grad`` (or ``inference_mode``) whose storage was written raises PyTorch's error
when its grad_fn is needed, unless neither it nor its base requires grad. Where PyTorch's
C++ reads the grad_fn field without regenerating it (``is_leaf`` in check_inplace,
retain_grad, requires_grad_), staged reads the slot (``grad_fn_field``) too.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import numpy as np

from .. import autodiff as ad
from .. import dtypes as dt
from ..autodiff import Aval, lax
from .aliases import follow
from .grad_mode import _state, no_grad
from .tensor import Tensor


class ViewMeta:
    """How a view was made from its base: ``steps`` and the grad mode at the time
    (``inference``: made in inference mode); the version at which its grad_fn was last
    made from the base, and the version its data reflects (used only for payloads that
    don't share memory: see ``write_through``)."""

    __slots__ = ("steps", "grad_mode", "inference", "version", "data_version", "multi")

    def __init__(self, steps, grad_mode, version, inference=False, multi=None):
        self.steps, self.grad_mode, self.version = steps, grad_mode, version
        self.inference = inference
        self.data_version = version
        # an output of a function returning several views (``unbind``, ``split``), or a
        # view of one: (the function's name, the output's number), (None, 0) for a view of
        # one (Note [multi-output views])
        self.multi = multi


class _Views:
    """The live views of one storage, held weakly (Note [stale views])."""

    __slots__ = ("refs", "limit")

    def __init__(self):
        self.refs = []
        self.limit = 8

    def prune(self) -> None:
        self.refs = [r for r in self.refs if r() is not None]
        self.limit = max(8, 2 * len(self.refs))


_shares = np.may_share_memory
_ref = weakref.ref


def record(view, src, prim, params, grad_mode) -> None:
    """Make ``view`` (the output of view primitive ``prim`` on ``src``) a view of
    ``src``'s base. Called by dispatch for view primitives only; an output that NumPy
    had to copy (a reshape of a transposed array) is not a view, as in PyTorch. An empty
    output is one: NumPy sees no shared memory in it, torch's is a view all the same (an
    in-place op on ``x[:, 1:1]`` with a grad-requiring operand makes ``x`` require grad)."""
    p = view._payload
    if type(p) is np.ndarray and p.size:
        base, sp = p.base, src._payload
        # NumPy's base is the array owning the memory, or the one the view was made from
        if base is None or base is not sp and base is not sp.base and not _shares(p, sp):
            return
    step = (prim, params, src._payload)
    multi = None
    inference = not grad_mode and _state.inference
    if src._base is not None:
        view._base = src._base
        meta = src._view
        steps = meta.steps + (step,)
        if grad_mode:  # a view of a no_grad or multi-output view is one (torch's
            # propagate_creation_meta); made under no_grad it is a no_grad view
            if meta.multi is not None:
                multi = _OF_MULTI
            elif not meta.grad_mode:
                grad_mode, inference = False, meta.inference
    else:
        view._base = src
        steps = (step,)
    vc = view._vc = src._vc
    if vc is None:
        view._view = ViewMeta(steps, grad_mode, None, multi=multi)
        return
    view._view = ViewMeta(steps, grad_mode, vc[0], inference, multi)
    if len(vc) == 1:
        vc.append(_Views())
    views = vc[1]
    refs = views.refs
    refs.append(_ref(view))
    if len(refs) > views.limit:
        views.prune()


def bumped(vc) -> None:
    """The storage of version counter ``vc`` was written in place: its live views are
    stale until their grad_fn is next read (Note [stale views])."""
    if vc is None or len(vc) == 1:
        return
    views = vc[1]
    for r in views.refs:
        v = r()
        if v is not None and v.__class__ is Tensor:
            v.__class__ = _StaleView
    views.prune()


_grad_fn = Tensor.__dict__["grad_fn"]  # the slots under _StaleView's properties
_requires_grad = Tensor.__dict__["_requires_grad"]
grad_fn_field = _grad_fn.__get__  # a tensor's grad_fn without regenerating it


class _StaleView(Tensor):
    """A view whose storage was written in place since its grad_fn was made: reading
    ``grad_fn`` runs ``sync`` (a property staged.autograd.tensor_methods attaches: the Node
    it makes is autograd's); it requires grad if its base does (Note [stale views])."""

    __slots__ = ()

    @property
    def _requires_grad(self):
        if _grad_fn.__get__(self) is None and not self._base._requires_grad:
            self.__class__ = Tensor  # settled: nothing to regenerate until the next write
            return _requires_grad.__get__(self)
        return True

    @_requires_grad.setter
    def _requires_grad(self, value):
        _requires_grad.__set__(self, value)


def move_retain_grad(t, old, old_nr) -> None:
    """``t`` got a new grad_fn: its ``retain_grad`` moves from the old one (PyTorch's
    update_tensor_hooks_on_new_gradfn)."""
    if old is not None and old._retain_grad:
        old._retain_grad.pop(old_nr, None)
    node = _grad_fn.__get__(t)
    if node._retain_grad is None:
        node._retain_grad = {}
    node._retain_grad[t._output_nr] = weakref.ref(t)


# Note [multi-output views]: torch forbids writing into an output of a function that
# returns several views (``unbind``, ``split``, ``chunk``), or into a view of one, where
# grad is involved (its CreationMeta::MULTI_OUTPUT_NODE; a write into the base or a sibling
# makes reading its grad_fn raise): one grad_fn for all outputs could not be rebased. The
# outputs made with grad mode on are marked (``multi_output``), views of them inherit the
# mark in ``record``, and ``check_inplace`` and ``sync`` raise torch's error.
_OF_MULTI = (None, 0)


def multi_output(outs, name):
    """Mark ``outs``, the views ``name`` (torch's Node's name less "Backward0") returned
    together, as torch's multi-output views (made with grad mode on; under no_grad they
    are no_grad views)."""
    if _state.grad_enabled:
        for i, t in enumerate(outs):
            if t._base is not None:
                t._view.multi = (name, i)
    return outs


def multi_output_error(t, indirect) -> str:
    """torch's error for a write into ``t``, a multi-output view or a view of one, or
    (``indirect``) for its grad_fn after a write into its base or a sibling."""
    what = (
        "its base or another view of its base has been modified inplace"
        if indirect
        else "is being modified inplace"
    )
    fn = grad_fn_field(t)
    name, nr = t._view.multi
    if fn is None:
        head = f"A view was created in no_grad mode and {what} with grad mode enabled."
    else:
        name = name or fn.name().removesuffix("Backward0")
        head = f"Output {nr} of {name} is a view and {what}."
    return (
        f"{head} This view is the output of a function that returns multiple views. Such "
        "functions do not allow the output views to be modified inplace. You should "
        "replace the inplace operation by an out-of-place one."
    )


def creation_error(meta, indirect) -> str:
    """PyTorch's error for a view made under no_grad or inference_mode whose memory is
    written with grad mode on (``indirect``: through its base or a sibling)."""
    mode, block, now = (
        ("inference mode", "inference_mode", "in normal mode")
        if meta.inference
        else ("no_grad mode", "no_grad", "with grad mode enabled")
    )
    what = (
        "its base or another view of its base has been modified inplace"
        if indirect
        else "is being modified inplace"
    )
    return (
        f"A view was created in {mode} and {what} {now}. Given that this use case is "
        "ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
        f"both the view and the inplace either both inside the {block} block (if you "
        "don't want the inplace to be tracked) or both outside (if you want the inplace "
        "to be tracked)."
    )


def replay(x, steps):
    """Apply the view ``steps`` to ``x`` (a base, or a base-shaped gradient)."""
    for prim, params, _ in steps:
        x = prim(x, **params)
    return x


def scatter(g, steps):
    """The transpose of ``replay``: a view-shaped ``g`` placed in a base of zeros, through
    the VJP rules of the view primitives."""
    for prim, params, src in reversed(steps):
        rule = prim.vjp[0]
        kw = {n: params[n] for n in rule.static}
        if rule.avals:
            aval = Aval(tuple(src.shape), dt.from_numpy_dtype(src.dtype))
            kw.update({n + "_aval": aval for n in rule.avals})
        g = rule.fn(g, **kw)
    return g


def select(view, steps, inside, outside):
    """``inside`` where ``view`` lies in the base it is read from by ``steps``, ``outside``
    elsewhere: both of the base's shape and dtype (``inside`` may be a number). The region
    is built from the view primitives' VJP rules like ``scatter``; in a complex base it is
    per real and imaginary part (``x.real`` is only the real parts of ``x``). Exact (a
    select, not an add); differentiable in ``inside`` and ``outside``."""
    with no_grad():
        one = 1 + 1j if view.dtype.is_complex else 1  # every part of the view
        mark = scatter(lax.full_like(view.detach(), one), steps)
        parts = mark.dtype.is_complex
        mask = (ad.view_as_real(mark) if parts else mark) != 0
    if parts:
        inside = ad.view_as_real(inside) if isinstance(inside, Tensor) else inside
        outside = ad.view_as_real(outside)
    out = (
        inside.where(mask, outside) if isinstance(inside, Tensor) else outside.where(~mask, inside)
    )
    return ad.view_as_complex(out) if parts else out


def write_through(view, value) -> None:
    """Functional form of writing ``value`` into ``view`` for payloads that don't share
    memory (symbolic values under capture): the base's data becomes the old data outside
    the view's region and ``value`` inside it."""
    base, steps = view._base, view._view.steps
    with no_grad():
        new = select(view, steps, scatter(value.detach(), steps), base.detach())
    base._payload = new._payload


def refresh(view) -> None:
    """Recompute a stale view's data from its base (after a write through a sibling view,
    for payloads that don't share memory)."""
    with no_grad():
        view._payload = replay(view._base.detach(), view._view.steps)._payload
    view._view.data_version = view._vc[0]


def refresh_stale(t) -> None:
    """Bring ``t``'s data up to date where its base was written since, for payloads that
    don't share memory: ``t`` a view, or an alias (``detach()``, ``.data``) of a view, with
    the view's other aliases (Note [aliased memory])."""
    if t._base is not None and t._vc is not None and t._view.data_version != t._vc[0]:
        refresh(t)
    view = getattr(t, "_alias", None)
    if view is not None and view._base is not None and view._vc is not None:
        if view._view.data_version != view._vc[0]:
            old = view._payload
            refresh(view)
            if t._payload is old:
                t._payload = view._payload
            follow(view, old, view._payload)


def check_writable(steps) -> None:
    for prim, _, _ in steps:
        rule = prim.vjp[0] if prim.vjp is not None else None
        if rule is None or rule.inputs or rule.wants_out:
            raise NotImplementedError(
                f"in-place update through a view made by {prim.name}: "
                "its VJP needs data, so the base cannot be rebased"
            )


# rebase(view, value), after ``value`` was written into ``view``: the base's graph goes
# through CopySlices, an autograd Node, so staged.autograd.tensor_methods installs it.
rebase: Callable[[Tensor, Tensor], None] = None  # type: ignore[assignment]  # set at import
