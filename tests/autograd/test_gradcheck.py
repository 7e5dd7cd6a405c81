"""gradcheck / gradgradcheck: what torch 2.13's accept, they accept; what it rejects, they
reject with the same error."""

import importlib
import re
import warnings

import numpy as np
import pytest
import torch

import staged
from staged.autograd import GradcheckError, gradcheck, gradgradcheck

TGradcheckError = importlib.import_module("torch.autograd.gradcheck").GradcheckError

rng = np.random.default_rng(0)
A, B = rng.random((3, 2)), rng.random(2)
Z = rng.random(3) + 1j * rng.random(3)


def leaves(lib, *arrays):
    return tuple(lib.tensor(a, requires_grad=True) for a in arrays)


def mlp(x, w):
    return ((x @ w).tanh() * x.sum(1)).exp()


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize(
    "func,inputs",
    [
        (mlp, (A, B)),
        (lambda z: (z * z).exp(), (Z,)),  # holomorphic
        (lambda z: (z * z.conj()).sin(), (Z,)),  # not holomorphic, complex output
        (lambda z: (z * z).exp().abs(), (Z,)),  # complex input, real output
    ],
)
def test_correct_gradients_pass(func, inputs, fast_mode):
    for lib, check in ((staged, gradcheck), (torch, torch.autograd.gradcheck)):
        assert check(func, leaves(lib, *inputs), fast_mode=fast_mode)
    for lib, check in ((staged, gradgradcheck), (torch, torch.autograd.gradgradcheck)):
        assert check(func, leaves(lib, *inputs), fast_mode=fast_mode)


def _bad(lib, conj):
    class Bad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * 2 * (a if conj else a.exp())  # wrong: exp, or the missing conj

    return Bad


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("array,conj", [(B, True), (Z, True)])
def test_wrong_gradients_fail_like_torch(array, conj, fast_mode):
    wrong_real = array.dtype.kind == "f"
    for lib, check in ((staged, gradcheck), (torch, torch.autograd.gradcheck)):
        F = _bad(lib, conj=not wrong_real)
        x = leaves(lib, array)
        with pytest.raises(
            GradcheckError if lib is staged else TGradcheckError,
            match="Jacobian mismatch for output 0 with respect to input 0,",
        ):
            check(F.apply, x, fast_mode=fast_mode)
        assert check(F.apply, x, fast_mode=fast_mode, raise_exception=False) is False
        if not wrong_real and not fast_mode:
            with pytest.raises(Exception, match="While considering the .* part of complex"):
                check(F.apply, x)
    assert issubclass(GradcheckError, RuntimeError)
    assert importlib.import_module("staged.autograd.gradcheck").GradcheckError is GradcheckError


def test_tolerances_and_eps_are_used():
    def sloppy(lib):
        class Sloppy(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2.01

        return Sloppy

    for lib, check in ((staged, gradcheck), (torch, torch.autograd.gradcheck)):
        x = leaves(lib, B)
        assert not check(sloppy(lib).apply, x, raise_exception=False)
        assert check(sloppy(lib).apply, x, rtol=1e-2)
        assert check(sloppy(lib).apply, x, atol=1e-2, rtol=0)
        assert check(lambda a: a.exp(), x, eps=1e-4, atol=1e-4)


def test_input_checks_match_torch():
    for lib, check in ((staged, gradcheck), (torch, torch.autograd.gradcheck)):
        msg = (
            "gradcheck expects at least one input tensor to require gradient, but none of "
            "them have requires_grad=True."
        )
        with pytest.raises(ValueError, match=re.escape(msg)):
            check(lambda a: a * 2, (lib.tensor(B),))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check(
                lambda a: a * 2,
                (lib.tensor(B.astype(np.float32), requires_grad=True),),
                atol=1e-2,
                rtol=1e-2,
            )
        assert any(
            "Input #0 requires gradient and is not a double precision floating point"
            in str(w.message)
            for w in caught
        )


def test_gradgradcheck_finds_a_wrong_double_backward():
    def build(lib):
        class Square(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a * a

            @staticmethod
            def backward(ctx, g):
                (a,) = ctx.saved_tensors
                return g * 2 * a.detach()  # first order right, second order wrong

        return Square

    for lib, check, ggcheck in (
        (staged, gradcheck, gradgradcheck),
        (torch, torch.autograd.gradcheck, torch.autograd.gradgradcheck),
    ):
        x = leaves(lib, B)
        assert check(build(lib).apply, x)
        assert not ggcheck(build(lib).apply, x, raise_exception=False)


def test_zero_dim_inputs_and_outputs_check():
    """A 0-d input's perturbed copy was a NumPy scalar (``generic.__array__()`` failed)."""
    a = staged.tensor(1.5, dtype=staged.float64, requires_grad=True)
    assert staged.autograd.gradcheck(lambda a: a * a, (a,))
    assert staged.autograd.gradgradcheck(lambda a: (a * a * a).sum(), (a,))


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize(
    "func,inputs",
    [
        (mlp, (A, B)),
        (lambda z: (z * z).exp(), (Z,)),
        (lambda z: (z * z.conj()).sin(), (Z,)),
        (lambda z: (z * z).exp().abs(), (Z,)),
        (lambda x, z: (x.sin(), (z * x[:, 0]).exp()), (A, Z)),  # real and complex inputs
    ],
)
def test_forward_ad_checks_pass_where_torch_s_pass(func, inputs, fast_mode):
    for lib, check in ((staged, gradcheck), (torch, torch.autograd.gradcheck)):
        x = leaves(lib, *inputs)
        assert check(func, x, fast_mode=fast_mode, check_forward_ad=True)
        assert check(func, x, fast_mode=fast_mode, check_forward_ad=True, check_backward_ad=False)


def _wrong_jvp(lib, array):
    class WrongJvp(lib.autograd.Function):  # a right backward, a wrong jvp
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return t * 3

    return WrongJvp.apply, leaves(lib, array)


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("array", [B, Z], ids=["real", "complex"])
def test_a_wrong_jvp_fails_like_torch_only_when_forward_ad_is_checked(array, fast_mode):
    for lib, check in ((staged, gradcheck), (torch, torch.autograd.gradcheck)):
        f, x = _wrong_jvp(lib, array)
        assert check(f, x, fast_mode=fast_mode)  # backward alone: right
        with pytest.raises(
            GradcheckError if lib is staged else TGradcheckError,
            match="Jacobian computed with forward mode mismatch for output 0 with respect to "
            "input 0,",
        ):
            check(f, x, fast_mode=fast_mode, check_forward_ad=True)
        assert not check(f, x, check_forward_ad=True, raise_exception=False)
        with pytest.raises(AssertionError, match="Expected at least one of check_forward_ad"):
            check(f, x, check_backward_ad=False)
