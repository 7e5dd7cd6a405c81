"""Composites over primitives: no rules of their own, differentiated through their parts."""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ... import autodiff as ad
from ... import dtypes as dt
from ...autodiff import fused
from ...autodiff.avals import wrap_dim
from ..interceptor import current_interceptor
from ..tensor import Tensor
from . import elementwise
from .shape import contiguous
from ._operands import (
    broadcast_shapes,
    expand_to,
    float_operand,
    floating_kernel,
    half,
    promote_types,
    scalar_tensor,
)
from ._operands import in_float32 as _in_float32
from .elementwise import (
    abs,
    clamp,
    cos,
    erf,
    erfc,
    erfcx,
    exp,
    exp2,
    i0,
    i1,
    isfinite,
    isinf,
    isnan,
    lgamma,
    log,
    log1p,
    log2,
    logical_and,
    logical_or,
    maximum,
    pow,
    sin,
    trunc,
    where,
)
from .inplace import apply_inplace
from .reduction import _scan, all, argsort, in_float32, logsumexp, sum
from .reduction import norm as vector_norm
from .reduction import any as any_
from .shape import broadcast_tensors, cat, stack, view_as_complex


def _floating(name, x, dim):
    """torch has no integer softmax kernels: its error, naming the kernel it would run."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        last = x.ndim == 0 or wrap_dim(dim, x.ndim) == x.ndim - 1
        kernel = f"{name}_lastdim_kernel_impl" if last else f"{name}_kernel_impl"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{x.dtype.title}'")


def _fusable(x) -> bool:
    """Whether softmax's fused kernel is written for ``x`` (real floating, bfloat16 too:
    Note [half softmax] in autodiff/fused.py; not empty)."""
    return x.ndim > 0 and x.numel() > 0 and (fused.fusable(x) or x.dtype is dt.bfloat16)


def log_softmax(x, dim, dtype=None):
    """``x - logsumexp(x, dim)``; with ``dtype``, of ``x`` cast to it first (torch's)."""
    return _log_softmax_of(x if dtype is None else x.to(dtype), dim)


def _log_softmax_of(x, dim):
    _floating("log_softmax", x, dim)
    if _fusable(x):  # half types too, rounded as torch's kernel (Note [half softmax])
        return _log_softmax(contiguous(x), dim=wrap_dim(dim, x.ndim))
    return _log_softmax_composite(x, dim=dim)


@in_float32
def _log_softmax_composite(x, *, dim):
    return x - logsumexp(x, dim, keepdim=True)


def _log_softmax_decomposed(x, *, dim):
    """The fused kernel's parts (real floats): no guard on an infinite max, as torch's
    kernel (logsumexp guards it: ``logsumexp([1, inf])`` is inf, ``log_softmax`` NaN);
    a half type rounded where torch's kernel rounds (Note [half softmax])."""
    half = x.dtype if x.dtype in _HALF else None
    if half is not None:
        x = x.float()
    m = x.amax(dim, keepdim=True).detach()
    shifted = x - m
    lse = sum(shifted.exp(), dim, keepdim=True)
    if half is None:
        return x - (m + lse.log())
    return (shifted - lse.to(half).float().log().to(half).float()).to(half)


_HALF = (dt.float16, dt.bfloat16)


def softmax(x, dim, dtype=None):
    """``exp(x) / sum(exp(x), dim)``; with ``dtype``, of ``x`` cast to it first (torch's)."""
    return _softmax_of(x if dtype is None else x.to(dtype), dim)


def _softmax_of(x, dim):
    _floating("softmax", x, dim)
    if _fusable(x):  # of a C-contiguous copy: torch's result is laid out row-major
        return _softmax(contiguous(x), dim=wrap_dim(dim, x.ndim))
    return _softmax_widened(x, dim=dim)


def _softmax_composite(x, *, dim):
    if x.numel() == 0:  # nothing to normalize (and an empty dim has no max)
        return x.exp()
    e = (x - x.amax(dim, keepdim=True).detach()).exp()
    return e / sum(e, dim, keepdim=True)


_softmax_widened = in_float32(_softmax_composite)  # also the fused kernel's parts
_softmax = ad.Fused(
    "softmax",
    fused.softmax_impl,
    _softmax_widened,
    vjp=fused.SOFTMAX_VJP,
    node_name="SoftmaxBackward0",
)
_log_softmax = ad.Fused(
    "log_softmax",
    fused.log_softmax_impl,
    _log_softmax_decomposed,
    vjp=fused.LOG_SOFTMAX_VJP,
    node_name="LogSoftmaxBackward0",
)


@in_float32
def gelu(x, approximate="none"):
    """``x * Phi(x)`` exactly (through erf), or PyTorch's tanh approximation."""
    floating_kernel("GeluKernelImpl", x)
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return x * 0.5 * (inner.tanh() + 1)
    if approximate != "none":
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    return x * 0.5 * (erf(x * (1 / math.sqrt(2.0))) + 1)


@in_float32
def silu(x):
    return x * x.sigmoid()


@in_float32
def softplus(x, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta``, and ``x`` itself where ``beta x > threshold``.
    The exp sees 0 where the linear branch is taken, so its gradient there stays 0, not
    0 * inf."""
    floating_kernel("softplus_cpu", x)
    kernel = _softplus if fused.fusable(x) else _softplus_composite
    return kernel(x, beta=beta, threshold=threshold)


def _softplus_composite(x, *, beta, threshold):
    bx = x * beta
    linear = bx > threshold
    soft = bx.where(~linear, 0).exp().log1p() / beta
    return where(linear, x, soft)


# eagerly one kernel and torch's SoftplusBackward0 (the composite bound 7 primitives)
_softplus = ad.Fused(
    "softplus",
    fused.softplus_impl,
    _softplus_composite,
    vjp=fused.SOFTPLUS_VJP,
    node_name="SoftplusBackward0",
)


def hardshrink(input, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0."""
    floating_kernel("hardshrink_cpu", input)
    return where((input >= -lambd) & (input <= lambd), 0.0, input)


def prelu(input, weight):
    """``x`` where ``x > 0``, else ``weight * x``; ``weight`` has one entry or one per
    channel (dim 1; the only dim of a 1-D input)."""
    if input.dtype is not weight.dtype:
        raise RuntimeError(
            f"prelu: Type promoting not supported. Got {input.dtype.title} and {weight.dtype.title}"
        )
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
    floating_kernel("prelu_cpu", input)
    if weight.ndim == 1:
        weight = weight.reshape((-1,) + (1,) * (input.ndim - 2) if input.ndim >= 2 else ())
    return where(input > 0, input, input * weight)


def _real_float(name, *xs):
    """torch's kernels of these composites exist for floating dtypes only: the inputs'
    promoted dtype must be one (``logaddexp(long, float)`` computes in float)."""
    d = promote_types(*xs)
    if not d.is_floating_point:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{d.title}'")


def _real_angle(name, x):
    """``x`` as a float operand of deg2rad or rad2deg (``name``), which torch refuses for
    complex tensors."""
    if isinstance(x, Tensor) and x.dtype.is_complex:
        raise RuntimeError(f"{name} is not supported for complex tensors.")
    return float_operand(x)


def deg2rad(x):
    return _real_angle("deg2rad", x) * (math.pi / 180)


def rad2deg(x):
    return _real_angle("rad2deg", x) * (180 / math.pi)


def logaddexp(x, y):
    """log(exp(x) + exp(y)) without overflow: max + log1p(exp(-|x - y|)); two equal
    infinities are themselves. Equal finite inputs take y + log1p(exp(x - y)), the same
    value, whose derivatives of every order are sigmoid's (the max and |x - y| have kinks
    there: their second derivative would be 0, not 1/4)."""
    if promote_types(x, y).is_complex:
        return _complex_log_add(x, y)
    _real_float("logaddexp", x, y)
    if _half_pair(x, y):  # rounded once, as torch's kernel
        return _in_float32(logaddexp, x, y)
    return _log_add(x, y, exp, lambda t: t)


def _complex_log_add(x, y):
    """torch's complex logaddexp: the operand of the larger real part plus log1p(exp(the
    other minus it)); NaN where a real part is."""
    d = promote_types(x, y)
    x, y = _as(x, d), _as(y, d)
    first = x.real >= y.real
    hi, lo = where(first, x, y), where(first, y, x)
    return hi + log1p(exp(lo - hi))


def _half_pair(x, y) -> bool:
    return isinstance(x, Tensor) and isinstance(y, Tensor) and half(x, y)


def _log_add(x, y, exp_, scaled):
    """logaddexp (``exp_`` exp) or logaddexp2 (exp2, ``scaled`` dividing by log 2), on
    the operands promoted (a bool one is no operand of ``-``)."""
    d = promote_types(x, y)
    x, y = _as(x, d), _as(y, d)
    m = maximum(x, y)
    same = x == y
    tie = logical_and(same, isfinite(x))
    d = where(tie, x - y, 0)  # 0 away from ties: its exp is finite, so is its gradient
    at_tie = y + scaled(log1p(exp_(d)))
    r = where(tie, at_tie, m + scaled(log1p(exp_(-abs(x - y)))))
    return where(logical_and(isinf(m), same), m, r)


@in_float32
def logcumsumexp(x, dim):
    """log(cumsum(exp(x))) along ``dim`` without overflow: a scan of ``logaddexp``."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for '{x.dtype.title}'")
    if not x.ndim:
        return ad.copy(x)
    (y,) = _scan((x,), wrap_dim(dim, x.ndim), lambda a, b: (logaddexp(a[0], b[0]),), (-math.inf,))
    return ad.copy(x) if y is x else y


def logaddexp2(x, y):
    """log2(2**x + 2**y), as ``logaddexp`` in base 2."""
    _real_float("logaddexp2", x, y)
    if _half_pair(x, y):
        return _in_float32(logaddexp2, x, y)
    return _log_add(x, y, exp2, lambda t: t * (1 / math.log(2)))


def xlogy(x, y):
    """x * log(y), and 0 where x is 0 (unless y is NaN), with torch's gradients."""
    return _x_times(x, y, ad.xlogy, "xlogy")


def xlog1py(x, y):
    """x * log1p(y), and 0 where x is 0 (unless y is NaN): torch.special.xlog1py."""
    return _x_times(x, y, ad.xlog1py, "xlog1py")


def _x_times(x, y, prim, name):
    """``prim`` (xlogy or xlog1py) on the promoted, broadcast operands: integers compute
    as floats."""
    if not (isinstance(x, Tensor) or isinstance(y, Tensor)):
        raise TypeError(f"{name}(): at least one of the arguments must be a Tensor")
    d = promote_types(x, y)
    if d.is_complex:  # not a silent cast to the default float dtype
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{d.title}'")
    x, y = (_as(v, d if d.is_floating_point else dt.get_default_dtype()) for v in (x, y))
    shape = broadcast_shapes(x._payload.shape, y._payload.shape)
    return prim(expand_to(x, shape), expand_to(y, shape))


@in_float32
def sinc(x):
    """sin(pi x) / (pi x), and near 0 (|pi x| below 0.01 in double precision, 0.5 in single)
    its Taylor polynomial to (pi x)**6, which rounds as the quotient does and has the true
    derivatives (at 0: 0, then -pi**2 / 3, where torch's second is NaN): the quotient's
    second derivative cancels there, by eps / (pi x)**2 relative (1e17 instead of -3.3 at
    x = 6.6e-18), and the quotient sees 1, not 0 / 0."""
    x = float_operand(x)
    near = 0.01 if x.dtype in (dt.float64, dt.complex128) else 0.5
    small = abs(x) < near / math.pi
    u2 = where(small, x, 0.0) * math.pi
    u2 = u2 * u2
    px = where(small, 1.0, x) * math.pi
    return where(small, 1 - u2 / 6 * (1 - u2 / 20 * (1 - u2 / 42)), sin(px) / px)


def ndtr(x):
    """The standard normal CDF, erfc(-x / sqrt(2)) / 2 (relative accuracy in the lower
    tail): torch.special.ndtr."""
    return erfc(float_operand(x) * -math.sqrt(0.5)) * 0.5


def log_ndtr(x):
    """log(ndtr(x)) as torch computes it: log(erfcx(-t) / 2) - t^2 for t = x / sqrt(2)
    below x = -1 (no underflow), log1p(-erfc(t) / 2) above. Each branch sees only its
    own inputs, so the other's infinities give no NaN gradient."""
    x = float_operand(x)
    low = x < -1
    t = x * math.sqrt(0.5)
    t_low, t_high = where(low, t, -math.sqrt(0.5)), where(low, 0.0, t)
    return where(low, log(erfcx(-t_low) * 0.5) - t_low * t_low, log1p(erfc(t_high) * -0.5))


def mvlgamma(x, p):
    """The multivariate log-gamma function, log(pi) p (p - 1) / 4 plus the sum of
    lgamma(x - j / 2) over j < p: torch.mvlgamma (torch.special.multigammaln). As torch
    2.13's, no domain check: x <= (p - 1) / 2 gives lgamma's values there (inf at its poles)."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x = float_operand(x)
    out = lgamma(x + 0.0)  # torch's x + 0: -0 becomes +0, where digamma's pole is -inf
    for j in range(1, p):
        out = out + lgamma(x - j / 2)
    return out + math.log(math.pi) * p * (p - 1) / 4


def modified_bessel_i0(x):
    """i0 without a gradient: torch.special.modified_bessel_i0 defines none."""
    return i0(x).detach()


def modified_bessel_i1(x):
    """i1 without a gradient: torch.special.modified_bessel_i1 defines none."""
    return i1(x).detach()


def _as(v, d):
    return v.to(d) if isinstance(v, Tensor) else scalar_tensor(v, d)


def fmax(x, y):
    """The larger of the two, ignoring a NaN on one side (NaN where both are); the
    gradient goes to ``x`` on ties, as torch."""
    return where(logical_or(x >= y, isnan(y)), x, y)


def fmin(x, y):
    """The smaller of the two, ignoring a NaN on one side (NaN where both are)."""
    return where(logical_or(x <= y, isnan(y)), x, y)


def frac(x):
    """x - trunc(x), with x's sign."""
    _real_float("frac", x)
    return x - trunc(x)


def _complex_parts(a, b):
    """Torch's checks of the two real parts ``complex`` and ``polar`` take, broadcast."""
    floats = (dt.float16, dt.float32, dt.float64)
    if a.dtype not in floats or b.dtype not in floats:
        raise RuntimeError(
            "Expected both inputs to be Half, Float or Double tensors but got "
            f"{a.dtype.title} and {b.dtype.title}"
        )
    if a.dtype is not b.dtype:
        raise RuntimeError(
            f"Expected object of scalar type {a.dtype.title} but got scalar type "
            f"{b.dtype.title} for second argument"
        )
    if a.dtype is dt.float16:
        raise RuntimeError(
            "a complex tensor of float16 parts would be complex32 (ComplexHalf), which staged "
            "does not have: pass float32 parts instead"
        )
    return broadcast_tensors(a, b)


def complex(real, imag):
    """The complex tensor ``real + i imag`` (float32 parts: complex64; broadcast); the
    gradient of each part is the real or imaginary part of the result's."""
    return view_as_complex(stack(_complex_parts(real, imag), -1))


def polar(abs, angle):
    """The complex tensor of modulus ``abs`` and argument ``angle``:
    ``abs cos(angle) + i abs sin(angle)``."""
    abs, angle = _complex_parts(abs, angle)
    return view_as_complex(stack([abs * cos(angle), abs * sin(angle)], -1))


def positive(x):
    if x.dtype is dt.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return x


def float_power(x, y):
    """``pow`` in double precision (complex128 for complex operands)."""
    complex_ = any(
        v.dtype.is_complex if isinstance(v, Tensor) else type(v) is complex for v in (x, y)
    )
    d = dt.complex128 if complex_ else dt.float64
    return pow(_as(x, d), _as(y, d) if isinstance(y, Tensor) else y)


def logit(x, eps=None):
    """log(x) - log1p(-x), ``x`` clamped to [eps, 1 - eps] first where ``eps`` is given:
    its gradient 1 / x + 1 / (1 - x) is torch's 1 / (x (1 - x)), infinite at 0 and 1 (the
    quotient form's gradient is NaN there). Outside [0, 1] the value and, as torch's, the
    gradient are NaN (log1p's alone would be finite); so is the gradient at a NaN ``x`` with
    ``eps``, as torch's kernel (a clamp's would be 0)."""
    x = float_operand(x)
    if eps is not None:
        x = where(isnan(x), x, clamp(x, eps, 1 - eps))
    else:
        x = x + where(logical_or(x < 0, x > 1), math.nan, 0.0).to(x.dtype)
    return log(x) - log1p(-x)


def isclose(x, y, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|x - y| <= atol + rtol |y| (or equal, infinities included), elementwise; NaNs are
    close to each other only with ``equal_nan``."""
    if x.dtype is not y.dtype:
        raise RuntimeError(f"{x.dtype.title} did not match {y.dtype.title}")
    close = x == y
    if x.dtype.is_floating_point or x.dtype.is_complex:
        diff = abs(x - y)
        close = logical_or(close, logical_and(~isinf(diff), diff <= atol + rtol * abs(y)))
        if equal_nan:
            close = logical_or(close, logical_and(isnan(x), isnan(y)))
    return close


def allclose(x, y, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """Whether ``isclose`` holds everywhere (a Python bool)."""
    return bool(all(isclose(x, y, rtol, atol, equal_nan)))


def signbit(x):
    """Whether the sign bit is set: below 0, -0.0 (whose reciprocal is -inf), and eagerly a
    NaN's sign too (NumPy's signbit). A compiled graph has no op that reads a NaN's sign:
    there ``signbit(-nan)`` is False (torch: True)."""
    if x.dtype.is_complex:
        raise NotImplementedError("signbit is not implemented for complex tensors.")
    if current_interceptor() is None:  # eager: the bit itself (not differentiable anyway)
        return Tensor._wrap(np.asarray(np.signbit(x._host())))  # (0-d: a NumPy scalar)
    below = x < 0
    return logical_or(below, elementwise.div(1, x) < 0) if x.dtype.is_floating_point else below


def copysign(input, other):
    """``|input|`` with the sign of ``other`` (floats; -0.0 is negative, and a NaN's sign
    is read as ``signbit`` reads it); no gradient reaches ``other``, nor ``input`` where it
    is 0, as torch's."""
    d = promote_types(input, other)
    if d.is_complex:
        raise NotImplementedError(f"\"copysign_cpu\" not implemented for '{d.title}'")
    if not d.is_floating_point:
        d = dt.get_default_dtype()
    size = abs(_as(input, d))
    out = where(signbit(_as(other, d)), -size, size)
    if isinstance(other, Tensor) and other._requires_grad:  # torch's zero gradient: the
        out = where(scalar_tensor(False, dt.bool_), other, out)  # result requires grad
    return out


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each of ``elements`` is one of ``test_elements`` (either may be a number;
    NaN is in nothing): every pair compared, ``numel(elements) * numel(test_elements)``
    at once."""
    d = promote_types(elements, test_elements)
    if d.is_complex or d is dt.bool_:
        raise RuntimeError(f"Unsupported input type encountered for isin(): {d.title}")
    e, t = _as(elements, d), _as(test_elements, d)
    found = any_(e.unsqueeze(-1) == t.reshape(-1), -1)
    return ~found if invert else found


def heaviside(x, values):
    """0 below 0 (NaN too, as torch's kernel), 1 above, ``values`` at 0."""
    if x.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes")
    return where(x == 0, values, (x > 0).to(x.dtype))


def orthogonal_polynomial(name):
    """torch.special's ``<name>(x, n)`` (autodiff/polynomials.py): the primitive's public
    function, with torch's names and its TypeError when neither x nor n is a Tensor."""
    prim = getattr(elementwise, name)

    def op(x, n):
        if not isinstance(x, Tensor) and not isinstance(n, Tensor):
            raise TypeError(
                f"{name}(): x or n must be a Tensor (torch has no form for two numbers), "
                f"got {type(x).__name__} and {type(n).__name__}"
            )
        return prim(x, n)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"torch.special.{name}(x, n): no gradient, as torch's."
    return op


# module attributes (the stubs re-export them from here)
chebyshev_polynomial_t = orthogonal_polynomial("chebyshev_polynomial_t")
chebyshev_polynomial_u = orthogonal_polynomial("chebyshev_polynomial_u")
chebyshev_polynomial_v = orthogonal_polynomial("chebyshev_polynomial_v")
chebyshev_polynomial_w = orthogonal_polynomial("chebyshev_polynomial_w")
shifted_chebyshev_polynomial_t = orthogonal_polynomial("shifted_chebyshev_polynomial_t")
shifted_chebyshev_polynomial_u = orthogonal_polynomial("shifted_chebyshev_polynomial_u")
shifted_chebyshev_polynomial_v = orthogonal_polynomial("shifted_chebyshev_polynomial_v")
shifted_chebyshev_polynomial_w = orthogonal_polynomial("shifted_chebyshev_polynomial_w")
hermite_polynomial_h = orthogonal_polynomial("hermite_polynomial_h")
hermite_polynomial_he = orthogonal_polynomial("hermite_polynomial_he")
laguerre_polynomial_l = orthogonal_polynomial("laguerre_polynomial_l")
legendre_polynomial_p = orthogonal_polynomial("legendre_polynomial_p")


# --- floating-point bits: frexp, ldexp, nextafter -------------------------------------------
FrexpResult = namedtuple("frexp", ["mantissa", "exponent"], module="staged.return_types")  # type: ignore[name-match]


def _times_pow2(x, e):
    """``x * 2**e`` for the int tensor ``e``, exactly: one power-of-two factor per bit of
    ``|e|`` (none past half the dtype's exponent range, so each is finite), never rounding
    (no exp2) and never leaving the range on the way when ``x * 2**e`` is in it."""
    info = np.finfo(x.dtype.np)
    top, bits = info.maxexp // 2, int(info.nmant - info.minexp + 1).bit_length()
    size, neg = abs(e), e < 0
    one = scalar_tensor(1, x.dtype)
    for k in range(bits):
        bit = elementwise.bitwise_and(elementwise.bitwise_right_shift(size, k), 1) != 0
        left = 2**k
        while left:
            step = min(left, top)
            up, down = scalar_tensor(2.0**step, x.dtype), scalar_tensor(2.0**-step, x.dtype)
            x = x * where(bit, where(neg, down, up), one)
            left -= step
    return x


def frexp(x):
    """``(mantissa, exponent)`` with ``x = mantissa * 2**exponent``, ``|mantissa|`` in
    [0.5, 1) and an int32 exponent; 0, inf and NaN are their own mantissa, exponent 0.
    The mantissa's gradient is ``2**-exponent``, as torch's."""
    if not x.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    finite = logical_and(isfinite(x), x != 0)
    guess = elementwise.floor(log2(where(finite, abs(x), 1.0).detach())) + 1
    e = where(finite, guess, 0.0).to(dt.int32)
    m = _times_pow2(x, -e)
    # log2 rounded at the edge of a binade: one step back, or on
    big = logical_and(abs(m.detach()) >= 1, finite)
    m, e = where(big, m * 0.5, m), e + big.to(dt.int32)
    small = logical_and(abs(m.detach()) < 0.5, finite)
    return FrexpResult(where(small, m * 2, m), e - small.to(dt.int32))


def ldexp(input, other):
    """``input * 2**other``, as torch computes it (``2**other`` in the default float dtype
    for an integer ``other``, the product rounded to ``input``'s and ``other``'s promoted
    dtype, whatever their dims: float16 or 0-d float64 ``input`` keeps its dtype)."""
    d = promote_types(input, other)
    out = input * pow(2.0, other)
    return out if out.dtype is d or not d.is_floating_point else out.to(d)


def nextafter(input, other):
    """The next floating-point value after ``input`` towards ``other`` (``other`` where
    they are equal, NaN where either is). As torch's, the gradient is 1 for ``input`` and
    0 for ``other`` (none at equal or infinite inputs, where the value is not ``input``'s
    neighbour)."""
    for k, (name, v) in enumerate((("input", input), ("other", other))):
        if not isinstance(v, Tensor):
            raise TypeError(
                f"nextafter(): argument '{name}' (position {k + 1}) must be Tensor, not "
                f"{type(v).__name__}"
            )
    d = promote_types(input, other)
    if not d.is_floating_point:
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for '{d.title}'")
    info = np.finfo(d.np)
    x, y = (_as(v, d) for v in _broadcast_pair(input, other))
    xd, yd = x.detach(), y.detach()
    m, e = frexp(xd)
    up = yd > xd
    away = up == (xd > 0)
    # one unit in the last place of |x|, half that going down from a power of two
    k = e - (info.nmant + 1) - logical_and(~away, abs(m) == 0.5).to(dt.int32)
    k = maximum(k, scalar_tensor(info.minexp - info.nmant, dt.int32))
    step = _times_pow2(where(up, 1.0, -1.0).to(d), k)
    tiny = scalar_tensor(info.smallest_subnormal, d)
    moved = where(xd == 0, where(up, tiny, -tiny), step)
    big = scalar_tensor(info.max, d)
    edge = where(isnan(xd) | isnan(yd), xd + yd, where(xd == yd, yd, where(xd > 0, big, -big)))
    # (x != NaN holds: a NaN other is the edge's too)
    out = where(logical_and(isfinite(xd), logical_and(xd != yd, ~isnan(yd))), x + moved, edge)
    # torch's result requires grad where other does (its gradient 0): a branch never taken
    return where(scalar_tensor(False, dt.bool_), y, out) if y.requires_grad else out


def _broadcast_pair(x, y):
    shape = broadcast_shapes(x._payload.shape, y._payload.shape)
    return expand_to(x, shape), expand_to(y, shape)


# --- integers: gcd, lcm ---------------------------------------------------------------------
def _integers(name, x, y):
    """``x`` and ``y`` promoted (an integer dtype, or torch's NotImplementedError) and
    broadcast."""
    for k, (what, v) in enumerate((("input", x), ("other", y))):
        if not isinstance(v, Tensor):
            raise TypeError(
                f"{name}(): argument '{what}' (position {k + 1}) must be Tensor, not "
                f"{type(v).__name__}"
            )
    d = promote_types(x, y)
    if d.is_floating_point or d.is_complex or d is dt.bool_:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{d.title}'")
    return _broadcast_pair(_as(x, d), _as(y, d))


def gcd(input, other):
    """The greatest common divisor of each pair of integers (non-negative; 0 for two 0s):
    Euclid's algorithm, eagerly until it is done, in a graph for as many steps as the
    dtype's largest inputs need (Lamé's bound)."""
    a, b = (abs(v) for v in _integers("gcd", input, other))
    zero, one = scalar_tensor(0, a.dtype), scalar_tensor(1, a.dtype)
    steps = int(a.dtype.itemsize * 8 * 1.4405) + 2
    for _ in range(steps):
        if type(b._payload) is np.ndarray and not b._payload.any():
            break
        done = b == 0
        a, b = where(done, a, b), where(done, zero, ad.fmod(a, where(done, one, b)))
    return a


def lcm(input, other):
    """The least common multiple of each pair of integers (non-negative; 0 where either is
    0)."""
    a, b = _integers("lcm", input, other)
    g = gcd(a, b)
    zero = g == 0
    return where(zero, 0, abs(ad.floor_divide(a, where(zero, 1, g)) * b))


def float_power_(x, exponent):
    """``float_power`` written into ``x``, which must hold its result's dtype (float64, or
    complex128), as torch's."""
    complex_ = x.dtype.is_complex or (
        exponent.dtype.is_complex if isinstance(exponent, Tensor) else type(exponent) is complex
    )
    want = dt.complex128 if complex_ else dt.float64
    if want is not x.dtype:
        raise RuntimeError(
            f"the base given to float_power_ has dtype {x.dtype.title} but the operation's "
            f"result requires dtype {want.title}"
        )
    return apply_inplace(x, float_power, exponent)


def renorm(x, p, dim, maxnorm):
    """``x`` with each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down
    to norm ``maxnorm`` (``maxnorm / (norm + 1e-7)``, as torch), differentiated through the
    norm too."""
    if x.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {x.ndim} dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. "
            f"Got {x.dtype.title}"
        )
    d = wrap_dim(dim, x.ndim)
    norms = vector_norm(x, p, tuple(i for i in range(x.ndim) if i != d), True)
    return x * where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0).to(norms.dtype)


def nonzero_static(input, *, size, fill_value=-1):
    """``nonzero(input)`` with a static shape: the indices of the first ``size`` non-zero
    entries in order, one row each, rows past their count holding ``fill_value`` (int64
    ``(size, ndim)``). A stable sort puts the non-zero entries' positions first, so it
    captures and compiles where ``nonzero`` cannot."""
    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    flat = input.detach().reshape(-1)
    n = flat.numel()
    if n == 0:  # nothing non-zero: every row filled
        return Tensor._wrap(np.full((size, input.ndim), fill_value, np.int64))
    nonzero = (flat != 0).to(dt.int64)
    order = argsort(1 - nonzero, stable=True)[: min(size, n)]
    if size > n:  # positions past the entries: any, as they are filled
        order = cat([order, Tensor._wrap(np.zeros(size - n, np.int64))])
    shape = input.shape
    coords = [order // math.prod(shape[d + 1 :]) % shape[d] for d in range(input.ndim)]
    rows = stack(coords, 1) if coords else Tensor._wrap(np.zeros((size, 0), np.int64))
    within = (Tensor._wrap(np.arange(size, dtype=np.int64)) < nonzero.sum()).reshape(size, 1)
    return where(within, rows, scalar_tensor(fill_value, dt.int64))
