"""Elementwise primitives: one linalg.generic each, scalar bodies from per-dtype-class tables.

A table entry is ``fn(e, d, *scalars) -> scalar`` for operands of dtype ``d``; the
missing dtype classes of a primitive are unsupported (reasons in ``UNSUPPORTED``).
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...autodiff import REGISTRY
from .module import bits, dclass, elem_type, lowering, unsupported


def _op(mnemonic):
    """``mnemonic %a, %b : T`` on operands of the element type."""
    return lambda e, d, *xs: e.emit(f"{mnemonic} {', '.join(xs)} : {elem_type(d)}")


def _cmp(mnemonic, pred):
    return lambda e, d, x, y: e.emit(f"{mnemonic} {pred}, {x}, {y} : {elem_type(d)}")


def _identity(e, d, x):
    return x


def _int_neg(e, d, x):
    return e.emit(f"arith.subi {e.const(0, d)}, {x} : {elem_type(d)}")


def truthy(e, d, x):
    """``x != 0`` as i1 (NumPy's bool(x); NaN is true)."""
    c = dclass(d)
    if c == "bool":
        return x
    if c == "complex":
        part = d.to_real()
        re_, im_ = (e.emit(f"complex.{p} {x} : {elem_type(d)}") for p in ("re", "im"))
        return e.emit(f"arith.ori {truthy(e, part, re_)}, {truthy(e, part, im_)} : i1")
    return CMP["ne"][c](e, d, x, e.const(0, d))


def _logical_not(e, d, x):
    return e.emit(f"arith.xori {truthy(e, d, x)}, {e.const(True, dt.bool_)} : i1")


def _logical(mnemonic):
    return lambda e, d, x, y: e.emit(f"{mnemonic} {truthy(e, d, x)}, {truthy(e, d, y)} : i1")


def _float_sign(e, d, x):
    # 1 where x > 0, -1 where x < 0, x itself otherwise (keeps 0 and NaN)
    pos = e.emit(f"arith.select {CMP['gt']['float'](e, d, x, e.const(0, d))}, "
                 f"{e.const(1, d)}, {x} : {elem_type(d)}")
    return e.emit(f"arith.select {CMP['lt']['float'](e, d, x, e.const(0, d))}, "
                  f"{e.const(-1, d)}, {pos} : {elem_type(d)}")


def _int_sign(e, d, x):
    t, zero = elem_type(d), e.const(0, d)
    pos = e.emit(f"arith.extui {CMP['gt'][dclass(d)](e, d, x, zero)} : i1 to {t}")
    if dclass(d) == "uint":
        return pos
    neg = e.emit(f"arith.extui {CMP['lt']['int'](e, d, x, zero)} : i1 to {t}")
    return e.emit(f"arith.subi {pos}, {neg} : {t}")


def _complex_abs(e, d, x):
    # the aval keeps the complex dtype: |x| + 0j
    part = d.to_real()
    mag = e.emit(f"complex.abs {x} : {elem_type(d)}")
    return e.emit(f"complex.create {mag}, {e.const(0, part)} : {elem_type(d)}")


def _sigmoid(e, d, x):
    # 0.5 + 0.5 * tanh(0.5 * x), as the NumPy impl
    c = dclass(d)
    half = e.const(0.5, d)
    t = UNARY["tanh"][c](e, d, BINARY["mul"][c](e, d, half, x))
    return BINARY["add"][c](e, d, half, BINARY["mul"][c](e, d, half, t))


def _relu(e, d, x):
    return BINARY["maximum"][dclass(d)](e, d, x, e.const(0, d))


def _float_pow(e, d, x, y):
    """C's pow: math.powf on |x|, then the sign for odd integral y, NaN for a finite
    negative x and non-integral y, and 1 for y == 0, x == 1 and (-1)**inf."""
    t = elem_type(d)

    def f(expr):
        return e.emit(f"{expr} : {t}")

    def cmp(pred, a, b):
        return e.emit(f"arith.cmpf {pred}, {a}, {b} : {t}")

    ax = f(f"math.absf {x}")
    r = f(f"math.powf {ax}, {y}")
    one, zero = e.const(1, d), e.const(0, d)
    odd = cmp("oeq", f(f"math.absf {f(f'arith.remf {y}, {e.const(2, d)}')}"), one)
    negative = cmp("olt", f(f"math.copysign {one}, {x}"), zero)
    r = f(f"arith.select {e.emit(f'arith.andi {odd}, {negative} : i1')}, {f(f'arith.negf {r}')}, {r}")
    finite_neg = e.emit(f"arith.andi {cmp('olt', x, zero)}, "
                        f"{cmp('ogt', x, e.const(-np.inf, d))} : i1")
    nan = e.emit(f"arith.andi {finite_neg}, {cmp('une', f(f'math.floor {y}'), y)} : i1")
    r = f(f"arith.select {nan}, {e.const(np.nan, d)}, {r}")
    minus_one_inf = e.emit(f"arith.andi {cmp('oeq', ax, one)}, "
                           f"{cmp('oeq', f(f'math.absf {y}'), e.const(np.inf, d))} : i1")
    unit = e.emit(f"arith.ori {cmp('oeq', y, zero)}, {cmp('oeq', x, one)} : i1")
    unit = e.emit(f"arith.ori {unit}, {minus_one_inf} : i1")
    return f(f"arith.select {unit}, {one}, {r}")


def _int_pow(e, d, x, y):
    # square-and-multiply over the exponent's bits (math.ipowi does not vectorize on CPU);
    # negative exponents give 0 or +-1 here, NumPy raises for them
    t, one = elem_type(d), e.const(1, d)
    r, base = one, x
    for k in range(bits(d) - (dclass(d) == "int")):
        bit = e.emit(f"arith.andi {e.emit(f'arith.shrui {y}, {e.const(k, d)} : {t}')}, {one} : {t}")
        taken = e.emit(f"arith.select {e.emit(f'arith.cmpi ne, {bit}, {e.const(0, d)} : {t}')}, "
                       f"{base}, {one} : {t}")
        r = e.emit(f"arith.muli {r}, {taken} : {t}")
        base = e.emit(f"arith.muli {base}, {base} : {t}")
    return r


def _math(name):
    """math.<name> on floats, complex.<name> on complex."""
    return {"float": _op(f"math.{name}"), "complex": _op(f"complex.{name}")}


UNARY = {
    "neg": {"float": _op("arith.negf"), "complex": _op("complex.neg"), "int": _int_neg,
            "uint": _int_neg},
    "conj": {"complex": _op("complex.conj"), "float": _identity, "int": _identity,
             "uint": _identity, "bool": _identity},
    "exp": _math("exp"), "log": _math("log"), "log1p": _math("log1p"),
    "expm1": _math("expm1"), "sqrt": _math("sqrt"), "rsqrt": _math("rsqrt"),
    "tanh": _math("tanh"), "sin": _math("sin"), "cos": _math("cos"),
    "sigmoid": {"float": _sigmoid, "complex": _sigmoid},
    "relu": {"float": _relu, "int": _relu, "uint": _relu, "bool": _identity},
    "abs": {"float": _op("math.absf"), "int": _op("math.absi"), "uint": _identity,
            "bool": _identity, "complex": _complex_abs},
    "sign": {"float": _float_sign, "int": _int_sign, "uint": _int_sign},
    "logical_not": dict.fromkeys(("float", "int", "uint", "bool", "complex"), _logical_not),
}

CMP = {name: {"float": _cmp("arith.cmpf", f), "int": _cmp("arith.cmpi", s),
              "uint": _cmp("arith.cmpi", u), "bool": _cmp("arith.cmpi", u)}
       for name, f, s, u in (("eq", "oeq", "eq", "eq"), ("ne", "une", "ne", "ne"),
                             ("lt", "olt", "slt", "ult"), ("le", "ole", "sle", "ule"),
                             ("gt", "ogt", "sgt", "ugt"), ("ge", "oge", "sge", "uge"))}
CMP["eq"]["complex"] = _op("complex.eq")
CMP["ne"]["complex"] = _op("complex.neq")

_INT = ("int", "uint")
BINARY = {
    "add": {"float": _op("arith.addf"), "complex": _op("complex.add"), "bool": _op("arith.ori"),
            **dict.fromkeys(_INT, _op("arith.addi"))},
    "sub": {"float": _op("arith.subf"), "complex": _op("complex.sub"),
            **dict.fromkeys(_INT, _op("arith.subi"))},
    "mul": {"float": _op("arith.mulf"), "complex": _op("complex.mul"), "bool": _op("arith.andi"),
            **dict.fromkeys(_INT, _op("arith.muli"))},
    "div": {"float": _op("arith.divf"), "complex": _op("complex.div")},
    "pow": {"float": _float_pow, "complex": _op("complex.pow"),
            **dict.fromkeys(_INT, _int_pow)},
    "maximum": {"float": _op("arith.maximumf"), "int": _op("arith.maxsi"),
                "uint": _op("arith.maxui"), "bool": _op("arith.ori")},
    "minimum": {"float": _op("arith.minimumf"), "int": _op("arith.minsi"),
                "uint": _op("arith.minui"), "bool": _op("arith.andi")},
    "logical_and": dict.fromkeys(("float", "int", "uint", "bool", "complex"),
                                 _logical("arith.andi")),
    "logical_or": dict.fromkeys(("float", "int", "uint", "bool", "complex"),
                                _logical("arith.ori")),
    **CMP,
}

_PROMOTES = "NumPy computes it in floating point for integer/bool inputs; the public op " \
            "casts to float first"
for _name in ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sin", "cos", "sigmoid"):
    unsupported(_name, dict.fromkeys(("int", "uint", "bool"), _PROMOTES))
unsupported("div", dict.fromkeys(("int", "uint", "bool"), "true division of integers yields "
                                 "floats; the public op casts to float first"))
unsupported("pow", {"bool": "NumPy has no boolean power"})
for _name in ("neg", "sub"):
    unsupported(_name, {"bool": "NumPy rejects boolean negation/subtraction"})
unsupported("sign", {"bool": "NumPy has no boolean sign",
                     "complex": "complex sign differs between NumPy versions (x/|x| in 2.x)"})
for _name in ("relu", "maximum", "minimum", "lt", "le", "gt", "ge"):
    unsupported(_name, {"complex": "complex numbers are not ordered"})


def _elementwise(table):
    def emit(e, op, *xs):
        fn = e.need(table, op.inputs[0].aval.dtype)
        return e.map(xs, [v.aval for v in op.inputs], op.out.aval,
                     lambda *a: fn(e, op.inputs[0].aval.dtype, *a))
    return emit


for _name, _table in {**UNARY, **BINARY}.items():
    lowering(REGISTRY[_name])(_elementwise(_table))


@lowering(REGISTRY["copy"])
def _copy(e, op, x):
    return x  # tensors are values: a copy is the value itself


@lowering(REGISTRY["where"])
def _where(e, op, c, x, y):
    t = elem_type(op.out.aval.dtype)
    return e.map((c, x, y), [v.aval for v in op.inputs], op.out.aval,
                 lambda a, b, d: e.emit(f"arith.select {a}, {b}, {d} : {t}"))


# --- cast -------------------------------------------------------------------------------
def cast_scalar(e, x, src, dst):
    """Convert scalar ``x`` from dtype ``src`` to ``dst`` as NumPy's astype does (complex to
    real keeps the real part, float to int truncates, anything to bool is ``!= 0``)."""
    if src is dst:
        return x
    cs, cd = dclass(src), dclass(dst)
    if cs == "complex":
        parts = [cast_scalar(e, e.emit(f"complex.{p} {x} : {elem_type(src)}"), src.to_real(),
                             dst.to_real()) for p in ("re", "im")]
        if cd == "complex":
            return e.emit(f"complex.create {parts[0]}, {parts[1]} : {elem_type(dst)}")
        return parts[0]
    if cd == "complex":
        part = dst.to_real()
        re_ = cast_scalar(e, x, src, part)
        return e.emit(f"complex.create {re_}, {e.const(0, part)} : {elem_type(dst)}")
    if cd == "bool":
        return truthy(e, src, x)
    ts, td = elem_type(src), elem_type(dst)
    if cs == "float" and cd == "float":
        if bits(src) == bits(dst):  # f16 <-> bf16 through f32
            return cast_scalar(e, cast_scalar(e, x, src, dt.float32), dt.float32, dst)
        return e.emit(f"arith.{'extf' if bits(dst) > bits(src) else 'truncf'} {x} : {ts} to {td}")
    if cs == "float":
        return e.emit(f"arith.{'fptoui' if cd == 'uint' else 'fptosi'} {x} : {ts} to {td}")
    if cd == "float":
        return e.emit(f"arith.{'sitofp' if cs == 'int' else 'uitofp'} {x} : {ts} to {td}")
    if bits(src) == bits(dst):
        return x
    if bits(dst) < bits(src):
        return e.emit(f"arith.trunci {x} : {ts} to {td}")
    return e.emit(f"arith.{'extsi' if cs == 'int' else 'extui'} {x} : {ts} to {td}")


@lowering(REGISTRY["cast"])
def _cast(e, op, x):
    src, dst = op.inputs[0].aval.dtype, op.out.aval.dtype
    if src is dst:
        return x
    return e.map((x,), [op.inputs[0].aval], op.out.aval, lambda a: cast_scalar(e, a, src, dst))
