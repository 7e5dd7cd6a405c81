"""nn.functional: layers and losses as functions, composed from staged ops."""

from __future__ import annotations

import math
import types
import warnings

import numpy as np

from .. import autodiff as ad
from .. import dtypes as dt
from .._where import at_user, sited
from ..eager import ops
from ..eager.factories import arange, ones
from ..eager.grad_mode import no_grad
from ..eager.interceptor import current_interceptor
from ..eager.checks import check_range
from ..eager.ops.layers import (
    _const,
    avg_pool1d,  # noqa: F401
    avg_pool2d,  # noqa: F401
    batch_norm,  # noqa: F401
    conv1d,  # noqa: F401
    conv2d,  # noqa: F401
    conv_transpose1d,  # noqa: F401
    conv_transpose2d,  # noqa: F401
    dropout,
    embedding,  # noqa: F401
    interpolate,  # noqa: F401
    layer_norm,  # noqa: F401
    max_pool1d,  # noqa: F401
    max_pool2d,  # noqa: F401
    one_hot,  # noqa: F401
    pad,  # noqa: F401
    unfold,  # noqa: F401
)
from ..autodiff import fused
from ..eager.ops.linalg import linear  # noqa: F401
from ..eager.ops.reduction import in_float32
from ..eager.tensor import Tensor

globals().update(ops.table.functional())  # relu, tanh, gelu ... (staged/eager/ops/table.py)


def softmax(input, dim):
    return ops.softmax(input, dim)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-input, dim)`` (computed in ``dtype`` if given); ``dim=None`` picks torch's
    legacy default, warned."""
    if dim is None:
        warnings.warn(
            "Implicit dimension choice for softmin has been deprecated. Change the call to "
            "include dim=X as an argument.",
            stacklevel=_stacklevel,  # sited's frame stands for torch's _get_softmax_dim
        )
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return ops.softmax(-(input if dtype is None else input.to(dtype)), dim)


def log_softmax(input, dim):
    return ops.log_softmax(input, dim)


# --- activations ---------------------------------------------------------------------------
def _activation(input, inplace, fn):
    """``fn(input)`` (half precision computed in float32). ``inplace=True`` writes the result
    into ``input``, computed from a copy so that what ``fn`` saved for backward stays intact."""
    fn = in_float32(fn)
    return input.copy_(fn(input.clone())) if inplace else fn(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``x`` where ``x > 0``, else ``negative_slope * x``."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise NotImplementedError(f"\"leaky_relu_cpu\" not implemented for '{input.dtype.title}'")
    return _activation(
        input, inplace, lambda x: ad.leaky_relu(x, negative_slope=float(negative_slope))
    )


def _elu(x, alpha, scale=1.0, input_scale=1.0):
    """ATen's elu: ``scale * x`` where ``x > 0``, else ``scale * alpha * (exp(input_scale * x)
    - 1)``; the exp sees only the non-positive part, so no inf meets a zero gradient."""
    pos = x > 0
    return ops.where(
        pos, x * scale, ops.expm1(ops.where(pos, 0.0, x) * input_scale) * (alpha * scale)
    )


def elu(input, alpha=1.0, inplace=False):
    return _activation(input, inplace, lambda x: _elu(x, alpha))


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(input, inplace=False):
    return _activation(input, inplace, lambda x: _elu(x, _SELU_ALPHA, _SELU_SCALE))


def celu(input, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _activation(input, inplace, lambda x: _elu(x, alpha, 1.0, 1.0 / alpha))


def mish(input, inplace=False):
    """``x * tanh(softplus(x))``."""
    return _activation(input, inplace, lambda x: x * ops.softplus(x).tanh())


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``x`` clamped to ``[min_val, max_val]``; the gradient is 0 at the bounds, as torch's."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if input.dtype is dt.bool_:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if not input.dtype.is_floating_point:  # integers clamp to integer bounds, as torch's
        lo_i, hi_i = int(min_val), int(max_val)
        return input.clamp_(lo_i, hi_i) if inplace else input.clamp(lo_i, hi_i)
    lo, hi = float(min_val), float(max_val)
    return _activation(input, inplace, lambda x: ad.hardtanh(x, min_val=lo, max_val=hi))


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``, differentiated as torch's: 1 / 6 strictly inside (-3, 3), 0
    elsewhere and at NaN (where hardtanh's gradient passes through)."""

    def fn(x):
        inside = (x > -3) & (x < 3)
        return ops.where(inside, (x + 3) / 6, hardtanh(x.detach() + 3, 0.0, 6.0) / 6)

    return _activation(input, inplace, fn)


def hardswish(input, inplace=False):
    """``x * relu6(x + 3) / 6`` by pieces as torch 2.13 differentiates it: ``x * 0`` to -3
    (NaN at -inf, as torch's value), ``x (x + 3) / 6`` inside, then ``x`` (NaN too): the
    gradient is 0 at -3 and the incoming gradient at 3, and the second derivative 0 at both."""

    def fn(x):
        inside = (x > -3) & (x < 3)
        m = ops.where(inside, x, 0.0)  # finite where not taken: no 0 * inf in its gradient
        return ops.where(x <= -3, x * 0, ops.where(inside, m * (m + 3) / 6, x))

    return _activation(input, inplace, fn)


@in_float32
def logsigmoid(input):
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large ``|x|``."""
    return -ops.softplus(-input)


def softsign(input):
    return input / (input.abs() + 1)


def tanhshrink(input):
    return input - input.tanh()


def relu_(input):
    return input.relu_()


def _threshold(x, threshold, value):
    return ops.where(x <= threshold, value, x).to(x.dtype)


def threshold(input, threshold, value, inplace=False):
    """``value`` where ``input <= threshold``, else ``input`` (NaN stays NaN)."""
    return _activation(input, inplace, lambda x: _threshold(x, threshold, value))


def threshold_(input, threshold, value):
    return _activation(input, True, lambda x: _threshold(x, threshold, value))


def _check_float(name, input):
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}\" not implemented for '{input.dtype.title}'")


def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    _check_float("softshrink_check", input)
    if lambd < 0:
        raise RuntimeError(
            f"lambda must be in range [0, {np.finfo(input.dtype.np).max:g}] for input dtype "
            f"{input.dtype.title}, but found {lambd:g}"
        )
    return ops.where(
        input > lambd, input - lambd, ops.where(input < -lambd, input + lambd, input * 0)
    )


def hardshrink(input, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0."""
    _check_float("hardshrink_cpu", input)
    return ops.where((input >= -lambd) & (input <= lambd), 0.0, input)


def prelu(input, weight):
    """``x`` where ``x > 0``, else ``weight * x``; ``weight`` has one entry or one per
    channel (dim 1; the only dim of a 1-D input)."""
    if weight.numel() != 1:
        if input.ndim == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channels = input.shape[1] if input.ndim >= 2 else 1
        if weight.numel() != channels:
            raise RuntimeError(
                "Mismatch of parameter numbers and input channel size. Found parameter numbers "
                f"= {weight.numel()} and channel size = {channels}."
            )
    if weight.ndim > 1:
        raise RuntimeError(
            f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}"
        )
    _check_float("prelu_cpu", input)
    if weight.ndim == 1:
        weight = weight.reshape((-1,) + (1,) * (input.ndim - 2) if input.ndim >= 2 else ())
    return ops.where(input > 0, input, input * weight)


def glu(input, dim=-1):
    """``a * sigmoid(b)`` of the halves ``a, b`` of ``input`` along ``dim``."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim % input.ndim
    if input.shape[d] % 2:
        raise RuntimeError(
            f"Halving dimension must be even, but dimension {d} is size {input.shape[d]}"
        )
    a, b = ops.chunk(input, 2, d)
    return a * b.sigmoid()


# --- pixel shuffle, normalisation, bilinear --------------------------------------------------
def _check_shuffle(name, input, factor, what):
    if input.ndim < 3:
        raise RuntimeError(
            f"{name} expects input to have at least 3 dimensions, but got input with "
            f"{input.ndim} dimension(s)"
        )
    if factor <= 0:
        raise RuntimeError(f"{name} expects a positive {what}, but got {factor}")


def pixel_shuffle(input, upscale_factor):
    """``(*, C r^2, H, W) -> (*, C, H r, W r)``: each channel block of ``r^2`` becomes an
    ``r x r`` tile of the output (``r``: ``upscale_factor``)."""
    r = upscale_factor
    _check_shuffle("pixel_shuffle", input, r, "upscale_factor")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(
            "pixel_shuffle expects its input's 'channel' dimension to be divisible by the "
            f"square of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}"
        )
    k = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(k + 1), k + 3, k + 1, k + 4, k + 2)  # (*, C, H, r, W, r)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """``(*, C, H r, W r) -> (*, C r^2, H, W)``, the inverse of ``pixel_shuffle``."""
    r = downscale_factor
    _check_shuffle("pixel_unshuffle", input, r, "downscale_factor")
    *batch, c, h, w = input.shape
    for what, size, d in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise RuntimeError(
                f"pixel_unshuffle expects {what} to be divisible by downscale_factor, but "
                f"input.size({d})={size} is not divisible by {r}"
            )
    k = len(batch)
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    x = x.permute(*range(k + 1), k + 2, k + 4, k + 1, k + 3)  # (*, C, r, r, H, W)
    return x.reshape(*batch, c * r * r, h // r, w // r)


@in_float32
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise ``(N, C, *)`` over each group of ``C / num_groups`` channels and all
    spatial positions (biased variance), then the per-channel affine."""
    if input.ndim < 2:
        raise RuntimeError(
            f"Expected at least 2 dimensions for input tensor but received {input.ndim}"
        )
    n, c = input.shape[:2]
    if c % num_groups:
        raise RuntimeError(
            "Expected number of channels in input to be divisible by num_groups, but got "
            f"input of shape {list(input.shape)} and num_groups={num_groups}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in "
                f"input, but got {name} of shape {list(t.shape)} and input of shape "
                f"{list(input.shape)}"
            )
    x = input.reshape(n, num_groups, math.prod(input.shape[1:]) // num_groups)  # n may be 0
    y = (x - x.mean(-1, keepdim=True)) * ops.rsqrt(x.var(-1, correction=0, keepdim=True) + eps)
    y = y.reshape(input.shape)
    channel = (c,) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(channel)
    return y if bias is None else y + bias.reshape(channel)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x^2) + eps)`` over the trailing ``normalized_shape`` dims, times
    ``weight``; ``eps=None`` is the machine epsilon of the computing dtype (float32 for
    half precision), as torch's."""
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(ns)
    if k > input.ndim or tuple(input.shape[input.ndim - k :]) != ns:
        raise RuntimeError(
            f"Given normalized_shape={list(ns)}, expected input with shape "
            f"[*{', '.join(map(str, ns))}], but got input of size{list(input.shape)}"
        )
    if weight is not None and tuple(weight.shape) != ns:
        raise RuntimeError(
            "Expected weight to be of same shape as normalized_shape, but got weight of shape "
            f"{list(weight.shape)} and normalized_shape = {list(ns)}"
        )
    y = _rms(input, tuple(range(-k, 0)), eps)
    return y if weight is None else (y * weight).to(y.dtype)


@in_float32
def _rms(x, dims, eps):
    eps = float(np.finfo(x.dtype.np).eps) if eps is None else eps
    return x * ops.rsqrt((x * x).mean(dims, keepdim=True) + eps)


def instance_norm(
    input,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    use_input_stats=True,
    momentum=0.1,
    eps=1e-5,
):
    """Normalise each ``(n, c)`` instance of ``(N, C, *)`` over its spatial positions; as
    torch, ``batch_norm`` of the ``(1, N C, *)`` reshape, whose running statistics (given)
    are averaged over the batch."""
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be None")
    if use_input_stats and math.prod(input.shape[2:]) == 1:
        raise ValueError(
            f"Expected more than 1 spatial element when training, got input size {input.size()}"
        )
    n, c = input.shape[:2]

    def per_instance(t):
        return None if t is None else t.repeat(n)

    stats = (per_instance(running_mean), per_instance(running_var))
    y = batch_norm(
        input.reshape(1, n * c, *input.shape[2:]),
        *stats,
        per_instance(weight),
        per_instance(bias),
        use_input_stats,
        momentum,
        eps,
    )
    if use_input_stats and running_mean is not None:
        with no_grad():
            for r, per in zip((running_mean, running_var), stats):
                r.copy_(per.reshape(n, c).mean(0))
    return y.reshape(input.shape)


def bilinear(input1, input2, weight, bias=None):
    """``y_o = x1^T W_o x2 + b_o`` over the last dims of ``input1`` (``(*, in1)``) and
    ``input2`` (``(*, in2)``), weight ``(out, in1, in2)``."""
    if input1.ndim != input2.ndim:
        raise RuntimeError(
            f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}"
        )
    for d in range(input1.ndim - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError(
                f"bilinear(): input batch dimensions do not match at dim {d}: got "
                f"{input1.shape[d]} and {input2.shape[d]}"
            )
    out, in1, in2 = weight.shape
    for name, got, want in (
        ("input1", input1.shape[-1], in1),
        ("input2", input2.shape[-1], in2),
        ("bias", out if bias is None else bias.shape[-1], out),
    ):
        if got != want:
            raise RuntimeError(
                f"bilinear(): {name} size does not match weight size: got {got} but expected {want}"
            )
    # x1 (B, in1) @ W as (in1, out * in2), then each out's row times x2 (B, in2)
    x1 = input1.reshape(-1, in1)
    t = x1 @ weight.permute(1, 0, 2).reshape(in1, out * in2)
    y = (t.reshape(-1, out, in2) * input2.reshape(-1, 1, in2)).sum(-1)
    y = y.reshape(*input1.shape[:-1], out)
    return y if bias is None else y + bias


# --- adaptive pooling -------------------------------------------------------------------------
def _adaptive_sizes(name, input, n, output_size, max_pool):
    """torch's checks of an adaptive pool's input; its pooled and output sizes (None in
    ``output_size`` keeps the input's)."""
    if input.ndim not in (n + 1, n + 2):
        if n == 1:
            raise RuntimeError(
                f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor for "
                f"argument #1 'self' (while checking arguments for {name})"
            )
        raise RuntimeError(
            f"{name}(): Expected {n + 1}D or {n + 2}D tensor, but got"
            f"{':' if max_pool else ''} {list(input.shape)}"
        )
    if max_pool:
        _check_float("adaptive_max_pool3d_cpu" if n == 3 else "adaptive_max_pool2d", input)
        for d in range(1, input.ndim):
            if input.shape[d] == 0:
                raise RuntimeError(
                    f"{name}(): Expected input to have non-zero size for non-batch dimensions, "
                    f"but input has sizes {list(input.shape)} with dimension {d} being empty"
                )
    elif not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise NotImplementedError(f"\"{name}\" not implemented for '{input.dtype.title}'")
    sizes = tuple(input.shape[-n:])
    out = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * n
    if len(out) != n:
        raise RuntimeError(f"{name}: output_size must be {n}")
    out = tuple(s if o is None else int(o) for o, s in zip(out, sizes))
    if min(out) < 0:
        raise RuntimeError(
            f"{name}: elements of output_size must be greater than or equal to 0 but received "
            f"{{{', '.join(map(str, out))}}}"
        )
    return sizes, out


def _adaptive_windows(size, out):
    """torch's windows ``[floor(i size / out), ceil((i + 1) size / out))``, ``i < out``."""
    i = np.arange(out)
    return i * size // out, -(-(i + 1) * size // out)


@in_float32
def _adaptive_avg_pool(input, n, output_size):
    """Per pooled dim: equal windows are a reshape and a mean, others a matmul by the
    constant 0/1 (in, out) window matrix divided by the window sizes."""
    sizes, out = _adaptive_sizes(f"adaptive_avg_pool{n}d", input, n, output_size, False)
    x = input
    for d, size, o in zip(range(input.ndim - n, input.ndim), sizes, out):
        if o == size:
            continue
        if o and size % o == 0:
            x = ops.unflatten(x, d, (o, size // o)).mean(d + 1)
            continue
        start, end = _adaptive_windows(size, o)
        j = np.arange(size)[:, None]
        window = ((j >= start) & (j < end)).astype(x.dtype.np)
        sums = ops.movedim(x, d, -1) @ _const(window)
        x = ops.movedim(sums / _const((end - start).astype(x.dtype.np)), -1, d)
    return x


def _adaptive_max_pool(input, n, output_size, return_indices):
    """``max`` over each window, gathered (padded windows repeat their last element: the
    maximum, and the first one in row-major order that gets the gradient, are torch's)."""
    sizes, out = _adaptive_sizes(f"adaptive_max_pool{n}d", input, n, output_size, True)
    coords, ks = [], []
    for a, (size, o) in enumerate(zip(sizes, out)):
        start, end = _adaptive_windows(size, o)
        ks.append(int((end - start).max(initial=1)))
        pos = np.minimum(start[:, None] + np.arange(ks[-1]), end[:, None] - 1)  # (o, k)
        coords.append(
            pos.reshape([o if b == a else ks[-1] if b == n + a else 1 for b in range(2 * n)])
        )
    k = math.prod(ks)
    flat = np.ravel_multi_index(np.broadcast_arrays(*coords), sizes).reshape(*out, k)
    lead = tuple(input.shape[:-n])
    x = input.reshape(*lead, math.prod(sizes))
    windows = ops.index_select(x, len(lead), _const(flat.reshape(-1))).reshape(*lead, *out, k)
    y, at = windows.max(-1)
    if not return_indices:
        return y
    table = _const(flat).expand(*lead, *out, k)
    return y, ops.gather(table, -1, at.unsqueeze(-1)).squeeze(-1)


def adaptive_avg_pool1d(input, output_size):
    """Average over ``output_size`` windows of ``(N, C, L)`` or ``(C, L)``."""
    return _adaptive_avg_pool(input, 1, output_size)


def adaptive_avg_pool2d(input, output_size):
    """Average over ``output_size`` windows of ``(N, C, H, W)`` or ``(C, H, W)``."""
    return _adaptive_avg_pool(input, 2, output_size)


def adaptive_avg_pool3d(input, output_size):
    """Average over ``output_size`` windows of ``(N, C, D, H, W)`` or ``(C, D, H, W)``."""
    return _adaptive_avg_pool(input, 3, output_size)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max over ``output_size`` windows; ``return_indices`` adds each maximum's index."""
    return _adaptive_max_pool(input, 1, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max over ``output_size`` windows; ``return_indices`` adds each maximum's flat ``H*W``
    index."""
    return _adaptive_max_pool(input, 2, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max over ``output_size`` windows; ``return_indices`` adds each maximum's flat
    ``D*H*W`` index."""
    return _adaptive_max_pool(input, 3, output_size, return_indices)


# --- dropout of channels ----------------------------------------------------------------------
def _check_probability(p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_dropout(input, p, training, inplace, batched):
    """Zero whole channels ``input[n, c]`` (``input[c]`` unbatched) with probability ``p``,
    scaling the rest by ``1 / (1 - p)``: ``dropout``'s mask, one draw per channel."""
    if not training or p == 0 or input.numel() == 0:
        return input
    lead = 2 if batched else 1
    if input.ndim < lead:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    noise = dropout(ones(*input.shape[:lead], *(1,) * (input.ndim - lead), dtype=input.dtype), p)
    return input.mul_(noise) if inplace else input * noise


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Channel dropout of ``(N, C, L)`` or ``(C, L)``."""
    _check_probability(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
            f"dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
            f"dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D "
            f"inputs)."
        )
    return _feature_dropout(input, p, training, inplace, input.ndim == 3)


def _warn_dims(name, n, ndim):
    if ndim not in (n + 1, n + 2):
        warnings.warn(
            f"{name}: Received a {ndim}-D input to {name}, which is deprecated and will result "
            f"in an error in a future release. To retain the behavior and silence this "
            f"warning, please use dropout instead. Note that {name} exists to provide "
            f"channel-wise dropout on inputs with {n} spatial dimensions, a channel dimension, "
            f"and an optional batch dimension (i.e. {n + 1}D or {n + 2}D inputs).",
            stacklevel=3,
        )


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Channel dropout of ``(N, C, H, W)``; a 3-D input is taken as ``(N, C, L)``, as torch."""
    _check_probability(p)
    _warn_dims("dropout2d", 2, input.ndim)
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2,
        )
    return _feature_dropout(input, p, training, inplace, True)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Channel dropout of ``(N, C, D, H, W)`` or ``(C, D, H, W)``."""
    _check_probability(p)
    _warn_dims("dropout3d", 3, input.ndim)
    return _feature_dropout(input, p, training, inplace, input.ndim == 5)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped elements take SELU's negative saturation value,
    then all are scaled and shifted so that mean and variance are kept (ATen's constants)."""
    _check_probability(p)
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return input.mul_(0.0) if inplace else input * 0.0
    keep = (dropout(ones(*input.shape, dtype=input.dtype), p) != 0).to(input.dtype)
    alpha = 1.7580993408473766  # -SELU's alpha * scale
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    out = input * (keep * a) + ((keep - 1) * (alpha * a) + alpha * a * p)
    return input.copy_(out) if inplace else out


# --- distances --------------------------------------------------------------------------------
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim``."""
    result = input / ops.clamp_min(ops.norm(input, p, dim, keepdim=True), eps)
    return result if out is None else out.copy_(result)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``<x1, x2> / (max(||x1||, eps) max(||x2||, eps))`` along ``dim`` (inputs broadcast),
    each normalised first as ATen does; the clamp, done under no_grad there, passes the
    gradient of the norm through."""
    x1, x2 = ops.operands(x1, x2)

    def unit(x):
        n = ops.norm(x, 2, dim, keepdim=True)
        return x / (n + (ops.clamp_min(n, eps) - n).detach())

    return (unit(x1) * unit(x2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``||x1 - x2 + eps||_p`` over the last dim."""
    return ops.norm(x1 - x2 + eps, p, max(x1.ndim, x2.ndim) - 1, keepdim)


# --- losses -----------------------------------------------------------------------------------
def _legacy_reduction(size_average, reduce, reduction):
    """``reduction``, or what the deprecated ``size_average``/``reduce`` flags say (warned)."""
    if size_average is None and reduce is None:
        return reduction
    if reduce is None or reduce:
        ret = "mean" if size_average is None or size_average else "sum"
    else:
        ret = "none"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.",
        stacklevel=3,
    )
    return ret


def _reduce(loss, reduction, count=None):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / count if count is not None else loss.mean()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _warn_sizes(input, target):
    if target.shape != input.shape:
        warnings.warn(
            f"Using a target size ({target.size()}) that is different to the input "
            f"size ({input.size()}). This will likely lead to incorrect results due "
            f"to broadcasting. Please ensure they have the same size.",
            stacklevel=3,
        )


def _weighted(loss, input, weight, reduction, mean_over_weight=True):
    """``loss`` times the optional same-size ``weight``, reduced; a weighted "mean" divides
    by the weights' sum (l1, mse) or the element count (huber), as torch."""
    if weight is None:
        return _reduce(loss, reduction)
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    return _reduce(loss * weight, reduction, weight.sum() if mean_over_weight else None)


@in_float32
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _warn_sizes(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    d = input - target
    return _weighted(d * d, input, weight, reduction)


@in_float32
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _warn_sizes(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _weighted((input - target).abs(), input, weight, reduction)


def _huber(d, delta, quadratic, slope):
    """``quadratic * d^2 / 2`` where ``|d| < delta``, else ``slope * (|d| - delta / 2)``.
    The square sees only the small ``d``: where ``d`` is infinite its zero cotangent would
    make ``0 * 2d`` NaN, where torch's gradient is ``slope * sign(d)``."""
    z = d.abs()
    small = z < delta
    q = ops.where(small, d, 0.0)
    return ops.where(small, q * q * (0.5 * quadratic), (z - 0.5 * delta) * slope)


@in_float32
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``d^2 / (2 beta)`` where ``|d| < beta``, else ``|d| - beta / 2``; ``beta=0`` is l1."""
    _warn_sizes(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:
        return _reduce((input - target).abs(), reduction)
    return _reduce(_huber(input - target, beta, 1.0 / beta, 1.0), reduction)


@in_float32
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``d^2 / 2`` where ``|d| < delta``, else ``delta * (|d| - delta / 2)``."""
    _warn_sizes(input, target)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _weighted(
        _huber(input - target, delta, 1.0, delta), input, weight, reduction, mean_over_weight=False
    )


def _check_unit_interval(t, name):
    """torch's check that BCE's ``t`` lies in [0, 1]; eager only (it reads the data)."""
    if current_interceptor() is None and not bool(((t >= 0) & (t <= 1)).all()):
        raise RuntimeError(f"all elements of {name} should be between 0 and 1")


@in_float32
def binary_cross_entropy(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean"
):
    """``-w (y log x + (1 - y) log(1 - x))`` of probabilities ``x``, each log clamped at
    -100, with torch's gradient: finite where ``x`` is exactly 0 or 1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(
            f"Using a target size ({target.size()}) that is different to the "
            f"input size ({input.size()}) is deprecated. Please ensure they have "
            f"the same size."
        )
    _check_unit_interval(input, "input")
    _check_unit_interval(target, "target")
    loss = ad.binary_cross_entropy(*ops.broadcast_tensors(input, target.to(input.dtype)))
    return _reduce(loss if weight is None else loss * weight, reduction)


@in_float32
def binary_cross_entropy_with_logits(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None
):
    """BCE of ``sigmoid(input)``, in torch's stable form ``(1 - y) x - (1 + (p - 1) y)
    logsigmoid(x)`` (``p``: ``pos_weight``, broadcast along the class dim)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(
            f"Target size ({target.size()}) must be the same as input size ({input.size()})"
        )
    log_sig = logsigmoid(input)
    if pos_weight is not None:
        log_sig = log_sig * ((pos_weight - 1) * target + 1)
    loss = (1 - target) * input - log_sig
    return _reduce(loss if weight is None else loss * weight, reduction)


@in_float32
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """``target * (log(target) - input)`` of log-probabilities ``input`` (``log_target``:
    ``target`` holds log-probabilities too); "batchmean" divides the sum by the batch size."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the "
            "support size.'batchmean' divides only by the batch size, and aligns with "
            "the KL div math definition.'mean' will be changed to behave the same as "
            "'batchmean' in the next major release.",
            stacklevel=2,
        )
    if log_target:
        loss = target.exp() * (target - input)
    else:  # xlogy(target, target): 0 where target is 0
        zero = target == 0
        loss = ops.where(zero, 0.0, target * ops.where(zero, 1.0, target).log()) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction)


@in_float32
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-y x))``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _reduce(ops.softplus(-input * target), reduction)


@in_float32
def cosine_embedding_loss(
    input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"
):
    """``1 - cos(x1, x2)`` where ``y == 1``, ``max(0, cos(x1, x2) - margin)`` where
    ``y == -1`` (cos over the last dim, with ATen's 1e-12 in each squared norm)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    d = target.ndim
    if d > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.ndim != d + 1 or input2.ndim != d + 1:
        raise RuntimeError(
            f"{d}D target tensor expects {d + 1}D input tensors, but found "
            f"inputs with sizes {list(input1.shape)} and {list(input2.shape)}."
        )
    eps = 1e-12
    cos = (input1 * input2).sum(d) / (
        ((input1 * input1).sum(d) + eps) * ((input2 * input2).sum(d) + eps)
    ).sqrt()
    loss = ops.where(target == 1, 1 - cos, 0.0) + ops.where(
        target == -1, ops.clamp_min(cos - margin, 0), 0.0
    )
    return _reduce(loss, reduction)


@in_float32
def margin_ranking_loss(
    input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"
):
    """``max(0, -y (x1 - x2) + margin)``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension "
            f"but got sizes: input1: {input1.size()}, input2: {input2.size()}, "
            f"target: {target.size()} "
        )
    return _reduce(ops.clamp_min(-target * (input1 - input2) + margin, 0), reduction)


@in_float32
def triplet_margin_loss(
    anchor,
    positive,
    negative,
    margin=1.0,
    p=2,
    eps=1e-6,
    swap=False,
    size_average=None,
    reduce=None,
    reduction="mean",
):
    """``max(0, margin + d(a, p) - d(a, n))``, ``d`` the ``pairwise_distance``; ``swap``
    takes ``min(d(a, n), d(p, n))`` for ``d(a, n)``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number "
            f"of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and "
            f"negative {negative.ndim}D inputs"
        )
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = ops.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(ops.clamp_min(margin + d_pos - d_neg, 0), reduction)


@in_float32
def hinge_embedding_loss(
    input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"
):
    """``x`` where ``y == 1``, ``max(0, margin - x)`` where ``y == -1``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = ops.where(target != 1, ops.clamp_min(margin - input, 0), 0.0) + ops.where(
        target != -1, input, 0.0
    )
    return _reduce(loss, reduction)


def _check_reduction(reduction, message=" is not a valid value for reduction"):
    """The check some torch losses make before computing, each with its own words."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + message)


@in_float32
def multilabel_soft_margin_loss(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean"
):
    """``-(y logsigmoid(x) + (1 - y) logsigmoid(-x))`` (times ``weight``) averaged over the
    last (class) dim."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(-1) / input.shape[-1]
    _check_reduction(reduction, " is not valid")
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """``(log(v) + (x - y)^2 / v) / 2`` (``+ log(2 pi) / 2`` if ``full``), ``v`` the
    variance clamped at ``eps`` with the gradient passing the clamp, as torch's (it
    clamps under no_grad); ``var`` may lack the last dim or have one dim of size 1."""
    if not isinstance(var, Tensor):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = ones(*input.shape, dtype=input.dtype) * var
    elif current_interceptor() is None and bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if var.shape != input.shape:
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (
            input.ndim == var.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1
        ):
            raise ValueError("var is of incorrect size")
    _check_reduction(reduction, " is not valid")
    var = ops.clamp_min(var, eps).detach() + (var - var.detach())
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


@in_float32
def poisson_nll_loss(
    input,
    target,
    log_input=True,
    full=False,
    size_average=None,
    eps=1e-8,
    reduce=None,
    reduction="mean",
):
    """``exp(x) - y x`` of log-rates (``log_input``), else ``x - y log(x + eps)``; ``full``
    adds Stirling's ``y log(y) - y + log(2 pi y) / 2`` where ``y > 1``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + ops.where(target <= 1, 0.0, stirling)
    return _reduce(loss, reduction)


def multi_margin_loss(
    input,
    target,
    p=1,
    margin=1.0,
    weight=None,
    size_average=None,
    reduce=None,
    reduction="mean",
):
    """Per sample ``sum_{j != y} w_y max(0, margin - x_y + x_j)^p / C`` of ``(N, C)`` or
    ``(C,)`` scores and class indices ``y``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    if not (input.ndim == 0 or (input.ndim <= 2 and input.shape[-1])):
        raise RuntimeError(
            "Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
            f"{list(input.shape)}"
        )
    x = input.reshape(-1, input.shape[-1] if input.ndim else 1)
    n, c = x.shape
    if target.ndim > 1 or target.numel() != n:
        raise RuntimeError(
            "multi_margin_loss: target tensor should be 1-D with size equal to the number of "
            f"input samples (batch size). Expected target size [{n}], but got "
            f"{list(target.shape)}. Input has shape {list(input.shape)}."
        )
    if weight is not None and weight.numel() != c:
        raise RuntimeError(f"inconsistent weight size, expected {c} but got {list(weight.shape)}")
    if target.dtype is not dt.int64:
        raise RuntimeError(f"expected scalar type Long but found {target.dtype.title}")
    check_range(target, 0, c, RuntimeError, "target out of range")
    onehot = arange(c) == target.reshape(n, 1)
    z = margin - ops.where(onehot, x, 0.0).sum(1, keepdim=True) + x
    h = ops.where(onehot | (z <= 0), 0.0, z)  # as ATen: only z > 0 counts
    if p == 2:
        h = h * h
    if weight is not None:
        h = h * ops.where(onehot, weight, 0.0).sum(1, keepdim=True)
    loss = h.sum(1) / c
    if reduction == "none":
        return loss if target.ndim else loss.reshape(())
    return _reduce(loss, reduction)


def _class_dim_last(x):
    """(N, C, d1, ...) -> (N*d1*..., C), so losses handle one class dim; an unbatched
    (C,) -> (1, C)."""
    if x.ndim == 1:
        return ops.reshape(x, 1, -1)
    if x.ndim == 2:
        return x
    perm = (0,) + tuple(range(2, x.ndim)) + (1,)
    return ops.reshape(ops.permute(x, perm), -1, x.shape[1])


def _check_targets(target, n):
    if target.dtype.is_floating_point or target.dtype.is_complex:
        return
    if target.ndim != 1 or target.shape[0] != n:
        raise ValueError(
            f"Expected input batch_size ({n}) to match target batch_size "
            f"({target.shape[0] if target.ndim else 0})."
        )


def _per_element(loss, input, reduction):
    """An unreduced loss of (N, C, d1, ...) inputs has shape (N, d1, ...), as PyTorch's
    (an unbatched (C,) input's is 0-d)."""
    if reduction != "none" or input.ndim == 2:
        return loss
    if input.ndim == 1:
        return ops.reshape(loss, ())
    return ops.reshape(loss, (input.shape[0],) + tuple(input.shape[2:]))


def nll_loss(
    input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"
):
    """Negative log likelihood of class-index targets, given log-probabilities."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        frame = "nll_loss_out_frame" if input.ndim <= 2 else "nll_loss2d_forward_out_frame"
        raise NotImplementedError(f"\"{frame}\" not implemented for '{input.dtype.title}'")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _per_element(
        _nll(_class_dim_last(input), ops.reshape(target, -1), weight, ignore_index, reduction),
        input,
        reduction,
    )


def _nll(logp, target, weight, ignore_index, reduction, smoothing=0.0):
    _check_class_indices(target, *logp.shape, ignore_index)
    return _nll_checked(logp, target, weight, ignore_index, reduction, smoothing)


def _check_class_indices(target, n, c, ignore_index):
    _check_targets(target, n)
    if target.dtype not in (dt.int64, dt.uint8):
        raise RuntimeError(
            f"expected target dtype to be Long or Byte, but got {target.dtype.title}"
        )
    check_range(
        target.to(dt.int64), 0, c, IndexError, "Target {} is out of bounds.", skip=ignore_index
    )


def _nll_checked(logp, target, weight, ignore_index, reduction, smoothing=0.0):
    c = logp.shape[1]
    onehot = arange(c) == ops.unsqueeze(target, 1)
    picked = ops.where(onehot, logp, 0.0).sum(1)
    valid = (target != ignore_index).to(logp.dtype)
    w = valid
    if weight is not None:
        w = ops.where(onehot, weight, 0.0).sum(1) * valid
    loss = -picked * w
    if smoothing:
        cls_w = weight if weight is not None else 1.0
        smooth = -(logp * cls_w).sum(1) * valid / c
        loss = loss * (1 - smoothing) + smooth * smoothing
    if reduction == "mean":  # ignored targets: zero gradients even when nothing counts
        return ops.where(valid > 0, loss, 0.0).sum() / w.sum()  # (torch's; not 0/0's NaN)
    return _reduce(loss, reduction)


def cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
    label_smoothing=0.0,
):
    """Cross entropy of logits against class indices (int64) or class probabilities.

    Example:
        >>> loss = F.cross_entropy(model(x), y)
    """
    if not isinstance(target, Tensor):
        raise TypeError(f"cross_entropy(): target must be a Tensor, got {type(target).__name__}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    fast = (  # the fused kernel's case: checked below, then no log_softmax of its own
        isinstance(input, Tensor)
        and input.ndim == 2
        and target.ndim == 1
        and target.dtype is dt.int64
        and weight is None
        and not label_smoothing
        and reduction == "mean"
        and fused.fusable(input)
    )
    logp = None if fast else _class_dim_last(ops.log_softmax(input, 1 if input.ndim > 1 else 0))
    if target.dtype.is_floating_point and tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(
            at_user(
                f"cross_entropy(): target has dtype {target.dtype} and shape {list(target.shape)}, "
                f"input has shape {list(input.shape)}. Class indices must be an integer tensor: "
                "use target.long(); a floating-point target holds class probabilities and needs "
                "the input's shape"
            )
        )
    if target.dtype.is_floating_point:
        c = logp.shape[-1]
        probs = _class_dim_last(target)
        if label_smoothing:
            probs = probs * (1 - label_smoothing) + label_smoothing / c
        if weight is not None:  # per class; "mean" still divides by the batch size
            probs = probs * weight
        return _per_element(_reduce(-(logp * probs).sum(-1), reduction), input, reduction)
    if target.dtype is dt.bool_:
        raise RuntimeError(at_user("expected scalar type Long but found Bool"))
    if target.ndim == input.ndim and input.ndim > 1:  # indices have no class dim
        raise RuntimeError(
            at_user(
                "Expected floating point type for target with class probabilities, got "
                f"{target.dtype.title} (class indices have no class dimension: target of "
                f"shape {list(target.shape)} for input {list(input.shape)})"
            )
        )
    if fast:
        _check_class_indices(target, *input.shape, ignore_index)
        return _cross_entropy(input, target, ignore_index=int(ignore_index))
    return _per_element(
        _nll(logp, ops.reshape(target, -1), weight, ignore_index, reduction, label_smoothing),
        input,
        reduction,
    )


_cross_entropy = ad.Fused(
    "cross_entropy",
    fused.cross_entropy_impl,
    lambda input, target, *, ignore_index: _nll_checked(
        log_softmax(input, 1), target, None, ignore_index, "mean"
    ),
    vjp=fused.CROSS_ENTROPY_VJP,
    node_name="NllLossBackward0",
)


# every public function here names the user's line in its errors (staged/_where.py); the
# table's are already wrapped
globals().update(
    {
        _n: sited(_f)
        for _n, _f in list(globals().items())
        if isinstance(_f, types.FunctionType)
        and not _n.startswith("_")
        and _f.__module__.startswith("staged.")
        and not getattr(_f, "sited", False)
    }
)
