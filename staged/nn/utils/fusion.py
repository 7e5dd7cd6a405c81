"""Folding an eval-mode BatchNorm into the convolution or linear layer before it: the
fused layer computes ``bn(layer(x))`` with the running statistics, in one layer."""

from __future__ import annotations

import copy

from ...eager import ops
from ...eager.factories import ones_like, zeros_like
from ...eager.tensor import Tensor
from ..parameter import Parameter


def _eval_pair(layer, bn) -> None:
    if layer.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of ``conv`` computing ``bn(conv(x))`` (both in eval mode); ``transpose``
    for a transposed convolution (output channels on the weight's dim 1)."""
    _eval_pair(conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight,
        fused.bias,
        bn.running_mean,
        bn.running_var,
        bn.eps,
        bn.weight,
        bn.bias,
        transpose,
    )
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """The fused convolution's ``(weight, bias)`` Parameters: the weight scaled per output
    channel by ``bn_w / sqrt(bn_rv + bn_eps)``, the bias shifted to match; each keeps its
    layer tensor's dtype and ``requires_grad``. A missing bias or affine part counts as 0
    (1 for ``bn_w``)."""
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
    rsqrt = ops.rsqrt(bn_rv + bn_eps)
    shape = [1, -1] if transpose else [-1, 1]
    scale = (bn_w * rsqrt).reshape(shape + [1] * (conv_w.ndim - 2))
    weight = (conv_w * scale).to(dtype=w_dtype)
    bias = ((conv_b - bn_rm) * rsqrt * bn_w + bn_b).to(dtype=b_dtype)
    return _parameters(weight, conv_w, bias, conv_b)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` computing ``bn(linear(x))`` (both in eval mode); ``bn`` has
    ``linear.out_features`` features, or one."""
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(
            "To fuse, linear.out_features == bn.num_features or bn.num_features == 1, got "
            f"linear.out_features={linear.out_features} and bn.num_features={bn.num_features}"
        )
    _eval_pair(linear, bn)
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The fused linear layer's ``(weight, bias)`` Parameters, as ``fuse_conv_bn_weights``
    (the scale cast to the weight's dtype before it multiplies, as torch's)."""
    b_dtype = linear_b.dtype if linear_b is not None else linear_w.dtype
    linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
    scale = bn_w * ops.rsqrt(bn_rv + bn_eps)
    weight = linear_w * scale.unsqueeze(-1).to(dtype=linear_w.dtype)
    bias = ((linear_b - bn_rm) * scale + bn_b).to(dtype=b_dtype)
    return _parameters(weight, linear_w, bias, linear_b)


def _parameters(weight: Tensor, w: Tensor, bias: Tensor, b: Tensor):
    return Parameter(weight, w.requires_grad), Parameter(bias, b.requires_grad)
