"""Indexing primitives: strided slices (a view) and their scatter, gather and scatter_add.

Basic indexing (ints, slices, None, Ellipsis) is ``slice`` plus a reshape; advanced
(integer-array and boolean-mask) indexing is ``gather`` along one flattened dim, whose
transpose is ``scatter_add``; ``scatter`` writes instead (``x[idx] = v``: the last of
repeated indices wins, as torch's CPU kernel). All are static-shape: the public ops in
``staged/eager/ops/indexing.py`` normalise indices and check bounds.
"""

from __future__ import annotations

import builtins
import functools

import numpy as np

from .. import dtypes as dt
from . import lax
from .avals import Aval, ShapeError
from .primitive import LINEAR, Primitive


def _slices(starts, stops, steps):
    return tuple(map(builtins.slice, starts, stops, steps))


def slice_shape(shape, starts, stops, steps) -> tuple:
    """The shape of ``x[start:stop:step, ...]`` for in-range, positive-step slices."""
    return tuple(len(range(a, b, s)) for a, b, s in zip(starts, stops, steps))


def _slice_rule(x, *, starts, stops, steps):
    if not len(starts) == len(stops) == len(steps) == x.ndim:
        raise ShapeError(f"slice: one start, stop and step per dim of {x} expected")
    for n, a, b, s in zip(x.shape, starts, stops, steps):
        if not (0 <= a <= n and 0 <= b <= n and s > 0):
            raise ShapeError(f"slice: {a}:{b}:{s} is not a normalised slice of a dim of size {n}")
    return Aval(slice_shape(x.shape, starts, stops, steps), x.dtype)


def _slice_scatter_rule(x, src, *, starts, stops, steps):
    want = _slice_rule(x, starts=starts, stops=stops, steps=steps)
    if src != want:
        raise ShapeError(f"slice_scatter: src must be {want} (the slice of {x}), got {src}")
    return x


def _slice_scatter(x, src, *, starts, stops, steps):
    out = np.array(x, copy=True)
    out[_slices(starts, stops, steps)] = src
    return out


slice = Primitive(
    "slice",
    lambda x, *, starts, stops, steps: x[_slices(starts, stops, steps)],
    _slice_rule,
    vjp=lambda g, x_aval, starts, stops, steps: slice_scatter(
        lax.zeros_like(g, x_aval.shape), g, starts=starts, stops=stops, steps=steps
    ),
    jvp=LINEAR,
    view=True,
)

slice_scatter: Primitive = Primitive(
    "slice_scatter",
    _slice_scatter,
    _slice_scatter_rule,
    vjp=(
        lambda g, src_aval, starts, stops, steps: slice_scatter(
            g, lax.zeros_like(g, src_aval.shape), starts=starts, stops=stops, steps=steps
        ),
        lambda g, starts, stops, steps: slice(g, starts=starts, stops=stops, steps=steps),
    ),
    jvp=LINEAR,
)


# --- gather / scatter_add / scatter ----------------------------------------------------------
def _check_index(name, x, index, dim):
    if index.dtype is not dt.int64:
        raise ShapeError(f"{name}(): Expected dtype int64 for index, got {index.dtype.name}")
    if index.ndim != x.ndim or not 0 <= dim < max(x.ndim, 1):
        raise ShapeError(f"{name}: index {index} must have the rank of {x}, dim {dim} in range")
    for d, (a, b) in enumerate(zip(index.shape, x.shape)):
        if d != dim and a != b:
            raise ShapeError(
                f"{name}: index {index} and {x} must agree apart from dim {dim} "
                "(the public op slices to the index's extent)"
            )


def _gather_rule(x, index, *, dim):
    _check_index("gather", x, index, dim)
    return Aval(index.shape, x.dtype)


def _scatter_rule(name):
    def rule(x, index, src, *, dim):
        _check_index(name, x, index, dim)
        if src.shape != index.shape or src.dtype is not x.dtype:
            raise ShapeError(
                f"{name}: src {src} must have the index's shape {index.shape} and the dtype of {x}"
            )
        return x

    return rule


def _grid(index, dim) -> tuple:
    """The coordinates ``index`` addresses along ``dim`` (its own elsewhere), sparse."""
    grid = list(_sparse_indices(index.shape))
    grid[dim] = index
    return tuple(grid)


@functools.lru_cache(maxsize=256)
def _sparse_indices(shape) -> tuple:
    """``np.indices(shape, sparse=True)``, made once per shape (its Python is most of a
    small gather's cost); read-only, as they are shared."""
    grid = np.indices(shape, sparse=True)
    for a in grid:
        a.flags.writeable = False
    return grid


def _flat(shape, index, dim) -> np.ndarray:
    """``_grid`` as positions in the flattened array of ``shape``, in ``index``'s C order:
    ``ufunc.at`` on a flat array is several times faster than on a grid (the embedding's
    gradient, a (512, 64) index into a (28, 64) table: 0.36 -> 0.13 ms), in the same order."""
    return np.ravel_multi_index(_grid(index, dim), shape).reshape(-1)


def _scatter_add(x, index, src, *, dim):
    out = np.array(x, order="C")  # a copy; C order, so reshape(-1) is a view of it
    np.add.at(out.reshape(-1), _flat(out.shape, index, dim), src.reshape(-1))
    return out


def _scatter(x, index, src, *, dim):
    out = np.array(x, order="C")  # a copy; C order, so reshape(-1) is a view of it
    flat = _flat(out.shape, index, dim)
    _, first = np.unique(flat[::-1], return_index=True)
    last = flat.size - 1 - first  # the last write to each destination
    out.reshape(-1)[flat[last]] = src.reshape(-1)[last]
    return out


def _gather_jvp(primals, tangents, out, *, dim):
    t = tangents[0]
    return None if t is None else gather(t, primals[1], dim=dim)


def _scatter_add_jvp(primals, tangents, out, *, dim):
    (x, index, src), (tx, _, ts) = primals, tangents
    if tx is None and ts is None:
        return None
    return scatter_add(
        lax.full_like(x, 0) if tx is None else tx,
        index,
        lax.full_like(src, 0) if ts is None else ts,
        dim=dim,
    )


def _scatter_jvp(primals, tangents, out, *, dim):
    (x, index, src), (tx, _, ts) = primals, tangents
    if tx is None and ts is None:
        return None
    return scatter(
        lax.full_like(x, 0) if tx is None else tx,
        index,
        lax.full_like(src, 0) if ts is None else ts,
        dim=dim,
    )


gather = Primitive(
    "gather",
    lambda x, index, *, dim: x[_grid(index, dim)],  # take_along_axis, ~1.4x faster
    _gather_rule,
    vjp=(
        lambda g, x_aval, index, dim: scatter_add(
            lax.zeros_like(g, x_aval.shape), index, g, dim=dim
        ),
        None,
    ),
    jvp=_gather_jvp,
)

scatter_add: Primitive = Primitive(
    "scatter_add",
    _scatter_add,
    _scatter_rule("scatter_add"),
    vjp=(lambda g: g, None, lambda g, index, dim: gather(g, index, dim=dim)),
    jvp=_scatter_add_jvp,
)

scatter: Primitive = Primitive(
    "scatter",
    _scatter,
    _scatter_rule("scatter"),
    vjp=(
        lambda g, index, src_aval, dim: scatter(
            g, index, lax.zeros_like(g, src_aval.shape), dim=dim
        ),
        None,
        lambda g, index, dim: gather(g, index, dim=dim),
    ),
    jvp=_scatter_jvp,
)

# --- scatter_reduce: prod, amax, amin ------------------------------------------------------
# Note [scatter_reduce]: ``x`` combined with every ``src`` entry whose index hits it
# (torch's include_self=True; the public op fills x with the reduction's identity first for
# include_self=False, and builds "sum" and "mean" from scatter_add). The derivative is one
# weight per operand entry, shared by the VJP and the JVP, as torch's
# scatter_reduce_backward computes it: amax/amin split the gradient evenly among the
# entries equal to the result; prod is the product of the others, exact where an entry is 0.
_SCATTER_UFUNCS = {"prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def _scatter_reduce(x, index, src, *, dim, reduce):
    out = np.array(x, order="C")  # a copy; C order, so reshape(-1) is a view of it
    _SCATTER_UFUNCS[reduce].at(out.reshape(-1), _flat(out.shape, index, dim), src.reshape(-1))
    return out


def _scatter_reduce_weights(x, index, src, out, dim, reduce):
    """(d out / d x, d out[index] / d src): elementwise weights of ``x``'s and ``src``'s
    shapes (Note [scatter_reduce])."""
    if reduce == "prod":
        x_nz = lax.where(lax.eq(x, 0), 1, x)
        w_x = lax.div(scatter_reduce(x_nz, index, src, dim=dim, reduce=reduce), x_nz)
        src_zero = lax.eq(src, 0)
        zeros = scatter_add(lax.zeros_like(x), index, lax.cast(src_zero, x.dtype), dim=dim)
        lone = lax.logical_and(src_zero, lax.eq(gather(zeros, index, dim=dim), 1))
        others = scatter_reduce(x, index, lax.where(lone, 1, src), dim=dim, reduce=reduce)
        w_src = lax.where(
            lone,
            gather(others, index, dim=dim),
            lax.div(gather(out, index, dim=dim), lax.where(src_zero, 1, src)),
        )
        return w_x, w_src
    x_is = lax.cast(lax.eq(x, out), x.dtype)
    src_is = lax.cast(lax.eq(src, gather(out, index, dim=dim)), x.dtype)
    share = lax.div(1, scatter_add(x_is, index, src_is, dim=dim))  # 1 / the tied count
    return lax.mul(x_is, share), lax.mul(src_is, gather(share, index, dim=dim))


def _scatter_reduce_vjp(which):
    def rule(g, x, index, src, out, dim, reduce):
        w_x, w_src = _scatter_reduce_weights(x, index, src, out, dim, reduce)
        return lax.mul(g, w_x) if which == 0 else lax.mul(gather(g, index, dim=dim), w_src)

    return rule


def _scatter_reduce_jvp(primals, tangents, out, *, dim, reduce):
    (x, index, src), (tx, _, ts) = primals, tangents
    if tx is None and ts is None:
        return None
    w_x, w_src = _scatter_reduce_weights(x, index, src, out, dim, reduce)
    t = lax.zeros_like(x) if tx is None else lax.mul(tx, w_x)
    return t if ts is None else scatter_add(t, index, lax.mul(ts, w_src), dim=dim)


scatter_reduce: Primitive = Primitive(
    "scatter_reduce",
    _scatter_reduce,
    lambda x, index, src, *, dim, reduce: _scatter_rule("scatter_reduce")(x, index, src, dim=dim),
    vjp=(_scatter_reduce_vjp(0), None, _scatter_reduce_vjp(1)),
    jvp=_scatter_reduce_jvp,
)


# --- check ------------------------------------------------------------------------------------
# Note [index checks]: an index or target out of range must raise PyTorch's error in every
# mode. Eagerly the public op checks the data before computing anything. Under capture it
# builds a *report* from ordinary primitives: one int64 reduction, the largest key of an
# entry (0 in range; see ``report_value``), which IREE makes one dispatch with the compares
# fused into it; and passes it through ``check``, an identity whose NumPy impl raises
# ``error(message.format(value))`` when the report is not 0. Capture collects the checks into
# one extra output of the step and keeps the old state where one fails (capture.py); the
# runtime decodes the report and raises when the step's results are read or at a later call
# (runtime/checks.py). Kernels clamp the index they read with, so a bad index never reads
# out of bounds; ONNX, which cannot raise, gets NaN outputs instead.
class LinAlgError(RuntimeError):
    """A matrix an operation cannot take (``torch.linalg.LinAlgError``): a singular one for
    a solve, one that is not positive-definite for a Cholesky factor."""


ERRORS = {"IndexError": IndexError, "RuntimeError": RuntimeError, "LinAlgError": LinAlgError}
KEY_CAP = (1 << 30) - 2  # keys fit int32 (Vulkan holds int64 in it); further out is capped


def report_value(key: int, lo: int, hi: int):
    """The out-of-range value a non-zero report ``key`` stands for. An entry ``v`` of
    ``[lo, hi)`` has key 0; ``v = hi + d`` has ``2 d + 2`` and ``v = lo - 1 - d`` has
    ``2 d + 1``: non-negative keys (Vulkan's integer max starts from 0) that keep the value
    and its side. ``d`` is capped at ``KEY_CAP``; a capped value reads "at least X"."""
    d, side = divmod(int(key) - 1, 2)
    v = hi + d if side else lo - 1 - d
    return v if d < KEY_CAP else f"{'at least' if side else 'at most'} {v}"


def _check_rule(report, *, error, message, lo, hi):
    if report.shape != (1,) or report.dtype is not dt.int64 or error not in ERRORS:
        raise ShapeError(
            f"check: an int64 report of shape (1,) and an error in {set(ERRORS)} "
            f"expected, got {report} and {error!r}"
        )
    return report


def _check(report, *, error, message, lo, hi):
    """``report`` unchanged; raises ``error`` with ``message`` (formatted with the value the
    report stands for) when it is not 0."""
    if report[0]:
        raise ERRORS[error](message.format(report_value(report[0], lo, hi)))
    return report


check = Primitive("check", _check, _check_rule)


def _barrier(x):
    """``x`` unchanged; compilers keep it apart from the ops around it."""
    return x


# the identity, as an optimization barrier: what it reads is never fused across it, to
# keep the 0-d selects of a step's state out of one IREE dispatch (capture.py,
# ``_select_scalars``)
barrier = Primitive("barrier", _barrier, lambda x: x, vjp=lambda g: g, jvp=LINEAR)
