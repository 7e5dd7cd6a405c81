"""Batching rules for ``vmap``, one per primitive (JAX's ``batching.py``, functorch's
BatchRulesXXX): a rule gets the physical operands, each with its batch dim (``None``: not
batched), and binds the primitive once on the whole batch.

A rule is ``rule(size, args, bdims, **params) -> (out, out_bdim)``: ``size`` is the batch
size, ``args`` the physical Tensors (a batched one has one more dim than the logical
tensor, at its ``bdim``), ``params`` the primitive's static parameters. Rules are written
with primitives, so they run eagerly, record under capture and differentiate; at least one
operand is batched when a rule runs (vmap binds the primitive itself otherwise).

The eager Fused kernels (``linear``, ``cross_entropy``, ``softmax`` ... and their backward
kernels; Note [fused kernels] in ``eager/dispatch.py``) have rules too (``FUSED_RULES``):
with them a per-example gradient binds about the kernels a batched backward binds
(``linear_dw`` is one batched matmul of outer products) instead of their decompositions'
primitives, each batched (linear: five forward, eight backward). They run eagerly only (a
capture decomposes the kernel first); one may return ``NotImplemented`` for operands it is
not written for (a batched weight), and vmap then binds the kernel's decomposition.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from .. import autodiff as ad
from .. import dtypes as dt
from ..autodiff import lax
from ..eager.tensor import Tensor

RULES = {}  # Primitive -> rule
# primitives vmap refuses, with why (the registry test wants a rule or a reason for each)
UNSUPPORTED = {ad.uniform: "a draw is made by vmap itself, following its `randomness`"}


def move(x, src, dst):
    """``x`` with its dim ``src`` moved to ``dst`` (a view)."""
    if src == dst:
        return x
    perm = list(range(len(x._payload.shape)))
    perm.insert(dst, perm.pop(src))
    return ad.permute(x, perm=tuple(perm))


def to_batch(x, bdim, size, dst=0):
    """``x`` with its batch dim at ``dst``; an unbatched ``x`` is broadcast (a view)."""
    if bdim is not None:
        return move(x, bdim, dst)
    shape = tuple(x._payload.shape)
    x = ad.reshape(x, shape=shape[:dst] + (1,) + shape[dst:])
    return ad.expand(x, shape=shape[:dst] + (size,) + shape[dst:])


def _physical(d, bdim):
    """The physical dim of logical dim ``d`` beside a batch dim at ``bdim``."""
    return d + (d >= bdim)


def _insert(t, at, v):
    return t[:at] + (v,) + t[at:]


# --- elementwise ---------------------------------------------------------------------------
def _elementwise(prim):
    # operands share one logical shape: line the batched ones up on the first one's batch
    # dim and broadcast the others there
    def rule(size, args, bdims, **params):
        at = bdims[0]
        if all(b == at for b in bdims):  # one operand, or all batched at one dim
            return prim(*args, **params), at
        at = next(b for b in bdims if b is not None)
        return prim(*(to_batch(x, b, size, at) for x, b in zip(args, bdims)), **params), at

    return rule


# the module (``ad.elementwise`` is its declarator function, star-imported over it)
for _p in vars(sys.modules[ad.__name__ + ".elementwise"]).values():
    if isinstance(_p, ad.Primitive):
        RULES[_p] = _elementwise(_p)
RULES[ad.barrier] = _elementwise(ad.barrier)


# --- reductions and scans along dims -------------------------------------------------------
def _reduce(prim):
    def rule(size, args, bdims, *, dims, keepdim):
        (x,), (b,) = args, bdims
        out_b = b if keepdim else b - sum(d < b for d in dims)
        return prim(x, dims=tuple(_physical(d, b) for d in dims), keepdim=keepdim), out_b

    return rule


def _along(prim, keeps_rank):
    def rule(size, args, bdims, *, dim, **params):
        (x,), (b,) = args, bdims
        out_b = b if keeps_rank(params) or dim >= b else b - 1  # dim, b's logical dim
        return prim(x, dim=_physical(dim, b), **params), out_b

    return rule


for _p in (ad.reduce_sum, ad.reduce_prod, ad.reduce_max, ad.reduce_min):
    RULES[_p] = _reduce(_p)
for _p in (ad.argmax, ad.argmin):
    RULES[_p] = _along(_p, lambda params: params["keepdim"])
for _p in (ad.cumsum, ad.argsort):
    RULES[_p] = _along(_p, lambda params: True)


# --- matmul --------------------------------------------------------------------------------
def _matmul_rule(size, args, bdims):
    (a, b), (ba, bb) = args, bdims
    if bb is None and b.ndim == 2:  # a batch of left operands against one matrix: one GEMM
        a = move(a, ba, 0)
        lead = tuple(a.shape[:-1])
        flat = ad.reshape(a, shape=(math.prod(lead), a.shape[-1]))
        return ad.reshape(ad.matmul(flat, b), shape=lead + (b.shape[-1],)), 0
    if ba is None:  # one left operand against a batch: (..., k, B*n), one GEMM per matrix
        b = move(b, bb, b.ndim - 2)
        shape = tuple(b.shape)
        flat = ad.reshape(b, shape=shape[:-3] + (shape[-3], size * shape[-1]))
        out = ad.matmul(a, flat)
        return ad.reshape(out, shape=tuple(out.shape[:-1]) + (size, shape[-1])), a.ndim - 1
    return ad.matmul(to_batch(a, ba, size), to_batch(b, bb, size)), 0


RULES[ad.matmul] = _matmul_rule


# --- shape ---------------------------------------------------------------------------------
def _reshape_rule(size, args, bdims, *, shape):
    return ad.reshape(move(args[0], bdims[0], 0), shape=(size,) + tuple(shape)), 0


def _strided_rule(size, args, bdims, *, shape, strides, offset):
    """Example ``b`` reads its own ``n`` entries: the batch is one more dim of stride n."""
    x = move(args[0], bdims[0], 0)
    n = math.prod(x.shape[1:])
    return ad.strided(x, shape=(size, *shape), strides=(n, *strides), offset=offset), 0


RULES[ad.strided] = _strided_rule


def _expand_rule(size, args, bdims, *, shape):
    (x,), (b,) = args, bdims
    return ad.expand(x, shape=_insert(tuple(shape), b, size)), b


def _permute_rule(size, args, bdims, *, perm):
    (x,), (b,) = args, bdims
    return ad.permute(x, perm=(b,) + tuple(_physical(p, b) for p in perm)), 0


def _concat_rule(size, args, bdims, *, dim, sizes):
    xs = (to_batch(x, b, size) for x, b in zip(args, bdims))
    return ad.concat(*xs, dim=dim + 1, sizes=sizes), 0


def _view_as_complex_rule(size, args, bdims):
    (x,), (b,) = args, bdims
    if b == x.ndim - 1:  # the batch dim is where the pairs are: move it out of the way
        x, b = move(x, b, 0), 0
    return ad.view_as_complex(x), b


def _view_dtype_rule(size, args, bdims, *, dtype):
    (x,), (b,) = args, bdims
    if b == x.ndim - 1 and x.dtype.itemsize != dtype.itemsize:  # the last dim is rescaled
        x, b = move(x, b, 0), 0
    return ad.view_dtype(x, dtype=dtype), b


RULES.update(
    {
        ad.reshape: _reshape_rule,
        ad.expand: _expand_rule,
        ad.permute: _permute_rule,
        ad.concat: _concat_rule,
        ad.view_as_real: lambda size, args, bdims: (ad.view_as_real(args[0]), bdims[0]),
        ad.view_as_complex: _view_as_complex_rule,
        ad.view_dtype: _view_dtype_rule,
    }
)


# --- indexing ------------------------------------------------------------------------------
def _slice_rule(size, args, bdims, *, starts, stops, steps):
    (x,), (b,) = args, bdims
    return ad.slice(
        x, starts=_insert(starts, b, 0), stops=_insert(stops, b, size), steps=_insert(steps, b, 1)
    ), b


def _slice_scatter_rule(size, args, bdims, *, starts, stops, steps):
    x, src = (to_batch(x, b, size) for x, b in zip(args, bdims))
    return ad.slice_scatter(
        x, src, starts=(0,) + starts, stops=(size,) + stops, steps=(1,) + steps
    ), 0


def _on_dim(prim):
    """Operands that share a rank and a ``dim`` (gather, the scatters)."""

    def rule(size, args, bdims, *, dim, **params):
        return prim(*(to_batch(x, b, size) for x, b in zip(args, bdims)), dim=dim + 1, **params), 0

    return rule


def _check_rule(size, args, bdims, **params):
    # one report for the whole batch: the entry furthest out of range
    (report,), (b,) = args, bdims
    return ad.check(ad.reduce_max(report, dims=(b,), keepdim=False), **params), None


RULES.update(
    {
        ad.slice: _slice_rule,
        ad.slice_scatter: _slice_scatter_rule,
        ad.gather: _on_dim(ad.gather),
        ad.scatter: _on_dim(ad.scatter),
        ad.scatter_add: _on_dim(ad.scatter_add),
        ad.scatter_reduce: _on_dim(ad.scatter_reduce),
        ad.check: _check_rule,
    }
)


# --- sliding windows: the batch joins the leading (N) dim -----------------------------------
def _windows(prim):
    def rule(size, args, bdims, **params):
        x = move(args[0], bdims[0], 0)
        shape = tuple(x.shape)
        out = prim(ad.reshape(x, shape=(size * shape[1],) + shape[2:]), **params)
        return ad.reshape(out, shape=(size, shape[1]) + tuple(out.shape[1:])), 0

    return rule


RULES.update({ad.im2col: _windows(ad.im2col), ad.col2im: _windows(ad.col2im)})


# --- collectives: elementwise over ranks, or along a leading dim of ranks -------------------
def _all_gather_rule(size, args, bdims, *, world):
    return ad.all_gather(args[0], world=world), bdims[0] + 1


def _reduce_scatter_rule(size, args, bdims, **params):
    return ad.reduce_scatter(move(args[0], bdims[0], 1), **params), 0


RULES.update(
    {
        ad.all_reduce: _elementwise(ad.all_reduce),
        ad.broadcast: _elementwise(ad.broadcast),
        ad.all_gather: _all_gather_rule,
        ad.reduce_scatter: _reduce_scatter_rule,
    }
)


# --- Fused eager kernels (Note [fused kernels] in eager/dispatch.py) ------------------------
FUSED_RULES = {}  # kernel name -> rule (by name: cross_entropy is declared above autograd)


def _rows(x, b):
    """``x`` batched at ``b`` as ``(batch, rows, features)``: its leading dims joined."""
    x = move(x, b, 0)
    shape = tuple(x._payload.shape)
    rows = (shape[0], math.prod(shape[1:-1]), shape[-1])
    return x if shape == rows else ad.reshape(x, shape=rows)


def _linear_rule(name):
    at = ad.FUSED[name].inputs.index("x")  # linear's operands are (bias, x, weight)

    def rule(size, args, bdims):
        # a batch of inputs through one layer (its weights not batched): one kernel
        if any(b is not None for i, b in enumerate(bdims) if i != at):
            return NotImplemented
        args = list(args)
        args[at] = move(args[at], bdims[at], 0)
        return ad.FUSED[name](*args), 0

    return rule


def _linear_dx_rule(size, args, bdims, *, shape):
    (g, w), (bg, bw) = args, bdims
    if bw is not None:
        return NotImplemented
    return ad.FUSED["linear_dx"](move(g, bg, 0), w, shape=(size,) + tuple(shape)), 0


def _linear_dw_rule(size, args, bdims):
    # per-example weight gradients: g's rows against x's, one batched matmul (a batch of
    # outer products, written once, for one row each)
    (g, x), (bg, bx) = args, bdims
    if bg is None or bx is None:
        return NotImplemented
    g = _rows(g, bg)
    return ad.matmul(ad.permute(g, perm=(0, 2, 1)), _rows(x, bx)), 0


def _fused_along(name):
    """Kernels of operands of one shape along one ``dim`` (softmax and its gradients)."""

    def rule(size, args, bdims, *, dim):
        at = next(b for b in bdims if b is not None)
        xs = (to_batch(x, b, size, at) for x, b in zip(args, bdims))
        return ad.FUSED[name](*xs, dim=_physical(dim, at)), at

    return rule


def _per_example(size, args, bdims):
    """Cross entropy's logits as ``(batch, rows, classes)``, its targets as ``(batch,
    rows)``."""
    return (to_batch(a, b, size) for a, b in zip(args[-2:], bdims[-2:]))


def _row_sums(a):
    return ad.reduce_sum.impl(a, dims=(1,), keepdim=False)  # rounded as the decomposition's


def _per_example_ce_impl(x, t, *, ignore_index):
    valid = t != ignore_index
    logp = ad.FUSED["log_softmax"].impl(x, dim=2)
    picked = np.take_along_axis(logp, np.where(valid, t, 0)[..., None], 2)[..., 0]
    return _row_sums(np.where(valid, -picked, 0.0)) / _row_sums(valid.astype(x.dtype))


def _per_example_ce_decomposed(x, t, *, ignore_index):
    size, n = x._payload.shape[:2]
    dtype = dt.from_numpy_dtype(x._payload.dtype)
    valid = lax.ne(t, ignore_index)
    index = lax.reshape(lax.where(valid, t, 0), (size, n, 1))
    picked = lax.reshape(ad.gather(ad.FUSED["log_softmax"](x, dim=2), index, dim=2), (size, n))
    total = lax.sum(lax.where(valid, lax.neg(picked), 0.0), (1,))
    return lax.div(total, lax.sum(lax.cast(valid, dtype), (1,)))


def _per_example_ce_dx_impl(g, x, t, *, ignore_index):
    valid = (t != ignore_index).astype(x.dtype)
    count = _row_sums(valid)
    empty = count == 0.0
    per_target = np.where(empty, 0.0, g / np.where(empty, 1.0, count))
    hit = t[..., None] == np.arange(x.shape[2], dtype=t.dtype)
    d = ad.FUSED["softmax"].impl(x, dim=2) - hit.astype(x.dtype)
    return d * (valid * per_target[:, None])[..., None]


def _per_example_ce_dx_decomposed(g, x, t, *, ignore_index):
    shape = tuple(x._payload.shape)
    size, n, c = shape
    dtype = dt.from_numpy_dtype(x._payload.dtype)
    classes = Tensor._wrap(np.arange(c, dtype=t._payload.dtype).reshape(1, 1, c), False)
    hit = lax.eq(lax.expand(lax.reshape(t, (size, n, 1)), shape), lax.expand(classes, shape))
    valid = lax.cast(lax.ne(t, ignore_index), dtype)
    count = lax.sum(valid, (1,))
    empty = lax.eq(count, 0.0)
    per_target = lax.where(empty, 0.0, lax.div(g, lax.where(empty, 1.0, count)))
    scale = lax.mul(valid, lax.expand(lax.reshape(per_target, (size, 1)), (size, n)))
    d = lax.sub(ad.FUSED["softmax"](x, dim=2), lax.cast(hit, dtype))
    return lax.mul(d, lax.expand(lax.reshape(scale, (size, n, 1)), shape))


# each example's cross entropy of its (rows, classes) logits, and its logits' gradient
_per_example_ce = ad.Fused(
    "per_example_cross_entropy", _per_example_ce_impl, _per_example_ce_decomposed
)
_per_example_ce_dx = ad.Fused(
    "per_example_cross_entropy_dx", _per_example_ce_dx_impl, _per_example_ce_dx_decomposed
)


def _cross_entropy_rule(size, args, bdims, *, ignore_index):
    # the kernel's mean is over all rows: here each example's is over its own
    x, t = _per_example(size, args, bdims)
    return _per_example_ce(x, t, ignore_index=ignore_index), 0


def _cross_entropy_dx_rule(size, args, bdims, *, ignore_index):
    # softmax - one-hot, times each example's g over its count of targets (0 for none)
    x, t = _per_example(size, args, bdims)
    g = to_batch(args[0], bdims[0], size)
    return _per_example_ce_dx(g, x, t, ignore_index=ignore_index), 0


FUSED_RULES.update(
    {
        "cross_entropy": _cross_entropy_rule,
        "cross_entropy_dx": _cross_entropy_dx_rule,
        "linear": _linear_rule("linear"),
        "linear_no_bias": _linear_rule("linear_no_bias"),
        "linear_dx": _linear_dx_rule,
        "linear_dw": _linear_dw_rule,
        **{n: _fused_along(n) for n in ("softmax", "log_softmax", "softmax_dx", "log_softmax_dx")},
    }
)
