"""nn.init: in-place initialisers, run under no_grad, with PyTorch's gains and fans and
its draws in its order (the same values after the same seed; ``orthogonal_``'s QR runs in
NumPy's float64 LAPACK, so its values agree with torch's to rounding)."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..eager.grad_mode import no_grad
from ..eager.random import fills, methods
from ..eager.random.distributions import randperm
from ..eager.random.generator import default_generator, locked, resolve
from ..eager.tensor import Tensor


def calculate_gain(nonlinearity: str, param=None) -> float:
    if nonlinearity in (
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "sigmoid",
    ):
        return 1  # torch's int
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is not None and (isinstance(param, bool) or not isinstance(param, (int, float))):
            raise ValueError(f"negative_slope {param} not a valid number")
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(t: Tensor):
    if t.ndim < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
        )
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def _fill(t: Tensor, array: np.ndarray) -> Tensor:
    with no_grad():
        t.copy_(Tensor._wrap(np.asarray(array, t.dtype.np)))
    return t


def uniform_(t, a=0.0, b=1.0, generator=None):
    with no_grad():
        return methods.uniform_(t, a, b, generator=generator)


def normal_(t, mean=0.0, std=1.0, generator=None):
    with no_grad():
        return methods.normal_(t, mean, std, generator=generator)


def constant_(t, val):
    return _fill(t, np.full(tuple(t.shape), val))


def zeros_(t):
    return constant_(t, 0.0)


def ones_(t):
    return constant_(t, 1.0)


def xavier_uniform_(t, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std  # torch's expression: its rounding is the bound's
    return uniform_(t, -a, a, generator)


def xavier_normal_(t, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _calculate_correct_fan(t, mode):
    """The fan of ``t`` that ``mode`` names (torch's private name, which peft imports)."""
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    return fan_in if mode == "fan_in" else fan_out


def _kaiming_std(t, a, mode, nonlinearity):
    """``gain / sqrt(fan)``, or None (with torch's warning) for a tensor with no elements."""
    if 0 in t.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(t, mode))


def kaiming_uniform_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    std = _kaiming_std(t, a, mode, nonlinearity)
    if std is None:
        return t
    bound = math.sqrt(3.0) * std
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    std = _kaiming_std(t, a, mode, nonlinearity)
    return t if std is None else normal_(t, 0.0, std, generator)


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


def orthogonal_(t, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix, flattened to (rows, numel / rows), from the QR of a
    Gaussian one with the signs of R's diagonal (Saxe et al. 2013), times ``gain``."""
    if t.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if t.numel() == 0:
        return t
    rows = t.shape[0]
    cols = t.numel() // rows
    gen = resolve(generator, "nn.init.orthogonal_")
    a = locked(fills.normal, gen, np.empty((rows, cols), t.dtype.np))
    if rows < cols:
        a = a.T
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(t, q.reshape(tuple(t.shape)) * t.dtype.np.type(gain))


def trunc_normal_(t, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) restricted to [a, b], by torch's rejection sampling: redrawn
    normals where out of range when [a, b] holds more than 30% of the mass, else uniforms
    on [a, b] accepted by the density ratio (with NumPy's float32 log where torch's is
    SLEEF's: the two differ by an ulp at times, which could flip an acceptance)."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
            "distribution of values may be incorrect.",
            stacklevel=2,
        )
    mass = _norm_cdf((b - mean) / std) - _norm_cdf((a - mean) / std)
    gen = resolve(generator, "nn.init.trunc_normal_")
    like = fills.like(t)  # each draw fills a tensor laid out as t (empty_like), one at a time
    f = t.dtype.np.type
    if mass > 0.3:
        lo, hi = float(f(a)), float(f(b))
        x = locked(fills.normal, gen, like, mean, std)
        while ((x < lo) | (x > hi)).any():
            x = np.where((x < lo) | (x > hi), locked(fills.normal, gen, like, mean, std), x)
        return _fill(t, x)
    mode = max(a, min(mean, b))
    log_peak = -0.5 * ((mode - mean) / std) ** 2

    def log_ratio(x):  # torch's float ops: sub_, div_, pow_(2), mul_(-0.5), sub_
        return (((x - f(mean)) / f(std)) ** 2 * f(-0.5)) - f(log_peak)

    def rejected(x):
        return np.log(locked(fills.uniform, gen, like)) > log_ratio(x)

    x = locked(fills.uniform, gen, like, a, b)
    pending = rejected(x)
    while pending.any():
        fresh = locked(fills.uniform, gen, like, a, b)
        x = np.where(pending, fresh, x)
        pending = np.where(pending, rejected(fresh), pending)
    return _fill(t, x)


def _norm_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def sparse_(t, sparsity, std=0.01, generator=None):
    """Normal(0, std) with ``ceil(sparsity * rows)`` zeros in each column (Martens 2010);
    the zeros' rows come from ``randperm`` on the default generator, as in torch."""
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = t.shape
    zeros = int(math.ceil(sparsity * rows))
    a = locked(fills.normal, resolve(generator, "nn.init.sparse_"), fills.like(t), 0.0, std)
    for c in range(cols):
        a[locked(randperm, default_generator, rows)[:zeros], c] = 0
    return _fill(t, a)


def _deprecated(init):
    """``nn.init.<name>``, the old name of ``init`` (``<name>_``): warns, then runs it."""
    old = init.__name__[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(
            f"`nn.init.{old}` is now deprecated in favor of `nn.init.{init.__name__}`.",
            FutureWarning,
            stacklevel=2,
        )
        return init(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old
    return deprecated_init


uniform, normal, constant, eye, dirac = map(
    _deprecated, (uniform_, normal_, constant_, eye_, dirac_)
)
xavier_uniform, xavier_normal = _deprecated(xavier_uniform_), _deprecated(xavier_normal_)
kaiming_uniform, kaiming_normal = _deprecated(kaiming_uniform_), _deprecated(kaiming_normal_)
orthogonal, sparse = _deprecated(orthogonal_), _deprecated(sparse_)
