"""Elementwise primitives: shape-strict, dtype-strict (the public ops broadcast and promote)."""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .avals import Aval, same_shape
from .primitive import ELEMENTWISE, LINEAR, ZERO, Primitive


def _same(name, out_dtype=None):
    if out_dtype is None:
        return lambda *avals: same_shape(name, *avals)

    def rule(*avals):
        return Aval(same_shape(name, *avals).shape, out_dtype)
    return rule


def unary(name, impl, vjp=None, jvp=ELEMENTWISE, out_dtype=None, **kw):
    return Primitive(name, impl, _same(name, out_dtype), vjp=vjp,
                     jvp=jvp if vjp is not None else ZERO, **kw)


def binary(name, impl, vjp=None, jvp=ELEMENTWISE, out_dtype=None, **kw):
    return Primitive(name, impl, _same(name, out_dtype), vjp=vjp,
                     jvp=jvp if vjp is not None else ZERO, **kw)


def _sigmoid(x):
    # tanh form: no overflow warnings for large |x|, and within an ulp of 1/(1+e^-x)
    half = x.dtype.type(0.5)
    return half + half * np.tanh(half * x)


def _relu(x):
    return np.maximum(x, x.dtype.type(0))


def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


# --- unary ----------------------------------------------------------------------------------
neg = unary("neg", lambda x: np.negative(x), vjp=lambda g: -g, jvp=LINEAR)
copy = unary("copy", lambda x: np.array(x, copy=True), vjp=lambda g: g, jvp=LINEAR,
             node_name="CloneBackward0")
conj = unary("conj", lambda x: np.conjugate(x), vjp=lambda g: g.conj(), jvp=LINEAR)
exp = unary("exp", lambda x: np.exp(x), vjp=lambda g, out: g * out.conj())
log = unary("log", lambda x: np.log(x), vjp=lambda g, x: g / x.conj())
log1p = unary("log1p", lambda x: np.log1p(x), vjp=lambda g, x: g / (x + 1).conj())
expm1 = unary("expm1", lambda x: np.expm1(x), vjp=lambda g, out: g * (out + 1).conj())
sqrt = unary("sqrt", lambda x: np.sqrt(x), vjp=lambda g, out: g / (out.conj() * 2))
rsqrt = unary("rsqrt", _rsqrt, vjp=lambda g, out: g * (out * out * out).conj() * -0.5)
tanh = unary("tanh", lambda x: np.tanh(x), vjp=lambda g, out: g * (1 - out * out).conj())
sigmoid = unary("sigmoid", _sigmoid, vjp=lambda g, out: g * (out * (1 - out)).conj())
sin = unary("sin", lambda x: np.sin(x), vjp=lambda g, x: g * x.cos().conj())
cos = unary("cos", lambda x: np.cos(x), vjp=lambda g, x: -g * x.sin().conj())
# relu at 0 has gradient 0 (the seed's rule for non-differentiable points)
relu = unary("relu", _relu, vjp=lambda g, out: g.where(out > 0, 0))
abs = unary("abs", lambda x: np.abs(x), vjp=lambda g, x: g * x.sign())
sign = unary("sign", lambda x: np.sign(x), vjp=lambda g: g * 0)
logical_not = unary("logical_not", lambda x: np.logical_not(x), out_dtype=dt.bool_)

# --- binary ---------------------------------------------------------------------------------
add = binary("add", lambda x, y: np.add(x, y), vjp=(lambda g: g, lambda g: g), jvp=LINEAR)
sub = binary("sub", lambda x, y: np.subtract(x, y), vjp=(lambda g: g, lambda g: -g), jvp=LINEAR)
mul = binary("mul", lambda x, y: np.multiply(x, y),
             vjp=(lambda g, y: g * y.conj(), lambda g, x: g * x.conj()))
div = binary("div", lambda x, y: np.divide(x, y),
             vjp=(lambda g, y: g / y.conj(), lambda g, x, y: -g * (x / (y * y)).conj()))


def _pow_exponent_vjp(g, x, y, out):
    # d/dy x**y = x**y log x, defined as 0 where x == 0 and y >= 0 (as PyTorch)
    return (g * (out * x.log()).conj()).where(~((x == 0) & (y >= 0)), 0)


def _pow_base_vjp(g, x, y):
    # 0 where y == 0, even at x == 0 where y * x**(y-1) is 0 * inf (as PyTorch)
    return (g * (y * x ** (y - 1)).conj()).where(y != 0, 0)


pow = binary("pow", lambda x, y: np.power(x, y), vjp=(_pow_base_vjp, _pow_exponent_vjp))
# ties split the gradient evenly, as PyTorch's maximum/minimum do
maximum = binary("maximum", lambda x, y: np.maximum(x, y),
                 vjp=(lambda g, x, y: g * ((x > y) + (x == y) * 0.5),
                      lambda g, x, y: g * ((y > x) + (x == y) * 0.5)))
minimum = binary("minimum", lambda x, y: np.minimum(x, y),
                 vjp=(lambda g, x, y: g * ((x < y) + (x == y) * 0.5),
                      lambda g, x, y: g * ((y < x) + (x == y) * 0.5)))

eq = binary("eq", lambda x, y: np.equal(x, y), out_dtype=dt.bool_)
ne = binary("ne", lambda x, y: np.not_equal(x, y), out_dtype=dt.bool_)
lt = binary("lt", lambda x, y: np.less(x, y), out_dtype=dt.bool_)
le = binary("le", lambda x, y: np.less_equal(x, y), out_dtype=dt.bool_)
gt = binary("gt", lambda x, y: np.greater(x, y), out_dtype=dt.bool_)
ge = binary("ge", lambda x, y: np.greater_equal(x, y), out_dtype=dt.bool_)
logical_and = binary("logical_and", lambda x, y: np.logical_and(x, y), out_dtype=dt.bool_)
logical_or = binary("logical_or", lambda x, y: np.logical_or(x, y), out_dtype=dt.bool_)


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
    xt = xt if xt is not None else x * 0
    yt = yt if yt is not None else x * 0
    return where(c, xt, yt)


where = Primitive("where", lambda c, x, y: np.where(c, x, y), _where_shape,
                  vjp=(None, lambda g, c: g.where(c, 0), lambda g, c: g.where(~c, 0)),
                  jvp=_where_jvp)


def _cast_impl(x, *, dtype):
    return x.astype(dtype.np, copy=False) if dtype.is_complex or not np.iscomplexobj(x) \
        else x.real.astype(dtype.np)


def _cast_vjp(g, x_aval):
    return g.to(x_aval.dtype) if not g.dtype.is_complex or x_aval.dtype.is_complex \
        else g.real.to(x_aval.dtype)


cast = Primitive("cast", _cast_impl, lambda x, *, dtype: Aval(x.shape, dtype),
                 vjp=_cast_vjp, jvp=LINEAR)
