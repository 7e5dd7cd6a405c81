"""Public indexing ops: ``__getitem__``/``__setitem__`` with PyTorch's semantics, gather,
scatter_add, index_select, take_along_dim and masked_fill.

Note [indexing plan]: an index is normalised once into a *plan*: one strided ``slice``
of the input (ints, slices and Ellipsis), a reshape that drops the int dims and inserts
the None dims, then, for advanced indices (integer tensors, boolean masks as their
``nonzero()``), a take along one flattened dim at their *flat index* (one int64 tensor).
``__getitem__`` runs the plan forward; ``__setitem__`` runs it forward to the indexed part
and scatters the new values back through each step, then writes the result in place
(``inplace.write``). A plan depends on the index's structure and shapes alone, the flat
index on the integer tensors' data: a plan of ints, slices, None, ``...`` and integer
tensors into a NumPy payload is kept (``_PLANS``), and later calls only check and
combine the tensors (``_flat_index``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ... import autodiff as ad
from ... import _torch_function as _tf
from ... import dtypes as dt
from ...autodiff import fused, lax
from ...autodiff.avals import normalize_dims
from ...autodiff.indexing import slice_shape
from ..._where import at_user
from ..checks import check_range, require
from ..grad_mode import _state
from ..loop_cache import LoopCache
from ..tensor import Tensor, as_payload
from ..views import named
from .elementwise import where
from ..dispatch import _quiet, _restore
from .inplace import (
    VIEW_OF_LEAF,
    _before,
    _direct,
    _named,
    _written,
    check_inplace,
    check_overlap,
    check_stale_leaf,
    own,
    write,
)
from ._operands import _broadcast2, broadcast_shapes, expand_to, scalar_tensor, to_dtype

_INTS = (int, np.integer)
_ndarray = np.ndarray
_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))
_BOOL = np.dtype(bool)
_min, _max = np.minimum.reduce, np.maximum.reduce  # (ndarray.min: two Python frames more)
builtin_slice = slice  # the module's own names shadow nothing, but keep it explicit


@dataclass(frozen=True)  # kept and shared (``_PLANS``)
class _Plan:
    sliced: tuple | None  # (starts, stops, steps) of the strided slice, None if whole
    shape: tuple  # shape after the slice, int dims dropped and None dims added
    adv: tuple | None  # the advanced indices' ``_advanced_layout``, or None
    name: str = ""  # without `adv`, torch's grad_fn name (Note [indexing names])
    # per integer tensor of the index, in order: (the size of the dim it indexes, its
    # stride in the flat index)
    tensors: tuple = ()


def _as_index(i):
    """Sequences (lists, tuples and ranges inside the index, as torch; an empty one is an
    empty int64 index) and NumPy arrays become tensors; a 0-d integer tensor with data is
    an int (a view, as torch), a uint8 tensor a mask (torch's deprecated byte mask);
    other entries stay."""
    if isinstance(i, (list, tuple, range, np.ndarray)):
        if not isinstance(i, np.ndarray) and len(i) == 0:
            return Tensor._wrap(np.zeros(0, np.int64))
        return Tensor._wrap(as_payload(list(i) if isinstance(i, range) else i))
    if isinstance(i, Tensor) and i.dtype._category == 1:
        if not i.ndim and type(i._payload) is np.ndarray:
            return int(i._payload)
        if i.dtype is dt.uint8:
            warnings.warn(
                "indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                "torch.bool instead.",
                UserWarning,
                stacklevel=4,
            )
            return to_dtype(i, dt.bool_)
    return i


_SEQUENCE_ITEMS = (Tensor, list, tuple, range, np.ndarray, builtin_slice)


def _as_tuple(index):
    """torch's (and old NumPy's) reading of a list index holding a sequence, a tensor, a
    slice, None or ``...`` (``x[[[0, 1]]]``, ``x[[0, slice(None)]]``): the tuple of its
    items, with torch's deprecation warning; other indices stay."""
    if type(index) is not list or len(index) >= 32:
        return index
    if not any(isinstance(o, _SEQUENCE_ITEMS) or o is None or o is Ellipsis for o in index):
        return index
    warnings.warn(
        "Using a non-tuple sequence for multidimensional indexing is deprecated and will be "
        "changed in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this "
        "will be interpreted as tensor index, x[torch.tensor(seq)], which will result either "
        "in an error or a different result",
        UserWarning,
        stacklevel=3,
    )
    return tuple(index)


def _consumes(i) -> int:
    if i is None or i is Ellipsis:
        return 0
    if isinstance(i, Tensor) and i.dtype is dt.bool_:
        return i.ndim
    return 1


def _check_mask(mask: Tensor, shape):
    """A mask indexes the dims ``shape`` (the indexed tensor's, from its position on)."""
    ms = mask._payload.shape
    for k, (a, b) in enumerate(zip(ms, shape)):
        if a != b:
            raise IndexError(
                f"The shape of the mask {list(ms)} at index {k} does not match "
                f"the shape of the indexed tensor {list(shape[: len(ms)])} at "
                f"index {k}"
            )


def _expand_masks(entries, shape):
    """Boolean masks become one int64 index tensor per masked dim (their ``nonzero``)."""
    out, d = [], 0
    for i in entries:
        if isinstance(i, Tensor) and i.dtype is dt.bool_:
            ms = i._payload.shape
            _check_mask(i, shape[d:])
            out.extend(Tensor._wrap(a.astype(np.int64)) for a in np.nonzero(_mask_data(i)))
            d += len(ms)
        else:
            out.append(i)
            d += _consumes(i)
    return out


def _mask_data(mask: Tensor) -> np.ndarray:
    """The data of a boolean index; for one a staged trace has no data of (its
    ``CaptureError``), that error saying what a mask index needs and what to do."""
    try:
        return np.asarray(mask)
    except RuntimeError as err:
        if not hasattr(mask._payload, "traced_item"):  # not a traced tensor's error
            raise
        raise type(err)(
            at_user(
                "indexing with a boolean mask that the step computes from its data "
                "(x[mask]) gives a result whose shape depends on the mask's values, which a "
                "compiled step has no data of. Weight by the mask instead "
                "((loss * mask).sum() / mask.sum(), torch.where(mask, x, 0)), pass the mask "
                "itself as an argument (the trace then holds its data), or compile with "
                "fallback='eager'"
            )
        ) from None


def _is_unit_mask(i) -> bool:
    return type(i) is bool or (isinstance(i, Tensor) and i.dtype is dt.bool_ and i.ndim == 0)


def _unit_masks(x: Tensor, index):
    """``x`` and ``index`` with each Python bool or 0-d bool tensor in the index made an
    index of a new unit dim of ``x``: ``[0]`` (True) or ``[]`` (False), as torch (and
    NumPy) read them: ``x[True]`` is ``x[None]``, ``x[False]`` empties that new dim."""
    entries = index if isinstance(index, tuple) else (index,)
    for i in entries:  # every x[...] asks: plain checks, no calls
        if i.__class__ is bool or i.__class__ is Tensor and not i.ndim:
            break
    else:
        return x, index
    if not any(map(_is_unit_mask, entries)):
        return x, index
    used = sum(_consumes(i) for i in entries if not _is_unit_mask(i))
    out, d, rest = [], 0, x.ndim - used  # rest: the dims an Ellipsis stands for
    for i in entries:
        if _is_unit_mask(i):
            x = ad.reshape(x, shape=tuple(x.shape[:d]) + (1,) + tuple(x.shape[d:]))
            out.append(Tensor._wrap(np.arange(int(bool(i)), dtype=np.int64)))
            d += 1
        else:
            out.append(i)
            d += rest if i is Ellipsis else _consumes(i)
    return x, tuple(out)


# Note [indexing names]: torch indexes one entry at a time (select, slice, unsqueeze;
# a whole dim's slice inside a tuple is skipped unless its start is given and not 0, as
# in ``-2:`` of a dim of 2; x[...] is an alias), then gathers the
# advanced ones (IndexBackward0): its grad_fn is named after the last of those steps.
_ALIAS, _SLICE = "AliasBackward0", "SliceBackward0"
_SELECT, _UNSQUEEZE = "SelectBackward0", "UnsqueezeBackward0"
_INDEX = "IndexBackward0"


def _plan(x: Tensor, index) -> tuple[_Plan, Tensor | None]:
    """The plan of ``index`` into ``x`` and its flat index (None without advanced
    entries); a plan is made once per index structure and shapes where it can be kept
    (Note [indexing plan])."""
    key = _plan_key(index, x._payload)
    plan = _PLANS.get(key) if key is not None else None
    if plan is not None:
        return plan, None if plan.adv is None else _flat_index(index, plan.tensors)
    plan, flat = _new_plan(x, index)
    if key is not None:
        _PLANS.put(key, plan)
    return plan, flat


# (whether the index is a tuple, the shape, its entries with slices as (start, stop,
# step) and integer tensors as (_TENSOR, shape)) -> the plan: x[:, 1:] in a loop plans
# once (3 of its 6 us on 8 floats)
_PLANS = LoopCache()
_BOUNDS = (int, type(None))  # what a slice's fields may be in a key
_TENSOR = object()


def _plan_key(index, p) -> tuple | None:
    """``_PLANS``'s key for ``index`` into payload ``p``, or None unless ``p`` is a NumPy
    array and ``index`` holds only ints, slices of ints, None, ``...`` and int64 or int32
    tensors of at least one dim with NumPy payloads (by type: a bool, a NumPy int or a
    float is not the int it equals; a 0-d tensor is read as its int)."""
    if type(p) is not _ndarray:
        return None
    tupled = type(index) is tuple
    key: list = [tupled, p.shape]
    for i in index if tupled else (index,):
        t = type(i)
        if t is builtin_slice:
            a, b, s = i.start, i.stop, i.step
            if type(a) not in _BOUNDS or type(b) not in _BOUNDS or type(s) not in _BOUNDS:
                return None
            key.append((a, b, s))
        elif t is int or i is None or i is Ellipsis:
            key.append(i)
        elif t is Tensor:
            q = i._payload
            if type(q) is not _ndarray or not q.ndim or q.dtype not in _INDEX_DTYPES:
                return None
            key.append((_TENSOR, q.shape))
        else:
            return None
    return tuple(key)


def _flat_index(index, tensors) -> Tensor:
    """The flat index of a kept plan's integer tensors (``tensors``: the plan's) in
    ``index``: each bounds checked and wrapped, times its stride, summed (NumPy
    payloads)."""
    flat = out = None
    k = 0
    for i in index if type(index) is tuple else (index,):
        if type(i) is Tensor:
            n, stride = tensors[k]
            out = _normalized(i, k, n)
            k += 1
            term = out._payload if stride == 1 else out._payload * stride
            flat = term if flat is None else flat + term
    return out if k == 1 else Tensor._wrap(flat)  # type: ignore[return-value]


def _new_plan(x: Tensor, index) -> tuple[_Plan, Tensor | None]:
    entries = [_as_index(i) for i in (index if isinstance(index, tuple) else (index,))]
    shape = tuple(x._payload.shape)
    used = sum(_consumes(i) for i in entries)
    if used > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    k = next((k for k, i in enumerate(entries) if i is Ellipsis), None)
    if k is not None:  # PyTorch expands the first Ellipsis; later ones select nothing
        entries = entries[: k + 1] + [i for i in entries[k + 1 :] if i is not Ellipsis]
        entries[k : k + 1] = [builtin_slice(None)] * (len(shape) - used)
    else:
        entries += [builtin_slice(None)] * (len(shape) - used)
    entries = _expand_masks(entries, shape)
    starts, stops, steps, out, positions, tensors, sizes = [], [], [], [], [], [], []
    d, name = 0, _ALIAS
    for i in entries:
        if i is None:
            out.append(1)
            name = _UNSQUEEZE
            continue
        n = shape[d]
        if isinstance(i, builtin_slice):
            if i.step is not None and i.step <= 0:
                raise ValueError("step must be greater than zero")
            a, b, s = i.indices(n)
            b = max(a, b)
            starts.append(a)
            stops.append(b)
            steps.append(s)
            out.append(len(range(a, b, s)))
            # torch skips a whole dim's slice in a tuple, one from a start of 0 (or none)
            if (a, b, s) != (0, n, 1) or i.start is not None and i.start != 0:
                name = _SLICE
        elif isinstance(i, _INTS) and not isinstance(i, bool):
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {n}")
            starts.append(i % n)
            stops.append(i % n + 1)
            steps.append(1)
            name = _SELECT
        elif isinstance(i, Tensor) and i.dtype in (dt.int64, dt.int32):
            starts.append(0)
            stops.append(n)
            steps.append(1)
            positions.append(len(out))
            sizes.append(n)
            tensors.append(i)
            out.append(n)
        elif isinstance(i, Tensor):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        else:
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or "
                f"byte Variables are valid indices (got {type(i).__name__})"
            )
        d += 1
    whole = all(a == 0 and b == n and s == 1 for a, b, s, n in zip(starts, stops, steps, shape))
    sliced = None if whole else (tuple(starts), tuple(stops), tuple(steps))
    adv, flat = None, None
    spread: tuple = ()
    if tensors:
        shapes = [tuple(t._payload.shape) for t in tensors]
        try:
            bshape = tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise IndexError(
                "shape mismatch: indexing tensors could not be broadcast together with shapes "
                + ", ".join(str(list(s)) for s in shapes)
            ) from None
        # checked after the shapes, as torch; its errors count index tensors, not dims
        tensors = [_normalized(t, k, n) for k, (t, n) in enumerate(zip(tensors, sizes))]
        adv = _advanced_layout(tuple(out), tuple(positions), bshape)
        _, p, pshape, _, _ = adv
        flat = _linear_index(pshape, p, [expand_to(t, bshape) for t in tensors])
        k = len(tensors)
        strides = [math.prod(pshape[p + j + 1 : p + k]) for j in range(k)]
        spread = tuple(zip(sizes, strides))
    if isinstance(index, builtin_slice):  # x[a:b], even of a whole dim
        name = _SLICE
    return _Plan(sliced, tuple(out), adv, name, spread), flat


def _normalized(i: Tensor, dim: int, n: int) -> Tensor:
    """An int64 index tensor with negative entries wrapped, bounds checked where it has data."""
    i = to_dtype(i, dt.int64)
    p = i._payload
    if type(p) is np.ndarray and p.size:  # its extremes in range: no entry to report
        lo = _min(p, axis=None)
        if -n <= lo and _max(p, axis=None) < n:
            return i if lo >= 0 else Tensor._wrap(p % n)  # (one ufunc, not where)
    check_range(
        i, -n, n, IndexError, f"index {{}} is out of bounds for dimension {dim} with size {n}"
    )
    if type(p) is np.ndarray:
        return i
    return ad.where(
        ad.lt(i, expand_to(scalar_tensor(0, dt.int64), tuple(p.shape))),
        ad.add(i, expand_to(scalar_tensor(n, dt.int64), tuple(p.shape))),
        i,
    )


def _advanced_layout(shape, positions, bshape):
    """(perm or None, position p, shape permuted, flat shape, output shape): advanced dims
    (at ``positions`` of ``shape``, indexed by tensors of the broadcast shape ``bshape``)
    moved together (to the front when they are not adjacent, as PyTorch does) and
    flattened into dim p."""
    k = len(positions)
    if positions == tuple(range(positions[0], positions[0] + k)):
        perm, p = None, positions[0]
    else:
        perm = positions + tuple(d for d in range(len(shape)) if d not in positions)
        shape, p = tuple(shape[d] for d in perm), 0
    n = math.prod(shape[p : p + k])
    flat = shape[:p] + (n,) + shape[p + k :]
    return perm, p, shape, flat, shape[:p] + bshape + shape[p + k :]


def _linear_index(shape, p, tensors) -> Tensor:
    """The flat index into dims ``p .. p+k`` of ``shape`` (row-major)."""
    lin: Tensor | None
    lin, stride = None, 1
    for d, t in zip(range(p + len(tensors) - 1, p - 1, -1), reversed(tensors)):
        term = (
            t
            if stride == 1
            else ad.mul(t, expand_to(scalar_tensor(stride, dt.int64), tuple(t._payload.shape)))
        )
        lin = term if lin is None else ad.add(lin, term)
        stride *= shape[d]
    return lin  # type: ignore[return-value]  # tensors is never empty


def _spread_index(index: Tensor, shape, dim) -> Tensor:
    """A 1-D index of length K as a gather index for ``shape`` with K at ``dim``."""
    k = index._payload.shape[0]
    target = tuple(shape[:dim]) + (k,) + tuple(shape[dim + 1 :])
    single = (1,) * dim + (k,) + (1,) * (len(shape) - dim - 1)
    return ad.expand(ad.reshape(index, shape=single), shape=target)


def take_index(x: Tensor, index: Tensor, dim: int) -> Tensor:
    """``x`` indexed along ``dim`` by an int64 tensor of any shape (in-range, non-negative
    entries): eagerly one kernel and Node (``_take``)."""
    return _take(x, index, dim=dim)


def _take_composite(x: Tensor, index: Tensor, *, dim: int) -> Tensor:
    shape = tuple(x._payload.shape)
    ishape = tuple(index._payload.shape)
    flat = ad.reshape(index, shape=(math.prod(ishape),)) if len(ishape) != 1 else index
    out = ad.gather(x, _spread_index(flat, shape, dim), dim=dim)
    return (
        ad.reshape(out, shape=shape[:dim] + ishape + shape[dim + 1 :]) if len(ishape) != 1 else out
    )


_take = ad.Fused(
    "take", fused.take_impl, _take_composite, vjp=fused.TAKE_VJP, node_name="GatherBackward0"
)


def _select_composite(x, *, dim, index):
    shape = tuple(x._payload.shape)
    y = ad.slice(x, **fused.unit_slice(shape, dim, index))
    return named(ad.reshape(y, shape=shape[:dim] + shape[dim + 1 :]), _SELECT)


# x[i] and x.select(dim, i), ``index`` in range and not negative: eagerly one NumPy view
# and one SelectBackward0 (where a slice and a reshape were two Nodes and 5 us, torch's
# 0.9 us); graphs see the slice and the reshape
select_at = ad.Fused(
    "select",
    fused.select_impl,
    _select_composite,
    vjp=fused.select_dx,
    node_name=_SELECT,
    view=True,
)


_entered, _DISPATCH, _kind = _tf.entered, _tf.DISPATCH, _tf.KIND.get  # (changed in place)


def getitem(x: Tensor, index) -> Tensor:
    if (
        _entered[0]
        and _DISPATCH
        and (_kind(type(x)) is not False or _kind(type(index)) is not False)
    ):
        found = _tf.overloaded((x, index), None, _tf.dispatches)  # x or an index of a class
        if found:  # taking __torch_dispatch__
            return _DISPATCH[0](getitem, found, (x, index), {})
    shape = tuple(x._payload.shape)
    if type(index) is int and shape and -shape[0] <= index < shape[0]:  # x[i]: the common case
        return select_at(x, dim=0, index=index % shape[0])
    if type(index) is Tensor and shape:  # x[idx] or x[mask], a tensor with data: a take
        p = index._payload
        if type(p) is _ndarray and p.ndim:
            if p.dtype in _INDEX_DTYPES:  # along dim 0
                return named(take_index(x, _normalized(index, 0, shape[0]), 0), _INDEX)
            if p.dtype == _BOOL and p.ndim <= len(shape):  # along the masked dims, flattened
                _check_mask(index, shape)
                k = p.ndim
                y = x if k == 1 else ad.reshape(x, shape=(math.prod(shape[:k]), *shape[k:]))
                return named(take_index(y, Tensor._wrap(np.flatnonzero(p)), 0), _INDEX)
    x, index = _unit_masks(x, _as_tuple(index))
    plan, lin = _plan(x, index)
    y = s = (
        x
        if plan.sliced is None
        else ad.slice(x, starts=plan.sliced[0], stops=plan.sliced[1], steps=plan.sliced[2])
    )
    if tuple(y._payload.shape) != plan.shape:
        y = ad.reshape(y, shape=plan.shape)
    if plan.adv is None:  # Note [indexing names]
        if y is x:
            y = ad.reshape(x, shape=plan.shape)  # x[:]: a view, as torch's
        return y if y is s and plan.name is _SLICE else named(y, plan.name)
    perm, p, shape, flat, _ = plan.adv
    if perm is not None:
        y = ad.permute(y, perm=perm)
    y = ad.reshape(y, shape=flat) if flat != shape else y
    return named(take_index(y, lin, p), _INDEX)  # type: ignore[arg-type]


def _check_view(x: Tensor, *sources, stale_leaf: bool = True) -> None:
    """torch's checks before writing into view ``x``, made before the write's value is
    computed from ``x`` (which would regenerate a stale view's grad_fn: Note [stale
    views] in staged/eager/views.py); ``stale_leaf``: ``check_inplace``'s."""
    if x._base is not None:
        grad = any(isinstance(s, Tensor) and s._requires_grad for s in sources)
        check_inplace(x, grad, stale_leaf)


def _dtypes_differ(x: Tensor, value: Tensor) -> str:
    return (
        f"Index put requires the source and destination dtypes match, got {x.dtype.title} "
        f"for the destination and {value.dtype.title} for the source."
    )


_MASKS = (dt.bool_, dt.uint8)


def _check_put_dtype(x: Tensor, index, value: Tensor) -> None:
    """torch's refusal of a tensor value of another dtype where ``x[index] = value``
    reaches ``index_put_``: an index holding tensors (not 0-d integer ones, which select)
    or sequences, unless the value is one element filling a single bool mask (torch's
    ``canDispatchToMaskedFill``). Without such an index it is a ``copy_``, which casts."""
    items = index if type(index) is tuple else (index,)
    adv = [
        i
        for i in items
        if isinstance(i, (list, tuple, np.ndarray))
        or isinstance(i, Tensor)
        and (i._payload.ndim or i._payload.dtype.kind == "b")
    ]
    if not adv:
        return
    mask = adv[0] if len(adv) == 1 and isinstance(adv[0], Tensor) else None
    if not (mask is not None and mask.dtype in _MASKS and mask.ndim and value.numel() == 1):
        raise RuntimeError(_dtypes_differ(x, value))


def setitem(x: Tensor, index, value) -> None:
    # torch writes into x itself (its stale-leaf check too) for masks, x[...] and whole
    # slices, else into the view x[index] (_written_node)
    _check_view(x, value, stale_leaf=False)
    index = given = _as_tuple(index)
    if isinstance(value, Tensor):
        if value.dtype is not x.dtype:
            _check_put_dtype(x, index, value)
        v = value
    elif isinstance(value, np.ndarray):  # torch's: a tensor or a number only
        raise TypeError(f"can't assign a numpy.ndarray to a torch.{x.dtype.title}Tensor")
    else:
        v = scalar_tensor(value, x.dtype, check_half=False)
    v = to_dtype(v, x.dtype)
    if (
        isinstance(index, Tensor)
        and index.dtype is dt.bool_
        and v.numel() == 1
        and 0 < index.ndim <= x.ndim
    ):
        # x[mask] = scalar: a select, no data-dependent shape (so it also captures)
        check_stale_leaf(x)
        _check_mask(index, tuple(x._payload.shape))
        mask = ad.reshape(index, shape=tuple(index._payload.shape) + (1,) * (x.ndim - index.ndim))
        before = _before(x)
        write(x, _masked(x, mask, ad.reshape(v, shape=()) if v.ndim else v))
        _named(x, before, _INDEX_PUT)
        return
    if (
        isinstance(index, Tensor)
        and index.dtype is dt.bool_
        and 0 < index.ndim <= x.ndim
        and type(index._payload) is not np.ndarray
    ):
        check_stale_leaf(x)
        check_overlap(x, (value,))
        before = _before(x)
        write(x, own(_masked_put(x, index, v), value))
        _named(x, before, _INDEX_PUT)
        return
    y, index = _unit_masks(x, index)
    plan, lin = _plan(y, index)
    node = _written_node(plan, value)
    if node != _COPY_SLICES:
        check_stale_leaf(x)
    elif x._base is not None and _state.grad_enabled:
        x.grad_fn  # noqa: B018  (torch's view x[index] regenerates a stale x's grad_fn)
    if isinstance(value, Tensor):  # torch: x[index].copy_(value), or x.index_put_(.., value)
        check_overlap(x, (value,), None if plan.adv else lambda _: getitem(y, index))
    p = x._payload
    if plan.adv is None and x._base is not None and type(p) is np.ndarray and not p.flags.writeable:
        part = x[given]  # expanded x: torch writes x[index] alone (a row has no shared elements)
        write(part, own(_fit(v, tuple(part._payload.shape)), value))
        return
    if node == _COPY_SLICES and x._base is None and x._requires_grad and x.grad_fn is None:
        if _state.grad_enabled:  # torch writes the view x[index]: a leaf's
            raise RuntimeError(VIEW_OF_LEAF)
    new = _put(y, plan, lin, v)
    before = _before(x)
    whole = plan.adv is None and plan.sliced is None  # _put's new is v alone, not from x
    new = own(new if y is x else ad.reshape(new, shape=tuple(x.shape)), value)
    write(x, new, replaces=whole)
    _named(x, before, node)


_INDEX_PUT = "IndexPutBackward0"
# C++ Nodes' names (Note [C++ node names] in staged/autograd/node.py)
_COPY_SLICES = "torch::autograd::CopySlices"
_COPY = "torch::autograd::CopyBackwards"


def _written_node(plan: _Plan, value) -> str:
    """torch's name of the Node of ``x[index] = value`` (``x`` no view): a write into the
    view its basic entries make (CopySlices), else ``index_put_`` of the advanced ones,
    else (``x[...]``, whole slices) ``copy_`` or ``fill_`` of ``x`` itself."""
    if plan.sliced is not None or plan.name in (_SELECT, _UNSQUEEZE):
        return _COPY_SLICES
    if plan.adv is not None:
        return _INDEX_PUT
    return _COPY if isinstance(value, Tensor) else "FillBackward3"


def _masked_put(x: Tensor, mask: Tensor, v: Tensor) -> Tensor:
    """Note [masked writes]: ``x`` with ``x[mask] = v`` for a mask without data (under
    capture), whose count of True entries decides the indexed part's shape. ``v``'s leading
    dim says that count (torch requires them equal): the k-th True entry of the flattened
    mask takes ``v``'s k-th row (``cumsum(mask) - 1``), then a select. A count that is not
    ``v``'s is an index check, reported when the step's results are read; the positions are
    clamped into ``v``, so nothing is read out of bounds. The gradient reaches ``v`` at
    the mask's positions alone (the gather's)."""
    shape = tuple(x._payload.shape)
    _check_mask(mask, shape)
    k = mask.ndim
    rest, m = shape[k:], math.prod(shape[:k])
    vs = tuple(v._payload.shape)
    while len(vs) > len(rest) + 1 and vs[0] == 1:  # torch drops a value's leading unit dims
        vs = vs[1:]
    if len(vs) <= len(rest) or vs[0] == 1:  # one row for every True entry: a select
        rows = _fit(v, (1, *rest))
        return where(
            _mask_like(mask, shape), ad.reshape(expand_to(rows, (m, *rest)), shape=shape), x
        )
    n = vs[0]
    dims = ", ".join(["k", *map(str, rest)])
    require(
        lax.eq(ad.reduce_sum(lax.cast(mask, dt.int64), dims=tuple(range(k)), keepdim=False), n),
        RuntimeError,
        f"shape mismatch: value tensor of shape {list(v.shape)} cannot be broadcast to "
        f"indexing result of shape [{dims}]: the mask's count k of True entries is not {n}",
    )
    if n == 0:  # nothing to write (the mask holds nowhere)
        return ad.copy(x)
    rows = _fit(ad.reshape(v, shape=vs), (n, *rest))
    ones = lax.cast(ad.reshape(mask, shape=(m,)) if k != 1 else mask, dt.int64)
    at = lax.sub(ad.cumsum(ones, dim=0, reverse=False), 1)  # the k-th True entry: k - 1
    at = ad.minimum(ad.maximum(at, lax.full_like(at, 0)), lax.full_like(at, n - 1))
    taken = ad.reshape(take_index(rows, at, 0), shape=shape)
    return where(_mask_like(mask, shape), taken, x)


def _mask_like(mask: Tensor, shape) -> Tensor:
    """The mask of the leading dims of ``shape``, expanded to it."""
    ms = tuple(mask._payload.shape)
    return expand_to(ad.reshape(mask, shape=ms + (1,) * (len(shape) - len(ms))), shape)


def _fit(v: Tensor, shape) -> Tensor:
    vs = tuple(v._payload.shape)
    while len(vs) > len(shape) and vs[0] == 1:  # PyTorch drops leading unit dims of values
        vs = vs[1:]
    if _broadcast2(vs, tuple(shape)) != tuple(shape):
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(v.shape)} cannot be "
            f"broadcast to indexing result of shape {list(shape)}"
        )
    if vs != tuple(v._payload.shape):
        v = ad.reshape(v, shape=vs)
    return expand_to(v, tuple(shape))


def _put(x: Tensor, plan: _Plan, lin, v: Tensor, accumulate: bool = False) -> Tensor:
    """``x`` with the part ``plan`` (with its flat index ``lin``) selects replaced by ``v``
    (broadcast), out of place; or, if ``accumulate``, with ``v`` added to it (repeated
    indices adding up)."""
    sl = plan.sliced
    pshape = tuple(x._payload.shape) if sl is None else slice_shape(x._payload.shape, *sl)
    if plan.adv is None:
        new = _fit(v, plan.shape)
        if accumulate:
            part = x if sl is None else ad.slice(x, starts=sl[0], stops=sl[1], steps=sl[2])
            part = ad.reshape(part, shape=plan.shape) if pshape != plan.shape else part
            new = ad.add(part, new)
    else:
        part = x if sl is None else ad.slice(x, starts=sl[0], stops=sl[1], steps=sl[2])
        y = ad.reshape(part, shape=plan.shape) if pshape != plan.shape else part
        perm, p, shape, flat, out_shape = plan.adv
        if perm is not None:
            y = ad.permute(y, perm=perm)
        yf = ad.reshape(y, shape=flat) if flat != shape else y
        k = math.prod(lin._payload.shape)
        vals = ad.reshape(_fit(v, out_shape), shape=flat[:p] + (k,) + flat[p + 1 :])
        idx = ad.reshape(lin, shape=(k,)) if lin.ndim != 1 else lin
        yf = _put_along(yf, idx, vals, dim=p, accumulate=accumulate)
        y = ad.reshape(yf, shape=shape) if flat != shape else yf
        new = y if perm is None else ad.permute(y, perm=tuple(int(i) for i in np.argsort(perm)))
    if tuple(new._payload.shape) != pshape:
        new = ad.reshape(new, shape=pshape)
    return new if sl is None else ad.slice_scatter(x, new, starts=sl[0], stops=sl[1], steps=sl[2])


def _put_composite(x: Tensor, index: Tensor, src: Tensor, *, dim: int, accumulate: bool):
    """``x`` with the slices of ``src`` written at the 1-D ``index`` along ``dim``: of
    repeated indices the last write wins (``accumulate``: they add up)."""
    spread = _spread_index(index, tuple(x._payload.shape), dim)
    return (ad.scatter_add if accumulate else ad.scatter)(x, spread, src, dim=dim)


_put_along: ad.Fused = ad.Fused(
    "put",
    fused.put_impl,
    _put_composite,
    vjp=(
        lambda g, index, src_aval, dim, accumulate: (
            g
            if accumulate
            else _put_along(g, index, lax.zeros_like(g, src_aval.shape), dim=dim, accumulate=False)
        ),
        None,
        lambda g, index, dim: _take(g, index, dim=dim),
    ),
    node_name="ScatterBackward0",
)


# --- gather / scatter family ------------------------------------------------------------------
def _dim(dim, ndim):
    return normalize_dims(dim, ndim)[0] if ndim else 0


def _check_bounds(index: Tensor, dim: int, n: int):
    check_range(
        index, 0, n, RuntimeError, f"index {{}} is out of bounds for dimension {dim} with size {n}"
    )


def check_rows(index: Tensor, n: int, dim: int = 0) -> None:
    """index_select's and embedding's check: every entry of ``index`` in ``[0, n)``."""
    check_range(
        to_dtype(index, dt.int64),
        0,
        n,
        IndexError,
        f"index out of range in self (index {{}}, size {n} of dimension {dim})",
    )


def _int64_index(index, what):
    if not isinstance(index, Tensor) or index.dtype not in (dt.int64, dt.int32):
        got = index.dtype.name if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"{what}(): Expected dtype int64 for index, got {got}")
    return to_dtype(index, dt.int64)


def _head(x: Tensor, shape, dim) -> Tensor:
    """``x`` cut to ``shape`` in every dim but ``dim``."""
    xs = tuple(x._payload.shape)
    stops = tuple(n if d == dim else s for d, (n, s) in enumerate(zip(xs, shape)))
    if stops == xs:
        return x
    return ad.slice(x, starts=(0,) * len(xs), stops=stops, steps=(1,) * len(xs))


def _check_gather_shapes(x, index, dim, what, src=None):
    xs, ish = tuple(x._payload.shape), tuple(index._payload.shape)
    if len(ish) != len(xs):
        raise RuntimeError(
            f"Index tensor must have the same number of dimensions as "
            f"{'self' if what != 'gather' else 'input'} tensor"
        )
    for d, (a, b) in enumerate(zip(ish, xs)):
        if d != dim and a > b:
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index "
                f"{list(ish)} to be smaller than self {list(xs)} apart from "
                f"dimension {dim}"
            )
    if src is not None and len(src._payload.shape) != len(ish):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    if src is not None and any(a > b for a, b in zip(ish, src._payload.shape)):
        raise RuntimeError(
            f"Expected index {list(ish)} to be smaller than self {list(xs)} "
            f"apart from dimension {dim} and to be smaller size than src "
            f"{list(src.shape)}"
        )


def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """``out[i][j] = x[index[i][j]][j]`` (for dim 0), as ``torch.gather``."""
    index = _int64_index(index, "gather")
    dim = _dim(dim, x.ndim)
    _check_gather_shapes(x, index, dim, "gather")
    _check_bounds(index, dim, x._payload.shape[dim] if x.ndim else 1)
    return ad.gather(_head(x, index._payload.shape, dim), index, dim=dim)


def scatter_add(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """``x`` plus ``src`` added at ``index`` along ``dim``, as ``torch.scatter_add``."""
    index = _int64_index(index, "scatter_add")
    dim = _dim(dim, x.ndim)
    if src.dtype is not x.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    _check_gather_shapes(x, index, dim, "scatter_add", src)
    return _scatter_into(ad.scatter_add, x, dim, index, src)


def index_add(x: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """``x`` plus ``alpha * source``, slice ``i`` of ``source`` along ``dim`` added to slice
    ``index[i]`` of ``x`` (``torch.index_add``): a scatter_add of the index spread over
    ``source``'s shape (whose bounds check raises torch's error)."""
    d, spread = spread_index("index_add_", x, dim, index, source)
    if source.dtype is not x.dtype:
        raise RuntimeError(
            f"index_add_(): self ({x.dtype.title}) and source ({source.dtype.title}) must "
            "have the same scalar type"
        )
    if alpha != 1:  # alpha in self's dtype, as torch converts it (an int tensor's 2.5 is 2)
        source = source * scalar_tensor(alpha, x.dtype)
    return scatter_add(x, d, spread, source)


def _index_add_direct(x: Tensor, dim: int, index, source, *, alpha=1) -> bool:
    """``x.index_add_(dim, index, source, alpha=alpha)`` added into ``x``'s memory where
    Note [data-only writes] lets it (an optimizer's step on a sparse gradient's rows: the
    rows' work, not a copy of the whole table, twice); whether it did."""
    p = _direct(x, source)
    if (
        p is None
        or not p.ndim
        or p.dtype.kind not in "fc"
        or p.dtype.itemsize == 2
        or not isinstance(source, Tensor)
        or source.dtype is not x.dtype
        or type(source._payload) is not np.ndarray
    ):
        return False
    d, spread = spread_index("index_add_", x, dim, index, source)
    _check_bounds(spread, d, p.shape[d])
    if alpha != 1:  # as index_add's
        source = source * scalar_tensor(alpha, x.dtype)
    rows, at, add = np.moveaxis(p, d, 0), index._payload, np.moveaxis(source._payload, d, 0)
    token = _quiet()
    try:
        if at.ndim and at.size > 1 and (np.diff(np.sort(at)) != 0).all():
            rows[at] += add  # distinct rows (a coalesced gradient's): 8x np.add.at's speed
        else:
            np.add.at(rows, at, add)  # one at a time, in order: torch's sums of duplicates
    finally:
        _restore(token)
    _written(x)
    return True


# read by inplace_method: Tensor.index_add_ tries it first
index_add.direct_write = _index_add_direct  # type: ignore[attr-defined]


def spread_index(name, x: Tensor, dim, index, source: Tensor):
    """``(dim, index)`` of ``index_add``'s family: the 1-D (or 0-d) int32/int64 ``index``
    spread (int64) over ``source``'s shape along ``dim``, after torch's checks of the
    index and of the shapes (``source`` has ``x``'s but along ``dim``, one slice per
    index)."""
    if not isinstance(index, Tensor) or index.dtype not in (dt.int64, dt.int32):
        got = index.dtype.title if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index but got: {got}")
    if index.ndim > 1:
        raise IndexError(
            f"{name}(): Index is supposed to be a vector, but got dim: {index.ndim} with "
            f"type: {index.dtype.title} and size: {list(index.shape)}"
        )
    d = _dim(dim, x.ndim)
    xs, ss, n = tuple(x._payload.shape), tuple(source._payload.shape), index.numel()
    if len(ss) != len(xs) or ss[d] != n:
        raise RuntimeError(
            f"{name}(): Number of indices ({n}) should be equal to source.size(dim): "
            f"({ss[d] if d < len(ss) else None}), for dim: {d}"
        )
    if any(a != b for k, (a, b) in enumerate(zip(xs, ss)) if k != d):
        raise RuntimeError(
            "source tensor shape must match self tensor shape, excluding the specified "
            f"dimension. Got self.shape = {list(xs)} source.shape = {list(ss)}"
        )
    spread = to_dtype(index, dt.int64).reshape(tuple(n if k == d else 1 for k in range(len(ss))))
    return d, expand_to(spread, ss)


def _scatter_into(prim, x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """``prim`` (a scatter primitive) of the index's extent of ``src`` into ``x``, the
    index's bounds checked."""
    _check_bounds(index, dim, x._payload.shape[dim] if x.ndim else 1)
    return _scatter_part(prim, x, dim, index, src)


def _scatter_part(prim, x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """``prim`` applied to the part of ``x`` the index spans, then that part written back
    into the rest of ``x`` (the index's bounds already checked)."""
    ish = tuple(index._payload.shape)
    part = _head(x, ish, dim)
    out = prim(part, index, _head(src, ish, -1), dim=dim)
    if part is x:
        return out
    xs = tuple(x._payload.shape)
    return ad.slice_scatter(
        x,
        out,
        starts=(0,) * len(xs),
        stops=tuple(n if d == dim else s for d, (n, s) in enumerate(zip(xs, ish))),
        steps=(1,) * len(xs),
    )


_NO_SRC = object()


def scatter(
    x: Tensor, dim: int, index: Tensor, src=_NO_SRC, *, value=_NO_SRC, reduce=None
) -> Tensor:
    """``x`` with ``src`` (a tensor, or the number ``value``) written at ``index`` along
    ``dim``, as ``torch.scatter``: ``out[index[i][j]][j] = src[i][j]`` for dim 0. Of entries
    that hit one place the last (in ``index``'s order) wins. ``reduce="add"`` adds instead
    (``scatter_add``); torch's deprecated ``"multiply"`` is not supported."""
    if src is _NO_SRC:
        src = value
    if src is _NO_SRC:
        raise TypeError("scatter() missing 1 required positional argument: 'src' (or value=)")
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if reduce == "multiply":
        raise NotImplementedError(
            "scatter(reduce='multiply') is not supported by staged (torch deprecates it too)"
        )
    if not isinstance(index, Tensor) or index.dtype not in (dt.int64, dt.int32):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    index = to_dtype(index, dt.int64)
    dim = _dim(dim, x.ndim)
    if isinstance(src, Tensor):
        if src.dtype is not x.dtype:
            raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
        _check_gather_shapes(x, index, dim, "scatter", src)
    else:
        _check_gather_shapes(x, index, dim, "scatter")
        src = expand_to(scalar_tensor(src, x.dtype), tuple(index._payload.shape))
    return _scatter_into(ad.scatter_add if reduce == "add" else ad.scatter, x, dim, index, src)


_SCATTER_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def scatter_reduce(
    x: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """``x`` with the ``src`` entries reduced into the places ``index`` hits along ``dim``
    (``reduce``: ``"sum"``, ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``), as
    ``torch.scatter_reduce``; ``include_self=False`` leaves ``x``'s own entries out of the
    places hit (Note [scatter_reduce] in ``staged/autodiff/indexing.py``)."""
    reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)  # torch takes these too
    if reduce not in _SCATTER_REDUCTIONS:
        raise RuntimeError(
            f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}"
        )
    if reduce in ("amax", "amin") and x.dtype.is_complex:
        raise NotImplementedError(
            f"\"scatter_gather_tensor_cpu_reduce_{reduce}\" not implemented for '{x.dtype.title}'"
        )
    index = _int64_index(index, "scatter_reduce")
    dim = _dim(dim, x.ndim)
    if not isinstance(src, Tensor) or src.dtype is not x.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    _check_gather_shapes(x, index, dim, "scatter_reduce", src)
    _check_bounds(index, dim, x._payload.shape[dim] if x.ndim else 1)
    ish = tuple(index._payload.shape)
    if not include_self:  # the places hit start from what leaves the reduction unchanged:
        # 0 or 1; for max and min of floats -inf or inf, of integers a source that hits
        # there (no extreme integer, which Vulkan's 32-bit int64 would wrap; a float source
        # would tie with itself and take half its gradient)
        if reduce in ("amax", "amin") and x.dtype.is_floating_point:
            fill = expand_to(
                scalar_tensor(-math.inf if reduce == "amax" else math.inf, x.dtype), ish
            )
        elif reduce in ("amax", "amin"):
            fill = _head(src, ish, -1)
        else:
            fill = expand_to(scalar_tensor(int(reduce == "prod"), x.dtype), ish)
        x = _scatter_part(ad.scatter, x, dim, index, fill)
    if reduce not in ("sum", "mean"):
        return _scatter_part(
            lambda *a, dim: ad.scatter_reduce(*a, dim=dim, reduce=reduce), x, dim, index, src
        )
    total = _scatter_part(ad.scatter_add, x, dim, index, src)
    if reduce == "sum":
        return total
    ones = expand_to(scalar_tensor(1, x.dtype), ish)
    count = _scatter_part(ad.scatter_add, lax.full_like(x, int(include_self)), dim, index, ones)
    count = where(count == 0, scalar_tensor(1, x.dtype), count)
    return total / count if x.dtype.is_floating_point else total // count


def index_put(x: Tensor, indices, values: Tensor, accumulate: bool = False) -> Tensor:
    """``x`` with ``x[indices] = values`` (``accumulate``: ``+=``, repeated indices adding
    up), out of place, as ``torch.index_put``; ``indices`` is a tuple of integer or bool
    tensors, one per leading dim."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(
            f"index_put(): argument 'indices' (position 1) must be tuple of "
            f"Tensors, not {type(indices).__name__}"
        )
    for k, i in enumerate(indices):
        if not isinstance(i, Tensor):
            raise TypeError(
                f"expected Tensor as element {k} in argument 0, but got {type(i).__name__}"
            )
        if i.dtype.is_floating_point or i.dtype.is_complex:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if not isinstance(values, Tensor):
        raise TypeError(
            f"index_put(): argument 'values' (position 2) must be Tensor, not "
            f"{type(values).__name__}"
        )
    if values.dtype is not x.dtype:
        raise RuntimeError(_dtypes_differ(x, values))
    return _put(x, *_plan(x, tuple(indices)), values, accumulate)


def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries of ``x`` at ``index`` (1-D) along ``dim``."""
    index = _int64_index(index, "index_select")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    dim = _dim(dim, x.ndim)
    n = x._payload.shape[dim] if x.ndim else 1
    check_rows(index, n, dim)
    if x.ndim == 0:  # a 0-d result, as PyTorch (the index holds one in-range entry)
        return ad.reshape(
            take_index(ad.reshape(x, shape=(1,)), ad.reshape(index, shape=(1,)), 0), shape=()
        )
    return take_index(x, ad.reshape(index, shape=(1,)) if index.ndim == 0 else index, dim)


def take_along_dim(x: Tensor, indices: Tensor, dim=None) -> Tensor:
    """``gather`` with ``x`` and ``indices`` broadcast against each other (not along dim)."""
    indices = _int64_index(indices, "take_along_dim")
    if dim is None:
        return gather(
            ad.reshape(x, shape=(x.numel(),)), 0, ad.reshape(indices, shape=(indices.numel(),))
        )
    dim = _dim(dim, x.ndim)
    xs, ish = list(x._payload.shape), list(indices._payload.shape)
    if len(xs) != len(ish):
        raise RuntimeError(
            f"torch.take_along_dim(): input and indices should have the same "
            f"number of dimensions, but got {len(xs)} dimensions for input, "
            f"and {len(ish)} dimensions for indices"
        )
    a, b = xs[:], ish[:]
    a[dim] = b[dim] = 1
    shape = list(broadcast_shapes(tuple(a), tuple(b)))
    xt, it = shape[:], shape[:]
    xt[dim], it[dim] = xs[dim], ish[dim]
    return gather(expand_to(x, tuple(xt)), dim, expand_to(indices, tuple(it)))


def masked_fill(x: Tensor, mask: Tensor, value) -> Tensor:
    """``x`` with ``value`` where ``mask`` (broadcast to ``x``) is True."""
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype {got}"
        )
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(
            f"masked_fill_ only supports a 0-dimensional value tensor, but got "
            f"tensor with {value.ndim} dimension(s)."
        )
    v = to_dtype(value, x.dtype) if isinstance(value, Tensor) else scalar_tensor(value, x.dtype)
    return _masked(x, mask, v)


def _masked(x: Tensor, mask: Tensor, v: Tensor) -> Tensor:
    """``x`` with the 0-d ``v`` where ``mask`` (broadcast to ``x``) holds."""
    shape = tuple(x._payload.shape)
    m = expand_to(mask, broadcast_shapes(tuple(mask._payload.shape), shape))
    if tuple(m._payload.shape) != shape:
        raise RuntimeError(
            f"the mask of shape {list(mask.shape)} cannot be broadcast to the "
            f"tensor of shape {list(shape)}"
        )
    return ad.where(m, expand_to(v, shape), x)


def masked_fill_(x: Tensor, mask: Tensor, value) -> Tensor:
    _check_view(x, value)
    before = _before(x)
    name = "MaskedFillBackward1" if isinstance(value, Tensor) else "MaskedFillBackward0"
    return _named(write(x, masked_fill(x, mask, value)), before, name)


def scatter_add_(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    _check_view(x, src)
    return write(x, scatter_add(x, dim, index, src))


__all__ = [
    "gather",
    "index_add",
    "scatter_add",
    "scatter",
    "index_put",
    "index_select",
    "take_along_dim",
    "masked_fill",
]


def take(x: Tensor, index: Tensor) -> Tensor:
    """The entries of ``x`` flattened at ``index`` (any shape; negative entries count from
    the end), in ``index``'s shape."""
    index = _int64_index(index, "take")
    n = x.numel()
    check_range(
        index,
        -n,
        n,
        IndexError,
        f"out of range: tried to access index {{}} on a tensor of {n} elements.",
    )
    flat = ad.reshape(x, shape=(n,)) if x.ndim != 1 else x
    wrapped = lax.where(lax.lt(index, 0), lax.add(index, n), index)
    if index.ndim == 0:
        return ad.reshape(take_index(flat, ad.reshape(wrapped, shape=(1,)), 0), shape=())
    return take_index(flat, wrapped, 0)


def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    """The entries of ``x`` where ``mask`` (broadcast against it) holds, as a 1-D tensor:
    its size depends on the data, so eager only."""
    if mask.dtype is not dt.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = broadcast_shapes(tuple(x._payload.shape), tuple(mask._payload.shape))
    return getitem(expand_to(x, shape), expand_to(mask, shape))


def index_fill(x: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """``x`` with the slices at ``index`` along ``dim`` set to ``value`` (a number or a 0-d
    tensor, whose gradient is the sum over the filled entries)."""
    index = _int64_index(index, "index_fill")
    if index.ndim > 1:
        raise IndexError("Index has to be a vector/scalar")
    dim = _dim(dim, x.ndim)
    n = x.shape[dim] if x.ndim else 1
    check_rows(index, n, dim)
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(
            "index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
            f"{value.ndim} dimension(s)."
        )
    # (converted first: torch refuses an out-of-range value also for an empty index)
    fill = value if isinstance(value, Tensor) else scalar_tensor(value, x.dtype)
    hits = index if index.ndim else lax.reshape(index, (1,))
    k = hits.shape[0]
    if k == 0:
        return ad.copy(x)
    rows = Tensor._wrap(np.arange(n, dtype=np.int64).reshape(n, 1))
    same = lax.eq(lax.expand(rows, (n, k)), lax.expand(lax.reshape(hits, (1, k)), (n, k)))
    count = ad.reduce_sum(lax.cast(same, dt.int64), dims=(1,), keepdim=False)
    shape = [1] * x.ndim
    if x.ndim:
        shape[dim] = n
    mask = lax.reshape(lax.ne(count, 0), tuple(shape))
    return where(mask, fill.to(x.dtype), x)
