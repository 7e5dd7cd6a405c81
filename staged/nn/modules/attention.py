"""MultiheadAttention, computed as PyTorch's ``multi_head_attention_forward`` (the
``need_weights`` path: scaled scores, additive masks, softmax, dropout, weighted values)."""

from __future__ import annotations

import math

from ...eager import ops
from ...eager.factories import empty, zeros
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear


def _additive_mask(mask, dtype, name):
    """A float mask to add to the scores: a bool mask becomes -inf where True."""
    if mask is None or mask.dtype.is_floating_point:
        return mask if mask is None else mask.to(dtype)
    if mask.dtype.name != "bool":
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return zeros(*mask.shape, dtype=dtype).masked_fill(mask, float("-inf"))


class MultiheadAttention(Module):
    """Attention of ``query`` over ``key``/``value`` in ``num_heads`` heads, as
    ``torch.nn.MultiheadAttention``: keys of ``kdim`` and values of ``vdim`` features
    (then ``q/k/v_proj_weight`` instead of ``in_proj_weight``); ``add_bias_kv`` appends the
    learnt ``bias_k``/``bias_v`` to the keys and values, ``add_zero_attn`` a zero one.

    Inputs are ``(L, N, E)`` (``batch_first``: ``(N, L, E)``) or unbatched ``(L, E)``.
    ``attn_mask`` is ``(L, S)`` or ``(N * num_heads, L, S)``, bool (True: not allowed) or
    float (added to the scores); ``key_padding_mask`` is ``(N, S)`` (True: padding).
    ``is_causal`` is a hint and needs ``attn_mask`` (the causal mask itself), as in torch.
    Returns ``(output, weights)``: weights averaged over heads unless
    ``average_attn_weights=False``; None when ``need_weights=False``.

    Example:
        >>> mha = nn.MultiheadAttention(32, 4, batch_first=True)
        >>> causal = staged.ones(T, T).triu(1).bool()   # or arange(T)[None] > arange(T)[:, None]
        >>> out, _ = mha(x, x, x, attn_mask=causal, need_weights=False)
    """

    def __init__(
        self,
        embed_dim,
        num_heads,
        dropout=0.0,
        bias=True,
        add_bias_kv=False,
        add_zero_attn=False,
        kdim=None,
        vdim=None,
        batch_first=False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got "
                f"embed_dim={embed_dim} and num_heads={num_heads} instead"
            )
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        names = ("q_proj_weight", "k_proj_weight", "v_proj_weight")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(
                empty(3 * embed_dim, embed_dim, device=device, dtype=dtype)
            )
            for name in names:
                self.register_parameter(name, None)
        else:
            for name, d in zip(names, (embed_dim, self.kdim, self.vdim)):
                setattr(self, name, Parameter(empty(embed_dim, d, device=device, dtype=dtype)))
            self.register_parameter("in_proj_weight", None)
        self.register_parameter(
            "in_proj_bias",
            Parameter(empty(3 * embed_dim, device=device, dtype=dtype)) if bias else None,
        )
        self.out_proj = NonDynamicallyQuantizableLinear(
            embed_dim, embed_dim, bias=bias, device=device, dtype=dtype
        )
        for name in ("bias_k", "bias_v"):
            bias_kv = Parameter(empty(1, 1, embed_dim, device=device, dtype=dtype))
            self.register_parameter(name, bias_kv if add_bias_kv else None)
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if w is not None:
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        batched = query.ndim == 3
        if self.batch_first and batched:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        if not batched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "Need attn_mask if specifying the is_causal hint. You may use "
                "the Transformer module method `generate_square_subsequent_mask` "
                "to create this mask."
            )
        out, weights = self._attend(query, key, value, key_padding_mask, attn_mask)
        if not batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        elif self.batch_first:
            out = out.transpose(1, 0)
        if not need_weights:
            return out, None
        return out, (weights.mean(1) if average_attn_weights else weights)

    def _attend(self, query, key, value, key_padding_mask, attn_mask):
        """(L, N, E) inputs -> (L, N, E) output and (N, heads, L, S) weights."""
        tgt_len, bsz, e = query.shape
        src_len, h, hd = key.shape[0], self.num_heads, self.head_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        ws = (
            (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
            if w is None
            else tuple(w[i * e : (i + 1) * e] for i in range(3))
        )
        q, k, v = (
            F.linear(x, wi, None if b is None else b[i * e : (i + 1) * e])
            for i, (x, wi) in enumerate(zip((query, key, value), ws))
        )
        mask = _additive_mask(attn_mask, q.dtype, "attn_mask")
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
        pad = _additive_mask(key_padding_mask, q.dtype, "key_padding_mask")
        if self.bias_k is not None:
            k = ops.cat([k, self.bias_k.expand(1, bsz, e)])
            v = ops.cat([v, self.bias_v.expand(1, bsz, e)])
        q, k, v = (x.reshape(x.shape[0], bsz * h, hd).transpose(0, 1) for x in (q, k, v))
        if self.add_zero_attn:
            k, v = (ops.cat([x, zeros(bsz * h, 1, hd, dtype=x.dtype)], 1) for x in (k, v))
        # the appended keys are allowed by both masks
        mask, pad = (m if m is None else F.pad(m, (0, k.shape[1] - src_len)) for m in (mask, pad))
        src_len = k.shape[1]
        if pad is not None:
            for i, want in enumerate((bsz, src_len)):
                if pad.shape[i] != want:
                    raise AssertionError(
                        f"Expected key_padded_mask.shape[{i}] to be {want}, but got {pad.shape[i]}"
                    )
            pad = (
                pad.reshape(bsz, 1, 1, src_len)
                .expand(bsz, h, 1, src_len)
                .reshape(bsz * h, 1, src_len)
            )
            mask = pad if mask is None else mask + pad
        scores = (q * math.sqrt(1.0 / hd)) @ k.mT
        if mask is not None:
            scores = scores + mask
        weights = ops.softmax(scores, -1)
        if self.dropout > 0.0:
            weights = F.dropout(weights, self.dropout, self.training)
        out = (weights @ v).transpose(0, 1).reshape(tgt_len * bsz, e)
        out = self.out_proj(out).reshape(tgt_len, bsz, e)
        return out, weights.reshape(bsz, h, tgt_len, src_len)
