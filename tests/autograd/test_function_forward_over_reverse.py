"""Forward-over-reverse through custom Functions against torch 2.13: the tensors a
Function saves keep their tangents, so a backward run inside forward-AD levels (hessian,
jacfwd(jacrev), hvp) differentiates through them instead of treating them as constants."""

import numpy as np
import pytest
import torch

import staged
from tests.checks import close, compare

X = np.array([0.3, -1.2, 0.7])
V = np.array([1.0, -0.5, 2.0])


def _new_style(lib):
    """Functions in ``setup_context`` style (what ``torch.func`` accepts)."""
    F = lib.autograd.Function

    class ExpOut(F):  # saves its output
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x.exp()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)
            ctx.save_for_forward(output)

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

        @staticmethod
        def jvp(ctx, t):
            (y,) = ctx.saved_tensors
            return t * y

    class SinIn(F):  # saves its input
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x.sin()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return t * x.cos()

    class PowK(F):  # a non-tensor argument kept on ctx, and the input saved
        generate_vmap_rule = True

        @staticmethod
        def forward(x, k):
            return x**k

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, ctx.k = inputs
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ctx.k * x ** (ctx.k - 1), None

        @staticmethod
        def jvp(ctx, t, _):
            (x,) = ctx.saved_tensors
            return t * ctx.k * x ** (ctx.k - 1)

    class SinCos(F):  # two outputs, both saved
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x.sin(), x.cos()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*output)
            ctx.save_for_forward(*output)

        @staticmethod
        def backward(ctx, gs, gc):
            s, c = ctx.saved_tensors
            return gs * c - gc * s

        @staticmethod
        def jvp(ctx, t):
            s, c = ctx.saved_tensors
            return t * c, -t * s

    def sincos(x):
        s, c = SinCos.apply(x)
        return s * c

    return {
        "exp_out": lambda x: ExpOut.apply(x).sum(),
        "sin_in": lambda x: SinIn.apply(x).sum(),
        "pow_k": lambda x: PowK.apply(x, 3.0).sum(),
        "two_outputs": lambda x: sincos(x).sum(),
        "composed": lambda x: (ExpOut.apply(SinIn.apply(x)) * x).sum(),
        "exp_times_x": lambda x: (ExpOut.apply(x) * x).sum(),
    }


def _ctx_style(lib):
    """Functions whose ``forward`` takes ``ctx`` (torch.func refuses these)."""
    F = lib.autograd.Function

    class ExpOut(F):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            ctx.save_for_forward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

        @staticmethod
        def jvp(ctx, t):
            (y,) = ctx.saved_tensors
            return t * y

    class CubeIn(F):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return t * 3 * x * x

    class Intermediate(F):  # saves a tensor made in forward: no tangent, as in torch
        @staticmethod
        def forward(ctx, x):
            c = x.cos()
            ctx.save_for_backward(c)
            ctx.save_for_forward(c)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (c,) = ctx.saved_tensors
            return g * c

        @staticmethod
        def jvp(ctx, t):
            (c,) = ctx.saved_tensors
            return t * c

    class ExpOnce(ExpOut):  # a backward that is not differentiable (by reverse mode)
        backward = staticmethod(lib.autograd.function.once_differentiable(ExpOut.backward))

    class ExpAndDouble(F):  # a non-differentiable output, saved as well
        @staticmethod
        def forward(ctx, x):
            y, z = x.exp(), x * 2
            ctx.mark_non_differentiable(z)
            ctx.save_for_backward(y, z)
            ctx.save_for_forward(y)
            return y, z

        @staticmethod
        def backward(ctx, g, _):
            y, z = ctx.saved_tensors
            return g * y * z

        @staticmethod
        def jvp(ctx, t):
            (y,) = ctx.saved_tensors
            return t * y, None

    class ExpInPlace(F):  # writes its input in place (mark_dirty) and saves it
        @staticmethod
        def forward(ctx, x):
            x.exp_()
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

        @staticmethod
        def jvp(ctx, t):  # torch requires the input's tangent written in place
            (y,) = ctx.saved_tensors
            return t.mul_(y)

    return {
        "exp_out": lambda x: ExpOut.apply(x).sum(),
        "cube_in": lambda x: CubeIn.apply(x).sum(),
        "intermediate": lambda x: Intermediate.apply(x).sum(),
        "once_differentiable": lambda x: ExpOnce.apply(x).sum(),
        "non_differentiable": lambda x: ExpAndDouble.apply(x)[0].sum(),
        "dirty": lambda x: ExpInPlace.apply(x * 1).sum(),
    }


NEW = sorted(_new_style(staged))
CTX = sorted(_ctx_style(staged))


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize(
    "transform",
    [
        lambda lib, f, x: lib.func.hessian(f)(x),
        lambda lib, f, x: lib.func.jacfwd(lib.func.jacrev(f))(x),
        lambda lib, f, x: lib.func.jvp(lib.func.grad(f), (x,), (lib.tensor(V),))[1],
        lambda lib, f, x: lib.func.vmap(lib.func.jacrev(f))(lib.stack([x, 2 * x])),
    ],
    ids=["hessian", "jacfwd_jacrev", "hvp", "vmap_jacrev"],
)
def test_func_transforms_over_custom_function_backward(name, transform):
    compare(lambda lib: transform(lib, _new_style(lib)[name], lib.tensor(X)))


def _dual_grad(lib, f, hooks):
    """The tangent of ``grad(f)(x)`` along ``V``, by a dual tensor and ``autograd.grad``."""
    fw = lib.autograd.forward_ad
    with fw.dual_level():
        x = fw.make_dual(lib.tensor(X, requires_grad=True), lib.tensor(V))
        if hooks:
            with lib.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t):
                y = f(x)
        else:
            y = f(x)
        (g,) = lib.autograd.grad(y, x, create_graph=True)
        return fw.unpack_dual(g).tangent


def _check_dual_grad(f_of_lib, hooks):
    ours, theirs = (
        _dual_grad(staged, f_of_lib(staged), hooks),
        _dual_grad(torch, f_of_lib(torch), hooks),
    )
    assert (ours is None) == (theirs is None), (ours, theirs)
    if theirs is not None:
        close(ours, theirs)


@pytest.mark.parametrize(
    "name, hooks",
    [(name, False) for name in CTX]
    + [
        ("exp_out", True),
        ("cube_in", True),
        ("intermediate", True),
    ],
)
def test_dual_tangent_of_custom_function_gradient(name, hooks):
    _check_dual_grad(lambda lib: _ctx_style(lib)[name], hooks)


def test_dual_tangent_of_primitive_gradient_with_pack_hooks():
    _check_dual_grad(lambda lib: lambda x: x.sin().sum(), hooks=True)


@pytest.mark.parametrize(
    "style, name",
    # torch's vectorized jvp refuses the in-place one ("not modifying ... inplace")
    [(_ctx_style, n) for n in CTX if n != "dirty"] + [(_new_style, n) for n in NEW],
)
def test_functional_hessian_forward_mode(style, name):
    def run(lib):
        f = style(lib)[name]
        return lib.autograd.functional.hessian(
            f, lib.tensor(X), outer_jacobian_strategy="forward-mode", vectorize=True
        )

    compare(run)


def test_hessian_of_saved_output_is_not_zero():
    f = _new_style(staged)["exp_out"]
    h = staged.func.hessian(f)(staged.tensor(X))
    np.testing.assert_allclose(h.numpy(), np.diag(np.exp(X)), rtol=1e-6)


def test_jvp_of_function_writing_its_input_in_place():
    """The input's tangent reaches ``jvp`` (the in-place write in ``forward`` left it)."""

    def run(lib):
        fw = lib.autograd.forward_ad
        with fw.dual_level():
            x = fw.make_dual(lib.tensor(X), lib.tensor(V))
            return fw.unpack_dual(_ctx_style(lib)["dirty"](x)).tangent

    compare(run)


def test_third_derivative_through_nested_levels():
    """Each open level keeps its own tangent of a saved output (a tangent of a tangent is
    the mixed derivative): d3/dx3 of sum(x exp(x)) is (3 + x) exp(x). Against the formula:
    torch 2.13's jvp(jvp(grad)) of a custom Function drops terms of it."""
    J, f = staged.func, _new_style(staged)["exp_times_x"]
    W = np.array([0.5, 1.0, -1.0])

    def hvp(x):
        return J.jvp(J.grad(f), (x,), (staged.tensor(V),))[1]

    got = J.jvp(hvp, (staged.tensor(X),), (staged.tensor(W),))[1]
    np.testing.assert_allclose(got.numpy(), W * V * (3 + X) * np.exp(X), rtol=1e-6)

    def third(lib):
        J = lib.func
        return J.jacfwd(J.jacrev(J.jacrev(_new_style(lib)["exp_times_x"])))(lib.tensor(X))

    compare(third)


def test_grad_of_vmap_of_grad_of_custom_function():
    def run(lib):
        J, f = lib.func, _new_style(lib)["exp_times_x"]
        rows = lib.tensor(np.stack([V, 2 * V]))

        def h(x):
            return J.vmap(lambda w: (J.grad(f)(x) * w).sum())(rows).sum()

        return J.grad(h)(lib.tensor(X))

    compare(run)
