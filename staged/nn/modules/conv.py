"""Conv1d/2d/3d: weights ``(out, in / groups, *kernel)``; ConvTranspose1d/2d/3d: weights
``(in, out / groups, *kernel)``; PyTorch's default init; their lazy forms, whose
``in_channels`` come from the first input."""

from __future__ import annotations

import math

from ...eager.factories import empty
from ...eager.grad_mode import no_grad
from ...eager.ops.layers import conv_padding
from ...eager.tensor import Size
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from .lazy import LazyModuleMixin, UninitializedParameter
from .utils import _ntuple


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
        n = self._n
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _ntuple(n)(kernel_size), _ntuple(n)(stride)
        self.padding = padding if isinstance(padding, str) else _ntuple(n)(padding)
        self.dilation, self.padding_mode = _ntuple(n)(dilation), padding_mode
        self.output_padding = (0,) * n
        # F.pad's order for a non-zeros padding_mode: last dim first, (low, high) each
        self._reversed_padding_repeated_twice = [
            p
            for lo_hi in reversed(
                conv_padding(padding, self.kernel_size, self.stride, self.dilation, n, ValueError)
            )
            for p in lo_hi
        ]
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
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    """A convolution's forward, through ``_conv_forward(input, weight, bias)`` as torch's
    (which LoRA's and weight-standardising layers call with weights of their own)."""

    def _conv_forward(self, input, weight, bias):
        conv = (F.conv1d, F.conv2d, F.conv3d)[self._n - 1]
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over ``(N, C_in, L)``."""

    _n = 1


class Conv2d(_Conv):
    """2-D convolution over ``(N, C_in, H, W)``, as ``torch.nn.Conv2d``.

    Example:
        >>> conv = nn.Conv2d(1, 6, 3, padding=1)    # (N, 1, 8, 8) -> (N, 6, 8, 8)
    """

    _n = 2


class Conv3d(_Conv):
    """3-D convolution over ``(N, C_in, D, H, W)``, as ``torch.nn.Conv3d``."""

    _n = 3


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
        self.output_padding = _ntuple(self._n)(output_padding)

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
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self._n - 1]
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


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over ``(N, C_in, D, H, W)``."""

    _n = 3


class _LazyConvXdMixin(LazyModuleMixin):
    """``in_channels`` from the first input (dim 1, dim 0 unbatched), then weight and bias
    materialized and initialised as the module it becomes initialises them."""

    _n: int
    _transposed: bool
    in_channels: int
    out_channels: int
    groups: int
    kernel_size: tuple
    weight: Parameter
    bias: Parameter | None

    def _uninitialized(self, out_channels, bias, device, dtype):
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()  # type: ignore[misc]

    def _get_in_channels(self, input):
        n = self._n
        if input.ndim not in (n + 1, n + 2):
            raise RuntimeError(
                f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                f"{type(self).__name__}, but got input of size: {input.shape}"
            )
        return input.shape[1] if input.ndim == n + 2 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        self.in_channels = self._get_in_channels(input)
        if self.in_channels % self.groups:
            raise ValueError("in_channels must be divisible by groups")
        io = (
            (self.in_channels, self.out_channels // self.groups)
            if self._transposed
            else (self.out_channels, self.in_channels // self.groups)
        )
        with no_grad():
            self.weight.materialize((*io, *self.kernel_size))  # type: ignore[attr-defined]
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))  # type: ignore[attr-defined]
            self.reset_parameters()


class _LazyConv(_LazyConvXdMixin):
    def __init__(
        self,
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
        super().__init__(  # type: ignore[call-arg]
            0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device, dtype
        )
        self._uninitialized(out_channels, bias, device, dtype)


class _LazyConvTranspose(_LazyConvXdMixin):
    def __init__(
        self,
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
        super().__init__(  # type: ignore[call-arg]
            0,
            0,
            kernel_size,
            stride,
            padding,
            output_padding,
            groups,
            False,
            dilation,
            padding_mode,
            device,
            dtype,
        )
        self._uninitialized(out_channels, bias, device, dtype)


class LazyConv1d(_LazyConv, Conv1d):
    """``Conv1d`` whose ``in_channels`` is the first input's; it becomes a ``Conv1d``."""

    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    """``Conv2d`` whose ``in_channels`` is the first input's; it becomes a ``Conv2d``.

    Example:
        >>> conv = nn.LazyConv2d(8, 3)
        >>> conv(staged.randn(1, 3, 5, 5)).shape     # now a Conv2d(3, 8, 3)
        staged.Size([1, 8, 3, 3])
    """

    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    """``Conv3d`` whose ``in_channels`` is the first input's; it becomes a ``Conv3d``."""

    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    """``ConvTranspose1d`` whose ``in_channels`` is the first input's."""

    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    """``ConvTranspose2d`` whose ``in_channels`` is the first input's."""

    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    """``ConvTranspose3d`` whose ``in_channels`` is the first input's."""

    cls_to_become = ConvTranspose3d
