"""MultiheadAttention: its parameters, computed by ``F.multi_head_attention_forward``."""

from __future__ import annotations

from ...eager import autocast
from ...eager.factories import empty
from ...eager.grad_mode import is_grad_enabled
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear


class MultiheadAttention(Module):
    """Attention of ``query`` over ``key``/``value`` in ``num_heads`` heads, as
    ``torch.nn.MultiheadAttention``: keys of ``kdim`` and values of ``vdim`` features
    (then ``q/k/v_proj_weight`` instead of ``in_proj_weight``); ``add_bias_kv`` appends the
    learnt ``bias_k``/``bias_v`` to the keys and values, ``add_zero_attn`` a zero one.

    Inputs are ``(L, N, E)`` (``batch_first``: ``(N, L, E)``) or unbatched ``(L, E)``.
    ``attn_mask`` is ``(L, S)`` or ``(N * num_heads, L, S)``, bool (True: not allowed) or
    float (added to the scores); ``key_padding_mask`` is ``(N, S)`` (True: padding).
    ``is_causal`` is a hint and needs ``attn_mask`` (the causal mask itself), as in torch
    (with ``need_weights=False`` and no ``key_padding_mask`` the causal mask is used in
    its place). Returns ``(output, weights)``: weights averaged over heads unless
    ``average_attn_weights=False``; None when ``need_weights=False``, and then a query
    that may attend to no key gets 0 (NaN with ``need_weights``), as torch's.

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
        # torch's inference fast path (_native_multi_head_attention) softmaxes as the
        # need_weights path does: a query that may attend to no key gets NaN there too
        native = self._fast_path(query, key, value)
        if self.batch_first and batched:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        separate = not self._qkv_same_embed_dim
        out, weights = F.multi_head_attention_forward(
            query,
            key,
            value,
            self.embed_dim,
            self.num_heads,
            self.in_proj_weight,
            self.in_proj_bias,
            self.bias_k,
            self.bias_v,
            self.add_zero_attn,
            self.dropout,
            self.out_proj.weight,
            self.out_proj.bias,
            training=self.training,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights or native,
            attn_mask=attn_mask,
            use_separate_proj_weight=separate,
            q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights,
            is_causal=is_causal,
        )
        if self.batch_first and batched:
            out = out.transpose(1, 0)
        return out, weights if need_weights else None

    def _fast_path(self, query, key, value):
        """Whether torch 2.13 runs ``_native_multi_head_attention``: self-attention on one
        batched ``batch_first`` tensor, in eval, without autograd, of the plain layout."""
        w, b = self.in_proj_weight, self.in_proj_bias
        if (
            query.ndim != 3
            or not query is key is value
            or w is None
            or b is None
            or not query.dtype is w.dtype is b.dtype
            or self.training
            or self.num_heads % 2
            or not self.batch_first
            or self.bias_k is not None
            or self.bias_v is not None
            or self.add_zero_attn
        ):
            return False
        return inference_only(query, w, b, self.out_proj.weight, self.out_proj.bias)


def inference_only(*tensors):
    """The end of torch's fast-path checks (attention's and the encoder layer's): no CUDA
    autocast, and no autograd (grad mode off, or none of ``tensors`` requires grad)."""
    if autocast.is_enabled("cuda"):
        return False
    return not is_grad_enabled() or not any(t is not None and t.requires_grad for t in tensors)
