"""Nested forward mode in staged.func (Note [nested levels] in autograd/forward_ad.py)
against torch.func (torch 2.13), float64: jvp of jvp, jacfwd of jacfwd (and of jacrev, in
every order, to third order), with has_aux, argnums, vmap, in-place writes and a custom
Function; ``forward_ad.dual_level`` still refuses to nest, as torch's does."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import staged
from tests.checks import both, close, raises_like_torch

rng = np.random.default_rng(0)
X = rng.standard_normal(3)
Y = rng.standard_normal((2, 3))
V0, V1 = rng.standard_normal(3), rng.standard_normal(3)
M = rng.standard_normal((3, 3))


def _f(lib, x):
    """A scalar of x through elementwise ops, a matmul, a reduction and a softmax."""
    m = lib.tensor(M)
    return (x.sin() * x.exp()).sum() + (x @ m @ x).tanh() + x.softmax(0)[1].log()


def _vec(lib, x):
    """A vector of x (for Jacobians of Jacobians of a non-scalar)."""
    return (x[:2] * x[1:]).cos() * x.sum()


def test_jvp_of_jvp_is_the_second_directional_derivative():
    def run(lib):
        F, x, v0, v1 = lib.func, lib.tensor(X), lib.tensor(V0), lib.tensor(V1)

        def inner(x):
            return F.jvp(lambda x: _f(lib, x), (x,), (v1,))

        return F.jvp(inner, (x,), (v0,))  # ((f, f' v1), (f' v0, v0' f'' v1))

    close(*both(run), rtol=1e-12, atol=1e-12)


def test_jacfwd_of_jacfwd_is_the_hessian():
    def run(lib):
        F, x = lib.func, lib.tensor(X)
        f = lambda x: _f(lib, x)
        return F.jacfwd(F.jacfwd(f))(x), F.jacfwd(F.jacfwd(lambda x: _vec(lib, x)))(x)

    ours, theirs = both(run)
    close(ours, theirs, rtol=1e-12, atol=1e-12)
    hessian = staged.func.hessian(lambda x: _f(staged, x))(staged.tensor(X))
    close(ours[0], hessian, rtol=1e-12, atol=1e-12)


def test_third_order_jacfwd():
    def run(lib):
        F = lib.func
        g = lambda x: (x.sin() * x.exp()).prod() + (x**3).sum() * x[0]
        return F.jacfwd(F.jacfwd(F.jacfwd(g)))(lib.tensor(X))

    ours, theirs = both(run)
    assert ours.shape == (3, 3, 3)
    close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_jacfwd_of_jacfwd_with_argnums_and_aux():
    def run(lib):
        F = lib.func

        def f(x, y):
            return (x.exp() * y).sum(1).tanh(), {"aux": y.sin()}

        inner = F.jacfwd(f, argnums=(0, 1), has_aux=True)
        outer = F.jacfwd(inner, argnums=(0, 1), has_aux=True)
        return outer(lib.tensor(X), lib.tensor(Y))

    (jac, aux), (tjac, taux) = both(run)
    close(jac, tjac, rtol=1e-12, atol=1e-12)
    close(aux, taux, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "order", ["".join(p) for n in (2, 3) for p in itertools.product("fr", repeat=n)]
)
def test_jacfwd_and_jacrev_mixed_in_every_order(order):
    def run(lib):
        g = lambda x: (x.sin() * x.exp()).prod() + (x**3).sum() * x[0]
        for c in order:
            g = (lib.func.jacfwd if c == "f" else lib.func.jacrev)(g)
        return g(lib.tensor(X))

    close(*both(run), rtol=1e-12, atol=1e-12)


def test_vmap_outside_and_inside_nested_jacfwd():
    def run(lib):
        F = lib.func
        xs = lib.tensor(np.stack([X, V0, V1]))
        hessians = F.vmap(F.jacfwd(F.jacfwd(lambda x: _f(lib, x))))(xs)
        # per-row second derivative of a vmapped function
        per_row = lambda x: F.vmap(lambda r: (r.sin() * r).sum())(x.reshape(3, 1)).sum()
        inner = F.jacfwd(F.jacfwd(per_row))(lib.tensor(X))
        # jvp of a vmap of a jvp
        vjvp = F.jvp(
            lambda x: F.vmap(lambda r: F.jvp(lambda t: t.exp().sum(), (r,), (r,))[1])(x),
            (xs,),
            (xs.cos(),),
        )
        return hessians, inner, vjvp

    close(*both(run), rtol=1e-12, atol=1e-12)


def test_jvp_of_a_vmap_of_grad():
    # grad's leaves take the tangents themselves (no make_dual alias), so a batched leaf's
    # physical value, which vmap returns, keeps them (one level: this was 0 before)
    def run(lib):
        F, xs = lib.func, lib.tensor(np.stack([X, V0, V1]))
        per_example = lambda y: F.vmap(lambda t: F.grad(_f, argnums=1)(lib, y * t))(xs)
        return F.jvp(per_example, (lib.tensor(X),), (lib.tensor(V0),))

    close(*both(run), rtol=1e-12, atol=1e-12)


def test_in_place_writes_under_two_levels():
    def run(lib):
        def f(x):
            y = x.clone()
            y[0] = y[1] * y[2]  # through a view of y: the forward base's tangent
            y.mul_(x.sin())
            return y

        return lib.func.jacfwd(lib.func.jacfwd(f))(lib.tensor(X))

    close(*both(run), rtol=1e-12, atol=1e-12)


def _cube(lib):
    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * g * x * x

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 3 * t * x * x

    return Cube


def _two_levels(lib, cube, path):
    """The outer jvp (along e0) of the inner jvp's value or tangent (along ones)."""
    F = lib.func
    f = lambda x: cube(x).sum()
    ones, e0 = lib.ones(3, dtype=lib.float64), lib.tensor([1.0, 0.0, 0.0])
    return F.jvp(lambda x: F.jvp(f, (x,), (ones,))[path], (lib.tensor(X),), (e0,))


def test_custom_function_jvp_gives_the_outer_level_the_value_s_tangent():
    # the outer level differentiates the value through the Function's jvp: 3 x0^2, as torch
    close(*both(lambda lib: _two_levels(lib, _cube(lib).apply, 0)), rtol=1e-12, atol=1e-12)


def test_custom_function_jvp_is_differentiated_by_the_outer_level():
    # the inner tangent 3 t x^2 is differentiated by the outer level: 6 x0. torch 2.13
    # gives 0 here (pytorch/pytorch#197867, silently wrong), so the oracle is torch on the
    # same function of plain ops
    ours = _two_levels(staged, _cube(staged).apply, 1)
    theirs = _two_levels(torch, lambda x: x * x * x, 1)
    close(ours, theirs, rtol=1e-12, atol=1e-12)
    assert abs(ours[1].item() - 6 * X[0]) < 1e-12


def test_dual_level_still_refuses_to_nest_as_torch_does():
    words = "Nested forward mode AD is not supported at the moment"

    def dual_in_dual(lib):
        with lib.autograd.forward_ad.dual_level(), lib.autograd.forward_ad.dual_level():
            pass

    def jvp_in_dual(lib):
        with lib.autograd.forward_ad.dual_level():
            lib.func.jvp(lib.sin, (lib.tensor(X),), (lib.tensor(V0),))

    def dual_in_jvp(lib):
        def f(x):
            with lib.autograd.forward_ad.dual_level():
                return x.sin()

        lib.func.jvp(f, (lib.tensor(X),), (lib.tensor(V0),))

    for fn in (dual_in_dual, jvp_in_dual, dual_in_jvp):
        assert words in raises_like_torch(fn, words)
    # and each left nothing open
    assert not staged.autograd.forward_ad.active()
    assert staged.func.jvp(staged.sin, (staged.tensor(X),), (staged.tensor(V0),))[1].shape == (3,)
