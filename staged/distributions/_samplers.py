"""torch's CPU samplers for the families it draws in C++ (``torch._standard_gamma``,
``torch._sample_dirichlet``, ``torch.poisson``, ``torch.binomial``), and the implicit
reparameterization gradients of Gamma and Dirichlet draws
(``torch._standard_gamma_grad``, ``torch._dirichlet_grad``).

Note [torch's C++ samplers]: torch draws these element by element, in the tensor's order,
from the same mt19937 stream as everything else, with float64 uniforms
(``uniform_real_distribution<double>``) and float64 normals
(``normal_distribution<double>``, which uses and leaves the generator's cached second
normal): Gamma by Marsaglia and Tsang's rejection method (with the ``alpha < 1`` boost
``U ** (1 / alpha)``), Poisson by Hoermann's transformed rejection (``rate >= 10``) or by
multiplying uniforms, Binomial by Hormann's BTRS (``n * min(p, 1 - p) >= 10``) or by
inversion with geometric waiting times (ATen/native/Distributions.h and .cpp). The
loops here are those algorithms, with the same arithmetic in the same precision (the
float32 steps of a float32 tensor in float32, glibc's ``lgamma`` and ``log1pf``), so
after the same seed the draws are torch's, bit for bit. They are Python loops: a few
microseconds a draw (about 20 for a float32 Binomial one), for the sizes distributions
are sampled at.

A loop's draws are data-dependent (rejection), so none of these can be recorded into a
compiled step: under ``staged.compile`` or ``vmap`` they raise.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math

import numpy as np

from .. import dtypes as dt
from ..autodiff.special import NUMPY
from ..autodiff.special import digamma as _digamma
from ..autograd.function import Function, once_differentiable
from ..eager.interceptor import current_interceptor
from ..eager.random import generator as _rng
from ..eager.tensor import Tensor

_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
_lgamma = _LIBM.lgamma  # glibc's: CPython's math.lgamma is its own, a few ulp apart
_lgamma.restype, _lgamma.argtypes = ctypes.c_double, [ctypes.c_double]
_log1pf = _LIBM.log1pf
_log1pf.restype, _log1pf.argtypes = ctypes.c_float, [ctypes.c_float]

F32 = np.float32
_THIRD = float(F32(1.0) / F32(3.0))  # torch's 1.0f / 3.0f
_SQUEEZE = float(F32(0.0331))  # 0.0331f


class _Stream:
    """The default generator's float64 uniforms and normals, one at a time (drawn ahead
    in blocks; ``close`` leaves the generator just after the uniforms used)."""

    def __init__(self, gen, expected: int):
        self.gen, self.block = gen, max(expected, 16)
        self.buf: list = []
        self.pos = 0
        self.state = None

    def uniform(self) -> float:
        if self.pos == len(self.buf):
            self.close()
            self.state = self.gen.bit_generator.state
            self.buf, self.pos = self.gen.uniform(self.block, np.float64).tolist(), 0
            self.block *= 2
        self.pos += 1
        return self.buf[self.pos - 1]

    def normal(self) -> float:
        """``normal_distribution<double>``: the cached sine if there is one, else a new
        Box-Muller pair (cosine returned, sine cached)."""
        cached = self.gen.normal_cache
        if cached is not None:
            self.gen.normal_cache = None
            return cached
        u1, u2 = self.uniform(), self.uniform()
        r = math.sqrt(-2.0 * math.log1p(-u2))
        theta = 2.0 * math.pi * u1
        self.gen.normal_cache = r * math.sin(theta)
        return r * math.cos(theta)

    def close(self) -> None:
        if self.state is not None:
            self.gen.bit_generator.state = self.state
            self.gen.uniform(self.pos, np.float64)
            self.state = None


def _gamma_one(alpha: float, s: _Stream, f32: bool) -> float:
    """torch's ``sample_gamma<scalar_t, double>``; ``f32``: scalar_t is float."""
    scale = 1.0
    if alpha < 1.0:
        if alpha == 0.0:
            return 0.0
        inv = float(F32(1.0) / F32(alpha)) if f32 else 1.0 / alpha
        scale *= math.pow(1 - s.uniform(), inv)
        alpha = float(F32(alpha) + F32(1.0)) if f32 else alpha + 1.0
    d = float(F32(alpha) - F32(_THIRD)) if f32 else alpha - _THIRD
    c = 1.0 / math.sqrt(9.0 * d) if d > 0 else math.inf if d == 0 else math.nan  # C's 1 / sqrt
    while True:
        x = s.normal()
        y = 1.0 + c * x
        while y <= 0:
            x = s.normal()
            y = 1.0 + c * x
        v = y * y * y
        u = 1 - s.uniform()
        xx = x * x
        if u < 1.0 - _SQUEEZE * xx * xx:
            return scale * d * v
        if math.log(u) < 0.5 * xx + d * (1.0 - v + math.log(v)):
            return scale * d * v


def _poisson_one(lam: float, s: _Stream) -> int:
    """torch's ``sample_poisson``."""
    if lam >= 10:
        slam, loglam = math.sqrt(lam), math.log(lam)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        while True:
            u = s.uniform() - 0.5
            v = s.uniform()
            us = 0.5 - abs(u)
            k = math.floor((2 * a / us + b) * u + lam + 0.43)
            if us >= 0.07 and v <= vr:
                return k
            if k < 0 or (us < 0.013 and v > us):
                continue
            if (math.log(v) + math.log(invalpha) - math.log(a / (us * us) + b)) <= (
                -lam + k * loglam - _lgamma(k + 1.0)
            ):
                return k
    if lam == 0:
        return 0
    enlam, x, prod = math.exp(-lam), 0, 1.0
    while True:
        prod *= s.uniform()
        if prod > enlam:
            x += 1
        else:
            return x


_TAIL = (
    0.0810614667953272,
    0.0413406959554092,
    0.0276779256849983,
    0.02079067210376509,
    0.0166446911898211,
    0.0138761288230707,
    0.0118967099458917,
    0.0104112652619720,
    0.00925546218271273,
    0.00833056343336287,
)


def _stirling_tail(k: float) -> float:
    if k <= 9:
        return _TAIL[int(k)]
    kp1sq = (k + 1) * (k + 1)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)


class _Scalar:
    """scalar_t arithmetic: float32 rounding after each operation, or float64's own."""

    def __init__(self, f32: bool):
        self.r = (lambda v: float(F32(v))) if f32 else float
        self.f32 = f32

    def log1p(self, v: float) -> float:
        return float(_log1pf(v)) if self.f32 else math.log1p(v)


def _btrs(count: float, prob: float, s: _Stream, t: _Scalar) -> float:
    """torch's ``btrs`` (count, prob: scalar_t values)."""
    r_ = t.r
    stddev = r_(math.sqrt(r_(r_(count * prob) * r_(1 - prob))))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = r_(count * prob) + 0.5
    v_r = 0.92 - 4.2 / b
    r = r_(prob / r_(1 - prob))
    alpha = (2.83 + 5.1 / b) * stddev
    m = math.floor(r_(r_(count + 1) * prob))
    while True:
        u = s.uniform() - 0.5
        v = s.uniform()
        us = 0.5 - abs(u)
        k = r_(math.floor((2 * a / us + b) * u + c))
        if k < 0 or k > count:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        v = math.log(v * alpha / (a / (us * us) + b))
        upperbound = (
            (m + 0.5) * math.log((m + 1) / (r * (count - m + 1)))
            + r_(count + 1) * math.log((count - m + 1) / r_(r_(count - k) + 1))
            + (k + 0.5) * math.log(r * r_(r_(count - k) + 1) / r_(k + 1))
            + _stirling_tail(m)
            + _stirling_tail(count - m)
            - _stirling_tail(k)
            - _stirling_tail(r_(count - k))
        )
        if v <= upperbound:
            return k


def _inversion(count: float, prob: float, s: _Stream, t: _Scalar) -> float:
    """torch's ``binomial_inversion``: geometric waiting times until they pass ``count``."""
    geom_sum, num_geom = 0.0, 0.0
    logprob = t.log1p(-prob)
    while True:
        geom = math.ceil(math.log(s.uniform()) / logprob)
        geom_sum += geom
        if geom_sum > count:
            return num_geom
        num_geom = t.r(num_geom + 1)


def _binomial_one(count: float, prob: float, s: _Stream, t: _Scalar) -> float:
    """torch's ``sample_binomial<scalar_t, double>``."""
    if count <= 0.0 or prob <= 0.0:
        return 0.0
    if prob >= 1.0:
        return count
    if prob <= 0.5:
        if t.r(count * prob) >= 10.0:
            return _btrs(count, prob, s, t)
        return _inversion(count, prob, s, t)
    if prob > 0.5:
        q = t.r(1.0 - prob)
        draw = _btrs if t.r(count * q) >= 10.0 else _inversion
        return t.r(count - draw(count, q, s, t))
    return math.nan


def _host(what: str, *tensors: Tensor) -> list:
    """The tensors' values (C order) for a host loop; a clear error where there are
    none to read (Note [torch's C++ samplers])."""
    if current_interceptor() is not None or _rng.on_draw:
        raise NotImplementedError(
            f"{what} draws by rejection on the host, element by element, and cannot be "
            "recorded inside staged.compile or vmap: draw the samples outside and pass them in"
        )
    return [np.ascontiguousarray(t.detach().numpy()) for t in tensors]


def _loop(what: str, draws_each: int, one, *tensors: Tensor, generator=None) -> np.ndarray:
    """``one(values..., stream)`` for each element, in order, from ``generator`` (None:
    the default one)."""
    arrays = _host(what, *tensors)
    flat = [a.ravel().tolist() for a in arrays]
    gen = _rng.default_generator if generator is None else generator
    s = _Stream(gen, draws_each * len(flat[0]))
    with gen.lock:  # the whole loop, as torch's kernel (Note [one draw at a time])
        try:
            out = [one(*vals, s) for vals in zip(*flat)]
        finally:
            s.close()
    return np.array(out, dtype=np.float64).reshape(arrays[0].shape)


def _as(values: np.ndarray, like: Tensor) -> Tensor:
    return Tensor._wrap(values.astype(like.dtype.np), False)


def _float_check(t: Tensor, kernel: str) -> None:
    if t.dtype not in (dt.float32, dt.float64):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{t.dtype.title}'")


def standard_gamma_draws(alpha: Tensor) -> Tensor:
    """``torch._standard_gamma(alpha)``'s values (no gradient): Gamma(alpha, 1) draws."""
    _float_check(alpha, "gamma_cpu")
    f32 = alpha.dtype is dt.float32
    out = _loop("Gamma sampling", 3, lambda a, s: _gamma_one(a, s, f32), alpha)
    return _as(_cmax(dt.finfo(alpha.dtype).tiny, out.astype(alpha.dtype.np)), alpha)


def dirichlet_draws(alpha: Tensor) -> Tensor:
    """``torch._sample_dirichlet(alpha)``'s values: float64 Gamma draws normalised over the
    last dim (summed as torch sums), clamped into (tiny, 1)."""
    _float_check(alpha, "dirichlet")
    g = _loop("Dirichlet sampling", 3, lambda a, s: _gamma_one(a, s, False), alpha)
    g = _cmax(np.finfo(np.float64).tiny, g)
    total = _torch_sum(g.reshape(-1, g.shape[-1])).reshape(*g.shape[:-1], 1)
    d = alpha.dtype.np
    x = _cmax(np.finfo(d).tiny, (g / total).astype(d))
    top = np.nextafter(d.type(1), d.type(0))
    return _as(np.where(x < top, x, top), alpha)  # std::min(top, x)


def _cmax(low, x: np.ndarray) -> np.ndarray:
    """C++'s ``std::max(low, x)``: ``low`` where ``x`` is NaN."""
    return np.where(low < x, x, low)


def _torch_sum(g: np.ndarray) -> np.ndarray:
    """The row sums of a float64 matrix as torch's CPU ``sum(-1)`` adds them (AVX2 kernel,
    ATen/native/cpu/SumKernel.cpp): four-lane vectors accumulated in four interleaved
    chains (``multi_row_sum``, a cascade past 16 groups), the scalar tail first, then
    the lanes."""
    rows, k = g.shape
    final = np.zeros(rows)
    if k < 4:
        for i in range(k):
            final = final + g[:, i]
        return final
    nvec = k // 4
    vecs = g[:, : nvec * 4].reshape(rows, nvec, 4)
    groups = nvec // 4
    acc = _multi_row_sum(vecs[:, : groups * 4].reshape(rows, groups, 4, 4))
    p0 = acc[:, 0]
    for i in range(groups * 4, nvec):
        p0 = p0 + vecs[:, i]
    for j in range(1, 4):
        p0 = p0 + acc[:, j]
    for i in range(nvec * 4, k):
        final = final + g[:, i]
    for lane in range(4):
        final = final + p0[:, lane]
    return final


def _multi_row_sum(groups: np.ndarray) -> np.ndarray:
    """torch's ``multi_row_sum`` over ``groups`` (rows, n, 4 vectors, 4 lanes): partial sums
    carried up four levels every ``2 ** level_power`` groups."""
    rows, n = groups.shape[:2]
    power = max(4, (n - 1).bit_length() // 4 if n > 1 else 0)
    step, mask = 1 << power, (1 << power) - 1
    acc = [np.zeros((rows, 4, 4)) for _ in range(4)]
    i = 0
    while i + step <= n:
        for _ in range(step):
            acc[0] = acc[0] + groups[:, i]
            i += 1
        for j in range(1, 4):
            acc[j], acc[j - 1] = acc[j] + acc[j - 1], np.zeros((rows, 4, 4))
            if i & (mask << (j * power)):
                break
    for rest in range(i, n):
        acc[0] = acc[0] + groups[:, rest]
    for j in range(1, 4):
        acc[0] = acc[0] + acc[j]
    return acc[0]


def poisson(input: Tensor, generator=None) -> Tensor:
    """``torch.poisson(input)``: one Poisson draw per element (its rate), in ``input``'s
    dtype."""
    _float_check(input, "poisson_cpu")
    (values,) = _host("Poisson sampling", input)
    if not (values >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return _as(_loop("Poisson sampling", 2, _poisson_one, input, generator=generator), input)


def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """``torch.binomial(count, prob)``: one Binomial draw per element (shapes equal)."""
    _float_check(count, "binomial_cpu")
    t = _Scalar(count.dtype is dt.float32)
    one = lambda n, p, s: _binomial_one(n, p, s, t)  # noqa: E731
    return _as(_loop("Binomial sampling", 2, one, count, prob, generator=generator), count)


# --- implicit reparameterization gradients --------------------------------------------------
def _f(v: float) -> float:
    return float(F32(v))  # a float literal of torch's kernels (0.8f ...)


def standard_gamma_grad(alpha: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``torch._standard_gamma_grad(alpha, x)``: d x / d alpha of a Gamma(alpha, 1) draw
    ``x`` at fixed CDF, by torch's three approximations (a series for x < 0.8, Rice's
    saddle point for alpha > 8, a bivariate rational fit elsewhere), in float64."""
    a = alpha.astype(np.float64)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        # x < 0.8: the Taylor series of the regularized incomplete gamma function
        numer, denom = np.ones_like(x64), a.copy()
        series1, series2 = numer / denom, numer / (denom * denom)
        for i in range(1, 6):
            numer = numer * (-x64 / i)
            denom = denom + 1
            series1 = series1 + numer / denom
            series2 = series2 + numer / (denom * denom)
        pow_x_alpha = np.power(x64, a)
        gamma_pdf = np.power(x64, a - 1) * np.exp(-x64)
        gamma_cdf = pow_x_alpha * series1
        gamma_cdf_alpha = (np.log(x64) - _digamma(NUMPY, a)) * gamma_cdf - pow_x_alpha * series2
        small = -gamma_cdf_alpha / gamma_pdf
        small = np.where(np.isnan(small), 0.0, small)
        # alpha > 8, x within 10% of alpha
        near = (
            (1 + 24 * a * (1 + 12 * a))
            * (
                1440 * (a * a)
                + 6 * x64 * (53 - 120 * x64)
                - 65 * x64 * x64 / a
                + a * (107 + 3600 * x64)
            )
            / (1244160 * (a * a) * (a * a))
        )
        # alpha > 8 elsewhere
        den = np.sqrt(8 * a)
        term2 = den / (a - x64)
        term3 = np.power(x64 - a - a * np.log(x64 / a), -1.5)
        term23 = np.where(x64 < a, term2 - term3, term2 + term3)
        term1 = np.log(x64 / a) * term23 - np.sqrt(2 / a) * (a + x64) / ((a - x64) * (a - x64))
        stirling = 1 + 1 / (12 * a) * (1 + 1 / (24 * a))
        far = -stirling * (x64 * term1) / den
        # the rational fit in u = log(x / alpha), v = log(alpha)
        u, v = np.log(x64 / a), np.log(a)
        cv = [c0 + u * (c1 + u * c2) for c0, c1, c2 in zip(*_GAMMA_UV)]
        p = cv[0] + v * (cv[1] + v * (cv[2] + v * cv[3]))
        q = cv[4] + v * (cv[5] + v * (cv[6] + v * cv[7]))
        rational = np.exp(p / q)
    large = np.where((_f(0.9) * a <= x64) & (x64 <= _f(1.1) * a), near, far)
    out = np.where(x64 < _f(0.8), small, np.where(a > _f(8.0), large, rational))
    return out.astype(alpha.dtype)


_GAMMA_UV = (
    (0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084),
    (0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623),
    (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367, -1.5247877e-07),
)  # fmt: skip


def _psi(x):
    """torch's ``digamma_one``: computed in float64, returned in ``x``'s dtype."""
    return _digamma(NUMPY, x.astype(np.float64)).astype(x.dtype)


def _beta_grad_alpha_small(x, alpha, beta):
    """Near x = 0: torch's Taylor series of the Beta CDF's derivative in alpha."""
    factor = _psi(alpha) - _psi(alpha + beta) - np.log(x)
    numer = np.ones_like(x)
    series = numer / alpha * (factor + 1 / alpha)
    for i in range(1, 11):
        numer = numer * ((i - beta) * x / i)
        denom = alpha + i
        series = series + numer / denom * (factor + 1 / denom)
    result = x * np.power(1 - x, -beta) * series
    return np.where(np.isnan(result), 0.0, result)


def _beta_grad_beta_small(x, alpha, beta):
    """Near x = 0: torch's Taylor series of the Beta CDF's derivative in beta."""
    factor = _psi(alpha + beta) - _psi(beta)
    numer, betas, dbetas = np.ones_like(x), np.ones_like(x), np.zeros_like(x)
    series = factor / alpha
    for i in range(1, 9):
        numer = numer * (-x / i)
        dbetas = dbetas * (beta - i) + betas
        betas = betas * (beta - i)
        series = series + numer / (alpha + i) * (dbetas + factor * betas)
    result = -np.power(1 - x, 1 - beta) * series
    return np.where(np.isnan(result), 0.0, result)


def _beta_grad_alpha_mid(x, alpha, beta):
    """alpha and beta both large: torch's Rice saddle-point expansion."""
    total = alpha + beta
    mean = alpha / total
    std = np.sqrt(alpha * beta / (total + 1)) / total
    b2 = beta * beta
    poly = 47 * x * b2 * b2 + alpha * (
        (43 + 20 * (16 + 27 * beta) * x) * b2 * beta
        + alpha * (
            3 * (59 + 180 * beta - 90 * x) * b2
            + alpha * ((453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (8 * (1 - x) * (135 * beta - 11)))
        )
    )  # fmt: skip
    prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
    prefactor_den = 12960 * alpha * alpha * alpha * beta * beta * (1 + 12 * total)
    at_mean = prefactor_num / (1 - x) * poly / prefactor_den
    prefactor = -x / np.sqrt(2 * alpha * beta / total)
    stirling = (
        (1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha))
        * (1 + 1 / (12 * beta) + 1 / (288 * beta * beta))
        / (1 + 1 / (12 * total) + 1 / (288 * total * total))
    )
    term1_num = 2 * (alpha * alpha) * (x - 1) + alpha * beta * (x - 1) - x * (beta * beta)
    axbx = alpha * (x - 1) + beta * x
    term1_den = np.sqrt(2 * alpha / beta) * np.power(total, 1.5) * axbx * axbx
    term1 = term1_num / term1_den
    term2 = 0.5 * np.log(alpha / (total * x))
    term3 = np.sqrt(8 * alpha * beta / total) / (beta * x + alpha * (x - 1))
    term4_base = beta * np.log(beta / (total * (1 - x))) + alpha * np.log(alpha / (total * x))
    term4 = np.power(term4_base, -1.5)
    term1234 = term1 + term2 * (term3 + np.where(x < mean, term4, -term4))
    away = stirling * prefactor * term1234
    return np.where((mean - 0.1 * std <= x) & (x <= mean + 0.1 * std), at_mean, away)


def _dirichlet_rational(x, alpha, total):
    """torch's rational correction to the analytic approximation, in (log x, log(alpha /
    x), log(total x / alpha))."""
    beta = total - alpha
    u = np.log(x)
    a = np.log(alpha) - u
    b = np.log(total) - a
    p, q = np.zeros_like(x), np.zeros_like(x)
    for i, pu in enumerate((1.0, u, u * u)):
        for j, pa in enumerate((1.0, a, a * a)):
            c0, c1 = _DIRICHLET_C[0][i][j], _DIRICHLET_C[1][i][j]
            p = p + pu * pa * (c0[0] + b * (c0[1] + b * (c0[2] + b * c0[3])))
            q = q + pu * pa * (c1[0] + b * (c1[1] + b * (c1[2] + b * c1[3])))
    approx = x * (_digamma(NUMPY, total) - _digamma(NUMPY, alpha)) / beta
    return p / q * approx


def dirichlet_grad(x: np.ndarray, alpha: np.ndarray, total: np.ndarray) -> np.ndarray:
    """``torch._dirichlet_grad(x, alpha, total)``: ``-(d/d alpha) cdf(x; alpha, total -
    alpha) / pdf / (1 - x)`` for a Beta(alpha, total - alpha) draw ``x``, by torch's four
    approximations; as in torch, the branch choice and the two series near 0 and 1 run
    in the operands' dtype, the other two in float64."""
    beta = total - alpha
    boundary = total * x * (1 - x)
    x64, a, t = (v.astype(np.float64) for v in (x, alpha, total))
    with np.errstate(all="ignore"):
        near0 = _beta_grad_alpha_small(x, alpha, beta)
        near1 = -_beta_grad_beta_small(1 - x, beta, alpha)
        mid = _beta_grad_alpha_mid(x64, a, t - a)
        rational = _dirichlet_rational(x64, a, t)
    out = np.where(
        (x <= 0.5) & (boundary < 2.5),
        near0,
        np.where(
            (x >= 0.5) & (boundary < 0.75),
            near1,
            np.where((alpha > 6) & (beta > 6), mid, rational),
        ),
    )
    return out.astype(x.dtype)


_DIRICHLET_C = (
    (
        ((1.003668233, -0.01061107488, -0.0657888334, 0.01201642863),
         (0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033),
         (-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013)),
        ((0.221950385, -0.3187676331, 0.01799915743, 0.01074823814),
         (-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057),
         (0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05)),
        ((-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565),
         (0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181),
         (0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05)),
    ),
    (
        ((1, -0.02924021934, -0.04438342661, 0.007285809825),
         (0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521),
         (-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149)),
        ((0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273),
         (0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956),
         (-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05)),
        ((0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05),
         (0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05),
         (-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06)),
    ),
)  # fmt: skip


class _StandardGamma(Function):
    """``torch._standard_gamma(alpha)``: torch's draws, differentiable in ``alpha`` by
    implicit reparameterization (``grad * _standard_gamma_grad(alpha, x)``)."""

    @staticmethod
    def forward(ctx, alpha):
        x = standard_gamma_draws(alpha)
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        return grad * _StandardGammaGrad.apply(alpha, x)


class _StandardGammaGrad(Function):
    """``torch._standard_gamma_grad(alpha, x)``, which, as torch's, has no derivative."""

    @staticmethod
    def forward(ctx, alpha, x):
        return _as(standard_gamma_grad(alpha.detach().numpy(), x.detach().numpy()), alpha)

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("the derivative for '_standard_gamma_grad' is not implemented.")


class _Dirichlet(Function):
    """torch's ``_Dirichlet``: ``_sample_dirichlet`` draws, differentiable in the
    concentration through ``_dirichlet_grad`` (not twice, as torch's)."""

    @staticmethod
    def forward(ctx, concentration):
        x = dirichlet_draws(concentration)
        ctx.save_for_backward(x, concentration)
        return x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        x, concentration = ctx.saved_tensors
        total = concentration.sum(-1, True).expand_as(concentration)
        g = _as(dirichlet_grad(*(t.detach().numpy() for t in (x, concentration, total))), x)
        return g * (grad_output - (x * grad_output).sum(-1, True))
