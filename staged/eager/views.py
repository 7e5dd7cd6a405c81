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

import re
import weakref
from collections.abc import Callable

import numpy as np
from numpy.lib.array_utils import byte_bounds

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

    __slots__ = (
        "steps",
        "grad_mode",
        "inference",
        "version",
        "data_version",
        "multi",
        "conj",
        "custom",
    )

    def __init__(self, steps, grad_mode, version, inference=False, multi=None):
        self.steps, self.grad_mode, self.version = steps, grad_mode, version
        self.inference = inference
        self.data_version = version
        # an output of a function returning several views (``unbind``, ``split``), or a
        # view of one: (the function's name, the output's number), (None, 0) for a view of
        # one (Note [multi-output views])
        self.multi = multi
        self.conj = None  # the _ConjCopy whose memory it is, for a conj view or a view of one
        # an output of a custom Function: (its Node's name less "Backward", the output's
        # number), torch's CreationMeta::IN_CUSTOM_FUNCTION (``in_custom_function``)
        self.custom = None


class _Views:
    """The live views of one storage, held weakly (Note [stale views]); ``conj``: whether
    a conj view was ever among them (Note [conj views])."""

    __slots__ = ("refs", "limit", "conj")

    def __init__(self):
        self.refs = []
        self.limit = 8
        self.conj = False

    def prune(self) -> None:
        self.refs = [r for r in self.refs if r() is not None]
        self.limit = max(8, 2 * len(self.refs))


_shares = np.may_share_memory
_ref = weakref.ref


def record(view, src, prim, params, grad_mode, copy=False) -> None:
    """Make ``view`` (the output of view primitive ``prim`` on ``src``) a view of
    ``src``'s base. Called by dispatch for view primitives, and for ``conj`` with ``copy``
    (Note [conj views]); an output that NumPy had to copy (a reshape of a transposed
    array) is not a view, as in PyTorch. An empty output is one: NumPy sees no shared
    memory in it, torch's is a view all the same (an in-place op on ``x[:, 1:1]`` with a
    grad-requiring operand makes ``x`` require grad)."""
    p = view._payload
    if type(p) is np.ndarray and p.size and not copy:
        base, sp = p.base, src._payload
        # NumPy's base is the array owning the memory, or the one the view was made from
        if base is None or base is not sp and base is not sp.base and not _shares(p, sp):
            return
    if src._vc is None and src._base is None and not copy and type(p) is np.ndarray:
        # a view of an inference tensor is none in torch (no autograd meta: no _base,
        # _is_view() false): it shares the memory as a ``detach()`` does (Note [aliases])
        root = getattr(src, "_alias", None)
        view._alias = src if root is None else root
        view._vc = None
        return
    step = (prim, params, src._payload)
    multi = custom = None
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
                grad_mode, inference, custom = False, meta.inference, meta.custom
    else:
        view._base = src
        steps = (step,)
    vc = view._vc = src._vc
    if vc is None:
        meta = view._view = ViewMeta(steps, grad_mode, None, multi=multi)
    else:
        meta = view._view = ViewMeta(steps, grad_mode, vc[0], inference, multi)
    meta.custom = custom  # a view of a custom Function's view output is one
    if copy:
        if type(p) is np.ndarray:
            meta.conj = c = _ConjCopy(p, steps, src._payload)
            view._payload = c.full()
    elif src._base is not None:
        meta.conj = src._view.conj
    if vc is not None:
        if len(vc) == 1:
            vc.append(_Views())
        views = vc[1]
    elif meta.conj is not None:  # an inference tensor's: kept while its memory's owner lives
        views = _inference_views(_owner(view._base))
    else:
        return
    if copy:  # a write into the memory its base aliases reaches it too
        for other in _alias_views(view._base, vc, create=True):
            other.refs.append(weakref.ref(view))
            other.conj = True
    if meta.conj is not None:
        views.conj = True
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
        if v is not None:
            cls = v.__class__
            twin = _STALE.get(cls) or stale_twin(cls)
            if twin is not cls:
                v.__class__ = twin
    views.prune()
    _sync_conj(views)


# the conj views of inference tensors (which have no version counter to hold them):
# id(base) -> (a weak reference to the base, its _Views)
_inference_conj: dict[int, tuple] = {}


def _inference_views(base) -> _Views:
    entry = _inference_conj.get(id(base))
    if entry is None:
        key = id(base)
        entry = _inference_conj[key] = (
            weakref.ref(base, lambda _: _inference_conj.pop(key, None)),
            _Views(),
        )
    return entry[1]


def inference_written(t) -> None:
    """``t``, an inference tensor (no version counter), was written: the conj views of
    any tensor sharing its memory read it (Note [conj views])."""
    if _inference_conj:
        entry = _inference_conj.get(id(_owner(t)))
        if entry is not None:
            entry[1].prune()
            _sync_conj(entry[1])


def _memory_chain(t):
    """``t``, then each tensor whose memory the one before reads: its ``_alias``
    (``.data``, ``detach()``, a view of an inference tensor), else a view's base; the last
    owns the memory."""
    while True:
        yield t
        root = getattr(t, "_alias", None)
        t = t._base if root is None else root
        if t is None:
            return


def _owner(t):
    """The tensor owning the memory ``t`` reads (``_memory_chain``'s last)."""
    *_, owner = _memory_chain(t)
    return owner


def _alias_views(t, vc, create=False) -> list:
    """The _Views of the tensors whose memory ``t`` aliases (``_alias``: ``.data``,
    ``detach()``, an ``unsafe_split`` piece, and theirs) under version counters other
    than ``vc`` (with ``create``, made where they have none)."""
    out: list = []
    seen = [vc]
    for root in _memory_chain(t):  # (a view of an alias, ``x.data[1:].data``, included)
        other = root._vc
        if other is not None and all(other is not s for s in seen):
            seen.append(other)
            if len(other) == 1 and create:
                other.append(_Views())
            if len(other) > 1:
                out.append(other[1])
    return out


def alias_written(t) -> None:
    """``t`` (or its base) aliases memory under another version counter (``.data``, an
    ``unsafe_split`` piece) and was written: the conj views there read it (Note [conj
    views])."""
    for views in _alias_views(t if t._base is None else t._base, t._vc):
        _sync_conj(views)


# Note [conj views]: torch's ``x.conj()`` of a complex ``x`` is a view with its conjugate
# bit set, which NumPy cannot express. staged's is a view of ``x`` (``record``, its step the
# ``conj`` primitive, whose VJP rule places gradients as any view step's does) whose memory
# is a conjugated copy (``_ConjCopy``) with the view's strides, kept one memory with its
# base's on every write of the storage (``bumped``; for aliases with a version counter of
# their own, ``alias_written``; for inference tensors, which have none,
# ``inference_written``, by the tensor owning the memory): the copy written since the last
# write (through the conj view, a view of it, its ``detach()`` or ``.data``) is first
# written back into the base, conjugated, newest first (a conj view of an older one's
# ``detach()`` writes into that one's copy); then every copy is read again from the base.
# Views of a conj view are views of its copy.
# ``is_conj()`` counts the conj steps back to the memory's owner (through ``detach()`` and
# ``.data``); ``numpy()`` and ``view_as_real`` refuse, as torch's.
# A write into memory that staged does not see (into an array ``numpy()`` gave) reaches
# the conj views at the storage's next tracked write only.
class _ConjCopy:
    """The memory of a conj view: ``array``, read from the base by ``steps`` (ending with
    the conj step), and ``synced``, its value when last read, which tells a write.
    ``array`` has the strides of the conjugated view (``region``), as torch's conj view,
    which reads the same memory: so its ``stride()`` and ``is_contiguous()`` are torch's,
    and what NumPy can reshape without a copy (a view, written through) is what torch
    can. Where the conjugated view repeats elements (an expanded one: a stride 0),
    ``array`` holds one of each (``index``) and the view is read-only with that stride 0,
    as the conjugated one (``full``), so writes are checked as torch checks its."""

    __slots__ = ("array", "steps", "synced", "index", "shape")

    def __init__(self, array, steps, region):
        self.steps, self.shape = steps, array.shape
        self.index = None
        strides = region.strides
        if any(s == 0 and n > 1 for s, n in zip(strides, array.shape)):
            self.index = tuple(
                slice(0, 1) if s == 0 and n > 1 else slice(None)
                for s, n in zip(strides, array.shape)
            )
            array = np.ascontiguousarray(array[self.index])
        elif array.size and array.strides != strides:
            array = _laid_out_as(region, array)
        self.array = array
        self.synced = array.copy(order="K")

    def full(self) -> np.ndarray:
        """The conj view's payload."""
        return self.array if self.index is None else np.broadcast_to(self.array, self.shape)


def _laid_out_as(region: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` in a new buffer, with ``region``'s strides (spanning as many bytes)."""
    lo, hi = byte_bounds(region)
    buf = np.empty((hi - lo + region.itemsize - 1) // region.itemsize, region.dtype)
    start = region.__array_interface__["data"][0] - lo
    out = np.ndarray(region.shape, region.dtype, buf, start, region.strides)
    out[...] = values
    return out


def _bits(a: np.ndarray) -> np.ndarray:
    """``a``'s elements as unsigned integers (two per complex element), to compare bits."""
    a = a.ravel(order="K")
    return a.view(f"u{a.itemsize // 2}")


def _sync_conj(views: _Views) -> None:
    """Keep the conj views of one storage one memory with their base (Note [conj views])."""
    if not views.conj:
        return
    copies: dict[int, tuple] = {}
    for r in views.refs:
        v = r()
        if v is not None and v._view.conj is not None:
            copies.setdefault(id(v._view.conj), (v._view.conj, v._base))
    if not copies:
        return
    # write back the newest first: a conj view of a conj view's detach() or .data reads
    # the older one's copy, which its write back writes, and which is then written back
    for c, base in reversed(copies.values()):
        if type(base._payload) is not np.ndarray:
            continue  # symbolic under capture: refresh_stale reads it again
        if not np.array_equal(_bits(c.array), _bits(c.synced)):
            _write_back(c, base._payload)
    for c, base in copies.values():
        a = base._payload
        if type(a) is not np.ndarray:
            continue
        a = _read(a, c.steps)
        if c.index is not None:
            a = a[c.index]
        np.copyto(c.array, a)
        np.copyto(c.synced, a)


def _read(a: np.ndarray, steps) -> np.ndarray:
    for prim, params, _ in steps:
        a = prim.impl(a, **params)
    return a


def _write_back(c: _ConjCopy, base: np.ndarray) -> None:
    """Write conj copy ``c``, conjugated, into the region of ``base`` it was read from."""
    region = _read(base, c.steps[:-1])
    if _shares(region, base):  # a view of the base's memory: written through
        w = region.view()
        w.flags.writeable = True  # (an expanded region: c repeats the same elements)
        np.copyto(w, np.conjugate(c.full()))
        return
    with no_grad():  # a conj view of a conj view: its region is a copy too
        copy = Tensor._wrap(c.full(), False)
        new = select(copy, c.steps, scatter(copy, c.steps), Tensor._wrap(base))
    np.copyto(base, new._payload)


def is_conj(t) -> bool:
    """Whether complex ``t`` reads its memory's owner conjugated (under capture too, where
    a conj view has no ``_ConjCopy``): an odd count of conj steps from it, through
    ``detach()`` and ``.data`` (``_alias``) and views of those."""
    if not t.dtype.is_complex:
        return False
    steps = (
        prim.name == "conj"
        for v in _memory_chain(t)
        if v._base is not None and getattr(v, "_alias", None) is None
        for prim, _, _ in v._view.steps
    )
    return sum(steps) % 2 == 1


_grad_fn = Tensor.__dict__["grad_fn"]  # the slots under _StaleView's properties
_requires_grad = Tensor.__dict__["_requires_grad"]
grad_fn_field = _grad_fn.__get__  # a tensor's grad_fn without regenerating it


class _StaleView(Tensor):
    """A view whose storage was written in place since its grad_fn was made: reading
    ``grad_fn`` runs ``sync`` (a property staged.autograd.tensor_methods attaches: the Node
    it makes is autograd's); it requires grad if its base does (Note [stale views])."""

    __slots__ = ()
    _fresh_class: type = Tensor  # the class the view has once settled (``stale_twin``)

    @property
    def _requires_grad(self):
        if _grad_fn.__get__(self) is None and not self._base._requires_grad:
            # settled: nothing to regenerate until the next write
            self.__class__ = self._fresh_class
            return _requires_grad.__get__(self)
        return True

    @_requires_grad.setter
    def _requires_grad(self, value):
        _requires_grad.__set__(self, value)


# Tensor's stale twin is _StaleView; a user's Tensor subclass gets one of its own, so a view
# of that class is regenerated as a plain one's (its methods and __torch_function__ kept);
# a twin's ``_fresh_class`` is the class it stands for
_STALE: dict = {Tensor: _StaleView, _StaleView: _StaleView}  # a class -> its stale twin


def stale_twin(cls):
    """The stale twin of ``cls``, made on first need (and remembered in ``_STALE``): ``cls``
    itself for a stale twin and for staged's own subclasses (``nn.Parameter``'s are leaves,
    never views)."""
    if "_fresh_class" in vars(cls) or cls.__module__.startswith("staged."):
        twin = cls
    else:
        twin = type(cls.__name__, (_StaleView, cls), {"__slots__": (), "_fresh_class": cls})
    _STALE[cls] = twin
    return twin


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
# mark in ``record``, and ``check_inplace`` and ``sync`` raise torch's error. Their Nodes
# are then made one of several outputs, as torch's (``join``): the outputs' tensor hooks
# run when that Node runs, in the order they were registered, then its pre-hooks.
_OF_MULTI = (None, 0)


_renamed: dict[tuple[type, str], type] = {}


def named(y, name: str):
    """``y``, its grad_fn (a Node made just now, if any) named ``name`` as torch names the
    op that made it (``SelectBackward0`` for ``x[0]``, a reshape here): a subclass of the
    Node's class whose ``name()`` says so, made once per pair (the class itself where its
    name is ``name`` already)."""
    fn = y.grad_fn
    if fn is not None:
        cls = _renamed.get((type(fn), name))
        if cls is None:
            cls = type(fn)
            if fn.name() != name:
                ns = {"__slots__": (), "name": lambda self: name}
                cls = type(name.rpartition("::")[2], (cls,), ns)
            _renamed[type(fn), name] = cls
        if cls is not type(fn):  # (an assignment of __class__ checks both layouts)
            fn.__class__ = cls
    return y


def multi_output(outs, name, x, dim, shapes):
    """Mark ``outs``, the views ``name`` (torch's Node's name less "Backward0") returned
    together, as torch's multi-output views (made with grad mode on; under no_grad they
    are no_grad views), their Nodes made one (``join``). ``x``: what they are pieces of,
    along ``dim``, each of ``shapes`` there (Note [multi-output views])."""
    if _state.grad_enabled:
        for i, t in enumerate(outs):
            if t._base is not None:
                t._view.multi = (name, i)
        if outs and outs[0].grad_fn is not None:
            join(outs, name + "Backward0", x, dim, shapes)
    return outs


def untracked(outs):
    """``outs``, views of one base, as torch's ``unsafe_split`` pieces: tensors sharing the
    base's memory without being its views (no base, a version counter of their own), so a
    write into one reaches the base unseen by autograd and by the base's version, and is
    not refused as a multi-output view's. Pieces of a conj view's copy, and payloads that
    don't share memory (symbolic under capture), stay views: a write into them would not
    reach the base otherwise."""
    for t in outs:
        if t._base is None or type(t._payload) is not np.ndarray or t._view.conj is not None:
            continue
        t._alias = t._base  # its memory's (Note [conj views]: alias_written)
        _unview(t)
    return outs


def _unview(t) -> None:
    """Make the view ``t`` a tensor of its own: no base, a version counter of its own."""
    vc = t._vc
    if vc is not None:
        if len(vc) > 1:
            vc[1].refs = [r for r in vc[1].refs if r() is not t]
        t._vc = [0]
    t._base = None
    del t._view


def owned(out, args, kwargs):
    """``out``, an op's result (a tensor or a tuple of them), with each tensor that is a
    view of a tensor the op made in its steps, not of an argument, made a tensor of its own
    (Note [own results])."""
    ts = (out,) if isinstance(out, Tensor) else out
    if not any(isinstance(t, Tensor) and t._base is not None for t in ts):
        return out
    given = set()
    for a in (*args, *kwargs.values()):
        for x in a if isinstance(a, (list, tuple)) else (a,):
            if isinstance(x, Tensor):
                given.add(id(x if x._base is None else x._base))
    for t in ts:
        if (
            isinstance(t, Tensor)
            and t._base is not None
            and id(t._base) not in given
            and t._view.conj is None
            and getattr(t._base, "_alias", None) is None  # memory another tensor owns
        ):
            _unview(t)
    return out


# how torch's view+inplace errors say the view was written (directly or through its base)
_WRITTEN = {
    False: "is being modified inplace",
    True: "its base or another view of its base has been modified inplace",
}


def _op_name(node_name: str) -> str:
    """The op a Node is named after, as torch's view errors name it (``SplitBackward0`` ->
    ``Split``, a custom Function's ``FBackward`` -> ``F``)."""
    return re.sub(r"Backward\d*$", "", node_name)


def multi_output_error(t, indirect) -> str:
    """torch's error for a write into ``t``, a multi-output view or a view of one, or
    (``indirect``) for its grad_fn after a write into its base or a sibling."""
    what = _WRITTEN[indirect]
    fn = grad_fn_field(t)
    name, nr = t._view.multi
    if fn is None:
        head = f"A view was created in no_grad mode and {what} with grad mode enabled."
    else:
        name = name or _op_name(fn.name())
        head = f"Output {nr} of {name} is a view and {what}."
    return (
        f"{head} This view is the output of a function that returns multiple views. Such "
        "functions do not allow the output views to be modified inplace. You should "
        "replace the inplace operation by an out-of-place one."
    )


def in_custom_function(t, name: str, nr: int) -> None:
    """Mark view ``t``, output ``nr`` of the custom Function whose Node is ``name``: a
    write into it, or into its base, would bypass that Function's backward (torch refuses
    it, ``creation_error``)."""
    t._view.grad_mode = False
    t._view.custom = (_op_name(name), nr)


def creation_error(meta, indirect, view=None) -> str:
    """PyTorch's error for a view made under no_grad or inference_mode, or returned by a
    custom Function (or a view of one), whose memory is written with grad mode on
    (``indirect``: through its base or a sibling; else ``view`` itself, named after its
    own Node, where given)."""
    if meta.custom is not None:
        name, nr = meta.custom
        fn = grad_fn_field(view) if view is not None and not indirect else None
        if fn is not None:
            name, nr = _op_name(fn.name()), view._output_nr
        what = _WRITTEN[indirect]
        return (
            f"Output {nr} of {name} is a view and {what}. This view was created inside a "
            "custom Function (or because an input was returned as-is) and the autograd logic "
            "to handle view+inplace would override the custom backward associated with the "
            "custom Function, leading to incorrect gradients. This behavior is forbidden. You "
            "can fix this by cloning the output of the custom Function."
        )
    mode, block, now = (
        ("inference mode", "inference_mode", "in normal mode")
        if meta.inference
        else ("no_grad mode", "no_grad", "with grad mode enabled")
    )
    what = _WRITTEN[indirect]
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
# join(outs, name, x, dim, shapes): one Node for the pieces of ``x`` (Note [multi-output
# views]), an autograd Node, installed by staged.autograd.tensor_methods
join: Callable[..., None] = None  # type: ignore[assignment]  # set at import
