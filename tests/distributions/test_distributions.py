"""staged.distributions against torch.distributions 2.13: the same draws after the same
seed, log_prob, entropy, moments, rsample's gradients, KL, and torch's argument checks."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import staged
import staged.distributions as D


def _both(make):
    """``make(lib, D)`` for staged and torch, each after ``manual_seed(0)``."""
    out = []
    for lib, dist in ((staged, D), (torch, torch.distributions)):
        lib.manual_seed(0)
        out.append(make(lib, dist))
    return out


def _same(a, b, rtol=1e-6):
    for x, y in zip(a, b):
        np.testing.assert_allclose(np.asarray(x), y.detach().numpy(), rtol=rtol, atol=rtol)


PROBS = [[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]


@pytest.mark.parametrize("given", ["probs", "logits"])
def test_categorical_draws_log_prob_and_entropy_are_torchs(given):
    def make(lib, dist):
        p = lib.tensor(PROBS, requires_grad=True)
        c = dist.Categorical(**{given: p if given == "probs" else p.log() + 1.0})
        s = c.sample((5, 4))
        lp = c.log_prob(s)
        (g,) = lib.autograd.grad(lp.sum() + c.entropy().sum(), [p])
        return s, lp, c.entropy(), c.probs, c.logits, c.sample(), g, c.mode, c.mean, c.variance

    ours, theirs = _both(make)
    assert ours[0].dtype is staged.int64 and tuple(ours[0].shape) == (5, 4, 2)
    _same([o.detach().numpy() for o in ours], theirs)


def test_bernoulli_and_normal_are_torchs():
    def make(lib, dist):
        p = lib.tensor([0.2, 0.9, 0.5], requires_grad=True)
        b = dist.Bernoulli(probs=p)
        bl = dist.Bernoulli(logits=lib.tensor([-1.0, 0.0, 2.0]))
        loc = lib.tensor([0.0, 1.0, -2.0], requires_grad=True)
        scale = lib.tensor([1.0, 0.5, 2.0], requires_grad=True)
        n = dist.Normal(loc, scale)
        x = n.rsample((4,))
        (gl, gs) = lib.autograd.grad(x.sum() + n.log_prob(x.detach()).sum(), [loc, scale])
        sb = b.sample((2,))
        return (
            sb, b.log_prob(sb), b.entropy(), bl.sample(), bl.probs, b.mean, b.variance,
            n.sample((3,)), x, gl, gs, n.entropy(), n.cdf(x), n.icdf(lib.tensor([0.1, 0.5, 0.9])),
            n.mean, n.stddev, n.variance, dist.Normal(0.0, 1.0).sample((2,)),
        )  # fmt: skip

    ours, theirs = _both(make)
    _same([o.detach().numpy() for o in ours], theirs, rtol=2e-6)


def test_kl_divergence_is_torchs():
    def make(lib, dist):
        kl = dist.kl_divergence
        p, q = lib.tensor([0.0, 0.3, 0.7]), lib.tensor([0.2, 0.8, 0.0])
        return (
            kl(dist.Normal(lib.tensor([0.0, 1.0]), 1.5), dist.Normal(lib.tensor([1.0, 1.0]), 0.5)),
            kl(dist.Categorical(probs=p), dist.Categorical(probs=q)),
            kl(dist.Categorical(probs=q), dist.Categorical(probs=p)),
            kl(dist.Bernoulli(probs=p), dist.Bernoulli(probs=q)),
        )

    ours, theirs = _both(make)
    _same([o.numpy() for o in ours], theirs)
    with pytest.raises(NotImplementedError, match="cross KL-divergence between different exp"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Bernoulli(probs=staged.tensor(0.5)))


DTYPES = ["float32", "float64"]


def _grads(lib, x, lp, params):
    """d(rsample.sum() + log_prob.sum()) / d(params)."""
    return lib.autograd.grad(x.sum() + lp.sum(), params)


@pytest.mark.parametrize("dtype", DTYPES)
def test_uniform_exponential_and_laplace_are_torchs(dtype):
    def make(lib, dist):
        f = getattr(lib, dtype)
        low = lib.tensor([0.0, -1.0, 2.0], dtype=f, requires_grad=True)
        high = lib.tensor([1.0, 3.0, 2.5], dtype=f, requires_grad=True)
        rate = lib.tensor([0.5, 1.0, 4.0], dtype=f, requires_grad=True)
        loc = lib.tensor([0.0, 1.0, -2.0], dtype=f, requires_grad=True)
        scale = lib.tensor([1.0, 0.5, 2.0], dtype=f, requires_grad=True)
        q = lib.tensor([0.1, 0.5, 0.9], dtype=f)
        out = []
        for d, params in (
            (dist.Uniform(low, high), [low, high]),
            (dist.Exponential(rate), [rate]),
            (dist.Laplace(loc, scale), [loc, scale]),
        ):
            x = d.rsample((4,))
            lp = d.log_prob(x.detach())
            out += [d.sample((2,)), x, lp, d.cdf(x.detach()), d.icdf(q), d.entropy()]
            out += [d.mean, d.mode, d.variance, d.stddev, *_grads(lib, x, lp, params)]
        outside = dist.Uniform(low, high, validate_args=False).log_prob(lib.tensor(5.0, dtype=f))
        return out + [outside, dist.Exponential(2.0).sample((3,)), dist.Laplace(0.0, 1.0).rsample()]

    ours, theirs = _both(make)
    assert ours[0].dtype is getattr(staged, dtype)
    _same([o.detach().numpy() for o in ours], theirs, rtol=2e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_normal_and_independent_are_torchs(dtype):
    def make(lib, dist):
        f = getattr(lib, dtype)
        loc = lib.tensor([[0.0, 1.0, -2.0], [0.5, 0.0, 1.0]], dtype=f, requires_grad=True)
        scale = lib.tensor([[1.0, 0.5, 2.0], [0.3, 1.0, 0.1]], dtype=f, requires_grad=True)
        ln = dist.LogNormal(loc, scale)
        x = ln.rsample((4,))
        lp = ln.log_prob(x.detach())
        out = [ln.sample((2,)), x, lp, ln.entropy(), ln.mean, ln.mode, ln.variance, ln.stddev]
        out += [
            ln.loc,
            ln.scale,
            ln.base_dist.scale,
            ln.cdf(x.detach()),
            ln.icdf(lib.tensor([0.1, 0.5, 0.9], dtype=f)),
        ]
        out += [*_grads(lib, x, lp, [loc, scale])]
        ind = dist.Independent(dist.Normal(loc, scale), 1)
        assert ind.batch_shape == (2,) and ind.event_shape == (3,) and ind.has_rsample
        y = ind.rsample((5,))
        lp = ind.log_prob(y.detach())
        out += [ind.sample(), y, lp, ind.entropy(), ind.mean, ind.mode, ind.variance]
        out += [*_grads(lib, y, lp, [loc, scale])]
        ind2 = dist.Independent(dist.Bernoulli(probs=lib.tensor([[0.2, 0.7]], dtype=f)), 2)
        s = ind2.sample((3,))
        return out + [s, ind2.log_prob(s), ind2.entropy()]

    ours, theirs = _both(make)
    _same([o.detach().numpy() for o in ours], theirs, rtol=2e-6)


COV = [[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("given", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_is_torchs(given, dtype):
    """staged's Cholesky factor and triangular solve are its own (``_linalg``), not
    LAPACK's: float32 agrees with torch to a few ulps, float64 to 1e-12."""

    def make(lib, dist):
        f = getattr(lib, dtype)
        loc = lib.tensor([[0.0, 1.0, -1.0], [0.5, 0.0, 2.0]], dtype=f, requires_grad=True)
        m = np.linalg.cholesky(COV) if given == "scale_tril" else np.array(COV)
        m = lib.tensor(m, dtype=f, requires_grad=True)
        mvn = dist.MultivariateNormal(loc, **{given: m})
        x = mvn.rsample((4,))
        lp = mvn.log_prob(x.detach())
        return (
            mvn.sample((2,)), x, lp, mvn.entropy(), mvn.mean, mvn.mode, mvn.variance,
            mvn.scale_tril, mvn.covariance_matrix, mvn.precision_matrix,
            *_grads(lib, x, lp, [loc, m]),
        )  # fmt: skip

    ours, theirs = _both(make)
    assert tuple(ours[1].shape) == (4, 2, 3)
    _same([o.detach().numpy() for o in ours], theirs, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_multivariate_normal_broadcasts_batched_matrices_like_torch():
    def make(lib, dist):
        tril = lib.tensor([[[1.0, 0.0], [0.5, 2.0]], [[0.3, 0.0], [-1.0, 1.0]]], requires_grad=True)
        mvn = dist.MultivariateNormal(lib.tensor([1.0, -1.0]), scale_tril=tril)
        x = mvn.rsample((3,))
        lp = mvn.log_prob(x.detach()[:, :1])  # a value broadcast over the batch
        return x, lp, mvn.entropy(), mvn.loc, *_grads(lib, x, lp, [tril])

    ours, theirs = _both(make)
    _same([o.detach().numpy() for o in ours], theirs, rtol=1e-5)


def test_one_hot_categorical_is_torchs():
    def make(lib, dist):
        p = lib.tensor(PROBS, requires_grad=True)
        c = dist.OneHotCategorical(probs=p)
        s = c.sample((5,))
        lp = c.log_prob(s)
        (g,) = lib.autograd.grad(lp.sum() + c.entropy().sum(), [p])
        cl = dist.OneHotCategorical(logits=lib.tensor(PROBS, dtype=lib.float64).log())
        return (
            s, lp, c.entropy(), c.mean, c.mode, c.variance, c.probs, c.logits, g,
            cl.sample(), cl.mode,
        )  # fmt: skip

    ours, theirs = _both(make)
    assert ours[0].dtype is staged.float32 and tuple(ours[0].shape) == (5, 2, 3)
    assert ours[-2].dtype is staged.float64
    _same([o.detach().numpy() for o in ours], theirs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kl_divergence_of_the_new_families_is_torchs(dtype):
    def make(lib, dist):
        f = getattr(lib, dtype)
        kl = dist.kl_divergence
        a = lib.tensor([0.0, 1.0, -0.5], dtype=f, requires_grad=True)
        b = lib.tensor([2.0, 1.5, 0.5], dtype=f, requires_grad=True)
        cov = lib.tensor(COV, dtype=f)
        mvn_p = dist.MultivariateNormal(a, covariance_matrix=cov * b.unsqueeze(-1) * b)
        mvn_q = dist.MultivariateNormal(lib.zeros(2, 3, dtype=f), precision_matrix=cov)
        out = [
            kl(dist.Uniform(a, b), dist.Uniform(a - 1, b + 1)),
            kl(dist.Uniform(a, b), dist.Uniform(a + lib.tensor([0.25, -1, 0], dtype=f), b)),  # inf
            kl(dist.Exponential(b), dist.Exponential(b.flip(0))),
            kl(dist.Laplace(a, b), dist.Laplace(b, a.exp())),
            kl(mvn_p, mvn_q),
            kl(dist.Independent(dist.Normal(a, b), 1), dist.Independent(dist.Normal(b, b), 1)),
            kl(
                dist.OneHotCategorical(lib.tensor(PROBS, dtype=f)),
                dist.OneHotCategorical(lib.tensor(PROBS[::-1], dtype=f)),
            ),
        ]
        finite = [o for o in out if bool(o.isfinite().all())]
        return [*out, *lib.autograd.grad(sum(o.sum() for o in finite), [a, b])]

    ours, theirs = _both(make)
    _same([o.detach().numpy() for o in ours], theirs, rtol=1e-5 if dtype == "float32" else 1e-12)
    with pytest.raises(NotImplementedError, match="No KL.* type Uniform and q type Categorical"):
        D.kl_divergence(D.Uniform(0.0, 1.0), D.Categorical(staged.tensor([0.5, 0.5])))


@pytest.mark.parametrize(
    "bad",
    [
        lambda lib, dist: dist.Normal(lib.tensor([0.0, 1.0]), lib.tensor([1.0, -1.0])),
        lambda lib, dist: dist.Categorical(probs=lib.tensor([0.5, -0.5, 1.0])),
        lambda lib, dist: dist.Bernoulli(probs=lib.tensor([1.5])),
        lambda lib, dist: dist.Categorical(probs=lib.tensor([0.5, 0.5])).log_prob(lib.tensor(2)),
        lambda lib, dist: dist.Normal(0.0, 1.0).log_prob(lib.tensor(float("nan"))),
        lambda lib, dist: dist.Categorical(probs=lib.tensor([0.5]), logits=lib.tensor([0.0])),
        lambda lib, dist: dist.Uniform(1.0, 0.0, validate_args=True),
        lambda lib, dist: dist.Uniform(lib.tensor([0.0, 1.0]), lib.tensor([1.0, 0.5])),
        lambda lib, dist: dist.Uniform(0.0, 1.0).log_prob(lib.tensor(2.0)),
        lambda lib, dist: dist.Exponential(lib.tensor([-1.0])),
        lambda lib, dist: dist.Exponential(1.0).cdf(lib.tensor(-1.0)),
        lambda lib, dist: dist.Laplace(0.0, lib.tensor([0.0])),
        lambda lib, dist: dist.LogNormal(0.0, lib.tensor([-1.0])),
        lambda lib, dist: dist.LogNormal(0.0, 1.0).log_prob(lib.tensor(-1.0)),
        lambda lib, dist: dist.MultivariateNormal(
            lib.zeros(2), lib.tensor([[1.0, 2.0], [2.0, 1.0]])
        ),
        lambda lib, dist: dist.MultivariateNormal(
            lib.zeros(2), lib.tensor([[1.0, 0.5], [0.0, 1.0]])
        ),
        lambda lib, dist: dist.MultivariateNormal(lib.zeros(2), precision_matrix=-lib.eye(2)),
        lambda lib, dist: dist.MultivariateNormal(lib.zeros(2), scale_tril=lib.ones(2, 2)),
        lambda lib, dist: dist.MultivariateNormal(lib.zeros(2), scale_tril=-lib.eye(2)),
        lambda lib, dist: dist.MultivariateNormal(lib.zeros(2), lib.eye(2), scale_tril=lib.eye(2)),
        lambda lib, dist: dist.MultivariateNormal(lib.tensor(0.0), lib.eye(2)),
        lambda lib, dist: dist.MultivariateNormal(lib.zeros(2), lib.ones(2)),
        lambda lib, dist: dist.MultivariateNormal(lib.zeros(1), lib.eye(1)).log_prob(
            lib.tensor([float("nan")])
        ),
        lambda lib, dist: dist.Independent(dist.Normal(lib.zeros(2), 1.0), 2),
        lambda lib, dist: dist.OneHotCategorical(lib.tensor([0.5, 0.5])).log_prob(lib.ones(2)),
        lambda lib, dist: dist.OneHotCategorical(lib.tensor([0.5, -0.5])),
    ],
    ids=[
        "scale",
        "simplex",
        "unit",
        "support",
        "nan value",
        "both",
        "uniform low",
        "uniform tensors",
        "uniform support",
        "rate",
        "exponential support",
        "laplace scale",
        "lognormal scale",
        "lognormal support",
        "not positive-definite",
        "not symmetric",
        "precision",
        "not lower",
        "tril diagonal",
        "two matrices",
        "loc 0-d",
        "covariance 1-d",
        "mvn value",
        "reinterpreted",
        "one-hot",
        "one-hot simplex",
    ],  # fmt: skip
)
def test_invalid_arguments_raise_torchs_errors(bad):
    errors = []
    for lib, dist in ((staged, D), (torch, torch.distributions)):
        with pytest.raises(ValueError) as info:
            bad(lib, dist)
        errors.append(str(info.value).replace("torch.", "staged.").split(" of distribution")[0])
    assert errors[0] == errors[1]


def test_a_covariance_that_does_not_factor_raises_torchs_error_unchecked():
    """torch raises its LinAlgError (a RuntimeError) from the Cholesky factorisation."""
    errors = []
    for lib, dist in ((staged, D), (torch, torch.distributions)):
        cov = lib.tensor([[1.0, 2.0], [2.0, 1.0]])
        with pytest.raises(RuntimeError, match="not positive-definite") as info:
            dist.MultivariateNormal(lib.zeros(2), cov, validate_args=False)
        errors.append(str(info.value))
    assert errors[0].endswith(errors[1])  # staged's may name the user's line first


def test_validate_args_false_skips_the_checks():
    n = D.Normal(staged.tensor([0.0]), staged.tensor([-1.0]), validate_args=False)
    assert np.isnan(n.log_prob(staged.tensor([0.0])).item())


def test_a_reinforce_step_compiles_and_gives_eagers_loss():
    """A policy-gradient step (Categorical log_prob of given actions) traced whole: the
    checks are eager-only (Note [checks while tracing])."""
    staged.manual_seed(0)
    policy = staged.nn.Linear(4, 3)
    opt = staged.optim.SGD(policy.parameters(), lr=0.1)

    def step(obs, actions, returns):
        opt.zero_grad()
        dist = D.Categorical(logits=policy(obs))
        loss = -(dist.log_prob(actions) * returns).mean() - 0.01 * dist.entropy().mean()
        loss.backward()
        opt.step()
        return loss

    obs, actions, returns = staged.randn(8, 4), staged.randint(0, 3, (8,)), staged.randn(8)
    state = {k: v.clone() for k, v in policy.state_dict().items()}
    eager = [step(obs, actions, returns).item() for _ in range(3)]
    policy.load_state_dict(state)
    compiled = staged.compile(step)
    got = [compiled(obs, actions, returns).item() for _ in range(3)]
    np.testing.assert_allclose(got, eager, rtol=1e-5)


def test_a_multivariate_normal_step_compiles_and_gives_eagers_loss():
    """The Cholesky factor and the triangular solve are ordinary ops (``_linalg``), so a
    step through them traces whole; its gradients are eager's."""
    staged.manual_seed(0)
    loc = staged.tensor([0.0, 1.0], requires_grad=True)
    tril = staged.tensor([[1.0, 0.0], [0.5, 2.0]], requires_grad=True)

    def step(x):
        mvn = D.MultivariateNormal(loc, covariance_matrix=tril @ tril.mT)
        loss = -mvn.log_prob(x).mean() - D.Laplace(loc, 2.0).log_prob(x).mean()
        loss.backward()
        return loss

    x = staged.randn(5, 2)
    eager = [step(x).item(), loc.grad.numpy().copy(), tril.grad.numpy().copy()]
    loc.grad = tril.grad = None
    got = [staged.compile(step)(x).item(), loc.grad.numpy(), tril.grad.numpy()]
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g, e, rtol=1e-5)


def test_torch_distributions_resolves_under_the_torch_alias():
    script = (
        "import staged; staged.as_torch()\n"
        "import torch\n"
        "from torch.distributions import Categorical\n"
        "import torch.distributions.normal as n\n"
        "assert Categorical is staged.distributions.Categorical\n"
        "assert n.Normal is staged.distributions.Normal\n"
        "import torch.distributions.uniform, torch.distributions.exponential\n"
        "import torch.distributions.laplace, torch.distributions.log_normal\n"
        "import torch.distributions.independent, torch.distributions.multivariate_normal\n"
        "import torch.distributions.one_hot_categorical as o\n"
        "d = torch.distributions\n"
        "assert d.uniform.Uniform is staged.distributions.Uniform\n"
        "assert d.exponential.Exponential is staged.distributions.Exponential\n"
        "assert d.laplace.Laplace is staged.distributions.Laplace\n"
        "assert d.log_normal.LogNormal is staged.distributions.LogNormal\n"
        "assert d.independent.Independent is staged.distributions.Independent\n"
        "assert d.multivariate_normal.MultivariateNormal is d.MultivariateNormal\n"
        "assert o.OneHotCategorical is staged.distributions.OneHotCategorical\n"
    )
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
