"""``multi_head_attention_forward``: PyTorch's functional multi-head attention, which
``nn.MultiheadAttention`` calls. With ``need_weights`` the scores are softmaxed as they
are (a query row that may attend to no key gives NaN, as torch's); without, the heads go
through ``scaled_dot_product_attention`` (that row gives 0, and ``is_causal`` without a
key padding mask replaces ``attn_mask`` by the causal mask, as torch's)."""

from __future__ import annotations

import math

from ..eager.factories import zeros
from ..eager.ops.attention import scaled_dot_product_attention
from ..eager.ops.composite import softmax
from ..eager.ops.layers import dropout, pad
from ..eager import autocast
from ..eager.ops.linalg import baddbmm, bmm, linear
from ..eager.ops.shape import cat


def _additive_mask(mask, dtype, name):
    """A float mask to add to the scores: a bool mask becomes -inf where True."""
    if mask is None or mask.dtype.is_floating_point:
        return mask if mask is None else mask.to(dtype)
    if mask.dtype.name != "bool":
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return zeros(*mask.shape, dtype=dtype).masked_fill(mask, float("-inf"))


def _check_static(static, rows, head_dim, name):
    if static is not None:
        for i, want in ((0, rows), (2, head_dim)):
            if static.shape[i] != want:
                raise AssertionError(
                    f"expecting {name}.size({i}) of {want}, but got {static.shape[i]}"
                )


def multi_head_attention_forward(
    query,
    key,
    value,
    embed_dim_to_check,
    num_heads,
    in_proj_weight,
    in_proj_bias,
    bias_k,
    bias_v,
    add_zero_attn,
    dropout_p,
    out_proj_weight,
    out_proj_bias,
    training=True,
    key_padding_mask=None,
    need_weights=True,
    attn_mask=None,
    use_separate_proj_weight=False,
    q_proj_weight=None,
    k_proj_weight=None,
    v_proj_weight=None,
    static_k=None,
    static_v=None,
    average_attn_weights=True,
    is_causal=False,
):
    """Attention of ``query`` ``(L, N, E)`` (unbatched ``(L, E)``) over ``key``/``value``
    ``(S, N, E)`` in ``num_heads`` heads, as ``torch.nn.functional.
    multi_head_attention_forward``: projected by ``in_proj_weight`` (or the three
    ``q/k/v_proj_weight`` with ``use_separate_proj_weight``), ``static_k``/``static_v``
    ``(N * num_heads, S, E / num_heads)`` replacing the projected keys/values, then by
    ``out_proj_weight``. Returns ``(output, weights)``, weights ``(N, L, S)`` averaged over
    heads (``(N, num_heads, L, S)`` unless ``average_attn_weights``) or None without
    ``need_weights``."""
    batched = query.ndim == 3
    if not batched:
        query, key, value = (t.unsqueeze(1) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, e = query.shape
    src_len, h = key.shape[0], num_heads
    pad_mask = _additive_mask(key_padding_mask, query.dtype, "key_padding_mask")
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. You may use "
            "the Transformer module method `generate_square_subsequent_mask` "
            "to create this mask."
        )
    if is_causal and pad_mask is None and not need_weights:
        mask = None  # the hint stands for the mask: scaled_dot_product_attention's causal one
    else:
        mask = _additive_mask(attn_mask, query.dtype, "attn_mask")
        is_causal = is_causal and pad_mask is None
    if e != embed_dim_to_check:
        raise AssertionError(
            f"was expecting embedding dimension of {embed_dim_to_check}, but got {e}"
        )
    hd = e // h
    if hd * h != e:
        raise AssertionError(f"embed_dim {e} not divisible by num_heads {h}")
    if use_separate_proj_weight:
        ws = (q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        ws = tuple(in_proj_weight[i * e : (i + 1) * e] for i in range(3))
    bs = (None,) * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
    q, k, v = (linear(x, w, b) for x, w, b in zip((query, key, value), ws, bs))
    if mask is not None:
        if mask.ndim == 2:
            if tuple(mask.shape) != (tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 2D attn_mask is {mask.shape}, "
                    f"but should be {(tgt_len, src_len)}."
                )
            mask = mask.unsqueeze(0)
        elif tuple(mask.shape) != (bsz * h, tgt_len, src_len):
            raise RuntimeError(
                f"The shape of the 3D attn_mask is {mask.shape}, "
                f"but should be {(bsz * h, tgt_len, src_len)}."
            )
    if bias_k is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key or value.")
        k = cat([k, bias_k.expand(1, bsz, e)])
        v = cat([v, bias_v.expand(1, bsz, e)])
    q = q.reshape(tgt_len, bsz * h, hd).transpose(0, 1)
    _check_static(static_k, bsz * h, hd, "static_k")
    _check_static(static_v, bsz * h, hd, "static_v")
    k = k.reshape(k.shape[0], bsz * h, hd).transpose(0, 1) if static_k is None else static_k
    v = v.reshape(v.shape[0], bsz * h, hd).transpose(0, 1) if static_v is None else static_v
    if add_zero_attn:
        k, v = (cat([x, zeros(bsz * h, 1, hd, dtype=x.dtype)], 1) for x in (k, v))
    # the appended keys are allowed by both masks
    mask, pad_mask = (
        m if m is None else pad(m, (0, k.shape[1] - src_len)) for m in (mask, pad_mask)
    )
    src_len = k.shape[1]
    if pad_mask is not None:
        for i, want in enumerate((bsz, src_len)):
            if pad_mask.shape[i] != want:
                raise AssertionError(
                    f"Expected key_padded_mask.shape[{i}] to be {want}, but got {pad_mask.shape[i]}"
                )
        pad_mask = (
            pad_mask.reshape(bsz, 1, 1, src_len)
            .expand(bsz, h, 1, src_len)
            .reshape(bsz * h, 1, src_len)
        )
        mask = pad_mask if mask is None else mask + pad_mask
    if not training:
        dropout_p = 0.0
    if need_weights:
        q = q * math.sqrt(1.0 / hd)
        scores = bmm(q, k.mT) if mask is None else baddbmm(mask, q, k.mT)
        weights = softmax(scores, -1)
        if dropout_p > 0.0:
            weights = dropout(weights, dropout_p)
        out = bmm(weights, v).transpose(0, 1).reshape(tgt_len * bsz, e)
        weights = weights.reshape(bsz, h, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(1)
    else:
        if mask is not None:
            mask = mask.unsqueeze(0) if mask.shape[0] == 1 else mask.reshape(bsz, h, -1, src_len)
        q, k, v = (x.reshape(bsz, h, x.shape[1], hd) for x in (q, k, v))
        out = scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal)
        out, weights = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, e), None
    out = linear(out, out_proj_weight, out_proj_bias)  # (its width may differ from e: CLIP's pool)
    out = out.reshape(tgt_len, bsz, out.shape[-1])
    if not batched:
        out = out.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return out, weights


# the products on torch's autocast lists (linear, bmm, baddbmm, scaled_dot_product_attention)
# apply its policy, as torch's calls of them in its function do
globals().update(autocast.hook(globals(), ""))
