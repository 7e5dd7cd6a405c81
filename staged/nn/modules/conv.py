"""Conv1d, Conv2d: weights ``(out, in / groups, *kernel)``; ConvTranspose1d/2d: weights
``(in, out / groups, *kernel)``; PyTorch's default init."""

from __future__ import annotations

import math

from ...eager.factories import empty
from ...eager.ops.layers import conv_padding
from ...eager.tensor import Size
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter


def _ntuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _ConvNd(Module):
    _n = 0
    _transposed = False

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(
                "padding_mode must be one of {'zeros', 'reflect', 'replicate', 'circular'}, "
                f"but got padding_mode={padding_mode!r}"
            )
        if padding_mode != "zeros":
            raise NotImplementedError(f"padding_mode={padding_mode!r}: only 'zeros' is supported")
        n = self._n
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _ntuple(kernel_size, n), _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation, self.padding_mode = _ntuple(dilation, n), padding_mode
        self.output_padding = (0,) * n
        if isinstance(padding, str):
            conv_padding(padding, self.kernel_size, self.stride, self.dilation, n)
        io = (
            (in_channels, out_channels // groups)
            if self._transposed
            else (out_channels, in_channels // groups)
        )
        self.weight = Parameter(empty(*io, *self.kernel_size, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in else 0
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        n = self._n
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0,) * n:
            s += f", padding={self.padding!r}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv1d(_ConvNd):
    """1-D convolution over ``(N, C_in, L)``."""

    _n = 1

    def forward(self, input):
        return F.conv1d(
            input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class Conv2d(_ConvNd):
    """2-D convolution over ``(N, C_in, H, W)``, as ``torch.nn.Conv2d``.

    Example:
        >>> conv = nn.Conv2d(1, 6, 3, padding=1)    # (N, 1, 8, 8) -> (N, 6, 8, 8)
    """

    _n = 2

    def forward(self, input):
        return F.conv2d(
            input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        bias=True,
        dilation=1,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        if padding_mode != "zeros":
            raise ValueError(
                f'Only "zeros" padding mode is supported for {self.__class__.__name__}'
            )
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
        )
        self.output_padding = _ntuple(output_padding, self._n)

    def _output_padding(self, input, output_size):
        """``output_padding``, or the one that gives ``output_size`` (torch's rule and errors)."""
        if output_size is None:
            return self.output_padding
        n = self._n
        lead = 2 if input.ndim == n + 2 else 1
        output_size = list(output_size)
        if len(output_size) == lead + n:
            output_size = output_size[lead:]
        if len(output_size) != n:
            raise ValueError(
                f"ConvTranspose{n}D: for {input.ndim}D input, output_size must have {n} "
                f"or {lead + n} elements (got {len(output_size)})"
            )
        lo = [
            (input.shape[lead + i] - 1) * self.stride[i]
            - 2 * self.padding[i]
            + self.dilation[i] * (self.kernel_size[i] - 1)
            + 1
            for i in range(n)
        ]
        hi = [m + s - 1 for m, s in zip(lo, self.stride)]
        if any(not a <= size <= b for size, a, b in zip(output_size, lo, hi)):
            raise ValueError(
                f"requested an output size of {output_size}, but valid sizes range from {lo} "
                f"to {hi} (for an input of {Size(input.shape[2:])})"
            )
        return tuple(size - m for size, m in zip(output_size, lo))

    def forward(self, input, output_size=None):
        fn = F.conv_transpose1d if self._n == 1 else F.conv_transpose2d
        return fn(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self._output_padding(input, output_size),
            self.groups,
            self.dilation,
        )


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over ``(N, C_in, L)``."""

    _n = 1


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over ``(N, C_in, H, W)``, as ``torch.nn.ConvTranspose2d``.

    Example:
        >>> up = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)  # (N, 8, H, W) -> (N, 4, 2H, 2W)
    """

    _n = 2
