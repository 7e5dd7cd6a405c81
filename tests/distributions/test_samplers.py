"""The samplers torch runs in C++ (``_standard_gamma``, ``_sample_dirichlet``, ``poisson``,
``binomial``), rebuilt in ``staged/distributions/_samplers.py``: the same draws bit for bit
after the same seed (and the generator left where torch leaves it), the implicit
reparameterization gradients at given points, the moments of the draws, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
import staged.distributions as D
from staged.distributions import _samplers as S
from tests.checks import message

ALPHAS = [0.0, 1e-3, 0.05, 0.3, 0.9, 1.0, 1.5, 3.0, 10.0, 100.0, 1e4]
RATES = [0.0, 0.5, 3.0, 9.9, 10.0, 50.0, 1000.0, 1e5]
COUNTS = [0.0, 1.0, 5.0, 20.0, 100.0, 1000.0, 37.0]
PROBS = [0.0, 1e-3, 0.1, 0.3, 0.5, 0.7, 0.95, 1.0]

KINDS = {
    # name: (staged's sampler, torch's, the arguments as lists)
    "gamma": (S.standard_gamma_draws, torch._standard_gamma, [ALPHAS * 20]),
    "dirichlet": (
        S.dirichlet_draws,
        torch._sample_dirichlet,
        [np.random.RandomState(0).uniform(0.05, 5, (4, 6, 7)).tolist()],
    ),
    "dirichlet wide": (  # torch sums rows of 4-lane vectors, its cascade past 64 vectors
        S.dirichlet_draws,
        torch._sample_dirichlet,
        [np.random.RandomState(1).uniform(0.5, 5, (2, 300)).tolist()],
    ),
    "gamma outside the support": (  # NaN concentrations give torch's std::max(tiny, NaN)
        S.standard_gamma_draws,
        torch._standard_gamma,
        [[-0.5, float("nan"), -2 / 3, 2.0, float("inf")] * 5],
    ),
    "dirichlet outside the support": (
        S.dirichlet_draws,
        torch._sample_dirichlet,
        [[[-0.5, 1.0], [float("nan"), 1.0], [1e-300, 1e-300]]],
    ),
    "poisson": (S.poisson, torch.poisson, [RATES * 20]),
    "binomial": (S.binomial, torch.binomial, [COUNTS * 40, PROBS * 35]),
}


@pytest.mark.parametrize("seed", [0, 5, 2**32 + 7])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_draws_are_torchs_bit_for_bit(kind, dtype, seed):
    """After a serial normal (which leaves a cached second normal in the generator, as the
    Gamma sampler's normals use and leave it), the draws, then the next normals."""
    ours, theirs, args = KINDS[kind]
    draws = []
    for lib, fn in ((staged, ours), (torch, theirs)):
        lib.manual_seed(seed)
        before = lib.randn(3)
        out = fn(*(lib.tensor(a, dtype=getattr(lib, dtype)) for a in args))
        draws.append([before, out, lib.randn(3), lib.rand(2)])
    for a, b in zip(*draws):
        assert a.dtype.name == str(b.dtype).split(".")[1]
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_the_families_draw_torchs_values():
    """Gamma, Beta, Dirichlet, Chi2, StudentT, FisherSnedecor, InverseGamma, Poisson,
    Binomial and NegativeBinomial samples, in one stream."""

    def make(lib, d):
        lib.manual_seed(11)
        a = lib.tensor([[0.4, 2.5], [7.0, 0.9]])
        b = lib.tensor([[1.0, 0.3], [2.0, 5.0]])
        return [
            d.Gamma(a, b).sample((3,)),
            d.Beta(a, b).sample((2,)),
            d.Dirichlet(a).sample((4,)),
            d.Chi2(a).sample(),
            d.StudentT(a, b, 2.0).sample((2,)),
            d.FisherSnedecor(a, b).sample(),
            d.InverseGamma(a, b).sample(),
            d.Poisson(a * 10).sample((2,)),
            d.Binomial(lib.tensor([[3.0, 40.0], [100.0, 0.0]]), b / 5).sample((2,)),
            d.NegativeBinomial(a, b / 6).sample((3,)),
            lib.rand(3),
        ]

    for a, b in zip(make(staged, D), make(torch, torch.distributions)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def _mean_ok(x: np.ndarray, mean, var, axis=0):
    """The sample mean within 6 standard errors of ``mean`` (a 1e-9 chance per entry for a
    normal mean; the draws are fixed by the seed, so the test is deterministic)."""
    n = x.shape[axis]
    assert np.all(np.abs(x.mean(axis) - mean) < 6 * np.sqrt(var / n)), (x.mean(axis), mean)


def test_moments_of_the_draws():
    """Sample means of 4000 draws against the families' means, with a bound of six
    standard errors from their variances."""
    staged.manual_seed(2024)
    n = 4000
    a = staged.tensor([0.2, 1.0, 4.5, 60.0], dtype=staged.float64)
    b = staged.tensor([2.0, 0.5, 1.0, 30.0], dtype=staged.float64)
    for dist in (
        D.Gamma(a, b),
        D.Beta(a, b),
        D.Dirichlet(a),
        D.Poisson(a * 7),
        D.Binomial(staged.tensor([3.0, 15.0, 40.0, 500.0]), b / 31),
        D.NegativeBinomial(a, b / 31),
    ):
        x = dist.sample((n,)).numpy()
        _mean_ok(x, dist.mean.numpy(), dist.variance.numpy())
    # the variance of Gamma draws: var(x^2) from the 4th moment a(a+1)(a+2)(a+3)/b^4
    x = D.Gamma(a, b).sample((n,)).numpy()
    m2 = (a * (a + 1) / b**2).numpy()
    m4 = (a * (a + 1) * (a + 2) * (a + 3) / b**4).numpy()
    _mean_ok(x**2, m2, m4 - m2**2)


A_GRID = [1e-3, 0.05, 0.3, 0.9, 1.0, 2.5, 7.9, 8.1, 20.0, 100.0, 1000.0]
X_GRID = [1e-6, 1e-3, 0.1, 0.5, 0.79, 0.81, 1.0, 2.0, 5.0, 9.0, 20.0, 95.0, 100.0, 105.0, 1200.0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_standard_gamma_grad_is_torchs(dtype):
    """``torch._standard_gamma_grad(alpha, x)`` over its three approximations (x < 0.8,
    alpha > 8 near and away from x = alpha, the rational fit): torch's arithmetic is
    float64 inside, so the values agree to float64 rounding."""
    a, x = (v.ravel().astype(dtype) for v in np.meshgrid(A_GRID, X_GRID))
    ours = S.standard_gamma_grad(a, x)
    theirs = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=1e-14 if dtype == "float64" else 1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dirichlet_grad_is_torchs(dtype):
    """``torch._dirichlet_grad(x, alpha, total)`` over its four approximations; for float32
    torch sums the two series in float32, as here (a few float32 ulps apart)."""
    x, a, extra = (
        v.ravel()
        for v in np.meshgrid(
            [1e-4, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.9999],
            [0.1, 0.5, 1.0, 3.0, 7.0, 20.0],
            [0.2, 1.0, 5.0, 8.0, 50.0],
        )
    )
    args = [v.astype(dtype) for v in (x, a, a + extra)]
    ours = S.dirichlet_grad(*args)
    theirs = torch._dirichlet_grad(*map(torch.tensor, args)).numpy()
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=1e-13 if dtype == "float64" else 2e-5)


def test_rsample_gradients_are_not_differentiable_twice():
    """torch's ``_standard_gamma_grad`` has no derivative, and its ``_Dirichlet`` backward
    (behind Beta) is ``once_differentiable``: the same errors here."""
    errors = []
    for lib, d in ((staged, D), (torch, torch.distributions)):
        for dist in (d.Gamma, d.Beta):
            a = lib.tensor([1.5, 2.0], requires_grad=True)
            x = dist(a, lib.tensor([1.0, 3.0])).rsample()
            (g,) = lib.autograd.grad(x.sum(), a, create_graph=True)
            with pytest.raises((NotImplementedError, RuntimeError)) as info:
                lib.autograd.grad(g.sum(), a)
            errors.append(f"{type(info.value).__name__}: {message(info.value)}")
    assert errors[:2] == errors[2:]


def test_errors_are_torchs():
    for lib, d in ((staged, D), (torch, torch.distributions)):
        with pytest.raises(RuntimeError, match="invalid Poisson rate, expected rate to be non-neg"):
            d.Poisson(lib.tensor([1.0, -1.0]), validate_args=False).sample()
    with pytest.raises(NotImplementedError, match="\"gamma_cpu\" not implemented for 'Long'"):
        S.standard_gamma_draws(staged.tensor([1, 2]))


def test_sampling_them_inside_a_compiled_step_raises_a_clear_error():
    """Rejection sampling draws a data-dependent number of values: it cannot be recorded."""
    rate = staged.tensor([1.0, 2.0])
    for dist in (lambda: D.Gamma(rate, 1.0), lambda: D.Poisson(rate), lambda: D.Dirichlet(rate)):
        step = staged.compile(lambda d=dist: d().sample())
        with pytest.raises(NotImplementedError, match="cannot be recorded inside staged.compile"):
            step()
