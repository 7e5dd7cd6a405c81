"""Elementwise primitives: shape-strict, dtype-strict (the public ops broadcast and promote)."""
from __future__ import annotations

import operator

import numpy as np

from .. import dtypes as dt
from .avals import Aval, same_shape
from .primitive import ELEMENTWISE, LINEAR, ORDERED, UNORDERED, ZERO, Primitive, Public, domain
from .special import erf as _erf

_LN2, _LN10 = float(np.log(2.0)), float(np.log(10.0))
_TWO_OVER_SQRT_PI = float(2.0 / np.sqrt(np.pi))


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
    return Primitive(name, impl, _same(name, out_dtype), vjp=vjp,
                     jvp=jvp if vjp is not None else ZERO, **kw)


# dtype domains (Primitive's ``domain=``): what each leaves out, and why
_FLOAT_MATH = domain("float", "complex", others="NumPy computes it in floating point for "
                     "integer/bool inputs; the public op casts to float first")
_REAL_MATH = {**_FLOAT_MATH, "complex": UNORDERED}
_NO_BOOL = domain(bool="NumPy has no boolean negation, subtraction or power")
_INTEGRAL = domain("float", complex=UNORDERED,
                   others="integers are already integral: the public op copies them")


# public surfaces (Public): ops whose public function is generated from the primitive
_FLOAT = Public("float")
_FLOAT_ = Public("float", inplace=True)
_ACTIVATION = Public("float", inplace=True, functional=True)
_PROMOTE = Public("promote")


def _sigmoid(x):
    # tanh form: no overflow warnings for large |x|, and within an ulp of 1/(1+e^-x)
    half = x.dtype.type(0.5)
    return half + half * np.tanh(half * x)


def _relu(x):
    return np.maximum(x, x.dtype.type(0))


def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


# --- unary ----------------------------------------------------------------------------------
neg = elementwise("neg", lambda x: np.negative(x), vjp=lambda g: -g, jvp=LINEAR, domain=_NO_BOOL)
copy = elementwise("copy", lambda x: np.array(x, copy=True, order="C"), vjp=lambda g: g, jvp=LINEAR,
                   node_name="CloneBackward0")
# the identity, whose gradient is the incoming one where finite and 0 elsewhere: var centres
# x on its mean through it, as the mean's gradient there is 0 in exact arithmetic but NaN
# for the whole row as soon as x holds an infinity (PyTorch's var_backward has no such term)
finite_grad = elementwise("finite_grad", lambda x: x, vjp=lambda g: g.where(g.isfinite(), 0),
                          jvp=LINEAR)
conj = elementwise("conj", lambda x: np.conjugate(x), vjp=lambda g: g.conj(), jvp=LINEAR)
exp = elementwise("exp", lambda x: np.exp(x), vjp=lambda g, out: g * out.conj(),
                  public=_FLOAT_, domain=_FLOAT_MATH)
log = elementwise("log", lambda x: np.log(x), vjp=lambda g, x: g / x.conj(),
                  public=_FLOAT_, domain=_FLOAT_MATH)
log1p = elementwise("log1p", lambda x: np.log1p(x), vjp=lambda g, x: g / (x + 1).conj(),
                    public=_FLOAT, domain=_FLOAT_MATH)
expm1 = elementwise("expm1", lambda x: np.expm1(x), vjp=lambda g, out: g * (out + 1).conj(),
                    public=_FLOAT, domain=_FLOAT_MATH)
sqrt = elementwise("sqrt", lambda x: np.sqrt(x), vjp=lambda g, out: g / (out.conj() * 2),
                   public=_FLOAT_, domain=_FLOAT_MATH)
rsqrt = elementwise("rsqrt", _rsqrt, vjp=lambda g, out: g * (out * out * out).conj() * -0.5,
                    public=_FLOAT, domain=_FLOAT_MATH)
tanh = elementwise("tanh", lambda x: np.tanh(x), vjp=lambda g, out: g * (1 - out * out).conj(),
                   public=_ACTIVATION, domain=_FLOAT_MATH)
sigmoid = elementwise("sigmoid", _sigmoid, vjp=lambda g, out: g * (out * (1 - out)).conj(),
                      public=_ACTIVATION, domain=_FLOAT_MATH)
sin = elementwise("sin", lambda x: np.sin(x), vjp=lambda g, x: g * x.cos().conj(),
                  public=_FLOAT_, domain=_FLOAT_MATH)
cos = elementwise("cos", lambda x: np.cos(x), vjp=lambda g, x: -g * x.sin().conj(),
                  public=_FLOAT_, domain=_FLOAT_MATH)


def _threshold_backward(grad, result, *, threshold):
    return np.where(result <= threshold, grad.dtype.type(0), grad)


# PyTorch's relu backward kernel, fused: the three primitives it would compose from
# (le, logical_not, where) were a fifth of a small eager step. Linear in ``grad``;
# as in PyTorch, its gradient with respect to ``result`` is zeros.
threshold_backward = Primitive(
    "threshold_backward", _threshold_backward,
    lambda grad, result, *, threshold: same_shape("threshold_backward", grad, result),
    vjp=(lambda g, result, threshold: threshold_backward(g, result, threshold=threshold),
         lambda g: g.new_zeros(g.shape)),
    jvp=lambda primals, tangents, out, threshold:
    threshold_backward(tangents[0], primals[1], threshold=threshold)
    if tangents[0] is not None else out.new_zeros(out.shape))
# relu at 0 has gradient 0 (the seed's rule for non-differentiable points); NaN passes g
relu = elementwise("relu", _relu, vjp=lambda g, out: threshold_backward(g, out, threshold=0),
                   public=Public(inplace=True, functional=True), domain=ORDERED)
def _sign(x):
    # PyTorch's sign(NaN) is 0 (NumPy's is NaN), which also makes abs's gradient 0 at NaN;
    # a bool's sign is itself (NumPy has no boolean sign)
    if x.dtype.kind == "b":
        return x.copy()
    return np.where(x != x, x.dtype.type(0), np.sign(x)) if x.dtype.kind == "f" else np.sign(x)


sign = elementwise("sign", _sign, vjp=lambda g: g * 0,
                   domain=domain(complex="complex sign differs between NumPy versions "
                                         "(x/|x| in 2.x): sgn is the complex op"))
tan = elementwise("tan", lambda x: np.tan(x), vjp=lambda g, out: g * (1 + out * out).conj(),
                  public=_FLOAT_, domain=_FLOAT_MATH)
sinh = elementwise("sinh", lambda x: np.sinh(x), vjp=lambda g, x: g * x.cosh().conj(),
                   public=_FLOAT_, domain=_FLOAT_MATH)
cosh = elementwise("cosh", lambda x: np.cosh(x), vjp=lambda g, x: g * x.sinh().conj(),
                   public=_FLOAT_, domain=_FLOAT_MATH)
asin = elementwise("asin", lambda x: np.arcsin(x), vjp=lambda g, x: g / (1 - x * x).sqrt().conj(),
                   public=_FLOAT_._replace(aliases=("arcsin",)), domain=_FLOAT_MATH)
acos = elementwise("acos", lambda x: np.arccos(x), vjp=lambda g, x: -g / (1 - x * x).sqrt().conj(),
                   public=_FLOAT_._replace(aliases=("arccos",)), domain=_FLOAT_MATH)
atan = elementwise("atan", lambda x: np.arctan(x), vjp=lambda g, x: g / (1 + x * x).conj(),
                   public=_FLOAT_._replace(aliases=("arctan",)), domain=_FLOAT_MATH)
log2 = elementwise("log2", lambda x: np.log2(x), vjp=lambda g, x: g / (x * _LN2).conj(),
                   public=_FLOAT_, domain=_FLOAT_MATH)
log10 = elementwise("log10", lambda x: np.log10(x), vjp=lambda g, x: g / (x * _LN10).conj(),
                    public=_FLOAT_, domain=_FLOAT_MATH)
exp2 = elementwise("exp2", lambda x: np.exp2(x), vjp=lambda g, out: g * (out * _LN2).conj(),
                   public=_FLOAT_, domain=_FLOAT_MATH)
erf = elementwise("erf", _erf, vjp=lambda g, x: g * (-x * x).exp() * _TWO_OVER_SQRT_PI,
                  public=_FLOAT_, domain=_REAL_MATH)
# piecewise constant: gradient 0 everywhere (PyTorch's choice at the jumps too)
floor = elementwise("floor", lambda x: np.floor(x), vjp=lambda g: g * 0, domain=_INTEGRAL)
ceil = elementwise("ceil", lambda x: np.ceil(x), vjp=lambda g: g * 0, domain=_INTEGRAL)
# half to even
round = elementwise("round", lambda x: np.round(x), vjp=lambda g: g * 0, domain=_INTEGRAL)
trunc = elementwise("trunc", lambda x: np.trunc(x), vjp=lambda g: g * 0, domain=_INTEGRAL)


# --- complex in, real out, and sgn (Note [complex gradients]) -----------------------------
# Note [complex gradients]: a VJP returns dL/dz* for a real loss L (PyTorch's convention:
# for a real function of z = x + iy it is dL/dx + i dL/dy). A function that is not
# holomorphic (abs, angle, real, imag, sgn) cannot use the ELEMENTWISE JVP tag, which
# assumes ds/dz* is real; these carry their JVP rules, and at z == 0, where abs, angle and
# sgn are not differentiable, the gradient is 0 as in PyTorch.
def _safe_abs(x):
    """(|x|, where(|x| == 0, 1, |x|), |x| == 0): a divisor that is never 0."""
    a = x.abs()
    zero = a == 0
    return a, a.where(~zero, 1), zero


def _sgn_impl(x):
    if not np.iscomplexobj(x):
        return _sign(x)
    a = np.abs(x)
    return np.where(a == 0, 0, x / np.where(a == 0, 1, a)).astype(x.dtype)


def _sgn_vjp(g, x, out):
    if not x.dtype.is_complex:
        return g * 0
    _, safe, zero = _safe_abs(x)
    return ((g - out * (g * out.conj()).real) / safe).where(~zero, 0)


def _sgn_jvp(primals, tangents, out):
    (x,), (t,) = primals, tangents
    if not x.dtype.is_complex:
        return t * 0
    _, safe, zero = _safe_abs(x)
    return (out * (out.conj() * t).imag * 1j / safe).where(~zero, 0)


def _abs_jvp(primals, tangents, out):
    (x,), (t,) = primals, tangents
    return (t * x.sgn().conj()).real


def _angle_impl(x):
    if np.iscomplexobj(x):
        return np.angle(x).astype(x.real.dtype)
    return np.where(np.isnan(x), x, np.where(x < 0, np.pi, 0)).astype(x.dtype)


def _angle_vjp(g, x):
    if not x.dtype.is_complex:
        return g * 0
    a, safe, zero = _safe_abs(x)
    return (g * x * 1j / (safe * safe)).where(~zero, 0)


def _angle_jvp(primals, tangents, out):
    (x,), (t,) = primals, tangents
    if not x.dtype.is_complex:
        return t * 0
    a, safe, zero = _safe_abs(x)
    return ((t * x.conj()).imag / (safe * safe)).where(~zero, 0)


def _part_jvp(part):
    def jvp(primals, tangents, out):
        t = tangents[0]
        return getattr(t, part) if t.dtype.is_complex else t  # real: imag's domain is complex
    return jvp


sgn = Primitive("sgn", _sgn_impl, _same("sgn"), vjp=_sgn_vjp, jvp=_sgn_jvp,
                public=Public(inplace=True))
abs = Primitive("abs", lambda x: np.abs(x), _real_rule("abs"), vjp=lambda g, x: g * x.sgn(),
                jvp=_abs_jvp,
                public=Public(aliases=("absolute",), inplace=True))
angle = Primitive("angle", _angle_impl, _real_rule("angle"), vjp=_angle_vjp, jvp=_angle_jvp,
                  public=_FLOAT, domain=_FLOAT_MATH)
# views of the complex input's memory, as PyTorch's .real and .imag
real = Primitive("real", lambda x: x.real, _real_rule("real"), jvp=_part_jvp("real"),
                 vjp=lambda g, x_aval: g.to(x_aval.dtype), view=True)
imag = Primitive("imag", lambda x: x.imag, _real_rule("imag"), jvp=_part_jvp("imag"),
                 vjp=lambda g, x_aval: g.to(x_aval.dtype) * 1j, view=True,
                 domain=domain("complex", others="a real tensor has no imaginary part (the "
                               "public op raises, as PyTorch)"))
logical_not = elementwise("logical_not", lambda x: np.logical_not(x), out_dtype=dt.bool_)

# --- binary ---------------------------------------------------------------------------------
add = elementwise("add", lambda x, y: np.add(x, y), vjp=(lambda g: g, lambda g: g), jvp=LINEAR)
sub = elementwise("sub", lambda x, y: np.subtract(x, y), vjp=(lambda g: g, lambda g: -g),
                  jvp=LINEAR, domain=_NO_BOOL)
mul = elementwise("mul", lambda x, y: np.multiply(x, y),
                  vjp=(lambda g, y: g * y.conj(), lambda g, x: g * x.conj()),
                  public=Public(inplace=True))


def _div_jvp(primals, tangents, out):
    # (tx - out * ty) / y, as PyTorch: the VJP-derived tx/y - ty*x/y^2 is inf - inf = NaN
    # at x = 1, y = 0 where PyTorch has -inf, and loses signs of zero; without tx,
    # PyTorch's -(out * ty), not 0 - out * ty, decides the sign of zero
    (_, y), (tx, ty) = primals, tangents
    if ty is None:
        return tx / y
    return (-(out * ty) if tx is None else tx - out * ty) / y


div = elementwise("div", lambda x, y: np.divide(x, y),
                  vjp=(lambda g, y: g / y.conj(), lambda g, x, y: -g * (x / (y * y)).conj()),
                  jvp=_div_jvp,
                  domain=domain("float", "complex", others="true division of integers yields "
                                "floats; the public op casts to float first"))


def _pow_exponent_vjp(g, x, y, out):
    # d/dy x**y = x**y log x, defined as 0 where x == 0 and y >= 0, a complex y counting
    # as >= 0 where it is real and >= 0 (as PyTorch)
    real_nonneg = (y.real >= 0) & (y.imag == 0) if y.dtype.is_complex else y >= 0
    return (g * (out * x.log()).conj()).where(~((x == 0) & real_nonneg), 0)


def _pow_base_vjp(g, x, y):
    # 0 where y == 0, even at x == 0 where y * x**(y-1) is 0 * inf (as PyTorch)
    return (g * (y * x ** (y - 1)).conj()).where(y != 0, 0)


def _pow(x, y):
    if x.dtype.kind != "i" or not (y < 0).any():
        return np.power(x, y)
    # an integer to a negative power, as PyTorch: +-1 of +-1, else 0 (NumPy raises)
    tiny = np.where(np.abs(x) == 1, np.where(y % 2 != 0, x, 1), 0).astype(x.dtype)
    return np.where(y < 0, tiny, np.power(x, np.maximum(y, 0)))


pow = elementwise("pow", _pow, vjp=(_pow_base_vjp, _pow_exponent_vjp),
                  domain=_NO_BOOL)


# sqrt(x*x + y*y) without overflow; d/dx = x / out, NaN at the origin (as PyTorch)
hypot = elementwise("hypot", lambda x, y: np.hypot(x, y),
                    vjp=(lambda g, x, out: g * x / out, lambda g, y, out: g * y / out),
                    public=Public(inplace=True), domain=_REAL_MATH)


def _over_norm(num, y, x):
    """num / (x*x + y*y), where num is 0 at x = y = 0: 0 there, not 0/0 (as PyTorch)."""
    d = x * x + y * y
    return num / d.where(d != 0, 1)


def _atan2_jvp(primals, tangents, out):
    # (x ty - y tx) / (x*x + y*y), as PyTorch's JVP: NaN at the origin, where its VJP
    # (atan2_backward) gives 0
    (y, x), (ty, tx) = primals, tangents
    if tx is None:
        return x * ty / (y * y + x * x)
    return (-(y * tx) if ty is None else -(y * tx) + x * ty) / (y * y + x * x)


atan2 = elementwise("atan2", lambda y, x: np.arctan2(y, x),
                    vjp=(lambda g, y, x: _over_norm(g * x, y, x),
                    lambda g, y, x: _over_norm(-g * y, y, x)), jvp=_atan2_jvp,
                    public=_FLOAT_._replace(aliases=("arctan2",)), domain=_REAL_MATH)
# x - y * floor(x / y) (sign of y) and x - y * trunc(x / y) (sign of x), as PyTorch
remainder = elementwise("remainder", lambda x, y: np.remainder(x, y),
                        vjp=(lambda g: g, lambda g, x, y: -g * (x / y).floor()), domain=ORDERED)
fmod = elementwise("fmod", lambda x, y: np.fmod(x, y),
                   vjp=(lambda g: g, lambda g, x, y: -g * (x / y).trunc()), domain=ORDERED)
# integer x // y rounded down (the public op composes float floor division from fmod, as
# PyTorch's div_floor); piecewise constant and, as in PyTorch, not differentiable
floor_divide = elementwise(
    "floor_divide", lambda x, y: np.floor_divide(x, y),
    domain=domain("int", "uint", float="the public op composes float floor division from fmod",
                  bool="PyTorch has no boolean floor division", complex=UNORDERED))


def _extremum(name, impl, wins):
    """maximum (wins = gt) or minimum (lt) with PyTorch's rules: half the gradient to each
    at ties, none to the losing input, the whole of it to both where either is NaN (it
    only masks where one loses); the tangent is ty + w * (tx - ty), w = 1 where x wins,
    0.5 at ties, 0 otherwise: ty at NaN."""
    def half_at_ties(g, x, y):
        return g.where(x != y, g * 0.5)

    def jvp(primals, tangents, out):
        (x, y), (tx, ty) = primals, tangents
        w = wins(x, y).to(out.dtype).where(x != y, 0.5)
        if ty is None:
            return w * tx
        return ty + w * (-ty if tx is None else tx - ty)

    return elementwise(name, impl, jvp=jvp, public=_PROMOTE, domain=ORDERED,
                       vjp=(lambda g, x, y: half_at_ties(g, x, y).where(~wins(y, x), 0),
                            lambda g, x, y: half_at_ties(g, x, y).where(~wins(x, y), 0)))


maximum = _extremum("maximum", lambda x, y: np.maximum(x, y), operator.gt)
minimum = _extremum("minimum", lambda x, y: np.minimum(x, y), operator.lt)


eq = elementwise("eq", lambda x, y: np.equal(x, y), out_dtype=dt.bool_,
                 public=_PROMOTE)
ne = elementwise("ne", lambda x, y: np.not_equal(x, y), out_dtype=dt.bool_,
                 public=_PROMOTE)
lt = elementwise("lt", lambda x, y: np.less(x, y), out_dtype=dt.bool_,
                 public=_PROMOTE, domain=ORDERED)
le = elementwise("le", lambda x, y: np.less_equal(x, y), out_dtype=dt.bool_,
                 public=_PROMOTE, domain=ORDERED)
gt = elementwise("gt", lambda x, y: np.greater(x, y), out_dtype=dt.bool_,
                 public=_PROMOTE, domain=ORDERED)
ge = elementwise("ge", lambda x, y: np.greater_equal(x, y), out_dtype=dt.bool_,
                 public=_PROMOTE, domain=ORDERED)
logical_and = elementwise("logical_and", lambda x, y: np.logical_and(x, y), out_dtype=dt.bool_)
logical_or = elementwise("logical_or", lambda x, y: np.logical_or(x, y), out_dtype=dt.bool_)


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
    xt = xt if xt is not None else x.new_zeros(x.shape)
    yt = yt if yt is not None else x.new_zeros(x.shape)
    return where(c, xt, yt)


where = Primitive("where", lambda c, x, y: np.where(c, x, y), _where_shape,
                  vjp=(None, lambda g, c: g.where(c, 0), lambda g, c: g.where(~c, 0)),
                  jvp=_where_jvp)


def _clamp_where_shape(c, bound, x, *, keep):
    return _where_shape(c, bound, x)


def _clamp_where_jvp(primals, tangents, out, *, keep):
    c, bound, x = primals
    bt = tangents[1] if tangents[1] is not None else x.new_zeros(x.shape)
    xt = tangents[2] if tangents[2] is not None else x.new_zeros(x.shape)
    if keep is None:  # x's tangent at a NaN bound, as PyTorch's
        return where(c & (bound == bound), bt, xt)
    return where(getattr(operator, keep)(x, bound), xt, bt)


def _clamp_where_x_vjp(g, c, bound, x):
    # PyTorch's clamp passes x the gradient only where x >= min (x <= max): none at a NaN
    # x or bound, where c (x < min) is False too
    return g.where(~c & (x == x) & (bound == bound), 0)


# where(c, bound, x) of a clamp, c = x < min or x > max or a NaN bound: the tangent is
# x's only where keep(x, bound) holds (the bound's at ties and NaN), as PyTorch's clamp
# JVP, or follows the value where keep is None; the gradient goes to x where x is within
# the bound, to the bound where x is beyond it, to neither at a NaN bound
clamp_where = Primitive("clamp_where", lambda c, bound, x, *, keep: np.where(c, bound, x),
                        _clamp_where_shape, jvp=_clamp_where_jvp,
                        vjp=(None, lambda g, c, bound: g.where(c & (bound == bound), 0),
                             _clamp_where_x_vjp))


def _cast_impl(x, *, dtype):
    return x.astype(dtype.np, copy=False) if dtype.is_complex or not np.iscomplexobj(x) \
        else x.real.astype(dtype.np)


def _cast_vjp(g, x_aval):
    return g.to(x_aval.dtype) if not g.dtype.is_complex or x_aval.dtype.is_complex \
        else g.real.to(x_aval.dtype)


cast = Primitive("cast", _cast_impl, lambda x, *, dtype: Aval(x.shape, dtype),
                 vjp=_cast_vjp, jvp=LINEAR)
