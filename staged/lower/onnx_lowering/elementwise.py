"""Elementwise primitives: mostly one ONNX op each (``simple``), with NumPy's semantics
restored where ONNX's differ (NaN in max/min/sign, log1p/expm1 accuracy, bool arithmetic)."""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...autodiff import REGISTRY
from ...autodiff import special as sp
from ...autodiff.elementwise import BESSEL
from ...autodiff.polynomials import POLYNOMIALS
from onnx import helper

from .model import KERNELS, lowering, onnx_type, unsupported


def simple(name: str, op_type: str, bool_op: str | None = None):
    """Lower primitive ``name`` to ``op_type`` on its operands (``bool_op`` on booleans);
    the result has the primitive's output dtype."""

    def lower(b, op, *xs):
        d, out = op.inputs[0].aval.dtype, op.out.aval.dtype
        if d is dt.bool_ and bool_op:
            return b.node(bool_op, xs)
        return b.kernel(op_type, xs, d, out=out if out is not d else None)

    lowering(REGISTRY[name])(lower)


for _name, _op_type, _bool_op in (
    ("add", "Add", "Or"),
    ("sub", "Sub", None),
    ("mul", "Mul", "And"),
    ("div", "Div", None),
    ("reciprocal", "Reciprocal", None),
    ("neg", "Neg", None),
    ("abs", "Abs", "Identity"),
    ("exp", "Exp", None),
    ("log", "Log", None),
    ("sqrt", "Sqrt", None),
    ("tanh", "Tanh", None),
    ("sin", "Sin", None),
    ("cos", "Cos", None),
    ("relu", "Relu", "Identity"),
    ("copy", "Identity", None),
    ("finite_grad", "Identity", None),
    ("conj", "Identity", None),
    ("eq", "Equal", None),
    ("lt", "Less", None),
    ("le", "LessOrEqual", None),
    ("gt", "Greater", None),
    ("ge", "GreaterOrEqual", None),
):
    simple(_name, _op_type, _bool_op)


def _nan_where(b, d, xs, r):
    """``r``, but NaN wherever an operand is NaN (NumPy's propagation) for float ``d``."""
    if not d.is_floating_point:
        return r
    nan = None
    for x in xs:
        m = b.kernel("IsNaN", [x], d, out=dt.bool_)
        nan = m if nan is None else b.node("Or", [nan, m])
    return b.kernel("Where", [b.const(np.array(np.nan, d.np)), r], d, pre=[nan])


def _extremum(op_type: str, bool_op: str):
    def lower(b, op, x, y):
        d = op.out.aval.dtype
        if d is dt.bool_:
            return b.node(bool_op, [x, y])
        return _nan_where(b, d, (x, y), b.kernel(op_type, [x, y], d))

    return lower


lowering(REGISTRY["maximum"])(_extremum("Max", "Or"))
lowering(REGISTRY["minimum"])(_extremum("Min", "And"))


@lowering(REGISTRY["sign"])
def _sign(b, op, x):
    d = op.out.aval.dtype
    if d is dt.bool_:  # PyTorch's sign of a bool is itself
        return b.node("Identity", [x])
    r = b.kernel("Sign", [x], d)
    if not d.is_floating_point:
        return r
    return b.node("Where", [b.kernel("IsNaN", [x], d, out=dt.bool_), _c(b, d, 0), r])  # as PyTorch


@lowering(REGISTRY["rsqrt"])
def _rsqrt(b, op, x):
    d = op.out.aval.dtype
    return b.kernel("Reciprocal", [b.kernel("Sqrt", [x], d)], d)


@lowering(REGISTRY["log1p"])
def _log1p(b, op, x):
    return _log1p_of(b, op.out.aval.dtype, x)


def _log1p_of(b, d, x):
    # log(u) * x / (u - 1) with u = 1 + x keeps log1p's accuracy near 0 (Goldberg); x where
    # u rounds to 1, log(u) where u is infinite
    one = b.const(np.array(1, d.np))
    u = b.node("Add", [x, one])
    lu = b.kernel("Log", [u], d)
    r = b.node("Div", [b.node("Mul", [lu, x]), b.node("Sub", [u, one])])
    r = b.kernel("Where", [lu, r], d, pre=[b.kernel("IsInf", [u], d, out=dt.bool_)])
    return _or_itself(b, d, b.node("Equal", [u, one]), r, x)


class _Math:
    """The arithmetic ``autodiff.special``'s algorithms are written in, as ONNX nodes of
    dtype ``d``; its methods are those of the NumPy impl's (``special._NumPy``)."""

    _CMP = {"olt": "Less", "ole": "LessOrEqual", "ogt": "Greater", "oeq": "Equal"}

    def __init__(self, b, d):
        self.b, self.d = b, d

    def c(self, v):
        return _c(self.b, self.d, v)

    def _k(self, op_type, *xs):
        return self.b.kernel(op_type, xs, self.d)

    def log1p(self, a):
        return _log1p_of(self.b, self.d, a)

    def both(self, a, b):
        return self.b.node("And", [a, b])

    def either(self, a, b):
        return self.b.node("Or", [a, b])

    def trunc(self, a):  # ceil's -0.0 in Where's second operand (_or_itself)
        pos = self.cmp("ogt", a, self.c(0))
        return self.sel(pos, self._k("Floor", a), self._k("Ceil", a))

    def copysign(self, a, b):
        """|a| with b's sign (a negative zero ``b`` counts as positive: ONNX cannot tell)."""
        m = self.abs(a)
        return self.sel(self.cmp("olt", b, self.c(0)), self.neg(m), m)

    def cmp(self, pred, a, b):
        return self.b.kernel(self._CMP[pred], [a, b], self.d, out=dt.bool_)

    def sel(self, cond, a, b):
        return self.b.node("Where", [cond, a, b])


# _Math's methods that are one ONNX operator: add(a, b) is Add, neg(a) is Neg, ...
for _name, _op_type in {
    "add": "Add",
    "sub": "Sub",
    "mul": "Mul",
    "div": "Div",
    "neg": "Neg",
    "abs": "Abs",
    "sqrt": "Sqrt",
    "exp": "Exp",
    "log": "Log",
    "floor": "Floor",
    "round": "Round",  # half to even, as np.rint
    "sin": "Sin",
    "cos": "Cos",
    "pow": "Pow",
}.items():
    setattr(_Math, _name, lambda self, *xs, _op_type=_op_type: self._k(_op_type, *xs))


def _special(name):
    """``autodiff.special.<name>`` (the NumPy impl's algorithm) as ONNX nodes; 16-bit
    floats computed in float32."""
    fn = getattr(sp, name)

    def formula(b, d, *xs, **params):
        if d.itemsize > 2:
            return fn(_Math(b, d), *xs, **params)
        r = fn(_Math(b, dt.float32), *(b.cast(x, d, dt.float32) for x in xs), **params)
        return b.cast(r, dt.float32, d)

    return formula


@lowering(REGISTRY["atanh"])
def _atanh(b, op, x):
    # log1p(2|x| / (1 - |x|)) / 2 with x's sign (the MLIR lowering's form); x itself at 0
    d = op.out.aval.dtype
    a = b.node("Abs", [x])
    q = b.node("Div", [b.node("Add", [a, a]), b.node("Sub", [_c(b, d, 1), a])])
    h = b.node("Mul", [_log1p_of(b, d, q), _c(b, d, 0.5)])
    h = b.node("Where", [b.node("Less", [x, _c(b, d, 0)]), b.node("Neg", [h]), h])
    return _or_itself(b, d, b.node("Equal", [x, _c(b, d, 0)]), h, x)


def _arc(b, d, a, u):
    # log1p(u) below 2**28 (the MLIR lowering's forms), log(2a) beyond
    big = b.node("Greater", [a, _c(b, d, min(2.0**28, float(np.finfo(d.np).max)))])
    far = b.node("Add", [b.kernel("Log", [a], d), _c(b, d, np.log(2.0))])
    return b.node("Where", [big, far, _log1p_of(b, d, u)])


@lowering(REGISTRY["asinh"])
def _asinh(b, op, x):
    # a + a^2 / (1 + sqrt(1 + a^2)) for a = |x|, with x's sign
    d = op.out.aval.dtype
    a = b.node("Abs", [x])
    sq = b.node("Mul", [a, a])
    root = b.kernel("Sqrt", [b.node("Add", [_c(b, d, 1), sq])], d)
    u = b.node("Add", [a, b.node("Div", [sq, b.node("Add", [_c(b, d, 1), root])])])
    r = _arc(b, d, a, u)
    r = b.node("Where", [b.node("Less", [x, _c(b, d, 0)]), b.node("Neg", [r]), r])
    return _or_itself(b, d, b.node("Equal", [x, _c(b, d, 0)]), r, x)


@lowering(REGISTRY["acosh"])
def _acosh(b, op, x):
    # t + sqrt(t (t + 2)) for t = x - 1; NaN below 1 (the form gives -inf far below)
    d = op.out.aval.dtype
    t = b.node("Sub", [x, _c(b, d, 1)])
    root = b.kernel("Sqrt", [b.node("Mul", [t, b.node("Add", [t, _c(b, d, 2)])])], d)
    r = _arc(b, d, x, b.node("Add", [t, root]))
    return b.node("Where", [b.node("Less", [x, _c(b, d, 1)]), _c(b, d, np.nan), r])


@lowering(REGISTRY["expm1"])
def _expm1(b, op, x):
    # (u - 1) * x / log(u) with u = exp(x) (Kahan); x itself where u == 1, u - 1 where
    # log(u) is infinite or u - 1 == -1
    d = op.out.aval.dtype
    one = b.const(np.array(1, d.np))
    u = b.kernel("Exp", [x], d)
    um1 = b.node("Sub", [u, one])
    lu = b.kernel("Log", [u], d)
    r = b.node("Div", [b.node("Mul", [um1, x]), lu])
    plain = b.node(
        "Or",
        [
            b.kernel("IsInf", [lu], d, out=dt.bool_),
            b.node("Equal", [um1, b.const(np.array(-1, d.np))]),
        ],
    )
    r = b.kernel("Where", [um1, r], d, pre=[plain])
    return _or_itself(b, d, b.node("Equal", [u, one]), r, x)


@lowering(REGISTRY["ne"])
def _ne(b, op, x, y):
    return b.node("Not", [b.kernel("Equal", [x, y], op.inputs[0].aval.dtype, out=dt.bool_)])


def _truthy(b, d, x):
    return x if d is dt.bool_ else b.node("Cast", [x], to=onnx_type(dt.bool_))


@lowering(REGISTRY["logical_not"])
def _logical_not(b, op, x):
    return b.node("Not", [_truthy(b, op.inputs[0].aval.dtype, x)])


def _logical(op_type):
    def lower(b, op, x, y):
        d = op.inputs[0].aval.dtype
        return b.node(op_type, [_truthy(b, d, x), _truthy(b, d, y)])

    return lower


lowering(REGISTRY["logical_and"])(_logical("And"))
lowering(REGISTRY["logical_or"])(_logical("Or"))


def _bitwise(int_op, bool_op):
    def lower(b, op, *xs):
        return b.node(bool_op if op.inputs[0].aval.dtype is dt.bool_ else int_op, list(xs))

    return lower


for _n in ("and", "or", "xor"):
    lowering(REGISTRY[f"bitwise_{_n}"])(_bitwise(f"Bitwise{_n.title()}", _n.title()))
lowering(REGISTRY["bitwise_not"])(_bitwise("BitwiseNot", "Not"))


def _shift(left: bool):
    """BitShift, which takes unsigned integers only: signed x shifts as its unsigned twin,
    a negative x to the right as ~((~x) >> y) (the sign shifted in); shifts by a negative
    amount or by the width or more give torch's 0 (left) or the sign (right)."""

    def lower(b, op, x, y):
        d = op.inputs[0].aval.dtype
        signed, w = d.dclass == "int", d.itemsize * 8
        u = helper.np_dtype_to_tensor_dtype(np.dtype(f"uint{w}"))  # staged has no uint16..64
        neg = b.node("Less", [x, _c(b, d, 0)]) if signed and not left else None
        if neg is not None:
            x = b.kernel("Where", [b.node("BitwiseNot", [x]), x], d, pre=[neg])
        xu, yu = (v if d is dt.uint8 else b.node("Cast", [v], to=u) for v in (x, y))
        r = b.node("BitShift", [xu, yu], direction="LEFT" if left else "RIGHT")
        r = r if d is dt.uint8 else b.node("Cast", [r], to=onnx_type(d))
        far = b.node("GreaterOrEqual", [y, _c(b, d, w)])
        if signed:
            far = b.node("Or", [far, b.node("Less", [y, _c(b, d, 0)])])
        r = b.kernel("Where", [_c(b, d, 0), r], d, pre=[far])
        return r if neg is None else b.kernel("Where", [b.node("BitwiseNot", [r]), r], d, pre=[neg])

    return lower


lowering(REGISTRY["bitwise_left_shift"])(_shift(left=True))
lowering(REGISTRY["bitwise_right_shift"])(_shift(left=False))


@lowering(REGISTRY["fma"])
def _fma(b, op, x, y, z):
    """Mul then Add (in float32 for halves): ONNX has no fused multiply-add, so a float32
    or float64 result may be an ulp off the eager and compiled ones (Note [fused
    multiply-add] in autodiff/elementwise.py)."""
    d = op.out.aval.dtype
    w = dt.float32 if d.itemsize == 2 else d
    xs = [b.cast(v, d, w) for v in (x, y, z)]
    return b.cast(b.node("Add", [b.node("Mul", xs[:2]), xs[2]]), w, d)


@lowering(REGISTRY["where"])
def _where(b, op, c, x, y):
    """Where, and on floats -0.0 put back where the result is one, from Where's second
    operand (onnxruntime's Where turns a -0.0 taken from its first into +0.0: _or_itself)."""
    d = op.out.aval.dtype
    r = b.kernel("Where", [x, y], d, pre=[c])
    if not d.is_floating_point:
        return r
    at = [
        b.node("And", [sel, _negative_zero(b, d, v)])
        for sel, v, k in ((c, x, 1), (_not(b, c), y, 2))
        if _maybe_negative_zero(b.known.get(op.inputs[k].id))
    ]
    if not at:
        return r
    return _or_itself(b, d, at[0] if len(at) == 1 else b.node("Or", at), r, _c(b, d, -0.0))


def _maybe_negative_zero(k) -> bool:
    """Whether a value known to be ``k`` everywhere (None: not known) may be -0.0."""
    return k is None or (k == 0 and bool(np.signbit(k)))


def _negative_zero(b, d, v):
    """Where ``v`` is -0.0 (1 / -0.0 is -inf), as bool."""
    zero = b.kernel("Equal", [v, _c(b, d, 0)], d, out=dt.bool_)
    below = b.kernel("Less", [_f(b, d, "Div", _c(b, d, 1), v), _c(b, d, 0)], d, out=dt.bool_)
    return b.node("And", [zero, below])


def _not(b, c):
    """Not ``c`` as Xor (onnxruntime's NotWhereFusion swaps a Where of a Not's operands)."""
    return b.node("Xor", [c, b.const(np.array(True))])


lowering(REGISTRY["clamp_where"])(_where)  # its keep changes only the tangent


@lowering(REGISTRY["threshold_backward"])
def _threshold_backward(b, op, g, r):
    d = op.out.aval.dtype
    le = b.kernel("LessOrEqual", [r, _c(b, d, op.params["threshold"])], d, out=dt.bool_)
    return b.kernel("Where", [_c(b, d, 0), g], d, pre=[le])


def _scaled_below_zero(b, d, x, g, slope):
    """``x > 0 ? g : g * slope`` (leaky_relu with ``g = x``, and its backward)."""
    gt = b.kernel("Greater", [x, _c(b, d, 0)], d, out=dt.bool_)
    return b.kernel("Where", [g, _f(b, d, "Mul", g, _c(b, d, slope))], d, pre=[gt])


@lowering(REGISTRY["leaky_relu"])
def _leaky_relu(b, op, x):
    return _scaled_below_zero(b, op.out.aval.dtype, x, x, op.params["negative_slope"])


@lowering(REGISTRY["leaky_relu_backward"])
def _leaky_relu_backward(b, op, g, x):
    return _scaled_below_zero(b, op.out.aval.dtype, x, g, op.params["negative_slope"])


@lowering(REGISTRY["hardtanh"])
def _hardtanh(b, op, x):
    d, p = op.out.aval.dtype, op.params
    lo, hi = _c(b, d, p["min_val"]), _c(b, d, p["max_val"])
    upper = b.kernel("Where", [hi, x], d, pre=[b.kernel("Greater", [x, hi], d, out=dt.bool_)])
    return b.kernel("Where", [lo, upper], d, pre=[b.kernel("Less", [x, lo], d, out=dt.bool_)])


@lowering(REGISTRY["hardtanh_backward"])
def _hardtanh_backward(b, op, g, x):
    d, p = op.out.aval.dtype, op.params
    low = b.kernel("LessOrEqual", [x, _c(b, d, p["min_val"])], d, out=dt.bool_)
    high = b.kernel("GreaterOrEqual", [x, _c(b, d, p["max_val"])], d, out=dt.bool_)
    return b.kernel("Where", [_c(b, d, 0), g], d, pre=[b.node("Or", [low, high])])


@lowering(REGISTRY["nan_to_num"])
def _nan_to_num(b, op, x):
    d, p = op.out.aval.dtype, op.params
    out = b.kernel(
        "Where", [_c(b, d, p["nan"]), x], d, pre=[b.kernel("IsNaN", [x], d, out=dt.bool_)]
    )
    for neg, by in ((0, p["posinf"]), (1, p["neginf"])):
        at = b.kernel("IsInf", [x], d, out=dt.bool_, detect_negative=neg, detect_positive=1 - neg)
        out = b.kernel("Where", [_c(b, d, by), out], d, pre=[at])
    return out


@lowering(REGISTRY["cast"])
def _cast(b, op, x):
    return b.cast(x, op.inputs[0].aval.dtype, op.out.aval.dtype)


# --- trigonometric and friends: onnxruntime has float32 kernels only; float64 uses
# identities of ops it has in float64 (or one Newton step from the float32 value)
def native_or(op_type: str, formula):
    """``op_type`` where onnxruntime has a kernel for the dtype (float16: in float32,
    rounded once), else ``formula(b, d, x)``."""

    def lower(b, op, x):
        d = op.out.aval.dtype
        if d.name in KERNELS[op_type] or d is dt.float16:
            return b.kernel(op_type, [x], d)
        return formula(b, d, x)

    return lower


def _c(b, d, v):
    return b.const(np.array(v, d.np))


def _or_itself(b, d, at, r, x):
    """``x`` where ``at``, else ``r``, with ``x`` as Where's second operand: onnxruntime's
    CPU Where gives +0.0 for a -0.0 taken from its first (it merges ``c ? x : 0`` and
    ``c ? 0 : y`` with ``x != 0 ? x : y``), and its second is copied exactly."""
    return b.kernel("Where", [r, x], d, pre=[_not(b, at)])


def _f(b, d, op_type, *xs):
    return b.kernel(op_type, xs, d)


def _tan(b, d, x):
    return b.node("Div", [_f(b, d, "Sin", x), _f(b, d, "Cos", x)])


def _sinh_cosh(sign):
    def formula(b, d, x):
        e = _f(b, d, "Exp", x)
        return b.node(
            "Mul",
            [b.node("Add" if sign > 0 else "Sub", [e, b.node("Reciprocal", [e])]), _c(b, d, 0.5)],
        )

    return formula


def _sinh(b, d, x):
    # (expm1(x) + expm1(x) / (expm1(x) + 1)) / 2 keeps sinh's accuracy near 0
    em1 = b.node("Sub", [_f(b, d, "Exp", x), _c(b, d, 1)])
    ratio = b.node("Div", [em1, b.node("Add", [em1, _c(b, d, 1)])])
    small = b.node("Mul", [b.node("Add", [em1, ratio]), _c(b, d, 0.5)])
    big = _sinh_cosh(-1)(b, d, x)
    near = b.node("Less", [_f(b, d, "Abs", x), _c(b, d, 0.5)])
    return b.node("Where", [near, small, big])


def _atan(b, d, x):
    # float32 atan, then one Newton step on sin(y) - x cos(y) = 0 in float64, taken on
    # 1/x where |x| > 1 (atan(x) = +-pi/2 - atan(1/x)): near y = +-pi/2 the step is
    # -x cos(y)^2 off by x times float32's error squared (garbage for |x| > 1e10, inf - inf
    # at x = +-inf)
    big = b.node("Greater", [b.node("Abs", [x]), _c(b, d, 1)])
    r = b.node("Where", [big, b.node("Div", [_c(b, d, 1), x]), x])
    y = b.cast(b.node("Atan", [b.cast(r, d, dt.float32)]), dt.float32, d)
    s, c = _f(b, d, "Sin", y), _f(b, d, "Cos", y)
    step = b.node("Mul", [b.node("Sub", [s, b.node("Mul", [r, c])]), c])
    y = b.node("Sub", [y, step])
    quarter = b.node(
        "Where", [b.node("Greater", [x, _c(b, d, 0)]), _c(b, d, np.pi / 2), _c(b, d, -np.pi / 2)]
    )
    return b.node("Where", [big, b.node("Sub", [quarter, y]), y])


def _asin(b, d, x):
    # atan(x / sqrt(1 - x^2)): x = +-1 gives +-inf and +-pi/2
    one_minus = b.node("Sub", [_c(b, d, 1), b.node("Mul", [x, x])])
    return _atan(b, d, b.node("Div", [x, _f(b, d, "Sqrt", one_minus)]))


def _erf(b, d, x):
    # the NumPy impl's algorithm; x itself at 0, its sign kept (_or_itself)
    return _or_itself(b, d, b.node("Equal", [x, _c(b, d, 0)]), _special("erf")(b, d, x), x)


def _acos(b, d, x):
    # 2 atan(sqrt((1 - x) / (1 + x))), accurate near x = 1
    q = b.node("Div", [b.node("Sub", [_c(b, d, 1), x]), b.node("Add", [_c(b, d, 1), x])])
    return b.node("Mul", [_c(b, d, 2), _atan(b, d, _f(b, d, "Sqrt", q))])


for _name, _op_type, _formula in (
    ("tan", "Tan", _tan),
    ("sinh", "Sinh", _sinh),
    ("cosh", "Cosh", _sinh_cosh(1)),
    ("asin", "Asin", _asin),
    ("acos", "Acos", _acos),
    ("atan", "Atan", _atan),
    ("erf", "Erf", _erf),
):
    lowering(REGISTRY[_name])(native_or(_op_type, _formula))


def _scaled(op_type, scale):
    def lower(b, op, x):
        d = op.out.aval.dtype
        return b.node("Mul", [b.kernel(op_type, [x], d), _c(b, d, scale)])

    return lower


def _as_lowering(formula):
    """The lowering of ``formula(b, d, *xs, **params)``, ``d`` the result's dtype."""
    return lambda b, op, *xs: formula(b, op.out.aval.dtype, *xs, **op.params)


for _name in (
    *("erfc", "erfinv", "lgamma", "digamma", "polygamma"),
    *("entr", "erfcx", "ndtri", "i0", "i0e", "i1", "i1e", "zeta"),
    *BESSEL,
):
    lowering(REGISTRY[_name])(_as_lowering(_special(_name)))


@lowering(REGISTRY["log2"])
def _log2(b, op, x):
    """log(x) / log(2), exact at the powers of two (ONNX has no Log2, and the quotient can
    be an ulp under the integer: log2(8.0) in float64 was 2.9999999999999996, whose floor
    is 2): where 2 ** round(y) is x, round(y), as NumPy's and torch's log2 are."""
    d = op.out.aval.dtype
    y = _scaled("Log", 1 / np.log(2.0))(b, op, x)
    k = b.kernel("Round", [y], d)
    exact = b.kernel("Equal", [b.kernel("Pow", [_c(b, d, 2), k], d), x], d, out=dt.bool_)
    return b.kernel("Where", [k, y], d, pre=[exact])


lowering(REGISTRY["log10"])(_scaled("Log", 1 / np.log(10.0)))


@lowering(REGISTRY["exp2"])
def _exp2(b, op, x):
    d = op.out.aval.dtype
    return b.kernel("Pow", [_c(b, d, 2), x], d)


for _name, _op_type in (("floor", "Floor"), ("ceil", "Ceil"), ("round", "Round")):
    simple(_name, _op_type)


@lowering(REGISTRY["sigmoid"])
def _sigmoid(b, op, x):
    """1 / (1 + e), and e / (1 + e) below 0, with e = exp(-|x|) (the MLIR lowering's
    form): onnxruntime's Sigmoid gives 0 below about -88 (sigmoid(-80) is 1.8e-35)."""
    d, one = op.out.aval.dtype, _c(b, op.out.aval.dtype, 1)
    e = _f(b, d, "Exp", _f(b, d, "Neg", _f(b, d, "Abs", x)))
    r = _f(b, d, "Div", one, _f(b, d, "Add", one, e))
    below = b.kernel("Less", [x, _c(b, d, 0)], d, out=dt.bool_)
    return b.kernel("Where", [_f(b, d, "Mul", e, r), r], d, pre=[below])


@lowering(REGISTRY["trunc"])
def _trunc(b, op, x):
    d = op.out.aval.dtype
    pos = b.node("Greater", [x, _c(b, d, 0)])  # ceil's -0.0 second (_or_itself)
    return b.node("Where", [pos, b.kernel("Floor", [x], d), b.kernel("Ceil", [x], d)])


lowering(REGISTRY["sgn"])(_sign)  # real inputs: sign


@lowering(REGISTRY["angle"])
def _angle(b, op, x):
    d = op.out.aval.dtype
    r = b.kernel("Where", [_c(b, d, np.pi), _c(b, d, 0)], d, pre=[b.node("Less", [x, _c(b, d, 0)])])
    return _nan_where(b, d, (x,), r)


@lowering(REGISTRY["real"])
def _real(b, op, x):
    return x


@lowering(REGISTRY["pow"])
def _pow(b, op, x, y):
    d = op.out.aval.dtype
    root = b.known.get(op.inputs[1].id)
    if d.is_floating_point and d.itemsize >= 4 and root in (0.5, -0.5):
        # sqrt or its reciprocal, as the NumPy impl (torch's scalar powers): -0.0 ** 0.5
        # is -0.0 and -inf ** 0.5 NaN, where Pow gives 0 and inf
        r = b.kernel("Sqrt", [x], d)
        return r if root > 0 else b.node("Div", [_c(b, d, 1), r])
    if d.is_floating_point or d.is_complex:
        return b.kernel("Pow", [x, y], d)
    if root is not None and root >= 1:
        return _int_power(b, d, x, int(root))
    return _int_power_of(b, d, x, y)


def _int_power(b, d, x, k):
    """``x ** k`` (k >= 1 known) by squaring and multiplying, wrapping as NumPy's:
    onnxruntime's integer Pow goes through doubles ((2**31 - 1) ** 2 gave INT32_MIN)."""
    r, base = None, x
    while True:
        if k & 1:
            r = base if r is None else _f(b, d, "Mul", r, base)
        k >>= 1
        if not k:
            return r
        base = _f(b, d, "Mul", base, base)


def _int_power_of(b, d, x, y):
    """``x ** y`` for an exponent read at run time, as the MLIR ``_int_pow``: square and
    multiply over y's bits, each the parity of y halved (truncated) so many times; a
    negative y's last bit is its parity, so +-1 get +-1 and 0 gets 0, and larger |x| get
    0, as PyTorch (onnxruntime's integer Pow goes through doubles)."""
    one, two = _c(b, d, 1), _c(b, d, 2)
    r, base, rest = one, x, y
    for k in range(d.itemsize * 8 - (d.np.kind == "i")):
        if k:
            base, rest = _f(b, d, "Mul", base, base), _f(b, d, "Div", rest, two)
        odd = b.cast(b.node("Mod", [rest, two]), d, dt.bool_)
        r = _f(b, d, "Mul", r, b.kernel("Where", [base, one], d, pre=[odd]))
    if d.np.kind != "i":
        return r
    zero = _c(b, d, 0)
    big = b.node(
        "And",
        [
            b.kernel("Less", [y, zero], d, out=dt.bool_),
            b.kernel("Greater", [_f(b, d, "Abs", x), one], d, out=dt.bool_),
        ],
    )
    return b.kernel("Where", [zero, r], d, pre=[big])


@lowering(REGISTRY["atan2"])
def _atan2(b, op, y, x):
    d = op.out.aval.dtype
    if d.itemsize < 4:  # NumPy computes half precision in float32 and rounds once
        y, x = (b.cast(v, d, dt.float32) for v in (y, x))
        return b.cast(_atan2_of(b, dt.float32, y, x), dt.float32, d)
    return _atan2_of(b, d, y, x)


def _x_log(log):
    """``x * log(y)``, and +0 where ``x`` is 0 unless ``y`` is NaN (xlogy, xlog1py)."""

    def emit(b, op, x, y):
        d = op.out.aval.dtype
        p = b.node("Mul", [x, log(b, d, y)])
        at_zero = b.node(
            "And", [b.node("Equal", [x, _c(b, d, 0)]), b.node("Not", [b.node("IsNaN", [y])])]
        )
        return b.node("Where", [at_zero, _c(b, d, 0), p])

    return emit


lowering(REGISTRY["xlogy"])(_x_log(lambda b, d, y: b.kernel("Log", [y], d)))
lowering(REGISTRY["xlog1py"])(_x_log(_log1p_of))


@lowering(REGISTRY["binary_cross_entropy"])
def _bce(b, op, x, y):
    """``(y - 1) max(log1p(-x), -100) - y max(log(x), -100)``, torch's kernel."""
    d = op.out.aval.dtype
    floor = _c(b, d, -100)
    l1 = b.node("Max", [b.kernel("Log", [x], d), floor])
    l0 = b.node("Max", [_log1p_of(b, d, b.node("Neg", [x])), floor])
    y1 = b.node("Sub", [y, _c(b, d, 1)])
    return b.node("Sub", [b.node("Mul", [y1, l0]), b.node("Mul", [y, l1])])


@lowering(REGISTRY["hypot"])
def _hypot(b, op, x, y):
    """max * sqrt(1 + (min/max)^2) of |x|, |y| (no overflow); 0 at the origin, inf where
    either is infinite, even against NaN (C's hypot, as NumPy)."""
    d = op.out.aval.dtype
    if d.itemsize < 4:  # in float32, rounded once (as NumPy computes half precision)
        x, y = (b.cast(v, d, dt.float32) for v in (x, y))
        return b.cast(_hypot_of(b, dt.float32, x, y), dt.float32, d)
    return _hypot_of(b, d, x, y)


def _hypot_of(b, d, x, y):
    a, c = b.node("Abs", [x]), b.node("Abs", [y])
    hi, lo = _nan_where(b, d, (a, c), b.node("Max", [a, c])), b.node("Min", [a, c])
    zero = b.node("Equal", [hi, _c(b, d, 0)])
    r = b.node("Div", [lo, b.node("Where", [zero, _c(b, d, 1), hi])])
    h = b.node("Mul", [hi, b.node("Sqrt", [b.node("Add", [b.node("Mul", [r, r]), _c(b, d, 1)])])])
    either_inf = b.node("Or", [b.node("IsInf", [v]) for v in (a, c)])
    return b.node("Where", [either_inf, _c(b, d, np.inf), b.node("Where", [zero, _c(b, d, 0), h])])


def _negative(b, d, v):
    """v < 0 or v = -0.0 (1/v = -inf)."""
    return b.node(
        "Or",
        [
            b.node("Less", [v, _c(b, d, 0)]),
            b.node("Less", [b.node("Div", [_c(b, d, 1), v]), _c(b, d, 0)]),
        ],
    )


def _atan2_of(b, d, y, x):
    """atan(y/x), +-pi where x < 0 or x = -0 (the sign of y's), as C's atan2: at two zeros
    y (x = +0) or +-pi (x = -0), and at two infinities atan2 of their signs (+-pi/4,
    +-3pi/4), where y/x is NaN."""
    both_inf = b.node("And", [b.node("IsInf", [v]) for v in (x, y)])
    y, x = (b.node("Where", [both_inf, b.node("Sign", [v]), v]) for v in (y, x))
    # at two zeros y / 1 = y: selecting y itself lost its sign, as onnxruntime's Where
    # turns a -0.0 taken from its then input into +0.0 (atan2(-0.0, +0.0) is -0.0)
    both_zero = b.node("And", [b.node("Equal", [v, _c(b, d, 0)]) for v in (x, y)])
    ratio = b.node("Div", [y, b.node("Where", [both_zero, _c(b, d, 1), x])])
    r = b.node("Atan", [ratio]) if d.name in KERNELS["Atan"] else _atan(b, d, ratio)
    turn = b.node("Where", [_negative(b, d, y), _c(b, d, -np.pi), _c(b, d, np.pi)])
    return b.node("Where", [_negative(b, d, x), b.node("Add", [r, turn]), r])


def _mod(floor: bool):
    def lower(b, op, x, y):
        d = op.out.aval.dtype
        if not d.is_floating_point:  # Mod takes the divisor's sign, fmod=1 the dividend's;
            zero = b.node("Equal", [y, _c(b, d, 0)])  # NumPy gives 0 for a zero divisor
            r = b.kernel(
                "Mod", [x, b.node("Where", [zero, _c(b, d, 1), y])], d, fmod=int(not floor)
            )
            return b.node("Where", [zero, _c(b, d, 0), r])
        r = b.node("Mod", [x, y], fmod=1)
        if not floor:
            return r
        # NumPy's remainder: fmod, moved by y where it is non-zero with the other sign
        wrong = b.node(
            "And",
            [
                b.node("Not", [b.node("Equal", [r, _c(b, d, 0)])]),
                b.node("Xor", [b.node("Less", [r, _c(b, d, 0)]), b.node("Less", [y, _c(b, d, 0)])]),
            ],
        )
        return b.node("Where", [wrong, b.node("Add", [r, y]), r])

    return lower


@lowering(REGISTRY["floor_divide"])
def _floor_divide(b, op, x, y):
    """Integer Div truncates: one down where the remainder's sign differs from y's; 0 for
    y == 0 (NumPy's) and -x for y == -1 (no INT_MIN / -1 trap)."""
    d = op.out.aval.dtype
    zero = b.node("Equal", [y, _c(b, d, 0)])
    odd = (
        zero
        if d.name.startswith("uint")
        else b.node("Or", [zero, b.node("Equal", [y, _c(b, d, -1)])])
    )
    safe = b.node("Where", [odd, _c(b, d, 1), y])
    q = _f(b, d, "Div", x, safe)
    if not d.name.startswith("uint"):
        r = _f(b, d, "Sub", x, _f(b, d, "Mul", q, safe))
        down = b.node(
            "And",
            [
                b.node("Not", [b.node("Equal", [r, _c(b, d, 0)])]),
                b.node(
                    "Xor", [b.node("Less", [r, _c(b, d, 0)]), b.node("Less", [safe, _c(b, d, 0)])]
                ),
            ],
        )
        q = b.node("Where", [down, _f(b, d, "Sub", q, _c(b, d, 1)), q])
        q = b.node("Where", [b.node("Equal", [y, _c(b, d, -1)]), _f(b, d, "Neg", x), q])
    return b.node("Where", [zero, _c(b, d, 0), q])


lowering(REGISTRY["remainder"])(_mod(True))
lowering(REGISTRY["fmod"])(_mod(False))


# P(a, x) and Q(a, x) iterate per element until their terms fall below MACHEP (2000
# steps at most, staged/autodiff/incomplete_gamma.py): the MLIR lowering's per-element
# loop would be an ONNX Loop over masked tensors, not written yet
IGAMMA_WHY = (
    "its series and continued fraction run up to 2000 data-dependent steps per element, "
    "which no ONNX lowering expresses yet: run it eagerly or under staged.compile"
)
for _name in ("igamma", "igammac"):
    unsupported(_name, {"float": IGAMMA_WHY})
# torch.special's orthogonal polynomials: their recurrence runs n steps per element (n
# read at run time, stopped at NaN), which these elementwise lowerings cannot build
for _name in POLYNOMIALS:
    unsupported(
        _name,
        {
            "float": "its recurrence runs n steps per element, a loop the ONNX export does "
            "not build: compute it eagerly or compile it (MLIR runs the loop)"
        },
    )
