"""torch.special's orthogonal polynomials (Chebyshev T, U, V, W and their shifted forms,
Hermite H and He, Laguerre L, Legendre P), written once for NumPy and MLIR (ONNX refuses
them: below).

Each is torch 2.13's CPU kernel (``aten/src/ATen/native/Math.h``,
``chebyshev_polynomial_t_forward`` ...) step for step, in the operands' dtype, so float32
and float64 results are torch's to the bit where both run the recurrence: n is truncated
to an integer (NaN, +-inf and values past int64's range count as negative, as the x86
conversion torch's cast compiles to gives); n < 0 gives 0; the closed forms at x = +-1
(x = 0, 1 for the shifted ones); the trigonometric forms for large n on (-1, 1) (T: cos(n
acos x) past n = 6; U, V, W past 8; shifted T, U, V past 6, W past 4); Hermite's NaN past n
= 128 (float32) or 512 (float64); otherwise the three-term recurrence, n - 1 steps, which
stops once its value is NaN. Its steps a q - k p are torch's fma(a, q, -(k p)) (GCC
contracts them), so its float32 and float64 values are torch's to the bit (on NumPy the fma
is ``autodiff.fma``'s, exact), but for float32's trigonometric forms: our acos (float64 rounded once) is correctly
rounded where glibc's acosf, torch's, is an ulp off at times, which cos(n acos x)
multiplies (up to ~20 n eps apart, both as near the float64 value; sin and cos are glibc's
to the bit). Where x is NaN and n >= 2, torch's U, V, W, shifted, He, L and P kernels
return an uninitialised variable (the loop's NaN check stops it before its first step):
we return NaN there.
"""

from __future__ import annotations

import inspect

import numpy as np

from .fma import fma32, fma64_total
from .special import _NumPy

_INT64 = 2.0**63  # n at or past this (or NaN) converts to int64's least value: n < 0


class _NumPyIn(_NumPy):
    """``special``'s NumPy arithmetic in the operands' own dtype (torch's kernels compute
    float32 in float32), with acos and the stepped loop."""

    _CMP = {**_NumPy._CMP, "une": np.not_equal}

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.itemsize = self.dtype.itemsize

    def c(self, v):
        return self.dtype.type(v)

    def _libm(self, fn, a):
        """float32 through float64, rounded once: glibc's correctly rounded acosf, sinf,
        cosf, as torch's scalar kernels call (NumPy's float32 SIMD ones are an ulp off)."""
        if self.itemsize == 4:
            return fn(np.asarray(a, np.float64)).astype(np.float32)
        return fn(a)

    def acos(self, a):
        return self._libm(np.arccos, a)

    def sin(self, a):
        return self._libm(np.sin, a)

    def cos(self, a):
        return self._libm(np.cos, a)

    def fma(self, a, b, c):
        """a b + c rounded once (torch's kernels are compiled with contraction)."""
        return fma32(a, b, c) if self.itemsize == 4 else fma64_total(a, b, c)

    def loop(self, count, state, body, *ins):
        shape = np.broadcast_shapes(count.shape, *(np.shape(v) for v in (*state, *ins)))
        flat = [np.array(np.broadcast_to(s, shape), self.dtype).reshape(-1) for s in state]
        ins = [np.broadcast_to(v, shape).reshape(-1) for v in ins]
        cnt = np.broadcast_to(count, shape).reshape(-1)
        idx = np.flatnonzero(cnt >= 1)
        step = 1
        while idx.size:
            k = lambda a, b, step=step: self.dtype.type(a * step + b)  # noqa: E731
            new = body(k, [f[idx] for f in flat], *(v[idx] for v in ins))
            for f, v in zip(flat, new):
                f[idx] = v
            step += 1
            idx = idx[(cnt[idx] >= step) & ~np.isnan(new[-1])]
        return [f.reshape(shape) for f in flat]


def numpy_impl(fn):
    """``fn(m, x, n)`` as a primitive's NumPy impl, computed in the operands' dtype
    (16-bit floats, which torch's CPU kernels refuse, in float32 and rounded once)."""

    def impl(x, n):
        dtype = np.result_type(x, n)
        work = np.float32 if dtype.itemsize < 4 else dtype  # 16-bit floats: in float32
        x, n = np.asarray(x, work), np.asarray(n, work)
        with np.errstate(all="ignore"):  # each branch is computed everywhere, then selected
            return np.asarray(fn(_NumPyIn(work), x, n), dtype)

    sig = inspect.signature(fn)
    impl.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])
    impl.__name__ = fn.__name__
    return impl


# --- common parts --------------------------------------------------------------------------
def _whole(m, n):
    """n as torch's static_cast<int64_t>: truncated; -1 where NaN or outside int64."""
    inside = m.both(m.cmp("ole", m.c(-_INT64), n), m.cmp("olt", n, m.c(_INT64)))
    return m.sel(inside, m.trunc(n), m.c(-1.0))


def _even(m, n):
    return m.cmp("oeq", m.mul(m.trunc(m.mul(n, m.c(0.5))), m.c(2.0)), n)


def _pm(m, even, v):
    """v where n is even, -v where odd."""
    return m.sel(even, v, m.neg(v))


def _finish(m, n, q1, r, special):
    """The result: 0 for n < 0, then ``special`` ([(cond, value)], first wins), then 1 at
    n = 0, ``q1`` at n = 1, the recurrence's ``r`` beyond."""
    out = m.sel(m.cmp("oeq", n, m.c(1.0)), q1, r)
    out = m.sel(m.cmp("oeq", n, m.c(0.0)), m.c(1.0), out)
    for cond, value in reversed(special):
        out = m.sel(cond, value, out)
    return m.sel(m.cmp("olt", n, m.c(0.0)), m.c(0.0), out)


def _steps(m, n, special):
    """The recurrence's step count: n - 1 where no special case (nor n <= 1) applies."""
    taken = m.cmp("olt", n, m.c(2.0))
    for cond, _ in special:
        taken = m.either(taken, cond)
    return m.sel(taken, m.c(0.0), m.sub(n, m.c(1.0)))


def _chebyshev(m, x, n, kind, shifted):
    """T, U, V, W (``kind``), of x or of 2x - 1 (``shifted``), as torch's kernels."""
    n = _whole(m, n)
    one = m.c(1.0)
    y = m.sub(m.add(x, x), one) if shifted else x
    even = _even(m, n)
    n1, n21 = m.add(n, one), m.add(m.add(n, n), one)  # n + 1, 2n + 1
    # torch's n + n + 1 wraps around in int64 from n = 2^62
    n21 = m.sel(m.cmp("ole", m.c(2.0**62), n), m.sub(n21, m.c(2.0**64)), n21)
    # the closed forms at the ends: (x at the upper end, at the lower end)
    if shifted:
        top, bottom = m.cmp("oeq", x, one), m.cmp("oeq", x, m.c(0.0))
    else:
        at_one = m.cmp("oeq", m.abs(x), one)
        pos = m.cmp("ogt", x, m.c(0.0))
        top, bottom = m.both(at_one, pos), at_one  # bottom applies where top does not
    upper = {"t": one, "u": n1, "v": one, "w": n21}[kind]
    lower = {"t": _pm(m, even, one), "u": _pm(m, even, n1), "v": _pm(m, even, n21)}
    lower["w"] = _pm(m, even, one)
    special = [(top, upper), (bottom, lower[kind])]
    # the trigonometric forms on (-1, 1) for large n
    big = {("t", False): 6, ("u", False): 8, ("v", False): 8, ("w", False): 8}
    big.update({("t", True): 6, ("u", True): 6, ("v", True): 6, ("w", True): 4})
    trig = m.both(m.cmp("ogt", n, m.c(float(big[kind, shifted]))), m.cmp("olt", m.abs(y), one))
    theta = m.acos(y)
    half = m.div(theta, m.c(2.0))
    nh = m.add(n, m.c(0.5))
    if kind == "t":
        form = m.cos(m.mul(n, theta))
    elif kind == "u":
        s = m.sin(theta)
        form = m.sel(
            m.cmp("une", s, m.c(0.0)),
            m.div(m.sin(m.mul(n1, theta)), s),
            m.div(m.mul(n1, m.cos(m.mul(n1, theta))), y),
        )
    elif kind == "v":
        form = m.sel(
            m.cmp("une", m.sin(half), one),
            m.div(m.cos(m.mul(nh, theta)), m.cos(half)),
            _pm(m, even, n21),
        )
    else:
        edge = _pm(m, even, one)
        if not shifted:
            edge = m.sel(m.cmp("ogt", x, m.c(0.0)), n21, edge)
        form = m.sel(
            m.cmp("une", m.cos(half), one),
            m.div(m.sin(m.mul(nh, theta)), m.sin(half)),
            edge,
        )
    special.append((trig, form))
    two_y = m.add(y, y)
    q1 = {"t": y, "u": two_y, "v": m.sub(two_y, one), "w": m.add(two_y, one)}[kind]
    _, r = m.loop(
        _steps(m, n, special),
        (one, q1),
        lambda k, s, two_y: (s[1], m.fma(two_y, s[1], m.neg(s[0]))),
        two_y,
    )
    return _finish(m, n, q1, r, special)


def chebyshev_polynomial_t(m, x, n):
    """The Chebyshev polynomial of the first kind T_n(x)."""
    return _chebyshev(m, x, n, "t", False)


def chebyshev_polynomial_u(m, x, n):
    """The Chebyshev polynomial of the second kind U_n(x)."""
    return _chebyshev(m, x, n, "u", False)


def chebyshev_polynomial_v(m, x, n):
    """The Chebyshev polynomial of the third kind V_n(x)."""
    return _chebyshev(m, x, n, "v", False)


def chebyshev_polynomial_w(m, x, n):
    """The Chebyshev polynomial of the fourth kind W_n(x)."""
    return _chebyshev(m, x, n, "w", False)


def shifted_chebyshev_polynomial_t(m, x, n):
    """T*_n(x) = T_n(2x - 1)."""
    return _chebyshev(m, x, n, "t", True)


def shifted_chebyshev_polynomial_u(m, x, n):
    """U*_n(x) = U_n(2x - 1)."""
    return _chebyshev(m, x, n, "u", True)


def shifted_chebyshev_polynomial_v(m, x, n):
    """V*_n(x) = V_n(2x - 1)."""
    return _chebyshev(m, x, n, "v", True)


def shifted_chebyshev_polynomial_w(m, x, n):
    """W*_n(x) = W_n(2x - 1)."""
    return _chebyshev(m, x, n, "w", True)


def _hermite_limit(m) -> float:
    """torch's getHermitianLimit: NaN past n = 128 in float32, 512 in float64."""
    return 128.0 if m.itemsize == 4 else 512.0


def hermite_polynomial_h(m, x, n):
    """The physicists' Hermite polynomial H_n(x): H_k+1 = 2x H_k - 2k H_k-1."""
    n = _whole(m, n)
    two_x = m.add(x, x)
    special = [(m.cmp("ogt", n, m.c(_hermite_limit(m))), m.c(np.nan))]
    _, r = m.loop(
        _steps(m, n, special),
        (m.c(1.0), two_x),
        lambda k, s, two_x: (s[1], m.fma(two_x, s[1], m.neg(m.mul(k(2, 0), s[0])))),
        two_x,
    )
    return _finish(m, n, two_x, r, special)


def hermite_polynomial_he(m, x, n):
    """The probabilists' Hermite polynomial He_n(x): He_k+1 = x He_k - k He_k-1."""
    n = _whole(m, n)
    special = [(m.cmp("ogt", n, m.c(_hermite_limit(m))), m.c(np.nan))]
    _, r = m.loop(
        _steps(m, n, special),
        (m.c(1.0), x),
        lambda k, s, x: (s[1], m.fma(x, s[1], m.neg(m.mul(k(1, 0), s[0])))),
        x,
    )
    return _finish(m, n, x, r, special)


def laguerre_polynomial_l(m, x, n):
    """The Laguerre polynomial L_n(x): 1 at x = 0."""
    n = _whole(m, n)
    one = m.c(1.0)
    q1 = m.sub(one, x)
    special = [(m.cmp("oeq", m.abs(x), m.c(0.0)), one)]

    def step(k, s, q1):
        r = m.fma(m.add(k(2, 0), q1), s[1], m.neg(m.mul(k(1, 0), s[0])))
        return s[1], m.div(r, k(1, 1))

    _, r = m.loop(_steps(m, n, special), (one, q1), step, q1)
    return _finish(m, n, q1, r, special)


def legendre_polynomial_p(m, x, n):
    """The Legendre polynomial P_n(x): +-1 at x = +-1."""
    n = _whole(m, n)
    one = m.c(1.0)
    at_one = m.cmp("oeq", m.abs(x), one)
    special = [(at_one, m.sel(m.cmp("ogt", x, m.c(0.0)), one, _pm(m, _even(m, n), one)))]

    def step(k, s, x):
        r = m.fma(m.mul(k(2, 1), x), s[1], m.neg(m.mul(k(1, 0), s[0])))
        return s[1], m.div(r, k(1, 1))

    _, r = m.loop(_steps(m, n, special), (one, x), step, x)
    return _finish(m, n, x, r, special)


POLYNOMIALS = (
    *("chebyshev_polynomial_t", "chebyshev_polynomial_u"),
    *("chebyshev_polynomial_v", "chebyshev_polynomial_w"),
    *("shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u"),
    *("shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w"),
    *("hermite_polynomial_h", "hermite_polynomial_he"),
    *("laguerre_polynomial_l", "legendre_polynomial_p"),
)
