"""The derivatives of the complex elementwise functions against torch's: gradients (the
conjugate Wirtinger convention), second order and forward mode, at points off every
branch cut. asinh's and acosh's gradients were f'(z), not its conjugate (the fuzzer's
``asinh(complex(x, x))``), and acosh's took sqrt(z^2 - 1)'s branch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import staged
import staged.autograd.forward_ad as sfw

NAMES = (
    "asinh acosh atanh asin acos atan sinh cosh tanh sin cos tan exp exp2 expm1 log log2 "
    "log10 log1p sqrt rsqrt reciprocal sigmoid square sinc angle abs sgn neg"
).split()
POINTS = [0.4 + 0.3j, -0.7 + 0.6j, 0.5 - 0.8j, 1.3 + 0.9j, -1.5 - 0.4j, 2.0 - 1.5j]
COTANGENTS = [0.3 - 0.7j, 1.0, 1j, -0.2 + 0.1j, 0.5 + 0.5j, -1.0]


def _derivatives(lib, fw, name):
    z = lib.tensor(POINTS, dtype=lib.complex128, requires_grad=True)
    y = getattr(lib, name)(z)
    c = lib.tensor(COTANGENTS, dtype=y.dtype) if y.is_complex() else lib.ones_like(y)
    (g,) = lib.autograd.grad(y, z, c, create_graph=True)
    s = (g * g.conj()).real.sum()
    # a constant gradient (neg's) has no graph: its derivative is zero
    g2 = lib.autograd.grad(s, z)[0] if s.requires_grad else lib.zeros_like(z)
    with fw.dual_level():
        t = fw.unpack_dual(getattr(lib, name)(fw.make_dual(z.detach(), c.to(z.dtype)))).tangent
    return [np.asarray(v.detach().resolve_conj()) for v in (g, g2, t)]


@pytest.mark.parametrize("name", NAMES)
def test_complex_derivatives_match_torch(name):
    got, want = _derivatives(staged, sfw, name), _derivatives(torch, tfw, name)
    for what, a, b in zip(("gradient", "second order", "tangent"), got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=what)


def test_real_acosh_gradient_is_torchs_below_minus_one():
    got, want = (
        lib.autograd.grad(lib.acosh(x), x)[0].item()
        for lib, x in (
            (lib, lib.tensor(-2.0, dtype=lib.float64, requires_grad=True))
            for lib in (staged, torch)
        )
    )
    assert got == pytest.approx(want) == 1 / np.sqrt(3)
