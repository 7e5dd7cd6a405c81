"""float64 / complex128 math written with arithmetic (``staged/lower/mlir/libm.py``), compiled
for llvm-cpu and compared with NumPy: ulps for the real functions against NumPy in x86-64's
80-bit long double (dense random samples over several scales plus edge cases: signed zeros,
infinities, NaN, multiples of pi/2, tiny values), exact equality for fmod and remainder,
relative error for complex128.

Note [ulp bounds on any CPU]: code generated for the host differs between CPUs: IREE marks
float ops ``contract`` and expands exp/log with ``llvm.fmuladd``, fused where the CPU has
FMA, so the last bits move. The bounds are therefore not one machine's maxima but error
budgets: each +, -, *, /, sqrt or fma rounds once (relative error <= eps = 2**-53; fusing a
multiply-add only drops a rounding), IREE's f64 exp and log are within 1 ulp (<= 2 eps; checked
below, every budget rests on it), and a relative error of k eps is at most k ulps. The
reference is computed in long double, so NumPy's own error (1.6 ulp for sinh, which made a
bound of 2 fail at 3 on another CPU) is not charged to staged.

IREE's CPU code runs with subnormals flushed to zero (in every op, not only these), so
samples whose operands or expected results are subnormal are left out.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from staged import dtypes as dt
from staged.autodiff import REGISTRY, Aval
from staged.tracing.ir import Graph, Output
from staged.lower.mlir import to_mlir
from staged.runtime.compiler import compile_mlir
from staged.runtime.device import device, to_host

rng = np.random.default_rng(7)
TINY = np.finfo(np.float64).tiny
N = 20000


def _scales(n, hi):
    """|x| log-uniform over [1e-30, hi] with random signs, plus uniform on [-hi, hi]."""
    mag = np.exp(rng.uniform(np.log(1e-30), np.log(hi), n))
    return np.concatenate([mag * rng.choice([-1.0, 1.0], n), rng.uniform(-hi, hi, n)])


EDGES = np.array(
    [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        1.0,
        -1.0,
        0.5,
        -0.5,
        1e-300,
        -1e-300,
        2.0**-27,
        2.0**-26,
        1e-8,
        0.4375,
        0.6875,
        1.1875,
        2.4375,
        0.975,
        -0.975,
    ]
)
PI_MULTIPLES = np.array([k * np.pi / 4 for k in range(-40, 41)] + [1e5, -1e5, 1e5 * np.pi / 2])
LARGE = np.exp(rng.uniform(np.log(1e5), np.log(2.0**52), 2000))  # up to where n fits
TRIG = np.concatenate(
    [
        EDGES,
        PI_MULTIPLES,
        np.nextafter(PI_MULTIPLES, np.inf),
        np.nextafter(PI_MULTIPLES, -np.inf),
        _scales(N, 1e5),
        LARGE,
        -LARGE,
    ]
)
UNIT = np.concatenate(
    [
        EDGES,
        np.linspace(-1, 1, N + 1),
        1 - np.exp(rng.uniform(-40, 0, N)),
        [1.5, -1.5, np.nextafter(1.0, 0), np.nextafter(0.5, 0)],
    ]
)
SPECIAL = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e308, -1e308, 2.5, -3.0, TINY, -TINY]
)
SY, SX = (a.ravel() for a in np.meshgrid(SPECIAL, SPECIAL))
PAIR_Y = np.concatenate(
    [SY, _scales(N, 1e30), rng.normal(size=N) * np.exp(rng.uniform(-700, 700, N))]
)
PAIR_X = np.concatenate(
    [SX, _scales(N, 1e30), rng.normal(size=N) * np.exp(rng.uniform(-700, 700, N))]
)

# (primitive, NumPy reference, inputs, max ulp: the error budget of Note [ulp bounds on any
# CPU]; in brackets the maximum measured on an AMD Zen 3 with FMA, 2026-11-25)
REAL = [
    # fdlibm's kernels on an argument reduced to a double-double: the polynomial's error is
    # below 2**-58 and the final sum rounds once; the other terms are a sixth of the result
    # or less, so their roundings add under 0.5 eps [sin 0.72, cos 0.73, atan 0.64,
    # asin 0.81, acos 0.85]
    ("sin", np.sin, (TRIG,), 1),
    ("cos", np.cos, (TRIG,), 1),
    ("atan", np.arctan, (_scales(N, 1e30),), 1),
    ("asin", np.arcsin, (UNIT,), 1),
    ("acos", np.arccos, (UNIT,), 1),
    # tan near pi/4: -1/(x+r) from a double-double sum, one division and the correction's
    # rounding [1.92]
    ("tan", np.tan, (TRIG,), 2),
    # atan of the rounded quotient y/x: 1 eps in the argument, atan's condition number
    # x/((1+x^2) atan x) is at most 1, plus atan's own [1.24]
    ("atan2", np.arctan2, (PAIR_Y, PAIR_X), 2),
    # exp, log themselves: the assumption the budgets below rest on [0.50, 0.50]
    ("exp", np.exp, (np.concatenate([EDGES, _scales(N, 700)]),), 1),
    ("log", np.log, (np.abs(np.concatenate([EDGES, _scales(N, 1e300), 1 + _scales(N, 1e-3)])),), 1),
    # Kahan's (u - 1) * (x / log u), u = exp(x): u's error 2 eps enters through
    # (u - 1) / log u with sensitivity <= 1, log 2, the division 1, the product 1, u - 1 1
    # (exact by Sterbenz where |x| < log 2) [2.00]
    ("expm1", np.expm1, (np.concatenate([EDGES, _scales(N, 700)]),), 7),
    # Goldberg's log(u) * (x / (u - 1)), u = 1 + x: u's rounding through log(u) / (u - 1)
    # (sensitivity <= 1), log 2, the division, the product and u - 1 one each [0.71]
    ("log1p", np.log1p, (np.concatenate([EDGES, np.exp(_scales(N, 40)) - 1]),), 6),
    # |x| < 1: (u + u / (u + 1)) / 2 for u = expm1|x| (7): u / (u + 1) carries u's error
    # damped by 1 / (1 + u) and two roundings, the sum one more: 7 + 3; beyond, (E - 1/E) / 2
    # or (E/2) E from exp is under 5 [2.39]
    ("sinh", np.sinh, (np.concatenate([EDGES, _scales(N, 710)]),), 10),
    # -m / (2 + m) for m = expm1(-2|x|) in (-1, 0]: m's error (at most 5.7 eps, as exp's
    # error vanishes where u -> 0) grows by 2 / (2 + m) <= 2, plus the sum and the division
    # [3.26]
    ("tanh", np.tanh, (np.concatenate([EDGES, _scales(N, 30)]),), 13),
]


def _remainder(a, b):
    with np.errstate(all="ignore"):
        m = np.fmod(a, b)
    return np.where((m != 0) & ((m < 0) != (b < 0)), m + b, m)


EXACT = [("fmod", np.fmod), ("remainder", _remainder)]
C = rng.normal(size=N) + 1j * rng.normal(size=N)
CPLX = np.concatenate(
    [
        C * np.exp(rng.uniform(-8, 3, N)),
        rng.uniform(-20, 20, N) + 1j * rng.uniform(-20, 20, N),
        [0, 1, -1, 1j, -1j, -2 + 0j, 0.5 + 0j],
    ]
)
# (primitive, NumPy reference, max relative error in units of 2**-52)
COMPLEX = [
    ("exp", np.exp, 2),
    ("log", np.log, 3),
    ("sqrt", np.sqrt, 2),
    ("rsqrt", lambda z: 1 / np.sqrt(z), 3),
    ("tanh", np.tanh, 6),
    ("sin", np.sin, 3),
    ("cos", np.cos, 3),
    ("tan", np.tan, 6),
    ("sinh", np.sinh, 3),
    ("cosh", np.cosh, 3),
    ("exp2", np.exp2, 2),
    ("log2", np.log2, 4),
    ("log10", np.log10, 4),
]


def _graph(cases):
    g, inputs = Graph(), []
    for name, xs in cases:
        prim = REGISTRY[name]
        vals = [g.add_input(Aval(x.shape, dt.from_numpy_dtype(x.dtype)), "arg", "") for x in xs]
        inputs += xs
        out = g.add_op(
            prim, vals, {}, prim.abstract_eval(*(v.aval for v in vals)), "test_libm.py:1"
        )
        g.outputs.append(Output(out, "out", name))
    return g, inputs


@pytest.fixture(scope="module")
def results():
    cases = [(f"real {n}", n, xs) for n, _, xs, _ in REAL]
    cases += [(f"exact {n}", n, (PAIR_X, PAIR_Y)) for n, _ in EXACT]
    cases += [(f"complex {n}", n, (CPLX,)) for n, _, _ in COMPLEX]
    cases += [
        ("complex angle", "angle", (CPLX,)),
        ("complex pow", "pow", (CPLX[:N], CPLX[N : 2 * N])),
    ]
    g, inputs = _graph([(n, xs) for _, n, xs in cases])
    m = device().load(compile_mlir(to_mlir(g)))
    outs = m.invoke("main", inputs, [o.value.aval.dtype.np for o in g.outputs])
    return {key: to_host(o) for (key, _, _), o in zip(cases, outs)}


def _subnormal(*arrays):
    return np.any([(a != 0) & (np.abs(a) < TINY) for a in arrays], axis=0)


def ulps(got, want):
    """|got - want| in units of the ulp of want rounded to float64 (want may be a long
    double); NaN == NaN, and a zero's sign must match."""
    near = want.astype(np.float64)
    same = (got == near) | (np.isnan(got) & np.isnan(near))
    same &= ~((got == 0) & (near == 0) & (np.signbit(got) != np.signbit(near)))
    with np.errstate(all="ignore"):
        u = np.abs(got.astype(want.dtype) - want) / np.spacing(np.maximum(np.abs(near), TINY))
    return np.where(same, 0.0, np.where(np.isfinite(u), u, np.inf)).astype(np.float64)


@pytest.mark.skipif(
    np.finfo(np.longdouble).nmant < 63, reason="the references need x86's 80-bit long double"
)
@pytest.mark.parametrize("name,ref,xs,bound", REAL, ids=[r[0] for r in REAL])
def test_float64_within_ulps(name, ref, xs, bound, results):
    got = results[f"real {name}"]
    with np.errstate(all="ignore"):
        want = ref(*(x.astype(np.longdouble) for x in xs))
    u = ulps(got, want)
    u[_subnormal(*xs, want.astype(np.float64))] = 0
    k = int(np.argmax(u))
    assert u[k] <= bound, (
        f"{name}{tuple(float(x[k]) for x in xs)}: {got[k]!r}, long double "
        f"{want[k]!r} ({u[k]:.2f} ulp)"
    )


def test_trig_beyond_2_52_is_nan():
    x = np.array([2.0**52, -(2.0**60), 1e300])
    g, inputs = _graph([(n, (x,)) for n in ("sin", "cos", "tan")])
    outs = device().load(compile_mlir(to_mlir(g))).invoke("main", inputs, [np.float64] * 3)
    assert all(np.isnan(to_host(o)).all() for o in outs)


@pytest.mark.parametrize("name,ref", EXACT, ids=[r[0] for r in EXACT])
def test_float64_fmod_is_exact(name, ref, results):
    with np.errstate(all="ignore"):
        got, want = results[f"exact {name}"], ref(PAIR_X, PAIR_Y)
    bad = ulps(got, want) > 0
    bad &= ~_subnormal(PAIR_X, PAIR_Y, want)
    k = np.flatnonzero(bad)
    assert not k.size, [(PAIR_X[i], PAIR_Y[i], got[i], want[i]) for i in k[:5]]


def test_fmod_of_huge_quotients_matches_python():
    # quotients of up to 2**2000: every one of the 42 reduction steps is used
    x = np.array([1e308, -1e308, 1.7e308, 3.0, 1e200, 7e-300, 5.5e300])
    y = np.array([3.0, 7e-300, 3.3e-300, 1e-300, np.pi, 3e-307, -1.1])
    g, inputs = _graph([("fmod", (x, y))])
    got = to_host(device().load(compile_mlir(to_mlir(g))).invoke("main", inputs, [np.float64])[0])
    assert [float(v) for v in got] == [math.fmod(a, b) for a, b in zip(x, y)]


@pytest.mark.parametrize("name,ref,bound", COMPLEX, ids=[r[0] for r in COMPLEX])
def test_complex128_relative_error(name, ref, bound, results):
    got = results[f"complex {name}"]
    with np.errstate(all="ignore"):
        want = ref(CPLX)
    fin = np.isfinite(want)
    with np.errstate(all="ignore"):
        err = np.abs(got[fin] - want[fin]) / np.abs(want[fin]) / 2.0**-52
    err[got[fin] == want[fin]] = 0
    k = int(np.argmax(err))
    assert err[k] <= bound, f"{name}({CPLX[fin][k]}): {got[fin][k]}, NumPy {want[fin][k]}"


def test_complex128_angle_and_pow(results):
    np.testing.assert_array_max_ulp(results["complex angle"], np.angle(CPLX), 1)
    want = CPLX[:N] ** CPLX[N : 2 * N]
    fin = np.isfinite(want) & (np.abs(want) > 1e-250)
    np.testing.assert_allclose(results["complex pow"][fin], want[fin], rtol=1e-12)
