"""nn.functional: layers and losses as functions, composed from staged ops."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from .. import autodiff as ad
from .. import dtypes as dt
from .._utilities import can_cast
from .._native import is_function
from .._where import at_user, warn_user
from ..eager import autocast as _autocast
from ..eager import ops
from ..autograd.function import Function
from ..eager import factories
from ..eager.factories import arange, ones
from ..eager.grad_mode import no_grad
from ..eager.interceptor import current_interceptor
from ..eager.checks import check_range, require
from ..eager.ops.layers import (
    _avg_pool,
    _check_indices,
    _const,
    _conv,
    _conv_transpose,
    _lowest,
    _max_pool,
    _take_rows,
    _tuple,
    check_window_args,
    avg_pool1d,  # noqa: F401
    avg_pool2d,  # noqa: F401
    batch_norm,  # noqa: F401
    conv1d,  # noqa: F401
    conv2d,  # noqa: F401
    conv_transpose1d,  # noqa: F401
    conv_transpose2d,  # noqa: F401
    conv_tbc,  # noqa: F401
    dropout,
    dense_embedding,
    embedding_renorm_,  # torch.embedding_renorm_ too: staged/__init__.py
    grad_by_freq,
    interpolate as _interpolate,
    layer_norm,  # noqa: F401
    max_pool1d,  # noqa: F401
    max_pool2d,  # noqa: F401
    one_hot,  # noqa: F401
    output_sizes as _output_sizes,
    pad,  # noqa: F401
    unfold,  # noqa: F401
)
from ..autodiff import fused
from ..eager.ops.linalg import linear  # noqa: F401
from ..eager.ops._operands import floating_kernel, fresh, promote_types
from ..eager.ops.inplace import _named
from ..eager.ops.reduction import in_float32
from ..eager.random.generator import default_generator
from ..eager.tensor import Tensor
from .multi_head_attention import multi_head_attention_forward  # noqa: F401
from .. import sparse as _sparse

globals().update(ops.table.functional())  # relu, tanh, gelu ... (staged/eager/ops/table.py)


def _softmax_dim(name, input, dim):
    """``dim``, or for ``None`` torch's legacy default (0 for 0-, 1- and 3-D ``input``, else
    1), warned as torch does (at the user's line: ``_stacklevel`` is not needed)."""
    if dim is None:
        warn_user(
            f"Implicit dimension choice for {name} has been deprecated. Change the call to "
            "include dim=X as an argument."
        )
        return 0 if input.ndim in (0, 1, 3) else 1
    return dim


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """Softmax over ``dim`` (computed in ``dtype`` if given)."""
    return ops.softmax(input, _softmax_dim("softmax", input, dim), dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-input, dim)`` (computed in ``dtype`` if given)."""
    dim = _softmax_dim("softmin", input, dim)
    return ops.softmax(-(input if dtype is None else input.to(dtype)), dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """Log-softmax over ``dim`` (computed in ``dtype`` if given)."""
    return ops.log_softmax(input, _softmax_dim("log_softmax", input, dim), dtype)


# --- activations ---------------------------------------------------------------------------
def _activation(input, inplace, fn, name, kernel=None):
    """``fn(input)`` (half precision computed in float32). ``inplace=True`` writes the result
    into ``input``, computed from a copy so that what ``fn`` saved for backward stays intact,
    its Node named ``name`` as torch's in-place kernel's. ``kernel``: torch's kernel's name,
    which refuses a non-floating ``input``."""
    if kernel is not None:
        floating_kernel(kernel, input)
    fn = in_float32(fn)
    return _written(input, name, lambda: input.copy_(fn(input.clone()))) if inplace else fn(input)


def _written(input, name, write):
    """``write()``'s result, an in-place write into ``input``, its Node named ``name``."""
    before = input.grad_fn if input._base is None else None
    return _named(write(), before, name)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``x`` where ``x > 0``, else ``negative_slope * x``."""
    return _activation(
        input,
        inplace,
        lambda x: ad.leaky_relu(x, negative_slope=float(negative_slope)),
        "LeakyReluBackward1",
        "leaky_relu_cpu",
    )


def _elu_composite(x, *, alpha, scale, input_scale):
    """ATen's elu: ``scale * x`` where ``x > 0``, else ``scale * alpha * (exp(input_scale * x)
    - 1)``; the exp sees only the non-positive part, so no inf meets a zero gradient."""
    pos = x > 0
    return ops.where(
        pos, x * scale, ops.expm1(ops.where(pos, 0.0, x) * input_scale) * (alpha * scale)
    )


# eagerly one kernel each, with torch's Node names (the composite bound 6 primitives)
_ELU, _CELU = (
    ad.Fused(name, fused.elu_impl, _elu_composite, vjp=fused.ELU_VJP, node_name=node)
    for name, node in (("elu", "EluBackward0"), ("celu", "CeluBackward0"))
)


def _elu(x, alpha, scale=1.0, input_scale=1.0, kernel=_ELU):
    kernel = kernel if fused.fusable(x) else _elu_composite
    return kernel(x, alpha=float(alpha), scale=float(scale), input_scale=float(input_scale))


def elu(input, alpha=1.0, inplace=False):
    return _activation(input, inplace, lambda x: _elu(x, alpha), "EluBackward1", "elu_cpu")


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(input, inplace=False):
    return _activation(
        input, inplace, lambda x: _elu(x, _SELU_ALPHA, _SELU_SCALE), "EluBackward1", "elu_cpu"
    )


def celu(input, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _activation(
        input,
        inplace,
        lambda x: _elu(x, alpha, 1.0, 1.0 / alpha, _CELU),
        "CeluBackward1",
        "elu_cpu",
    )


def mish(input, inplace=False):
    """``x * tanh(softplus(x))``."""
    return _activation(
        input, inplace, lambda x: x * ops.softplus(x).tanh(), "MishBackward0", "mish_cpu"
    )


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``x`` clamped to ``[min_val, max_val]``; the gradient is 0 at the bounds, as torch's."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if input.dtype is dt.bool_:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if not input.dtype.is_floating_point:  # integers clamp to integer bounds, as torch's
        lo_i, hi_i = int(min_val), int(max_val)
        if input.dtype is dt.uint8 and min(lo_i, hi_i) < 0:
            raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
        return input.clamp_(lo_i, hi_i) if inplace else input.clamp(lo_i, hi_i)
    lo, hi = float(min_val), float(max_val)
    return _activation(
        input, inplace, lambda x: ad.hardtanh(x, min_val=lo, max_val=hi), "HardtanhBackward0"
    )


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``, differentiated as torch's: 1 / 6 strictly inside (-3, 3), 0
    elsewhere and at NaN (where hardtanh's gradient passes through)."""

    def fn(x):
        inside = (x > -3) & (x < 3)
        return ops.where(inside, (x + 3) / 6, hardtanh(x.detach() + 3, 0.0, 6.0) / 6)

    return _activation(input, inplace, fn, "HardsigmoidBackward0", "hardsigmoid_cpu")


def hardswish(input, inplace=False):
    """``x * relu6(x + 3) / 6`` by pieces as torch 2.13 differentiates it: ``x * 0`` to -3
    (NaN at -inf, as torch's value), ``x (x + 3) / 6`` inside, then ``x`` (NaN too): the
    gradient is 0 at -3 and the incoming gradient at 3, and the second derivative 0 at both."""

    def fn(x):
        inside = (x > -3) & (x < 3)
        m = ops.where(inside, x, 0.0)  # finite where not taken: no 0 * inf in its gradient
        # (x * 0 detached: torch's gradient there is 0 even for a NaN or inf cotangent)
        return ops.where(x <= -3, (x * 0).detach(), ops.where(inside, m * (m + 3) / 6, x))

    return _activation(input, inplace, fn, "HardswishBackward0", "hardswish_cpu")


def logsigmoid(input):
    """``log(sigmoid(x))``: ``-log1p(exp(-x))`` for ``x >= 0``, ``x - log1p(exp(x))`` below,
    each branch stable and smooth (exact where ``-softplus(-x)``'s linear branch, past its
    threshold of 20, is not; its derivatives at 0 are torch's, as ``min(x, 0)``'s are not)."""
    floating_kernel("log_sigmoid_cpu", input)
    return in_float32(_logsigmoid)(input)


def _logsigmoid(x):
    pos = x >= 0
    xp, xn = ops.where(pos, x, 0.0), ops.where(pos, 0.0, x)  # each branch's own, finite
    # 0 - log1p(..): +0 where exp(-x) underflows, as torch's min(x, 0) - log1p(exp(-|x|))
    return ops.where(pos, 0.0 - ops.log1p(ops.exp(-xp)), xn - ops.log1p(ops.exp(xn)))


def softsign(input):
    return input / (input.abs() + 1)


def tanhshrink(input):
    return input - input.tanh()


def relu(input, inplace=False):
    """``max(x, 0)``; ``inplace=True`` is ``input.relu_()``."""
    return input.relu_() if inplace else ops.relu(input)


def relu_(input):
    return input.relu_()


def silu(input, inplace=False):
    """``x * sigmoid(x)``; ``inplace=True`` writes it into ``input``."""
    floating_kernel("silu_cpu", input)
    return _activation(input, True, ops.silu, "SiluBackward0") if inplace else ops.silu(input)


def _threshold(x, threshold, value):
    return ops.where(x <= threshold, value, x).to(x.dtype)


def _thresholded(input, at, value, inplace):
    """``value`` where ``input <= at``, else ``input`` (NaN stays NaN)."""
    if input.dtype is dt.bool_ or input.dtype.is_complex:
        floating_kernel("threshold_cpu", input)
    return _activation(input, inplace, lambda x: _threshold(x, at, value), "ThresholdBackward1")


def threshold(input, threshold, value, inplace=False):
    return _thresholded(input, threshold, value, inplace)


def threshold_(input, threshold, value):
    return _thresholded(input, threshold, value, True)


def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    floating_kernel("softshrink_check", input)
    if lambd < 0:
        raise RuntimeError(
            f"lambda must be in range [0, {np.finfo(input.dtype.np).max:g}] for input dtype "
            f"{input.dtype.title}, but found {lambd:g}"
        )
    return in_float32(_softshrink)(input, lambd)


def _softshrink(x, lambd):
    """+0 inside the band (torch's kernel: no -0.0 for a negative ``x``), NaN kept, with
    gradient 0 there, as torch's."""
    # detached: the band's gradient is 0 whatever the incoming one (torch's where(|x| > lambd,
    # grad, 0)); through x * 0 a NaN or inf cotangent came out NaN
    inside = (x * 0).abs().detach()
    return ops.where(x > lambd, x - lambd, ops.where(x < -lambd, x + lambd, inside))


def glu(input, dim=-1):
    """``a * sigmoid(b)`` of the halves ``a, b`` of ``input`` along ``dim``."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim % input.ndim
    if input.shape[d] % 2:
        raise RuntimeError(
            f"Halving dimension must be even, but dimension {d} is size {input.shape[d]}"
        )
    floating_kernel("glu_cpu", input)
    return _glu(input, d)


@in_float32
def _glu(x, d):
    a, b = ops.chunk(x, 2, d)
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
    return fresh(x.reshape(*batch, c // (r * r), h * r, w * r), input)  # r = 1: a copy


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
    return fresh(x.reshape(*batch, c * r * r, h // r, w // r), input)  # r = 1: a copy


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
    return _rms(input, tuple(range(-k, 0)), eps, weight)


@in_float32
def _rms(x, dims, eps, weight):
    """``x`` over its root mean square (and times ``weight``): half types in float32,
    rounded once, as torch's."""
    eps = float(np.finfo(x.dtype.np).eps) if eps is None else eps
    y = x * ops.rsqrt((x * x).mean(dims, keepdim=True) + eps)
    return y if weight is None else y * weight


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
    kernel = f"adaptive_{'max' if max_pool else 'avg'}_pool{'3d_cpu' if n == 3 else '2d'}"
    if max_pool:
        floating_kernel(kernel, input)
        _check_nonempty(name, input.shape, range(1, input.ndim))
    elif not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{input.dtype.title}'")
    sizes = tuple(input.shape[-n:])
    out = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * n
    if len(out) != n:
        raise RuntimeError(f"{name}: output_size must be {n}")
    out = tuple(s if o is None else int(o) for o, s in zip(out, sizes))
    one = (1,) * (n == 1)  # torch's 1-D adaptive pools are 2-D ones of height 1
    if min(out) < 0 and max_pool:
        full = [*input.shape[:-n], *one, *out]
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(out)}: {full}")
    if min(out) < 0:
        shown = ", ".join(map(str, one + out))
        if n == 3:  # (torch's spacing)
            shown = f"{out[0]}, {out[1]},{out[2]}"
        raise RuntimeError(
            f"adaptive_avg_pool{n + len(one)}d: elements of output_size must be greater than "
            f"or equal to 0 but received {{{shown}}}"
        )
    if not max_pool:
        as_torch = (*input.shape[:-n], *one, *sizes)
        first = len(as_torch) - 2 if n < 3 else int(len(as_torch) == 5)  # (2-D: H, W only)
        _check_nonempty(f"adaptive_avg_pool{n + len(one)}d", as_torch, range(first, len(as_torch)))
    return sizes, out


def _check_nonempty(name, shape, dims) -> None:
    """torch's check that an adaptive pool's input is not empty along ``dims``."""
    for d in dims:
        if shape[d] == 0:
            raise RuntimeError(
                f"{name}(): Expected input to have non-zero size for non-batch dimensions, "
                f"but input has sizes {list(shape)} with dimension {d} being empty"
            )


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
    return fresh(x, input)  # the input's own size: a copy, as torch's


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
    if input.dtype.is_floating_point:  # torch's pick: the last NaN of a window with one
        nan = windows.isnan()
        last = (k - 1) - nan.flip(-1).to(dt.int32).argmax(-1)
        at = ops.where(nan.any(-1), last, at)
        y = windows.gather(-1, at.unsqueeze(-1)).squeeze(-1)
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
        warn_user(
            f"{name}: Received a {ndim}-D input to {name}, which is deprecated and will result "
            f"in an error in a future release. To retain the behavior and silence this "
            f"warning, please use dropout instead. Note that {name} exists to provide "
            f"channel-wise dropout on inputs with {n} spatial dimensions, a channel dimension, "
            f"and an optional batch dimension (i.e. {n + 1}D or {n + 2}D inputs)."
        )


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Channel dropout of ``(N, C, H, W)``; a 3-D input is taken as ``(N, C, L)``, as torch."""
    _check_probability(p)
    _warn_dims("dropout2d", 2, input.ndim)
    if input.ndim == 3:
        warn_user(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead."
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
    return _alpha_dropout(input, p, training, inplace, feature=False)


def _alpha_dropout(input, p, training, inplace, feature):
    """ATen's alpha dropout: the keep mask has ``input``'s shape, or with ``feature`` one
    entry per channel ``input[n, c]``."""
    _check_probability(p)
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return input.mul_(0.0) if inplace else input * 0.0
    if feature and input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = (*input.shape[:2], *(1,) * (input.ndim - 2)) if feature else input.shape
    keep = (dropout(ones(*shape, dtype=input.dtype), p) != 0).to(input.dtype)
    alpha = 1.7580993408473766  # -SELU's alpha * scale
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    out = input * (keep * a) + ((keep - 1) * (alpha * a) + alpha * a * p)
    return input.copy_(out) if inplace else out


# torch's top-level dropouts (``torch.dropout(input, p, train)``): staged/__init__.py
def _torch_dropout(input, p, train):
    return dropout(input, p, train)


def _torch_dropout_(input, p, train):
    return dropout(input, p, train, inplace=True)


def _torch_feature_dropout(input, p, train, inplace=False):
    """Dropout of whole channels ``input[n, c]`` of any input of 2 or more dims."""
    _check_probability(p)
    return _feature_dropout(input, p, train, inplace, batched=True)


def _torch_feature_dropout_(input, p, train):
    return _torch_feature_dropout(input, p, train, inplace=True)


def _torch_alpha_dropout(input, p, train):
    return _alpha_dropout(input, p, train, False, feature=False)


def _torch_alpha_dropout_(input, p, train):
    return _alpha_dropout(input, p, train, True, feature=False)


def _torch_feature_alpha_dropout(input, p, train):
    return _alpha_dropout(input, p, train, False, feature=True)


def _torch_feature_alpha_dropout_(input, p, train):
    return _alpha_dropout(input, p, train, True, feature=True)


def embedding(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Rows of ``weight`` picked by the int64 ``input``; row ``padding_idx`` gets no
    gradient. ``max_norm``: the rows picked are first renormalized in ``weight`` itself
    (``embedding_renorm_``, without grad); ``scale_grad_by_freq``: each row's gradient
    is divided by how often ``input`` picks it; ``sparse``: ``weight.grad`` is a sparse
    COO tensor (Note [sparse gradients] in staged/sparse.py).

    Example:
        >>> F.embedding(staged.tensor([[0, 2]]), staged.randn(3, 4)).shape
        staged.Size([1, 2, 4])
    """
    args = (input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq)
    if sparse:
        return _sparse.embedding(*args)
    return dense_embedding(*args)


def _torch_embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """``torch.embedding``: ``F.embedding``'s arguments in ATen's order, a negative
    ``padding_idx`` for none."""
    pad = None if padding_idx < 0 else padding_idx
    return embedding(indices, weight, pad, None, 2.0, scale_grad_by_freq, sparse)


def _torch_batch_norm(
    input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled
):
    """``torch.batch_norm``: ``F.batch_norm``'s arguments in ATen's order, all required
    (``cudnn_enabled`` changes nothing on the CPU)."""
    return batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def _torch_constant_pad_nd(input, pad, value=0):
    """``torch.constant_pad_nd``: ``F.pad``'s constant mode, with ATen's errors."""
    if len(pad) % 2:
        raise RuntimeError(f"Length of pad must be even but instead it equals {len(pad)}")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(
            "Length of pad should be no more than twice the number of dimensions of the "
            f"input. Pad length is {len(pad)}while the input has {input.ndim}dimensions."
        )
    return ops.layers.pad(input, pad, value=value)  # (pad: the argument here)


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
    warn_user(
        f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead."
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
        warn_user(
            f"Using a target size ({target.size()}) that is different to the input "
            f"size ({input.size()}). This will likely lead to incorrect results due "
            f"to broadcasting. Please ensure they have the same size."
        )


def _weighted(loss, input, weight, reduction, mean_over_weight=True):
    """``loss`` times the optional same-size ``weight``, reduced; a weighted "mean" divides
    by the weights' sum (l1, mse) or the element count (huber), as torch."""
    if weight is None:
        return _reduce(loss, reduction)
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    return _reduce(loss * weight, reduction, weight.sum() if mean_over_weight else None)


def _in_common_float(kernel, input, target, out=None):
    """``input`` and ``target`` in their promoted dtype, which torch's ``kernel`` takes only
    floating (a bool target of a float input too); ``out``: the dtype torch writes the loss
    in, which the promoted one must cast to."""
    common = promote_types(input, target)
    if out is not None and not can_cast(common, out):
        raise RuntimeError(
            f"result type {common.title} can't be cast to the desired output type {out.title}"
        )
    if not common.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{common.title}'")
    return input.to(common), target.to(common)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _warn_sizes(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _in_common_float("mse_cpu", input, target)
    d = input - target
    return _weighted(d * d, input, weight, reduction)


@in_float32
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _warn_sizes(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _weighted((input - target).abs(), input, weight, reduction)


def _huber_decomposed(d, *, delta, quadratic, slope):
    """``quadratic * d^2 / 2`` where ``|d| < delta``, else ``slope * (|d| - delta / 2)``.
    The square sees only the small ``d``: where ``d`` is infinite its zero cotangent would
    make ``0 * 2d`` NaN, where torch's gradient is ``slope * sign(d)``."""
    z = d.abs()
    small = z < delta
    q = ops.where(small, d, 0.0)
    return ops.where(small, q * q * (0.5 * quadratic), (z - 0.5 * delta) * slope)


def _huber(d, delta, quadratic, slope, kernel):
    kernel = kernel if fused.fusable(d) else _huber_decomposed
    return kernel(d, delta=delta, quadratic=quadratic, slope=slope)


# one kernel each, with torch's Node names (HuberLossBackward0 or SmoothL1LossBackward0)
_HUBER, _SMOOTH_L1 = (
    ad.Fused(name, fused.huber_impl, _huber_decomposed, vjp=fused.HUBER_VJP, node_name=node)
    for name, node in (("huber", "HuberLossBackward0"), ("smooth_l1", "SmoothL1LossBackward0"))
)


@in_float32
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``d^2 / (2 beta)`` where ``|d| < beta``, else ``|d| - beta / 2``; ``beta=0`` is l1."""
    _warn_sizes(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    input, target = _in_common_float("smooth_l1_cpu", input, target)
    if beta == 0:
        return _reduce((input - target).abs(), reduction)
    return _reduce(_huber(input - target, beta, 1.0 / beta, 1.0, _SMOOTH_L1), reduction)


@in_float32
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``d^2 / 2`` where ``|d| < delta``, else ``delta * (|d| - delta / 2)``."""
    _warn_sizes(input, target)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    input, target = _in_common_float("huber_cpu", input, target, out=input.dtype)
    return _weighted(
        _huber(input - target, delta, 1.0, delta, _HUBER),
        input,
        weight,
        reduction,
        mean_over_weight=False,
    )


def _floating_or_bool(t) -> bool:
    return t.dtype.is_floating_point or t.dtype.is_complex or t.dtype is dt.bool_


def _cannot_write(common, t):
    """torch's error for a loss it computes in place in ``t``'s dtype, which ``common``
    cannot be cast to."""
    raise RuntimeError(
        f"result type {common.title} can't be cast to the desired output type {t.dtype.title}"
    )


def _check_unit_interval(t, name):
    """torch's check that BCE's ``t`` lies in [0, 1]; eager only (it reads the data)."""
    if current_interceptor() is None and not bool(((t >= 0) & (t <= 1)).all()):
        raise RuntimeError(f"all elements of {name} should be between 0 and 1")


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
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {target.dtype.title} but expected {input.dtype.title}")
    floating_kernel("binary_cross_entropy", input)
    return _binary_cross_entropy(input, target, weight, reduction)


@in_float32
def _binary_cross_entropy(input, target, weight, reduction):
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
    if input.dtype.is_floating_point and not _floating_or_bool(target):  # (1 - y) x, in place
        _cannot_write(promote_types(input, target), target)
    if weight is None and pos_weight is None and fused.fusable(input, target):
        return _reduce(_bce_with_logits(input, target), reduction)
    # torch's steps, each into the tensor it starts from (``log_sig.mul_``, ``(1 - y).mul_(x)
    # .sub_(log_sig)``, ``loss.mul_(weight)``): computed in the wider dtype, kept in that
    # tensor's, so the loss has the target's dtype (float32 labels of float64 logits:
    # torchvision's RPN)
    log_sig = logsigmoid(input)
    if pos_weight is not None:
        log_sig = _kept(log_sig * ((pos_weight - 1) * target + 1), log_sig)
    loss = 1 - target
    loss = _kept(loss * input, loss)
    loss = _kept(loss - log_sig, loss)
    return _reduce(loss if weight is None else _kept(loss * weight, loss), reduction)


def _kept(result, into):
    """``result`` in ``into``'s dtype: what an in-place op on ``into`` would leave."""
    return result if result.dtype is into.dtype else result.to(into.dtype)


# eagerly one kernel and torch's BinaryCrossEntropyWithLogitsBackward0 (g (sigmoid(x) - y)),
# where the composite bound 14 primitives
_bce_with_logits = ad.Fused(
    "bce_with_logits",
    fused.bce_with_logits_impl,
    lambda x, y: (1 - y) * x - logsigmoid(x),
    vjp=fused.BCE_WITH_LOGITS_VJP,
    node_name="BinaryCrossEntropyWithLogitsBackward0",
)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """``target * (log(target) - input)`` of log-probabilities ``input`` (``log_target``:
    ``target`` holds log-probabilities too); "batchmean" divides the sum by the batch size."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warn_user(
            "reduction: 'mean' divides the total loss by both the batch size and the "
            "support size.'batchmean' divides only by the batch size, and aligns with "
            "the KL div math definition.'mean' will be changed to behave the same as "
            "'batchmean' in the next major release."
        )
    return _kl_div(input, target, reduction, log_target)


@in_float32
def _kl_div(input, target, reduction, log_target):
    if input.dtype.is_complex or target.dtype.is_complex:
        raise RuntimeError("kl_div: Complex inputs not supported.")
    if not (input.dtype.is_floating_point and target.dtype.is_floating_point):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    if log_target:
        loss = target.exp() * (target - input)
    else:  # torch's: 0 where target is 0, and its gradient there NaN (log(0) + 0 / 0)
        loss = ops.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction)


def _reduction_enum(name: str, reduction, position: int) -> str:
    """ATen's integer ``reduction`` (torch's top-level losses) as F's string: 1 "mean",
    2 "sum", any other "none" (ATen reduces for those two only)."""
    if type(reduction) is not int:
        raise TypeError(
            f"{name}(): argument 'reduction' (position {position}) must be int, not "
            f"{type(reduction).__name__}"
        )
    return {1: "mean", 2: "sum"}.get(reduction, "none")


# torch 2.13's bindings of these two parse their schema's default ``reduction=Mean`` as 0:
# called without it, they reduce nothing
def _torch_kl_div(input, target, reduction=0, *, log_target=False):
    """``torch.kl_div``: ``F.kl_div`` of an integer ``reduction``, without its warning
    for "mean"."""
    return _kl_div(input, target, _reduction_enum("kl_div", reduction, 3), log_target)


_torch_kl_div = _autocast.sited(_torch_kl_div, "kl_div")  # on torch's autocast list, as F's


def _torch_binary_cross_entropy_with_logits(
    input, target, weight=None, pos_weight=None, reduction=0
):
    """``torch.binary_cross_entropy_with_logits``: F's of an integer ``reduction``."""
    reduction = _reduction_enum("binary_cross_entropy_with_logits", reduction, 5)
    return binary_cross_entropy_with_logits(
        input, target, weight, reduction=reduction, pos_weight=pos_weight
    )


_torch_binary_cross_entropy_with_logits = _autocast.sited(
    _torch_binary_cross_entropy_with_logits, "binary_cross_entropy_with_logits"
)  # on torch's autocast list, as F's


@in_float32
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-y x))``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if not _floating_or_bool(input):  # computed in place in an integer x's dtype
        _cannot_write(dt.get_default_dtype(), input)
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
    d = input1 - input2  # (first, as torch's; a float margin makes integers float)
    return _reduce(ops.clamp_min(-target * d + float(margin), 0), reduction)


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
    if not (var.dtype.is_floating_point or var.dtype.is_complex):  # torch's var.clamp_(eps)
        raise RuntimeError(
            f"result type {dt.get_default_dtype().title} can't be cast to the desired output "
            f"type {var.dtype.type_meta}"
        )
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
    floating_kernel("multi_margin_loss_cpu_kernel", input)
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
    if _fused_case(input, target, weight, reduction):
        _check_class_indices(target, *input.shape, ignore_index)
        return _nll_loss(input, target, ignore_index=int(ignore_index))
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
    smooth = None
    if smoothing:
        cls_w = weight if weight is not None else 1.0
        smooth = -(logp * cls_w).sum(1) * valid / c
    if reduction == "mean":  # ignored targets: zero gradients even when nothing counts
        # (torch's; not 0/0's NaN); the smoothing term is reduced apart, as torch's (where
        # no target has weight: NaN, not the sum's inf)
        out = ops.where(valid > 0, loss, 0.0).sum() / w.sum()
        if smoothing:
            out = (
                out * (1 - smoothing)
                + ops.where(valid > 0, smooth, 0.0).sum() / w.sum() * smoothing
            )
        return out
    if smoothing:
        loss = loss * (1 - smoothing) + smooth * smoothing
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
    # the fused kernel's case: checked below, then no log_softmax of its own
    fast = not label_smoothing and _fused_case(input, target, weight, reduction)
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
        if ignore_index >= 0:
            raise RuntimeError(at_user("ignore_index is not supported for floating point target"))
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


def _fused_case(input, target, weight, reduction) -> bool:
    """What the fused cross_entropy and nll_loss kernels take: the mean over (N, C) float32
    or float64 scores of an int64 class index per row, without class weights (half types
    take log_softmax's kernel, rounded as torch's: Note [half softmax])."""
    return (
        isinstance(input, Tensor)
        and input._payload.dtype.itemsize > 2
        and input.ndim == 2
        and target.ndim == 1
        and target.dtype is dt.int64
        and weight is None
        and reduction == "mean"
        and fused.fusable(input)
    )


_nll_loss = ad.Fused(
    "nll_loss",
    fused.nll_loss_impl,
    lambda input, target, *, ignore_index: _nll_checked(input, target, None, ignore_index, "mean"),
    vjp=fused.NLL_LOSS_VJP,
    node_name="NllLossBackward0",
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


# --- 3-D convolution and pooling, *_with_indices, Lp pooling ---------------------------------
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution (cross-correlation) over ``(N, C_in, D, H, W)``, PyTorch's ``conv3d``:
    the N-d windows-and-matmul of ``conv2d``."""
    return _conv(3, "conv3d", input, weight, bias, stride, padding, dilation, groups)


def conv_transpose3d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    """3-D transposed convolution over ``(N, C_in, D, H, W)``, weight
    ``(C_in, C_out / groups, kD, kH, kW)``."""
    return _conv_transpose(
        3,
        "conv_transpose3d",
        input,
        weight,
        bias,
        stride,
        padding,
        output_padding,
        groups,
        dilation,
    )


def max_pool3d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """3-D max pooling; ``return_indices`` adds each maximum's flat ``D*H*W`` index."""
    return _max_pool(
        3, "max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


def avg_pool3d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    """3-D average pooling, PyTorch's ``avg_pool3d`` (divisor rules included)."""
    return _avg_pool(
        3,
        "avg_pool3d",
        input,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )


def max_pool1d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """``max_pool1d`` and the index of each maximum, always."""
    return _max_pool(
        1, "max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode, True
    )


def max_pool2d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """``max_pool2d`` and the flat index of each maximum, always."""
    return _max_pool(
        2, "max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode, True
    )


def max_pool3d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """``max_pool3d`` and the flat index of each maximum, always."""
    return _max_pool(
        3, "max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode, True
    )


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return _adaptive_max_pool(input, 1, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return _adaptive_max_pool(input, 2, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return _adaptive_max_pool(input, 3, output_size, True)


def _lp_pool(n, input, norm_type, kernel_size, stride, ceil_mode):
    """torch's Lp pooling: ``(sum over the window of x^p)^(1/p)``, as the average of
    ``x^p`` times the window size (``p = inf``: the max of ``|x|``)."""
    max_pool, avg_pool = (
        (max_pool1d, avg_pool1d),
        (max_pool2d, avg_pool2d),
        (max_pool3d, avg_pool3d),
    )[n - 1]
    if norm_type == math.inf:
        return max_pool(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -max_pool(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    size = math.prod(_tuple(kernel_size, n, "kernel_size"))
    return (ops.sign(out) * ops.relu(out.abs())).mul(size).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over ``(N, C, L)``: ``(sum x^p)^(1/p)`` per window."""
    return _lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over ``(N, C, H, W)``: ``(sum x^p)^(1/p)`` per window."""
    return _lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over ``(N, C, D, H, W)``: ``(sum x^p)^(1/p)`` per window."""
    return _lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


# --- fractional max pooling ---------------------------------------------------------------------
def _fractional_intervals(sample, size, out, k):
    """torch's pooling window starts along a dim (``generate_intervals``): ``(N, C, out)``
    from one sample per plane, ``floor((i + u) a) - floor(u a)`` with ``a = (size - k) /
    (out - 1)``, computed in the samples' dtype, the last window ending at ``size``."""
    last = factories.full((*sample.shape, 1), size - k, dtype=dt.int64)
    if out <= 1:
        return last[..., :out]
    d = sample.dtype.np.type
    alpha = d(size - k) / d(out - 1)
    i = _const(np.arange(out - 1, dtype=sample.dtype.np))
    u = sample.unsqueeze(-1)
    seq = ops.trunc((i + u) * alpha) - ops.trunc(u * alpha)
    return ops.cat([seq.to(dt.int64), last], -1)


def _fractional_max_pool(n, input, kernel_size, output_size, output_ratio, return_indices, samples):
    """Max pooling over pseudo-random windows (Graham's fractional max pooling): per plane,
    window starts from ``samples`` (drawn as torch draws them when not given), the max of
    each window gathered; indices as ``max_pool``'s."""
    name = f"fractional_max_pool{n}d"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        ratio = output_ratio if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * n
        if len(ratio) > n:
            raise ValueError(
                f"{name} requires output_ratio to either be a single Int or tuple of Ints."
            )
        ratio = tuple(ratio) * (n if len(ratio) == 1 else 1)
        output_size = [int(input.shape[input.ndim - n + d] * ratio[d]) for d in range(n)]
    if samples is None:
        batch = 1 if input.ndim == n + 1 else input.shape[0]
        samples = factories.rand(batch, input.shape[input.ndim - n - 1], n, dtype=input.dtype)
    kernel = _tuple(kernel_size, n, "kernel_size")
    out = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * n
    if len(out) != n:
        raise RuntimeError(f"{name}: output_size must either be a single Int or tuple of Ints")
    out = tuple(int(o) for o in out)
    where_ = f"{name}()" if n == 2 else f"{name}_out()"
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(
            f"{where_}: Expected {n + 1}D or {n + 2}D tensor, but got: {list(input.shape)}"
        )
    for d in range(input.ndim - n - 1, input.ndim):
        if input.shape[d] == 0:
            raise RuntimeError(
                f"{where_}: Expected input to have non-zero size for non-batch dimensions, but "
                f"got{list(input.shape)} with dimension {d} being empty."
            )
    sizes = tuple(input.shape[-n:])
    names = ("height", "width") if n == 2 else ("time", "height", "width")
    order = (0, 1) if n == 2 else (0, 2, 1)  # torch checks 3-D's width before its height
    for d in order:
        fits = out[d] + kernel[d] - 1 <= sizes[d] if n == 2 else out[d] + kernel[d] - 1 < sizes[d]
        if not fits:
            raise RuntimeError(
                f"{where_}: pool {names[d]} {kernel[d]} too large relative to input "
                f"{names[d]} {sizes[d]}"
            )
    x = input if input.ndim == n + 2 else input.unsqueeze(0)
    if samples.dtype is not input.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if samples.shape[2] != n:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {n}; got {samples.shape[2]}.")
    if samples.shape[0] < x.shape[0]:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    nb, c = x.shape[:2]
    samples = samples[:nb]
    # which sample each spatial dim uses: (W, H) in 2-D, (T, H, W) in 3-D, as torch's
    which = (1, 0) if n == 2 else (0, 1, 2)
    index = None  # the flat input index of every window element: (N, C, *out, *kernel)
    for d in range(n):
        start = _fractional_intervals(samples[..., which[d]], sizes[d], out[d], kernel[d])
        pos = start.unsqueeze(-1) + arange(kernel[d])  # (N, C, out_d, k_d)
        shape = [nb, c] + [out[e] if e == d else 1 for e in range(n)]
        shape += [kernel[e] if e == d else 1 for e in range(n)]
        pos = pos.reshape(shape)
        index = pos if index is None else index * sizes[d] + pos
    index = index.expand(nb, c, *out, *kernel).reshape(nb, c, *out, -1)
    flat = x.reshape(nb, c, -1)
    windows = ops.gather(flat, 2, index.reshape(nb, c, -1)).reshape(index.shape)
    y, at = windows.max(-1)
    if input.ndim == n + 1:
        y = y.squeeze(0)
    if not return_indices:
        return y
    idx = ops.gather(index, -1, at.unsqueeze(-1)).squeeze(-1)
    return y, (idx.squeeze(0) if input.ndim == n + 1 else idx)


def fractional_max_pool2d(
    input,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices=False,
    _random_samples=None,
):
    """2-D fractional max pooling of ``(N, C, H, W)`` to ``output_size`` (or
    ``output_ratio`` of the input's); the windows' random starts come from
    ``_random_samples`` ``(N, C, 2)``, by default ``staged.rand`` (torch's draws)."""
    return _fractional_max_pool(
        2, input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )


def fractional_max_pool3d(
    input,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices=False,
    _random_samples=None,
):
    """3-D fractional max pooling of ``(N, C, D, H, W)``; ``_random_samples`` ``(N, C, 3)``."""
    return _fractional_max_pool(
        3, input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )


def fractional_max_pool2d_with_indices(
    input,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices=False,
    _random_samples=None,
):
    return _fractional_max_pool(
        2, input, kernel_size, output_size, output_ratio, True, _random_samples
    )


def fractional_max_pool3d_with_indices(
    input,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices=False,
    _random_samples=None,
):
    return _fractional_max_pool(
        3, input, kernel_size, output_size, output_ratio, True, _random_samples
    )


# --- unpooling, fold ----------------------------------------------------------------------------
def _unpool_output_size(input, kernel, stride, padding, output_size):
    """torch's output size of max unpooling: ``(in - 1) * stride + kernel - 2 * padding``
    per dim, or ``output_size`` (its last ``len(kernel)`` entries) within a stride of it."""
    k = len(kernel)
    default = [
        (input.shape[input.ndim - k + d] - 1) * stride[d] + kernel[d] - 2 * padding[d]
        for d in range(k)
    ]
    if output_size is None:
        return default
    if len(output_size) == k + 2:
        output_size = output_size[2:]
    if len(output_size) != k:
        raise ValueError(
            f"output_size should be a sequence containing {k} or {k + 2} elements, but it has "
            f"a length of '{len(output_size)}'"
        )
    for d in range(k):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < output_size[d] < hi:
            raise ValueError(
                f'invalid output_size "{output_size}" (dim {d} must be between {lo} and {hi})'
            )
    return output_size


def _unpool_size(n, input, kernel_size, stride, padding, output_size):
    kernel = _tuple(kernel_size, n, "kernel_size")
    stride = kernel if stride is None else _tuple(stride, n, "stride")
    return tuple(
        _unpool_output_size(input, kernel, stride, _tuple(padding, n, "padding"), output_size)
    )


def _max_unpool(n, input, indices, out):
    """``n``-d max unpooling (``n`` 2 or 3) to spatial size ``out``: zeros, with each input
    value at its flat index (the gradient gathers it back)."""
    if indices.dtype is not dt.int64:
        got = "" if n == 3 else f" but got: {indices.dtype.title}"  # torch's words
        raise RuntimeError(f"elements in indices should be type int64{got}")
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(
            f"Input to max_unpooling{n}d should be a {n + 1}d or {n + 2}d Tensor, but got a "
            f"tensor with {input.ndim} dimensions."
        )
    if tuple(input.shape) != tuple(indices.shape):
        raise RuntimeError(
            "Expected shape of indices to be same as that of the input tensor "
            f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}"
        )
    for d in range(1, input.ndim):
        if input.shape[d] == 0:
            raise RuntimeError(
                f"max_unpooling{n}d_forward_out_cpu(): Expected input to have non-zero size for "
                f"non-batch dimensions, but got {list(input.shape)} with dimension {d} being "
                "empty."
            )
    lead, plane = tuple(input.shape[:-n]), math.prod(out)
    flat = indices.reshape(*lead, -1)
    check_range(
        flat,
        0,
        plane,
        RuntimeError,
        "Found an invalid max index: {} (output volumes are of size "
        + "x".join(map(str, out))
        + ")",
    )
    y = ops.scatter(
        factories.zeros(*lead, plane, dtype=input.dtype), -1, flat, input.reshape(*lead, -1)
    )
    return y.reshape(*lead, *out)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool1d``: each value at its index, zeros elsewhere."""
    size = _unpool_size(1, input, kernel_size, stride, padding, output_size)
    return _max_unpool(2, input.unsqueeze(-1), indices.unsqueeze(-1), (*size, 1)).squeeze(-1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool2d``: each value at its flat ``H*W`` index, zeros
    elsewhere.

    Example:
        >>> y, i = F.max_pool2d(x, 2, return_indices=True)
        >>> F.max_unpool2d(y, i, 2)     # x's maxima in place, zeros elsewhere
    """
    size = _unpool_size(2, input, kernel_size, stride, padding, output_size)
    return _max_unpool(2, input, indices, size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool3d``: each value at its flat ``D*H*W`` index."""
    size = _unpool_size(3, input, kernel_size, stride, padding, output_size)
    return _max_unpool(3, input, indices, size)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """PyTorch's ``F.fold`` (col2im), the adjoint of ``F.unfold``: ``(N, C*kH*kW, L)`` blocks
    summed into ``(N, C, *output_size)`` (overlaps add)."""
    out, kernel = _tuple(output_size, 2, "output_size"), _tuple(kernel_size, 2, "kernel_size")
    dil, pad = _tuple(dilation, 2, "dilation"), _tuple(padding, 2, "padding")
    stride = _tuple(stride, 2, "stride")
    check_window_args(kernel=kernel, stride=stride, dilation=dil, padding=pad)
    nd = input.ndim
    if not (nd == 2 and min(input.shape) > 0 or nd == 3 and min(input.shape[1:]) > 0):
        raise RuntimeError(
            "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and "
            f"non-zero dimensions for input, but got: {list(input.shape)}"
        )
    x = input if nd == 3 else input.unsqueeze(0)
    d = 1  # the dim holding C * kH * kW (torch's words count the batch dim, given or not)
    k = kernel[0] * kernel[1]
    if x.shape[d] % k:
        raise RuntimeError(
            f"Expected size of input's dimension {d} to be divisible by the product of "
            f"kernel_size, but got input.size({d})={x.shape[d]} and "
            f"kernel_size=({kernel[0]}, {kernel[1]})."
        )
    blocks = [
        (o + 2 * p - di * (kk - 1) - 1) // s + 1
        for o, p, di, kk, s in zip(out, pad, dil, kernel, stride)
    ]
    given = (
        f"Given output_size=({out[0]}, {out[1]}), kernel_size=({kernel[0]}, {kernel[1]}), "
        f"dilation=({dil[0]}, {dil[1]}), padding=({pad[0]}, {pad[1]}), "
        f"stride=({stride[0]}, {stride[1]}), "
    )
    if x.shape[2] != blocks[0] * blocks[1]:
        raise RuntimeError(
            f"{given}expected size of input's dimension 2 to match the calculated number of "
            f"sliding blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
            f"input.size(2)={x.shape[2]}."
        )
    if min(blocks) < 1:
        raise RuntimeError(
            f"{given}calculated shape of the array of sliding blocks as ({blocks[0]}, "
            f"{blocks[1]}), which is too small (non-positive)"
        )
    c = x.shape[1] // k
    cols = x.reshape(x.shape[0], c, *kernel, *blocks).permute(0, 4, 5, 1, 2, 3)
    y = ad.col2im(
        cols,
        shape=out,
        kernel=kernel,
        stride=stride,
        padding=tuple((p, p) for p in pad),
        dilation=dil,
    )
    return y if nd == 3 else y.squeeze(0)


# --- local response normalisation ---------------------------------------------------------------
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """``x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta`` over dim 1
    of a 3-D or wider input (torch's composition: zero-padded average pooling)."""
    dim = input.ndim
    if dim < 3:
        raise ValueError(
            f"Expected 3D or higher dimensionality                          input (got {dim} "
            "dimensions)"
        )
    if input.numel() == 0:
        return input
    div = input.mul(input)
    if dim == 3:
        div = pad(div.unsqueeze(1), (0, 0, size // 2, (size - 1) // 2))
        div = avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = input.shape
        div = div.reshape(sizes[0], 1, sizes[1], sizes[2], -1)
        div = pad(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = avg_pool3d(div, (size, 1, 1), stride=1).squeeze(1).reshape(sizes)
    return input / div.mul(alpha).add(k).pow(beta)


def _cross_map_windows(channels, size):
    """The constant (C, C) windows of torch's legacy ``CrossMapLRN2d``: its forward's running
    sum (which, as torch's, keeps channel 0 in every window once ``c > (size - 1) // 2 + 1``)
    and its backward's ``size``-channel window ``[c - inversePrePad, c + size - 1 -
    inversePrePad]``."""
    pre_pad = int((size - 1) / 2 + 1)
    fwd = np.zeros((channels, channels))
    fwd[0, : min(pre_pad, channels)] = 1
    for c in range(1, channels):
        fwd[c] = fwd[c - 1]
        if c < channels - pre_pad + 1:
            fwd[c, c + pre_pad - 1] += 1
        if c > pre_pad:
            fwd[c, c - pre_pad] -= 1
    inverse = int(size - (size - 1) / 2)
    j = np.arange(channels)
    bwd = (j[None, :] >= j[:, None] - inverse) & (j[None, :] <= j[:, None] + size - 1 - inverse)
    return fwd, bwd.astype(np.float64)


class _CrossMapLRN2dFunction(Function):
    """torch's legacy ``_cross_map_lrn2d``: its forward and its own backward formula."""

    @staticmethod
    def forward(ctx, input, size, alpha, beta, k):
        fwd, bwd = _cross_map_windows(input.shape[1], size)
        ctx.size, ctx.alpha, ctx.beta, ctx.bwd = (
            size,
            alpha,
            beta,
            _const(bwd.astype(input.dtype.np)),
        )
        squares = ops.movedim(input * input, 1, -1)
        scale = (
            ops.movedim(squares @ _const(fwd.T.astype(input.dtype.np)), -1, 1) * (alpha / size) + k
        )
        output = scale.pow(-beta) * input
        ctx.save_for_backward(input, output, scale)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, output, scale = ctx.saved_tensors
        ratio = ops.movedim(grad_output * output / scale, 1, -1) @ ctx.bwd.mT
        cache = 2 * ctx.alpha * ctx.beta / ctx.size
        grad = scale.pow(-ctx.beta) * grad_output - cache * input * ops.movedim(ratio, -1, 1)
        return grad, None, None, None, None


# --- embedding bags -----------------------------------------------------------------------------
def _has_data(t):
    """Whether ``t``'s values can be read now (not under capture)."""
    return current_interceptor() is None and type(t._payload) is np.ndarray


def _check_offsets(offsets, n, include_last_offset):
    """torch's checks of ``embedding_bag``'s offsets; where their values cannot be read
    (a capture) recorded, raised when the step's results are read (Note [index checks])."""
    if offsets.numel() == 0:
        return
    if not _has_data(offsets):
        require(
            offsets[0] == 0,
            RuntimeError,
            "offsets[0] has to be 0, i.e., the first "
            "sequence in the mini-batch has to start from position 0.",
        )
        require(
            offsets[:-1] <= offsets[1:],
            RuntimeError,
            "embedding_bag: offsets must be non-decreasing",
        )
        require(
            offsets[-1] <= n,
            RuntimeError,
            f"offsets[-1] can not be greater than input's length {n}",
        )
        return
    o = offsets._host()
    if o[0] != 0:
        raise RuntimeError(
            "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
            f"from position 0. However, got {o[0]}"
        )
    if not include_last_offset and o[-1] > n:
        raise RuntimeError(
            f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of {o[-1]}"
        )
    if (np.diff(o) < 0).any() or o[-1] > n:
        raise RuntimeError(
            f"embedding_bag: offsets must be non-decreasing and at most the input's length {n}, "
            f"but got {o.tolist()}"
        )


def embedding_bag(
    input,
    weight,
    offsets=None,
    max_norm=None,
    norm_type=2,
    scale_grad_by_freq=False,
    mode="mean",
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=None,
):
    """Sums, means or maxima of bags of ``weight``'s rows: a 2-D ``input`` holds one bag per
    row; a 1-D one is cut into bags at ``offsets`` (``include_last_offset``: its last entry
    ends the last bag). Entries equal to ``padding_idx`` are left out of their bag (and of a
    mean's count); an empty bag gives zeros. ``per_sample_weights`` scale each row of a sum.

    Example:
        >>> F.embedding_bag(staged.tensor([1, 2, 4, 5]), w, staged.tensor([0, 2]), mode="sum")
    """
    if weight.dtype is dt.int64 and input.dtype.is_floating_point:
        warn_user(
            "Argument order of nn.functional.embedding_bag was changed. Usage "
            "`embedding_bag(weight, input, ...)` is deprecated, and should now be "
            "`embedding_bag(input, weight, ...)`."
        )
        weight, input = input, weight
    if per_sample_weights is not None and input.shape != per_sample_weights.shape:
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then "
            f"it must have the same shape as the input ({input.shape})"
        )
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a "
                "mini-batch of fixed length sequences. However, found offsets of type "
                f"{type(offsets)}"
            )
        offsets = arange(0, input.numel(), input.shape[1], dtype=input.dtype)
        include_last_offset = False
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(
            f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}"
        )
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
            "GitHub."
        )
    for t in (input, offsets):
        _check_indices(t, 1, "embedding_bag")
    v, n = weight.shape[0], input.shape[0]
    if padding_idx is not None:
        if not -v <= padding_idx < v:
            raise RuntimeError(
                f"padding_idx must be within the number of embeddings, -{v} through {v - 1}, "
                f"but got {padding_idx}"
            )
        padding_idx %= v
    check_range(
        input.to(dt.int64),
        0,
        v,
        RuntimeError,
        f"embedding_bag: index {{}} is out of range for a weight of {v} rows",
    )
    _check_offsets(offsets, n, include_last_offset)
    # bag b holds entries [offsets[b], offsets[b + 1]); the last one ends at the input's end,
    # or, with include_last_offset, at the extra last offset (torch's CSR layout)
    starts = offsets.to(dt.int64)
    if include_last_offset:
        starts, ends = starts[:-1], starts[1:]
    else:
        ends = ops.cat([starts[1:], factories.full((1,), n, dtype=dt.int64)])[: starts.shape[0]]
    bags = starts.shape[0]
    pos = arange(n)
    # the bag of each entry: the last that starts at or before it (offsets are sorted)
    bag = (starts.unsqueeze(0) <= pos.unsqueeze(1)).to(dt.int64).sum(1) - 1
    member = (bag.unsqueeze(0) == arange(bags).unsqueeze(1)) & (pos < ends.unsqueeze(1))
    if padding_idx is not None:
        member = member & (input != padding_idx).unsqueeze(0)
    if max_norm is not None:
        with no_grad():
            embedding_renorm_(weight, input, max_norm, norm_type)
    if sparse:  # (n, D), the weight's gradient sparse: the entries' rows, padding left out
        rows = _sparse.embedding(input, weight, padding_idx, None, norm_type, scale_grad_by_freq)
    else:
        rows = _take_rows(weight, input)  # (n, D)
        if scale_grad_by_freq:
            rows = grad_by_freq(rows, weight, input.to(dt.int64))
    if mode == "max":
        picked = ops.where(member.unsqueeze(-1), rows.unsqueeze(0), _lowest(weight.dtype))
        top = picked.max(1)[0]
        return ops.where(member.any(1, keepdim=True), top, 0.0)
    w = member.to(weight.dtype)
    if per_sample_weights is not None:
        w = w * per_sample_weights.unsqueeze(0)
    sums = w @ rows
    if mode == "sum":
        return sums
    return sums / ops.clamp_min(member.sum(1, keepdim=True), 1).to(weight.dtype)


# --- sampling grids -----------------------------------------------------------------------------
_ALIGN_WARNING = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
    "Please specify align_corners=True if the old behavior is desired. See the documentation of "
    "grid_sample for details."
)


def _clip_coordinate(c, size):
    """``c`` clamped to ``[0, size - 1]``; its gradient passes strictly inside only, as
    torch's grid sampler (the borders count as outside)."""
    inside = (c > 0) & (c < size - 1)
    return ops.where(inside, c, ops.clamp(c, 0, size - 1).detach())


def _reflect_coordinate(c, low, twice_span):
    """``c`` reflected into ``[low, low + twice_span / 2]`` (torch's grid sampler), the
    gradient's sign flipping with each reflection."""
    if twice_span <= 0:
        return c * 0
    v = c - low
    a = ops.where(v < 0, -v, v)
    extra = a - ops.trunc(a / twice_span).detach() * twice_span
    return ops.where(extra > twice_span - extra, twice_span - extra, extra) + low


_PRECISION = {dt.float32: 24, dt.float64: 53}  # significand bits


def _fused_position(x, size):
    """``x * (size / 2) - 0.5`` rounded once, as the fused multiply-add of torch's 2-D CPU
    kernel (a position on a pixel's edge falls on torch's side of it, and the gradient with
    it): ``x`` split (Veltkamp) into a high part whose product with ``size / 2`` is exact
    and a low part whose product is too, for sizes of up to 11 significant bits."""
    bits = (size // (size & -size)).bit_length()
    if 2 * bits + 1 > _PRECISION.get(x.dtype, 0):
        return x * (size / 2) - 0.5
    t = x * float(2**bits + 1)
    high = t - (t - x)
    return (high * (size / 2) - 0.5) + (x - high) * (size / 2)


def _source_coordinate(c, size, padding_mode, align_corners, fused=False):
    """A normalised grid coordinate in ``[-1, 1]`` as a position along a dim of ``size``
    (``fused``: torch's 2-D kernel's rounding)."""
    if align_corners:
        c = (c + 1) * ((size - 1) / 2)
    elif fused:
        c = _fused_position(c + 1, size)
    else:
        c = ((c + 1) * size - 1) / 2
    if padding_mode == "border":
        return _clip_coordinate(c, size)
    if padding_mode == "reflection":
        return _clip_coordinate(_reflected(c, size, align_corners), size)
    return c


def _reflected(c, size, align_corners):
    """``c`` reflected at the borders of a dim of ``size`` (its centres with
    ``align_corners``, its edges without), as torch's grid sampler."""
    twice = 2 * (size - 1) if align_corners else 2 * size
    return _reflect_coordinate(c, 0 if align_corners else -0.5, twice)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample ``input`` ``(N, C, H, W)`` (or ``(N, C, D, H, W)``) at ``grid``'s ``(x, y[, z])``
    positions in ``[-1, 1]``: output ``(N, C, *grid.shape[1:-1])``, bilinear (trilinear) or
    nearest, or bicubic (4-D), outside positions zeros or clamped or reflected, as torch's. A
    composition of gathers: gradients reach ``input`` and (bilinear, bicubic) ``grid``.

    Example:
        >>> F.grid_sample(x, F.affine_grid(theta, x.shape, align_corners=False), align_corners=False)
    """
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(
            "nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or "
            f"'bicubic', but got: '{mode}'"
        )
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(
            "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
            f"'reflection', but got: '{padding_mode}'"
        )
    if align_corners is None:
        warn_user(_ALIGN_WARNING)
        align_corners = False
    if grid.dtype is not input.dtype:
        raise RuntimeError(f"expected scalar type {input.dtype.title} but found {grid.dtype.title}")
    # torch's checks, in its order
    sizes = f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(
            f"grid_sampler(): expected grid and input to have same batch size, but got {sizes}"
        )
    n = input.ndim - 2
    if grid.shape[-1] != n:
        raise RuntimeError(
            f"grid_sampler(): expected grid to have size {n} in last dimension, but got grid "
            f"with sizes {list(grid.shape)}"
        )
    for d in range(2, input.ndim):
        if input.shape[d] == 0:
            raise RuntimeError(
                "grid_sampler(): expected input to have non-empty spatial dimensions, but input "
                f"has sizes {list(input.shape)} with dimension {d} being empty"
            )
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise RuntimeError(
            "grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, "
            f"but got {sizes}"
        )
    if mode == "bicubic" and n == 3:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    floating_kernel(
        f"grid_sampler_{n}d_cpu_kernel_impl" if n == 2 else "grid_sampler_3d_cpu", input
    )
    spatial = tuple(input.shape[2:])
    nb, c, out = input.shape[0], input.shape[1], tuple(grid.shape[1:-1])
    # the source position along input dim d (D, H, W) is grid coordinate n - 1 - d (z, y, x);
    # bicubic pads its taps, not the position
    padding = "zeros" if mode == "bicubic" else padding_mode
    pos = [
        _source_coordinate(grid[..., n - 1 - d], size, padding, align_corners, n == 2)
        for d, size in enumerate(spatial)
    ]
    flat = input.reshape(nb, c, -1)

    def corner(index):
        """``input`` at integer positions ``index`` (one (N, *out) tensor per dim), 0 outside."""
        inside, flat_index = None, None
        for i, size in zip(index, spatial):
            ok = (i >= 0) & (i < size)
            inside = ok if inside is None else inside & ok
            i = ops.clamp(i, 0, size - 1)
            flat_index = i if flat_index is None else flat_index * size + i
        idx = flat_index.reshape(nb, 1, -1).expand(nb, c, -1)
        vals = ops.gather(flat, 2, idx).reshape(nb, c, *out)
        return ops.where(inside.unsqueeze(1), vals, 0.0)

    if mode == "bicubic":
        return _bicubic(corner, pos, spatial, padding_mode, align_corners)
    if mode == "nearest":
        # the grid gets torch's gradient, zeros: through a where that never picks it
        link = ops.where(_const(np.ones(out, np.bool_)), 1.0, grid[..., 0])
        return corner([ops.round(p.detach()).to(dt.int64) for p in pos]) * link.unsqueeze(1)
    low = [ops.floor(p.detach()) for p in pos]
    result = None
    for bits in itertools.product((0, 1), repeat=n):
        weight = None
        for b, p, lo in zip(bits, pos, low):
            w = p - lo if b else lo + 1 - p
            weight = w if weight is None else weight * w
        term = corner([(lo + b).to(dt.int64) for b, lo in zip(bits, low)]) * weight.unsqueeze(1)
        result = term if result is None else result + term
    return result


_CUBIC_A = -0.75  # torch's cubic convolution


def _cubic_coefficients(t):
    """The weights of the taps at -1, 0, 1, 2 from a position ``t`` past the second, as
    torch's ``get_cubic_upsample_coefficients``."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return far(t + 1), near(t), near(1 - t), far((1 - t) + 1)


def _bicubic(corner, pos, spatial, padding_mode, align_corners):
    """grid_sample's bicubic: 4 x 4 taps around each position, weighted along x, then
    along y, as torch's kernel; a tap outside is 0, clamped or reflected by ``padding_mode``
    (the grid's gradient comes through the weights)."""
    low = [ops.floor(p.detach()) for p in pos]
    weights = [_cubic_coefficients(p - lo) for p, lo in zip(pos, low)]

    def tap(lo, k, size):
        i = lo + k
        if padding_mode == "reflection":
            i = _reflected(i, size, align_corners)
        if padding_mode != "zeros":
            i = ops.clamp(i, 0, size - 1)
        return i.to(dt.int64)

    (ly, lx), (hy, wx) = low, spatial
    ys, xs = ([tap(lo, k, size) for k in (-1, 0, 1, 2)] for lo, size in ((ly, hy), (lx, wx)))
    result = None
    for wy, y in zip(weights[0], ys):
        row = None
        for w, x in zip(weights[1], xs):
            term = corner([y, x]) * w.unsqueeze(1)
            row = term if row is None else row + term
        term = row * wy.unsqueeze(1)
        result = term if result is None else result + term
    return result


def _base_coordinates(steps, align_corners, dtype):
    """torch's ``linspace_from_neg_one``: ``steps`` positions from -1 to 1, scaled by
    ``(steps - 1) / steps`` unless ``align_corners`` (one step: 0)."""
    if steps <= 1:
        return np.zeros(max(steps, 0), dtype.np)
    r = factories.linspace(-1, 1, steps, dtype=dtype).numpy()  # torch's, not NumPy's, points
    return r if align_corners else (r * dtype.np.type(steps - 1) / dtype.np.type(steps))


def affine_grid(theta, size, align_corners=None):
    """The ``grid_sample`` grid of the affine maps ``theta`` (``(N, 2, 3)`` for a 4-D
    ``size``, ``(N, 3, 4)`` for a 5-D one): ``(N, H, W, 2)`` (``(N, D, H, W, 3)``)."""
    if align_corners is None:
        warn_user(_ALIGN_WARNING)
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = list(size)
    if len(size) in (4, 5):
        k = len(size) - 2
        if theta.ndim != 3 or theta.shape[-2] != k or theta.shape[-1] != k + 1:
            raise ValueError(
                f"Expected a batch of {k}D affine matrices of shape Nx{k}x{k + 1} for size "
                f"{size}. Got {theta.shape}."
            )
    else:
        raise NotImplementedError(
            "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
            f"respectively. Got size {size}."
        )
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warn_user(
            "Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
            "align_corners=True. This is not an intended use case of affine_grid. See the "
            "documentation of affine_grid for details."
        )
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{size[0]}, "
            f"{k + 1}] but got: [{theta.shape[0]}, {k + 1}]."
        )
    # the base grid (x, y[, z], 1) of every output position, x along the last dim
    axes = [_base_coordinates(s, align_corners, theta.dtype) for s in reversed(spatial)]
    mesh = np.meshgrid(*reversed(axes), indexing="ij")[::-1]
    base = np.stack([*mesh, np.ones(mesh[0].shape, theta.dtype.np)], -1).reshape(1, -1, k + 1)
    grid = _const(base) @ theta.mT
    return grid.reshape(size[0], *spatial, k)


# --- random activations and dropout -------------------------------------------------------------
def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """``softmax((logits + g) / tau)`` with Gumbel noise ``g = -log(E)``, ``E`` exponential
    draws from the default generator (torch's numbers after the same seed); ``hard=True``
    returns the one-hot of the argmax with the soft sample's gradient (straight through)."""
    if eps != 1e-10:
        warn_user("`eps` parameter is deprecated and has no effect.")
    gumbels = -factories.empty_like(logits).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = ops.scatter(factories.zeros_like(logits), dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def _rrelu_noise(input, lower, upper):
    """torch's training slopes: one ``uniform(lower, upper)`` draw (``random64``-based
    double, the bounds in the compute precision) per non-positive element in memory order,
    1 elsewhere."""
    if not _has_data(input):
        raise NotImplementedError(
            "F.rrelu(training=True) draws one slope per non-positive input, so the number of "
            "draws depends on the input's values, which a compiled step cannot know: use "
            "training=False (the mean slope) in compiled code, or call it eagerly"
        )
    x = np.ascontiguousarray(input._host())
    acc = np.float64 if x.dtype == np.float64 else np.float32
    lo, hi = float(acc(lower)), float(acc(upper))
    neg = x <= 0
    with default_generator.lock:  # Note [one draw at a time] in eager/random/generator.py
        u = default_generator.uniform(int(neg.sum()), np.float64)
    noise = np.ones(x.shape, x.dtype)
    noise[neg] = (u * (hi - lo) + lo).astype(acc)
    return _const(noise)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: in training, ``x * a`` for ``x <= 0`` with ``a`` drawn from
    ``U(lower, upper)`` per element (torch's draws, eagerly only); in evaluation the leaky
    ReLU of slope ``(lower + upper) / 2``."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        slope = (lower + upper) / 2
        if not inplace:
            return leaky_relu(input, slope)
        write = functools.partial(leaky_relu, input, slope, True)
    else:
        floating_kernel("rrelu_with_noise_out_cpu", input)
        noise = _rrelu_noise(input, lower, upper)
        if not inplace:
            return input * noise
        write = functools.partial(input.mul_, noise)
    return _written(input, "RreluWithNoiseBackward1", write)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, True)


def elu_(input, alpha=1.0):
    return elu(input, alpha, True)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, True)


def selu_(input):
    return selu(input, True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """``alpha_dropout`` of whole channels ``input[n, c]`` (one draw each, torch's mask)."""
    return _alpha_dropout(input, p, training, inplace, feature=True)


# --- distances, channel shuffle -----------------------------------------------------------------
def pdist(input, p=2):
    """The ``p``-norm distances between the rows of ``(N, M)`` ``input``, pairs ``i < j`` in
    row-major order: ``N (N - 1) / 2`` values."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    i, j = np.triu_indices(input.shape[0], 1)
    if not len(i):
        return factories.zeros(0, dtype=input.dtype)
    pick = lambda k: ops.index_select(input, 0, _const(k))  # noqa: E731
    return ops.norm(pick(i) - pick(j), p, 1)


def channel_shuffle(input, groups):
    """``(N, g * k, *) -> (N, k * g, *)``: channel ``i * k + j`` moves to ``j * g + i``
    (ShuffleNet's interleaving of ``groups`` groups)."""
    if input.ndim <= 2:
        raise RuntimeError(
            f"channel_shuffle expects input with > 2 dims, but got input with sizes "
            f"{list(input.shape)}"
        )
    if groups <= 0:
        raise RuntimeError(
            f"Number of groups to divide channels in must be positive. Value of groups:{groups}"
        )
    c = input.shape[1]
    if c % groups:
        raise RuntimeError(
            f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups."
        )
    n, rest = input.shape[0], tuple(input.shape[2:])
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return fresh(x.reshape(input.shape), input)  # one group (or one per channel): a copy


native_channel_shuffle = channel_shuffle


# --- losses -------------------------------------------------------------------------------------
def triplet_margin_with_distance_loss(
    anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False, reduction="mean"
):
    """``max(0, margin + d(a, p) - d(a, n))`` for any distance ``d`` (default
    ``pairwise_distance``); ``swap`` takes ``min(d(a, n), d(p, n))`` for ``d(a, n)``."""
    _check_reduction(reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number "
            f"of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and "
            f"negative {negative.ndim}D inputs"
        )
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = distance(anchor, positive), distance(anchor, negative)
    if swap:
        d_neg = ops.minimum(d_neg, distance(positive, negative))
    return _reduce(ops.clamp_min(margin + d_pos - d_neg, 0), reduction)


@in_float32
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample ``sum_j sum_{i not a target} max(0, 1 - (x[y_j] - x_i)) / C`` over the
    target classes ``y_j``: the entries of ``target``'s row before its first -1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    nd = input.ndim
    if not (nd == 2 and input.shape[1] or nd == 1 and input.shape[0] or nd == 0):
        raise RuntimeError(
            "Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
            f"{list(input.shape)}"
        )
    c = input.shape[-1] if nd else 1
    if (
        nd <= 1
        and not (target.ndim <= 1 and target.numel() == c)
        or nd == 2
        and tuple(target.shape) != tuple(input.shape)
    ):
        raise RuntimeError(
            f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}"
        )
    if target.dtype is not dt.int64:
        raise RuntimeError(f"expected scalar type Long but found {target.dtype.title}")
    check_range(target, -1, c, RuntimeError, "argument #2 'target' is out of range")
    floating_kernel("multilabel_margin_loss_forward_out_frame", input)
    x, t = input.reshape(-1, c), target.reshape(-1, c)
    valid = ops.cumsum((t == -1).to(dt.int64), 1) == 0  # the targets before the first -1
    t = ops.where(valid, t, 0)
    chosen = ((t.unsqueeze(-1) == arange(c)) & valid.unsqueeze(-1)).any(1)  # (N, C)
    z = 1 - ops.gather(x, 1, t).unsqueeze(-1) + x.unsqueeze(1)  # (N, target j, class i)
    keep = valid.unsqueeze(-1) & ~chosen.unsqueeze(1) & (z > 0)
    loss = ops.where(keep, z, 0.0).sum((1, 2)) / c
    if reduction == "none":
        return loss if nd == 2 else loss.reshape(())
    return _reduce(loss, reduction)


def _ctc_lengths(lengths, name):
    """CTC lengths as an int64 (B,) tensor (a 0-d tensor is one length)."""
    if isinstance(lengths, Tensor):
        if lengths.dtype.is_floating_point or lengths.dtype.is_complex or lengths.dtype is dt.bool_:
            raise RuntimeError(f"{name} must be integral")
        return lengths.reshape(-1).to(dt.int64)
    if isinstance(lengths, (list, tuple)):
        return factories.tensor([int(v) for v in lengths], dtype=dt.int64)
    raise TypeError(
        f"ctc_loss(): {name} must be a tensor or a sequence of ints, got {type(lengths).__name__}"
    )


def _logsumexp_safe(*xs):
    """``log(sum(exp(x)))`` of same-shape tensors with torch's CTC guard (a maximum of -inf
    counts as 0) and no NaN in the gradient where every term is -inf."""
    m = xs[0]
    for x in xs[1:]:
        m = ops.maximum(m, x)
    m = ops.where(m == -math.inf, 0.0, m).detach()
    s = None
    for x in xs:
        e = (x - m).exp()
        s = e if s is None else s + e
    some = s > 0
    return ops.where(some, ops.where(some, s, 1.0).log() + m, -math.inf)


def _ctc_check(name, lengths, low, high=None):
    """torch's range checks of CTC lengths; where they cannot be read (a capture)
    recorded, raised when the step's results are read."""
    if not lengths.numel():
        return
    if not _has_data(lengths):
        where_ = " (while checking arguments for ctc_loss_allocate_outputs)"
        require(
            lengths >= low, RuntimeError, f"Expected {name} to have value at least {low}{where_}"
        )
        if high is not None:
            require(
                lengths <= high,
                RuntimeError,
                f"Expected {name} to have value at most {high}{where_}",
            )
        return
    v = lengths._host()
    where_ = " (while checking arguments for ctc_loss_allocate_outputs)"
    if v.min() < low:
        raise RuntimeError(
            f"Expected {name} to have value at least {low}, but got value {v.min()}{where_}"
        )
    if high is not None and v.max() > high:
        raise RuntimeError(
            f"Expected {name} to have value at most {high}, but got value {v.max()}{where_}"
        )


def ctc_loss(
    log_probs,
    targets,
    input_lengths,
    target_lengths,
    blank=0,
    reduction="mean",
    zero_infinity=False,
):
    """Connectionist Temporal Classification loss of ``(T, N, C)`` (or unbatched ``(T, C)``)
    log-probabilities against targets padded ``(N, S)`` or concatenated ``(sum(lengths),)``.

    The negative log-likelihood of each target summed over its alignments, by the forward
    (alpha) recursion in log space, a loop over time of staged ops, so it differentiates,
    and compiles, as any composition; its gradient is torch's, ``exp(log_probs) - posterior``
    per time step (torch's CPU kernel assumes log-softmax inputs, and so differs from the
    exact gradient by ``exp(log_probs)``; through a ``log_softmax`` both agree). A sample
    no alignment fits (more labels than steps) has loss inf and, as torch's, gradient NaN
    at each of its steps; ``zero_infinity=True`` makes both 0.

    Example:
        >>> loss = F.ctc_loss(logits.log_softmax(2), targets, input_lengths, target_lengths)
    """
    _check_reduction(reduction)
    il = _ctc_lengths(input_lengths, "input_lengths")
    tl = _ctc_lengths(target_lengths, "target_lengths")
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    if not batched:
        targets = targets.unsqueeze(0)
    if not log_probs.dtype.is_floating_point:
        raise NotImplementedError(f"\"ctc_loss_cpu\" not implemented for '{log_probs.dtype.title}'")
    t_max, nb, c = lp.shape
    if not 0 <= blank < c:
        raise RuntimeError("blank must be in label range")
    if il.numel() != nb:
        raise RuntimeError("input_lengths must be of size batch_size")
    if tl.numel() != nb:
        raise RuntimeError("target_lengths must be of size batch_size")
    targets = targets.to(dt.int64)
    _ctc_check("input_lengths", il, 0, t_max)
    _ctc_check("target_lengths", tl, 0)
    at = " for argument #2 'targets' (while checking arguments for ctc_loss_allocate_outputs)"
    known = _has_data(tl)
    if targets.ndim == 1:  # concatenated: each sample's targets from its offset on
        total = int(tl._host().sum()) if known else targets.shape[0]
        if not known and tl.numel():
            require(
                tl.sum() == total,
                RuntimeError,
                f"Expected tensor to have size sum(target_lengths) at dimension 0, but got size {total}{at}",
            )
        if known and targets.shape[0] != total:
            raise RuntimeError(
                f"Expected tensor to have size {total} at dimension 0, but got size "
                f"{targets.shape[0]}{at}"
            )
        s = int(tl._host().max(initial=0)) if known else targets.shape[0]
        idx = (ops.cumsum(tl, 0) - tl).unsqueeze(1) + arange(s)
        if targets.shape[0]:
            idx = ops.clamp(idx, 0, targets.shape[0] - 1).reshape(-1)
            padded = ops.gather(targets, 0, idx).reshape(nb, s)
        else:
            padded = factories.zeros(nb, s, dtype=dt.int64)
    else:
        if targets.shape[0] != nb:
            raise RuntimeError(
                f"Expected tensor to have size {nb} at dimension 0, but got size "
                f"{targets.shape[0]}{at}"
            )
        s, padded = targets.shape[1], targets
        if not known and tl.numel():
            require(
                tl <= s,
                RuntimeError,
                f"Expected tensor to have size at least max(target_lengths) at dimension 1, but got size {s}{at}",
            )
        if known and tl.numel() and int(tl._host().max()) > s:
            raise RuntimeError(
                f"Expected tensor to have size at least {int(tl._host().max())} at dimension 1, "
                f"but got size {s}{at}"
            )
    labels = ops.where(arange(s) < tl.unsqueeze(1), padded, blank)  # (N, S)
    # the extended labels: blank, l1, blank, l2, ..., blank
    ext = ops.stack([factories.full((nb, s), blank, dtype=dt.int64), labels], 2).reshape(nb, 2 * s)
    ext = ops.cat([ext, factories.full((nb, 1), blank, dtype=dt.int64)], 1)
    width = 2 * s + 1
    lp_ext = ops.gather(lp, 2, ext.unsqueeze(0).expand(t_max, nb, width))  # (T, N, 2S+1)
    skip = ops.cat(
        [
            factories.zeros(nb, min(2, width), dtype=dt.bool_),
            (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2]),
        ],
        1,
    )
    state = arange(width)
    neg = factories.full((nb, 1), -math.inf, dtype=lp.dtype)
    first = (state == 0) | ((state == 1) & (tl.unsqueeze(1) > 0))
    alpha = ops.where(first, lp_ext[0], -math.inf)
    for t in range(1, t_max):
        shift1 = ops.cat([neg, alpha[:, :-1]], 1)
        shift2 = ops.where(skip, ops.cat([neg, neg, alpha[:, :-2]], 1)[:, :width], -math.inf)
        step = _logsumexp_safe(alpha, shift1, shift2) + lp_ext[t]
        alpha = ops.where((il > t).unsqueeze(1), step, alpha)
    last = ops.gather(alpha, 1, (2 * tl).unsqueeze(1)).squeeze(1)
    before = ops.gather(alpha, 1, ops.clamp_min(2 * tl - 1, 0).unsqueeze(1)).squeeze(1)
    nll = -_logsumexp_safe(last, ops.where(tl > 0, before, -math.inf))
    # no input steps: likelihood 1 of an empty target (torch's -0.0), else 0
    empty = ops.where(tl == 0, factories.full((nb,), -0.0, dtype=lp.dtype), math.inf)
    nll = ops.where(il == 0, empty, nll)
    # torch's gradient adds exp(log_probs) over each sample's time steps (see the docstring)
    steps = (arange(t_max).unsqueeze(1) < il).unsqueeze(2)  # (T, N, 1)
    mass = ops.where(steps, lp.exp(), 0.0).sum((0, 2))
    loss = nll + (mass - mass.detach())
    impossible = nll == math.inf
    if zero_infinity:
        return _reduce_ctc(ops.where(impossible, 0.0, loss), tl, reduction, batched)
    # an impossible sample's gradient is NaN at each of its steps, as torch's: exp(log(0)),
    # 0 in value, has the gradient 0 / 0
    nan_grad = (mass * ops.where(impossible, 0.0, 1.0)).log().exp()
    return _reduce_ctc(loss + ops.where(impossible, nan_grad, 0.0), tl, reduction, batched)


def _reduce_ctc(loss, tl, reduction, batched):
    """CTC losses per sample, reduced (``mean``: each divided by its target length)."""
    if reduction == "mean":
        return (loss / ops.clamp_min(tl, 1).to(loss.dtype)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss if batched else loss.squeeze(0)


def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode="nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias=False,
):
    """Resize ``input``'s spatial dims to ``size`` or by ``scale_factor``: eager's
    resampling modes (``staged/eager/ops/layers.py``), and ``area``, as torch's an adaptive
    average pool to the output size."""
    args = (input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)
    if mode != "area":
        return _interpolate(*args)
    outs, _ = _output_sizes(*args)
    return _adaptive_avg_pool(input, len(outs), outs)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated: ``interpolate`` (warned, as torch)."""
    warn_user("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(mode="nearest")`` (warned, as torch)."""
    warn_user(
        "`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead."
    )
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(mode="bilinear", align_corners=True)`` (warned, as torch)."""
    warn_user(
        "`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead."
    )
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# every public function here names the user's line in its errors (staged/_where.py), and
# those on torch's autocast lists apply its policy (Note [autocast]); the table's are
# already wrapped
globals().update(
    {
        _n: _autocast.sited(_f, _n)
        for _n, _f in list(globals().items())
        if is_function(_f)  # compiled by Cython or not (Note [native modules])
        and not _n.startswith("_")
        and _f.__module__.startswith("staged.")
        and not getattr(_f, "sited", False)
    }
)
