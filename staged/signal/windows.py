"""``torch.signal.windows``: SciPy-style window functions of ``M`` points, symmetric
(``sym=True``, for filter design) or periodic (``sym=False``, for spectral analysis),
float32 or float64. Each is torch's composition (``linspace`` then elementwise ops) in
staged ops, so its values are torch's to rounding, and ``requires_grad=True`` gives, as
torch, a result computed from a ``linspace`` leaf."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable

from .. import dtypes as dt
from .._where import sited
from ..eager import ops
from ..eager.devices import check as _check_device
from ..eager.factories import arange, empty, linspace, ones, tensor
from ..eager.tensor import Tensor, strided

__all__ = [
    "bartlett",
    "blackman",
    "cosine",
    "exponential",
    "gaussian",
    "general_cosine",
    "general_hamming",
    "hamming",
    "hann",
    "kaiser",
    "nuttall",
]


def _checks(name: str, M, dtype, layout, device) -> tuple[int, dt.DType]:
    """torch's checks of every window's arguments; returns ``M`` and the dtype."""
    try:
        M = operator.index(M)
    except TypeError:
        raise TypeError(f"{name}(): argument 'M' must be int, not {type(M).__name__}") from None
    if device is not None:
        _check_device(device)
    d = dt.get_default_dtype() if dtype is None else dt.as_dtype(dtype)
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not strided:
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if d not in (dt.float32, dt.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {d}")
    return M, d


def _points(start, constant, M: int, d: dt.DType, requires_grad: bool) -> Tensor:
    """torch's ``linspace(start * constant, (start + (M - 1)) * constant, M)``: where a
    window evaluates its function, ``start`` the first point in samples."""
    return linspace(
        start * constant, (start + (M - 1)) * constant, M, dtype=d, requires_grad=requires_grad
    )


def _trivial(M: int, d: dt.DType, requires_grad: bool, one: bool = False) -> Tensor | None:
    """The window of no point (and, where ``one``, of one point: ``[1.]``), else None."""
    if M == 0:
        return empty(0, dtype=d, requires_grad=requires_grad)
    if one and M == 1:
        return ones(1, dtype=d, requires_grad=requires_grad)
    return None


def _span(M: int, sym: bool) -> int:
    """The number of sample spacings between a window's ends: ``M - 1`` symmetric, ``M``
    periodic (a window one longer, cut), and ``M - 1`` for ``M = 1`` either way."""
    return M if not sym and M > 1 else M - 1


@sited
def exponential(
    M,
    *,
    center=None,
    tau=1.0,
    sym=True,
    dtype=None,
    layout=strided,
    device=None,
    requires_grad=False,
) -> Tensor:
    """The exponential (Poisson) window ``exp(-|n - center| / tau)``; ``center`` (periodic
    windows only) defaults to the middle."""
    M, d = _checks("exponential", M, dtype, layout, device)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    trivial = _trivial(M, d, requires_grad)
    if trivial is not None:
        return trivial
    if center is None:
        center = _span(M, sym) / 2.0
    return ops.exp(-ops.abs(_points(-center, 1 / tau, M, d, requires_grad)))


@sited
def cosine(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False) -> Tensor:
    """The cosine (sine) window ``sin(pi (n + 0.5) / M)`` (SciPy's)."""
    M, d = _checks("cosine", M, dtype, layout, device)
    trivial = _trivial(M, d, requires_grad)
    if trivial is not None:
        return trivial
    constant = math.pi / (M + 1 if not sym and M > 1 else M)
    return ops.sin(_points(0.5, constant, M, d, requires_grad))


@sited
def gaussian(
    M, *, std=1.0, sym=True, dtype=None, layout=strided, device=None, requires_grad=False
) -> Tensor:
    """The Gaussian window ``exp(-((n - c) / std)^2 / 2)``, ``c`` the middle."""
    M, d = _checks("gaussian", M, dtype, layout, device)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    trivial = _trivial(M, d, requires_grad)
    if trivial is not None:
        return trivial
    k = _points(-_span(M, sym) / 2.0, 1 / (std * math.sqrt(2)), M, d, requires_grad)
    return ops.exp(-(k**2))


@sited
def kaiser(
    M, *, beta=12.0, sym=True, dtype=None, layout=strided, device=None, requires_grad=False
) -> Tensor:
    """The Kaiser window ``I0(sqrt(beta^2 - k^2)) / I0(beta)``, ``k`` from ``-beta`` to
    ``beta`` (torch's, its ends computed in the window's dtype)."""
    M, d = _checks("kaiser", M, dtype, layout, device)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    trivial = _trivial(M, d, requires_grad, one=True)
    if trivial is not None:
        return trivial
    b = tensor(beta, dtype=d)
    constant = 2.0 * b / (M if not sym else M - 1)
    end = ops.minimum(b, -b + (M - 1) * constant)
    k = linspace(-b.item(), end.item(), M, dtype=d, requires_grad=requires_grad)
    return ops.i0(ops.sqrt(b * b - ops.pow(k, 2))) / ops.i0(b)


@sited
def general_cosine(
    M, *, a, sym=True, dtype=None, layout=strided, device=None, requires_grad=False
) -> Tensor:
    """``sum_i (-1)^i a_i cos(2 pi i n / N)``, ``N`` = ``M - 1`` (symmetric) or ``M``."""
    M, d = _checks("general_cosine", M, dtype, layout, device)
    trivial = _trivial(M, d, requires_grad, one=True)
    if trivial is not None:
        return trivial
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    k = _points(0, 2 * math.pi / _span(M, sym), M, d, requires_grad)
    a_i = tensor([(-1) ** i * w for i, w in enumerate(a)], dtype=d, requires_grad=requires_grad)
    i = arange(a_i.shape[0], dtype=d, requires_grad=requires_grad)
    return (a_i.unsqueeze(-1) * ops.cos(i.unsqueeze(-1) * k)).sum(0)


@sited
def general_hamming(
    M, *, alpha=0.54, sym=True, dtype=None, layout=strided, device=None, requires_grad=False
) -> Tensor:
    """``alpha - (1 - alpha) cos(2 pi n / N)`` (``general_cosine``'s ``N``)."""
    return general_cosine(
        M,
        a=[alpha, 1.0 - alpha],
        sym=sym,
        dtype=dtype,
        layout=layout,
        device=device,
        requires_grad=requires_grad,
    )


@sited
def hamming(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False) -> Tensor:
    """``general_hamming`` with ``alpha = 0.54``."""
    return general_hamming(
        M, sym=sym, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad
    )


@sited
def hann(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False) -> Tensor:
    """``general_hamming`` with ``alpha = 0.5``: ``sin^2(pi n / N)``."""
    return general_hamming(
        M,
        alpha=0.5,
        sym=sym,
        dtype=dtype,
        layout=layout,
        device=device,
        requires_grad=requires_grad,
    )


@sited
def blackman(
    M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False
) -> Tensor:
    """``general_cosine`` with ``a = [0.42, 0.5, 0.08]``."""
    _checks("blackman", M, dtype, layout, device)
    return general_cosine(
        M,
        a=[0.42, 0.5, 0.08],
        sym=sym,
        dtype=dtype,
        layout=layout,
        device=device,
        requires_grad=requires_grad,
    )


@sited
def bartlett(
    M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False
) -> Tensor:
    """The triangular window ``1 - |2 n / N - 1|`` (``general_cosine``'s ``N``)."""
    M, d = _checks("bartlett", M, dtype, layout, device)
    trivial = _trivial(M, d, requires_grad, one=True)
    if trivial is not None:
        return trivial
    end = -1 + (M - 1) * (2 / (M if not sym else M - 1))
    return 1 - ops.abs(linspace(-1, end, M, dtype=d, requires_grad=requires_grad))


@sited
def nuttall(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False) -> Tensor:
    """Nuttall's minimum 4-term Blackman-Harris window (``general_cosine`` with ``a =
    [0.3635819, 0.4891775, 0.1365995, 0.0106411]``)."""
    return general_cosine(
        M,
        a=[0.3635819, 0.4891775, 0.1365995, 0.0106411],
        sym=sym,
        dtype=dtype,
        layout=layout,
        device=device,
        requires_grad=requires_grad,
    )
