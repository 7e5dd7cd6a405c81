"""VJP rules taking NumPy directly where no graph is built (Note [plain rules] in
staged/eager/dispatch.py): the same gradients, bit for bit, as the rules binding their
primitives, and torch's; under create_graph the rules bind and build a graph."""

import numpy as np
import pytest
import torch

import staged
from staged.autodiff.elementwise import _pow_by_number_grad
from staged.autodiff.primitive import _plain
from staged.autodiff.reduction import _prod_dx_plain, broadcast_back
from staged.eager import dispatch

CASES = {
    "mul": ((5,), (5,), lambda a, b: (a * b).relu() if a.dtype.is_floating_point else a * b),
    "relu": ((2, 3), (2, 3), lambda a, b: (a - b).relu() * b),
    "matmul": ((3, 4), (4, 5), lambda a, b: a @ b),
    "outer_batched": ((2, 3, 1), (2, 1, 5), lambda a, b: a @ b),  # NumPy's einsum branch
    # (every case ends in a full sum) sums over some dims, kept and not
    "sum_dims": (
        (2, 3, 4),
        (3, 1),
        lambda a, b: (a * b).sum((0, 2), keepdim=True) + a.sum(1, keepdim=True),
    ),
    # by one number: torch's pow_backward by a Scalar (0 too), as NumPy (_pow_by_number_grad);
    # a 0-d tensor exponent arrives broadcast as a number does
    "pow_number": (
        (64,),
        (64,),
        lambda a, b: (
            (a**3.0 + a**2 + a.abs() ** 2.5 + a.abs() ** -0.5 + a**0) * b
            + a ** b.abs().sum()
            + a.sum() ** 2.0
        ),  # (0-d: NumPy's scalars)
    ),
    "prod": (
        (2, 3, 4),
        (3, 1),
        lambda a, b: a.prod(1).sum() + (a * b).prod(-1, keepdim=True).sum(),
    ),
}
DTYPES = (np.float32, np.float64, np.complex64)


def _grads(lib, name, dtype, create_graph=False):
    rng = np.random.default_rng(len(name))
    ops = []
    for shape in CASES[name][:2]:
        o = rng.standard_normal(shape)
        ops.append(
            (o + 1j * rng.standard_normal(shape) if dtype is np.complex64 else o).astype(dtype)
        )
    a, b = (lib.tensor(o, requires_grad=True) for o in ops)
    out = CASES[name][2](a, b)
    out = out.abs() if dtype is np.complex64 else out
    ga, gb = lib.autograd.grad(out.sum(), (a, b), create_graph=create_graph)
    return a, b, ga, gb


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CASES)
def test_same_gradients_as_the_bound_rules(name, dtype):
    if name == "relu" and dtype is np.complex64:
        pytest.skip("relu is real")
    taken = []

    def counting(fn, args, params):
        r = dispatch.plain(fn, args, params)
        taken.append((fn, r is not None))
        return r

    try:
        _plain[0] = counting
        fast = [np.asarray(g) for g in _grads(staged, name, dtype)[2:]]
        _plain[0] = lambda fn, args, params: None  # every rule binds its primitives
        bound = [np.asarray(g) for g in _grads(staged, name, dtype)[2:]]
    finally:
        _plain[0] = dispatch.plain
    assert (broadcast_back, True) in taken  # the final sum's
    if name == "prod":
        assert (_prod_dx_plain, True) in taken
    if name == "pow_number":
        assert (_pow_by_number_grad, True) in taken  # (complex64's: of a.abs())
    if name == "mul":  # a complex operand binds: conj
        assert ((np.multiply, True) in taken) is (dtype is not np.complex64)
    want = [g.numpy() for g in _grads(torch, name, dtype)[2:]]
    for f, b, w in zip(fast, bound, want):
        assert f.tobytes() == b.tobytes() and f.strides == b.strides
        np.testing.assert_allclose(f, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["mul", "matmul"])
def test_create_graph_builds_a_graph(name):
    a, b, ga, gb = _grads(staged, name, np.float64, create_graph=True)
    assert ga.grad_fn is not None and gb.grad_fn is not None
    ta, tb, tga, tgb = _grads(torch, name, np.float64, create_graph=True)
    staged.autograd.backward([(ga * ga).sum(), (gb * gb).sum()])
    torch.autograd.backward([(tga * tga).sum(), (tgb * tgb).sum()])
    np.testing.assert_allclose(np.asarray(a.grad), ta.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(b.grad), tb.grad.numpy(), rtol=1e-10)


def test_a_hook_sees_sums_gradient_as_torchs_but_not_as_a_view():
    seen = {}
    for lib in (staged, torch):
        x = lib.ones(4, requires_grad=True)
        y = x * 2

        def hook(g, lib=lib):
            seen[lib.__name__] = (g.tolist(), g.stride(), g._is_view())
            with pytest.raises(RuntimeError, match="more than one element of the written-to"):
                g.add_(1)

        y.register_hook(hook)
        y.sum().backward()
        assert x.grad.tolist() == [2.0] * 4
    assert seen["staged"] == ([1.0] * 4, (0,), False)  # Note [plain rules]
    assert seen["torch"] == ([1.0] * 4, (0,), True)
