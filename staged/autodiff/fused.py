"""Fused eager kernels (``Fused``, Note [fused kernels] in ``eager/dispatch.py``): the NumPy
kernels of ``linear``, ``layer_norm``, ``cross_entropy``, ``softmax``, ``log_softmax``,
the take and put along a dim (indexing's, the embedding's), ``stack``, ``mean``, ``select``
(a view) and the LSTM and GRU cells,
their VJP rules, and the backward kernels those call, each with its decomposition in ``lax``'s
strict vocabulary (what a double backward differentiates). The forward kernels are
declared next to their composites, which are their decompositions (``eager/ops``,
``nn/functional.py``); forward kernels round as their composites do, so eager values
equal a captured graph's.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from . import lax
from .avals import reduced_shape
from .elementwise import _select, _widened, _zero_where
from .primitive import REGISTRY, Fused, _constant, _plain
from .reduction import broadcast_back


def fusable(*tensors) -> bool:
    """Real floating tensors of one dtype: what the kernels here are written for."""
    d = tensors[0]._payload.dtype
    return d.kind == "f" and all(t._payload.dtype == d for t in tensors)


def _rows(a):
    """``a`` as a matrix of its last dim's rows (a view where NumPy can)."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])  # -1 fails on a 0 last dim


# Note [row reductions]: NumPy reduces along a last dim a row at a time, costly for short
# rows (softmax over attention scores' 32, layer_norm's 64): a max over (1024, 32) costs 3x
# the max over its transposed copy's columns, which NumPy reduces elementwise, and the same
# (a max does not round); a sum 10x one matrix-vector product (BLAS), which adds in another
# order: backward kernels only, whose results no captured graph reproduces bit for bit.
_SHORT_ROW = 64
_BLAS = (np.dtype(np.float32), np.dtype(np.float64))


def _amax(x, dim):
    """``x.max(dim, keepdims=True)`` (Note [row reductions])."""
    if dim == x.ndim - 1 and 0 < x.shape[-1] <= _SHORT_ROW and x.size:
        return np.ascontiguousarray(_rows(x).T).max(0).reshape(x.shape[:-1] + (1,))
    return x.max(dim, keepdims=True)


def _total(x, dim):
    """``x.sum(dim, keepdims=True)`` in a backward kernel (Note [row reductions]); by BLAS
    only from C-contiguous memory (a sum's broadcast gradient, strides of 0, is copied for
    BLAS: 51 µs where NumPy's sum takes 15 on 256 x 256)."""
    if dim == x.ndim - 1 and x.dtype in _BLAS and x.size and x.flags.c_contiguous:
        return (_rows(x) @ np.ones(x.shape[-1], x.dtype)).reshape(x.shape[:-1] + (1,))
    return x.sum(dim, keepdims=True)


def _row_mean(rows):
    m = _total(rows, 1)
    m /= rows.shape[1]
    return m


def _shape(t) -> tuple:
    return tuple(t._payload.shape)


def _lax_rows(t):
    s = _shape(t)
    return lax.reshape(t, (math.prod(s[:-1]), s[-1]))


# --- linear: input @ weight.T (+ bias) ----------------------------------------------------
def linear_impl(x, weight, bias=None):
    out = _rows(x) @ weight.T
    if bias is not None:
        out += bias
    return out.reshape(x.shape[:-1] + weight.shape[:1])


linear_dx = Fused(
    "linear_dx",
    lambda g, weight, *, shape: (_rows(g) @ weight).reshape(shape),
    lambda g, weight, *, shape: lax.reshape(lax.matmul(_lax_rows(g), lax.conj(weight)), shape),
)
linear_dw = Fused(
    "linear_dw",
    lambda g, x: _rows(g).T @ _rows(x),
    lambda g, x: lax.matmul(lax.mT(_lax_rows(g)), lax.conj(_lax_rows(x))),
)
LINEAR_VJP = (
    lambda g, weight, x_aval: linear_dx(g, weight, shape=x_aval.shape),
    lambda g, x: linear_dw(g, x),
)
LINEAR_BIAS_VJP = LINEAR_VJP + (lambda g: lax.sum(g, tuple(range(len(_shape(g)) - 1))),)


# --- take and put: slices of x read or written along a dim at an int index ------------
def take_impl(x, index, *, dim):
    return x.take(index, axis=dim)


def take_rows_impl(weight, index):
    return weight[index]


# Note [take's gradient]: each slice of ``g`` added to its index's slice of zeros, in
# ``g``'s C order, as the scatter_add primitive adds (the same sums, bit for bit). Up to
# _SMALL_TAKE entries NumPy's ``add.at`` along the dim costs least; beyond, on the flat
# positions, several times less per entry (the embedding's gradient, a (512, 64) index
# into a (28, 64) table: 0.36 -> 0.13 ms).
_SMALL_TAKE = 256


def _add_at(out, index, g, dim):
    """``out`` (C order) with each slice of ``g`` added at its ``index`` along ``dim``, in
    place (Note [take's gradient])."""
    shape, k = out.shape, index.size
    lead, n, trail = math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1 :])
    g = g.reshape(lead, k, trail)
    if g.size <= _SMALL_TAKE:
        np.add.at(out.reshape(lead, n, trail), (slice(None), index.reshape(-1)), g)
        return
    at = index.astype(np.intp).reshape(1, k, 1) * trail + np.arange(trail)
    if lead > 1:
        at = at + (np.arange(lead) * (n * trail)).reshape(lead, 1, 1)
    np.add.at(out.reshape(-1), at.reshape(-1), g.reshape(-1))


def _take_dx_impl(g, index, *, dim, shape):
    """``x``'s gradient (``x`` of ``shape``) from ``g``, that of ``take(x, index, dim)``."""
    out = np.zeros(shape, g.dtype)
    _add_at(out, index, g, dim)
    return out


def _take_dx_decomposed(g, index, *, dim, shape):
    k = math.prod(_shape(index))
    at = shape[:dim] + (k,) + shape[dim + 1 :]
    spread = (1,) * dim + (k,) + (1,) * (len(shape) - dim - 1)
    index = lax.cast(index, dt.int64) if index.dtype is not dt.int64 else index
    index = lax.expand(lax.reshape(index, spread), at)
    return lax.bind("scatter_add", lax.zeros_like(g, shape), index, lax.reshape(g, at), dim=dim)


take_dx = Fused("take_dx", _take_dx_impl, _take_dx_decomposed)
TAKE_VJP = (
    lambda g, x_aval, index, dim: take_dx(g, index, dim=dim, shape=x_aval.shape),
    None,
)
TAKE_ROWS_VJP = (
    lambda g, weight_aval, index: take_dx(g, index, dim=0, shape=weight_aval.shape),
    None,
)


def put_impl(x, index, src, *, dim, accumulate):
    """``x`` with the slices of ``src`` written (``accumulate``: added) at the 1-D
    ``index`` along ``dim``; of repeated entries the last written wins, as the scatter
    primitive's."""
    out = x.copy()
    if accumulate:
        _add_at(out, index, src, dim)
        return out
    last = np.full(x.shape[dim], -1, np.intp)  # the last entry that writes each place
    np.maximum.at(last, index, np.arange(index.size))
    hit = np.flatnonzero(last >= 0)
    out[(slice(None),) * dim + (hit,)] = src.take(last[hit], axis=dim)
    return out


# --- layer_norm over the last n dims, with weight and bias --------------------------------
def _normalized(x, eps, mean):
    """((x - mean) / sqrt(var + eps), 1 / sqrt(var + eps)), ``mean(a)`` the mean (kept)."""
    xc = x - mean(x)
    rstd = mean(xc * xc)
    rstd += eps
    np.sqrt(rstd, out=rstd)
    np.divide(1, rstd, out=rstd)
    xc *= rstd
    return xc, rstd


def layer_norm_impl(x, weight, bias, *, n, eps):
    dims = tuple(range(x.ndim - n, x.ndim))
    y, _ = _normalized(x, eps, lambda a: a.mean(dims, keepdims=True))
    y *= weight
    y += bias
    return y


def _groups(a, n):
    """``a`` as a matrix of rows of its last ``n`` dims (a view where NumPy can)."""
    lead = a.shape[: a.ndim - n]
    return a.reshape(math.prod(lead), math.prod(a.shape[len(lead) :]))


def _layer_norm_dx_impl(g, x, weight, *, n, eps):
    xhat, rstd = _normalized(_groups(x, n), eps, _row_mean)
    gw = _groups(g, n) * weight.reshape(-1)
    dx = gw - _row_mean(gw)
    gw *= xhat
    xhat *= _row_mean(gw)
    dx -= xhat
    dx *= rstd
    return dx.reshape(x.shape)


def _layer_norm_dw_impl(g, x, *, n, eps):
    xhat, _ = _normalized(_groups(x, n), eps, _row_mean)
    xhat *= _groups(g, n)
    return xhat.sum(0).reshape(x.shape[x.ndim - n :])


def _mean_back(x, dims, count):
    """The mean of ``x`` over ``dims``, broadcast back to ``x``'s shape."""
    return lax.expand(lax.mul(lax.sum(x, dims, keepdim=True), 1.0 / count), _shape(x))


def _stats(x, n, eps):
    """(dims, their element count, (x - mean) * rstd, rstd) in the vocabulary."""
    shape = _shape(x)
    dims, count = tuple(range(len(shape) - n, len(shape))), math.prod(shape[len(shape) - n :])
    xc = lax.sub(x, _mean_back(x, dims, count))
    rstd = lax.bind("rsqrt", lax.add(_mean_back(lax.mul(xc, xc), dims, count), eps))
    return dims, count, lax.mul(xc, rstd), rstd


def _layer_norm_dx_decomposed(g, x, weight, *, n, eps):
    dims, count, xhat, rstd = _stats(x, n, eps)
    shape = _shape(x)
    gw = lax.mul(g, lax.broadcast_to(weight, shape, (1,) * (len(shape) - n) + _shape(weight)))
    centred = lax.sub(gw, _mean_back(gw, dims, count))
    return lax.mul(
        rstd, lax.sub(centred, lax.mul(xhat, _mean_back(lax.mul(gw, xhat), dims, count)))
    )


def _layer_norm_dw_decomposed(g, x, *, n, eps):
    _, _, xhat, _ = _stats(x, n, eps)
    return lax.sum(lax.mul(g, xhat), tuple(range(len(_shape(x)) - n)))


layer_norm_dx = Fused("layer_norm_dx", _layer_norm_dx_impl, _layer_norm_dx_decomposed)
layer_norm_dw = Fused("layer_norm_dw", _layer_norm_dw_impl, _layer_norm_dw_decomposed)
LAYER_NORM_VJP = (
    lambda g, x, weight, n, eps: layer_norm_dx(g, x, weight, n=n, eps=eps),
    lambda g, x, n, eps: layer_norm_dw(g, x, n=n, eps=eps),
    lambda g, n: lax.sum(g, tuple(range(len(_shape(g)) - n))),
)


# --- cross_entropy and nll_loss: the mean over (N, C) scores of int64 class indices ------
def _picked(scores, target, ignore_index):
    """Which rows count, and each row's score at its target (at class 0 for an ignored
    row)."""
    valid = target != ignore_index
    return valid, scores[np.arange(len(target)), np.where(valid, target, 0)]


def _mean_nll(picked_logp, valid, dtype):
    """``-picked`` averaged over the counted rows, summed as the composites sum."""
    total = np.where(valid, -picked_logp, 0.0).sum() / valid.sum(dtype=dtype)
    return np.asarray(total, dtype)


def _row_scale(g, target, ignore_index, shape, dtype):
    """``g`` over the number of counted rows on each counted row, 0 on the others (and
    everywhere when none counts: not 0/0's NaN, torch's), broadcast to ``shape``."""
    n = shape[0]
    valid = lax.cast(lax.ne(target, ignore_index), dtype)
    count = lax.sum(valid, (0,))
    empty = lax.eq(count, 0.0)
    per_target = lax.where(empty, 0.0, lax.div(g, lax.where(empty, 1.0, count)))
    scale = lax.mul(valid, lax.expand(lax.reshape(per_target, (1,)), (n,)))
    return lax.expand(lax.reshape(scale, (n, 1)), shape)


def _onehot(target, shape):
    """Bool ``(N, C)``: each row true at its target."""
    classes = lax.expand(
        _constant[0](np.arange(shape[1], dtype=target._payload.dtype)[None]), shape
    )
    return lax.eq(lax.expand(lax.reshape(target, (shape[0], 1)), shape), classes)


def cross_entropy_impl(logits, target, *, ignore_index):
    """The picked log_softmax values only: ``x[t] - lse``, rounded as log_softmax's."""
    valid, picked = _picked(logits, target, ignore_index)
    return _mean_nll(picked - _lse(logits, 1)[:, 0], valid, logits.dtype)


def _cross_entropy_dx_impl(g, logits, target, *, ignore_index):
    valid = target != ignore_index
    p = logits - _amax(logits, 1)
    np.exp(p, out=p)
    p /= _total(p, 1)
    p[np.arange(len(target)), np.where(valid, target, 0)] -= 1
    count = valid.sum(dtype=logits.dtype)
    p *= (valid * (g / count if count else np.zeros_like(g)))[:, None]  # none counted: 0
    return p


def _cross_entropy_dx_decomposed(g, logits, target, *, ignore_index):
    shape = _shape(logits)
    dtype = dt.from_numpy_dtype(logits._payload.dtype)
    e = lax.exp(
        lax.sub(logits, lax.expand(lax.bind("reduce_max", logits, dims=(1,), keepdim=True), shape))
    )
    p = lax.div(e, lax.expand(lax.sum(e, (1,), keepdim=True), shape))
    onehot = lax.cast(_onehot(target, shape), dtype)
    return lax.mul(lax.sub(p, onehot), _row_scale(g, target, ignore_index, shape, dtype))


cross_entropy_dx = Fused("cross_entropy_dx", _cross_entropy_dx_impl, _cross_entropy_dx_decomposed)
CROSS_ENTROPY_VJP = (
    lambda g, logits, target, ignore_index: cross_entropy_dx(
        g, logits, target, ignore_index=ignore_index
    ),
    None,
)


def nll_loss_impl(logp, target, *, ignore_index):
    valid, picked = _picked(logp, target, ignore_index)
    return _mean_nll(picked, valid, logp.dtype)


def _nll_loss_dx_impl(g, logp, target, *, ignore_index):
    valid = target != ignore_index
    count = valid.sum(dtype=logp.dtype)
    dx = np.zeros_like(logp, order="C")
    if count:  # none counted: zeros, not 0/0's NaN (torch's)
        rows = np.flatnonzero(valid)
        dx[rows, target[rows]] = -(g / count)
    return dx


def _nll_loss_dx_decomposed(g, logp, target, *, ignore_index):
    shape = _shape(logp)
    dtype = dt.from_numpy_dtype(logp._payload.dtype)
    scale = _row_scale(g, target, ignore_index, shape, dtype)
    return lax.where(_onehot(target, shape), lax.neg(scale), 0.0)


nll_loss_dx = Fused("nll_loss_dx", _nll_loss_dx_impl, _nll_loss_dx_decomposed)
NLL_LOSS_VJP = (
    lambda g, logp, target, ignore_index: nll_loss_dx(g, logp, target, ignore_index=ignore_index),
    None,
)


# --- huber and smooth_l1: a square near zero, a line beyond -------------------------------
def huber_impl(d, *, delta, quadratic, slope):
    """``quadratic * d^2 / 2`` where ``|d| < delta``, else ``slope * (|d| - delta / 2)``,
    rounded as the composite (``nn.functional._huber``): its numbers in ``d``'s dtype."""
    t = d.dtype.type
    z = np.abs(d)
    small = z < t(delta)
    line = z - t(0.5 * delta)
    line *= t(slope)
    square = d * d
    square *= t(0.5 * quadratic)
    return _select(small, square, line)


def _huber_dx_impl(g, d, *, delta, quadratic, slope):
    """``g * quadratic * d`` where ``|d| < delta``, else ``g * slope * sign(d)``: torch's
    huber and smooth_l1 backward (infinite ``d``: the line's slope; NaN stays NaN)."""
    t = d.dtype.type
    line = np.sign(d)
    line *= t(slope)
    dx = _select(np.abs(d) < t(delta), d * t(quadratic), line)
    dx *= g
    return dx


def _huber_dx_decomposed(g, d, *, delta, quadratic, slope):
    small = lax.lt(lax.abs(d), delta)
    return lax.mul(g, lax.where(small, lax.mul(d, quadratic), lax.mul(lax.sgn(d), slope)))


huber_dx = Fused("huber_dx", _huber_dx_impl, _huber_dx_decomposed)
HUBER_VJP = (
    lambda g, d, delta, quadratic, slope: huber_dx(
        g, d, delta=delta, quadratic=quadratic, slope=slope
    ),
)


# --- softplus: log(1 + exp(beta x)) / beta, x past the threshold ---------------------------
def softplus_impl(x, *, beta, threshold):
    """Rounded as the composite (``eager/ops/composite.softplus``): its numbers in ``x``'s
    dtype, the exp of 0 where the line is taken."""
    soft, line = _softplus_exp(x, beta, threshold)
    np.log1p(soft, out=soft)
    soft /= x.dtype.type(beta)
    return _select(line, x, soft)


def _softplus_exp(x, beta, threshold):
    """``exp(beta x)``, of 0 where ``beta x`` is past the threshold (no overflow there),
    and where that is."""
    t = x.dtype.type
    bx = np.asarray(x * t(beta))  # (an array for a 0-d x too)
    line = bx > t(threshold)
    bx[line] = 0
    return np.exp(bx, out=bx), line


def _softplus_dx_impl(g, x, *, beta, threshold):
    """torch's softplus_backward: ``g * z / (z + 1)`` with ``z = exp(beta x)``, ``g`` past
    the threshold."""
    z, line = _softplus_exp(x, beta, threshold)
    dx = g * z
    z += 1
    dx /= z
    return _select(line, np.broadcast_to(g, dx.shape), dx)


def _softplus_dx_decomposed(g, x, *, beta, threshold):
    bx = lax.mul(x, beta)
    line = lax.gt(bx, threshold)
    z = lax.exp(lax.where(line, 0.0, bx))  # (a zero cotangent meets no inf: no NaN)
    return lax.where(line, g, lax.div(lax.mul(g, z), lax.add(z, 1)))


softplus_dx = Fused("softplus_dx", _softplus_dx_impl, _softplus_dx_decomposed)
SOFTPLUS_VJP = (lambda g, x, beta, threshold: softplus_dx(g, x, beta=beta, threshold=threshold),)


# --- elu, selu, celu: a line above 0, a scaled expm1 below ------------------------------------
def elu_impl(x, *, alpha, scale, input_scale):
    """``scale x`` where ``x > 0``, else ``alpha scale expm1(input_scale x)``, rounded as
    the composite (``nn.functional._elu``): its expm1 of +0 where the line is taken."""
    t, pos = x.dtype.type, x > 0
    neg = _zero_where(pos, x)
    _scale(neg, t(input_scale))
    np.expm1(neg, out=neg)
    _scale(neg, t(alpha * scale))
    return _select(pos, x if scale == 1 else np.asarray(x * t(scale)), neg)


def _scale(a, c):
    """``a *= c``, skipped where ``c`` is 1 (ELU's usual scales; the same bits)."""
    if c != 1:
        a *= c


def _elu_dx_impl(g, x, *, alpha, scale, input_scale):
    """torch's elu_backward of the input: ``g scale`` above 0, else ``g alpha scale
    input_scale exp(input_scale x)``."""
    t, pos = x.dtype.type, x > 0
    neg = _zero_where(pos, x)
    _scale(neg, t(input_scale))
    np.exp(neg, out=neg)
    _scale(neg, t(alpha * scale * input_scale))
    neg *= g
    return _select(pos, g if scale == 1 else np.asarray(g * t(scale)), neg)


def _elu_dx_decomposed(g, x, *, alpha, scale, input_scale):
    pos = lax.gt(x, 0.0)
    e = lax.exp(lax.mul(lax.where(pos, 0.0, x), input_scale))
    neg = lax.mul(lax.mul(g, alpha * scale * input_scale), e)
    return lax.where(pos, lax.mul(g, scale), neg)


elu_dx = Fused("elu_dx", _elu_dx_impl, _elu_dx_decomposed)
ELU_VJP = (
    lambda g, x, alpha, scale, input_scale: elu_dx(
        g, x, alpha=alpha, scale=scale, input_scale=input_scale
    ),
)


# --- clamp by numbers ------------------------------------------------------------------------
def _bounds(x, lo, hi):
    t = x.dtype.type
    return (None if lo is None else t(lo)), (None if hi is None else t(hi))


def clamp_impl(x, *, min, max):
    """``x`` clamped to numbers (None: no bound) by np.clip, bit for bit the composite's
    selections (``eager/ops/elementwise._clamp``): NaN kept, a NaN bound everywhere, the
    upper bound where they cross, and at a bound of 0 a zero ``x`` itself (np.clip may
    give the bound's sign)."""
    lo, hi = _bounds(x, min, max)
    out = np.asarray(np.clip(x, lo, hi))
    if (lo == 0 or hi == 0) and not (lo is not None and hi is not None and lo > hi):
        np.copyto(out, x, where=x == 0)
    return out


def _inside(x, lo, hi):
    """Where ``lo <= x <= hi`` (False at NaN): where torch's clamp passes the gradient."""
    if lo is None:
        return x <= hi
    inside = x >= lo
    if hi is not None:
        inside &= x <= hi
    return inside


def _clamp_dx_impl(g, x, *, min, max):
    return _zero_where(~_inside(x, *_bounds(x, min, max)), g)


def _clamp_dx_decomposed(g, x, *, min, max):
    inside = lax.le(x, max) if min is None else lax.ge(x, min)
    if min is not None and max is not None:
        inside = lax.logical_and(inside, lax.le(x, max))
    return lax.where(inside, g, 0.0)


clamp_dx = Fused("clamp_dx", _clamp_dx_impl, _clamp_dx_decomposed)
CLAMP_VJP = (lambda g, x, min, max: clamp_dx(g, x, min=min, max=max),)


# --- the 2-norm along dims -------------------------------------------------------------------
def norm2_impl(x, *, dims, keepdim):
    """``sqrt(sum(x^2))`` of a real ``x`` by the composite's primitives' kernels
    (``eager/ops/reduction.norm``), so rounded as it is; its zero norm, sqrt(0), is the
    same +0."""
    return np.sqrt(REGISTRY["reduce_sum"].impl(x * x, dims=dims, keepdim=keepdim))


def _norm2_dx_impl(g, x, out, *, dims, keepdim):
    """torch's norm_backward: ``x * g / norm``, 0 where the norm is 0."""
    kept = reduced_shape(x.shape, dims, True)
    norm = out.reshape(kept)
    scale = np.divide(g.reshape(kept), norm, where=norm != 0, out=np.zeros(kept, x.dtype))
    return x * scale


def _norm2_dx_decomposed(g, x, out, *, dims, keepdim):
    shape = _shape(x)
    kept = reduced_shape(shape, dims, True)
    zero = lax.eq(out, 0.0)
    scale = lax.where(zero, 0.0, lax.div(g, lax.where(zero, 1.0, out)))
    return lax.mul(x, lax.broadcast_to(scale, shape, kept))


norm2_dx = Fused("norm2_dx", _norm2_dx_impl, _norm2_dx_decomposed)
NORM2_VJP = (lambda g, x, out, dims, keepdim: norm2_dx(g, x, out, dims=dims, keepdim=keepdim),)


# --- binary cross-entropy of logits, unreduced ------------------------------------------
def bce_with_logits_impl(x, y):
    """``(1 - y) x - logsigmoid(x)``, rounded as the composite (``nn.functional``'s
    ``_logsigmoid``: ``min(x, 0) - log1p(exp(-|x|))``, its branches' common form)."""
    low = _zero_where(x >= 0, x)  # +0 where x >= 0, as the composite's where
    e = np.negative(np.abs(x))
    np.exp(e, out=e)
    np.log1p(e, out=e)
    np.subtract(low, e, out=low)
    loss = 1 - y
    loss *= x
    loss -= low
    return loss


def _bce_with_logits_dx_impl(g, x, y):
    """torch's: ``g (sigmoid(x) - y)``."""
    dx = REGISTRY["sigmoid"].impl(x)
    dx -= y
    dx *= g
    return dx


def _bce_with_logits_dx_decomposed(g, x, y):
    return lax.mul(g, lax.sub(lax.bind("sigmoid", x), y))


bce_with_logits_dx = Fused(
    "bce_with_logits_dx", _bce_with_logits_dx_impl, _bce_with_logits_dx_decomposed
)
BCE_WITH_LOGITS_VJP = (
    lambda g, x, y: bce_with_logits_dx(g, x, y),
    lambda g, x: lax.mul(lax.neg(g), x),  # torch's: -g x
)


# --- softmax and log_softmax over one dim -------------------------------------------------
# Note [half softmax]: torch's CPU kernels of softmax and log_softmax compute a float16 or
# bfloat16 row in float32 and round where they store: softmax's result once, log_softmax's
# ``h((x - m) - h(log(h(s))))`` (``s`` the float32 sum of ``exp(x - m)``, ``h`` a rounding
# to the half type: the sum and its log are stored in a half buffer on the way), and their
# backward kernels take the half output: ``h((g - sum(g y)) y)`` and
# ``h(g - exp(y) sum(g))``, sums in float32. Computed in float32 from the unrounded output
# instead, a bfloat16 log_softmax was 25 % of values an ulp off torch's, its gradient 24 %.
def _half(a) -> bool:
    """A float16 or bfloat16 array."""
    return a.dtype.itemsize == 2


def softmax_impl(x, *, dim):
    if _half(x):  # Note [half softmax]
        return softmax_impl(x.astype(np.float32), dim=dim).astype(x.dtype)
    e = x - _amax(x, dim)
    np.exp(e, out=e)
    e /= e.sum(dim, keepdims=True)
    return e


def _lse(x, dim):
    """``m + log(sum(exp(x - m)))`` along ``dim`` (kept) with ``m`` the max."""
    m = _amax(x, dim)
    e = x - m
    np.exp(e, out=e)
    lse = np.log(e.sum(dim, keepdims=True))
    lse += m
    return lse


def log_softmax_impl(x, *, dim):
    """``x - (m + log(sum(exp(x - m))))`` with ``m`` the max, rounded as torch's kernel and
    the decomposition (``composite._log_softmax_decomposed``); an infinite max is not
    special-cased, so a row holding +inf (or only -inf) is NaN, as torch. Half types as
    torch's kernel rounds them (Note [half softmax])."""
    if _half(x):
        xf = x.astype(np.float32)
        shifted = xf - _amax(xf, dim)
        s = np.exp(shifted).sum(dim, keepdims=True)
        lse = np.log(s.astype(x.dtype).astype(np.float32)).astype(x.dtype)
        return (shifted - lse.astype(np.float32)).astype(x.dtype)
    return x - _lse(x, dim)


def _softmax_dx_impl(g, out, *, dim):
    if _half(out):  # Note [half softmax]
        gf, y = g.astype(np.float32), out.astype(np.float32)
        return ((gf - _total(gf * y, dim)) * y).astype(out.dtype)
    dx = g * out
    dx -= out * _total(dx, dim)
    return dx


def _softmax_dx_decomposed(g, out, *, dim):
    def dx(g, out):
        dot = lax.sum(lax.mul(g, out), (dim,), keepdim=True)
        return lax.mul(out, lax.sub(g, lax.expand(dot, _shape(out))))

    return _widened(dx, g, out)


def _log_softmax_dx_impl(g, out, *, dim):
    if _half(out):  # Note [half softmax]
        gf = g.astype(np.float32)
        return (gf - np.exp(out.astype(np.float32)) * _total(gf, dim)).astype(out.dtype)
    return g - np.exp(out) * _total(g, dim)


def _log_softmax_dx_decomposed(g, out, *, dim):
    def dx(g, out):
        total = lax.expand(lax.sum(g, (dim,), keepdim=True), _shape(out))
        return lax.sub(g, lax.mul(lax.exp(out), total))

    return _widened(dx, g, out)


softmax_dx = Fused("softmax_dx", _softmax_dx_impl, _softmax_dx_decomposed)
log_softmax_dx = Fused("log_softmax_dx", _log_softmax_dx_impl, _log_softmax_dx_decomposed)
SOFTMAX_VJP = (lambda g, out, dim: softmax_dx(g, out, dim=dim),)
LOG_SOFTMAX_VJP = (lambda g, out, dim: log_softmax_dx(g, out, dim=dim),)


def unit_slice(shape, dim, i) -> dict:
    """The ``slice`` (and ``slice_scatter``) parameters of entry ``i`` along ``dim`` of
    ``shape``, that dim kept."""
    return {
        "starts": tuple(i if d == dim else 0 for d in range(len(shape))),
        "stops": tuple(i + 1 if d == dim else n for d, n in enumerate(shape)),
        "steps": (1,) * len(shape),
    }


# --- stack: operands of one shape and dtype along a new dim (torch's StackBackward0) ---------
def stack_impl(*xs, dim):
    # along dim 0 NumPy's array() of them stacks in C: 2.5x np.stack's speed for a batch
    # of 64 rows of 784
    return np.array(xs, dtype=xs[0].dtype) if dim == 0 else np.stack(xs, axis=dim)


def stack_dx(g, i, dim):
    """Operand ``i``'s gradient: ``g``'s slice ``i`` along ``dim``, that dim dropped."""
    shape = g.shape
    piece = lax.bind("slice", g, **unit_slice(shape, dim, i))
    return lax.reshape(piece, shape[:dim] + shape[dim + 1 :])


# --- mean: the sum over dims divided by their count (torch's MeanBackward0/1) -------------
def _count(shape, dims) -> int:
    return math.prod(shape[d] for d in dims)


def mean_impl(x, *, dims, keepdim):
    s = REGISTRY["reduce_sum"].impl(x, dims=dims, keepdim=keepdim)
    return np.divide(s, np.array(_count(x.shape, dims), s.dtype))  # the composite's div


def _mean_dx_plain(g, *, shape, kept, n):
    return broadcast_back(np.divide(g, np.array(n, g.dtype)), shape, kept)


def mean_dx(g, x_aval, dims, keepdim):
    """``g / n`` broadcast back to ``x``'s shape (the composite's div and sum rules)."""
    shape, n = x_aval.shape, _count(x_aval.shape, dims)
    kept = reduced_shape(shape, dims, True)
    r = _plain[0](_mean_dx_plain, (g,), {"shape": shape, "kept": kept, "n": n})
    return r if r is not None else lax.broadcast_to(lax.div(g, n), shape, kept)


# --- select: x[i] along a dim, that dim dropped (a view; torch's SelectBackward0) ---------
def _entry(dim, index) -> tuple:
    return (slice(None),) * dim + (index, Ellipsis)  # (a 0-d view, never a NumPy scalar)


def select_impl(x, *, dim, index):
    return x[_entry(dim, index)]


def _select_dx_plain(g, *, shape, dim, index):
    dx = np.zeros(shape, g.dtype)
    dx[_entry(dim, index)] = g
    return dx


def select_dx(g, x_aval, dim, index):
    """The gradient of ``x``: ``g`` in a zero ``x`` at ``index`` along ``dim``."""
    shape = x_aval.shape
    r = _plain[0](_select_dx_plain, (g,), {"shape": shape, "dim": dim, "index": index})
    if r is not None:
        return r
    piece = lax.reshape(g, shape[:dim] + (1,) + shape[dim + 1 :])
    return lax.bind(
        "slice_scatter", lax.zeros_like(g, shape), piece, **unit_slice(shape, dim, index)
    )


# --- x at indices along a dim (max and min along a dim: torch's MaxBackward0) -------------
def _along(a, dim, keepdim):
    """``a`` (of the reduced shape) with ``dim`` kept, for take/put_along_axis."""
    return a if keepdim else np.expand_dims(a, dim)


def pick_impl(x, idx, *, dim, keepdim):
    """``x`` at ``idx`` along ``dim`` (``idx`` of ``x``'s shape reduced along it)."""
    v = np.take_along_axis(x, _along(idx, dim, keepdim), dim)
    return v if keepdim else v.squeeze(dim)


def _pick_dx_plain(g, idx, *, shape, dim, keepdim):
    dx = np.zeros(shape, g.dtype)
    np.put_along_axis(dx, _along(idx, dim, keepdim), _along(g, dim, keepdim), dim)
    return dx


def pick_dx(g, idx, x_aval, dim, keepdim):
    """The gradient of ``x``: ``g`` at ``idx`` along ``dim`` in zeros (torch's
    value_selecting_reduction_backward; ``x`` itself is not saved)."""
    shape = x_aval.shape
    params = {"shape": shape, "dim": dim, "keepdim": keepdim}
    r = _plain[0](_pick_dx_plain, (g, idx), params)
    if r is not None:
        return r
    kept = shape[:dim] + (1,) + shape[dim + 1 :]
    zeros = lax.zeros_like(g, shape)
    return lax.bind("scatter_add", zeros, lax.reshape(idx, kept), lax.reshape(g, kept), dim=dim)


PICK_VJP = (lambda g, idx, x_aval, dim, keepdim: pick_dx(g, idx, x_aval, dim, keepdim), None)


# --- the LSTM cell: gates (N, 4H) = W_ih x + b_ih + W_hh h + b_hh and c (N, H) in; h' and c'
# stacked (2, N, H) out (nn.LSTM's step, ``_lstm`` in nn/modules/rnn.py) ----------------------
def _sigmoid(x):
    return REGISTRY["sigmoid"].impl(x)


def _lstm_gates(gates, c):
    """(sigmoid i, sigmoid f, tanh g, sigmoid o, c', tanh c') of the NumPy operands, each
    rounded as the composite's primitives round it."""
    h = c.shape[-1]
    i, f, g, o = (gates[:, k * h : (k + 1) * h] for k in range(4))
    si, sf, tg, so = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
    c2 = sf * c + si * tg
    return si, sf, tg, so, c2, np.tanh(c2)


def lstm_cell_impl(gates, c):
    _, _, _, so, c2, tc = _lstm_gates(gates, c)
    return np.stack([so * tc, c2])


def _lstm_total_dc(g, so, tc):
    """The cotangent reaching c': its own plus h''s through tanh."""
    return g[1] + g[0] * so * (1 - tc * tc)


def _lstm_cell_dgates_impl(g, gates, c):
    si, sf, tg, so, _, tc = _lstm_gates(gates, c)
    dc = _lstm_total_dc(g, so, tc)
    return np.concatenate(
        [dc * tg * si * (1 - si), dc * c * sf * (1 - sf), dc * si * (1 - tg * tg)]
        + [g[0] * tc * so * (1 - so)],
        axis=1,
    )


def _lstm_cell_dc_impl(g, gates, c):
    _, sf, _, so, _, tc = _lstm_gates(gates, c)
    return _lstm_total_dc(g, so, tc) * sf


def _lax_lstm_gates(gates, c):
    n, h = _shape(c)
    i, f, g, o = (
        lax.bind("slice", gates, starts=(0, k * h), stops=(n, (k + 1) * h), steps=(1, 1))
        for k in range(4)
    )
    si, sf, so = (lax.bind("sigmoid", v) for v in (i, f, o))
    tg = lax.bind("tanh", g)
    c2 = lax.add(lax.mul(sf, c), lax.mul(si, tg))
    return si, sf, tg, so, lax.bind("tanh", c2)


def _lax_total_dc(g, so, tc):
    n, h = _shape(tc)
    gh, gc = (
        lax.reshape(
            lax.bind("slice", g, starts=(k, 0, 0), stops=(k + 1, n, h), steps=(1, 1, 1)), (n, h)
        )
        for k in range(2)
    )
    return gh, lax.add(gc, lax.mul(lax.mul(gh, so), lax.sub(1.0, lax.mul(tc, tc))))


def _lstm_cell_dgates_decomposed(g, gates, c):
    si, sf, tg, so, tc = _lax_lstm_gates(gates, c)
    gh, dc = _lax_total_dc(g, so, tc)

    def dsig(s):
        return lax.mul(s, lax.sub(1.0, s))

    parts = (
        lax.mul(lax.mul(dc, tg), dsig(si)),
        lax.mul(lax.mul(dc, c), dsig(sf)),
        lax.mul(lax.mul(dc, si), lax.sub(1.0, lax.mul(tg, tg))),
        lax.mul(lax.mul(gh, tc), dsig(so)),
    )
    h = _shape(c)[1]
    return lax.bind("concat", *parts, dim=1, sizes=(h,) * 4)


def _lstm_cell_dc_decomposed(g, gates, c):
    _, sf, _, so, tc = _lax_lstm_gates(gates, c)
    return lax.mul(_lax_total_dc(g, so, tc)[1], sf)


lstm_cell_dgates = Fused("lstm_cell_dgates", _lstm_cell_dgates_impl, _lstm_cell_dgates_decomposed)
lstm_cell_dc = Fused("lstm_cell_dc", _lstm_cell_dc_impl, _lstm_cell_dc_decomposed)
LSTM_CELL_VJP = (
    lambda g, gates, c: lstm_cell_dgates(g, gates, c),
    lambda g, gates, c: lstm_cell_dc(g, gates, c),
)


# --- the GRU cell: gi = W_ih x + b_ih and gh = W_hh h + b_hh (N, 3H), h (N, H) in; h' out ----
def _gru_gates(gi, gh, h):
    """(r, z, n, W_hn h + b_hn) of the NumPy operands, rounded as the composite's."""
    k = h.shape[-1]
    ir, iz, in_ = (gi[:, j * k : (j + 1) * k] for j in range(3))
    hr, hz, hn = (gh[:, j * k : (j + 1) * k] for j in range(3))
    r, z = _sigmoid(ir + hr), _sigmoid(iz + hz)
    return r, z, np.tanh(in_ + r * hn), hn


def gru_cell_impl(gi, gh, h):
    _, z, n, _ = _gru_gates(gi, gh, h)
    return n + z * (h - n)


def _gru_cell_d_impl(g, gi, gh, h, *, which):
    r, z, n, hn = _gru_gates(gi, gh, h)
    if which == "h":
        return g * z
    dn = g * (1 - z) * (1 - n * n)
    dr = dn * hn * r * (1 - r)
    dz = g * (h - n) * z * (1 - z)
    return np.concatenate([dr, dz, dn if which == "gi" else dn * r], axis=1)


def _gru_cell_d_decomposed(g, gi, gh, h, *, which):
    n_, k = _shape(h)

    def chunks(t):
        return [
            lax.bind("slice", t, starts=(0, j * k), stops=(n_, (j + 1) * k), steps=(1, 1))
            for j in range(3)
        ]

    (ir, iz, in_), (hr, hz, hn) = chunks(gi), chunks(gh)
    r, z = lax.bind("sigmoid", lax.add(ir, hr)), lax.bind("sigmoid", lax.add(iz, hz))
    if which == "h":
        return lax.mul(g, z)
    n = lax.bind("tanh", lax.add(in_, lax.mul(r, hn)))
    dn = lax.mul(lax.mul(g, lax.sub(1.0, z)), lax.sub(1.0, lax.mul(n, n)))
    dr = lax.mul(lax.mul(dn, hn), lax.mul(r, lax.sub(1.0, r)))
    dz = lax.mul(lax.mul(g, lax.sub(h, n)), lax.mul(z, lax.sub(1.0, z)))
    last = dn if which == "gi" else lax.mul(dn, r)
    return lax.bind("concat", dr, dz, last, dim=1, sizes=(k,) * 3)


gru_cell_d = Fused("gru_cell_d", _gru_cell_d_impl, _gru_cell_d_decomposed)
GRU_CELL_VJP = (
    lambda g, gi, gh, h: gru_cell_d(g, gi, gh, h, which="gi"),
    lambda g, gi, gh, h: gru_cell_d(g, gi, gh, h, which="gh"),
    lambda g, gi, gh, h: gru_cell_d(g, gi, gh, h, which="h"),
)
