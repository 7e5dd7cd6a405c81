"""``staged.autograd.functional`` against ``torch.autograd.functional``."""

import re

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import staged
import staged.autograd.functional as SF
from tests.checks import assert_close

rng = np.random.default_rng(0)
A, B = rng.standard_normal((3, 2)), rng.standard_normal(2)


def f_two_in_one_out(x, y):
    return ((x @ y).tanh() * x.sum(1)).exp()


def f_two_in_two_out(x, y):
    return (x * y).sigmoid(), (x @ y).sum()


def f_scalar(x, y):
    return ((x @ y).tanh() ** 2).sum() + (x * x).sum() * y.sum()


def args(lib, *arrays):
    return tuple(lib.tensor(a) for a in arrays)


def compare(s, t, **tol):
    if isinstance(t, torch.Tensor):
        assert isinstance(s, staged.Tensor)
        assert_close(s, t, **tol)
    else:
        assert type(s) is type(t) and len(s) == len(t)  # forward mode's lists, as torch's
        for a, b in zip(s, t):
            compare(a, b, **tol)


@pytest.mark.parametrize(
    "func,inputs",
    [(f_two_in_one_out, (A, B)), (f_two_in_two_out, (A, B)), (lambda x: x.exp().sum(1), A)],
)
@pytest.mark.parametrize(
    "kw", [{}, {"vectorize": True}, {"vectorize": True, "strategy": "forward-mode"}]
)
def test_jacobian(func, inputs, kw):
    s_in = args(staged, *inputs) if isinstance(inputs, tuple) else staged.tensor(inputs)
    t_in = args(torch, *inputs) if isinstance(inputs, tuple) else torch.tensor(inputs)
    compare(SF.jacobian(func, s_in, **kw), TF.jacobian(func, t_in, **kw), rtol=1e-10)


@pytest.mark.parametrize("fn", ["vjp", "jvp", "vhp", "hvp"])
def test_products_with_tuple_inputs(fn):
    func = f_scalar if fn in ("vhp", "hvp") else f_two_in_two_out
    v_arrays = (
        (rng.standard_normal((3, 2)), np.array(1.5))
        if fn == "vjp"
        else (rng.standard_normal((3, 2)), rng.standard_normal(2))
    )
    s = getattr(SF, fn)(func, args(staged, A, B), args(staged, *v_arrays))
    t = getattr(TF, fn)(func, args(torch, A, B), args(torch, *v_arrays))
    compare(s, t, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fn", ["vjp", "jvp", "vhp", "hvp"])
def test_create_graph_keeps_the_result_differentiable(fn):
    func = f_scalar if fn in ("vhp", "hvp") else f_two_in_one_out
    v = (np.ones(3),) if fn == "vjp" else (np.ones((3, 2)), np.ones(2))
    grads = []
    for lib, mod in ((staged, SF), (torch, TF)):
        ins = tuple(lib.tensor(a, requires_grad=True) for a in (A, B))
        _, res = getattr(mod, fn)(
            func, ins, args(lib, *v)[0] if fn == "vjp" else args(lib, *v), create_graph=True
        )
        res = res if isinstance(res, tuple) else (res,)
        assert all(r.requires_grad for r in res)
        grads.append(lib.autograd.grad(sum((r**2).sum() for r in res), ins))
    compare(grads[0], grads[1], rtol=1e-9, atol=1e-12)


def test_hessian_of_an_mlp_loss_matches_torch():
    x, y = rng.standard_normal((6, 4)), rng.standard_normal((6, 2))
    w1, w2 = rng.standard_normal((4, 5)) * 0.5, rng.standard_normal((5, 2)) * 0.5

    def loss(lib):
        return lambda a, b: (((lib.tensor(x) @ a).tanh() @ b - lib.tensor(y)) ** 2).mean()

    compare(
        SF.hessian(loss(staged), args(staged, w1, w2)),
        TF.hessian(loss(torch), args(torch, w1, w2)),
        rtol=1e-9,
        atol=1e-12,
    )
    compare(
        SF.hessian(
            loss(staged),
            args(staged, w1, w2),
            outer_jacobian_strategy="forward-mode",
            vectorize=True,
        ),
        TF.hessian(
            loss(torch), args(torch, w1, w2), outer_jacobian_strategy="forward-mode", vectorize=True
        ),
        rtol=1e-9,
        atol=1e-12,
    )


@pytest.mark.parametrize(
    "call,msg",
    [
        (
            lambda m, lib: m.vjp(
                lambda x: x.detach() * 2, lib.tensor(B), lib.tensor(B), strict=True
            ),
            "Output 0 of the user-provided function does not require gradients.",
        ),
        (
            lambda m, lib: m.jacobian(lambda x, y: x * 2, args(lib, B, B), strict=True),
            "Output 0 of the user-provided function is independent of input 1.",
        ),
        (
            lambda m, lib: m.hvp(
                lambda x: (x * 2).sum(), lib.tensor(B), lib.tensor(B), strict=True
            ),
            "While computing the hessian, found that the jacobian of the user-provided function with "
            "respect to input 0 is independent of the input.",
        ),
        (
            lambda m, lib: m.vjp(lambda x: x * 2, lib.tensor(B)),
            "The vector v can only be None if the user-provided function returns a single Tensor "
            "with a single element.",
        ),
        (
            lambda m, lib: m.jvp(lambda x, y: x * y, args(lib, B, B), (lib.tensor(B),)),
            "v is a tuple of invalid length: should be 2 but got 1.",
        ),
        (
            lambda m, lib: m.hvp(lambda x: x * 2, lib.tensor(B), lib.tensor(B)),
            "The Tensor returned by the function given to hvp should contain a single element",
        ),
        (
            lambda m, lib: m.jacobian(lambda x: x, lib.tensor(B), strict=True, vectorize=True),
            "`strict=True` and `vectorized=True` are not supported together.",
        ),
    ],
)
def test_errors_match_torch(call, msg):
    for mod, lib in ((SF, staged), (TF, torch)):
        with pytest.raises(RuntimeError, match=re.escape(msg)):
            call(mod, lib)
    for mod in (SF, TF):
        with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
            mod.jacobian(lambda x: x, [1.0])
