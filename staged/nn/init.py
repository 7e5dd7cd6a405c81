"""nn.init: in-place initialisers, run under no_grad, with PyTorch's gains and fans."""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..autodiff.special import erf as _erf
from ..eager.factories import generator
from ..eager.grad_mode import no_grad
from ..eager.tensor import Tensor


def calculate_gain(nonlinearity: str, param=None) -> float:
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(t: Tensor):
    if t.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def _fill(t: Tensor, array: np.ndarray) -> Tensor:
    with no_grad():
        t.copy_(Tensor._wrap(array.astype(t.dtype.np)))
    return t


def uniform_(t, a=0.0, b=1.0):
    return _fill(t, generator().uniform(a, b, size=tuple(t.shape)))


def normal_(t, mean=0.0, std=1.0):
    return _fill(t, generator().normal(mean, std, size=tuple(t.shape)))


def constant_(t, val):
    return _fill(t, np.full(tuple(t.shape), val))


def zeros_(t):
    return constant_(t, 0.0)


def ones_(t):
    return constant_(t, 1.0)


def xavier_uniform_(t, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -a, a)


def xavier_normal_(t, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def _fan(t, mode):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    return fan_in if mode == "fan_in" else fan_out


def kaiming_uniform_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(_fan(t, mode))
    return uniform_(t, -bound, bound)


def kaiming_normal_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    return normal_(t, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(t, mode)))


def eye_(t):
    """The identity in a 2-D tensor (ones on the diagonal of a non-square one too)."""
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(t, np.eye(*t.shape))


def dirac_(t, groups=1):
    """A convolution weight (3-5 dims) that passes its input through: per group, input
    channel ``d`` to output channel ``d`` at the kernel's centre."""
    if t.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out, inp, *kernel = t.shape
    if out % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = out // groups
    a = np.zeros(tuple(t.shape))
    centre = tuple(k // 2 for k in kernel)
    for g in range(groups):
        for d in range(min(per_group, inp)):
            a[(g * per_group + d, d) + centre] = 1
    return _fill(t, a)


def orthogonal_(t, gain=1.0):
    """A (semi-)orthogonal matrix, flattened to (rows, numel / rows), from the QR of a
    Gaussian one with the signs of R's diagonal (Saxe et al. 2013), times ``gain``."""
    if t.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if t.numel() == 0:
        return t
    rows = t.shape[0]
    cols = t.numel() // rows
    a = generator().normal(0.0, 1.0, size=(rows, cols))
    if rows < cols:
        a = a.T
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(t, gain * q.reshape(tuple(t.shape)))


def _erfinv(y: np.ndarray) -> np.ndarray:
    """erf's inverse on (-1, 1) by bisection on float64 erf (to the last bit)."""
    lo, hi = np.full(y.shape, -6.0), np.full(y.shape, 6.0)
    for _ in range(64):
        mid = (lo + hi) / 2
        below = _erf(mid) < y
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


def trunc_normal_(t, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Normal(mean, std) restricted to [a, b], by the inverse CDF (as PyTorch)."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    cdf_a = (1 + math.erf((a - mean) / std / math.sqrt(2))) / 2
    cdf_b = (1 + math.erf((b - mean) / std / math.sqrt(2))) / 2
    u = generator().uniform(2 * cdf_a - 1, 2 * cdf_b - 1, size=tuple(t.shape))
    return _fill(t, np.clip(_erfinv(u) * std * math.sqrt(2) + mean, a, b))


def sparse_(t, sparsity, std=0.01):
    """Normal(0, std) with ``ceil(sparsity * rows)`` zeros in each column (Martens 2010)."""
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = t.shape
    zeros = int(math.ceil(sparsity * rows))
    a = generator().normal(0.0, std, size=(rows, cols))
    for c in range(cols):
        a[generator().permutation(rows)[:zeros], c] = 0
    return _fill(t, a)
