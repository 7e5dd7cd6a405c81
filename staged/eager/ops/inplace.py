"""In-place ops: compute out of place, then write into the tensor and rebase its graph.

Note [in-place]: eagerly the result is copied into the tensor's own memory (views and
the base see it) and the shared version counter is bumped, so saved tensors that read
the old value fail their version check. If the new Node saved the tensor itself (as
``x.mul_(y)`` saves ``x`` for ``y``'s gradient), it keeps the value before the write,
as PyTorch's ``original_self`` (under capture too, where it keeps the old symbolic value).
Under capture the payload is replaced by the new symbolic value, which functionalizes the
update. Writing into a view rebases the base's
graph (Note [views] in ``views.py``).

Note [overlapping writes]: the result is computed out of place, so a source that shares
memory with the written tensor would give the result of a clone; torch refuses the
sources its kernels would read after writing them (``x[1:].copy_(x[:-1])``,
``x.t().add_(x)``: at::assert_no_partial_overlap), and writes a read-only view whose
elements are distinct (a row of an expanded tensor), refusing one whose are not
(assert_no_internal_overlap). Only views of one base are compared: an alias of other
memory (``x.detach()``) is not. An update that reads the view it writes (``add_``, not
``copy_`` or ``fill_``) of a view whose elements share memory at nonzero strides
(``as_strided``, ``unfold``) raises that error too: torch runs it element by element, each
reading what the previous wrote, a result its docs call undefined (``as_strided``) and that
computing out of place cannot give.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # NumPy 1.x
    byte_bounds = np.byte_bounds  # type: ignore[attr-defined]

from ... import autodiff as ad
from ... import dtypes as dt
from .. import views
from ..factories import non_overlapping_and_dense
from ..aliases import follow
from ..grad_mode import _state
from ..meta import Meta
from ..interceptor import current_interceptor
from ..._where import PLAIN, at_user, name_site
from .. import interceptor as _icpt
from ..dispatch import _quiet, _restore
from ..scalars import fill_array
from ..tensor import Tensor, type_label
from . import elementwise as ew
from ._operands import _KEEPS, _number, broadcast_shapes, expand_to, scalar_tensor, to_dtype

# Installed by staged.autograd while active (eager does not import it): fn(t) before a write
# into shared memory (allow_mutation_on_saved_tensors), fn(t, result) after every in-place
# write (forward AD), and fn(t, result) -> (result, functional) at the start of every write
# (vmap: the value batched as t is, and whether t's payload is replaced, not written).
before_write: list[Callable[..., Any]] = []
after_write: list[Callable[..., Any]] = []
on_write: list[Callable[..., Any]] = []


_LEAF_HINT = (
    " Change a parameter's data inside with staged.no_grad(): (as an optimizer "
    "or an init function does), or compute a new tensor out of place "
    "(w = w + 1)."
)


VIEW_OF_LEAF = (
    "a view of a leaf Variable that requires grad is being used in an in-place operation."
)


def check_inplace(t: Tensor, value_requires_grad: bool, stale_leaf: bool = True) -> None:
    """PyTorch's checks before writing into ``t`` a value whose other inputs require grad
    or not (its check_inplace). ``stale_leaf=False`` leaves out ``check_stale_leaf``."""
    if t._vc is None and not _state.inference:
        raise RuntimeError(
            "Inplace update to inference tensor outside InferenceMode is not "
            "allowed.You can make a clone to get a normal tensor before doing "
            "inplace update.See https://github.com/pytorch/rfcs/pull/17 for "
            "more details."
        )
    if not _state.grad_enabled:
        return
    base = t._base
    if base is None:
        if t._requires_grad and t.grad_fn is None:
            raise RuntimeError(
                at_user(
                    "a leaf Variable that requires grad is being used in an in-place operation."
                )
                + _LEAF_HINT
            )
        return
    requires = t._requires_grad or base._requires_grad  # a view's, as PyTorch counts it
    if not (requires or value_requires_grad):
        return
    if t._view.multi is not None:
        raise RuntimeError(views.multi_output_error(t, indirect=False))
    if not t._view.grad_mode:
        raise RuntimeError(views.creation_error(t._view, indirect=False, view=t))
    if requires and base.grad_fn is None:
        raise RuntimeError(VIEW_OF_LEAF)
    if stale_leaf and requires:
        check_stale_leaf(t)


def check_stale_leaf(t: Tensor) -> None:
    """torch's check that a view ``t`` that requires grad has a grad_fn, made on its
    field: a view made before its base required grad, whose grad_fn was not read since,
    counts as a leaf (Note [stale views]). A write into a view of ``t`` (``t[0] = v``)
    does not make it: that view's creation regenerates ``t``'s grad_fn first."""
    if (
        _state.grad_enabled
        and t._base is not None
        and (t._requires_grad or t._base._requires_grad)
        and views.grad_fn_field(t) is None
    ):
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation."
        )


def write(
    t: Tensor,
    result: Tensor,
    since: float | None = None,
    fill: bool = False,
    replaces: bool = False,
) -> Tensor:
    """Make ``t`` hold ``result``: ``t``'s dtype and shape, its memory, a new version.
    ``since``: the result was computed from ``t`` by a composite whose Nodes are those
    numbered above ``since`` (``apply_inplace``); each that saved ``t`` keeps its value.
    ``fill``: one value everywhere, which torch writes into elements that share memory.
    ``replaces``: ``result`` was not computed from ``t`` (``copy_``, ``fill_`` of a tensor,
    a whole ``x[...] = v``): ``t``'s history keeps its edge (a zero gradient) even where
    ``result`` requires grad, as torch's CopyBackwards/FillBackward3 have one."""
    check_inplace(t, result._requires_grad)
    icpt = current_interceptor()
    if icpt is not None:
        icpt.lift(t)  # a write to pre-trace data becomes a state update, never a real write
    functional = icpt is not None
    for hook in on_write:
        result, replaced = hook(t, result)
        functional = functional or replaced
    shape = tuple(t._payload.shape)
    if tuple(result._payload.shape) != shape:
        if broadcast_shapes(shape, result._payload.shape) != shape:  # torch names t "a"
            raise RuntimeError(
                f"output with shape {list(t.shape)} doesn't match the broadcast "
                f"shape {list(broadcast_shapes(result.shape, t.shape))}"
            )
        if (
            functional
            or result._requires_grad
            or (t._requires_grad and _state.grad_enabled)
            or type(result._payload) is not np.ndarray
            or after_write  # forward AD: the tangent written is the expanded value's
        ):
            result = expand_to(result, shape)
        # else a write of data alone: np.copyto below broadcasts it
    if result._payload.dtype != t._payload.dtype:
        if result.dtype._category > t.dtype._category:
            raise RuntimeError(
                f"result type {result.dtype.title} can't be cast to the "
                f"desired output type {t.dtype.title}"
            )
        result = to_dtype(result, t.dtype)
    if (
        t._requires_grad
        and _state.grad_enabled
        and (not result._requires_grad or replaces and t._base is None)
    ):
        # keep t in the graph with a zero gradient to its history, as PyTorch does
        result = ew.where(scalar_tensor(False, dt.bool_), t, result)
    node = result.grad_fn if _state.grad_enabled else None  # no_grad: nothing recorded
    p = t._payload
    if not functional and type(p) is not np.ndarray and type(p) is not Meta:
        p = t._host(replaces and t._base is None)  # data left on a device by a compiled step
    if node is not None:  # eager and symbolic alike: the Nodes read t before the write
        _keep_originals(node, t, since)
    if type(p) is np.ndarray and type(result._payload) is np.ndarray:
        # read-only (expanded), or a writable view with repeated elements (as_strided);
        # an empty one has nothing to write (NumPy gives a new empty array zero strides)
        if p.size and (not p.flags.writeable or t._base is not None and 0 in p.strides):
            # (torch refuses a fill into a conj view's repeated elements too)
            p = writable_view(t, p, fill and (t._base is None or t._view.conj is None))
            if p is None:
                raise RuntimeError(_INTERNAL)
        elif since is not None and t._base is not None and not p.flags.forc and _repeats(p):
            raise RuntimeError(_INTERNAL)  # an update of repeated elements (Note above)
        for hook in before_write:
            hook(t)
        if p.size:
            np.copyto(p, result._payload)
    elif type(p) is Meta or type(result._payload) is Meta:
        p[...] = result._payload  # into meta: nothing; out of it: NotImplementedError
    else:  # payloads that don't share memory (symbolic under capture): functionalize
        for w in _replace(t, p, result):
            if icpt is not None and type(w._payload) is np.ndarray:
                icpt.lift(w)  # a constant (folded) written to state: the graph's constant
    if t._vc is not None:
        t._vc[0] += 1
        if t._base is not None:
            t._view.data_version = t._vc[0]
        if len(t._vc) > 1:  # views of this memory regenerate their grad_fn when next read
            views.bumped(t._vc)
    else:
        views.inference_written(t)
    if getattr(t if t._base is None else t._base, "_alias", None) is not None:
        views.alias_written(t)
    if node is not None:
        if t._vc is not None:
            _saved_as_written(node, result, t)
        if t._base is not None:
            views.rebase(t, result)
        else:
            old, old_nr = t.grad_fn, t._output_nr
            t.grad_fn = node
            t._output_nr = result._output_nr
            t._requires_grad = True
            if t._retains_grad:
                views.move_retain_grad(t, old, old_nr)
    for hook in after_write:
        hook(t, result)
    return t


_INTERNAL = (
    "unsupported operation: more than one element of the written-to tensor refers to a "
    "single memory location. Please clone() the tensor before performing the operation."
)


def _repeats(p: np.ndarray) -> bool:
    """Whether two elements of ``p`` share memory: its strides, smallest first, do not
    each step past the memory the smaller ones reach (then its offsets are compared)."""
    reach = p.itemsize
    for s, n in sorted((abs(s), n) for s, n in zip(p.strides, p.shape) if n > 1):
        if s < reach:
            break
        reach += s * (n - 1)
    else:
        return False
    offsets = sum(
        np.arange(n).reshape((-1,) + (1,) * (p.ndim - 1 - d)) * s
        for d, (s, n) in enumerate(zip(p.strides, p.shape))
    )
    return np.unique(offsets).size < p.size


def writable_view(t: Tensor, p: np.ndarray, fill: bool) -> np.ndarray | None:
    """A writable alias of ``p``, ``t``'s read-only payload, where torch writes into the
    view ``t``: a ``fill``, or no two of its elements share memory (torch's
    has_internal_overlap: no stride 0 on a dim of size > 1), as a row of an expanded
    tensor, or an alias of one (``detach()``, an ``unsafe_split`` piece). None where torch
    refuses, or the memory is not a tensor's own."""
    if t._base is None and getattr(t, "_alias", None) is None:
        return None
    if not fill and any(s == 0 and n > 1 for s, n in zip(p.strides, p.shape)):
        return None
    w = p.view()  # p itself stays read-only: the next write is checked again
    try:
        w.flags.writeable = True
    except ValueError:  # behind as_strided's read-only view (an expanded tensor's diagonal)
        return _in_root(t, p)
    return w


class _Memory:
    """An ``__array_interface__`` over memory ``base`` owns, for ``np.asarray``."""

    def __init__(self, interface: dict, base: np.ndarray):
        self.__array_interface__, self.base = interface, base


def _in_root(t: Tensor, p: np.ndarray) -> np.ndarray | None:
    """``p`` as a writable array over the memory of ``t``'s root (its base or alias), which
    NumPy's ``as_strided`` hides behind a read-only view; None where the root's own array
    is read-only or does not hold ``p``."""
    owner = t._base if t._base is not None else t._alias
    root = owner._payload if owner is not None else None
    if type(root) is not np.ndarray or not root.flags.writeable:
        return None
    (lo, hi), (root_lo, root_hi) = byte_bounds(p), byte_bounds(root)
    if not root_lo <= lo <= hi <= root_hi:
        return None
    interface = dict(p.__array_interface__, data=(p.__array_interface__["data"][0], False))
    return np.asarray(_Memory(interface, root))


_PARTIAL = (
    "unsupported operation: some elements of the input tensor and the written-to tensor "
    "refer to a single memory location. Please clone() the tensor before performing the "
    "operation."
)


# torch's BLAS-backed in-place ops don't check their inputs' overlap with the output
_UNCHECKED = frozenset({"addmm", "addmv", "addbmm", "baddbmm"})


def check_overlap(t: Tensor, sources, part=None, conj_copied=False) -> None:
    """Raise torch's error where one of ``sources`` (any object; tensors checked) is a
    view of ``t``'s memory that partly overlaps it, or the part of it that ``part(t)``
    views (Note [overlapping writes]). ``conj_copied``: an op that torch's conjugate
    fallback runs on copies of its conj operands (all but ``copy_`` and indexing), which
    nothing overlaps where ``t`` or the source is a conj view (Note [conj views])."""
    root = t if t._base is None else t._base
    for s in sources:
        if isinstance(s, Tensor) and s is not t and (s is root or s._base is root):
            if conj_copied and (views.is_conj(t) or views.is_conj(s)):
                continue
            written = t if part is None else part(t)
            if _partial_overlap(written._payload, s._payload):
                check_inplace(t, s._requires_grad)  # torch's autograd checks come first
                raise RuntimeError(_PARTIAL)


def _partial_overlap(a, b) -> bool:
    """Note [overlapping writes]: torch's get_overlap_status for two views of one memory.
    Views with no element and views not non-overlapping-and-dense (``x[::2]``, expanded)
    never count; dense views whose byte ranges meet do, unless the ranges and strides are
    the same (``x.add_(x[:])``)."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray:
        return False  # symbolic payloads under capture
    if not (a.size and b.size and _dense(a) and _dense(b)):
        return False
    ra, rb = byte_bounds(a), byte_bounds(b)
    if ra == rb:
        return a.strides != b.strides
    return ra[0] < rb[1] and rb[0] < ra[1]


def _dense(a: np.ndarray) -> bool:
    return (
        a.flags.c_contiguous
        or a.flags.f_contiguous
        or non_overlapping_and_dense(a.shape, a.strides, a.itemsize)
    )


def _replace(t: Tensor, p, value: Tensor) -> list:
    """Give ``t``, whose payload was ``p``, the payload of ``value``, for payloads that
    don't share memory: a view's base takes it in through the view, and the tensor whose
    data an alias (``.data``, ``detach()``) is takes the alias's new data while it still
    holds the alias's old one (Note [aliases]); up the chain (``p.data[1:]``: the view,
    its base ``p.data``, then ``p``). Returns the tensors written."""
    written = []
    while True:
        base = t._base
        if base is not None:
            old = base._payload
            views.write_through(t, value)
            t._payload = value._payload
            written.append(t)
            t, p = base, old
        else:
            t._payload = value._payload
        follow(t, p, t._payload)  # its aliases that held the old value (Note [aliased memory])
        written.append(t)
        root = getattr(t, "_alias", None)
        if root is None or root._payload is not p:
            return written
        t, value = root, t


def _keep_originals(node, t, since):
    """``node`` and, with ``since``, the Nodes behind it numbered above ``since`` (the
    composite's own): each that saved ``t`` keeps the value before the write."""
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        saved = getattr(n, "saved", None)
        for s in saved.values() if saved else ():
            if s._tensor is t:
                s.keep_current_value()
        if since is not None:
            todo.extend(m for m, _ in n.next_functions if m is not None and m._seq > since)


def _saved_as_written(node, result, t) -> None:
    """``node`` saved its output ``result`` (``sigmoid_``, ``relu_``), now written into
    ``t``: as torch's, the saved value is ``t``'s at this version, so a later write into
    ``t`` (under no_grad too) fails the backward's version check instead of going unseen."""
    saved = getattr(node, "saved", None)
    for s in saved.values() if saved else ():
        if s._is_output and s._unpack is None and s._vc is result._vc:
            s._vc, s._saved_version = t._vc, t._vc[0]


def apply_inplace(t: Tensor, op, *args, **kwargs) -> Tensor:
    """``op(t, *args, **kwargs)`` written into ``t``: a composite too, whose Nodes that save
    ``t`` keep its value (all made after those of its inputs). Without grad mode nothing
    is recorded, and no grad_fn is read (a view made under no_grad and written there
    again has none to regenerate, as in PyTorch)."""
    if not _state.grad_enabled:
        return write(t, op(t, *args, **kwargs), -1)
    since = max(
        (
            a.grad_fn._seq
            for a in (t, *args, *kwargs.values())
            if isinstance(a, Tensor) and a.grad_fn is not None
        ),
        default=-1,
    )
    return write(t, op(t, *args, **kwargs), since)


# Note [data-only writes]: an optimizer's ``p.add_(u)``, ``buf.mul_(m)``, a ``zero_()``:
# with nothing to record (grad mode off, or neither the tensor nor the operand requiring
# grad), no capture, forward AD, vmap or saved-tensor mutation hook, on a writable tensor
# of its own (no view) and an operand of its dtype and shape (or a Python number that
# keeps its dtype), the ufunc of the primitive (a fill: ``np.copyto``) writes into the
# tensor's memory directly: what ``write`` does after computing out of place (same
# values, a new version, its views stale), without the temporary, the copy and the
# dispatch.
_UFUNCS = {ew.add: np.add, ew.sub: np.subtract, ew.mul: np.multiply}


def _direct(t: Tensor, y=None) -> np.ndarray | None:
    """``t``'s memory where Note [data-only writes] lets a write of ``y`` (a tensor, a
    number or None) into it skip ``write``; None where it does not."""
    if _icpt.active is not None or on_write or before_write or after_write:
        return None
    p, vc = t._payload, t._vc
    if vc is None or t._base is not None or type(p) is not np.ndarray:
        return None
    if _state.grad_enabled and (t._requires_grad or isinstance(y, Tensor) and y._requires_grad):
        return None
    return p if p.flags.writeable else None


def _written(t: Tensor) -> None:
    """The bookkeeping of a direct write into ``t``: a new version, its views stale."""
    vc: Any = t._vc  # (never an inference tensor's None: ``_direct`` refused those)
    vc[0] += 1
    if len(vc) > 1:
        views.bumped(vc)
    if getattr(t, "_alias", None) is not None:
        views.alias_written(t)


def _data_only(t: Tensor, y, ufunc) -> bool:
    """Write ``ufunc(t, y)`` into ``t`` if Note [data-only writes] allows; whether it did."""
    p = _direct(t, y)
    if p is None or p.dtype.kind not in "fc" or p.dtype.itemsize == 2:
        return False  # (float16 by a number: Note [half by a scalar])
    if isinstance(y, Tensor):
        q = y._payload
        if type(q) is not np.ndarray or q.dtype != p.dtype or q.shape != p.shape:
            return False
    elif p.dtype.kind in _KEEPS.get(type(y), ""):
        q = _number(y, p.dtype, ())._payload
    else:
        return False
    token = _quiet()
    try:
        ufunc(p, q, out=p)
    finally:
        _restore(token)
    _written(t)
    return True


# Note [data-only writes] of the fused updates (Note [fused multiply-add] in
# autodiff/elementwise.py): ``p.add_(g, alpha=-lr)``, ``buf.add_(g, alpha=1 - d)``,
# ``avg.lerp_(g, w)``, ``avg.addcmul_(g, g, value=v)`` of float32/float64 tensors of one
# shape by Python numbers, one pass of the fma kernel into the tensor's memory (a 1M-element
# SGD update 0.1 ms, against 0.19 ms for the two roundings before, in one run); Adam's
# ``p.addcdiv_(m, d, value=-s)`` as torch's three roundings, the last into the memory.
def _fusable(t: Tensor, *operands) -> np.ndarray | None:
    """``t``'s memory where a fused update of it by tensors ``operands`` may write it
    directly: float32/float64, C-contiguous, not 0-d (NumPy's ufuncs give 0-d operands
    scalars, which the fused steps cannot write into), the operands NumPy arrays of its
    dtype and shape."""
    p = _direct(t, operands[0])
    if p is None or p.dtype.kind != "f" or p.itemsize == 2 or not p.flags.c_contiguous:
        return None
    if not p.ndim:
        return None
    for y in operands:
        q = y._payload if isinstance(y, Tensor) else None
        if type(q) is not np.ndarray or q.dtype != p.dtype or q.shape != p.shape:
            return None
        if y._requires_grad and _state.grad_enabled:
            return None
    return p


def _fused(t: Tensor, a, b, c, p) -> bool:
    token = _quiet()
    try:
        done = ad.fma_into(a, b, c, p)
    finally:
        _restore(token)
    if done:
        _written(t)
    return done


def _add_direct(t: Tensor, y, *, alpha=1, negate=False) -> bool:
    p = _fusable(t, y) if type(alpha) in (int, float) else None
    a = -alpha if negate else alpha
    return p is not None and _fused(t, y._payload, float(fill_array(a, t.dtype)), p, p)


def _lerp_direct(t: Tensor, end, weight) -> bool:
    p = _fusable(t, end) if type(weight) in (int, float) else None
    if p is None:
        return False
    small, c = ew.lerp_by_number(weight, t.dtype)
    e = end._payload
    diff = np.subtract(e, p)
    return _fused(t, diff, c, p, p) if small else _fused(t, np.negative(diff, out=diff), c, e, p)


def _addcmul_direct(t: Tensor, tensor1, tensor2, *, value=1) -> bool:
    p = _fusable(t, tensor1, tensor2) if type(value) in (int, float) else None
    if p is None:
        return False
    t1 = tensor1._payload
    scaled = t1 if value == 1 else np.multiply(t1, fill_array(value, t.dtype))
    return _fused(t, scaled, tensor2._payload, p, p)


def _addcdiv_direct(t: Tensor, tensor1, tensor2, *, value=1) -> bool:
    """torch's ``self + (value * tensor1) / tensor2``, each step rounded (no multiply-add
    to fuse), the last one into ``t``'s memory."""
    p = _fusable(t, tensor1, tensor2) if type(value) in (int, float) else None
    if p is None:
        return False
    t1 = tensor1._payload
    token = _quiet()
    try:
        q = t1 if value == 1 else np.multiply(t1, fill_array(value, t.dtype))
        q = np.divide(q, tensor2._payload, out=None if q is t1 else q)
        np.add(p, q, out=p)
    finally:
        _restore(token)
    _written(t)
    return True


# read by inplace_method: each Tensor method tries its direct write first
ew.add.direct_write = _add_direct  # type: ignore[attr-defined]
ew.sub.direct_write = functools.partial(_add_direct, negate=True)  # type: ignore[attr-defined]
ew.lerp.direct_write = _lerp_direct  # type: ignore[attr-defined]
ew.addcmul.direct_write = _addcmul_direct  # type: ignore[attr-defined]
ew.addcdiv.direct_write = _addcdiv_direct  # type: ignore[attr-defined]


def _abs_refused(t: Tensor) -> None:
    if t.dtype.is_complex:  # the magnitudes are real: torch won't write them as complex
        raise RuntimeError("In-place abs is not supported for complex tensors.")


# torch's refusals of a tensor an in-place op would otherwise write (its result's dtype
# being castable to the tensor's)
_REFUSED = {"abs": _abs_refused}


def inplace_method(op):
    """``Tensor.<op>_``: ``op`` computed out of place, then written into the tensor."""

    checked = op.__name__ not in _UNCHECKED
    ufunc = _UFUNCS.get(op)
    refused = _REFUSED.get(op.__name__)
    direct = getattr(op, "direct_write", None)  # writes into the memory where it may

    def method(self, *args, **kwargs):
        try:
            if refused is not None:
                refused(self)
            if checked:
                check_overlap(self, args, conj_copied=True)
                if kwargs:
                    check_overlap(self, kwargs.values(), conj_copied=True)
            if self._base is not None:  # checked before the op reads the view's grad_fn
                check_inplace(self, any(isinstance(a, Tensor) and a._requires_grad for a in args))
            if ufunc is not None and len(args) == 1 and not kwargs:
                if _data_only(self, args[0], ufunc):
                    return self
            elif direct is not None and direct(self, *args, **kwargs):
                return self
            return apply_inplace(self, op, *args, **kwargs)
        except PLAIN as e:
            name_site(e)  # (inline, as _where.sited would: no wrapper frame)
            raise

    method.__name__ = op.__name__ + "_"
    method.sited = True  # type: ignore[attr-defined]
    return method


def own(result: Tensor, src) -> Tensor:
    """``result``, copied when it is the caller's own ``src`` that requires grad: the
    written tensor gets a Node of its own (torch's CopyBackwards), not src's (a leaf src
    has none, and the write would lose its gradient)."""
    if result is src and src._requires_grad and _state.grad_enabled:
        return ew.clone(src)
    return result


def fill_(self, value):
    before = _before(self)
    if not isinstance(value, Tensor):
        p, one = _direct(self), self.numel() == 1  # (see fill_array: one saturates)
        if p is None:
            out = write(self, scalar_tensor(value, self.dtype, check_half=not one), fill=True)
            return _named(out, before, "FillBackward2")
        np.copyto(p, fill_array(value, self.dtype, check_half=not one))  # Note [data-only writes]
        _written(self)
        return self
    if value.ndim:
        raise RuntimeError(
            "fill_ only supports 0-dimension value tensor but got tensor with "
            f"{value.ndim} dimensions."
        )
    # torch: internal overlap checked
    out = write(self, own(to_dtype(value, self.dtype), value), replaces=True)
    return _named(out, before, "FillBackward3")


def fill(input, value):
    """``torch.fill``: ``fill_`` of a copy of ``input`` (whose gradient is 0)."""
    out = fill_(ew.clone(input), value)
    return _named(out, None, "FillBackward1" if isinstance(value, Tensor) else "FillBackward0")


def zero_(self):
    before = _before(self)
    return _named(fill_(self, 0), before, "ZeroBackward0")


def _before(t: Tensor):
    """What ``_named`` compares ``t``'s grad_fn with after a write: it before, where ``t``
    is no view. A view's is not read: that would regenerate it, which raises for a no_grad
    view whose base was written since (torch's in-place ops never read it under no_grad)."""
    return t.grad_fn if t._base is None else None


def _named(t: Tensor, before, name: str) -> Tensor:
    """``t`` after a write, the Node it made (not ``before``, from ``_before``) named as
    torch's; a view's grad_fn is regenerated from its base's CopySlices, named so (Note
    [views])."""
    if t._base is None and t.grad_fn is not before:
        views.named(t, name)
    return t


COPY_NODE = "torch::autograd::CopyBackwards"  # Note [C++ node names] in autograd/node.py


def copy_(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        raise TypeError(
            f"copy_(): argument 'other' (position 1) must be Tensor, not {type_label(src)}"
        )
    check_overlap(self, (src,))
    before = _before(self)
    written = write(self, own(to_dtype(src, self.dtype), src), replaces=True)
    return _named(written, before, COPY_NODE)


def has_views(t: Tensor, but=None) -> bool:
    """Whether views of ``t``'s memory (other than ``but``) are alive."""
    vc: Any = t._vc
    if vc is None or len(vc) == 1:
        return False
    vc[1].prune()
    return any(r() is not None and r() is not but for r in vc[1].refs)


def reshape_in_place(t: Tensor, new: Tensor, name: str, args: tuple = ()) -> Tensor:
    """Make ``t`` hold ``new``, a view of ``t`` of another shape (``t_()``, ``squeeze_()``
    ...), or, with no grad involved, a new payload (``resize_()``): torch's in-place view
    ops change a tensor's metadata, its data stays. ``t`` gets ``new``'s grad_fn and a new
    version. A base whose views are alive cannot change shape here (they replay their
    steps from the base's shape: Note [views]). Under capture, a tensor the trace made or
    an argument can (a compiled call gives the caller's tensor its new shape, as eagerly),
    not state from outside the trace (a parameter, a buffer): ``t.name(*args)`` is what
    the compiled call repeats on the caller's tensor."""
    check_inplace(t, False)
    icpt = current_interceptor()
    if icpt is not None and not icpt.owns_shape(t, name, args):
        raise RuntimeError(
            at_user(
                f"{name}() changes the shape of a tensor from outside the traced function "
                "(a parameter, a buffer, a tensor a module or optimizer holds) in place, "
                "which staged.compile/capture does not trace: pass it as an argument, or "
                f"use the out-of-place form (x = x.{name[:-1]}(...))"
            )
        )
    vc = t._vc
    if t._base is None and has_views(t, but=new):
        raise NotImplementedError(
            at_user(
                f"{name}() of a tensor that has views: staged's views are made from "
                f"their base's shape, which {name}() would change. Drop the views first, "
                "or change a copy (x = x.clone())"
            )
        )
    t._payload = new._payload
    if new is not t and t._base is not None:
        t._view = new._view
    if new is not t and new.grad_fn is not None:
        old, old_nr = t.grad_fn, t._output_nr
        t.grad_fn, t._output_nr, t._requires_grad = new.grad_fn, new._output_nr, True
        if t._retains_grad:
            views.move_retain_grad(t, old, old_nr)
    if vc is not None:
        vc[0] += 1
        if t._base is not None:
            t._view.version = t._view.data_version = vc[0]
    if new is not t:
        for hook in after_write:
            hook(t, new)  # forward AD: t takes the view's tangent
    return t
