"""staged.distributions.transforms, constraints and constraint_registry against torch 2.13:
each transform's values, inverse, log-abs-det-Jacobian and its gradient, domain, codomain,
shapes and flags; the constraints' checks and reprs; ``biject_to``/``transform_to``; and a
TransformedDistribution through decreasing and event-changing transforms."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
import staged.distributions as D

LIBS = ((staged, D), (torch, torch.distributions))


def _transforms(lib, d):
    t, f = d.transforms, lib.float64

    def v(x):
        return lib.tensor(x, dtype=f)

    return {
        "exp": (t.ExpTransform(), [0.3, -1.2, 2.0]),
        "exp inverse": (t.ExpTransform().inv, [0.3, 1.2, 2.0]),
        "affine": (t.AffineTransform(v([1.0, -2.0, 0.5]), v([2.0, -0.5, 3.0])), [0.3, -1.2, 2.0]),
        "affine of numbers": (t.AffineTransform(1.5, -2.0), [0.3, -1.2, 2.0]),
        "affine event": (
            t.AffineTransform(v([1.0, -2.0, 0.5]), v([2.0, -0.5, 3.0]), event_dim=1),
            [[0.3, -1.2, 2.0], [1.0, 2.0, 3.0]],
        ),
        "sigmoid": (t.SigmoidTransform(), [0.3, -1.2, 40.0]),
        "tanh": (t.TanhTransform(), [0.3, -1.2, 2.0]),
        "softplus": (t.SoftplusTransform(), [0.3, -1.2, 2.0]),
        "power": (t.PowerTransform(v([2.0, 0.5, -1.0])), [0.3, 1.2, 2.0]),
        "abs": (t.AbsTransform(), [0.3, -1.2, 2.0]),
        "softmax": (t.SoftmaxTransform(), [[0.3, -1.2, 2.0]]),
        "stick breaking": (t.StickBreakingTransform(), [[0.3, -1.2, 2.0], [0.0, 0.0, 0.0]]),
        "lower cholesky": (t.LowerCholeskyTransform(), [[[0.3, 1.0], [-1.2, 2.0]]]),
        "positive definite": (t.PositiveDefiniteTransform(), [[[0.3, 1.0], [-1.2, 2.0]]]),
        "corr cholesky": (t.CorrCholeskyTransform(), [[0.3, -1.2, 2.0]]),
        "compose": (
            t.ComposeTransform(
                [t.AffineTransform(0.5, 2.0), t.ExpTransform(), t.AffineTransform(1.0, 3.0)]
            ),
            [0.3, -1.2, 2.0],
        ),
        "identity": (t.identity_transform, [0.3, -1.2, 2.0]),
        "independent": (t.IndependentTransform(t.SigmoidTransform(), 1), [[0.3, -1.2, 2.0]]),
        "reshape": (t.ReshapeTransform((2, 3), (3, 2)), [[[0.3, -1.2, 2.0], [1.0, 2.0, 3.0]]]),
        "cat": (
            t.CatTransform([t.ExpTransform(), t.AffineTransform(1.0, 2.0)], 0, [1, 2]),
            [0.3, -1.2, 2.0],
        ),
        "cat event": (
            t.CatTransform(
                [t.IndependentTransform(t.SigmoidTransform(), 1), t.ExpTransform()], -1, [2, 2]
            ),
            [[0.3, -1.2, 2.0, 0.5]],
        ),
        "stack": (
            t.StackTransform([t.ExpTransform(), t.SigmoidTransform(), t.TanhTransform()], 1),
            [[0.3, -1.2, 2.0]],
        ),
        "cdf": (
            t.CumulativeDistributionTransform(d.Normal(v(0.0), v(2.0))),
            [0.3, -1.2, 2.0],
        ),
        "compose event": (
            t.ComposeTransform(
                [t.StickBreakingTransform(), t.AffineTransform(0.0, 2.0, event_dim=1)]
            ),
            [[0.3, -1.2, 2.0]],
        ),
    }


def _observe(lib, transform, x):
    x = lib.tensor(x, dtype=lib.float64, requires_grad=True)
    y = transform(x)
    out = {
        "y": y,
        "inverse": transform.inv(y),
        "domain": repr(transform.domain),
        "codomain": repr(transform.codomain),
        "repr": repr(transform),
        "forward_shape": tuple(transform.forward_shape(tuple(x.shape))),
        "inverse_shape": tuple(transform.inverse_shape(tuple(y.shape))),
        "bijective": transform.bijective,
    }
    for flag in ("event_dim", "sign"):
        try:
            value = getattr(transform, flag)
            out[flag] = value if isinstance(value, int) else value.numpy()
        except (ValueError, NotImplementedError) as e:
            out[flag] = type(e).__name__
    try:
        ladj = transform.log_abs_det_jacobian(x, y)
        out["ladj"] = ladj
        out["grad"] = lib.autograd.grad(y.sum() + ladj.sum(), x)[0]
    except NotImplementedError:
        out["ladj"] = "NotImplementedError"
    return out


@pytest.mark.parametrize("name", sorted(_transforms(torch, torch.distributions)))
def test_transform_is_torchs(name):
    ours = _observe(staged, *_transforms(staged, D)[name])
    theirs = _observe(torch, *_transforms(torch, torch.distributions)[name])
    assert ours.keys() == theirs.keys()
    for key, b in theirs.items():
        a = ours[key]
        if isinstance(b, torch.Tensor):
            np.testing.assert_allclose(
                a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-14, err_msg=key
            )
        elif isinstance(b, np.ndarray):
            np.testing.assert_array_equal(a, b)
        elif isinstance(b, str):
            assert a.replace("staged.", "torch.") == b, key
        else:
            assert a == b, key


def test_caching_equality_and_inverses():
    t = D.transforms
    x = staged.randn(3)
    cached = t.ExpTransform(cache_size=1)
    y = cached(x)
    assert cached.inv(y) is x and cached(x) is y
    assert t.ExpTransform().inv(t.ExpTransform()(x)) is not x
    assert cached.with_cache(0) == t.ExpTransform() and cached.inv.inv is cached
    assert t.ExpTransform().inv == t.ExpTransform().inv and t.ExpTransform() != t.TanhTransform()
    assert t.AffineTransform(1.0, 2.0) == t.AffineTransform(1.0, 2.0)
    assert t.AffineTransform(staged.tensor([1.0]), 2.0) != t.AffineTransform(0.0, 2.0)
    assert t.PowerTransform(staged.tensor(2.0)) == t.PowerTransform(staged.tensor(2.0))
    compose = t.ComposeTransform([t.ExpTransform(), t.AffineTransform(1.0, 2.0)], cache_size=1)
    assert all(p._cache_size == 1 for p in compose.parts)
    assert compose.inv.inv is compose and compose.inv.parts[0] == t.AffineTransform(1.0, 2.0).inv
    for _, d in LIBS:
        with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
            d.transforms.ExpTransform(cache_size=2)
        with pytest.raises(NotImplementedError, match="with_cache is not implemented"):
            base = d.transforms.Transform
            type("T", (base,), {"__init__": lambda s: base.__init__(s)})().with_cache()
        with pytest.raises(ValueError, match="different numbers of elements"):
            d.transforms.ReshapeTransform((2, 3), (4,))
        with pytest.raises(ValueError, match="Please use either .domain.event_dim"):
            d.transforms.ReshapeTransform((2, 3), (6,)).event_dim


def _constraints(lib, d):
    c = d.constraints
    low = lib.tensor([0.0, 1.0, -1.0])
    return [
        c.real, c.positive, c.nonnegative, c.unit_interval, c.boolean, c.nonnegative_integer,
        c.positive_integer, c.greater_than(low), c.greater_than_eq(0.5), c.less_than(low),
        c.interval(-1.0, low), c.half_open_interval(0.0, 1.0), c.integer_interval(0, 2),
        c.real_vector, c.independent(c.positive, 1), c.simplex, c.one_hot, c.multinomial(3),
        c.lower_triangular, c.lower_cholesky, c.corr_cholesky, c.square, c.symmetric,
        c.positive_definite, c.positive_semidefinite,
        c.cat([c.positive, c.real], dim=-1, lengths=[2, 1]),
        c.stack([c.positive, c.real, c.unit_interval], dim=-1),
        c.MixtureSameFamilyConstraint(c.positive),
    ]  # fmt: skip


VALUES = [
    [0.5, -1.0, 0.0],
    [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [2.0, 1.0, 0.0]],
    [[[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.6, 0.8]], [[2.0, 0.5, 0.1], [0.5, 1.0, 0.0], [0.1, 0.0, 1.0]]],
    [[[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 2.0]]],
]  # fmt: skip


def test_constraints_are_torchs():
    for ours, theirs in zip(_constraints(staged, D), _constraints(torch, torch.distributions)):
        assert repr(ours).replace("staged.", "torch.") == repr(theirs)
        assert (ours.is_discrete, ours.event_dim) == (theirs.is_discrete, theirs.event_dim)
        for v in VALUES:
            if len(np.shape(v)) < max(theirs.event_dim, 1):
                continue
            try:
                expected = theirs.check(torch.tensor(v)).numpy()
            except (RuntimeError, IndexError, ValueError):
                continue  # shapes the constraint is not for
            got = ours.check(staged.tensor(v)).numpy()
            np.testing.assert_array_equal(got, expected, err_msg=repr(theirs))


def test_dependent_constraints():
    c = D.constraints
    assert c.is_dependent(c.dependent) and c.is_dependent(D.Uniform.support)
    assert not c.is_dependent(c.real)
    assert D.Uniform.support.event_dim == 0 and D.Categorical.support.is_discrete
    for lib, d in LIBS:
        with pytest.raises(ValueError, match="Cannot determine validity of dependent constraint"):
            d.constraints.dependent.check(lib.zeros(1))
        with pytest.raises(NotImplementedError, match=".event_dim cannot be determined statically"):
            d.constraints.dependent.event_dim
        with pytest.raises(ValueError, match=r"Expected value.dim\(\) >= 2 but got 1"):
            d.constraints.independent(d.constraints.real, 2).check(lib.zeros(3))


# a constraint (evaluated in the constraints module) and an unconstrained input's shape
CONSTRAINTS = {
    "real": (2, 3), "positive": (2, 3), "nonnegative": (2, 3), "unit_interval": (2, 3),
    "greater_than(1.5)": (2, 3), "greater_than_eq(-1.0)": (2, 3), "less_than(2.0)": (2, 3),
    "interval(-1.0, 3.0)": (2, 3), "half_open_interval(0, 1)": (2, 3), "real_vector": (2, 3),
    "independent(positive, 1)": (2, 3), "simplex": (2, 3), "lower_cholesky": (2, 3, 3),
    "positive_definite": (2, 3, 3), "positive_semidefinite": (2, 3, 3), "corr_cholesky": (2, 3),
    "cat([positive, real], -1, [2, 1])": (2, 3),
    "stack([positive, real, unit_interval], -1)": (2, 3),
}  # fmt: skip


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("name", sorted(CONSTRAINTS))
def test_constraint_registry_is_torchs(registry, name):
    """The same transform (values and log-det-Jacobians), onto the constraint's set; the
    same error where torch has none."""
    u = np.random.RandomState(1).randn(*CONSTRAINTS[name])
    results = []
    for lib, d in LIBS:
        constraint = eval(name, vars(d.constraints))
        try:
            transform = getattr(d, registry)(constraint)
        except NotImplementedError as e:
            results.append(str(e))
            continue
        x = lib.tensor(u)
        y = transform(x)
        assert bool(constraint.check(y).all()), name
        try:
            ladj = transform.log_abs_det_jacobian(x, y).numpy()
        except NotImplementedError:
            ladj = None
        results.append([repr(transform), y.numpy(), ladj])
    if isinstance(results[1], str):
        assert results[0] == results[1]
        return
    assert results[0][0].replace("staged.", "torch.") == results[1][0]
    for a, b in zip(results[0][1:], results[1][1:]):
        assert (a is None) == (b is None)
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_registry_errors_and_registration():
    for _, d in LIBS:
        with pytest.raises(NotImplementedError, match="Cannot transform _Boolean constraints"):
            d.biject_to(d.constraints.boolean)
        with pytest.raises(TypeError, match="Expected constraint to be either a Constraint"):
            d.constraint_registry.ConstraintRegistry().register(int, lambda c: None)
    registry = D.constraint_registry.ConstraintRegistry()

    @registry.register(D.constraints.boolean)
    def _boolean(c):
        return D.transforms.SigmoidTransform()

    assert registry(D.constraints.boolean) == D.transforms.SigmoidTransform()


def test_transformed_distribution_is_torchs():
    """A decreasing map (cdf and icdf flip), an event-changing one (the base becomes
    Independent and is expanded), ``expand``, and their shapes and draws."""

    def make(lib, d):
        t = d.transforms
        lib.manual_seed(4)
        loc = lib.tensor([0.5, -1.0], dtype=lib.float64, requires_grad=True)
        down = d.TransformedDistribution(
            d.Normal(loc, 2.0), [t.AffineTransform(1.0, -3.0), t.ExpTransform()]
        )
        v = lib.tensor([0.7, 2.5], dtype=lib.float64)
        simplex = d.TransformedDistribution(d.Normal(loc, 1.0), t.StickBreakingTransform())
        widened = d.TransformedDistribution(
            d.Normal(lib.zeros((), dtype=lib.float64), 1.0), t.AffineTransform(loc, 2.0)
        )
        expanded = simplex.expand((4,))
        out = [
            down.cdf(v),
            down.icdf(lib.tensor([0.2, 0.9], dtype=lib.float64)),
            down.log_prob(v),
            down.rsample((3,)),
            simplex.log_prob(lib.tensor([0.2, 0.5, 0.3], dtype=lib.float64)),
            simplex.sample((2,)),
            widened.sample((2,)),
            expanded.sample(),
        ]
        shapes = [
            (tuple(x.batch_shape), tuple(x.event_shape)) for x in (simplex, widened, expanded)
        ]
        shapes.append((tuple(widened.base_dist.batch_shape), type(simplex.base_dist).__name__))
        shapes.append(repr(simplex.support))
        grads = lib.autograd.grad(sum(o.sum() for o in out[:5]), loc)
        return out + list(grads), shapes

    (ours, ours_shapes), (theirs, their_shapes) = make(staged, D), make(torch, torch.distributions)
    assert ours_shapes == their_shapes
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
