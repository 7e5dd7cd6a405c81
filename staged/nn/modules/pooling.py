"""Max, average, Lp and adaptive pooling, and max unpooling, modules over
``nn.functional``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from .. import functional as F
from ..module import Module


class _MaxPoolNd(Module):
    def __init__(
        self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False
    ):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def extra_repr(self):
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(_MaxPoolNd):
    def forward(self, input):
        return F.max_pool1d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
            self.return_indices,
        )


class MaxPool2d(_MaxPoolNd):
    """2-D max pooling (``stride`` defaults to ``kernel_size``)."""

    def forward(self, input):
        return F.max_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
            self.return_indices,
        )


class MaxPool3d(_MaxPoolNd):
    """3-D max pooling (``stride`` defaults to ``kernel_size``)."""

    def forward(self, input):
        return F.max_pool3d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
            self.return_indices,
        )


class _AvgPoolNd(Module):
    def __init__(
        self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True
    ):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad = count_include_pad

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    def forward(self, input):
        return F.avg_pool1d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
        )


class AvgPool2d(_AvgPoolNd):
    """2-D average pooling (``stride`` defaults to ``kernel_size``)."""

    fn: ClassVar[Callable[..., Any]] = F.avg_pool2d

    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode=False,
        count_include_pad=True,
        divisor_override=None,
    ):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    def forward(self, input):
        return type(self).fn(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class AvgPool3d(AvgPool2d):
    """3-D average pooling (``stride`` defaults to ``kernel_size``)."""

    fn = F.avg_pool3d


class _LPPoolNd(Module):
    fn: ClassVar[Callable[..., Any]]

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def forward(self, input):
        return type(self).fn(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"ceil_mode={self.ceil_mode}"
        )


class LPPool1d(_LPPoolNd):
    """Power-average pooling: ``(sum over the window of x^p)^(1/p)``."""

    fn = F.lp_pool1d


class LPPool2d(_LPPoolNd):
    """Power-average pooling: ``(sum over the window of x^p)^(1/p)``."""

    fn = F.lp_pool2d


class LPPool3d(_LPPoolNd):
    """Power-average pooling: ``(sum over the window of x^p)^(1/p)``."""

    fn = F.lp_pool3d


class _MaxUnpoolNd(Module):
    fn: ClassVar[Callable[..., Any]]
    _n = 0

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        n = self._n
        as_tuple = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,) * n  # noqa: E731
        self.kernel_size = as_tuple(kernel_size)
        self.stride = as_tuple(kernel_size if stride is None else stride)
        self.padding = as_tuple(padding)

    def forward(self, input, indices, output_size=None):
        return type(self).fn(
            input, indices, self.kernel_size, self.stride, self.padding, output_size
        )

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool1d``: each value at its index, zeros elsewhere."""

    fn, _n = F.max_unpool1d, 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool2d(return_indices=True)``: each value at its index,
    zeros elsewhere."""

    fn, _n = F.max_unpool2d, 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool3d``: each value at its index, zeros elsewhere."""

    fn, _n = F.max_unpool3d, 3


class _AdaptivePoolNd(Module):
    fn: ClassVar[Callable[..., Any]]

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return type(self).fn(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    fn = F.adaptive_avg_pool1d


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    """Average pooling to ``output_size`` (an int, a pair, None keeping a size)."""

    fn = F.adaptive_avg_pool2d


class AdaptiveAvgPool3d(_AdaptivePoolNd):
    fn = F.adaptive_avg_pool3d


class _AdaptiveMaxPoolNd(_AdaptivePoolNd):
    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return type(self).fn(input, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    fn = F.adaptive_max_pool1d


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max pooling to ``output_size``; ``return_indices`` adds each maximum's flat index."""

    fn = F.adaptive_max_pool2d


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    fn = F.adaptive_max_pool3d


class _FractionalMaxPoolNd(Module):
    fn: ClassVar[Callable[..., Any]]
    _n = 0

    def __init__(
        self,
        kernel_size,
        output_size=None,
        output_ratio=None,
        return_indices=False,
        _random_samples=None,
    ):
        super().__init__()
        n, name = self._n, type(self).__name__
        as_tuple = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,) * n  # noqa: E731
        if n == 3 and min(as_tuple(kernel_size)) <= 0:
            raise ValueError(f"kernel_size must be greater than 0, but got {kernel_size}")
        self.kernel_size, self.return_indices = as_tuple(kernel_size), return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = None if output_size is None else as_tuple(output_size)
        self.output_ratio = None if output_ratio is None else as_tuple(output_ratio)
        if output_size is None and output_ratio is None:
            raise ValueError(
                f"{name} requires specifying either an output size, or a pooling ratio"
            )
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        return type(self).fn(
            input,
            self.kernel_size,
            self.output_size,
            self.output_ratio,
            self.return_indices,
            _random_samples=self._random_samples,
        )


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Max pooling over pseudo-random windows to ``output_size`` (or ``output_ratio``):
    window starts drawn per plane (``staged.rand``, torch's draws) unless
    ``_random_samples`` is given."""

    fn, _n = F.fractional_max_pool2d, 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-D fractional max pooling (see ``FractionalMaxPool2d``)."""

    fn, _n = F.fractional_max_pool3d, 3
