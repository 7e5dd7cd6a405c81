"""Transformer, TransformerEncoder(Layer), TransformerDecoder(Layer): torch.nn's, with its
constructor arguments and parameter names (its state dicts load), computed as its
reference (non-fast) path: post-norm or ``norm_first`` pre-norm blocks of self-attention,
cross-attention (decoder) and a two-layer feed-forward network; where torch's encoder would
run on nested tensors, its outputs at the padded positions are zeros, and where its encoder
layer's inference fast path would run, a tanh-approximated GELU is exact, as torch's."""

from __future__ import annotations

import copy

import numpy as np

from ..._where import warn_user
from ...eager.factories import full
from ...eager.grad_mode import is_grad_enabled
from ...eager.interceptor import current_interceptor
from .. import functional as F
from .. import init
from ..module import Module
from .activation import GELU, ReLU
from .attention import MultiheadAttention, inference_only
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm

__all__ = [
    "Transformer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
]


def _activation(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if isinstance(activation, str):
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    return activation  # a callable (a function or a module such as nn.GELU())


def _relu_or_gelu(activation):
    """torch's ``activation_relu_or_gelu``: 1 for relu, 2 for gelu (a ``GELU`` module of
    either approximation), 0 for another activation."""
    if activation is F.relu or isinstance(activation, ReLU):
        return 1
    return 2 if activation is F.gelu or isinstance(activation, GELU) else 0


def _get_clones(module, n):  # torch's name
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def generate_square_subsequent_mask(sz, device=None, dtype=None):
    """The float causal mask of ``sz`` steps: -inf above the diagonal, 0 elsewhere."""
    return full((sz, sz), float("-inf"), dtype=dtype, device=device).triu(1)


def _is_causal_mask(mask, is_causal):
    """The ``is_causal`` hint (None: False). torch also detects a causal ``mask`` given
    without the hint, for its fused kernel only; the mask itself is applied here either way,
    which gives the same numbers and needs no look at the mask's data (so it captures)."""
    return bool(is_causal)


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward network, each with a residual connection and a
    LayerNorm (after it, or before it with ``norm_first``), as
    ``torch.nn.TransformerEncoderLayer``."""

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)
        self.activation_relu_or_gelu = _relu_or_gelu(self.activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        # torch's inference fast path runs exact gelu for a GELU of either approximation
        act = self.activation
        if isinstance(act, GELU) and act.approximate != "none" and self._fast_path(src):
            act = F.gelu
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x), act)
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x, act))
        return x

    def _fast_path(self, src):
        """Whether torch 2.13 runs ``_transformer_encoder_layer_fwd`` on ``src``: batched,
        in eval, without autograd, without hooks, and the layer of its kind."""
        attn = self.self_attn
        if (
            src.ndim != 3
            or self.training
            or _why_not_fast(self)
            or any(m._forward_hooks or m._forward_pre_hooks for m in self.modules())
        ):
            return False
        layers = (attn, attn.out_proj, self.norm1, self.norm2, self.linear1, self.linear2)
        return inference_only(src, *(p for m in layers for p in m._parameters.values()))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=is_causal,
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x, activation=None):
        x = self.linear2(self.dropout((activation or self.activation)(self.linear1(x))))
        return self.dropout2(x)


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's output (``memory``) and a feed-forward
    network, each with a residual connection and a LayerNorm, as
    ``torch.nn.TransformerDecoderLayer``. As torch's, a copy (``copy.deepcopy``, so the
    layers of ``TransformerDecoder`` and ``Transformer``, or pickling) of a layer whose
    ``activation`` is a module such as ``nn.GELU()`` runs ``F.relu``."""

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
        )
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def __setstate__(self, state):
        # torch's: a module activation is in state["_modules"], not state, so relu shadows it
        if "activation" not in state:
            state["activation"] = F.relu
        super().__setstate__(state)

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=False,
        memory_is_causal=False,
    ):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(
                self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal
            )
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(
                x
                + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            )
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            need_weights=False,
        )[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(
            x,
            mem,
            mem,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            need_weights=False,
        )[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (``layers``), then ``norm`` if given."""

    def __init__(
        self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True
    ):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        why = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why:  # torch's warning, at the user's line
            warn_user(
                "enable_nested_tensor is True, but self.use_nested_tensor is False because "
                f"encoder_layer{why}"
            )
        self.use_nested_tensor = enable_nested_tensor and not why
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        is_causal = _is_causal_mask(mask, is_causal)
        padded = self._nested_padding(src, mask, src_key_padding_mask)
        output = src
        for mod in self.layers:
            output = mod(
                output,
                src_mask=mask,
                is_causal=is_causal,
                src_key_padding_mask=src_key_padding_mask,
            )
        if padded is not None:  # torch's nested tensor, padded back with zeros
            output = output.masked_fill(padded.unsqueeze(-1), 0.0)
        if self.norm is not None:
            output = self.norm(output)
        return output

    def _nested_padding(self, src, mask, src_key_padding_mask):
        """The padded positions where torch's fast path runs the layers on a nested tensor
        (its outputs there are zeros), or None where it does not: in eval, without autograd,
        a batched ``src`` padded at the end of each sequence by ``src_key_padding_mask`` alone
        (``mask_check``: checked, so not under capture, as torch's under torch.compile)."""
        layer = self.layers[0]
        if (
            not self.use_nested_tensor
            or layer.training
            or src.ndim != 3
            or src_key_padding_mask is None
            or mask is not None
            or is_grad_enabled()
            and (src.requires_grad or any(p.requires_grad for p in layer.parameters()))
        ):
            return None
        padded = src_key_padding_mask != 0  # a float mask: -inf (or any non-zero) pads
        if self.mask_check:
            if current_interceptor() is not None or type(padded._payload) is not np.ndarray:
                return None
            p = padded._host()
            if (p[:, 1:] < p[:, :-1]).any():  # a position kept after a padded one
                return None
        return padded


def _why_not_nested(layer):
    """Why torch's TransformerEncoder cannot run copies of ``layer`` on nested tensors
    (the end of its warning, after ``encoder_layer``), or "" where it can."""
    if not isinstance(layer, TransformerEncoderLayer):
        return " was not TransformerEncoderLayer"
    return ".norm_first was True" if layer.norm_first else _why_not_fast(layer)


def _why_not_fast(layer):
    """Why torch's inference fast path cannot run the encoder layer ``layer`` whatever its
    input (the end of its TransformerEncoder warning), or ""."""
    attn = layer.self_attn
    checks = (
        (
            not attn.batch_first,
            ".self_attn.batch_first was not True(use batch_first for better inference performance)",
        ),
        (not attn._qkv_same_embed_dim, ".self_attn._qkv_same_embed_dim was not True"),
        (attn.in_proj_bias is None, ".self_attn was passed bias=False"),
        (not layer.activation_relu_or_gelu, ".activation_relu_or_gelu was not True"),
        (layer.norm1.eps != layer.norm2.eps, ".norm1.eps was not equal to encoder_layer.norm2.eps"),
        (attn.num_heads % 2 == 1, ".self_attn.num_heads is odd"),
    )
    return next((why for failed, why in checks if failed), "")


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` (``layers``), then ``norm`` if given."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        tgt_is_causal = _is_causal_mask(tgt_mask, tgt_is_causal)
        output = tgt
        for mod in self.layers:
            output = mod(
                output,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=tgt_is_causal,
                memory_is_causal=memory_is_causal,
            )
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """An encoder-decoder transformer, as ``torch.nn.Transformer`` ("Attention Is All You
    Need"): ``encoder`` and ``decoder`` stacks with a final LayerNorm each, every matrix
    parameter Xavier-uniform initialised."""

    def __init__(
        self,
        d_model=512,
        nhead=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        custom_encoder=None,
        custom_decoder=None,
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(
                d_model,
                nhead,
                dim_feedforward,
                dropout,
                activation,
                layer_norm_eps,
                batch_first,
                norm_first,
                bias,
                **kw,
            )
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(
                d_model,
                nhead,
                dim_feedforward,
                dropout,
                activation,
                layer_norm_eps,
                batch_first,
                norm_first,
                bias,
                **kw,
            )
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)

    def forward(
        self,
        src,
        tgt,
        src_mask=None,
        tgt_mask=None,
        memory_mask=None,
        src_key_padding_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        src_is_causal=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        is_batched = src.dim() == 3
        if not self.batch_first and src.size(1) != tgt.size(1) and is_batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if self.batch_first and src.size(0) != tgt.size(0) and is_batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The float causal mask of ``sz`` steps: -inf above the diagonal, 0 elsewhere."""
        return generate_square_subsequent_mask(sz, device=device, dtype=dtype)
