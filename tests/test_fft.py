"""staged.fft against torch.fft: values, dtypes, gradients (torch's Hermitian conventions
for rfft, irfft, hfft and their n-dimensional forms), double backward, forward mode,
vmap, the three Fused kernels against their decompositions (what captured steps
compile), compiled steps, torch's errors, and ``import torch.fft`` under the shim."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import staged
from staged.autodiff import FUSED
from tests.checks import assert_raises_like_torch, raises_like_torch, to_numpy

# float32: pocketfft's and the DFT matmul's rounding, a few eps of sums of |x| ~ 10
TOL = {"float32": 2e-5, "float64": 1e-12}
COMPLEX = {"float32": np.complex64, "float64": np.complex128}
REAL_ONLY = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}

# (function, keyword arguments) over inputs of shape (3, 6, 5)
CASES = [
    ("fft", {}),
    ("fft", {"n": 8, "dim": 1, "norm": "ortho"}),
    ("ifft", {"n": 3, "dim": 0, "norm": "forward"}),
    ("rfft", {}),
    ("rfft", {"n": 8, "dim": 1, "norm": "forward"}),
    ("irfft", {}),
    ("irfft", {"n": 9, "dim": 1, "norm": "ortho"}),
    ("irfft", {"n": 4}),
    ("hfft", {"dim": 0}),
    ("hfft", {"n": 7, "norm": "forward"}),
    ("ihfft", {"n": 9, "norm": "ortho"}),
    ("ihfft", {"dim": 1}),
    ("fft2", {}),
    ("ifft2", {"s": (4, 8), "norm": "ortho"}),
    ("fftn", {"norm": "forward"}),
    ("ifftn", {"s": (2, -1), "dim": (0, 2)}),
    ("rfft2", {"s": (7, 4)}),
    ("rfftn", {"dim": (2, 0), "norm": "ortho"}),
    ("irfft2", {}),
    ("irfftn", {"s": (5, 7), "norm": "forward"}),
    ("irfftn", {"dim": (0, 1)}),
    ("hfft2", {"norm": "ortho"}),
    ("hfftn", {"s": (3, 4, 9)}),
    ("ihfft2", {"s": (5, 5), "norm": "forward"}),
    ("ihfftn", {"dim": (0, 2)}),
]
INPUTS = [
    (name, kw, kind)
    for name, kw in CASES
    for kind in (("real",) if name in REAL_ONLY else ("real", "complex"))
]


def _data(rng, shape, kind, dtype):
    x = rng.standard_normal(shape)
    if kind == "complex":
        return (x + 1j * rng.standard_normal(shape)).astype(COMPLEX[dtype])
    return x.astype(dtype)


def _like(rng, t):
    """A random cotangent of the shape and dtype of ``t`` (staged's or torch's)."""
    a = to_numpy(t)
    kind = "complex" if a.dtype.kind == "c" else "real"
    return _data(rng, a.shape, kind, a.real.dtype.name)


def _close(ours, theirs, tol):
    a, b = to_numpy(ours), to_numpy(theirs)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, kw, kind", INPUTS, ids=lambda v: str(v))
def test_values_and_gradients_are_torchs(name, kw, kind, dtype):
    """Values, dtypes, the gradient for a random cotangent, and the double backward (the
    gradient's own gradient with respect to the cotangent), against torch."""
    rng = np.random.default_rng(0)
    x = _data(rng, (3, 6, 5), kind, dtype)
    ours, theirs = staged.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, tout = getattr(staged.fft, name)(ours, **kw), getattr(torch.fft, name)(theirs, **kw)
    _close(out, tout, TOL[dtype])
    g = _like(rng, tout)
    sg, tg = staged.tensor(g, requires_grad=True), torch.tensor(g, requires_grad=True)
    (gx,) = staged.autograd.grad(out, [ours], sg, create_graph=True)
    (tgx,) = torch.autograd.grad(tout, [theirs], tg, create_graph=True)
    _close(gx, tgx, TOL[dtype])
    v = _like(rng, tgx)
    (gg,) = staged.autograd.grad(gx, [sg], staged.tensor(v))
    (tgg,) = torch.autograd.grad(tgx, [tg], torch.tensor(v))
    _close(gg, tgg, TOL[dtype])


@pytest.mark.parametrize("n", [6, 7])
def test_irfft_gradient_treats_its_input_as_a_half_spectrum(n):
    """torch's convention: bins standing for two (all but 0 and, for even n, n / 2) get
    twice the gradient; the imaginary parts irfft ignores get none."""
    rng = np.random.default_rng(1)
    x = _data(rng, (4,), "complex", "float64")
    ours = staged.tensor(x, requires_grad=True)
    g = rng.standard_normal(n)
    staged.fft.irfft(ours, n=n).backward(staged.tensor(g))
    theirs = torch.tensor(x, requires_grad=True)
    torch.fft.irfft(theirs, n=n).backward(torch.tensor(g))
    _close(ours.grad, theirs.grad, 1e-12)
    spectrum = np.fft.rfft(g) / n  # the adjoint of the 1/n-scaled inverse
    weights = [1, 2, 2, 1] if n == 6 else [1, 2, 2, 2]
    np.testing.assert_allclose(ours.grad.numpy(), weights * spectrum, rtol=1e-12, atol=1e-15)
    assert ours.grad.numpy()[0].imag == 0 and (n == 7 or ours.grad.numpy()[3].imag == 0)


@pytest.mark.parametrize(
    "name, kind", [("fft", "complex"), ("rfft", "real"), ("irfft", "complex"), ("hfft", "real")]
)
def test_gradcheck(name, kind):
    x = staged.tensor(_data(np.random.default_rng(2), (3, 5), kind, "float64"), requires_grad=True)
    fn = getattr(staged.fft, name + "n")
    assert staged.autograd.gradcheck(fn, (x,))
    assert staged.autograd.gradgradcheck(fn, (x,))


# each kernel through a public call that reaches it first, on an operand of its kind
KERNELS = {
    "fft_c2c": (lambda x: staged.fft.fftn(x, dim=(0, 2), norm="ortho"), "complex"),
    "fft_r2c": (lambda x: staged.fft.rfftn(x, s=(3, 7), dim=(0, 2)), "real"),
    "fft_c2r": (lambda x: staged.fft.irfftn(x, s=(2, 9), dim=(2, 0), norm="forward"), "complex"),
}


def test_every_kernel_is_checked():
    assert {name for name in FUSED if name.startswith("fft_")} == set(KERNELS)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_equals_its_decomposition(name, dtype):
    """The NumPy kernel (eager, one Node) and its decomposition (what forward mode,
    vmap and captured steps run): values, gradients and double backward."""
    rng = np.random.default_rng(3)
    fn, kind = KERNELS[name]
    x = staged.tensor(_data(rng, (3, 4, 5), kind, dtype), requires_grad=True)
    out = fn(x)
    assert out.grad_fn.prim is FUSED[name]
    g = staged.tensor(_like(rng, out), requires_grad=True)
    (gx,) = staged.autograd.grad(out, [x], g, create_graph=True)
    with staged.autograd.forward_ad.dual_level():  # decomposes every kernel
        ref = fn(x)
        assert getattr(ref.grad_fn, "prim", None) is not FUSED[name]
        (ref_gx,) = staged.autograd.grad(ref, [x], g, create_graph=True)
    for a, b in ((out, ref), (gx, ref_gx)):
        _close(a.detach(), b.detach(), TOL[dtype])
    v = staged.tensor(_like(rng, gx))
    (gg,) = staged.autograd.grad(gx, [g], v)
    (ref_gg,) = staged.autograd.grad(ref_gx, [g], v)
    _close(gg, ref_gg, TOL[dtype])


@pytest.mark.parametrize(
    "name, kind",
    [("fft", "complex"), ("rfft2", "real"), ("irfft", "complex"), ("hfftn", "complex")],
)
def test_forward_mode_is_torchs(name, kind):
    rng = np.random.default_rng(4)
    x, t = (_data(rng, (3, 6), kind, "float64") for _ in range(2))
    fwd = staged.autograd.forward_ad
    with fwd.dual_level():
        dual = fwd.make_dual(staged.tensor(x), staged.tensor(t))
        tangent = fwd.unpack_dual(getattr(staged.fft, name)(dual)).tangent
    _, theirs = torch.func.jvp(getattr(torch.fft, name), (torch.tensor(x),), (torch.tensor(t),))
    _close(tangent, theirs, 1e-12)


def test_vmap():
    x = staged.randn(4, 3, 6, dtype=staged.float64)
    batched = staged.func.vmap(lambda r: staged.fft.rfft(r, dim=0))(x)
    _close(batched, staged.fft.rfft(x, dim=1), 1e-12)


def test_compiled_step_is_eagers():
    """A step that filters in frequency space, with its backward, compiled (the DFT as
    matmuls with constant matrices, complex ones included)."""
    rng = np.random.default_rng(5)
    x = staged.tensor(rng.standard_normal((4, 16)).astype(np.float32), requires_grad=True)
    mask = staged.tensor((np.arange(9) < 5).astype(np.float32))

    def step(x):
        low = staged.fft.irfft(staged.fft.rfft(x, norm="ortho") * mask, n=16, norm="ortho")
        loss = (low - x).pow(2).sum() + staged.fft.fft2(x).abs().mean()
        loss.backward()
        return loss

    eager = step(x)
    eager_grad, x.grad = x.grad, None
    compiled = staged.compile(step)(x)
    np.testing.assert_allclose(compiled.item(), eager.item(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), eager_grad.numpy(), rtol=1e-4, atol=1e-5)


def test_dtypes():
    ints = staged.arange(6)
    assert staged.fft.fft(ints).dtype is staged.complex64
    assert staged.fft.irfft(staged.ones(4, dtype=staged.bool)).dtype is staged.float32
    assert staged.fft.rfft(ints.double()).dtype is staged.complex128
    assert staged.fft.hfft(ints.to(staged.complex128)).dtype is staged.float64
    previous = staged.get_default_dtype()
    staged.set_default_dtype(staged.float64)
    try:
        assert staged.fft.fft(ints).dtype is staged.complex128
        assert staged.fft.fftfreq(4).dtype is staged.float64
    finally:
        staged.set_default_dtype(previous)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.fft.fft(lib.ones(3, 4), n=0),
        lambda lib: lib.fft.ifft(lib.ones(3, 4), n=-1),
        lambda lib: lib.fft.fft(lib.ones(3, 4), dim=2),
        lambda lib: lib.fft.rfft(lib.ones(3, 4), dim=-3),
        lambda lib: lib.fft.fft(lib.tensor(1.0)),
        lambda lib: lib.fft.fft(lib.ones(3, 4), norm="foo"),
        lambda lib: lib.fft.fft(lib.ones(4, dtype=lib.float16)),
        lambda lib: lib.fft.rfft(lib.ones(4, dtype=lib.complex64)),
        lambda lib: lib.fft.ihfft(lib.ones(4, dtype=lib.complex64)),
        lambda lib: lib.fft.rfftn(lib.ones(2, 4, dtype=lib.complex64)),
        lambda lib: lib.fft.rfft2(lib.ones(2, 4, dtype=lib.complex128)),
        lambda lib: lib.fft.ihfftn(lib.ones(2, 4, dtype=lib.complex64)),
        lambda lib: lib.fft.irfft(lib.ones(3, 1)),
        lambda lib: lib.fft.hfft(lib.ones(3, 4), n=0),
        lambda lib: lib.fft.fftn(lib.ones(3, 4), s=(2, 3, 4)),
        lambda lib: lib.fft.fftn(lib.ones(3, 4), s=(2, 3), dim=(0,)),
        lambda lib: lib.fft.fftn(lib.ones(3, 4), dim=(0, -2)),
        lambda lib: lib.fft.ifftn(lib.ones(3, 4), dim=(5,)),
        lambda lib: lib.fft.fftn(lib.ones(3, 4), s=(0, 3)),
        lambda lib: lib.fft.fftn(lib.ones(3, 4), s=(-2, 3)),
        lambda lib: lib.fft.fft2(lib.ones(4)),
        lambda lib: lib.fft.rfftn(lib.tensor(1.0)),
        lambda lib: lib.fft.irfftn(lib.ones(3, 4), dim=()),
        lambda lib: lib.fft.irfftn(lib.ones(3, 1), s=(3, -1)),
        lambda lib: lib.fft.fftfreq(-1),
        lambda lib: lib.fft.rfftfreq(4, dtype=lib.int64),
        lambda lib: lib.fft.fftshift(lib.tensor(1.0)),
        lambda lib: lib.fft.ifftshift(lib.ones(3, 4), dim=3),
    ],
)
def test_errors_are_torchs(call):
    assert_raises_like_torch(call)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda lib: lib.fft.fft(lib.ones(4), n=2.0), ["'n' must be int, not float"]),
        (lambda lib: lib.fft.fft(lib.ones(4), dim=1.0), ["'dim' must be int, not float"]),
        (lambda lib: lib.fft.fftfreq(4, dtype=lib.complex64), ["not implemented for"]),
    ],
)
def test_errors_like_torchs(call, words):
    raises_like_torch(call, *words)


def test_no_dims_to_transform_is_a_copy():
    """As torch: fftn over no dims (a 0-d input, or ``dim=()``) promotes and copies."""
    x = staged.ones(3, 4, dtype=staged.complex64)
    y = staged.fft.fftn(x, dim=())
    assert y is not x and y.equal(x)
    assert staged.fft.ifftn(staged.tensor(2.0)).dtype is staged.complex64


@pytest.mark.parametrize("n, d", [(0, 1.0), (1, 1.0), (8, 0.1), (9, 2.5), (7, 0.3), (5, -0.7)])
@pytest.mark.parametrize("dtype", [None, "float64"])
def test_frequencies_are_torchs(n, d, dtype):
    for name in ("fftfreq", "rfftfreq"):
        ours = getattr(staged.fft, name)(n, d, dtype=dtype and getattr(staged, dtype))
        theirs = getattr(torch.fft, name)(n, d, dtype=dtype and getattr(torch, dtype))
        _close(ours, theirs, 0)
    assert staged.fft.rfftfreq(4, requires_grad=True).requires_grad


@pytest.mark.parametrize("dim", [None, 0, (1, -1), [2]])
@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
def test_shifts_are_torchs(name, dim):
    x = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    ours = getattr(staged.fft, name)(staged.tensor(x, requires_grad=True), dim)
    theirs = getattr(torch.fft, name)(torch.tensor(x), dim)
    _close(ours, theirs, 0)
    assert ours.requires_grad


def test_node_names_are_torchs():
    c = torch.ones(4, dtype=torch.complex64, requires_grad=True)
    r = torch.ones(4, requires_grad=True)
    for name, x in (("fft", c), ("rfft", r), ("irfft", c)):
        ours = getattr(staged.fft, name)(staged.tensor(x.detach().numpy(), requires_grad=True))
        assert ours.grad_fn.name() == getattr(torch.fft, name)(x).grad_fn.name()


def test_module_is_exposed_as_torchs():
    from staged import fft

    assert fft is staged.fft and "rfft" in fft.__all__
    code = (
        "import staged; staged.as_torch()\n"
        "import torch, torch.fft\n"
        "from torch.fft import rfft\n"
        "print(torch.fft is staged.fft, rfft(torch.ones(4)).tolist())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split(maxsplit=1) == ["True", "[(4+0j), 0j, 0j]\n"], out.stderr


def test_a_compiled_transform_gives_no_warning():
    """The DFT matrices are cached read-only: wrapping one gave from_numpy's warning about
    a user's non-writable array (an error under -W error) in every compiled FFT or stft."""
    import warnings

    x = staged.randn(4, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        staged.compile(lambda t: staged.fft.rfft(t).abs().sum())(x)
        staged.compile(lambda t: staged.fft.ifft(staged.fft.fft(t)).real.sum())(x)
