"""Elementwise primitives: one linalg.generic each, scalar bodies from per-dtype-class tables.

A table entry is ``fn(e, d, *scalars) -> scalar`` for operands of dtype ``d``; the
missing dtype classes of a primitive are unsupported: outside its domain (the reasons on
the ``Primitive``), or a gap of MLIR's (``unsupported``, with its reason).
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...autodiff import REGISTRY
from ...autodiff import incomplete_gamma as ig
from ...autodiff import special as sp
from ...autodiff.elementwise import BESSEL
from ...autodiff import polynomials
from ...autodiff.polynomials import POLYNOMIALS
from . import libm
from .emitter import bits, elem_type, lowering, unsupported


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
    c = d.dclass
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
    # 1 where x > 0, -1 where x < 0, and +0 at -0.0 and NaN (PyTorch's sign)
    t, zero = elem_type(d), e.const(0, d)
    pos = e.emit(f"arith.select {CMP['gt']['float'](e, d, x, zero)}, {e.const(1, d)}, {zero} : {t}")
    return e.emit(
        f"arith.select {CMP['lt']['float'](e, d, x, zero)}, {e.const(-1, d)}, {pos} : {t}"
    )


def _int_sign(e, d, x):
    t, zero = elem_type(d), e.const(0, d)
    pos = e.emit(f"arith.extui {CMP['gt'][d.dclass](e, d, x, zero)} : i1 to {t}")
    if d.dclass == "uint":
        return pos
    neg = e.emit(f"arith.extui {CMP['lt']['int'](e, d, x, zero)} : i1 to {t}")
    return e.emit(f"arith.subi {pos}, {neg} : {t}")


def _to_real(mnemonic):
    """complex -> real ops (abs, angle, re, im): the result has the real element type."""
    return lambda e, d, x: e.emit(f"{mnemonic} {x} : {elem_type(d)}")


def _float_angle(e, d, x):
    # pi for x < 0, else 0 (also at -0.0), NaN kept: PyTorch's angle of a real tensor
    t = elem_type(d)
    half = e.emit(
        f"arith.select {CMP['lt']['float'](e, d, x, e.const(0, d))}, "
        f"{e.const(np.pi, d)}, {e.const(0, d)} : {t}"
    )
    return e.emit(f"arith.select {e.emit(f'arith.cmpf uno, {x}, {x} : {t}')}, {x}, {half} : {t}")


def _complex_angle(e, d, x):
    """complex.angle, and 0 at 0 (atan2(0, 0), which the CPU expansion makes NaN)."""
    part, t = d.to_real(), elem_type(d.to_real())
    zero = e.emit(f"complex.eq {x}, {e.const(0, d)} : {elem_type(d)}")
    a = libm.cangle(e, d, x) if _wide(d) else e.emit(f"complex.angle {x} : {elem_type(d)}")
    return e.emit(f"arith.select {zero}, {e.const(0, part)}, {a} : {t}")


def _complex_exp2(e, d, x):
    return UNARY["exp"]["complex"](e, d, BINARY["mul"]["complex"](e, d, x, e.const(np.log(2), d)))


def _complex_hyperbolic(sign):
    """(exp(z) + sign * exp(-z)) / 2: sinh (sign -1) and cosh (+1) of complex z."""

    def fn(e, d, x):
        t, exp = elem_type(d), UNARY["exp"]["complex"]
        a = exp(e, d, x)
        b = exp(e, d, e.emit(f"complex.neg {x} : {t}"))
        s = e.emit(f"complex.{'add' if sign > 0 else 'sub'} {a}, {b} : {t}")
        return e.emit(f"complex.mul {s}, {e.const(0.5, d)} : {t}")

    return fn


def _wide(d) -> bool:
    """float64 or complex128: what IREE's llvm-cpu backend would compute with libm calls."""
    return (d.to_real() if d.is_complex else d) is dt.float64


def _float_hypot(e, d, x, y):
    """max * sqrt(1 + (min/max)^2) of |x|, |y| (no overflow); 0 at the origin, inf where
    either is infinite, even against NaN (C's hypot, as NumPy)."""
    t = elem_type(d)
    a, b = (e.emit(f"math.absf {v} : {t}") for v in (x, y))
    hi, lo = e.emit(f"arith.maximumf {a}, {b} : {t}"), e.emit(f"arith.minimumf {a}, {b} : {t}")
    zero = e.emit(f"arith.cmpf oeq, {hi}, {e.const(0, d)} : {t}")
    r = e.emit(f"arith.divf {lo}, {e.select(zero, e.const(1, d), hi, d)} : {t}")
    h = e.emit(
        f"arith.mulf {hi}, {e.emit(f'math.sqrt {_fma(e, t, r, r, e.const(1, d))} : {t}')} : {t}"
    )
    inf = e.const(float("inf"), d)
    either_inf = e.emit(
        f"arith.ori {e.emit(f'arith.cmpf oeq, {a}, {inf} : {t}')}, "
        f"{e.emit(f'arith.cmpf oeq, {b}, {inf} : {t}')} : i1"
    )
    return e.select(either_inf, inf, e.select(zero, e.const(0, d), h, d), d)


def _float_atanh(e, d, x):
    """copysign(log1p(2|x| / (1 - |x|)) / 2, x), glibc's form: accurate near 0 (no
    cancellation in log((1 + x) / (1 - x))), +-inf at +-1, NaN beyond."""
    t = elem_type(d)
    a = e.emit(f"math.absf {x} : {t}")
    q = e.emit(
        f"arith.divf {e.emit(f'arith.addf {a}, {a} : {t}')}, "
        f"{e.emit(f'arith.subf {e.const(1, d)}, {a} : {t}')} : {t}"
    )
    h = e.emit(f"arith.mulf {_float_log1p(e, d, q)}, {e.const(0.5, d)} : {t}")
    return e.emit(f"math.copysign {h}, {x} : {t}")


_BIG_ARC = 2.0**28  # asinh(x) and acosh(x) round to log(2x) beyond


def _log_2x(s, a):
    """log(2 a): asinh(a) and acosh(a) to the last bit past ``_BIG_ARC``."""
    return s.add(s.log(a), s.c(np.log(2.0)))


def _float_asinh(e, d, x):
    """copysign(log1p(a + a^2 / (1 + sqrt(1 + a^2))), x) for a = |x|: accurate near 0
    (math.asinh's log(x + sqrt(x^2 + 1)) is not, and is a libm call in f64)."""
    s = libm.Scalar(e, d)
    a = s.abs(x)
    sq = s.mul(a, a)
    u = _float_log1p(e, d, s.add(a, s.div(sq, s.add(s.c(1.0), s.sqrt(s.add(s.c(1.0), sq))))))
    return s.copysign(s.sel(s.cmp("ogt", a, s.c(_BIG_ARC)), _log_2x(s, a), u), x)


def _float_acosh(e, d, x):
    """log1p(t + sqrt(t (t + 2))) for t = x - 1: accurate near 1; NaN below 1 (where
    the form gives -inf for large negative x)."""
    s = libm.Scalar(e, d)
    t = s.sub(x, s.c(1.0))
    u = _float_log1p(e, d, s.add(t, s.sqrt(s.mul(t, s.add(t, s.c(2.0))))))
    return s.pick(
        [(s.cmp("olt", x, s.c(1.0)), s.c(np.nan)), (s.cmp("ogt", x, s.c(_BIG_ARC)), _log_2x(s, x))],
        u,
    )


def _x_log(fn):
    """``x * fn(y)``, and +0 where ``x`` is 0 unless ``y`` is NaN (xlogy, xlog1py)."""

    def body(e, d, x, y):
        t = elem_type(d)
        p = e.emit(f"arith.mulf {x}, {UNARY[fn]['float'](e, d, y)} : {t}")
        zero = e.emit(f"arith.cmpf oeq, {x}, {e.const(0, d)} : {t}")
        ordered = e.emit(f"arith.cmpf ord, {y}, {y} : {t}")
        return e.select(e.emit(f"arith.andi {zero}, {ordered} : i1"), e.const(0, d), p, d)

    return body


def _bce(e, d, x, y):
    """``(y - 1) max(log1p(-x), -100) - y max(log(x), -100)``, torch's kernel."""
    t, floor = elem_type(d), e.const(-100, d)
    l1 = e.emit(f"arith.maximumf {UNARY['log']['float'](e, d, x)}, {floor} : {t}")
    neg = e.emit(f"arith.negf {x} : {t}")
    l0 = e.emit(f"arith.maximumf {UNARY['log1p']['float'](e, d, neg)}, {floor} : {t}")
    y1 = e.emit(f"arith.subf {y}, {e.const(1, d)} : {t}")
    a, b = e.emit(f"arith.mulf {y1}, {l0} : {t}"), e.emit(f"arith.mulf {y}, {l1} : {t}")
    return e.emit(f"arith.subf {a}, {b} : {t}")


def _float_atan2(e, d, y, x):
    """math.atan2 of (|y|, x) with C99's values where IREE's CPU expansion (atan of y/x,
    then a quadrant fix-up) has none: NaN at two zeros and at two infinities, and +pi for
    a negative y against x = -inf (y/x = +0); the sign is y's throughout (-0.0 too)."""
    t = elem_type(d)
    ax, ay = (e.emit(f"math.absf {v} : {t}") for v in (x, y))
    z = e.emit(f"math.atan2 {ay}, {x} : {t}")
    left = e.emit(
        f"arith.cmpi slt, {e.emit(f'arith.bitcast {x} : {t} to i{bits(d)}')}, "
        f"{e.const(0, dt.as_dtype(f'int{bits(d)}'))} : i{bits(d)}"
    )  # x < 0, -0.0
    for edge, right, turned in ((0, 0.0, np.pi), (np.inf, np.pi / 4, 3 * np.pi / 4)):
        both = e.emit(
            f"arith.andi {CMP['eq']['float'](e, d, ax, e.const(edge, d))}, "
            f"{CMP['eq']['float'](e, d, ay, e.const(edge, d))} : i1"
        )
        z = e.select(both, e.select(left, e.const(turned, d), e.const(right, d), d), z, d)
    return e.copysign(z, y, d)


def _fma(e, t, a, b, c):
    return e.emit(f"arith.addf {e.emit(f'arith.mulf {a}, {b} : {t}')}, {c} : {t}")


def _bitwise_not(e, d, x):
    ones = True if d is dt.bool_ else (-1 if d.dclass == "int" else int(np.iinfo(d.np).max))
    return e.emit(f"arith.xori {x}, {e.const(ones, d)} : {elem_type(d)}")


def _shift(left: bool):
    """x shifted by y, with torch's results where MLIR's are poison: a shift by a negative
    amount or by the width or more gives 0 to the left, the sign (0 or -1) to the right."""

    def fn(e, d, x, y):
        t, w, signed = elem_type(d), bits(d), d.dclass == "int"
        far = e.emit(f"arith.cmpi {'sge' if signed else 'uge'}, {y}, {e.const(w, d)} : {t}")
        if signed:
            neg = e.emit(f"arith.cmpi slt, {y}, {e.const(0, d)} : {t}")
            far = e.emit(f"arith.ori {far}, {neg} : i1")
        if left:
            r, fill = e.emit(f"arith.shli {x}, {y} : {t}"), e.const(0, d)
        else:
            mnemonic = "arith.shrsi" if signed else "arith.shrui"
            r = e.emit(f"{mnemonic} {x}, {y} : {t}")
            fill = (
                e.emit(f"arith.shrsi {x}, {e.const(w - 1, d)} : {t}") if signed else e.const(0, d)
            )
        return e.select(far, fill, r, d)

    return fn


def _in_int32(fn, cast_back=True):
    """``fn`` (a "uint" body) on uint8 computed in i32 (and truncated back unless its result
    is a bool): SPIR-V's emulation of narrow integers has no unsigned compares, divisions or
    remainders (IREE 3.13); uint8 extends to non-negative i32 values, on which every such
    op gives the narrow result modulo the width."""

    def wide(e, d, *xs):
        r = fn(e, dt.int32, *(cast_scalar(e, x, d, dt.int32) for x in xs))
        return cast_scalar(e, r, dt.int32, d) if cast_back else r

    return wide


def _f64(ours, theirs):
    """``ours`` (``libm.py``) for float64/complex128, ``theirs`` (an MLIR op) otherwise:
    IREE's CPU backend lowers the f64 forms of these ops to libm calls it cannot link."""
    return lambda e, d, *xs: (ours if _wide(d) else theirs)(e, d, *xs)


def _complex_sgn(e, d, z):
    """z / |z|, and 0 at 0 (written out: SPIR-V cannot take IREE's expansion of
    complex.sign, which selects complex values)."""
    t, part = elem_type(d), d.to_real()
    pt = elem_type(part)
    a = e.emit(f"complex.abs {z} : {t}")
    zero = e.emit(f"arith.cmpf oeq, {a}, {e.const(0, part)} : {pt}")
    safe = e.emit(f"arith.select {zero}, {e.const(1, part)}, {a} : {pt}")
    re_, im_ = (
        e.emit(f"arith.divf {e.emit(f'complex.{p} {z} : {t}')}, {safe} : {pt}")
        for p in ("re", "im")
    )
    return e.select(zero, e.const(0, d), e.emit(f"complex.create {re_}, {im_} : {t}"), d)


def _complex_pow(e, d, x, y):
    """exp(y log x), with exp and log of the dtype's table (libm's in complex128); 0 ** y
    is 1 for y == 0 and 0 for Re y > 0 (NaN otherwise)."""
    t, part = elem_type(d), d.to_real()
    log = UNARY["log"]["complex"](e, d, x)
    r = UNARY["exp"]["complex"](e, d, e.emit(f"complex.mul {y}, {log} : {t}"))
    zero = e.const(0, d)
    x0 = e.emit(f"complex.eq {x}, {zero} : {t}")
    y0 = e.emit(f"complex.eq {y}, {zero} : {t}")
    pos = CMP["gt"]["float"](e, part, e.emit(f"complex.re {y} : {t}"), e.const(0, part))
    r = e.select(e.emit(f"arith.andi {x0}, {pos} : i1"), zero, r, d)
    return e.select(y0, e.const(1, d), r, d)


def _float_tanh(e, d, x):
    """math.tanh, +-1 where |x| > 10 (where it rounds to 1 in f32): Vulkan's (lavapipe)
    stays 2e-7 below 1, so sigmoid(inf) was not 1 and silu's gradient (x (1 - sigmoid))
    inf for NaN at inf, 4e22 for 1 at 1e30. In f64 (which links to libm)
    -expm1(-2|x|) / (2 + expm1(-2|x|)) with x's sign, accurate near 0 as well."""
    t = elem_type(d)
    if bits(d) != 64:
        big = CMP["gt"]["float"](e, d, e.emit(f"math.absf {x} : {t}"), e.const(10.0, d))
        return e.select(
            big,
            e.emit(f"math.copysign {e.const(1.0, d)}, {x} : {t}"),
            e.emit(f"math.tanh {x} : {t}"),
            d,
        )
    ax = e.emit(f"math.absf {x} : {t}")
    m = libm.expm1(e, d, e.emit(f"arith.mulf {ax}, {e.const(-2.0, d)} : {t}"))
    r = e.emit(
        f"arith.divf {e.emit(f'arith.negf {m} : {t}')}, "
        f"{e.emit(f'arith.addf {m}, {e.const(2.0, d)} : {t}')} : {t}"
    )
    return e.emit(f"math.copysign {r}, {x} : {t}")


def _log_base(base):
    """log(x) / log(base) (math.log10 does not link on the CPU backend, and log2 not in f64)."""

    def emit(e, d, x):
        c = d.dclass
        return BINARY["mul"][c](e, d, UNARY["log"][c](e, d, x), e.const(1 / np.log(base), d))

    return emit


def _float_log2(e, d, x):
    """log(x) / log(2), exact at the powers of two, whose log2 is their exponent field less
    the bias (the quotient alone can be an ulp under the integer: log2(8.0) in float64 was
    2.9999999999999996, whose floor is 2), as NumPy's and torch's log2 are."""
    y = _log_base(2)(e, d, x)
    i = dt.from_numpy_dtype(np.dtype(f"int{bits(d)}"))
    ti, tf = elem_type(i), elem_type(d)
    inf = int(np.array(np.inf, d.np).view(i.np))  # the exponent field's bits, all set
    mantissa = (inf & -inf).bit_length() - 1  # the bits below it
    b = e.emit(f"arith.bitcast {x} : {tf} to {ti}")
    low = e.emit(f"arith.andi {b}, {e.const((1 << mantissa) - 1, i)} : {ti}")
    field = e.emit(f"arith.shrui {b}, {e.const(mantissa, i)} : {ti}")  # sign bit included
    zero_low = CMP["eq"]["int"](e, i, low, e.const(0, i))
    normal = e.emit(  # positive, neither subnormal nor inf/NaN
        f"arith.andi {CMP['ge']['uint'](e, i, field, e.const(1, i))}, "
        f"{CMP['lt']['uint'](e, i, field, e.const(inf >> mantissa, i))} : i1"
    )
    ok = e.emit(f"arith.andi {zero_low}, {normal} : i1")
    bias = (inf >> mantissa) >> 1
    k = e.emit(
        f"arith.sitofp {e.emit(f'arith.subi {field}, {e.const(bias, i)} : {ti}')} : {ti} to {tf}"
    )
    return e.emit(f"arith.select {ok}, {k}, {y} : {tf}")


class _Math(libm.Scalar):
    """``libm.Scalar`` with the log1p of this table: the arithmetic ``autodiff.special``'s
    algorithms are written in, emitted in the operands' dtype."""

    def log1p(self, a):
        return _float_log1p(self.e, self.d, a)

    def sin(self, a):
        return UNARY["sin"]["float"](self.e, self.d, a)

    def cos(self, a):
        return UNARY["cos"]["float"](self.e, self.d, a)

    def pow(self, a, b):
        return _float_pow(self.e, self.d, a, b)

    def scf_while(self, inits, types, cond, body) -> list:
        """A per-element ``scf.while`` over the state ``inits`` (of MLIR ``types``):
        ``body(state)`` gives the next state while ``cond(state)`` (an i1) holds; returns
        the final state (the loops of ``autodiff.polynomials`` and ``incomplete_gamma``)."""
        e, ts = self.e, ", ".join(types)
        before, after = [e.fresh("s") for _ in inits], [e.fresh("s") for _ in inits]
        res = e.fresh("loop")
        binds = ", ".join(f"{b} = {v}" for b, v in zip(before, inits))
        e.raw(f"{res}:{len(inits)} = scf.while ({binds}) : ({ts}) -> ({ts}) {{")
        e.raw(f"  scf.condition({cond(before)}) {', '.join(before)} : {ts}")
        e.raw("} do {")
        e.raw(f"^bb0({', '.join(f'{a}: {t}' for a, t in zip(after, types))}):")
        e.raw(f"  scf.yield {', '.join(body(after))} : {ts}")
        e.raw("}")
        return [f"{res}#{i}" for i in range(len(inits))]


def _special(name):
    """``autodiff.special.<name>`` (the NumPy impl's algorithm) emitted."""
    fn = getattr(sp, name)
    return lambda e, d, *xs: fn(_Math(e, d), *xs)


def _erf(e, d, x):
    """math.erf, except for f64, which IREE's CPU backend cannot legalize: there the NumPy
    impl's algorithm (Cody's rational approximations)."""
    if bits(d) != 64:  # IREE's math.erf gives +0 at -0.0
        return e.copysign(e.emit(f"math.erf {x} : {elem_type(d)}"), x, d)
    return _special("erf")(e, d, x)


def _float_fmod(e, d, x, y):
    """arith.remf with the sign of x: SPIR-V leaves a zero result's sign undefined
    (lavapipe's fmod(-1., -1.) is +0.0)."""
    return e.copysign(e.emit(f"arith.remf {x}, {y} : {elem_type(d)}"), x, d)


def _float_remainder(e, d, x, y):
    """fmod, then + y where the remainder is non-zero and its sign differs from y's."""
    t = elem_type(d)
    r = _float_fmod(e, d, x, y)
    zero = e.const(0, d)
    differ = e.emit(
        f"arith.xori {CMP['lt']['float'](e, d, r, zero)}, {CMP['lt']['float'](e, d, y, zero)} : i1"
    )
    fix = e.emit(f"arith.andi {CMP['ne']['float'](e, d, r, zero)}, {differ} : i1")
    return e.emit(f"arith.select {fix}, {e.emit(f'arith.addf {r}, {y} : {t}')}, {r} : {t}")


# Note [folded zeros]: lavapipe folds x * 0.0 and x - x to 0 (NaN and inf give NaN), x + 0.0
# to x (-0.0 + 0.0 is +0.0) and 0.0 - x to -x (0.0 - 0.0 is +0.0): SPIR-V lets a driver
# assume no NaN, inf or signed zero unless the module declares SignedZeroInfNanPreserve,
# which IREE never emits (--iree-vulkan-target-features with that capability adds no
# execution mode), and a select on the known zero folded too. So these are written on the
# bits of x with integer ops, which no driver folds: x times a zero known when lowering, x
# plus a known +0.0, a known +0.0 minus x, and x minus itself. IREE folds none of the float
# forms itself (llvm-cpu gave the same values before).
def _on_bits(e, d, x, form):
    """``form(b, k, ti)`` on the bits ``b`` of float ``x`` (``ti`` their integer type,
    ``k(v)`` the bits of float ``v`` as a constant of it), as a float again."""
    i = dt.from_numpy_dtype(np.dtype(f"int{bits(d)}"))
    ti, tf = elem_type(i), elem_type(d)

    def k(v):
        return e.const(int(np.array(v, d.np).view(i.np)), i)

    r = form(e.emit(f"arith.bitcast {x} : {tf} to {ti}"), k, ti)
    return e.emit(f"arith.bitcast {r} : {ti} to {tf}")


def _nan_or_inf(e, b, k, ti, other):
    """NaN's bits where bits ``b`` are those of NaN or an infinity (all exponent bits
    set), else ``other``."""
    exponent = e.emit(f"arith.andi {b}, {k(np.inf)} : {ti}")
    bad = e.emit(f"arith.cmpi eq, {exponent}, {k(np.inf)} : {ti}")
    return e.emit(f"arith.select {bad}, {k(np.nan)}, {other} : {ti}")


def _known_zero(e, name, i):
    """The zero (``0.0`` or ``-0.0``) operand ``i`` of the ``name`` op being lowered is
    everywhere, else None."""
    op = e.op
    z = e.known.get(op.inputs[i].id) if op is not None and op.prim.name == name else None
    return None if z is None or z != 0 else -0.0 if np.signbit(z) else 0.0


def _float_mul(e, d, x, y):
    """x * y; by a known zero, NaN for NaN and inf, else a zero of the product's sign
    (Note [folded zeros])."""
    for v, z in ((x, _known_zero(e, "mul", 1)), (y, _known_zero(e, "mul", 0))):
        if z is not None:

            def form(b, k, ti, z=z):
                sign = e.emit(f"arith.andi {b}, {k(-0.0)} : {ti}")
                if np.signbit(z):
                    sign = e.emit(f"arith.xori {sign}, {k(z)} : {ti}")
                return _nan_or_inf(e, b, k, ti, sign)

            return _on_bits(e, d, v, form)
    return e.emit(f"arith.mulf {x}, {y} : {elem_type(d)}")


def _float_add(e, d, x, y):
    """x + y; plus a known +0.0, x with -0.0 made +0.0 (Note [folded zeros])."""
    for v, z in ((x, _known_zero(e, "add", 1)), (y, _known_zero(e, "add", 0))):
        if z is not None and not np.signbit(z):

            def form(b, k, ti):
                minus = e.emit(f"arith.cmpi eq, {b}, {k(-0.0)} : {ti}")
                return e.emit(f"arith.select {minus}, {k(0.0)}, {b} : {ti}")

            return _on_bits(e, d, v, form)
    return e.emit(f"arith.addf {x}, {y} : {elem_type(d)}")


def _float_sub(e, d, x, y):
    """x - y; x - x is NaN for NaN and inf, else +0.0, and a known +0.0 minus y is -y with
    -(+0.0) made +0.0 (Note [folded zeros])."""
    op = e.op
    if x == y or (op and op.prim.name == "sub" and op.inputs[0].id == op.inputs[1].id):
        return _on_bits(e, d, x, lambda b, k, ti: _nan_or_inf(e, b, k, ti, k(0.0)))
    z = _known_zero(e, "sub", 0)
    if z is not None and not np.signbit(z):

        def form(b, k, ti):
            plus = e.emit(f"arith.cmpi eq, {b}, {k(0.0)} : {ti}")
            flipped = e.emit(f"arith.xori {b}, {k(-0.0)} : {ti}")
            return e.emit(f"arith.select {plus}, {b}, {flipped} : {ti}")

        return _on_bits(e, d, y, form)
    return e.emit(f"arith.subf {x}, {y} : {elem_type(d)}")


def _int_rem(floor: bool):
    """Integer fmod (remsi/remui) or remainder (sign of y); x % 0 is 0, as NumPy gives."""

    def fn(e, d, x, y):
        t, zero, c = elem_type(d), e.const(0, d), d.dclass
        y0 = CMP["eq"][c](e, d, y, zero)
        safe = e.emit(f"arith.select {y0}, {e.const(1, d)}, {y} : {t}")
        r = e.emit(f"arith.rem{'ui' if c == 'uint' else 'si'} {x}, {safe} : {t}")
        if floor and c == "int":
            differ = e.emit(
                f"arith.xori {CMP['lt']['int'](e, d, r, zero)}, "
                f"{CMP['lt']['int'](e, d, y, zero)} : i1"
            )
            fix = e.emit(f"arith.andi {CMP['ne']['int'](e, d, r, zero)}, {differ} : i1")
            r = e.emit(f"arith.select {fix}, {e.emit(f'arith.addi {r}, {y} : {t}')}, {r} : {t}")
        return e.emit(f"arith.select {y0}, {zero}, {r} : {t}")

    return fn


def _int_floor_divide(e, d, x, y):
    """x // y rounded down; 0 for y == 0 (NumPy's; eagerly the public op raises) and -x
    for y == -1, so that INT_MIN / -1 cannot trap."""
    t, c, zero, one = elem_type(d), d.dclass, e.const(0, d), e.const(1, d)
    y0 = CMP["eq"][c](e, d, y, zero)
    if c == "uint":
        q = e.emit(f"arith.divui {x}, {e.emit(f'arith.select {y0}, {one}, {y} : {t}')} : {t}")
        return e.emit(f"arith.select {y0}, {zero}, {q} : {t}")
    m1 = CMP["eq"][c](e, d, y, e.const(-1, d))
    safe = e.emit(f"arith.select {e.emit(f'arith.ori {y0}, {m1} : i1')}, {one}, {y} : {t}")
    q = e.emit(f"arith.floordivsi {x}, {safe} : {t}")
    q = e.emit(f"arith.select {m1}, {e.emit(f'arith.subi {zero}, {x} : {t}')}, {q} : {t}")
    return e.emit(f"arith.select {y0}, {zero}, {q} : {t}")


def _float_sigmoid(e, d, x):
    """1 / (1 + e), and e / (1 + e) for x < 0, with e = exp(-|x|): small results keep
    their precision, as the NumPy impl's 1 / (1 + exp(-x)), without an inf in between."""
    t = elem_type(d)
    ex = UNARY["exp"]["float"](e, d, e.emit(f"arith.negf {e.emit(f'math.absf {x} : {t}')} : {t}"))
    one = e.const(1, d)
    r = e.emit(f"arith.divf {one}, {e.emit(f'arith.addf {one}, {ex} : {t}')} : {t}")
    below = e.emit(f"arith.cmpf olt, {x}, {e.const(0, d)} : {t}")
    return e.select(below, e.emit(f"arith.mulf {ex}, {r} : {t}"), r, d)


def _complex_sigmoid(e, d, x):
    # 0.5 + 0.5 * tanh(0.5 * x), as the NumPy impl
    c = d.dclass
    half = e.const(0.5, d)
    t = UNARY["tanh"][c](e, d, BINARY["mul"][c](e, d, half, x))
    return BINARY["add"][c](e, d, half, BINARY["mul"][c](e, d, half, t))


def _relu(e, d, x):
    """0 where x < 0, else x (PyTorch's: NaN and -0.0 pass)."""
    zero = e.const(0, d)
    return e.select(CMP["lt"][d.dclass](e, d, x, zero), zero, x, d)


def _float_pow(e, d, x, y):
    """C's pow: math.powf on |x|, then the sign for odd integral y, NaN for a finite
    negative x and non-integral y, and 1 for y == 0, x == 1 and (-1)**inf; an exponent
    known to be 0.5 or -0.5 everywhere is sqrt or its reciprocal, as the NumPy impl
    (torch's scalar powers: -0.0 ** 0.5 is -0.0, -inf ** 0.5 NaN)."""
    t = elem_type(d)
    op = e.op
    root = op is not None and op.prim.name == "pow" and e.known.get(op.inputs[1].id)
    if root in (0.5, -0.5) and bits(d) >= 32:
        r = e.emit(f"math.sqrt {x} : {t}")
        return r if root > 0 else e.emit(f"arith.divf {e.const(1, d)}, {r} : {t}")

    def f(expr):
        return e.emit(f"{expr} : {t}")

    def cmp(pred, a, b):
        return e.emit(f"arith.cmpf {pred}, {a}, {b} : {t}")

    ax = f(f"math.absf {x}")
    r = f(f"math.powf {ax}, {y}")
    one, zero = e.const(1, d), e.const(0, d)
    odd = cmp("oeq", f(f"math.absf {f(f'arith.remf {y}, {e.const(2, d)}')}"), one)
    negative = cmp("olt", e.copysign(one, x, d), zero)
    r = f(
        f"arith.select {e.emit(f'arith.andi {odd}, {negative} : i1')}, {f(f'arith.negf {r}')}, {r}"
    )
    finite_neg = e.emit(
        f"arith.andi {cmp('olt', x, zero)}, {cmp('ogt', x, e.const(-np.inf, d))} : i1"
    )
    nan = e.emit(f"arith.andi {finite_neg}, {cmp('une', f(f'math.floor {y}'), y)} : i1")
    r = f(f"arith.select {nan}, {e.const(np.nan, d)}, {r}")
    minus_one_inf = e.emit(
        f"arith.andi {cmp('oeq', ax, one)}, "
        f"{cmp('oeq', f(f'math.absf {y}'), e.const(np.inf, d))} : i1"
    )
    unit = e.emit(f"arith.ori {cmp('oeq', y, zero)}, {cmp('oeq', x, one)} : i1")
    unit = e.emit(f"arith.ori {unit}, {minus_one_inf} : i1")
    return f(f"arith.select {unit}, {one}, {r}")


def _int_pow(e, d, x, y):
    # square-and-multiply over the exponent's bits (math.ipowi does not vectorize on CPU);
    # a negative exponent gives +-1 of +-1 (its low bit the parity), 0 of the rest, as
    # PyTorch's: its bits would multiply out a wrapped power of x
    t, one = elem_type(d), e.const(1, d)
    r, base = one, x
    for k in range(bits(d) - (d.dclass == "int")):
        bit = e.emit(f"arith.andi {e.emit(f'arith.shrui {y}, {e.const(k, d)} : {t}')}, {one} : {t}")
        taken = e.emit(
            f"arith.select {e.emit(f'arith.cmpi ne, {bit}, {e.const(0, d)} : {t}')}, "
            f"{base}, {one} : {t}"
        )
        r = e.emit(f"arith.muli {r}, {taken} : {t}")
        base = e.emit(f"arith.muli {base}, {base} : {t}")
    if d.dclass != "int":
        return r
    zero = e.const(0, d)
    big = e.emit(f"arith.cmpi sgt, {e.emit(f'math.absi {x} : {t}')}, {one} : {t}")
    big = e.emit(f"arith.andi {e.emit(f'arith.cmpi slt, {y}, {zero} : {t}')}, {big} : i1")
    return e.emit(f"arith.select {big}, {zero}, {r} : {t}")


# Note [relative accuracy near zero]
# A float32 result is trusted to a few ulp of itself, not of 1. IREE expands float32 sin,
# cos, tan and sinh (llvm-cpu and SPIR-V) into polynomials whose error is absolute, about
# 1e-7, and SPIR-V takes log1p as log(1 + x): near 0 the relative error grew to 67 %
# (sin(1.7e-7)), 19 % (sinh(1e-7)), 30 % (log1p(2e-7) on Vulkan). Those ops are written
# here with forms that keep it (Taylor series below 0.5). Left: near their other zeros
# (sin at 2 pi, cos at pi / 2) the same absolute error remains (2.7e-5 and 8.6e-5
# relative), and atan is within 2.3e-6;
# tests/lower/test_float32_accuracy.py sweeps magnitudes from 1e-7 to 10 on both targets.
def _odd_series(e, d, x, coefficients):
    """x + x^3 (c0 + x^2 (c1 + ...)), in Horner form."""
    t = elem_type(d)
    x2 = e.emit(f"arith.mulf {x}, {x} : {t}")
    acc = e.const(coefficients[-1], d)
    for c in reversed(coefficients[:-1]):
        acc = _fma(e, t, acc, x2, e.const(c, d))
    return _fma(e, t, e.emit(f"arith.mulf {x}, {x2} : {t}"), acc, x)


_SIN = (-1 / 6, 1 / 120, -1 / 5040, 1 / 362880)  # |x| < 0.5: truncation below 2e-11
_SINH = (1 / 6, 1 / 120, 1 / 5040, 1 / 362880)
_ATANH = tuple(1 / k for k in range(3, 21, 2))  # |s| < 1/3: truncation below 1e-10


def _near_zero(name, small):
    """``name`` (libm's in float64), with ``small(e, d, x)`` for |x| < 0.5 in float32 and
    half: IREE's float32 sin, tan and sinh, on llvm-cpu and SPIR-V alike, are accurate to
    an absolute error of about 1e-7, so relatively wrong near 0 (sin(1.7e-7) was 67 %
    off, sinh(1e-7) 19 %; Note [relative accuracy near zero])."""
    whole = _math(name)["float"]

    def lower(e, d, x):
        if _wide(d):
            return whole(e, d, x)
        t = elem_type(d)
        near = e.emit(f"arith.cmpf olt, {e.emit(f'math.absf {x} : {t}')}, {e.const(0.5, d)} : {t}")
        return e.select(near, small(e, d, x), whole(e, d, x), d)

    return lower


def _float_log1p(e, d, x):
    """2 atanh(s) with s = x / (2 + x), as an odd series in s, for |x| < 0.5 (|s| < 1/3:
    truncation below 1e-9); log(1 + x) beyond. SPIR-V's log1p is log(1 + x), and its log
    is accurate to an absolute error near 1, so Goldberg's log(u) x / (u - 1) does not
    help there: log1p(2e-7) was 30 % off on Vulkan."""
    if _wide(d):
        return libm.log1p(e, d, x)
    t = elem_type(d)
    one = e.const(1, d)
    s = e.emit(f"arith.divf {x}, {e.emit(f'arith.addf {x}, {e.const(2, d)} : {t}')} : {t}")
    small = e.emit(f"arith.mulf {_odd_series(e, d, s, _ATANH)}, {e.const(2, d)} : {t}")
    whole = e.emit(f"math.log {e.emit(f'arith.addf {x}, {one} : {t}')} : {t}")
    near = e.emit(f"arith.cmpf olt, {e.emit(f'math.absf {x} : {t}')}, {e.const(0.5, d)} : {t}")
    return e.select(near, small, whole, d)


def _small_tan(e, d, x):
    """sin's series over cos (accurate near 0) for a float32 |x| < 0.5."""
    sin = _odd_series(e, d, x, _SIN)
    return e.emit(f"arith.divf {sin}, {e.emit(f'math.cos {x} : {elem_type(d)}')} : {elem_type(d)}")


def _math(name):
    """math.<name> on floats, complex.<name> on complex; ``libm.<name>`` and
    ``libm.c<name>`` in float64 and complex128 where they exist."""
    ours, cours = getattr(libm, name, None), getattr(libm, "c" + name, None)
    return {
        "float": _f64(ours, _op(f"math.{name}")) if ours else _op(f"math.{name}"),
        "complex": _f64(cours, _op(f"complex.{name}")) if cours else _op(f"complex.{name}"),
    }


UNARY = {
    "neg": {
        "float": _op("arith.negf"),
        "complex": _op("complex.neg"),
        "int": _int_neg,
        "uint": _int_neg,
    },
    "conj": {
        "complex": _op("complex.conj"),
        "float": _identity,
        "int": _identity,
        "uint": _identity,
        "bool": _identity,
    },
    "exp": _math("exp"),
    "log": _math("log"),
    "log1p": {**_math("log1p"), "float": _float_log1p},
    "expm1": _math("expm1"),
    "sqrt": _math("sqrt"),
    "rsqrt": _math("rsqrt"),
    "reciprocal": {
        "float": lambda e, d, x: _op("arith.divf")(e, d, e.const(1, d), x),
        "complex": lambda e, d, x: _op("complex.div")(e, d, e.const(1, d), x),
    },
    "tanh": {"float": _float_tanh, "complex": _f64(libm.ctanh, _op("complex.tanh"))},
    "sin": {**_math("sin"), "float": _near_zero("sin", lambda e, d, x: _odd_series(e, d, x, _SIN))},
    "cos": _math("cos"),
    "sigmoid": {"float": _float_sigmoid, "complex": _complex_sigmoid},
    "relu": {"float": _relu, "int": _relu, "uint": _relu, "bool": _identity},
    "abs": {
        "float": _op("math.absf"),
        "int": _op("math.absi"),
        "uint": _identity,
        "bool": _identity,
        "complex": _to_real("complex.abs"),
    },
    "sign": {"float": _float_sign, "int": _int_sign, "uint": _int_sign, "bool": _identity},
    "sgn": {
        "float": _float_sign,
        "int": _int_sign,
        "uint": _int_sign,
        "bool": _identity,
        "complex": _complex_sgn,
    },
    "angle": {"float": _float_angle, "complex": _complex_angle},
    "real": {"float": _identity, "complex": _to_real("complex.re")},
    "imag": {"complex": _to_real("complex.im")},
    "tan": {
        **_math("tan"),
        "float": _near_zero("tan", _small_tan),
    },
    "sinh": {
        "float": _near_zero("sinh", lambda e, d, x: _odd_series(e, d, x, _SINH)),
        "complex": _f64(libm.csinh, _complex_hyperbolic(-1)),
    },
    "cosh": {"float": _op("math.cosh"), "complex": _f64(libm.ccosh, _complex_hyperbolic(1))},
    "asin": {"float": _math("asin")["float"]},
    "acos": {"float": _math("acos")["float"]},
    "atan": {"float": _math("atan")["float"]},
    "atanh": {"float": _float_atanh},
    "asinh": {"float": _float_asinh},
    "acosh": {"float": _float_acosh},
    "erf": {"float": _erf},
    "erfc": {"float": _special("erfc")},
    "erfinv": {"float": _special("erfinv")},
    "lgamma": {"float": _special("lgamma")},
    "digamma": {"float": _special("digamma")},
    **{n: {"float": _special(n)} for n in ("entr", "erfcx", "ndtri", "i0", "i0e", "i1", "i1e")},
    **{n: {"float": _special(n)} for n in BESSEL},
    "log2": {"float": _float_log2, "complex": _log_base(2)},
    "log10": dict.fromkeys(("float", "complex"), _log_base(10)),
    "exp2": {"float": _op("math.exp2"), "complex": _complex_exp2},
    "floor": {"float": _op("math.floor")},
    "ceil": {"float": _op("math.ceil")},
    "round": {"float": _op("math.roundeven")},
    "trunc": {"float": _op("math.trunc")},
    "logical_not": dict.fromkeys(("float", "int", "uint", "bool", "complex"), _logical_not),
    "bitwise_not": dict.fromkeys(("int", "uint", "bool"), _bitwise_not),
}

CMP = {
    name: {
        "float": _cmp("arith.cmpf", f),
        "int": _cmp("arith.cmpi", s),
        "uint": _cmp("arith.cmpi", u),
        "bool": _cmp("arith.cmpi", u),
    }
    for name, f, s, u in (
        ("eq", "oeq", "eq", "eq"),
        ("ne", "une", "ne", "ne"),
        ("lt", "olt", "slt", "ult"),
        ("le", "ole", "sle", "ule"),
        ("gt", "ogt", "sgt", "ugt"),
        ("ge", "oge", "sge", "uge"),
    )
}
CMP["eq"]["complex"] = _op("complex.eq")
CMP["ne"]["complex"] = _op("complex.neq")

_INT = ("int", "uint")
BINARY = {
    "add": {
        "float": _float_add,
        "complex": _op("complex.add"),
        "bool": _op("arith.ori"),
        **dict.fromkeys(_INT, _op("arith.addi")),
    },
    "sub": {
        "float": _float_sub,
        "complex": _op("complex.sub"),
        **dict.fromkeys(_INT, _op("arith.subi")),
    },
    "mul": {
        "float": _float_mul,
        "complex": _op("complex.mul"),
        "bool": _op("arith.andi"),
        **dict.fromkeys(_INT, _op("arith.muli")),
    },
    "div": {"float": _op("arith.divf"), "complex": _op("complex.div")},
    "pow": {"float": _float_pow, "complex": _complex_pow, **dict.fromkeys(_INT, _int_pow)},
    "maximum": {
        "float": _op("arith.maximumf"),
        "int": _op("arith.maxsi"),
        "uint": _op("arith.maxui"),
        "bool": _op("arith.ori"),
    },
    "minimum": {
        "float": _op("arith.minimumf"),
        "int": _op("arith.minsi"),
        "uint": _op("arith.minui"),
        "bool": _op("arith.andi"),
    },
    "binary_cross_entropy": {"float": _bce},
    "xlogy": {"float": _x_log("log")},
    "xlog1py": {"float": _x_log("log1p")},
    "atan2": {"float": _f64(libm.atan2, _float_atan2)},
    "hypot": {"float": _float_hypot},
    "zeta": {"float": _special("zeta")},
    "remainder": {
        "float": _f64(libm.remainder, _float_remainder),
        "int": _int_rem(True),
        "uint": _int_rem(True),
    },
    "fmod": {
        "float": _f64(libm.fmod, _float_fmod),
        "int": _int_rem(False),
        "uint": _int_rem(False),
    },
    "floor_divide": dict.fromkeys(_INT, _int_floor_divide),
    "logical_and": dict.fromkeys(
        ("float", "int", "uint", "bool", "complex"), _logical("arith.andi")
    ),
    "logical_or": dict.fromkeys(("float", "int", "uint", "bool", "complex"), _logical("arith.ori")),
    **{
        f"bitwise_{n}": dict.fromkeys(("int", "uint", "bool"), _op(f"arith.{n}i"))
        for n in ("and", "or", "xor")
    },
    "bitwise_left_shift": dict.fromkeys(_INT, _shift(left=True)),
    "bitwise_right_shift": dict.fromkeys(_INT, _shift(left=False)),
    **CMP,
}

_BOOL_RESULT = {*CMP, "logical_not", "logical_and", "logical_or"}
# the primitives that compute each element from the same element of operands of one shape
ELEMENTWISE = frozenset({*UNARY, *BINARY, "cast", "where", "fma"})

for _name, _table in {**UNARY, **BINARY}.items():  # uint8, the one unsigned dtype
    if "uint" in _table:
        _table["uint"] = _in_int32(_table["uint"], cast_back=_name not in _BOOL_RESULT)

for _name in ("asin", "acos", "atan", "atanh"):
    unsupported(_name, {"complex": "MLIR's complex dialect has no inverse trigonometric functions"})


def _elementwise(table):
    def emit(e, op, *xs):
        d, out = op.inputs[0].aval.dtype, op.out.aval.dtype
        fn = e.need(table, d)
        if d.is_floating_point and d.itemsize == 2:
            return e.map(
                xs,
                [v.aval for v in op.inputs],
                op.out.aval,
                lambda *a: _in_float32(e, fn, d, out, a),
            )
        return e.map(xs, [v.aval for v in op.inputs], op.out.aval, lambda *a: fn(e, d, *a))

    return emit


def _in_float32(e, fn, d, out, xs):
    """``fn`` on 16-bit floats computed in f32 and rounded once, as NumPy's half-precision
    loops do (and SPIR-V has no 16-bit forms of several math ops)."""
    r = fn(e, dt.float32, *(cast_scalar(e, x, d, dt.float32) for x in xs))
    return cast_scalar(e, r, dt.float32 if out.is_floating_point else out, out)


for _name, _table in {**UNARY, **BINARY}.items():
    lowering(REGISTRY[_name])(_elementwise(_table))


@lowering(REGISTRY["polygamma"])
def _polygamma(e, op, x):
    n = op.params["n"]
    return _elementwise({"float": lambda e, d, x: sp.polygamma(_Math(e, d), x, n)})(e, op, x)


@lowering(REGISTRY["copy"])
def _copy(e, op, x):
    return x  # tensors are values: a copy is the value itself


lowering(REGISTRY["finite_grad"])(_copy)  # the identity (it changes only the gradient)


@lowering(REGISTRY["threshold_backward"])
def _threshold_backward(e, op, g, r):
    d = op.out.aval.dtype
    zero, thr = e.const(0, d), e.const(op.params["threshold"], d)
    return e.map(
        (g, r),
        [v.aval for v in op.inputs],
        op.out.aval,
        lambda a, b: e.emit(
            f"arith.select {CMP['le'][d.dclass](e, d, b, thr)}, {zero}, {a} : {elem_type(d)}"
        ),
    )


def _map_scalars(e, op, xs, body):
    """``body(*scalars, d, t)`` over ``op``'s operands, elementwise."""
    d = op.out.aval.dtype
    return e.map(xs, [v.aval for v in op.inputs], op.out.aval, lambda *a: body(*a, d, elem_type(d)))


def _scaled_below_zero(e, x, g, slope, d, t):
    """``x > 0 ? g : g * slope`` (leaky_relu with ``g = x``, and its backward)."""
    scaled = e.emit(f"arith.mulf {g}, {e.const(slope, d)} : {t}")
    return e.select(CMP["gt"]["float"](e, d, x, e.const(0, d)), g, scaled, d)


@lowering(REGISTRY["leaky_relu"])
def _leaky_relu(e, op, x):
    s = op.params["negative_slope"]
    return _map_scalars(e, op, (x,), lambda a, d, t: _scaled_below_zero(e, a, a, s, d, t))


@lowering(REGISTRY["leaky_relu_backward"])
def _leaky_relu_backward(e, op, g, x):
    s = op.params["negative_slope"]
    return _map_scalars(e, op, (g, x), lambda a, b, d, t: _scaled_below_zero(e, b, a, s, d, t))


@lowering(REGISTRY["hardtanh"])
def _hardtanh(e, op, x):
    def body(a, d, t):
        lo, hi = e.const(op.params["min_val"], d), e.const(op.params["max_val"], d)
        upper = e.select(CMP["gt"]["float"](e, d, a, hi), hi, a, d)
        return e.select(CMP["lt"]["float"](e, d, a, lo), lo, upper, d)  # NaN and -0.0 pass

    return _map_scalars(e, op, (x,), body)


@lowering(REGISTRY["hardtanh_backward"])
def _hardtanh_backward(e, op, g, x):
    def body(a, b, d, t):
        lo, hi = e.const(op.params["min_val"], d), e.const(op.params["max_val"], d)
        out = e.emit(
            f"arith.ori {CMP['le']['float'](e, d, b, lo)}, {CMP['ge']['float'](e, d, b, hi)} : i1"
        )
        return e.select(out, e.const(0, d), a, d)  # NaN passes a

    return _map_scalars(e, op, (g, x), body)


@lowering(REGISTRY["nan_to_num"])
def _nan_to_num(e, op, x):
    def body(a, d, t):
        p = op.params
        out = e.select(e.emit(f"arith.cmpf uno, {a}, {a} : {t}"), e.const(p["nan"], d), a, d)
        for inf, by in ((float("inf"), p["posinf"]), (float("-inf"), p["neginf"])):
            at = e.emit(f"arith.cmpf oeq, {a}, {e.const(inf, d)} : {t}")
            out = e.select(at, e.const(by, d), out, d)
        return out

    return _map_scalars(e, op, (x,), body)


@lowering(REGISTRY["fma"])
def _fused_multiply_add(e, op, a, b, c):
    """``math.fma``, rounded once (Note [fused multiply-add] in autodiff/elementwise.py);
    halves in float32, as their NumPy kernel."""

    def body(x, y, z, d, t):
        if d.itemsize != 2:
            return e.emit(f"math.fma {x}, {y}, {z} : {t}")
        w = [cast_scalar(e, v, d, dt.float32) for v in (x, y, z)]
        return cast_scalar(e, e.emit(f"math.fma {w[0]}, {w[1]}, {w[2]} : f32"), dt.float32, d)

    return _map_scalars(e, op, (a, b, c), body)


@lowering(REGISTRY["where"])
def _where(e, op, c, x, y):
    d = op.out.aval.dtype
    return e.map(
        (c, x, y), [v.aval for v in op.inputs], op.out.aval, lambda a, b, f: e.select(a, b, f, d)
    )


lowering(REGISTRY["clamp_where"])(_where)  # its keep changes only the tangent


# --- cast -------------------------------------------------------------------------------
def _to_bfloat16(e, x, src):
    """Float ``x`` rounded to bfloat16, to nearest even, in integer arithmetic (through
    float32, as torch's casts): IREE 3.13 drops an ``arith.truncf`` to bf16 in a one-element
    tensor, whose ``extf`` back then gave the float32 unrounded. NaN is torch's 0x7FC0."""
    if src is not dt.float32:
        x = cast_scalar(e, x, src, dt.float32)
    bits32 = e.emit(f"arith.bitcast {x} : f32 to i32")
    c16 = e.const(16, dt.int32)
    lsb = e.emit(
        f"arith.andi {e.emit(f'arith.shrui {bits32}, {c16} : i32')}, {e.const(1, dt.int32)} : i32"
    )
    up = e.emit(
        f"arith.addi {e.emit(f'arith.addi {bits32}, {e.const(0x7FFF, dt.int32)} : i32')}, {lsb} : i32"
    )
    high = e.emit(f"arith.trunci {e.emit(f'arith.shrui {up}, {c16} : i32')} : i32 to i16")
    nan = e.emit(f"arith.cmpf uno, {x}, {x} : f32")
    high = e.emit(f"arith.select {nan}, {e.const(0x7FC0, dt.int16)}, {high} : i16")
    return e.emit(f"arith.bitcast {high} : i16 to bf16")


def cast_scalar(e, x, src, dst):
    """Convert scalar ``x`` from dtype ``src`` to ``dst`` as NumPy's astype does (complex to
    real keeps the real part, float to int truncates, anything to bool is ``!= 0``)."""
    if src is dst:
        return x
    cs, cd = src.dclass, dst.dclass
    if cs == "complex":
        parts = [
            cast_scalar(
                e, e.emit(f"complex.{p} {x} : {elem_type(src)}"), src.to_real(), dst.to_real()
            )
            for p in ("re", "im")
        ]
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
        if dst is dt.bfloat16:
            return _to_bfloat16(e, x, src)
        if bits(src) == bits(dst) or bits(src) == 64 and bits(dst) == 16:
            # bf16 -> f16, and f64 -> f16 as torch's (Note [half through float32]), through f32
            return cast_scalar(e, cast_scalar(e, x, src, dt.float32), dt.float32, dst)
        return e.emit(f"arith.{'extf' if bits(dst) > bits(src) else 'truncf'} {x} : {ts} to {td}")
    if cs == "float":
        if cd == "uint" and bits(dst) >= 32:
            return e.emit(f"arith.fptoui {x} : {ts} to {td}")
        return _float_to_int(e, x, src, dst)
    if cd == "float":
        # to bfloat16 through float32, as torch's casts: on CPUs without AVX512-BF16 (Ice
        # Lake) LLVM lowers a bool's uitofp to bf16 to a call of __truncsfbf2, which IREE's
        # linker lacks (a compiled bfloat16 cross_entropy failed to compile there)
        if dst is dt.bfloat16:
            return _to_bfloat16(e, x, src)
        return e.emit(f"arith.{'sitofp' if cs == 'int' else 'uitofp'} {x} : {ts} to {td}")
    if bits(src) == bits(dst):
        return x
    if bits(dst) < bits(src):
        return e.emit(f"arith.trunci {x} : {ts} to {td}")
    return e.emit(f"arith.{'extsi' if cs == 'int' else 'extui'} {x} : {ts} to {td}")


def _float_to_int(e, x, src, dst):
    """Float to a signed int (or uint8) as x86's truncating conversions, which NumPy's and
    torch's casts compile to: NaN and values outside int32's or int64's range give its
    least value, and the 8- and 16-bit ints take the int32 conversion's low bits (1e10 ->
    int8 is 0, 300.0 is 44). LLVM leaves fptosi of those undefined: NaN -> int64 was 0 on
    an AVX-512 machine and the least value on an AVX2 one (fuzzer). Where int64 is held in
    int32 (Vulkan), int64 takes the int32 conversion: INT32_MIN outside int32's range, not
    INT64_MIN, whose low word is 0."""
    if bits(src) < 32:  # the bounds below overflow float16
        return _float_to_int(e, cast_scalar(e, x, src, dt.float32), dt.float32, dst)
    narrow = dst is dt.int64 and e.wide.get(dt.int64) is dt.int32
    via = dst if bits(dst) >= 32 and not narrow else dt.int32
    n, ts, tv = bits(via), elem_type(src), elem_type(via)
    low, high = e.const(-(2.0 ** (n - 1)), src), e.const(2.0 ** (n - 1), src)
    inside = e.emit(
        f"arith.andi {e.emit(f'arith.cmpf oge, {x}, {low} : {ts}')}, "
        f"{e.emit(f'arith.cmpf olt, {x}, {high} : {ts}')} : i1"
    )
    safe = e.emit(f"arith.select {inside}, {x}, {e.const(0, src)} : {ts}")
    r = e.emit(f"arith.fptosi {safe} : {ts} to {tv}")
    r = e.emit(f"arith.select {inside}, {r}, {e.const(-(2 ** (n - 1)), via)} : {tv}")
    if via is dst:
        return r
    return e.emit(f"arith.{'extsi' if narrow else 'trunci'} {r} : {tv} to {elem_type(dst)}")


@lowering(REGISTRY["cast"])
def _cast(e, op, x):
    src, dst = op.inputs[0].aval.dtype, op.out.aval.dtype
    if src is dst:
        return x
    return e.map((x,), [op.inputs[0].aval], op.out.aval, lambda a: cast_scalar(e, a, src, dst))


# --- torch.special's orthogonal polynomials (autodiff/polynomials.py) -----------------------
class _PolyMath(_Math):
    """``_Math`` with acos, and the polynomials' recurrence as an ``scf.while`` per
    element: its step count read at run time (n may be a tensor), stopped once its value is
    NaN, as torch's kernels."""

    def __init__(self, e, d):
        super().__init__(e, d)
        self.itemsize = bits(d) // 8
        # Vulkan holds int64 as int32 (IREE demotes it), so f64's bit tricks do not lower
        # there and the step counter is 32-bit
        self.narrow = e.wide.get(dt.int64) is dt.int32

    def _wide(self, name, a):
        """float32's acos, sin, cos through float64 (libm.py's), rounded once: torch calls
        glibc's correctly rounded acosf, sinf, cosf (math.cos is 1e-7 off at 11)."""
        if bits(self.d) != 32 or self.narrow:
            return UNARY[name]["float"](self.e, self.d, a)
        wide = cast_scalar(self.e, a, self.d, dt.float64)
        return cast_scalar(
            self.e, UNARY[name]["float"](self.e, dt.float64, wide), dt.float64, self.d
        )

    def acos(self, a):
        return self._wide("acos", a)

    def sin(self, a):
        return self._wide("sin", a)

    def cos(self, a):
        return self._wide("cos", a)

    def loop(self, count, state, body, *ins):
        e, t = self.e, self.t
        i64 = lambda v: e.const(v, dt.int64)  # noqa: E731
        if self.narrow:
            count = self.sel(self.cmp("ogt", count, self.c(2.0**31 - 2)), self.c(0.0), count)
        steps = e.emit(f"arith.fptosi {count} : {t} to i64")  # count is 0 or in [1, 2^63)

        def going(s):  # steps left, and the value not NaN
            more = e.emit(f"arith.cmpi sle, {s[0]}, {steps} : i64")
            return e.emit(f"arith.andi {more}, {self.cmp('ord', s[-1], s[-1])} : i1")

        def step(s):
            def kf(a, b):
                v = e.emit(
                    f"arith.addi {e.emit(f'arith.muli {s[0]}, {i64(a)} : i64')}, {i64(b)} : i64"
                )
                return e.emit(f"arith.sitofp {v} : i64 to {t}")

            new = body(kf, list(s[1:]), *ins)
            return [e.emit(f"arith.addi {s[0]}, {i64(1)} : i64"), *new]

        out = self.scf_while([i64(1), *state], ["i64"] + [t] * len(state), going, step)[1:]
        if self.narrow:  # a 32-bit counter: NaN past its range, never a wrapped count
            past = self.cmp("ogt", count, self.c(2.0**31 - 2))
            out = [self.sel(past, self.c(np.nan), v) for v in out]
        return out


def _polynomial(name):
    fn = getattr(polynomials, name)
    return _elementwise({"float": lambda e, d, x, n: fn(_PolyMath(e, d), x, n)})


for _name in POLYNOMIALS:
    lowering(REGISTRY[_name])(_polynomial(_name))


class _Loops(_Math):
    """``_Math`` with what ``autodiff.incomplete_gamma`` iterates on: a per-element
    ``scf.while`` that stops on torch's own rule (at most n steps), a branch as
    ``scf.if`` (its loops run only on the elements that take it)."""

    def __init__(self, e, d):
        super().__init__(e, d)
        self.single = bits(d) != 64

    def expm1(self, a):
        return libm.expm1(self.e, self.d, a)

    def branch(self, need, fn, *args):
        e, t = self.e, self.t
        res = e.fresh()
        e.raw(f"{res} = scf.if {need} -> ({t}) {{")
        e.raw(f"  scf.yield {fn(*args)} : {t}")
        e.raw("} else {")
        e.raw(f"  scf.yield {self.c(0.0)} : {t}")
        e.raw("}")
        return res

    def table(self, values):
        """``values`` as a constant tensor of the dtype, for ``at``: (its value, type, size)."""
        flat = np.asarray(values, self.d.np)
        t = f"tensor<{flat.size}x{self.t}>"
        const = self.e.emit(f'arith.constant dense<"0x{flat.tobytes().hex().upper()}"> : {t}')
        return const, t, flat.size

    def at(self, table, index):
        """``table[index]`` (``index`` a whole float); an index outside the table (or NaN)
        reads element 0: the read never leaves the table, whatever the caller computed."""
        e, (tab, t, size) = self.e, table
        inside = self.both(
            self.cmp("oge", index, self.c(0.0)), self.cmp("ole", index, self.c(size - 1.0))
        )
        i = e.emit(f"arith.fptosi {self.sel(inside, index, self.c(0.0))} : {self.t} to i32")
        return e.emit(
            f"tensor.extract {tab}[{e.emit(f'arith.index_cast {i} : i32 to index')}] : {t}"
        )

    def loop(self, n, run, consts, state, body):
        e, t = self.e, self.t
        # an i32 counter: int64 is emulated on SPIR-V
        i32 = lambda v: e.emit(f"arith.constant {v} : i32")  # noqa: E731
        if run is None:
            run = e.emit("arith.constant true")

        def going(s):  # not stopped, under n steps
            more = e.emit(f"arith.cmpi slt, {s[0]}, {i32(n)} : i32")
            return e.emit(f"arith.andi {s[1]}, {more} : i1")

        def step(s):
            stop, new = body(consts, s[2:])
            return [e.emit(f"arith.addi {s[0]}, {i32(1)} : i32"), self.not_(stop), *new]

        types = ["i32", "i1"] + [t] * len(state)
        return self.scf_while([i32(0), run, *state], types, going, step)[2:]


def _incomplete_gamma(name):
    """``autodiff.incomplete_gamma.<name>`` emitted in the operands' dtype: float32 with
    torch's float constants, as torch's float kernel (SPIR-V has no f64 here)."""
    fn = getattr(ig, name)
    return lambda e, d, a, x: fn(_Loops(e, d), a, x)


for _name, _fn in (("igamma", "gammainc"), ("igammac", "gammaincc")):
    lowering(REGISTRY[_name])(_elementwise({"float": _incomplete_gamma(_fn)}))
