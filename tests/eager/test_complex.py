"""Complex autograd against torch 2.13: values and gradients (dL/dz*, PyTorch's convention)
under a complex cotangent, forward-mode rules of the non-holomorphic ops against central
differences, gradients at z == 0, and the errors PyTorch raises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged.autodiff import REGISTRY, jvp_rule
from tests.checks import assert_close, to_numpy


def cplx(*shape, dtype=np.complex128, seed=0):
    rng = np.random.default_rng(seed + len(shape))
    return (rng.uniform(0.3, 1.5, shape) * np.exp(1j * rng.uniform(-3, 3, shape))).astype(dtype)


def real(*shape):
    return np.random.default_rng(7).uniform(0.3, 1.5, shape)


# name -> (fn(*tensors) usable with staged and torch alike, input arrays)
CASES = {
    "matmul": (lambda a, b: a @ b, [cplx(2, 3), cplx(3, 2)]),
    "sum": (lambda a: a.sum(1), [cplx(2, 3)]),
    "mean": (lambda a: a.mean(), [cplx(2, 3)]),
    "prod": (lambda a: a.prod(1), [cplx(2, 3)]),
    "cumsum": (lambda a: a.cumsum(0), [cplx(3, 2)]),
    "mul_div": (lambda a, b: a * b / (a + 2), [cplx(2, 3), cplx(2, 3)]),
    "pow": (lambda a, b: a**b, [cplx(2, 3), cplx(2, 3)]),
    "pow_scalar": (lambda a: a**3 + a**0.5, [cplx(4)]),
    **{
        n: ((lambda n: lambda a: getattr(a, n)())(n), [cplx(2, 3)])
        for n in (
            "exp",
            "log",
            "sqrt",
            "tanh",
            "sigmoid",
            "sin",
            "cos",
            "tan",
            "sinh",
            "cosh",
            "log2",
            "log10",
            "exp2",
            "square",
            "reciprocal",
            "conj",
            "neg",
            "rsqrt",
            "expm1",
            "log1p",
        )
    },
    # complex in, real out; and sgn
    "abs": (lambda a: a.abs(), [cplx(2, 3)]),
    "angle": (lambda a: a.angle(), [cplx(2, 3)]),
    "real": (lambda a: a.real * 2, [cplx(2, 3)]),
    "imag": (lambda a: a.imag * 2, [cplx(2, 3)]),
    "sgn": (lambda a: a.sgn(), [cplx(2, 3)]),
    "norm": (lambda a: a.norm(), [cplx(2, 3)]),
    "norm_dim": (lambda a: a.norm(dim=1), [cplx(2, 3)]),
    "var": (lambda a: a.var(1), [cplx(2, 4)]),
    # structure
    "where": (lambda a, b: a.where(a.abs() > 1, b), [cplx(2, 3), cplx(2, 3)]),
    "reshape_permute_expand": (
        lambda a: a.reshape(3, 2).permute(1, 0).expand(2, 2, 3),
        [cplx(2, 3)],
    ),
    "getitem": (lambda a: a[1:, ::2], [cplx(3, 4)]),
    # real <-> complex
    "real_to_complex": (lambda x: x.to(_cdtype(x)) * (1 + 2j), [real(2, 3)]),
    "mixed_mul": (lambda x, z: x * z, [real(2, 3), cplx(2, 3)]),
    "abs_of_complex_then_real_ops": (lambda z, x: (z.abs() * x).exp(), [cplx(3), real(3)]),
}


def _cdtype(x):
    return torch.complex128 if isinstance(x, torch.Tensor) else staged.complex128


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_value_and_gradient_match_torch(name, dtype):
    fn, xs = CASES[name]
    real_dtype = np.float32 if dtype is np.complex64 else np.float64
    xs = [x.astype(dtype if x.dtype.kind == "c" else real_dtype) for x in xs]
    ins = [staged.tensor(x, requires_grad=True) for x in xs]
    tins = [torch.tensor(x, requires_grad=True) for x in xs]
    out, tout = fn(*ins), fn(*tins)
    tol = 1e-4 if dtype is np.complex64 else 1e-10
    assert_close(out, tout, tol, tol)
    rng = np.random.default_rng(3)
    u = rng.standard_normal(tuple(tout.shape))
    if tout.is_complex():
        u = u + 1j * rng.standard_normal(tuple(tout.shape))
    u = u.astype(to_numpy(tout).dtype)
    grads = staged.autograd.grad(out, ins, staged.tensor(u))
    tgrads = torch.autograd.grad(tout, tins, torch.tensor(u))
    for g, tg in zip(grads, tgrads):
        assert_close(g, tg, tol * 10, tol * 10)


@pytest.mark.parametrize(
    "name", ["abs", "angle", "real", "imag", "sgn", "exp", "mul", "reduce_prod", "conj", "cumsum"]
)
def test_jvp_matches_central_differences(name):
    """The tangent of the output along a complex direction t: (f(z + e t) - f(z - e t)) / 2e."""
    prim = REGISTRY[name]
    params = {
        "reduce_prod": {"dims": (1,), "keepdim": False},
        "cumsum": {"dim": 1, "reverse": False},
    }.get(name, {})
    zs = [cplx(2, 3, seed=i) for i in range(len(prim.inputs))]
    ts = [cplx(2, 3, seed=10 + i) for i in range(len(prim.inputs))]
    primals = [staged.tensor(z) for z in zs]
    out = prim(*primals, **params)
    got = jvp_rule(prim)(primals, [staged.tensor(t) for t in ts], out, **params)
    eps = 1e-6

    def at(sign):
        return to_numpy(
            prim(*(staged.tensor(z + sign * eps * t) for z, t in zip(zs, ts)), **params)
        )

    assert_close(got, (at(1) - at(-1)) / (2 * eps), 1e-6, 1e-7, check_dtype=False)
    assert got.dtype is out.dtype


@pytest.mark.parametrize("op", ["abs", "angle", "sgn", "norm"])
def test_gradient_at_zero_is_zero(op):
    z = torch.tensor([0j, 1 + 1j], dtype=torch.complex128, requires_grad=True)
    s = staged.tensor(z.detach().numpy(), requires_grad=True)
    (getattr(z, op)().real.sum() if op == "sgn" else getattr(z, op)().sum()).backward()
    (getattr(s, op)().real.sum() if op == "sgn" else getattr(s, op)().sum()).backward()
    assert_close(s.grad, z.grad)
    assert s.grad.numpy()[0] == 0


def test_complex_abs_and_angle_are_real():
    z = staged.tensor(cplx(3, dtype=np.complex64))
    assert z.abs().dtype is staged.float32 and z.angle().dtype is staged.float32
    assert z.real.dtype is staged.float32 and z.imag.dtype is staged.float32


def test_real_and_imag_are_views():
    z = staged.tensor(np.array([1 + 2j, 3 - 1j]))
    z.real.mul_(10)
    z.imag.zero_()
    np.testing.assert_array_equal(z.numpy(), [10, 30])


def test_backward_of_complex_scalar_without_gradient_raises():
    z = staged.tensor(cplx(3), requires_grad=True)
    tz = torch.tensor(cplx(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="real scalar outputs") as err:
        (z * z).sum().backward()
    with pytest.raises(RuntimeError) as terr:
        (tz * tz).sum().backward()
    assert str(err.value) == str(terr.value).replace("torch.", "staged.")  # dtypes' reprs


def test_imag_of_real_and_sign_of_complex_raise_as_torch():
    with pytest.raises(
        RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"
    ):
        staged.tensor([1.0]).imag
    with pytest.raises(NotImplementedError, match="torch.sgn instead"):
        staged.tensor([1j]).sign()


@pytest.mark.parametrize("exponent", [1 + 1j, 2 + 0j, -1j, 0.5 - 1j])
def test_pow_exponent_gradient_at_zero_base_as_torch(exponent):
    """d/dy 0**y is 0 only where the complex y is real and >= 0 (PyTorch's rule), not
    where NumPy's lexicographic order says y >= 0 (1+1j)."""
    grads = []
    for lib in (staged, torch):
        x = lib.tensor([0j, 1 + 2j], dtype=lib.complex128, requires_grad=True)
        y = lib.tensor([exponent, exponent], dtype=lib.complex128, requires_grad=True)
        (x**y).abs().sum().backward()
        grads.append(y.grad)
    assert_close(grads[0], grads[1])


def test_primitive_outside_its_domain_raises_with_the_reason():
    """A primitive bound to a dtype outside its declared domain raises RuntimeError naming
    the primitive, the dtype and why (eagerly and under capture alike)."""
    with pytest.raises(
        RuntimeError,
        match=r"'ge' is not defined for complex64 tensors: complex "
        r"numbers are not ordered",
    ):
        REGISTRY["ge"](staged.tensor([1j]), staged.tensor([1j]))
    with pytest.raises(
        RuntimeError,
        match=r"'exp' is not defined for int64 tensors: .*casts to "
        r"float first",
    ):
        REGISTRY["exp"](staged.tensor([1]))
    with pytest.raises(RuntimeError, match=r"'imag' is not defined for float32"):
        staged.compile(lambda t: REGISTRY["imag"](t))(staged.tensor([1.0]))
