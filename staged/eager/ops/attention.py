"""scaled_dot_product_attention, composed: matmuls, masks and a softmax that gives fully
masked rows 0 (PyTorch's math kernel, ``_safe_softmax``)."""

from __future__ import annotations

import math

from ... import dtypes as dt
from ...autodiff.avals import wrap_dim
from . import elementwise as ew
from ._operands import half, in_float32
from .composite import softmax
from .layers import dropout
from .linalg import matmul
from .shape import repeat_interleave, transpose, triangle_mask

_C_NAMES = {"float32": "float", "float64": "double", "int64": "long int", "bool": "bool"}


def _c_name(d):
    return _C_NAMES.get(d.name, d.name)


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """``softmax(q k^T * scale + mask) v``, the mask from ``attn_mask`` (bool: where to
    attend; float: added) and ``is_causal`` (both may be given); ``enable_gqa`` repeats
    each key/value head for its group of query heads; ``dropout_p`` drops attention
    weights (always, as torch: pass 0 in eval)."""
    q, k, v = query, key, value
    if min(q.ndim, k.ndim, v.ndim) < 2:
        raise RuntimeError(
            f"Expected query, key, and value to all be  at least 2 dimensional, "
            f"but got query.dim: {q.ndim} key.dim: {k.ndim} and value.dim: "
            f"{v.ndim} instead."
        )
    if not q.dtype is k.dtype is v.dtype:
        raise RuntimeError(
            f"Expected query, key, and value to have the same dtype, but got "
            f"query.dtype: {_c_name(q.dtype)} key.dtype: {_c_name(k.dtype)} and "
            f"value.dtype: {_c_name(v.dtype)} instead."
        )
    if (
        attn_mask is not None
        and attn_mask.dtype not in (dt.bool_, q.dtype)
        and not attn_mask.dtype.is_floating_point
    ):
        raise RuntimeError(
            f"Expected attn_mask dtype to be bool or float or to match query "
            f"dtype, but got attn_mask.dtype: {_c_name(attn_mask.dtype)} and  "
            f"query.dtype: {_c_name(q.dtype)} instead."
        )
    if not 0 <= dropout_p <= 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if enable_gqa:
        heads, kv_heads = q.shape[wrap_dim(-3, q.ndim)], k.shape[wrap_dim(-3, k.ndim)]
        if heads % kv_heads or heads % v.shape[-3]:
            raise RuntimeError(
                "Number of heads in key and value must divide the number of heads in "
            )
        k = repeat_interleave(k, heads // kv_heads, -3)
        v = repeat_interleave(v, heads // v.shape[-3], -3)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    if half(q, k, v):  # torch's fused CPU kernel: in float32, the output rounded once
        return in_float32(_attend, q, k, v, attn_mask, dropout_p, is_causal, scale)
    return _attend(q, k, v, attn_mask, dropout_p, is_causal, scale)


def _attend(q, k, v, attn_mask, dropout_p, is_causal, scale):
    scores = matmul(q, transpose(k, -2, -1)) * scale
    if is_causal:
        scores = ew.where(triangle_mask(q.shape[-2], k.shape[-2]), scores, float("-inf"))
    if attn_mask is not None:
        scores = (
            ew.where(attn_mask, scores, float("-inf"))
            if attn_mask.dtype is dt.bool_
            else scores + attn_mask
        )
    if not scores.shape[-1]:  # no keys: zeros
        return matmul(scores, v)
    # a row masked everywhere: scores 0 into the softmax (finite gradients), weights 0 out
    masked = ew.eq(scores.amax(-1, keepdim=True), float("-inf"))
    weights = ew.where(masked, 0.0, softmax(ew.where(masked, 0.0, scores), -1))
    if dropout_p > 0:
        weights = dropout(weights, dropout_p)
    return matmul(weights, v)
