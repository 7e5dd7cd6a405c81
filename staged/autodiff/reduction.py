"""Reductions over a set of dims, with or without kept dims."""

from __future__ import annotations

import functools

import numpy as np

from .. import dtypes as dt
from . import lax
from .avals import Aval, reduced_shape
from .blocked import levels
from .primitive import LINEAR, ORDERED, REGISTRY, Primitive, _plain


_add_reduce = np.add.reduce


def _reduce_rule(x, *, dims, keepdim):
    return Aval(reduced_shape(x.shape, dims, keepdim), x.dtype)


def broadcast_back(g, shape, kept):
    """NumPy's ``g``, of the kept shape, broadcast to ``shape`` as the expand primitive's
    impl makes it (a read-only view)."""
    return REGISTRY["expand"].impl(g.reshape(kept), shape=shape)


def _sum_vjp(g, x_aval, dims, keepdim):
    """``g`` broadcast back to ``x``'s shape: NumPy's broadcast array where no graph is
    built (Note [plain rules] in eager/dispatch.py: not a view of ``g``, torch's is)."""
    shape = x_aval.shape
    kept = reduced_shape(shape, dims, True)
    r = _plain[0](broadcast_back, (g,), {"shape": shape, "kept": kept})
    if r is not None:
        return r
    return lax.broadcast_to(g, shape, kept)


@functools.cache
def _trailing(ndim: int, k: int) -> tuple:
    """The last ``k`` of ``ndim`` dims."""
    return tuple(range(ndim - k, ndim))


def _sum(x, *, dims, keepdim):
    """np.sum, blocked (Note [blocked sums]) where NumPy would add along one chain: its
    pairwise sum covers the trailing axes of a C-contiguous array only."""
    if x.dtype.kind in "fc" and not (dims == _trailing(x.ndim, len(dims)) and x.flags.c_contiguous):
        for i, s, k in levels(x.shape, dims):
            if s != x.shape[i]:
                x = np.pad(x, [(0, s - x.shape[i]) if j == i else (0, 0) for j in range(x.ndim)])
            x = x.reshape(x.shape[:i] + (s // k, k) + x.shape[i + 1 :]).sum(i + 1)
    return _add_reduce(x, dims, x.dtype, None, keepdim)  # np.sum less its Python wrapper


reduce_sum = Primitive(
    "reduce_sum", _sum, _reduce_rule, vjp=_sum_vjp, jvp=LINEAR, node_name="SumBackward0"
)


def _prod_partials(x, dims):
    """d prod / d x_i, the product of the others, without dividing by zero: with one zero
    its position gets the product of the rest; the zeros themselves enter as factors
    (``zprod``, ``zsum``, worth 0) so that the result differentiates exactly once more. A 0-d input's
    partial is 1, at infinities and NaN too, as torch's; over dims of size 1 it is 1 and NaN
    at those (torch's out / x), with no x to divide by (whose second derivative, 1 / x -
    x / x**2, cancels to 1e26 at x = 1e-43)."""
    shape = x.shape
    if not shape:
        return lax.full_like(x, 1)
    if all(shape[d] == 1 for d in dims):
        return lax.add(lax.mul(x, 0), 1)
    zero = lax.eq(x, 0)
    safe = lax.where(zero, 1, x)
    # the product of the non-zeros; how many zeros; the one zero (value 0), if one
    nonzero = lax.expand(reduce_prod(safe, dims=dims, keepdim=True), shape)
    zeros = lax.expand(lax.sum(lax.cast(zero, dt.int64), dims, keepdim=True), shape)
    zsum = lax.expand(lax.sum(lax.where(zero, x, 0), dims, keepdim=True), shape)
    # the one zero as a product, its sign kept (a sum of -0.0 is 0.0): [-0., 2, 3] -> -0. * 3
    zprod = lax.expand(reduce_prod(lax.where(zero, x, 1), dims=dims, keepdim=True), shape)
    others = _others(safe, nonzero, dims)
    one = lax.where(zero, nonzero, lax.mul(others, zprod))
    two = lax.where(zero, lax.mul(nonzero, lax.sub(zsum, x)), 0)  # a zero's partner
    # without zeros torch divides the product by each entry (inf / inf is NaN) unless the
    # tensor holds a zero anywhere, when it multiplies the others for every slice
    anywhere = lax.sum(lax.cast(zero, dt.int64), tuple(range(len(shape))), keepdim=True)
    none = lax.where(lax.expand(lax.eq(anywhere, 0), shape), lax.div(nonzero, safe), others)
    return lax.where(
        lax.eq(zeros, 0),
        none,
        lax.where(lax.eq(zeros, 1), one, lax.where(lax.eq(zeros, 2), two, 0)),
    )


def _others(safe, nonzero, dims):
    """The product of the other entries of ``safe`` (zeros made 1; ``nonzero`` its
    product), an infinity or NaN not divided by itself: where it is its slice's only one,
    the product of the finite others, as torch's prod_backward multiplies them
    (``[inf, 0, 2]``: the inf's partial is 0 * 2, not 0 * (inf / inf))."""
    shape = safe.shape
    finite = lax.isfinite(safe)
    odd = lax.sum(lax.cast(lax.logical_not(finite), dt.int64), dims, keepdim=True)
    lone = lax.expand(lax.eq(odd, 1), shape)
    rest = lax.expand(reduce_prod(lax.where(finite, safe, 1), dims=dims, keepdim=True), shape)
    return lax.where(finite, lax.div(nonzero, safe), lax.where(lone, rest, nonzero))


def _no_zero(x):
    return (x != 0).all()


def _prod_dx_plain(g, x, *, dims, kept):
    """torch's gradient of a product over a tensor without zeros: ``g * conj(out / x)``
    (inf / inf is NaN there, as torch's), ``out`` as reduce_prod's impl computes it."""
    ratio = np.prod(x, axis=dims, keepdims=True, dtype=x.dtype) / x
    return g.reshape(kept) * (np.conj(ratio) if ratio.dtype.kind == "c" else ratio)


def _prod_vjp(g, x, dims):
    kept = reduced_shape(x.shape, dims, True)
    if x.shape and not all(x.shape[d] == 1 for d in dims):  # (_prod_partials' special cases)
        # where no graph is built and ``x`` holds no zero: one NumPy expression, where the
        # composite (zeros, infinities) binds forty primitives (Note [plain rules])
        none = _plain[0](_no_zero, (x,), {})
        if none is not None and none.item():
            return _plain[0](_prod_dx_plain, (g, x), {"dims": dims, "kept": kept})
    return lax.mul(lax.broadcast_to(g, x.shape, kept), lax.conj(_prod_partials(x, dims)))


def _prod_jvp(primals, tangents, out, *, dims, keepdim):
    (x,), (t,) = primals, tangents
    return lax.sum(lax.mul(t, _prod_partials(x, dims)), dims, keepdim)


reduce_prod = Primitive(
    "reduce_prod",
    lambda x, *, dims, keepdim: np.prod(x, axis=dims, keepdims=keepdim, dtype=x.dtype),
    _reduce_rule,
    vjp=_prod_vjp,
    jvp=_prod_jvp,
    node_name="ProdBackward0",
)


def _extremum_mask(x, out, dims):
    """(1 where ``x`` is the extremum, else 0, in ``x``'s dtype; the kept shape)."""
    kept = reduced_shape(x.shape, dims, True)
    mask = lax.eq(x, lax.broadcast_to(out, x.shape, kept))
    return lax.cast(mask, x.dtype), kept


def _extremum_vjp(g, x, out, dims):
    # ties share the gradient evenly (PyTorch's amax/amin)
    mask, kept = _extremum_mask(x, out, dims)
    hits = lax.expand(lax.sum(mask, dims, keepdim=True), x.shape)
    return lax.div(lax.mul(lax.broadcast_to(g, x.shape, kept), mask), hits)


def _extremum_jvp(primals, tangents, out, *, dims, keepdim):
    (x,), (t,) = primals, tangents
    mask, _ = _extremum_mask(x, out, dims)
    return lax.div(lax.sum(lax.mul(t, mask), dims, keepdim), lax.sum(mask, dims, keepdim))


def _reduce_max(x, *, dims, keepdim):
    return (
        np.amax(x, axis=dims, keepdims=keepdim)
        if all(x.shape[d] for d in dims)
        else _empty_reduction_error("max", x, dims)
    )


def _reduce_min(x, *, dims, keepdim):
    return (
        np.amin(x, axis=dims, keepdims=keepdim)
        if all(x.shape[d] for d in dims)
        else _empty_reduction_error("min", x, dims)
    )


def _empty_reduction_error(what, x, dims):
    raise IndexError(
        f"{what}(): Expected reduction dim {dims} to have non-zero size, "
        f"but the input has shape {tuple(x.shape)}"
    )


reduce_max = Primitive(
    "reduce_max",
    _reduce_max,
    _reduce_rule,
    vjp=_extremum_vjp,
    jvp=_extremum_jvp,
    node_name="AmaxBackward0",
    domain=ORDERED,
)
reduce_min = Primitive(
    "reduce_min",
    _reduce_min,
    _reduce_rule,
    vjp=_extremum_vjp,
    jvp=_extremum_jvp,
    node_name="AminBackward0",
    domain=ORDERED,
)


def _arg_rule(x, *, dim, keepdim):
    return Aval(reduced_shape(x.shape, (dim,), keepdim), dt.int64)


argmax = Primitive(
    "argmax",
    lambda x, *, dim, keepdim: np.argmax(x, axis=dim, keepdims=keepdim).astype(np.int64),
    _arg_rule,
    domain=ORDERED,
)
argmin = Primitive(
    "argmin",
    lambda x, *, dim, keepdim: np.argmin(x, axis=dim, keepdims=keepdim).astype(np.int64),
    _arg_rule,
    domain=ORDERED,
)
