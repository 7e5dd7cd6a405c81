"""The ops nn layers need, with PyTorch's signatures, defaults and errors.

Convolution and pooling compose from the window primitives (``im2col``/``col2im``):
a convolution is one matmul of the windows by the flattened weight (grouped: a batched
matmul), max pooling is ``max`` over each window (the gradient goes to the first maximum,
as PyTorch's), average pooling a sum by PyTorch's divisor. Eagerly, a convolution with
groups=1 and max pooling of real floating operands each run as one fused kernel per
direction (Note [fused kernels] in eager/dispatch.py); their composites are what capture,
forward AD and double backward see. Normalisations are composites;
dropout's mask is torch's eagerly (the mt19937 stream) and comes from the counter-based
generator under capture (Note [counter-based RNG]).
"""

from __future__ import annotations

import math

import numpy as np

from ... import autodiff as ad
from ...autodiff import fused
from ...autodiff.fma import fma32, fma64_total
from ... import dtypes as dt
from ...autodiff import lax as ad_lax
from ...autodiff.nn import (
    batch_last,
    conv_dw_impl,
    conv_dx_impl,
    conv_impl,
    max_pool_dx_impl,
    max_pool_impl,
)
from ..checks import check_range, require
from ..grad_mode import no_grad
from ..interceptor import current_interceptor
from ..legacy_types import type_name
from ..random import fills
from ..random.counter import rand_uniform
from ..random.generator import default_generator, drawn, on_draw
from ..tensor import Tensor
from . import elementwise as ew
from . import reduction, shape
from ._operands import floating_kernel, fresh, half, in_float32, operands, scalar_tensor
from .indexing import check_rows, take_index
from .inplace import copy_


def _tuple(v, n, what="argument") -> tuple:
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
    if len(t) == 1:
        t *= n
    if len(t) != n:
        raise RuntimeError(
            f"expected {what} to be a single integer value or a list of {n} "
            f"values, but got {list(t)}"
        )
    return tuple(int(x) for x in t)


def _batched(x, n, name):
    """``x`` with a batch dim (unbatched inputs get one) and whether to drop it again."""
    if x.ndim == n + 1:
        return shape.unsqueeze(x, 0), True
    if x.ndim == n + 2:
        return x, False
    raise RuntimeError(
        f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, "
        f"but got input of size: {list(x.shape)}"
    )


def _kernel_major(cols, n):
    """im2col's (N, *out, C, *kernel) windows as (N, C, *kernel, *out): eagerly a view of
    the array the impl filled (Note [window layout] in autodiff/nn.py), whose reshapes to
    (N, C * prod(kernel), prod(out)) or (N, C, prod(kernel), *out) are views too."""
    return ad.permute(
        cols, perm=(0, n + 1) + tuple(range(n + 2, 2 * n + 2)) + tuple(range(1, n + 1))
    )


def _windows(x, kernel, stride, padding, dilation, pad_value=0.0):
    return ad.im2col(
        x, kernel=kernel, stride=stride, padding=padding, dilation=dilation, pad_value=pad_value
    )


# --- convolution -----------------------------------------------------------------------
def conv_padding(padding, kernel, stride, dilation, n, error=RuntimeError):
    """``(low, high)`` per spatial dim, with torch's errors: ``F.conv*``'s, or (``error=
    ValueError``) those ``Conv*`` raise at construction."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding != "same":
            raise error(
                f"Invalid padding string: '{padding}'"
                if error is RuntimeError
                else f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}"
            )
        if any(s != 1 for s in stride):
            raise error("padding='same' is not supported for strided convolutions")
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple((t // 2, t - t // 2) for t in total)
    pad = _tuple(padding, n, "padding")
    if min(pad) < 0:
        raise RuntimeError("negative padding is not supported")
    return tuple((p, p) for p in pad)


def _check_dilation(dilation, transposed) -> None:
    """torch's two checks: a negative dilation, then a zero one (in a 1-D convolution's
    words, as the 2-D one it is)."""
    if min(dilation) < 0:
        raise RuntimeError("dilation should be greater than zero")
    if min(dilation) == 0:
        shown = (1,) * (len(dilation) == 1) + tuple(dilation)
        if not transposed:
            raise RuntimeError(f"dilation should be greater than zero, but got {list(shown)}")
        names = ("depth", "height", "width")[3 - len(shown) :]
        got = ", ".join(f"dilation_{a}: {d}" for a, d in zip(names, shown))
        raise RuntimeError(f"dilation should be greater than zero, but got {got}")


def _check_types(x, weight, bias):
    if bias is not None and bias.dtype is not x.dtype:  # torch checks the bias first
        raise RuntimeError(
            f"Input type ({x.dtype.type_meta}) and bias type ({bias.dtype.type_meta}) "
            "should be the same"
        )
    if x.dtype is not weight.dtype:
        raise RuntimeError(f"expected scalar type {x.dtype.title} but found {weight.dtype.title}")


def _conv(n, name, input, weight, bias, stride, padding, dilation, groups):
    x, unbatched = _batched(input, n, name)
    if weight.ndim < 3:
        raise RuntimeError("weight should have at least three dimensions")
    if weight.ndim != n + 2:
        raise RuntimeError(
            f"weight should have {n + 2} dimensions for {name}, got "
            f"{weight.ndim} (size {list(weight.shape)})"
        )
    _check_types(x, weight, bias)
    if half(x, weight, bias):  # float32 products rounded once, as torch's kernels
        return in_float32(
            lambda *t: _conv(n, name, *t, stride, padding, dilation, groups), input, weight, bias
        )
    c_out, c_in, kernel = weight.shape[0], weight.shape[1], tuple(weight.shape[2:])
    if groups < 1 or c_out % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by "
            f"{groups} at dimension 0, but got weight of size "
            f"[{list(weight.shape)}] instead"  # (torch's brackets)
            if groups >= 1
            else "non-positive groups is not supported"
        )
    if x.shape[1] != c_in * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(weight.shape)}, "
            f"expected input{list(input.shape)} to have {c_in * groups} "
            f"channels, but got {x.shape[1]} channels instead"
        )
    stride, dilation = _tuple(stride, n, "stride"), _tuple(dilation, n, "dilation")
    if min(stride) < 1:
        raise RuntimeError("non-positive stride is not supported")
    pad = conv_padding(padding, kernel, stride, dilation, n)
    _check_dilation(dilation, transposed=False)
    padded = [s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pad)]
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    if any(p < k for p, k in zip(padded, spans)):
        raise RuntimeError(
            f"Calculated padded input size per channel: "
            f"({' x '.join(map(str, padded))}). Kernel size: "
            f"({' x '.join(map(str, spans))}). Kernel size can't be greater "
            f"than actual input size"
        )
    geometry = {"stride": stride, "padding": pad, "dilation": dilation}
    if groups > 1 or not fused.fusable(*(t for t in (x, weight, bias) if t is not None)):
        y = _conv_composite(x, weight, bias, groups=groups, **geometry)
    elif bias is None:
        y = _conv_no_bias(x, weight, **geometry)
    else:
        y = _conv_fused(x, weight, bias, **geometry)
    return shape.squeeze(y, 0) if unbatched else y


def _conv_composite(x, weight, bias=None, *, stride, padding, dilation, groups=1):
    n = x.ndim - 2
    kernel = tuple(weight.shape[2:])
    cols = _windows(x, kernel, stride, padding, dilation)  # (N, *out, C_in, *kernel)
    nb, out_sp, c_out = x.shape[0], tuple(cols.shape[1 : 1 + n]), weight.shape[0]
    c_g, ck, length = c_out // groups, weight.shape[1] * math.prod(kernel), math.prod(out_sp)
    b = None if bias is None else ad.reshape(bias, shape=(c_out,) + (1,) * (n + 1))
    # the windows read in the order the impl laid them out (Note [window layout])
    if batch_last(kernel, stride, dilation):
        # per group, weight (C_out/g, C_in*k) @ windows (C_in*k, L*N) -> (C_out, *out, N)
        cols = ad.reshape(ad.permute(cols, perm=_batch_last(n)), shape=(groups, ck, length * nb))
        y = ad.matmul(ad.reshape(weight, shape=(groups, c_g, ck)), cols)
        y = ad.reshape(y, shape=(c_out,) + out_sp + (nb,))
        if b is not None:
            y = ad.add(y, ad.expand(b, shape=y.shape))
        return ad.copy(ad.permute(y, perm=(n + 1,) + tuple(range(n + 1))))  # (N, C_out, *out)
    # per sample and group, weight (C_out/g, C_in*k) @ windows (C_in*k, L): the result
    # is (N, C_out, *out) as it is
    cols = ad.reshape(_kernel_major(cols, n), shape=(nb, groups, ck, length))
    w = ad.reshape(weight, shape=(1, groups, c_g, ck))
    y = ad.matmul(ad.expand(w, shape=(nb, groups, c_g, ck)), cols)
    y = ad.reshape(y, shape=(nb, c_out) + out_sp)
    if b is not None:
        y = ad.add(y, ad.expand(ad.reshape(b, shape=(1, c_out) + (1,) * n), shape=y.shape))
    return y


def _batch_last(n) -> tuple:
    """The permutation of im2col's (N, *out, C, *kernel) to (C, *kernel, *out, N)."""
    return (n + 1,) + tuple(range(n + 2, 2 * n + 2)) + tuple(range(1, n + 1)) + (0,)


def _g_rows(g, n):
    """``g`` (N, C_out, *out) as the matrix (C_out, prod(out) * N)."""
    return ad.reshape(
        ad.permute(g, perm=tuple(range(1, n + 2)) + (0,)),
        shape=(g.shape[1], math.prod(g.shape) // g.shape[1]),
    )


def _conv_dx_composite(g, weight, *, shape, stride, padding, dilation):
    """The composite's input gradient, with primitives: col2im of weight.T @ g."""
    n, kernel = len(shape) - 2, tuple(weight.shape[2:])
    w = ad.reshape(weight, shape=(weight.shape[0], math.prod(weight.shape[1:])))
    cols = ad.matmul(ad.permute(w, perm=(1, 0)), _g_rows(g, n))
    cols = ad.reshape(cols, shape=(shape[1],) + kernel + tuple(g.shape[2:]) + (shape[0],))
    cols = ad.permute(  # (C, *kernel, *out, N) -> (N, *out, C, *kernel)
        cols, perm=(2 * n + 1,) + tuple(range(n + 1, 2 * n + 1)) + (0,) + tuple(range(1, n + 1))
    )
    return ad.col2im(
        cols,
        shape=tuple(shape[2:]),
        kernel=kernel,
        stride=stride,
        padding=padding,
        dilation=dilation,
    )


def _conv_dw_composite(g, x, *, kernel, stride, padding, dilation):
    """The composite's weight gradient, with primitives: g @ the windows (transposed)."""
    n = len(kernel)
    cols = ad.permute(_windows(x, kernel, stride, padding, dilation), perm=_batch_last(n))
    ck = x.shape[1] * math.prod(kernel)
    cols = ad.reshape(cols, shape=(ck, math.prod(cols.shape) // ck))
    dw = ad.matmul(_g_rows(g, n), ad.permute(cols, perm=(1, 0)))
    return ad.reshape(dw, shape=(g.shape[1], x.shape[1]) + tuple(kernel))


# one kernel and one Node each way eagerly (Note [fused kernels] in eager/dispatch.py)
_conv_dx = ad.Fused("conv_dx", conv_dx_impl, _conv_dx_composite)
_conv_dw = ad.Fused("conv_dw", conv_dw_impl, _conv_dw_composite)
_CONV_VJP = (
    lambda g, weight, x_aval, stride, padding, dilation: _conv_dx(
        g, weight, shape=tuple(x_aval.shape), stride=stride, padding=padding, dilation=dilation
    ),
    lambda g, x, weight_aval, stride, padding, dilation: _conv_dw(
        g, x, kernel=tuple(weight_aval.shape[2:]), stride=stride, padding=padding, dilation=dilation
    ),
)
_conv_no_bias = ad.Fused(
    "conv_no_bias",
    lambda x, weight, *, stride, padding, dilation: conv_impl(
        x, weight, stride=stride, padding=padding, dilation=dilation
    ),
    _conv_composite,
    vjp=_CONV_VJP,
    node_name="ConvolutionBackward0",
)
_conv_fused = ad.Fused(
    "conv",
    conv_impl,
    _conv_composite,
    vjp=_CONV_VJP + (lambda g: ad_lax.sum(g, (0,) + tuple(range(2, g.ndim))),),
    node_name="ConvolutionBackward0",
)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation) over ``(N, C_in, L)``, PyTorch's ``conv1d``."""
    return _conv(1, "conv1d", input, weight, bias, stride, padding, dilation, groups)


def conv_tbc(input, weight, bias, pad=0):
    """1-D convolution of a ``(time, batch, in_channels)`` sequence by a ``(kernel_width,
    in_channels, out_channels)`` weight, ``pad`` steps of zeros each side; the output is
    ``(time, batch, out_channels)``: PyTorch's ``conv_tbc``, a ``conv1d`` of the permuted
    operands."""
    if input.ndim != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.ndim != 3:
        raise RuntimeError(
            "Weight tensor must have 3 dims: kernel_width, in_channels, out_channels."
        )
    if bias.ndim != 1:
        raise RuntimeError("Bias must be 1-D")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    if bias.shape[0] != weight.shape[2]:
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output channels).")
    x, w = input.permute(1, 2, 0), weight.permute(2, 1, 0)
    return conv1d(x, w, bias, padding=pad).permute(2, 0, 1)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation), PyTorch's ``conv2d``.

    ``padding`` is an int, a pair, ``"valid"`` or ``"same"`` (stride 1; an odd total pads
    one more at the end, as PyTorch). Windows plus one matmul: eagerly an im2col of
    ``(N*H_out*W_out, C_in*kH*kW)``; the backward is a matmul and a ``col2im``.

    Example:
        >>> y = F.conv2d(x, w, b, stride=2, padding=1)   # x (N, C, H, W), w (F, C, kH, kW)
    """
    return _conv(2, "conv2d", input, weight, bias, stride, padding, dilation, groups)


_BIAS_ADDED = (dt.float16, dt.float32, dt.float64)  # torch's conv_transpose1d/2d kernels


def _conv_transpose(
    n, name, input, weight, bias, stride, padding, output_padding, groups, dilation
):
    """The adjoint of ``_conv``: every input position adds ``x @ weight`` (C_out x kernel) to
    its window of the output, which ``col2im`` sums; the gradient is im2col and a matmul."""
    x, unbatched = _batched(input, n, name)
    if weight.ndim != n + 2:
        raise RuntimeError(
            f"weight should have {n + 2} dimensions for {name}, got "
            f"{weight.ndim} (size {list(weight.shape)})"
        )
    if bias is not None and bias.dtype is not x.dtype:
        if n == 3:  # torch's kernel checks the bias as its weight
            raise RuntimeError(f"expected scalar type {x.dtype.title} but found {bias.dtype.title}")
        if x.dtype in _BIAS_ADDED:  # torch adds it in place, promoted: ``out.add_(bias)``
            y = _conv_transpose(
                n, name, input, weight, None, stride, padding, output_padding, groups, dilation
            )
            return y.add_(shape.reshape(bias, (weight.shape[1] * groups,) + (1,) * n))
    _check_types(x, weight, bias)
    if half(x, weight, bias):
        return in_float32(
            lambda *t: _conv_transpose(
                n, name, *t, stride, padding, output_padding, groups, dilation
            ),
            input,
            weight,
            bias,
        )
    c_in, c_g, kernel = weight.shape[0], weight.shape[1], tuple(weight.shape[2:])
    if groups < 1:
        raise RuntimeError("non-positive groups is not supported")
    if c_in % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension "
            f"0, but got weight of size [{list(weight.shape)}] instead"
        )
    if x.shape[1] != c_in:
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(weight.shape)}, expected "
            f"input{list(input.shape)} to have {c_in} channels, but got {x.shape[1]} "
            "channels instead"
        )
    stride, dilation = _tuple(stride, n, "stride"), _tuple(dilation, n, "dilation")
    pads, out_pad = _tuple(padding, n, "padding"), _tuple(output_padding, n, "output_padding")
    if min(stride) < 1:
        raise RuntimeError("non-positive stride is not supported")
    if min(pads) < 0:
        raise RuntimeError("negative padding is not supported")
    _check_dilation(dilation, transposed=True)
    if any(o >= max(s, d) for o, s, d in zip(out_pad, stride, dilation)):
        hw = lambda t, one: (one,) * (2 - n) + t  # noqa: E731  (torch words 1-D as 2-D)
        (oh, ow), (sh, sw), (dh, dw) = hw(out_pad, 0), hw(stride, 1), hw(dilation, 1)
        raise RuntimeError(
            "output padding must be smaller than either stride or dilation, but got "
            f"output_padding_height: {oh} output_padding_width: {ow} stride_height: {sh} "
            f"stride_width: {sw} dilation_height: {dh} dilation_width: {dw}"
        )
    nb, in_sp, c_out = x.shape[0], tuple(x.shape[2:]), c_g * groups
    ck = c_g * math.prod(kernel)
    # per group, weight.T (C_out/g * k, C_in/g) @ x (C_in/g, L): every position's window
    w = ad.permute(ad.reshape(weight, shape=(1, groups, c_in // groups, ck)), perm=(0, 1, 3, 2))
    xs = ad.reshape(x, shape=(nb, groups, c_in // groups, math.prod(in_sp)))
    cols = ad.matmul(ad.expand(w, shape=(nb, groups, ck, c_in // groups)), xs)
    cols = ad.permute(  # (N, C_out, *kernel, *in) -> (N, *in, C_out, *kernel)
        ad.reshape(cols, shape=(nb, c_out) + kernel + in_sp),
        perm=(0,) + tuple(range(n + 2, 2 * n + 2)) + (1,) + tuple(range(2, n + 2)),
    )
    # output o = (l - 1) s - 2 p + d (k - 1) + op + 1 sits at [p, p + o) of the windows'
    # span; its last op - p positions (where op > p) lie past every window: zeros
    spans = [(i - 1) * s + d * (k - 1) + 1 for i, s, d, k in zip(in_sp, stride, dilation, kernel)]
    past = [max(o - p, 0) for o, p in zip(out_pad, pads)]
    y = ad.col2im(
        cols,
        shape=tuple(t - 2 * p + o - e for t, p, o, e in zip(spans, pads, out_pad, past)),
        kernel=kernel,
        stride=stride,
        padding=tuple((p, max(p - o, 0)) for p, o in zip(pads, out_pad)),
        dilation=dilation,
    )
    if any(past):
        y = pad(y, [v for e in reversed(past) for v in (0, e)])
    if bias is not None:
        y = y + shape.reshape(bias, (1, c_out) + (1,) * n)
    return shape.squeeze(y, 0) if unbatched else y


def conv_transpose1d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    """1-D transposed convolution over ``(N, C_in, L)``, weight ``(C_in, C_out / groups, k)``."""
    return _conv_transpose(
        1,
        "conv_transpose1d",
        input,
        weight,
        bias,
        stride,
        padding,
        output_padding,
        groups,
        dilation,
    )


def conv_transpose2d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    """2-D transposed convolution (the gradient of ``conv2d`` by its input), PyTorch's
    ``conv_transpose2d``: weight ``(C_in, C_out / groups, kH, kW)``, output size
    ``(H - 1) * stride - 2 * padding + dilation * (kH - 1) + output_padding + 1``.

    Example:
        >>> y = F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)  # 2x upsampling
    """
    return _conv_transpose(
        2,
        "conv_transpose2d",
        input,
        weight,
        bias,
        stride,
        padding,
        output_padding,
        groups,
        dilation,
    )


_WINDOW_ARGS = {  # torch's im2col/col2im checks: (least value, words, name in the message)
    "kernel": (1, "kernel size should be greater than zero", "kernel"),
    "stride": (1, "stride should be greater than zero", "stride"),
    "dilation": (1, "dilation should be greater than zero", "dilation"),
    "padding": (0, "padding should be non-negative", "pad"),
}


def check_window_args(**pairs) -> None:
    """torch's checks of ``unfold``'s and ``fold``'s (height, width) pairs, in the order
    given (each op has its own)."""
    for arg, (h, w) in pairs.items():
        low, words, name = _WINDOW_ARGS[arg]
        if min(h, w) < low:
            raise RuntimeError(f"{words}, but got {name}_height: {h} {name}_width: {w}")


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """PyTorch's ``F.unfold`` (im2col): ``(N, C, H, W) -> (N, C*kH*kW, L)``."""
    x, unbatched = _batched(input, 2, "unfold")
    kernel, dilation = _tuple(kernel_size, 2, "kernel_size"), _tuple(dilation, 2, "dilation")
    pad, stride = _tuple(padding, 2, "padding"), _tuple(stride, 2, "stride")
    check_window_args(kernel=kernel, dilation=dilation, padding=pad, stride=stride)
    if min(input.shape[-3:]) == 0:
        raise RuntimeError(
            "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other "
            f"non-zero dimensions for input, but got: {list(input.shape)}"
        )
    blocks = [
        (i + 2 * p - (d * (k - 1) + 1)) // s + 1
        for i, p, d, k, s in zip(x.shape[2:], pad, dilation, kernel, stride)
    ]
    if min(blocks) < 1:
        raise RuntimeError(
            f"Given input with spatial size {tuple(x.shape[2:])}, kernel_size={kernel}, "
            f"dilation={dilation}, padding={pad}, calculated shape of the array of sliding "
            f"blocks as {tuple(blocks)}, but its components must be at least one."
        )
    cols = _windows(
        x, kernel, stride, tuple((p, p) for p in pad), dilation
    )  # (N, oH, oW, C, kH, kW)
    n, oh, ow, c = cols.shape[:4]
    y = ad.reshape(_kernel_major(cols, 2), shape=(n, c * math.prod(kernel), oh * ow))
    y = shape.contiguous(y)  # batch-last windows (Note [window layout]) give N innermost
    return shape.squeeze(y, 0) if unbatched else y


# --- pooling ---------------------------------------------------------------------------
def _half_toward_zero(v: int) -> int:
    """``v / 2`` as C++ divides integers (toward zero): torch's bounds on padding."""
    return -(-v // 2) if v < 0 else v // 2


def _pooled_size(size, k, s, p, d, ceil_mode) -> int:
    """torch's ``pooling_output_shape`` of one dim, with its checks."""
    if s == 0:
        raise RuntimeError("stride should not be zero")
    if p < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
    if p > _half_toward_zero((k - 1) * d + 1):
        raise RuntimeError(
            f"pad should be at most half of effective kernel size, but got "
            f"pad={p}, kernel_size={k} and dilation={d}"
        )
    o = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= size + p:
        o -= 1
    return o


def _max_pool1d_size(shape, k, s, p, d, ceil_mode) -> int:
    """The pooled size, with torch's own ``max_pool1d`` checks (where no indices are asked
    for; with them torch pools as in 2-D)."""
    if not (len(shape) == 2 and min(shape) or len(shape) == 3 and min(shape[1:])):
        raise RuntimeError(
            "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size "
            f"for input, but got:{list(shape)}"
        )
    for v, low, what in ((k, 1, "kernel_size"), (s, 1, "stride"), (p, 0, "padding")):
        if v < low:
            must = "must be non-negative" if low == 0 else "must be greater than zero"
            raise RuntimeError(f"max_pool1d() {what} {must}, but got {v}")
    if p > k // 2:
        raise RuntimeError(
            "max_pool1d() padding should be at most half of kernel size, but got "
            f"padding={p} and kernel_size={k}"
        )
    if d < 1:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {d}")
    out = _pooled_size(shape[-1], k, s, p, d, ceil_mode)
    if out < 1:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {out}")
    return out


def _check_pool_shape(shape, kernel, stride, pad, dilation, out, avg) -> None:
    """torch's ``pool2d_shape_check``/``pool3d_shape_check`` of the input's ``shape`` as
    torch's kernel sees it (a 1-D pool's as a 2-D one's, of height 1)."""
    n = len(kernel)
    axes = "THW"[3 - n :]

    def got(prefix, values):
        return " ".join(f"{prefix}{a}: {v}" for a, v in zip(axes, values))

    if min(kernel) < 1:
        raise RuntimeError(f"kernel size should be greater than zero, but got {got('k', kernel)}")
    if min(stride) < 1:
        raise RuntimeError(f"stride should be greater than zero, but got {got('d', stride)}")
    if min(dilation) < 1:
        raise RuntimeError(
            f"dilation should be greater than zero, but got {got('dilation', dilation)}"
        )
    batch = len(shape) == n + 2  # (a batch may be empty; no other dim)
    if min(shape[batch:]) == 0:
        if n == 2:
            raise RuntimeError(
                "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for "
                f"input, but got:{list(shape)}"
            )
        raise RuntimeError(
            f"{'avg_pool3d()' if avg else 'max_pool3d_with_indices_out_cpu_template()'}: "
            "Expected input's non-batch dimensions to have positive length, but input has a "
            f"shape of {list(shape)} and non-batch dimension 0 has length zero!"
        )
    sizes = shape[-n:]
    if avg and n == 3 and any(i < k for i, k in zip(sizes, kernel)):
        raise RuntimeError(
            f"input image ({got('', sizes)}) smaller than kernel size ({got('k', kernel)})"
        )
    if any(p > k // 2 for p, k in zip(pad, kernel)):
        (kh, kw), (ph, pw) = kernel[-2:], pad[-2:]
        but = (
            f"padW = {pw}, padH = {ph}, kW = {kw}, kH = {kh}"
            if n == 2
            else f"kT: {kernel[0]} kW: {kw} kH: {kh} padT: {pad[0]} padW: {pw} padH: {ph}"
        )
        raise RuntimeError(
            f"pad should be smaller than or equal to half of kernel size, but got {but}"
        )
    if min(out) < 1:
        c = shape[-n - 1]
        raise RuntimeError(
            f"Given input size: ({'x'.join(map(str, (c, *sizes)))}). Calculated output size: "
            f"({'x'.join(map(str, (c, *out)))}). Output size is too small"
        )


def _pool_geometry(
    input, n, kernel_size, stride, padding, dilation, ceil_mode, avg=False, indices=False
):
    """(kernel, stride, padding pairs, dilation, output sizes, symmetric padding), with
    torch's checks of them and of the ``input`` (a 1-D pool's as torch's 2-D kernel of height
    1 makes them, but ``max_pool1d``'s without indices: its own)."""
    kernel = _tuple(kernel_size, n, "kernel_size")
    stride = (
        kernel if stride is None or stride == [] or stride == () else _tuple(stride, n, "stride")
    )
    pad, dilation = _tuple(padding, n, "padding"), _tuple(dilation, n, "dilation")
    shape, sizes = tuple(input.shape), tuple(input.shape[-n:])
    if n == 1 and not (avg or indices):
        out = (_max_pool1d_size(shape, *kernel, *stride, *pad, *dilation, ceil_mode),)
    else:
        one = (1,) * (n == 1)  # torch's 1-D pools are 2-D ones of height 1
        geometry = one + kernel, one + stride, (0,) * (n == 1) + pad, one + dilation
        pooled = tuple(_pooled_size(*dim, ceil_mode) for dim in zip(one + sizes, *geometry))
        as_2d = shape[:-1] + one + shape[-1:]
        _check_pool_shape(as_2d, *geometry, pooled, avg)
        out = pooled[len(one) :]
    pairs = tuple(
        (p, max(p, (o - 1) * s + d * (k - 1) + 1 - size - p))
        for size, k, s, p, d, o in zip(sizes, kernel, stride, pad, dilation, out)
    )
    return kernel, stride, pairs, dilation, out, pad


def _lowest(d):
    return -np.inf if d.is_floating_point else np.iinfo(d.np).min


def _const(a):
    return Tensor._wrap(np.asarray(a), False)


def _max_pool(n, name, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    x, unbatched = _batched(input, n, name)
    kernel, stride, pairs, dilation, out, pad = _pool_geometry(
        input, n, kernel_size, stride, padding, dilation, ceil_mode, indices=return_indices
    )
    geometry = {"kernel": kernel, "stride": stride, "padding": pairs, "dilation": dilation}
    if not return_indices:
        y = (_max_pool_fused if fused.fusable(x) else _max_pool_composite)(x, **geometry)
        return shape.squeeze(y, 0) if unbatched else y
    w, onehot = _picks(x, **geometry)
    y = _picked(w, onehot)
    # the flat input index of each window element, a constant (k, *out) table
    grids = np.meshgrid(
        *(np.arange(o) * s - p for o, s, p in zip(out, stride, pad)),
        *(np.arange(kk) * d for kk, d in zip(kernel, dilation)),
        indexing="ij",
    )
    coords = [grids[i] + grids[n + i] for i in range(n)]
    k = math.prod(kernel)
    flat = np.ravel_multi_index(coords, x.shape[2:], mode="clip").reshape(out + (k,))
    table = np.moveaxis(flat.astype(np.int64), -1, 0).reshape((1, 1, k) + out)
    picked = ad.where(
        onehot,
        ad.expand(_const(table), shape=w.shape),
        ad.expand(_const(np.zeros((1,) * (n + 3), np.int64)), shape=w.shape),
    )
    idx = shape.contiguous(ad.reduce_sum(picked, dims=(2,), keepdim=False))
    if unbatched:
        y, idx = shape.squeeze(y, 0), shape.squeeze(idx, 0)
    return y, idx


def _picks(x, *, kernel, stride, padding, dilation):
    """The windows of ``x`` as (N, C, k, *out) and torch's pick in each, a one-hot mask
    of them."""
    n = len(kernel)
    cols = _windows(x, kernel, stride, padding, dilation, _lowest(x.dtype))
    k = math.prod(kernel)
    full = tuple(x.shape[:2]) + (k,) + tuple(cols.shape[1 : 1 + n])
    w = ad.reshape(_kernel_major(cols, n), shape=full)  # (N, C, k, *out)
    one = (1, 1)  # N and C of the constants below, expanded to ``full``
    # torch's pick in each window: its first maximum, or its last NaN where it has one
    # (``val > max || isnan(val)``): the hit with the highest rank, k - offset for a
    # maximum, k + 1 + offset for a NaN. Elementwise passes over the kernel dim, in a
    # one-byte dtype: NumPy's argmax along k elements, and its ``where`` (branching on
    # each element), are several times slower than these together. (int32 in a graph:
    # Vulkan's baseline target stores no 8-bit values, and lavapipe gave wrong windows
    # with them)
    eager = current_interceptor() is None
    small = dt.uint8 if 2 * k < 256 and eager else dt.int32
    # eagerly, an input without NaN skips the NaN ranks (two passes over the windows); one
    # whose data is not at hand (vmap's batched tensors, device arrays) keeps them
    p = x._payload
    nans = x.dtype.is_floating_point and not (
        eager and type(p) is np.ndarray and not np.isnan(p).any()
    )
    at = one + (k,) + (1,) * n
    with no_grad():
        hit = ad.eq(w, ad.expand(ad.reduce_max(w, dims=(2,), keepdim=True), shape=full))
        rank = np.arange(k, 0, -1, dtype=small.np).reshape(at)
        score = ad.mul(ad.cast(hit, dtype=small), ad.expand(_const(rank), shape=full))
        if nans:
            nan_rank = np.arange(k + 1, 2 * k + 1, dtype=small.np).reshape(at)
            nan = ad.cast(ad.ne(w, w), dtype=small)
            score = ad.add(score, ad.mul(nan, ad.expand(_const(nan_rank), shape=full)))
        best = ad.reduce_max(score, dims=(2,), keepdim=True)
        onehot = ad.eq(score, ad.expand(best, shape=full))
    return w, onehot


def _picked(w, onehot):
    """(N, C, *out), C-contiguous as torch's (batch-last windows give it N innermost)."""
    zero = ad.expand(_const(np.zeros((1,) * w.ndim, w.dtype.np)), shape=w.shape)
    return shape.contiguous(ad.reduce_sum(ad.where(onehot, w, zero), dims=(2,), keepdim=False))


def _max_pool_composite(x, *, kernel, stride, padding, dilation):
    return _picked(*_picks(x, kernel=kernel, stride=stride, padding=padding, dilation=dilation))


def _max_pool_dx_composite(g, x, out, *, kernel, stride, padding, dilation):
    """The gradient the composite's where and windows give, written with primitives."""
    n = len(kernel)
    w, onehot = _picks(x, kernel=kernel, stride=stride, padding=padding, dilation=dilation)
    lifted = ad.expand(ad.reshape(g, shape=w.shape[:2] + (1,) + w.shape[3:]), shape=w.shape)
    zero = ad.expand(_const(np.zeros((1,) * w.ndim, g.dtype.np)), shape=w.shape)
    cols = ad.reshape(ad.where(onehot, lifted, zero), shape=w.shape[:2] + kernel + w.shape[3:])
    cols = ad.permute(  # (N, C, *kernel, *out) -> (N, *out, C, *kernel)
        cols, perm=(0,) + tuple(range(n + 2, 2 * n + 2)) + (1,) + tuple(range(2, n + 2))
    )
    return ad.col2im(
        cols,
        shape=tuple(x.shape[2:]),
        kernel=kernel,
        stride=stride,
        padding=padding,
        dilation=dilation,
    )


# one kernel and one Node each way eagerly (Note [fused kernels] in eager/dispatch.py)
_max_pool_dx = ad.Fused("max_pool_dx", max_pool_dx_impl, _max_pool_dx_composite)
_max_pool_fused = ad.Fused(
    "max_pool",
    max_pool_impl,
    _max_pool_composite,
    vjp=lambda g, x, out, kernel, stride, padding, dilation: _max_pool_dx(
        g, x, out, kernel=kernel, stride=stride, padding=padding, dilation=dilation
    ),
    node_name="MaxPoolWithIndicesBackward0",
)


def max_pool1d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    return _max_pool(
        1, "max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


def max_pool2d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """2-D max pooling, PyTorch's ``max_pool2d``: padding counts as -inf, the gradient of
    each window goes to its first maximum; ``return_indices`` adds the flat ``H*W`` index
    of each maximum (int64)."""
    return _max_pool(
        2, "max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


def _avg_divisor(sizes, kernel, stride, pad, out, count_include_pad):
    """PyTorch's per-window divisor, an ``out``-shaped array (windows clipped to the padded
    input; with ``count_include_pad=False`` to the input itself)."""
    total = np.ones((), np.int64)
    for size, k, s, p, o in zip(sizes, kernel, stride, pad, out):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, size + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, size)
        total = np.multiply.outer(total, end - start)
    return total


def _avg_pool(
    n, name, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
):
    x, unbatched = _batched(input, n, name)
    if divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if half(x):  # summed and divided in float32, rounded once, as torch's kernel
        args = (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        y = in_float32(lambda w: _avg_pool(n, name, w, *args), x)
        return shape.squeeze(y, 0) if unbatched else y
    if not (x.dtype.is_floating_point or x.dtype is dt.int64):
        kernel = "avg_pool3d_out_frame" if n == 3 else "avg_pool2d"  # torch's (1-D as 2-D)
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{x.dtype.title}'")
    kernel, stride, pairs, _, out, pad = _pool_geometry(
        input, n, kernel_size, stride, padding, 1, ceil_mode, avg=True
    )
    cols = _kernel_major(_windows(x, kernel, stride, pairs, (1,) * n), n)
    sums = reduction.sum(cols, tuple(range(2, n + 2)))  # (N, C, *out)
    div = divisor_override or _avg_divisor(x.shape[2:], kernel, stride, pad, out, count_include_pad)
    div = Tensor._wrap(np.asarray(div, x.dtype.np), False)
    # int64: torch's integer kernel, the sum divided with truncation
    y = shape.contiguous(
        ew.div(sums, div, rounding_mode="trunc") if x.dtype is dt.int64 else sums / div
    )
    return shape.squeeze(y, 0) if unbatched else y


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _avg_pool(
        1, "avg_pool1d", input, kernel_size, stride, padding, ceil_mode, count_include_pad, None
    )


def avg_pool2d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    """2-D average pooling, PyTorch's ``avg_pool2d`` (divisor rules included)."""
    return _avg_pool(
        2,
        "avg_pool2d",
        input,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )


# --- normalisation ---------------------------------------------------------------------
@reduction.in_float32
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing ``normalized_shape`` dims (biased variance)."""
    floating_kernel("LayerNormKernelImpl", input)
    ns = (
        _tuple(normalized_shape, 1)
        if isinstance(normalized_shape, int)
        else tuple(normalized_shape)
    )
    if tuple(input.shape[input.ndim - len(ns) :]) != ns or len(ns) > input.ndim:
        raise RuntimeError(
            f"Given normalized_shape={list(ns)}, expected input with shape "
            f"[*, {', '.join(map(str, ns))}], but got input of size"
            f"{list(input.shape)}"
        )
    if (weight is None or bias is None) and current_interceptor() is None:
        # eagerly, a missing weight is ones and a missing bias zeros (y * 1 + 0 is y bit
        # for bit): the fused kernel, and torch's one Node with its None edges
        p = input._payload
        if type(p) is np.ndarray and p.dtype.kind == "f":
            weight = Tensor._wrap(np.ones(ns, p.dtype)) if weight is None else weight
            bias = Tensor._wrap(np.zeros(ns, p.dtype)) if bias is None else bias
    if (
        weight is not None
        and bias is not None
        and tuple(weight.shape) == ns == tuple(bias.shape)
        and fused.fusable(input, weight, bias)
    ):
        return _layer_norm(input, weight, bias, n=len(ns), eps=float(eps))
    return _layer_norm_composite(input, weight, bias, n=len(ns), eps=eps)


def _layer_norm_composite(input, weight, bias, *, n, eps):
    dims = tuple(range(input.ndim - n, input.ndim))
    mean = reduction.mean(input, dims, keepdim=True)
    var = reduction.var(input, dims, correction=0, keepdim=True)
    y = (input - mean) * ew.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


_layer_norm = ad.Fused(
    "layer_norm",
    fused.layer_norm_impl,
    _layer_norm_composite,
    vjp=fused.LAYER_NORM_VJP,
    node_name="NativeLayerNormBackward0",
)


def batch_norm(
    input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5
):
    """PyTorch's ``batch_norm`` over dim 1. Training normalises by the batch statistics
    (biased variance) and, where running stats are given, updates them in place without
    recording: ``r = (1 - momentum) * r + momentum * stat``, the variance unbiased (an
    empty batch gives an empty output and leaves them as they are, as PyTorch).
    Evaluation normalises by the running statistics. A float16 or bfloat16 input (with
    float32 or its own dtype's weight and bias) normalises in float32, rounded once, as
    torch's CPU kernel: in training by the batch's mean and 1/std as it saves them, in the
    parameters' dtype (the input's unless weight and bias are float32); in evaluation by
    the running statistics in float32."""
    if half(input) and all(
        t is None or t.dtype in (input.dtype, dt.float32) for t in (weight, bias)
    ):
        wide = [None if t is None else ad.cast(t, dtype=dt.float32) for t in (input, weight, bias)]
        stats = (running_mean, running_var)
        params = [t.dtype for t in (weight, bias, *stats) if t is not None]
        if dt.float32 in params and input.dtype in params:
            raise RuntimeError(
                f"expected scalar type {input.dtype.title} but found Float"
                if params[0] is input.dtype
                else "mixed dtype (CPU): expect parameter to have scalar type of Float"
            )
        saved = None
        if not training:
            stats = tuple(None if t is None else ad.cast(t, dtype=dt.float32) for t in stats)
        elif dt.float32 not in params:
            saved = input.dtype
        y = _batch_norm(wide[0], *stats, *wide[1:], training, momentum, eps, saved)
        return ad.cast(y, dtype=input.dtype)
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def _batch_norm(
    input, running_mean, running_var, weight, bias, training, momentum, eps, saved=None
):
    """``batch_norm``; ``saved``: the dtype the batch's mean and 1/std are rounded to
    before they normalise (torch's save_mean and save_invstd)."""
    c = input.shape[1] if input.ndim > 1 else None
    per_channel = {"running_mean": running_mean, "running_var": running_var}
    for name, t in {**per_channel, "weight": weight, "bias": bias}.items():
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    bshape = (1, c) + (1,) * (input.ndim - 2)
    dims = (0,) + tuple(range(2, input.ndim))
    if training:
        n = input.numel() // c
        if n == 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got "
                f"input size {list(input.shape)}"
            )
        mean = reduction.mean(input, dims, keepdim=True)
        var = reduction.var(input, dims, correction=0, keepdim=True)
        if running_mean is not None and n:
            with no_grad():
                copy_(
                    running_mean,
                    running_mean * (1 - momentum) + ad.reshape(mean, shape=(c,)) * momentum,
                )
        if running_var is not None and n:
            with no_grad():
                copy_(
                    running_var,
                    running_var * (1 - momentum)
                    + ad.reshape(var, shape=(c,)) * (momentum * n / (n - 1)),
                )
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        mean, var = shape.reshape(running_mean, bshape), shape.reshape(running_var, bshape)
    invstd = ew.rsqrt(var + eps)
    if saved is not None:
        mean, invstd = (ad.cast(ad.cast(t, dtype=saved), dtype=t.dtype) for t in (mean, invstd))
    y = (input - mean) * invstd
    if weight is not None:
        y = y * shape.reshape(weight, bshape)
    return y if bias is None else y + shape.reshape(bias, bshape)


# --- dropout ---------------------------------------------------------------------------
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``
    (training only; ``p=0`` or evaluation return ``input`` itself). Eagerly the mask is
    torch's: ``bernoulli_(1 - p)`` on the default generator (``u_double < 1 - p``, in the
    input's memory order), divided by ``1 - p`` in the input's dtype. Under capture the
    same mask is drawn on the host at every compiled call (Note [host draws]), or, traced
    with ``rng="counter"``, in the graph from the counter-based generator seeded by
    ``staged.manual_seed`` (a new mask every call, not torch's numbers)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1 or input.is_meta:  # a meta tensor's: no mask to draw (Note [meta tensors])
        noise = scalar_tensor(0, input.dtype)
    elif current_interceptor() is None and type(input._payload) is np.ndarray and not on_draw:
        x = input._payload  # (under vmap a draw goes through its hook: ``drawn``)
        keep = fills.bernoulli(default_generator, x, 1 - p)  # 1 or 0 in x's dtype
        if not (input.dtype.is_floating_point or input.dtype.is_complex):
            raise RuntimeError(  # torch's, from dividing the mask by 1 - p in place: drawn
                f"result type Float can't be cast to the desired output type {input.dtype.title}"
            )
        noise = Tensor._wrap(_kept(keep, 1 - p), False)
    else:
        layout = fills.like(input)  # eager's order (Note [traced layouts])

        def fill(gen, s):  # ``s``: a shape, or a layout (an array) from a draw hook
            if type(s) is not np.ndarray:
                s = layout if s == layout.shape else np.empty(s, np.bool_)
            return fills.bernoulli(gen, np.empty_like(s, np.bool_), 1 - p)

        keep = drawn(
            None,
            "F.dropout",
            input.shape,
            dt.bool_,
            fill,
            lambda: ew.ge(rand_uniform(input.shape, input.dtype), p),
        )
        scale = _kept(np.ones((), input.dtype.np), 1 - p)  # as eager's mask / (1 - p)
        noise = ew.where(keep, scalar_tensor(scale, input.dtype), scalar_tensor(0, input.dtype))
    return input.mul_(noise) if inplace else input * noise


def _kept(keep: np.ndarray, q: float) -> np.ndarray:
    """The mask ``keep`` (1 or 0) divided by ``q`` in place as torch's ``mask.div_(q)``:
    in its dtype, a half type's in float32 (torch's opmath) rounded once (dividing, not
    multiplying by ``1 / q``: ``0 * (1 / q)`` may be NaN)."""
    if keep.dtype.itemsize == 2 and keep.dtype.kind not in "iu":
        return (keep.astype(np.float32) / np.float32(q)).astype(keep.dtype)
    keep /= keep.dtype.type(q)
    return keep


# --- embedding, one_hot, pad -----------------------------------------------------------
def dense_embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq):
    """``F.embedding`` (its arguments, documented there) with a dense gradient."""
    _check_indices(input, 1, "embedding")
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    v = weight.shape[0]
    check_rows(input, v)
    if max_norm is not None:
        with no_grad():
            embedding_renorm_(weight, input, max_norm, norm_type)
    if padding_idx is not None:
        if not -v <= padding_idx < v:
            raise AssertionError("Padding_idx must be within num_embeddings")
        rows = Tensor._wrap(np.arange(v)[:, None] == padding_idx % v, False)
        weight = ew.where(rows, weight.detach(), weight)
    flat = shape.reshape(input, -1)
    out = _take_rows(weight, flat)
    if scale_grad_by_freq:
        out = grad_by_freq(out, weight, flat)
    return shape.reshape(out, tuple(input.shape) + (weight.shape[1],))


def grad_by_freq(rows, weight, flat):
    """``rows`` (``weight``'s at the 1-D ``flat``) whose gradients are divided by how often
    ``flat`` picks each row."""
    if not rows.requires_grad:
        return rows
    # the values of rows, the gradient of each divided by its count: rows - rows.detach()
    # is exactly 0 forward and passes the gradient times the scale
    ones = ew.clone(shape.expand(scalar_tensor(1, weight.dtype), flat.shape))
    counts = shape.new_zeros(weight, weight.shape[0]).index_add(0, flat, ones)
    scale = shape.unsqueeze(ew.reciprocal(take_index(counts, flat, 0)), 1)
    return rows.detach() + (rows - rows.detach()) * scale


def _check_indices(indices, position, name):
    if indices.dtype not in (dt.int64, dt.int32):
        raise RuntimeError(
            f"Expected tensor for argument #{position} 'indices' to have one of the "
            f"following scalar types: Long, Int; but got {type_name(indices.dtype)} "
            f"instead (while checking arguments for {name})"
        )


def embedding_renorm_(weight, input, max_norm, norm_type):
    """``torch.embedding_renorm_``: each row of ``weight`` that ``input`` picks whose
    ``norm_type``-norm exceeds ``max_norm`` scaled in place by ``max_norm / (norm + 1e-7)``
    (in float64, as torch's kernel)."""
    _check_indices(input, 2, "embedding_renorm_")
    if weight.ndim != 2:
        raise RuntimeError("'self' must be 2-D")
    v = weight.shape[0]
    check_rows(input, v)
    flat = shape.reshape(input, -1).to(dt.int64)
    picked = shape.new_zeros(weight, v, dtype=dt.bool_).index_fill(0, flat, True)
    norms = reduction.norm(weight.detach(), norm_type, 1).to(dt.float64)
    scale = ew.where(picked & (norms > max_norm), max_norm / (norms + 1e-7), 1.0)
    return weight.mul_(shape.unsqueeze(scale.to(weight.dtype), 1))


def _take_rows(weight, index):
    """``weight[index]`` for a 1-D int index: one fused kernel and Node eagerly."""
    if fused.fusable(weight):
        return _take_rows_fused(weight, index)
    return _take_rows_composite(weight, index)


def _take_rows_composite(weight, index):
    n = index.shape[0]
    idx = ad.expand(ad.reshape(index.to(dt.int64), shape=(n, 1)), shape=(n, weight.shape[1]))
    return ad.gather(weight, idx, dim=0)


_take_rows_fused = ad.Fused(
    "take_rows",
    fused.take_rows_impl,
    _take_rows_composite,
    vjp=fused.TAKE_ROWS_VJP,
    node_name="EmbeddingBackward0",
)


def one_hot(tensor, num_classes=-1):
    """int64 one-hot of class indices, a trailing dim of ``num_classes`` (-1: max + 1).
    Class values must lie in [0, num_classes): checked, with PyTorch's errors (a compiled
    step raises them when its results are read: Note [index checks])."""
    if tensor.dtype is not dt.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    require(ew.ge(tensor, 0), RuntimeError, "Class values must be non-negative.")
    if num_classes == -1:
        if not tensor.numel():
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(reduction.amax(tensor).item()) + 1
    else:
        check_range(
            tensor,
            0,
            num_classes,
            RuntimeError,
            "Class values must be smaller than num_classes. Got {} with num_classes="
            f"{num_classes}.",
        )
    return ew.eq(
        shape.unsqueeze(tensor, -1), Tensor._wrap(np.arange(num_classes, dtype=np.int64), False)
    ).to(dt.int64)


def pad(input, pad, mode="constant", value=None):
    """PyTorch's ``F.pad``: ``pad`` lists (low, high) pairs from the last dim backwards.
    ``constant`` fills with ``value`` (negative amounts crop); ``reflect``, ``replicate``
    and ``circular`` gather from the input (Note [gathered layouts])."""
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise RuntimeError(
            f"Padding length must be divisible by 2 and at most twice the "
            f"number of dims of the input, got {len(pad)} for {input.ndim} dims"
        )
    pairs = [(0, 0)] * (input.ndim - len(pad) // 2) + [
        (int(pad[i]), int(pad[i + 1])) for i in range(len(pad) - 2, -1, -2)
    ]
    if mode != "constant":
        k = len(pad) // 2
        if input.ndim not in (k + 1, k + 2):
            raise NotImplementedError(
                f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
                "Supported combinations for non-constant padding:\n"
                "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
            )
        return fresh(_pad_gathered(input, pairs, mode), input)
    sizes, original = tuple(input.shape), input
    if any(lo < 0 or hi < 0 for lo, hi in pairs):
        starts = tuple(max(-lo, 0) for lo, _ in pairs)
        stops = tuple(s - max(-hi, 0) for s, (_, hi) in zip(sizes, pairs))
        input = ad.slice(input, starts=starts, stops=stops, steps=(1,) * len(sizes))
        sizes = tuple(b - a for a, b in zip(starts, stops))
        pairs = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    if not any(lo or hi for lo, hi in pairs):
        return fresh(input, original)  # a copy, as torch's
    shape_ = tuple(s + lo + hi for s, (lo, hi) in zip(sizes, pairs))
    base = Tensor._wrap(np.full(shape_, 0 if value is None else value, input.dtype.np), False)
    starts = tuple(lo for lo, _ in pairs)
    return ad.slice_scatter(
        base,
        input,
        starts=starts,
        stops=tuple(a + s for a, s in zip(starts, sizes)),
        steps=(1,) * len(sizes),
    )


# Note [gathered layouts]
# Padding by reflection, replication or wrapping, and resizing by nearest or linear
# interpolation, read each output position of a dim from input positions that depend on
# the shapes alone. So they are gathers along one dim at a time with index arrays made
# here (NumPy, at trace time), and linear interpolation is two gathers weighted by
# constants: no primitive of their own, the gradient is the gathers' (a scatter-add, as
# torch's backward kernels sum), and they lower and compile as gathers do.
def _gather(x, dim, idx):
    return take_index(x, Tensor._wrap(np.asarray(idx, np.int64)), dim)


def _pad_gathered(x, pairs, mode):
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(
            f"Unsupported padding mode: {mode} (staged has constant, reflect, replicate and "
            "circular)"
        )
    for d, (lo, hi) in enumerate(pairs):
        if not lo and not hi:
            continue
        n = x.shape[d]
        if mode == "reflect" and max(lo, hi) >= n:
            raise RuntimeError(
                f"Argument #{4 + 2 * (x.ndim - 1 - d)}: Padding size should be less than "
                "the corresponding input "
                f"dimension, but got: padding ({lo}, {hi}) at dimension {d} of input "
                f"{list(x.shape)}"
            )
        # a negative amount crops; reflection and replication read the whole dim (torch's
        # (2, -1) reflects [0..5] into [2, 1, 0 .. 4]), wrapping only what is kept
        start = max(0, -lo)
        kept = n - start - max(0, -hi)
        if n + lo + hi < (0 if mode == "circular" else 1):  # cropped past the dim: torch's
            raise RuntimeError(
                "Negative padding value is resulting in an empty dimension"
                if mode == "circular"
                else f"input ({'WHD'[x.ndim - 1 - d]}: {n}) is too small. Calculated output "
                f"{'WHD'[x.ndim - 1 - d]}: {n + lo + hi}"
            )
        if mode == "circular" and max(lo, hi) > kept:
            raise RuntimeError("Padding value causes wrapping around more than once.")
        j = np.arange(-lo, n + hi)
        if mode == "replicate":
            idx = np.clip(j, 0, n - 1)
        elif mode == "circular":
            idx = start + (j - start) % kept
        else:
            idx = (n - 1) - np.abs((n - 1) - np.abs(j))
        x = _gather(x, d, idx)
    return x


_INTERPOLATING = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode="nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias=False,
):
    """PyTorch's ``F.interpolate`` for ``nearest``, ``nearest-exact`` and ``linear`` /
    ``bilinear`` / ``bicubic`` / ``trilinear`` (``align_corners``), with torch's source
    positions (computed in the input's precision, float32 scales as torch's CPU kernels);
    ``area`` is ``nn.functional``'s (an adaptive average pool to ``output_sizes``);
    ``antialias`` (bilinear and bicubic of 4-D input) is ``_resample_aa``."""
    outs, scales = output_sizes(
        input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias
    )
    if mode == "area":
        raise NotImplementedError("interpolate(mode='area') is nn.functional's (a pool)")
    if input.dtype is dt.uint8 and mode in _INTERPOLATING:
        if mode not in ("bilinear", "bicubic"):  # torch's uint8 kernels: 2-D only
            raise NotImplementedError(
                "\"compute_indices_weights_linear\" not implemented for 'Byte'"
            )
        return _interpolate_uint8(input, outs, scales, mode, bool(align_corners), antialias)
    if antialias and half(input):  # torch's antialiasing weights have no half type
        raise NotImplementedError(
            f"\"compute_index_ranges_weights\" not implemented for '{input.dtype.title}'"
        )
    if half(input):  # torch's kernels: in float32, rounded once
        # (its generic kernel, linear, trilinear and bicubic's, with weights in the half type)
        generic = mode in ("linear", "trilinear", "bicubic") and not antialias
        taps = input.dtype.np if generic else None
        return in_float32(
            lambda w: _interpolate(w, outs, scales, mode, align_corners, antialias, taps), input
        )
    return _interpolate(input, outs, scales, mode, align_corners, antialias)


def _interpolate(input, outs, scales, mode, align_corners, antialias, taps=None):
    """``input`` resampled to ``outs`` dim by dim, the weights rounded to ``taps``."""
    x, corners = input, bool(align_corners)
    if antialias:  # torch's: the last dim first, a dim of unchanged size left as it is
        for k in reversed(range(len(outs))):
            if input.shape[2 + k] != outs[k]:
                x = _resample_aa(x, 2 + k, input.shape[2 + k], outs[k], scales[k], mode, corners)
        return fresh(x, input)
    for k, (i, o, sf) in enumerate(zip(input.shape[2:], outs, scales)):
        if i != o or _resamples_same_size(mode, len(outs), sf):
            x = _resample(x, 2 + k, i, o, sf, mode, corners, taps)
    return fresh(x, input)  # a copy, as torch's (the same size: the input)


def _resamples_same_size(mode, n, sf) -> bool:
    """Whether torch's forward kernel resamples a dim whose size a ``scale_factor`` ``sf``
    (None: sizes were given) leaves as it was (floor(5 * 1.1) = 5) instead of copying it:
    nearest-exact always, bicubic and 1-D and 3-D nearest (``cpu_upsample_nearest``) with
    a scale, linear, bilinear, trilinear and 2-D nearest never (their same-size shortcuts).
    (torch's backward copies the gradient of bicubic's and 1-D and 3-D nearest's anyway;
    ours is the gradient of the forward.)"""
    if mode == "nearest-exact":
        return True
    return sf is not None and (mode == "bicubic" or (mode == "nearest" and n != 2))


def output_sizes(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias):
    """``interpolate``'s checks of its arguments, and its output sizes and scales (None
    where the sizes' ratio is the scale)."""
    n = input.ndim - 2
    if mode not in ("nearest", "nearest-exact", "area", *_INTERPOLATING):
        raise NotImplementedError(f"interpolate(mode={mode!r}) is not supported yet")
    if n < 1 or n > 3:
        raise ValueError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
            "the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
            f"nearest-exact (got {mode})"
        )
    if mode in _INTERPOLATING and _INTERPOLATING[mode] != n:
        raise NotImplementedError(
            f"Got {input.ndim}D input, but {mode} mode needs {_INTERPOLATING[mode] + 2}D input"
        )
    if align_corners is not None and mode not in _INTERPOLATING:
        raise ValueError(
            "align_corners option can only be set with the interpolating modes: "
            "linear | bilinear | bicubic | trilinear"
        )
    if antialias and not (mode in ("bilinear", "bicubic") and input.ndim == 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and "
            "requires a 4-D tensor as input"
        )
    ins = tuple(input.shape[2:])
    if (size is None) == (scale_factor is None):
        raise ValueError(
            "only one of size or scale_factor should be defined"
            if size is not None
            else "either size or scale_factor should be defined"
        )
    if size is not None:
        outs = _tuple(size, n, "size")
        scales = (None,) * n
    else:
        seq = isinstance(scale_factor, (tuple, list))
        factors = tuple(float(f) for f in (scale_factor if seq else (scale_factor,) * n))
        if len(factors) != n:
            raise ValueError(
                f"Input and scale_factor must have the same number of spatial dimensions, but "
                f"got input with spatial dimensions of {list(ins)} and scale_factor of shape "
                f"{list(factors)}."
            )
        outs = tuple(int(math.floor(s * f)) for s, f in zip(ins, factors))
        scales = (None,) * n if recompute_scale_factor else factors
    if not (input.dtype.is_floating_point or input.dtype.is_complex or input.dtype is dt.uint8):
        raise NotImplementedError(
            f"\"{_kernel(mode, n)}\" not implemented for '{input.dtype.title}'"
        )
    if mode != "area" and (0 in ins or 0 in outs):  # (area pools to empty sizes)
        names = ("D", "H", "W")[3 - n :]

        def sizes(s):
            return ", ".join(f"{a}: {b}" for a, b in zip(names, s))

        joint = " and" if n == 1 else ""
        raise RuntimeError(
            "Input and output sizes should be greater than 0, but got input "
            f"({sizes(ins)}){joint} output ({sizes(outs)})"
        )
    return outs, scales


def _kernel(mode, n):
    """The name of torch's CPU kernel of ``mode`` on ``n`` spatial dims (in its errors)."""
    if mode == "bicubic":
        return "compute_indices_weights_cubic"
    if mode == "area":
        return f"adaptive_avg_pool{n}d"
    kind = "bilinear" if mode == "bilinear" else "nearest" if "nearest" in mode else "linear"
    return f"upsample_{kind}2d_channels_last" if n == 2 else f"compute_indices_weights_{kind}"


def _resample(x, dim, n_in, n_out, factor, mode, align_corners, taps=None):
    """``x`` resized along ``dim`` from ``n_in`` to ``n_out`` positions, the weights
    rounded to ``taps`` (a NumPy dtype) where given."""
    acc = np.float64 if x.dtype is dt.float64 else np.float32
    dst = np.arange(n_out, dtype=acc)
    scale = acc(1 / factor) if factor else acc(n_in / n_out)
    if mode in ("nearest", "nearest-exact"):
        offset = acc(0.5) if mode == "nearest-exact" else acc(0)
        idx = np.minimum(np.floor((dst + offset) * scale).astype(np.int64), n_in - 1)
        return _gather(x, dim, idx)
    if align_corners:
        scale = acc((n_in - 1) / (n_out - 1)) if n_out > 1 else acc(0)
        src = dst * scale
    else:
        src = (dst + acc(0.5)) * scale - acc(0.5)
    if mode == "bicubic":  # its taps reach past the edges (clamped there), src is not
        return _bicubic(x, dim, n_in, src, taps)
    src = np.maximum(src, acc(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    shape_ = [1] * x.ndim
    shape_[dim] = n_out
    w1 = _taps(src - i0, taps, x).reshape(shape_)
    w0 = _taps(1 - w1, taps, x)
    return _gather(x, dim, i0) * Tensor._wrap(w0) + _gather(x, dim, i1) * Tensor._wrap(w1)


def _taps(w, taps, x):
    """Weights ``w`` in ``x``'s dtype, rounded to ``taps`` first where given."""
    return (w if taps is None else w.astype(taps)).astype(x.dtype.np)


def _aa_weights(n_in, n_out, factor, mode, align_corners, acc):
    """torch's antialiasing filter (PIL's; ``_compute_indices_min_size_weights_aa``): per
    output its first input ``lo``, its tap count ``size`` and its normalised weights
    (``[taps, n_out]``, 0 past ``size``): the triangle (bilinear) or Keys' cubic with
    a = -0.5 (bicubic) centred on the output's source position and stretched by the scale
    when downsampling. Each step in torch's precision: ``acc`` (the input's float type)
    where torch's ``scalar_t`` is, double where its C++ promotes to double, and the cubic's
    multiply-adds fused, as GCC contracts them in torch's build."""
    f64 = np.float64
    if align_corners:
        scale = acc(n_in - 1) / acc(n_out - 1) if n_out > 1 else acc(0)
    else:
        scale = acc(1 / factor) if factor else acc(n_in) / acc(n_out)
    half = 1 if mode == "bilinear" else 2  # half the filter's width
    support = acc(half * f64(scale)) if scale >= 1 else acc(half)
    taps = 2 * math.ceil(support) + 1
    center = scale * (np.arange(n_out, dtype=acc) + acc(0.5))
    lo = np.maximum(((center - support).astype(f64) + 0.5).astype(np.int64), 0)
    hi = np.minimum(((center + support).astype(f64) + 0.5).astype(np.int64), n_in)
    size = np.clip(hi - lo, 0, taps)
    j = np.arange(taps)[:, None]
    invscale = acc(1 / f64(scale)) if scale >= 1 else acc(1)
    d = np.abs(((((j + lo).astype(acc) - center).astype(f64) + 0.5) * f64(invscale)).astype(acc))
    if mode == "bilinear":
        w = np.where(d < 1, acc(1) - d, acc(0))
    else:
        f = fma32 if acc is np.float32 else fma64_total
        a = acc(-0.5)
        near = f(f(a + 2, d, -(a + 3)) * d, d, acc(1))
        far = f(f(f(a, d, -5 * a), d, 8 * a), d, -4 * a)
        w = np.where(d < 1, near, np.where(d < 2, far, acc(0)))
    w = np.where(j < size, w, acc(0)).astype(acc)
    total = w[0].copy()
    for k in range(1, taps):  # in torch's order
        total += w[k]
    return lo, size, (w / np.where(total != 0, total, acc(1))).astype(acc)


def _resample_aa(x, dim, n_in, n_out, factor, mode, align_corners):
    """``_resample`` with antialiasing, as torch's: each output the sum of its taps times
    ``_aa_weights``, in torch's order and roundings. torch's loop (``output += t * w``)
    comes out of GCC vectorised: the products of each full 16-byte step of taps after the
    first are rounded and added in order, the last ``(size - 1) % lanes`` by FMA."""
    acc = np.float64 if x.dtype is dt.float64 else np.float32
    lo, size, w = _aa_weights(n_in, n_out, factor, mode, align_corners, acc)
    lanes = 16 // np.dtype(acc).itemsize
    rounded = 1 + (size - 1) // lanes * lanes  # taps from here on are fused
    shape_ = [1] * x.ndim
    shape_[dim] = n_out

    def weight(k):
        return Tensor._wrap(w[k].astype(x.dtype.np).reshape(shape_))

    def where(mask, a, b):
        return a if mask.all() else ew.where(Tensor._wrap(mask.reshape(shape_)), a, b)

    out = _gather(x, dim, lo) * weight(0)
    for k in range(1, len(w)):
        used = k < size  # an output's taps past its size are not added (an inf there)
        if not used.any():
            break
        g = _gather(x, dim, np.minimum(lo + k, n_in - 1))
        plain = k < rounded
        fused = None if plain.all() else ad.fma(*operands(g, weight(k), out))
        new = fused if not plain.any() else where(plain, out + g * weight(k), fused)
        out = where(used, new, out)
    return out


# Note [uint8 resize]: torch resizes uint8 images (bilinear, bicubic) in fixed point, as PIL:
# per axis, float64 weights (antialiased: ``_aa_weights``; not: its own at the borders,
# ``_uint8_plain_weights``) scaled to int16 at the most bits that keep the axis's largest
# weight under 2**15, each output the integer sum of its taps times the weights plus half,
# shifted down and clamped to 0..255; the last axis first, an axis of unchanged size left
# as it is. Its AVX2 kernel and its generic one give the same integers (tests/ops/
# test_uint8_resize.py against torch 2.13). NumPy computes it; it has no lowering.
def _interpolate_uint8(input, outs, scales, mode, align_corners, antialias):
    """``interpolate`` of a uint8 4-D ``input`` (Note [uint8 resize])."""
    if type(input._payload) is not np.ndarray and current_interceptor() is not None:
        raise NotImplementedError(
            f"interpolate(mode={mode!r}) of a uint8 image has no compiled form: resize it "
            "outside the compiled function, or in float"
        )
    a = host = input._host()
    for axis in (3, 2):
        n_in, n_out = a.shape[axis], outs[axis - 2]
        if n_in != n_out:
            a = _resample_uint8(
                a, axis, n_in, n_out, scales[axis - 2], mode, align_corners, antialias
            )
    return Tensor._wrap(
        a.copy() if a is host else np.ascontiguousarray(a)
    )  # never the input's memory


def _resample_uint8(a, axis, n_in, n_out, factor, mode, align_corners, antialias):
    """One axis of Note [uint8 resize]."""
    if antialias:
        lo, size, w = _aa_weights(n_in, n_out, factor, mode, align_corners, np.float64)
        w = w.T  # [n_out, taps]
        top = w.max() if w.size else 0.0
    else:
        lo, size, w, top = _uint8_plain_weights(n_in, n_out, factor, mode, align_corners)
    bits = 0
    while bits < 22 and int(0.5 + top * (1 << (bits + 1))) < 1 << 15:
        bits += 1
    v = w * float(1 << bits)
    k = np.trunc(np.where(v < 0, v - 0.5, v + 0.5)).astype(np.int64)  # C's (int) of v +- 0.5
    k[np.arange(w.shape[1])[None, :] >= size[:, None]] = 0
    idx = np.minimum(lo[:, None] + np.arange(w.shape[1])[None, :], n_in - 1)  # [n_out, taps]
    taps = np.moveaxis(np.take(a, idx, axis=axis), (axis, axis + 1), (-2, -1))
    total = (taps.astype(np.int64) * k).sum(-1) + (1 << (bits - 1))
    out = np.clip(total >> bits, 0, 255).astype(np.uint8)
    return np.moveaxis(out, -1, axis)


def _uint8_plain_weights(n_in, n_out, factor, mode, align_corners):
    """torch's float64 weights of uint8 resizing without antialiasing
    (``_compute_indices_min_size_weights``): per output its first input, its tap count and
    its weights (the taps past an edge added into the edge's), and the largest weight any
    running sum reached; bicubic's a = -0.75."""
    if align_corners:
        scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        scale = 1 / factor if factor else n_in / n_out
    taps = 2 if mode == "bilinear" else 4
    support = taps // 2
    i = np.arange(n_out, dtype=np.float64)
    src = scale * i if align_corners else scale * (i + 0.5) - 0.5
    if not align_corners and mode == "bilinear":
        src = np.maximum(src, 0.0)
    index = np.minimum(np.floor(src.astype(np.float32)).astype(np.int64), n_in - 1)  # floorf
    lam = np.clip(src - index, 0.0, 1.0)
    first = index - support + 1
    lo = np.maximum(first, 0)
    size = np.clip(np.minimum(index + support + 1, n_in) - lo, 0, taps)
    w = np.zeros((n_out, taps))
    top = 0.0
    rows = np.arange(n_out)
    at = np.zeros(n_out, np.int64)
    for j in range(taps):
        d = np.abs((j + 1 - support) - lam)
        if mode == "bilinear":
            f = np.where(d < 1, 1.0 - d, 0.0)
        else:
            a = -0.75
            near = fma64_total(fma64_total(a + 2, d, -(a + 3)) * d, d, 1.0)
            far = fma64_total(fma64_total(fma64_total(a, d, -5 * a), d, 8 * a), d, -4 * a)
            f = np.where(d < 1, near, np.where(d < 2, far, 0.0))
        at = np.where(first + j <= 0, 0, np.where(first + j >= n_in - 1, size - 1, at))
        w[rows, at] += f
        top = max(top, float(w[rows, at].max()) if n_out else 0.0)
        at = at + 1
    return lo, size, w, top


def _bicubic(x, dim, n_in, src, taps=None):
    """Keys' cubic convolution (a = -0.75) of the four taps around ``src`` along ``dim``,
    taps past an edge clamped to it, summed in torch's order from its coefficients (rounded
    to ``taps`` where given)."""
    i0 = np.floor(src)
    t = src - i0
    a = src.dtype.type(-0.75)

    def near(d):  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    shape_ = [1] * x.ndim
    shape_[dim] = len(src)
    out = None
    for k, w in enumerate((far(t + 1), near(t), near(1 - t), far(2 - t))):
        idx = np.clip(i0.astype(np.int64) - 1 + k, 0, n_in - 1)
        term = _gather(x, dim, idx) * Tensor._wrap(_taps(w, taps, x).reshape(shape_))
        out = term if out is None else out + term
    return out
