"""float64 / complex128 math written with arithmetic (``staged/lower/mlir/libm.py``), compiled
for llvm-cpu and compared with NumPy: ulps for the real functions (dense random samples
over several scales plus edge cases: signed zeros, infinities, NaN, multiples of pi/2,
tiny values), exact equality for fmod and remainder, relative error for complex128.

IREE's CPU code runs with subnormals flushed to zero (in every op, not only these), so
samples whose operands or expected results are subnormal are left out.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from staged import dtypes as dt
from staged.autodiff import REGISTRY, Aval
from staged.capture.ir import Graph, Output
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


EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1e-300, -1e-300,
                  2.0 ** -27, 2.0 ** -26, 1e-8, 0.4375, 0.6875, 1.1875, 2.4375, 0.975, -0.975])
PI_MULTIPLES = np.array([k * np.pi / 4 for k in range(-40, 41)] + [1e5, -1e5, 1e5 * np.pi / 2])
LARGE = np.exp(rng.uniform(np.log(1e5), np.log(2.0 ** 52), 2000))  # up to where n fits
TRIG = np.concatenate([EDGES, PI_MULTIPLES, np.nextafter(PI_MULTIPLES, np.inf),
                       np.nextafter(PI_MULTIPLES, -np.inf), _scales(N, 1e5), LARGE, -LARGE])
UNIT = np.concatenate([EDGES, np.linspace(-1, 1, N + 1), 1 - np.exp(rng.uniform(-40, 0, N)),
                       [1.5, -1.5, np.nextafter(1.0, 0), np.nextafter(0.5, 0)]])
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e308, -1e308, 2.5, -3.0,
                    TINY, -TINY])
SY, SX = (a.ravel() for a in np.meshgrid(SPECIAL, SPECIAL))
PAIR_Y = np.concatenate([SY, _scales(N, 1e30), rng.normal(size=N) * np.exp(rng.uniform(
    -700, 700, N))])
PAIR_X = np.concatenate([SX, _scales(N, 1e30), rng.normal(size=N) * np.exp(rng.uniform(
    -700, 700, N))])

# (primitive, NumPy reference, inputs, max ulp); the measured maxima, for the record
REAL = [
    ("sin", np.sin, (TRIG,), 1), ("cos", np.cos, (TRIG,), 1), ("tan", np.tan, (TRIG,), 2),
    ("atan", np.arctan, (_scales(N, 1e30),), 1), ("atan2", np.arctan2, (PAIR_Y, PAIR_X), 1),
    ("asin", np.arcsin, (UNIT,), 1), ("acos", np.arccos, (UNIT,), 1),
    ("sinh", np.sinh, (np.concatenate([EDGES, _scales(N, 710)]),), 2),
    ("expm1", np.expm1, (np.concatenate([EDGES, _scales(N, 700)]),), 2),
    ("log1p", np.log1p, (np.concatenate([EDGES, np.exp(_scales(N, 40)) - 1]),), 1),
    ("tanh", np.tanh, (np.concatenate([EDGES, _scales(N, 30)]),), 4),
]


def _remainder(a, b):
    with np.errstate(all="ignore"):
        m = np.fmod(a, b)
    return np.where((m != 0) & ((m < 0) != (b < 0)), m + b, m)


EXACT = [("fmod", np.fmod), ("remainder", _remainder)]
C = rng.normal(size=N) + 1j * rng.normal(size=N)
CPLX = np.concatenate([C * np.exp(rng.uniform(-8, 3, N)), rng.uniform(-20, 20, N)
                       + 1j * rng.uniform(-20, 20, N), [0, 1, -1, 1j, -1j, -2 + 0j, 0.5 + 0j]])
# (primitive, NumPy reference, max relative error in units of 2**-52)
COMPLEX = [("exp", np.exp, 2), ("log", np.log, 3), ("sqrt", np.sqrt, 2),
           ("rsqrt", lambda z: 1 / np.sqrt(z), 3), ("tanh", np.tanh, 6), ("sin", np.sin, 3),
           ("cos", np.cos, 3), ("tan", np.tan, 6), ("sinh", np.sinh, 3), ("cosh", np.cosh, 3),
           ("exp2", np.exp2, 2), ("log2", np.log2, 4), ("log10", np.log10, 4)]


def _graph(cases):
    g, inputs = Graph(), []
    for name, xs in cases:
        prim = REGISTRY[name]
        vals = [g.add_input(Aval(x.shape, dt.from_numpy_dtype(x.dtype)), "arg", "") for x in xs]
        inputs += xs
        out = g.add_op(prim, vals, {}, prim.abstract_eval(*(v.aval for v in vals)),
                       "test_libm.py:1")
        g.outputs.append(Output(out, "out", name))
    return g, inputs


@pytest.fixture(scope="module")
def results():
    cases = [(f"real {n}", n, xs) for n, _, xs, _ in REAL]
    cases += [(f"exact {n}", n, (PAIR_X, PAIR_Y)) for n, _ in EXACT]
    cases += [(f"complex {n}", n, (CPLX,)) for n, _, _ in COMPLEX]
    cases += [("complex angle", "angle", (CPLX,)),
              ("complex pow", "pow", (CPLX[:N], CPLX[N:2 * N]))]
    g, inputs = _graph([(n, xs) for _, n, xs in cases])
    m = device().load(compile_mlir(to_mlir(g)))
    outs = m.invoke("main", inputs, [o.value.aval.dtype.np for o in g.outputs])
    return {key: to_host(o) for (key, _, _), o in zip(cases, outs)}


def _subnormal(*arrays):
    return np.any([(a != 0) & (np.abs(a) < TINY) for a in arrays], axis=0)


def ulps(got, want):
    """|got - want| in units of want's ulp; NaN == NaN, and a zero's sign must match."""
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    same &= ~((got == 0) & (want == 0) & (np.signbit(got) != np.signbit(want)))
    with np.errstate(all="ignore"):
        u = np.abs(got - want) / np.spacing(np.maximum(np.abs(want), TINY))
    return np.where(same, 0.0, np.where(np.isfinite(u), u, np.inf))


@pytest.mark.parametrize("name,ref,xs,bound", REAL, ids=[r[0] for r in REAL])
def test_float64_within_ulps(name, ref, xs, bound, results):
    got = results[f"real {name}"]
    with np.errstate(all="ignore"):
        want = ref(*xs)
    u = ulps(got, want)
    u[_subnormal(*xs, want)] = 0
    k = int(np.argmax(u))
    assert u[k] <= bound, f"{name}{tuple(float(x[k]) for x in xs)}: {got[k]!r}, NumPy " \
                          f"{want[k]!r} ({u[k]} ulp)"


def test_trig_beyond_2_52_is_nan():
    x = np.array([2.0 ** 52, -(2.0 ** 60), 1e300])
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
        err = np.abs(got[fin] - want[fin]) / np.abs(want[fin]) / 2.0 ** -52
    err[got[fin] == want[fin]] = 0
    k = int(np.argmax(err))
    assert err[k] <= bound, f"{name}({CPLX[fin][k]}): {got[fin][k]}, NumPy {want[fin][k]}"


def test_complex128_angle_and_pow(results):
    np.testing.assert_array_max_ulp(results["complex angle"], np.angle(CPLX), 1)
    want = CPLX[:N] ** CPLX[N:2 * N]
    fin = np.isfinite(want) & (np.abs(want) > 1e-250)
    np.testing.assert_allclose(results["complex pow"][fin], want[fin], rtol=1e-12)
