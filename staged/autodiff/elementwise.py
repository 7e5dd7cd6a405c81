"""Elementwise primitives: shape-strict, dtype-strict (the public ops broadcast and promote)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .._where import warn_once
from . import lax
from .avals import Aval, same_shape
from .primitive import ELEMENTWISE, LINEAR, ORDERED, UNORDERED, ZERO, Primitive, Public, domain
from .primitive import _plain
from . import incomplete_gamma as _igamma
from . import special
from . import polynomials
from .polynomials import POLYNOMIALS
from .polynomials import numpy_impl as _polynomial_impl
from .fma import fma32, fma64_total

try:
    from ._fma_kernel import fma as _fma_kernel
except ImportError:  # not built (no compiler): autodiff/fma.py's NumPy emulations
    _fma_kernel = None  # type: ignore[assignment]

_LN2, _LN10 = float(np.log(2.0)), float(np.log(10.0))
_TWO_OVER_SQRT_PI = float(2.0 / np.sqrt(np.pi))
_SQRT_PI_OVER_TWO = float(np.sqrt(np.pi) / 2.0)
_SQRT_2PI = float(np.sqrt(2.0 * np.pi))


def _same(name, out_dtype=None):
    if out_dtype is None:
        return lambda *avals: same_shape(name, *avals)

    def rule(*avals):
        return Aval(same_shape(name, *avals).shape, out_dtype)

    return rule


def _real_rule(name):
    """Complex in, real out (abs, angle, real, imag); real dtypes are kept."""

    def rule(x):
        return Aval(x.shape, x.dtype.to_real())

    return rule


def elementwise(name, impl, vjp=None, jvp=ELEMENTWISE, out_dtype=None, **kw):
    """An elementwise primitive: operands of one shape, the result of that shape."""
    return Primitive(
        name, impl, _same(name, out_dtype), vjp=vjp, jvp=jvp if vjp is not None else ZERO, **kw
    )


# dtype domains (Primitive's ``domain=``): what each leaves out, and why
_FLOAT_MATH = domain(
    "float",
    "complex",
    others="NumPy computes it in floating point for "
    "integer/bool inputs; the public op casts to float first",
)
_REAL_MATH = {**_FLOAT_MATH, "complex": UNORDERED}
_NO_BOOL = domain(bool="NumPy has no boolean negation, subtraction or power")
_INTEGRAL = domain(
    "float", complex=UNORDERED, others="integers are already integral: the public op copies them"
)


# public surfaces (Public): ops whose public function is generated from the primitive
_FLOAT = Public("float")
_FLOAT_ = Public("float", inplace=True)
_ACTIVATION = Public("float", inplace=True, functional=True)
_PROMOTE = Public("promote")


def _sigmoid(x):
    """1 / (1 + exp(-x)): small results keep their precision (the form 0.5 + 0.5 tanh(x/2)
    rounds to 0 below x = -17 in float32, where torch gives 2e-9 at -20); exp(-x)
    overflows to inf only where the result is below float32's normal range. Half inputs
    compute in float32. Complex: the same, with a complex division, as torch's (NaN where
    exp(-x) overflows with a non-zero imaginary part: 1 / (inf + inf j))."""
    if x.dtype.itemsize < 4 and x.dtype.kind != "c":
        return _sigmoid(x.astype(np.float32)).astype(x.dtype)
    e = np.empty_like(x)  # an array even for 0-d x (where ufuncs return scalars)
    np.negative(x, out=e)
    np.exp(e, out=e)
    np.add(e, x.dtype.type(1), out=e)
    if x.dtype.kind == "c":  # NumPy's complex reciprocal rounds differently from torch's
        return np.divide(x.dtype.type(1), e, out=e)
    return np.reciprocal(e, out=e)


def _relu(x):
    """max(x, 0) as PyTorch's: NaN and -0.0 pass (np.maximum's zero sign varies by dtype),
    so only the negatives are replaced: past a few hundred floats by ``_zero_where``'s
    bits (65536 float32s: 240 -> 40 µs), below that a copy in ``x``'s layout and a masked
    write (on a few floats, two thirds of the cost of np.maximum and a masked copyto)."""
    zero = x.dtype.type(0)
    if x.size >= 256:
        return _zero_where(x < zero, x)
    out = np.array(x, order="K")  # (a copy; of a NumPy scalar too)
    out[x < zero] = zero
    return out


def _rsqrt(x):
    """1 / sqrt(x); half inputs compute in float32 and round once, as torch's (two float16
    roundings were an ulp off for a quarter of the inputs)."""
    if x.dtype.itemsize < 4 and x.dtype.kind != "c":
        return _rsqrt(x.astype(np.float32)).astype(x.dtype)
    return np.reciprocal(np.sqrt(x))


def _sqrt_1m_sq(x):
    """conj(sqrt(1 - x * x)), asin's and acos's divisor."""
    return lax.conj(lax.sqrt(lax.sub(1, lax.mul(x, x))))


def _zero_grad(g):
    """Zeros like ``g``: the gradient of a piecewise constant function, 0 even where ``g``
    is inf or NaN (as PyTorch; ``g * 0`` would be NaN there)."""
    return lax.full_like(g, 0)


# --- unary ----------------------------------------------------------------------------------
neg = elementwise(
    "neg", lambda x: np.negative(x), vjp=lambda g: lax.neg(g), jvp=LINEAR, domain=_NO_BOOL
)
copy = elementwise(
    "copy",
    lambda x: np.array(x, copy=True, order="C"),
    vjp=lambda g: g,
    jvp=LINEAR,
    node_name="CloneBackward0",
)
# the identity, whose gradient is the incoming one where finite and 0 elsewhere: var centres
# x on its mean through it, as the mean's gradient there is 0 in exact arithmetic but NaN
# for the whole row as soon as x holds an infinity (PyTorch's var_backward has no such term)
finite_grad = elementwise(
    "finite_grad", lambda x: x, vjp=lambda g: lax.where(lax.isfinite(g), g, 0), jvp=LINEAR
)
conj = elementwise("conj", lambda x: np.conjugate(x), vjp=lambda g: lax.conj(g), jvp=LINEAR)
exp = elementwise(
    "exp",
    lambda x: np.exp(x),
    vjp=lambda g, out: lax.mul(g, lax.conj(out)),
    public=_FLOAT_,
    domain=_FLOAT_MATH,
)
log = elementwise(
    "log",
    lambda x: np.log(x),
    vjp=lambda g, x: lax.div(g, lax.conj(x)),
    public=_FLOAT_,
    domain=_FLOAT_MATH,
)
log1p = elementwise(
    "log1p",
    lambda x: np.log1p(x),
    public=_FLOAT,
    domain=_FLOAT_MATH,
    vjp=lambda g, x: lax.div(g, lax.conj(lax.add(x, 1))),
)
expm1 = elementwise(
    "expm1",
    lambda x: np.expm1(x),
    public=_FLOAT,
    domain=_FLOAT_MATH,
    vjp=lambda g, out: lax.mul(g, lax.conj(lax.add(out, 1))),
)
sqrt = elementwise(
    "sqrt",
    lambda x: np.sqrt(x),
    public=_FLOAT_,
    domain=_FLOAT_MATH,
    vjp=lambda g, out: lax.div(g, lax.mul(lax.conj(out), 2)),
)
rsqrt = elementwise(
    "rsqrt",
    _rsqrt,
    public=_FLOAT,
    domain=_FLOAT_MATH,
    vjp=lambda g, out: lax.mul(lax.mul(g, -0.5), lax.conj(_cube(out))),
)
# torch's ReciprocalBackward0: -g * conj(out * out), not div's -g * conj((1 / x) / x)
reciprocal = elementwise(
    "reciprocal",
    lambda x: np.divide(x.dtype.type(1), x),
    domain=_FLOAT_MATH,
    vjp=lambda g, out: lax.mul(lax.neg(g), lax.conj(lax.mul(out, out))),
)


def _widened(fn, *xs, half=(dt.float16, dt.bfloat16)):
    """``fn(*xs)``, for ``xs`` of a dtype of ``half`` computed in float32 and rounded once,
    as torch's backward kernels compute them (``opmath``)."""
    d = dt.from_numpy_dtype(xs[0]._payload.dtype)
    if d not in half:
        return fn(*xs)
    return lax.cast(fn(*(lax.cast(x, dt.float32) for x in xs)), d)


def _cube(y):
    """``y * y * y``, as torch's ``pow(y, 3)``: float16 computed in float32 and rounded
    once (twice put a quarter of float16 rsqrt gradients an ulp off), bfloat16 rounded at
    each product."""
    return _widened(lambda y: lax.mul(lax.mul(y, y), y), y, half=(dt.float16,))


def _tanh_vjp(g, out):
    """torch's tanh_backward: ``g * (1 - y * y)``, the difference one fused multiply-add
    (GCC contracts it; two roundings put 30 % of float32 gradients an ulp off)."""
    if out._payload.dtype.kind == "c":
        return lax.mul(g, lax.conj(lax.sub(1, lax.mul(out, out))))
    return _widened(
        lambda g, y: lax.mul(g, lax.bind("fma", lax.neg(y), y, lax.full_like(y, 1))), g, out
    )


def _sigmoid_vjp(g, out):
    """torch's sigmoid_backward: ``(g * (1 - y)) * y`` (``g * (y * (1 - y))`` put a third
    of float32 gradients an ulp off); bfloat16 in float32, float16 in float16, as its
    kernels."""
    if out._payload.dtype.kind == "c":
        return lax.mul(g, lax.conj(lax.mul(out, lax.sub(1, out))))
    return _widened(lambda g, y: lax.mul(lax.mul(g, lax.sub(1, y)), y), g, out, half=(dt.bfloat16,))


tanh = elementwise(
    "tanh",
    lambda x: np.tanh(x),
    public=_ACTIVATION,
    domain=_FLOAT_MATH,
    vjp=_tanh_vjp,
)
sigmoid = elementwise(
    "sigmoid",
    _sigmoid,
    public=_ACTIVATION,
    domain=_FLOAT_MATH,
    vjp=_sigmoid_vjp,
)
sin = elementwise(
    "sin",
    lambda x: np.sin(x),
    vjp=lambda g, x: lax.mul(g, lax.conj(lax.cos(x))),
    public=_FLOAT_,
    domain=_FLOAT_MATH,
)
cos = elementwise(
    "cos",
    lambda x: np.cos(x),
    public=_FLOAT_,
    domain=_FLOAT_MATH,
    vjp=lambda g, x: lax.mul(lax.neg(g), lax.conj(lax.sin(x))),
)


_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _zero_where(c, x):
    """``np.where(c, 0, x)`` (+0 in ``x``'s dtype). Past a few hundred floats, as a mask of
    all-ones or zero words ANDed into ``x``'s bits: np.where's result bit for bit (+0,
    infinities and NaNs kept), one array allocated as np.where's, and 4-7x faster (65536
    float32s: 327 -> 46 µs; np.where branches per element and mispredicts on a mixed
    mask). Below that, a copy of ``x`` written 0 through the mask: np.where's result less
    its argument handling (half its cost on a few floats)."""
    bits = _BITS.get(x.dtype.itemsize)
    if x.size < 256 or bits is None or x.dtype.kind not in "fV":
        out = x.copy("K")
        out[c] = 0
        return out
    keep = c.astype(bits)
    keep -= 1  # all ones where x passes, 0 where it does not
    keep &= x.view(bits)
    return keep.view(x.dtype)


def _select(c, x, y):
    """``np.where(c, x, y)``. Past a few hundred values of one float dtype of 2 or 4
    bytes, from their bits: ``y ^ ((x ^ y) & mask)``, the mask all ones where ``c``:
    np.where's result bit for bit (NaNs, -0.0 and infinities kept) in a quarter to a tenth
    of its time (65536 float32s with a mixed mask: 357 -> 35 µs: np.where branches per
    element and mispredicts)."""
    arrays = type(x) is np.ndarray and type(y) is np.ndarray and type(c) is np.ndarray
    bits = _BITS.get(x.dtype.itemsize) if arrays and x.dtype == y.dtype else None
    if bits is None or bits is np.uint64 or x.dtype.kind not in "fV" or c.dtype != np.bool_:
        return np.where(c, x, y)
    c, x, y = np.broadcast_arrays(c, x, y)
    if c.size < 256:
        return np.where(c, x, y)
    # each operand at its own size where it is broadcast (masked_fill's value and mask)
    mask = _unbroadcast(c).astype(bits)
    np.negative(mask, out=mask)
    yb = _unbroadcast(y).view(bits)
    out = np.bitwise_xor(_unbroadcast(x).view(bits), yb, out=np.empty(c.shape, bits))
    out &= mask
    out ^= yb
    return out.view(x.dtype)


def _unbroadcast(a):
    """``a`` with its broadcast dims (stride 0) cut to length 1: the same values, broadcast
    back by the ufuncs that read it."""
    if all(a.strides):
        return a
    return a[tuple(slice(0, 1) if s == 0 else slice(None) for s in a.strides)]


def _threshold_backward(grad, result, *, threshold):
    """``grad``, +0 where ``result <= threshold`` (NaN passes ``grad``)."""
    return _zero_where(np.less_equal(result, threshold), grad)


# PyTorch's relu backward kernel, fused: the three primitives it would compose from
# (le, logical_not, where) were a fifth of a small eager step. Linear in ``grad``;
# as in PyTorch, its gradient with respect to ``result`` is zeros.
threshold_backward: Primitive = Primitive(
    "threshold_backward",
    _threshold_backward,
    lambda grad, result, *, threshold: same_shape("threshold_backward", grad, result),
    vjp=(
        lambda g, result, threshold: threshold_backward(g, result, threshold=threshold),
        lambda g: lax.zeros_like(g),
    ),
    jvp=lambda primals, tangents, out, threshold: (
        threshold_backward(tangents[0], primals[1], threshold=threshold)
        if tangents[0] is not None
        else lax.zeros_like(out)
    ),
)

_AT_ZERO = {"threshold": 0}


def _relu_vjp(g, out):
    """``threshold_backward(g, out, threshold=0)``, NumPy's directly where no graph is built
    (Note [plain rules] in eager/dispatch.py)."""
    r = _plain[0](_threshold_backward, (g, out), _AT_ZERO)
    return threshold_backward(g, out, threshold=0) if r is None else r


# relu at 0 has gradient 0 (the seed's rule for non-differentiable points); NaN passes g
relu = elementwise(
    "relu",
    _relu,
    vjp=_relu_vjp,
    public=Public(inplace=True, functional=True),
    domain=ORDERED,
)


# leaky_relu and hardtanh with PyTorch's fused backward kernels, which read the input: so
# the gradient of a first gradient is zeros (torch's) even where the first gradient's
# cotangent is a constant, where a where-composition left nothing to differentiate
_REAL_FLOAT = domain("float", others="a float activation (F.hardtanh clamps integers itself)")


def _leaky_relu_backward(grad, x, *, negative_slope):
    return _select(x > 0, grad, grad * grad.dtype.type(negative_slope))


leaky_relu_backward: Primitive = Primitive(
    "leaky_relu_backward",
    _leaky_relu_backward,
    lambda grad, x, *, negative_slope: same_shape("leaky_relu_backward", grad, x),
    vjp=(
        lambda g, x, negative_slope: leaky_relu_backward(g, x, negative_slope=negative_slope),
        lambda g: lax.zeros_like(g),
    ),
    jvp=lambda primals, tangents, out, negative_slope: (
        leaky_relu_backward(tangents[0], primals[1], negative_slope=negative_slope)
        if tangents[0] is not None
        else lax.zeros_like(out)
    ),
    domain=_REAL_FLOAT,
)


def _leaky_relu(x, *, negative_slope):
    """``x`` where ``x > 0``, else ``negative_slope * x``: for a slope in (0, 1] that is
    max(x, slope x), bit for bit (the two tie only at zeros of one sign; NaN propagates;
    slope 0 would make inf * 0 NaN), np.maximum of two arrays a third of the selection's
    time."""
    scaled = x * x.dtype.type(negative_slope)
    if 0 < negative_slope <= 1:
        return np.maximum(x, scaled)
    return _select(x > 0, x, scaled)


leaky_relu: Primitive = Primitive(
    "leaky_relu",
    _leaky_relu,
    lambda x, **_: x,
    jvp=ELEMENTWISE,
    vjp=lambda g, x, negative_slope: leaky_relu_backward(g, x, negative_slope=negative_slope),
    domain=_REAL_FLOAT,
)


def _hardtanh_backward(grad, x, *, min_val, max_val):
    # NaN passes grad, as torch's scalar kernel (its vectorized float64 one gives 0)
    return _zero_where((x <= min_val) | (x >= max_val), grad)


hardtanh_backward: Primitive = Primitive(
    "hardtanh_backward",
    _hardtanh_backward,
    lambda grad, x, *, min_val, max_val: same_shape("hardtanh_backward", grad, x),
    vjp=(
        lambda g, x, min_val, max_val: hardtanh_backward(g, x, min_val=min_val, max_val=max_val),
        lambda g: lax.zeros_like(g),
    ),
    jvp=lambda primals, tangents, out, min_val, max_val: (
        hardtanh_backward(tangents[0], primals[1], min_val=min_val, max_val=max_val)
        if tangents[0] is not None
        else lax.zeros_like(out)
    ),
    domain=_REAL_FLOAT,
)


def _hardtanh(x, *, min_val, max_val):
    """np.clip (30x two np.where on 65536 float32s); NaN passes, and -0.0 at a bound of 0,
    as torch's clamp (relu6(-0.0) is -0.0), where np.clip may give the bound's +0."""
    out = np.asarray(np.clip(x, x.dtype.type(min_val), x.dtype.type(max_val)))
    if min_val == 0 or max_val == 0:
        np.copyto(out, x, where=x == 0)
    return out


hardtanh: Primitive = Primitive(
    "hardtanh",
    _hardtanh,
    lambda x, **_: x,
    jvp=ELEMENTWISE,
    vjp=lambda g, x, min_val, max_val: hardtanh_backward(g, x, min_val=min_val, max_val=max_val),
    domain=_REAL_FLOAT,
)


def _nan_to_num(x, *, nan, posinf, neginf):
    if x.dtype.kind == "V":  # bfloat16, which NumPy's nan_to_num passes unchanged
        return _nan_to_num(x.astype(np.float32), nan=nan, posinf=posinf, neginf=neginf).astype(
            x.dtype
        )
    with np.errstate(over="ignore"):  # a replacement past the dtype's range is inf, as torch's
        return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def _times_finite(g, x):
    """``g * isfinite(x)``, torch's rule as it computes it: NaN where ``g`` is NaN or inf and
    ``x`` is not finite (``inf * 0``), not the 0 a select would give."""
    return lax.mul(g, lax.cast(lax.isfinite(x), dt.from_numpy_dtype(g._payload.dtype)))


# NaN, +inf and -inf replaced by the given numbers (the public op resolves torch's defaults)
nan_to_num: Primitive = Primitive(
    "nan_to_num",
    _nan_to_num,
    lambda x, **_: x,
    jvp=ELEMENTWISE,
    vjp=lambda g, x: _times_finite(g, x),
    domain=domain(
        "float",
        complex="the public op replaces the real and imaginary parts apart",
        others="integers and bools are always finite: the public op copies them",
    ),
)


def _sign(x):
    # PyTorch's sign(NaN) is 0 (NumPy's is NaN), which also makes abs's gradient 0 at NaN;
    # a bool's sign is itself (NumPy has no boolean sign)
    if x.dtype.kind == "b":
        return x.copy()
    if x.dtype.kind == "V":  # bfloat16: +0 for -0.0, as torch's (0 < x) - (x < 0)
        return _sign(x.astype(np.float32)).astype(x.dtype)
    return np.where(x != x, x.dtype.type(0), np.sign(x)) if x.dtype.kind in "fV" else np.sign(x)


sign = elementwise(
    "sign",
    _sign,
    vjp=_zero_grad,
    domain=domain(
        complex="complex sign differs between NumPy versions (x/|x| in 2.x): sgn is the complex op"
    ),
)
tan = elementwise(
    "tan",
    lambda x: np.tan(x),
    public=_FLOAT_,
    domain=_FLOAT_MATH,
    vjp=lambda g, out: lax.mul(g, lax.conj(lax.add(1, lax.mul(out, out)))),
)
sinh = elementwise(
    "sinh",
    lambda x: np.sinh(x),
    vjp=lambda g, x: lax.mul(g, lax.conj(lax.cosh(x))),
    public=_FLOAT_,
    domain=_FLOAT_MATH,
)
cosh = elementwise(
    "cosh",
    lambda x: np.cosh(x),
    vjp=lambda g, x: lax.mul(g, lax.conj(lax.sinh(x))),
    public=_FLOAT_,
    domain=_FLOAT_MATH,
)
asin = elementwise(
    "asin",
    lambda x: np.arcsin(x),
    vjp=lambda g, x: lax.div(g, _sqrt_1m_sq(x)),
    public=_FLOAT_._replace(aliases=("arcsin",)),
    domain=_FLOAT_MATH,
)
acos = elementwise(
    "acos",
    lambda x: np.arccos(x),
    vjp=lambda g, x: lax.div(lax.neg(g), _sqrt_1m_sq(x)),
    public=_FLOAT_._replace(aliases=("arccos",)),
    domain=_FLOAT_MATH,
)
atan = elementwise(
    "atan",
    lambda x: np.arctan(x),
    vjp=lambda g, x: lax.div(g, lax.conj(lax.add(1, lax.mul(x, x)))),
    public=_FLOAT_._replace(aliases=("arctan",)),
    domain=_FLOAT_MATH,
)
atanh = elementwise(
    "atanh",
    lambda x: np.arctanh(x),
    vjp=lambda g, x: lax.div(g, lax.conj(lax.sub(1, lax.mul(x, x)))),
    public=_FLOAT_._replace(aliases=("arctanh",)),
    domain=_FLOAT_MATH,
)
asinh = elementwise(
    "asinh",
    lambda x: np.arcsinh(x),
    vjp=lambda g, x: lax.div(g, lax.conj(lax.sqrt(lax.add(lax.mul(x, x), 1)))),
    public=_FLOAT_._replace(aliases=("arcsinh",)),
    domain=_FLOAT_MATH,
)


def _acosh_vjp(g, x):
    """torch's: g / sqrt(x^2 - 1) for a real ``x`` (finite below -1 too), and for a complex
    one g / conj(sqrt(x - 1) sqrt(x + 1)), the branch of d acosh / dz."""
    if not lax.is_complex(x):
        return lax.div(g, lax.sqrt(lax.sub(lax.mul(x, x), 1)))
    return lax.div(g, lax.conj(lax.mul(lax.sqrt(lax.sub(x, 1)), lax.sqrt(lax.add(x, 1)))))


acosh = elementwise(
    "acosh",
    lambda x: np.arccosh(x),
    vjp=_acosh_vjp,
    public=_FLOAT_._replace(aliases=("arccosh",)),
    domain=_FLOAT_MATH,
)
log2 = elementwise(
    "log2",
    lambda x: np.log2(x),
    vjp=lambda g, x: lax.div(g, lax.conj(lax.mul(x, _LN2))),
    public=_FLOAT_,
    domain=_FLOAT_MATH,
)
log10 = elementwise(
    "log10",
    lambda x: np.log10(x),
    vjp=lambda g, x: lax.div(g, lax.conj(lax.mul(x, _LN10))),
    public=_FLOAT_,
    domain=_FLOAT_MATH,
)
exp2 = elementwise(
    "exp2",
    lambda x: np.exp2(x),
    vjp=lambda g, out: lax.mul(g, lax.conj(lax.mul(out, _LN2))),
    public=_FLOAT_,
    domain=_FLOAT_MATH,
)
_erf_float64 = special.numpy_impl(special.erf)
erf = elementwise(
    "erf",
    lambda x: special.erf_float32(x) if x.dtype.itemsize <= 4 else _erf_float64(x),
    public=_FLOAT_,
    domain=_REAL_MATH,
    vjp=lambda g, x: lax.mul(lax.mul(g, lax.exp(lax.mul(lax.neg(x), x))), _TWO_OVER_SQRT_PI),
)
erfc = elementwise(
    "erfc",
    special.numpy_impl(special.erfc),
    public=_FLOAT_,
    domain=_REAL_MATH,
    vjp=lambda g, x: lax.mul(lax.mul(g, lax.exp(lax.mul(lax.neg(x), x))), -_TWO_OVER_SQRT_PI),
)
erfinv = elementwise(
    "erfinv",
    special.numpy_impl(special.erfinv),
    public=_FLOAT_,
    domain=_REAL_MATH,
    vjp=lambda g, out: lax.mul(lax.mul(g, lax.exp(lax.mul(out, out))), _SQRT_PI_OVER_TWO),
)
lgamma: Primitive = elementwise(
    "lgamma",
    special.numpy_impl(special.lgamma),
    public=_FLOAT_,
    domain=_REAL_MATH,
    vjp=lambda g, x: lax.mul(g, digamma(x)),
)
digamma: Primitive = elementwise(
    "digamma",
    special.numpy_impl(special.digamma),
    public=_FLOAT_,
    domain=_REAL_MATH,
    vjp=lambda g, x: lax.mul(g, polygamma(x, n=1)),
)
_polygamma_numpy = special.numpy_impl(special.polygamma)


def _polygamma(x, *, n):
    return _polygamma_numpy(x, n=n)


# the n-th derivative of digamma, n >= 1 (the public polygamma(0, x) is digamma)
polygamma: Primitive = Primitive(
    "polygamma",
    _polygamma,
    lambda x, *, n: x,
    jvp=ELEMENTWISE,
    vjp=lambda g, x, n: lax.mul(g, polygamma(x, n=n + 1)),
    domain=_REAL_MATH,
)
_SPECIAL_ONLY = Public("float", method=False, export=False)  # staged.special.<name> only


def _cephes(name, vjp, public=_SPECIAL_ONLY):
    """A primitive of ``autodiff.special.<name>``: real floats, public as torch.special's."""
    impl = special.numpy_impl(getattr(special, name))
    return elementwise(name, impl, vjp=vjp, public=public, domain=_REAL_MATH)


def _tiny_safe(x):
    """(|x| > eps, x there else eps): torch's i1 and i1e gradients are 1/2 at |x| <= eps."""
    big = lax.gt(lax.abs(x), float(np.finfo(x.dtype.np).eps))
    return big, lax.where(big, x, float(np.finfo(x.dtype.np).eps))


def _i1_vjp(g, x, out):
    big, s = _tiny_safe(x)
    return lax.mul(g, lax.where(big, lax.sub(i0(s), lax.div(out, s)), 0.5))


def _i1e_vjp(g, x, out):
    big, s = _tiny_safe(x)
    d = lax.sub(i0e(s), lax.mul(out, lax.add(lax.sgn(s), lax.div(1, s))))
    return lax.mul(g, lax.where(big, d, 0.5))


entr = _cephes("entr", lambda g, x: lax.mul(g, lax.neg(lax.add(lax.log(x), 1))))
erfcx = _cephes(
    "erfcx",
    lambda g, x, out: lax.mul(g, lax.sub(lax.mul(lax.mul(x, out), 2), _TWO_OVER_SQRT_PI)),
)
ndtri = _cephes(
    "ndtri",
    lambda g, out: lax.mul(g, lax.mul(lax.exp(lax.mul(lax.mul(out, out), 0.5)), _SQRT_2PI)),
)
i0: Primitive = _cephes("i0", lambda g, x: lax.mul(g, i1(x)), public=_FLOAT_)
i0e: Primitive = _cephes(
    "i0e", lambda g, x, out: lax.mul(g, lax.sub(i1e(x), lax.mul(lax.sgn(x), out)))
)
i1: Primitive = _cephes("i1", _i1_vjp)
i1e: Primitive = _cephes("i1e", _i1e_vjp)


def _not_implemented(name):
    """The VJP rule of an input torch does not differentiate: it raises, as torch's
    backward does, when that input needs a gradient."""

    def rule(g):
        raise NotImplementedError(f"the derivative for '{name}' is not implemented.")

    return rule


# d/dq zeta(x, q) = -x zeta(x + 1, q); torch has none for x
zeta: Primitive = _cephes(
    "zeta",
    (
        _not_implemented("zeta"),
        lambda g, x, q: lax.mul(g, lax.mul(lax.neg(x), zeta(lax.add(x, 1), q))),
    ),
)
# torch defines no derivatives for these: their results do not require grad, as torch's
BESSEL = (
    *("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "spherical_bessel_j0"),
    *("modified_bessel_k0", "modified_bessel_k1"),
    *("scaled_modified_bessel_k0", "scaled_modified_bessel_k1"),
    "airy_ai",  # Ai(x) = sqrt(x / 3) K_1/3(zeta) / pi: of the family
)
for _n in BESSEL:  # module attributes, as every primitive here (vmap's rules find them so)
    globals()[_n] = _cephes(_n, None)
# piecewise constant: gradient 0 everywhere (PyTorch's choice at the jumps too)
floor = elementwise("floor", lambda x: np.floor(x), vjp=_zero_grad, domain=_INTEGRAL)
ceil = elementwise("ceil", lambda x: np.ceil(x), vjp=_zero_grad, domain=_INTEGRAL)
# half to even
round = elementwise("round", lambda x: np.round(x), vjp=_zero_grad, domain=_INTEGRAL)
trunc = elementwise("trunc", lambda x: np.trunc(x), vjp=_zero_grad, domain=_INTEGRAL)


# --- complex in, real out, and sgn (Note [complex gradients]) -----------------------------
# Note [complex gradients]: a VJP returns dL/dz* for a real loss L (PyTorch's convention:
# for a real function of z = x + iy it is dL/dx + i dL/dy). A function that is not
# holomorphic (abs, angle, real, imag, sgn) cannot use the ELEMENTWISE JVP tag, which
# assumes ds/dz* is real; these carry their JVP rules, and at z == 0, where abs, angle and
# sgn are not differentiable, the gradient is 0 as in PyTorch.
def _safe_abs(x):
    """(|x|, where(|x| == 0, 1, |x|), |x| == 0): a divisor that is never 0."""
    a = lax.abs(x)
    zero = lax.eq(a, 0)
    return a, lax.where(zero, 1, a), zero


def _sgn_impl(x):
    if not np.iscomplexobj(x):
        return _sign(x)
    a = np.abs(x)
    return np.where(a == 0, 0, x / np.where(a == 0, 1, a)).astype(x.dtype)


def _sgn_vjp(g, x, out):
    if not lax.is_complex(x):
        return _zero_grad(g)
    _, safe, zero = _safe_abs(x)
    along = lax.as_complex(lax.real(lax.mul(g, lax.conj(out))), out)
    return lax.where(zero, 0, lax.div(lax.sub(g, lax.mul(out, along)), lax.as_complex(safe, g)))


def _sgn_jvp(primals, tangents, out):
    (x,), (t,) = primals, tangents
    if not lax.is_complex(x):
        return _zero_grad(t)
    _, safe, zero = _safe_abs(x)
    across = lax.as_complex(lax.imag(lax.mul(lax.conj(out), t)), out)
    return lax.where(zero, 0, lax.div(lax.mul(lax.mul(out, across), 1j), lax.as_complex(safe, out)))


def _abs_jvp(primals, tangents, out):
    (x,), (t,) = primals, tangents
    return lax.real(lax.mul(t, lax.conj(lax.sgn(x))))


def _angle_impl(x):
    if np.iscomplexobj(x):
        return np.angle(x).astype(x.real.dtype)
    return np.where(np.isnan(x), x, np.where(x < 0, np.pi, 0)).astype(x.dtype)


def _angle_vjp(g, x):
    if not lax.is_complex(x):
        return _zero_grad(g)
    _, safe, zero = _safe_abs(x)
    return lax.where(
        zero,
        0,
        lax.div(
            lax.mul(lax.mul(lax.as_complex(g, x), x), 1j), lax.as_complex(lax.mul(safe, safe), x)
        ),
    )


def _angle_jvp(primals, tangents, out):
    (x,), (t,) = primals, tangents
    if not lax.is_complex(x):
        return _zero_grad(t)
    _, safe, zero = _safe_abs(x)
    return lax.where(zero, 0, lax.div(lax.imag(lax.mul(t, lax.conj(x))), lax.mul(safe, safe)))


def _part_jvp(part):
    def jvp(primals, tangents, out):
        t = tangents[0]
        return lax.bind(part, t) if lax.is_complex(t) else t  # real: imag's domain is complex

    return jvp


sgn = Primitive(
    "sgn", _sgn_impl, _same("sgn"), vjp=_sgn_vjp, jvp=_sgn_jvp, public=Public(inplace=True)
)
abs = Primitive(
    "abs",
    lambda x: np.abs(x),
    _real_rule("abs"),
    vjp=lambda g, x: lax.mul(lax.as_complex(g, x), lax.sgn(x)),
    jvp=_abs_jvp,
    public=Public(aliases=("absolute",), inplace=True),
)
angle = Primitive(
    "angle",
    _angle_impl,
    _real_rule("angle"),
    vjp=_angle_vjp,
    jvp=_angle_jvp,
    public=_FLOAT,
    domain=_FLOAT_MATH,
)
# views of the complex input's memory, as PyTorch's .real and .imag
real = Primitive(
    "real",
    lambda x: x.real,
    _real_rule("real"),
    jvp=_part_jvp("real"),
    vjp=lambda g, x_aval: lax.cast(g, x_aval.dtype),
    view=True,
)
imag = Primitive(
    "imag",
    lambda x: x.imag,
    _real_rule("imag"),
    jvp=_part_jvp("imag"),
    vjp=lambda g, x_aval: lax.mul(lax.cast(g, x_aval.dtype), 1j),
    view=True,
    domain=domain(
        "complex", others="a real tensor has no imaginary part (the public op raises, as PyTorch)"
    ),
)
logical_not = elementwise("logical_not", lambda x: np.logical_not(x), out_dtype=dt.bool_)

# --- binary ---------------------------------------------------------------------------------
add = elementwise("add", lambda x, y: np.add(x, y), vjp=(lambda g: g, lambda g: g), jvp=LINEAR)
sub = elementwise(
    "sub",
    lambda x, y: np.subtract(x, y),
    vjp=(lambda g: g, lambda g: lax.neg(g)),
    jvp=LINEAR,
    domain=_NO_BOOL,
)


def _mul_vjp(g, other):
    """``g * conj(other)``, NumPy's directly for a real ``other`` where no graph is built
    (Note [plain rules] in eager/dispatch.py)."""
    if other._payload.dtype.kind != "c":
        r = _plain[0](np.multiply, (g, other), {})
        if r is not None:
            return r
    return lax.mul(g, lax.conj(other))


mul = elementwise(
    "mul",
    lambda x, y: np.multiply(x, y),
    vjp=(lambda g, y: _mul_vjp(g, y), lambda g, x: _mul_vjp(g, x)),
    public=Public(inplace=True),
)


# Note [fused multiply-add]: torch's CPU kernels of ``add``/``sub`` with ``alpha``,
# ``lerp`` and ``addcmul`` compute with FMA instructions (their vectorized loops call
# ``fmadd``; GCC contracts the scalar loops' ``a * b + c``), rounding once where a multiply
# then an add rounds twice: a float32 SGD step ``p.add_(g, alpha=-lr)`` as two roundings
# put a fifth of the parameters an ulp off torch's after three steps, a float32
# ``lerp`` (Adam's first moment, EMA weights) a quarter to a half of its values. ``fma``
# rounds once: eagerly by C's ``fma`` (``_fma_kernel.pyx``, built at install; else
# ``autodiff/fma.py``'s NumPy emulations, 10x slower), compiled as ``math.fma`` (llvm-cpu's FMA
# instruction), exported to ONNX as Mul and Add (ONNX has no fused form). Float16 and
# bfloat16 compute in float32 and round once more, as torch's ``opmath`` kernels.
def _fma(a, b, c):
    if a.dtype == np.float32 or a.dtype == np.float64:
        if _fma_kernel is not None:
            return _fma_kernel(a, b, c)
        return fma32(a, b, c) if a.dtype == np.float32 else fma64_total(a, b, c)
    f = np.float32
    return _fma(a.astype(f), b.astype(f), c.astype(f)).astype(a.dtype)


def fma_into(a, b, c, out) -> bool:
    """Write ``a * b + c`` rounded once into ``out`` (an in-place update's memory: Note
    [data-only writes] in eager/ops/inplace.py), for float32 or float64 arrays of one shape
    and dtype (``b`` and ``c`` may be numbers; ``out`` C-contiguous, possibly ``a`` or ``c``);
    False, nothing written, where the kernel is not built."""
    if _fma_kernel is None:
        return False
    _fma_kernel(a, b, c, out=out)
    return True


fma = elementwise(
    "fma",
    _fma,
    vjp=(lambda g, b: _mul_vjp(g, b), lambda g, a: _mul_vjp(g, a), lambda g: g),
    domain=domain(
        "float", others="an internal op: torch's kernels fuse real floating multiply-adds only"
    ),
)


def _div_jvp(primals, tangents, out):
    # (tx - out * ty) / y, as PyTorch: the VJP-derived tx/y - ty*x/y^2 is inf - inf = NaN
    # at x = 1, y = 0 where PyTorch has -inf, and loses signs of zero; without tx,
    # PyTorch's -(out * ty), not 0 - out * ty, decides the sign of zero
    (_, y), (tx, ty) = primals, tangents
    if ty is None:
        return lax.div(tx, y)
    return lax.div(lax.neg(lax.mul(out, ty)) if tx is None else lax.sub(tx, lax.mul(out, ty)), y)


div = elementwise(
    "div",
    lambda x, y: np.divide(x, y),
    vjp=(
        lambda g, y: lax.div(g, lax.conj(y)),
        # torch's (x / y) / y: y * y would lose precision where it is subnormal
        lambda g, x, y: lax.mul(lax.neg(g), lax.conj(lax.div(lax.div(x, y), y))),
    ),
    jvp=_div_jvp,
    domain=domain(
        "float",
        "complex",
        others="true division of integers yields floats; the public op casts to float first",
    ),
)


# As PyTorch's pow_backward_exponent, d/dy is masked, then multiplied by g (an infinite or
# NaN g still gives NaN where it is masked to 0); as its pow_backward_self, d/dx is 0
# wherever y == 0, whatever g (torch.where around the product)
def _pow_exponent_vjp(g, x, y, out):
    # d/dy x**y = x**y log x, defined as 0 where x == 0 and y >= 0, a complex y counting
    # as >= 0 where it is real and >= 0 (as PyTorch)
    real_nonneg = (
        lax.logical_and(lax.ge(lax.real(y), 0), lax.eq(lax.imag(y), 0))
        if lax.is_complex(y)
        else lax.ge(y, 0)
    )
    masked = lax.where(
        lax.logical_and(lax.eq(x, 0), real_nonneg), 0, lax.conj(lax.mul(out, lax.log(x)))
    )
    return lax.mul(g, masked)


def _pow_base_vjp(g, x, y):
    # 0 where y == 0, also at x == 0 where y * x**(y-1) is 0 * inf, and for a NaN g
    p = y._payload
    if type(p) is np.ndarray and p.size and not any(p.strides) and p.dtype.kind == "f":
        # one number (a Python number's or a 0-d tensor's, broadcast): torch's pow_backward
        # by a Scalar, in NumPy where no graph is built (Note [plain rules]); x ** 3's
        # gradient (GELU's) took six passes over x and a select
        r = _plain[0](_pow_by_number_grad, (g, x), {"e": p.flat[0]})
        if r is not None:
            return r
    return lax.where(lax.ne(y, 0), lax.mul(g, lax.conj(lax.mul(y, lax.pow(x, lax.sub(y, 1))))), 0)


def _pow_by_number_grad(g, x, *, e):
    """``g * (e * x ** (e - 1))``, each product rounded (``e - 1`` in ``x``'s dtype, as
    the general rule's); zeros for ``e == 0``."""
    if e == 0:
        return np.zeros(g.shape, g.dtype)
    r = np.asarray(_pow(x, np.subtract(e, 1, dtype=x.dtype)))  # (a new array; 0-d too)
    np.multiply(r, e, out=r)
    return np.multiply(g, r, out=r)


# torch's pow by a scalar exponent (pow_tensor_scalar_optimized_kernel and the kernels
# its caller picks): these run as products, sqrt and reciprocals, rounded as torch rounds
# them (x ** -0.5 is -inf at -0.0 and NaN at -inf, as rsqrt) and ~20x faster than C's pow
# (GELU's x ** 3 took 44 % of a transformer step). Any exponent that is one number takes
# them: a 0-d tensor's arrives broadcast like a Python number's, and the gradient's
# y - 1 is computed (torch's pow_backward calls pow by the number y - 1). bfloat16 takes
# them too (each product rounded, as torch's BFloat16 arithmetic: x ** 3 rounds x * x
# first); float16 does not (torch's is powf of its float values: (-inf) ** 0.5 is inf).
_SCALAR_POWERS = {
    2.0: lambda x: x * x,
    3.0: lambda x: x * x * x,
    -2.0: lambda x: np.reciprocal(x * x),
    0.5: np.sqrt,
    -0.5: _rsqrt,
    -1.0: np.reciprocal,
    1.0: np.copy,  # torch's pow_out copies; the gradient of x ** 2 is 2 * x ** 1
}


def _pow(x, y):
    if (x.dtype.kind == "f" and x.itemsize >= 4 or x.dtype.kind == "V") and y.size:
        e = float(y.flat[0])
        special = _SCALAR_POWERS.get(e)
        whole = special is None and x.dtype.kind == "f" and e.is_integer()
        if (special is not None or whole) and (not any(y.strides) or (y == y.flat[0]).all()):
            if special is not None:
                return special(x)
            # C's powf of a negative base by a whole exponent takes a slow path (50x: x ** 5's
            # gradient, x ** 4, was 4 ms for 64k values); its value is |x| ** y, negated for
            # an odd y where x is negative (-0.0 too), as copysign gives
            out = np.power(np.abs(x), y)
            return np.copysign(out, x) if e % 2 else out
    if x.dtype.kind != "i" or not (y < 0).any():
        return np.power(x, y)
    # an integer to a negative power, as PyTorch: +-1 of +-1, else 0 (NumPy raises)
    tiny = np.where(np.abs(x) == 1, np.where(y % 2 != 0, x, 1), 0).astype(x.dtype)
    return np.where(y < 0, tiny, np.power(x, np.maximum(y, 0)))


pow = elementwise("pow", _pow, vjp=(_pow_base_vjp, _pow_exponent_vjp), domain=_NO_BOOL)


def _x_log(fn):
    """``x * fn(y)``, and +0 where ``x`` is 0 unless ``y`` is NaN (torch's kernels)."""

    def impl(x, y):
        return np.where((x == 0) & ~np.isnan(y), np.zeros((), x.dtype), x * fn(y))

    return impl


# torch's formulas (derivatives.yaml): d/dx is xlogy(g, y), 0 where x == 0 and y <= 0 (so a
# zero g gives 0 where log y is infinite, and a NaN g 0 where it is masked); d/dy g x / y
xlogy: Primitive = elementwise(
    "xlogy",
    _x_log(np.log),
    vjp=(
        lambda g, x, y: lax.where(lax.logical_and(lax.eq(x, 0), lax.le(y, 0)), 0, xlogy(g, y)),
        lambda g, x, y: lax.div(lax.mul(g, x), y),
    ),
    domain=_REAL_MATH,
)
xlog1py: Primitive = elementwise(
    "xlog1py",
    _x_log(np.log1p),
    vjp=(
        lambda g, x, y: lax.where(lax.logical_and(lax.eq(x, 0), lax.le(y, -1)), 0, xlog1py(g, y)),
        lambda g, x, y: lax.div(lax.mul(g, x), lax.add(y, 1)),
    ),
    domain=_REAL_MATH,
)


def _bce(x, y):
    """torch's kernel: ``(y - 1) max(log1p(-x), -100) - y max(log(x), -100)``."""
    floor = x.dtype.type(-100)
    return (y - 1) * np.maximum(np.log1p(-x), floor) - y * np.maximum(np.log(x), floor)


def _bce_dx(g, x, y):
    # torch's binary_cross_entropy_backward: g (x - y) / max((1 - x) x, 1e-12), finite
    # where x is 0 or 1 (a saturated sigmoid), where the clamped logs' chain rule is 0 * inf
    d = lax.mul(lax.neg(lax.sub(x, 1)), x)
    return lax.div(lax.mul(g, lax.sub(x, y)), maximum(d, lax.full_like(d, 1e-12)))


# the unreduced binary cross-entropy of probabilities x and targets y, with torch's
# gradients (d/dy is -logit(x) g = -log(x / (1 - x)) g, unclamped, as torch's)
binary_cross_entropy: Primitive = elementwise(
    "binary_cross_entropy",
    _bce,
    vjp=(
        _bce_dx,
        lambda g, x: lax.mul(lax.neg(lax.log(lax.div(x, lax.neg(lax.sub(x, 1))))), g),
    ),
    domain=_REAL_MATH,
)

# sqrt(x*x + y*y) without overflow; d/dx = x / out, NaN at the origin (as PyTorch)
hypot = elementwise(
    "hypot",
    lambda x, y: np.hypot(x, y),
    vjp=(
        lambda g, x, out: lax.div(lax.mul(g, x), out),
        lambda g, y, out: lax.div(lax.mul(g, y), out),
    ),
    public=Public(inplace=True),
    domain=_REAL_MATH,
)


def _over_norm(num, y, x):
    """num / (x*x + y*y), where num is 0 at x = y = 0: 0 there, not 0/0 (as PyTorch)."""
    d = lax.add(lax.mul(x, x), lax.mul(y, y))
    return lax.div(num, lax.where(lax.ne(d, 0), d, 1))


def _atan2_jvp(primals, tangents, out):
    # (x ty - y tx) / (x*x + y*y), as PyTorch's JVP: NaN at the origin, where its VJP
    # (atan2_backward) gives 0
    (y, x), (ty, tx) = primals, tangents
    norm = lax.add(lax.mul(y, y), lax.mul(x, x))
    if tx is None:
        return lax.div(lax.mul(x, ty), norm)
    minus_ytx = lax.neg(lax.mul(y, tx))
    return lax.div(minus_ytx if ty is None else lax.add(minus_ytx, lax.mul(x, ty)), norm)


atan2 = elementwise(
    "atan2",
    lambda y, x: np.arctan2(y, x),
    vjp=(
        lambda g, y, x: _over_norm(lax.mul(g, x), y, x),
        lambda g, y, x: _over_norm(lax.mul(lax.neg(g), y), y, x),
    ),
    jvp=_atan2_jvp,
    public=_FLOAT_._replace(aliases=("arctan2",)),
    domain=_REAL_MATH,
)


def div_floor(x, y):
    """torch's floor division of floats (its ``div_floor``): ``(x - fmod(x, y)) / y``, one
    less where the remainder's sign is not ``y``'s, rounded to an integer; ``x / y`` for a
    zero ``y``, and a zero quotient has the sign of ``x / y``. ``floor(x / y)`` differs
    where ``x / y`` rounds (-1 / inf is -0; torch's -1, the quotient of ``remainder``)."""
    mod = fmod(x, y)
    q = lax.div(lax.sub(x, mod), y)
    down = lax.logical_and(lax.ne(mod, 0), lax.ne(lax.lt(y, 0), lax.lt(mod, 0)))
    q = lax.where(down, lax.sub(q, 1), q)
    fl = lax.floor(q)
    fl = lax.where(lax.gt(lax.sub(q, fl), 0.5), lax.add(fl, 1), fl)
    exact = lax.div(x, y)
    fl = lax.where(lax.eq(q, 0), lax.mul(exact, 0), fl)
    return lax.where(lax.eq(y, 0), exact, fl)


def _remainder(x, y):
    """PyTorch's remainder: ``fmod(x, y)`` plus ``y`` where it is non-zero and its sign is
    not ``y``'s, so a zero keeps ``x``'s sign (np.remainder's takes ``y``'s)."""
    mod = np.fmod(x, y, out=np.empty_like(x))
    zero = x.dtype.type(0)
    np.add(mod, y, out=mod, where=(mod != zero) & ((y < zero) != (mod < zero)))
    return mod


# x - y * floor(x / y) (sign of y) and x - y * trunc(x / y) (sign of x), as PyTorch; the
# gradient for y is torch's, -g times the floor division
remainder = elementwise(
    "remainder",
    _remainder,
    vjp=(lambda g: g, lambda g, x, y: lax.mul(lax.neg(g), div_floor(x, y))),
    domain=ORDERED,
)
fmod = elementwise(
    "fmod",
    lambda x, y: np.fmod(x, y),
    vjp=(lambda g: g, lambda g, x, y: lax.mul(lax.neg(g), lax.trunc(lax.div(x, y)))),
    domain=ORDERED,
)
# integer x // y rounded down (the public op composes float floor division from fmod, as
# PyTorch's div_floor); piecewise constant and, as in PyTorch, not differentiable
floor_divide = elementwise(
    "floor_divide",
    lambda x, y: np.floor_divide(x, y),
    domain=domain(
        "int",
        "uint",
        float="the public op composes float floor division from fmod",
        bool="PyTorch has no boolean floor division",
        complex=UNORDERED,
    ),
)


def _extremum(name, impl, wins):
    """maximum (wins = gt) or minimum (lt) with PyTorch's rules: half the gradient to each
    at ties, none to the losing input, the whole of it to both where either is NaN (it
    only masks where one loses); the tangent is ty + w * (tx - ty), w = 1 where x wins,
    0.5 at ties, 0 otherwise: ty at NaN."""

    def half_at_ties(g, x, y):
        return lax.where(lax.ne(x, y), g, lax.mul(g, 0.5))

    def jvp(primals, tangents, out):
        (x, y), (tx, ty) = primals, tangents
        w = lax.where(lax.ne(x, y), lax.cast(wins(x, y), out.dtype), 0.5)
        if ty is None:
            return lax.mul(w, tx)
        return lax.add(ty, lax.mul(w, lax.neg(ty) if tx is None else lax.sub(tx, ty)))

    return elementwise(
        name,
        impl,
        jvp=jvp,
        public=_PROMOTE,
        domain=ORDERED,
        vjp=(
            lambda g, x, y: lax.where(wins(y, x), 0, half_at_ties(g, x, y)),
            lambda g, x, y: lax.where(wins(x, y), 0, half_at_ties(g, x, y)),
        ),
    )


maximum = _extremum("maximum", lambda x, y: np.maximum(x, y), lax.gt)
minimum = _extremum("minimum", lambda x, y: np.minimum(x, y), lax.lt)


eq = elementwise("eq", lambda x, y: np.equal(x, y), out_dtype=dt.bool_, public=_PROMOTE)
ne = elementwise("ne", lambda x, y: np.not_equal(x, y), out_dtype=dt.bool_, public=_PROMOTE)
lt = elementwise(
    "lt", lambda x, y: np.less(x, y), out_dtype=dt.bool_, public=_PROMOTE, domain=ORDERED
)
le = elementwise(
    "le", lambda x, y: np.less_equal(x, y), out_dtype=dt.bool_, public=_PROMOTE, domain=ORDERED
)
gt = elementwise(
    "gt", lambda x, y: np.greater(x, y), out_dtype=dt.bool_, public=_PROMOTE, domain=ORDERED
)
ge = elementwise(
    "ge", lambda x, y: np.greater_equal(x, y), out_dtype=dt.bool_, public=_PROMOTE, domain=ORDERED
)
logical_and = elementwise("logical_and", lambda x, y: np.logical_and(x, y), out_dtype=dt.bool_)
logical_or = elementwise("logical_or", lambda x, y: np.logical_or(x, y), out_dtype=dt.bool_)


# --- bitwise: integers and bools, no gradient -------------------------------------------------
# Shifts by a negative amount or by the width or more give 0 to the left and the sign to the
# right, as torch's CPU kernels (and NumPy); MLIR's shifts leave those poison, so the
# lowering selects them.
_BITWISE = domain(
    "bool", "int", "uint", others="bitwise operations are defined on integers and bools only"
)
_SHIFTS = domain("int", "uint", others="shifts are defined on integers only")
_BITWISE_ = Public(inplace=True)
bitwise_and = elementwise(
    "bitwise_and", lambda x, y: np.bitwise_and(x, y), public=_BITWISE_, domain=_BITWISE
)
bitwise_or = elementwise(
    "bitwise_or", lambda x, y: np.bitwise_or(x, y), public=_BITWISE_, domain=_BITWISE
)
bitwise_xor = elementwise(
    "bitwise_xor", lambda x, y: np.bitwise_xor(x, y), public=_BITWISE_, domain=_BITWISE
)
bitwise_not = elementwise("bitwise_not", lambda x: np.invert(x), public=_BITWISE_, domain=_BITWISE)
bitwise_left_shift = elementwise(
    "bitwise_left_shift", lambda x, y: np.left_shift(x, y), public=_BITWISE_, domain=_SHIFTS
)
bitwise_right_shift = elementwise(
    "bitwise_right_shift", lambda x, y: np.right_shift(x, y), public=_BITWISE_, domain=_SHIFTS
)


# --- select and cast ------------------------------------------------------------------------
def _where_shape(c, x, y):
    if c.dtype is not dt.bool_:
        raise TypeError(f"where expected condition to be a boolean tensor, but got {c.dtype}")
    same_shape("where", x, y)
    if c.shape != x.shape:
        same_shape("where", Aval(c.shape, x.dtype), x)
    return x


def _where_jvp(primals, tangents, out):
    c, x, _ = primals
    xt, yt = tangents[1], tangents[2]
    # zeros, not x * 0: a branch holding inf (max pooling's -inf padding) must give 0, not NaN
    xt = xt if xt is not None else lax.zeros_like(x)
    yt = yt if yt is not None else lax.zeros_like(x)
    return where(c, xt, yt)


where = Primitive(
    "where",
    _select,
    _where_shape,
    vjp=(None, lambda g, c: lax.where(c, g, 0), lambda g, c: lax.where(c, 0, g)),
    jvp=_where_jvp,
)


def _clamp_where_shape(c, bound, x, *, keep):
    return _where_shape(c, bound, x)


def _clamp_where_jvp(primals, tangents, out, *, keep):
    c, bound, x = primals
    bt = tangents[1] if tangents[1] is not None else lax.zeros_like(x)
    xt = tangents[2] if tangents[2] is not None else lax.zeros_like(x)
    if keep is None:  # x's tangent at a NaN bound, as PyTorch's
        return where(lax.logical_and(c, lax.eq(bound, bound)), bt, xt)
    return where(lax.COMPARE[keep](x, bound), xt, bt)


def _clamp_where_x_vjp(g, c, bound, x):
    # PyTorch's clamp passes x the gradient only where x >= min (x <= max): none at a NaN
    # x or bound, where c (x < min) is False too
    inside = lax.logical_and(
        lax.logical_and(lax.logical_not(c), lax.eq(x, x)), lax.eq(bound, bound)
    )
    return lax.where(inside, g, 0)


# where(c, bound, x) of a clamp, c = x < min or x > max or a NaN bound: the tangent is
# x's only where keep(x, bound) holds (the bound's at ties and NaN), as PyTorch's clamp
# JVP, or follows the value where keep is None; the gradient goes to x where x is within
# the bound, to the bound where x is beyond it, to neither at a NaN bound
clamp_where = Primitive(
    "clamp_where",
    lambda c, bound, x, *, keep: _select(c, bound, x),
    _clamp_where_shape,
    jvp=_clamp_where_jvp,
    vjp=(
        None,
        lambda g, c, bound: lax.where(lax.logical_and(c, lax.eq(bound, bound)), g, 0),
        _clamp_where_x_vjp,
    ),
)


def _cast_impl(x, *, dtype):
    if np.iscomplexobj(x) and not dtype.is_complex:
        if dtype is not dt.bool_:  # a complex number's truth is of both parts (x != 0)
            # once a process, as torch's (TORCH_WARN_ONCE in its copy_)
            warn_once("Casting complex values to real discards the imaginary part")
            x = x.real
    elif x.dtype in dt.ML_NP and dtype.np.kind in "iu":
        # bfloat16 and float8s (ml_dtypes) to an integer through float32, as torch's cast:
        # ml_dtypes 0.7 made NaN, infinities and out-of-range values 0 (0.6: float32's)
        x = x.astype(np.float32)
    if dtype._category == 2 and dtype.itemsize < x.dtype.itemsize:
        return dt.narrowed(x, dtype.np)  # Note [half through float32]
    return x.astype(dtype.np, copy=False)


def _cast_vjp(g, x_aval):
    return lax.cast(
        g if not lax.is_complex(g) or x_aval.dtype.is_complex else lax.real(g), x_aval.dtype
    )


cast = Primitive(
    "cast", _cast_impl, lambda x, *, dtype: Aval(x.shape, dtype), vjp=_cast_vjp, jvp=LINEAR
)


def _no_forward_ad(name):
    """The JVP rule of a primitive torch has no forward-mode derivative for: it raises,
    as torch's, when an input carries a tangent."""

    def rule(primals, tangents, out, **params):
        if any(t is not None for t in tangents):
            raise NotImplementedError(
                f"Trying to use forward AD with {name} that does not support it because it "
                "has not been implemented yet."
            )
        return None

    rule.why = "none: raises NotImplementedError, as torch's"  # type: ignore[attr-defined]
    return rule


_IGAMMA_DOMAIN = domain(
    "float",
    complex=UNORDERED,
    others="torch has no integer or bool kernel for it either (an integer beside a float "
    "tensor is promoted to it)",
)


def _incomplete_gamma(name, fn, sign):
    """P(a, x) or Q(a, x) (``sign`` -1): torch differentiates x only, d/dx P = x^(a-1)
    exp(-x) / Gamma(a) as torch writes it; its a raises, as torch's."""

    def x_vjp(g, input, other):
        d = lax.sub(lax.sub(lax.mul(lax.sub(input, 1), lax.log(other)), other), lgamma(input))
        return lax.mul(g, lax.mul(lax.exp(d), sign))

    return elementwise(
        name,
        _igamma.numpy_impl(fn),
        vjp=(_not_implemented(f"{name}: input"), x_vjp),
        jvp=_no_forward_ad(name),
        public=Public("promote", inplace=True),
        domain=_IGAMMA_DOMAIN,
    )


# torch.special.gammainc / gammaincc (torch.igamma / igammac): staged/autodiff/incomplete_gamma.py
igamma: Primitive = _incomplete_gamma("igamma", _igamma.gammainc, 1.0)
igammac: Primitive = _incomplete_gamma("igammac", _igamma.gammaincc, -1.0)
# torch.special's orthogonal polynomials (autodiff/polynomials.py), of x and n: torch defines
# no derivatives for them, so their results do not require grad, as torch's
for _n in POLYNOMIALS:  # module attributes, as every primitive here
    globals()[_n] = elementwise(
        _n,
        _polynomial_impl(getattr(polynomials, _n)),
        public=_SPECIAL_ONLY,
        domain=_REAL_MATH,
    )
