"""Complex numbers end to end against torch 2.13 (the seventeenth trust probe), in
complex64 and complex128, every case run under both libraries from the same inputs:
gradients of real losses of complex leaves (the conjugate Wirtinger convention, dL/dz*)
through ``abs``, ``angle``, ``real``/``imag``, the lazy conjugate bit (``conj`` then an
in-place op on it, ``resolve_conj``, ``is_conj``), ``view_as_real``/``view_as_complex``
and in-place writes through them, ``polar``/``complex``, the elementwise math, the
reductions, ``matmul``/``einsum`` and ``torch.fft``; complex parameters trained by SGD,
Adam/AdamW (torch steps them as ``view_as_real``), RMSprop and Adagrad; a complex
``nn.Linear``; real-complex promotion and the real gradient of the real operand;
``backward`` of a complex non-scalar under a complex cotangent, ``.grad`` accumulation,
hooks and ``retain_grad``; and the errors torch raises (implicit gradients of complex
outputs, views of conjugates, in-place on a leaf's conjugate view). The same steps run
compiled by ``staged.compile`` (llvm-cpu) are compared with torch call for call over
three calls, several checks sharing one compiled step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_raises_like_torch, raises_like_torch

DTYPES = ["complex64", "complex128"]
TOL = {"complex64": (2e-5, 2e-6), "complex128": (1e-10, 1e-12)}


class _Ctx:
    """What one case draws for library ``L`` in complex dtype ``cd``: leaves and constants
    from a seeded NumPy generator, the same for either library."""

    def __init__(self, L, cd: str, seed: int = 0):
        self.L = L
        self.cd = getattr(L, cd)
        self.rd = L.float32 if cd == "complex64" else L.float64
        self.rng = np.random.default_rng(seed)

    def z(self, *shape, grad=True):
        """A complex tensor with moduli in [0.5, 1.5] (away from abs's and log's kinks)."""
        v = self.rng.uniform(0.5, 1.5, shape) * np.exp(1j * self.rng.uniform(-3, 3, shape))
        return self.L.tensor(v, dtype=self.cd, requires_grad=grad)

    def x(self, *shape, lo=-1.0, hi=1.0, grad=True):
        v = self.rng.uniform(lo, hi, shape)
        return self.L.tensor(v, dtype=self.rd, requires_grad=grad)


def _tree(x):
    """Results as comparable Python values: tensors as ``(dtype, shape, values)``."""
    if isinstance(x, (staged.Tensor, torch.Tensor)):
        a = np.array(x.detach().resolve_conj().tolist())
        return (str(x.dtype).rpartition(".")[2], tuple(x.shape), a)
    if isinstance(x, (tuple, list)):
        return [_tree(v) for v in x]
    return x


def _same(ours, want, tol, where="") -> None:
    if isinstance(want, tuple):
        assert isinstance(ours, tuple) and ours[:2] == want[:2], (where, ours, want)
        np.testing.assert_allclose(ours[2], want[2], *tol, err_msg=where)
    elif isinstance(want, list):
        assert isinstance(ours, list) and len(ours) == len(want), (where, ours, want)
        for i, (a, b) in enumerate(zip(ours, want)):
            _same(a, b, tol, f"{where}[{i}]")
    else:
        assert ours == want, (where, ours, want)


def check(case, cd: str) -> None:
    """``case``'s results (tensors, flags) under staged and torch agree."""
    ours, want = (_tree(case(_Ctx(L, cd))) for L in (staged, torch))
    _same(ours, want, TOL[cd])


CASES: dict = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _loss(c, y):
    """A real loss of ``y`` that weighs its real and imaginary parts differently."""
    w = c.z(*y.shape, grad=False) if y.is_complex() else c.x(*y.shape, grad=False)
    return (y * w).real.sum() + y.abs().sum()


# --- abs, angle, real/imag, conj ------------------------------------------------------------


@case
def abs_angle(c):
    z = c.z(5)
    (z.abs() * 2 + z.angle()).sum().backward()
    return z.abs(), z.angle(), z.grad


@case
def real_imag(c):
    z = c.z(2, 3)
    (z.real * 3 - z.imag**2).sum().backward()
    return z.real, z.imag, z.grad


@case
def conj_times_constant(c):
    z, w = c.z(4), c.z(4, grad=False)
    y = z.conj() * w
    _loss(c, y).backward()
    return y, z.grad


@case
def conj_bits(c):
    z = c.z(3, grad=False)
    x = c.x(3, grad=False)
    return [
        z.is_conj(),
        z.conj().is_conj(),
        z.conj().conj().is_conj(),
        z.conj().resolve_conj().is_conj(),
        z.conj_physical().is_conj(),
        x.conj().is_conj(),
        c.L.is_conj(z.conj()),
        z.conj().clone().is_conj(),
        (z.conj() * 1).is_conj(),
        z.conj(),
    ]


@case
def conj_view_inplace_writes_base(c):
    """An in-place op on a non-leaf's conjugate view writes the base (conjugated)."""
    z, w = c.z(4), c.z(4, grad=False)
    a = z * 1
    b = a.conj()
    b.mul_(w)
    flags = [b.is_conj(), a.is_conj()]
    _loss(c, a).backward()
    return flags, a, b, z.grad


@case
def conj_view_inplace_no_grad(c):
    x = c.z(4, grad=False)
    v = x.conj()
    v.add_(1j)
    v[1] = 2 - 3j
    return x, v, v.is_conj()


@case
def resolve_conj_grad(c):
    z, w = c.z(4), c.z(4, grad=False)
    r = z.conj().resolve_conj()
    (r * w).imag.sum().backward()
    return r.is_conj(), r, z.grad


@case
def conj_physical_inplace(c):
    z = c.z(4)
    a = z * 2
    a.conj_physical_()
    _loss(c, a).backward()
    return a, a.is_conj(), z.grad


# --- view_as_real / view_as_complex ---------------------------------------------------------


@case
def view_as_real_grad(c):
    z = c.z(4)
    v = c.L.view_as_real(z)
    (v * c.x(4, 2, grad=False)).sum().backward()
    return v, z.grad


@case
def view_as_complex_grad(c):
    r = c.x(4, 2)
    y = c.L.view_as_complex(r)
    _loss(c, y).backward()
    return y, r.grad


@case
def view_as_real_inplace(c):
    z = c.z(4)
    a = z * 1
    c.L.view_as_real(a)[:, 0].mul_(3)
    c.L.view_as_real(a)[1].zero_()
    _loss(c, a).backward()
    return a, z.grad


@case
def view_as_complex_inplace(c):
    r = c.x(4, 2)
    b = r * 1
    c.L.view_as_complex(b).mul_(c.z(4, grad=False))
    _loss(c, b).backward()
    return b, r.grad


@case
def real_imag_views_inplace(c):
    z, x = c.z(4), c.x(4)
    a = z * 1
    a.real.mul_(2)
    a.imag.add_(x)
    _loss(c, a).backward()
    return a, z.grad, x.grad


@case
def angle_of_real(c):
    x = c.x(5)
    y = x.angle()
    (y * x).sum().backward()
    return y, x.grad


@case
def view_roundtrip(c):
    z = c.z(3)
    y = c.L.view_as_complex(c.L.view_as_real(z) * 2)
    _loss(c, y).backward()
    return y, z.grad


@case
def view_as_real_of_sliced_then_backward(c):
    z = c.z(4, 3)
    v = c.L.view_as_real(z[:, 1])
    (v**2).sum().backward()
    return v, z.grad


# --- polar, complex -------------------------------------------------------------------------


@case
def polar(c):
    r, th = c.x(4, lo=0.5, hi=1.5), c.x(4, lo=-3, hi=3)
    y = c.L.polar(r, th)
    _loss(c, y).backward()
    return y, r.grad, th.grad


@case
def complex_from_parts(c):
    re, im = c.x(2, 3), c.x(2, 3)
    y = c.L.complex(re, im)
    _loss(c, y * y).backward()
    return y, re.grad, im.grad


# --- elementwise math -----------------------------------------------------------------------

UNARY = {
    "exp": lambda z: z.exp(),
    "log": lambda z: z.log(),
    "sqrt": lambda z: z.sqrt(),
    "reciprocal": lambda z: z.reciprocal(),
    "sigmoid": lambda z: z.sigmoid(),
    "tanh": lambda z: z.tanh(),
    "pow_scalar": lambda z: z**2.5,
    "pow_complex_scalar": lambda z: z ** (1 + 0.5j),
    "rpow": lambda z: 2.0**z,
    "square": lambda z: z * z,
    "neg_sub": lambda z: 1 - z,
    "rdiv": lambda z: (1 + 1j) / z,
    "sgn": lambda z: z.sgn(),
}


def _unary(name):
    def run(c):
        z = c.z(2, 3)
        y = UNARY[name](z)
        _loss(c, y).backward()
        return y, z.grad

    return run


for _n in UNARY:
    CASES[f"unary_{_n}"] = _unary(_n)


@case
def mul_div(c):
    a, b = c.z(2, 3), c.z(2, 3)
    y = a * b / (a + 2)
    _loss(c, y).backward()
    return y, a.grad, b.grad


@case
def pow_tensor(c):
    a, b = c.z(2, 3), c.z(2, 3)
    y = a**b
    _loss(c, y).backward()
    return y, a.grad, b.grad


# --- reductions, matmul, einsum -------------------------------------------------------------

REDUCE = {
    "sum": lambda z: z.sum(),
    "sum_dim": lambda z: z.sum(1, keepdim=True),
    "mean": lambda z: z.mean(),
    "mean_dim": lambda z: z.mean(0),
    "prod": lambda z: z.prod(),
    "prod_dim": lambda z: z.prod(1),
    "cumsum": lambda z: z.cumsum(1),
    "cumsum0": lambda z: z.cumsum(0),
}


def _reduce(name):
    def run(c):
        z = c.z(3, 4)
        y = REDUCE[name](z)
        _loss(c, y).backward()
        return y, z.grad

    return run


for _n in REDUCE:
    CASES[f"reduce_{_n}"] = _reduce(_n)


@case
def prod_with_a_zero(c):
    z = c.z(2, 3)
    a = z * c.L.tensor([[1, 0, 1], [1, 1, 1]], dtype=c.cd)
    y = a.prod(1)
    _loss(c, y).backward()
    return y, z.grad


@case
def matmul(c):
    a, b = c.z(2, 3), c.z(3, 4)
    y = a @ b
    _loss(c, y).backward()
    return y, a.grad, b.grad


@case
def matmul_batched_vector(c):
    a, v = c.z(2, 3, 4), c.z(4)
    y = a @ v
    _loss(c, y).backward()
    return y, a.grad, v.grad


@pytest.mark.parametrize("eq", ["ij,jk->ik", "ij,ij->", "ii->i", "bij,bjk->bik"])
@pytest.mark.parametrize("cd", DTYPES)
def test_einsum(eq, cd):
    shapes = {
        "ij,jk->ik": [(2, 3), (3, 2)],
        "ij,ij->": [(2, 3), (2, 3)],
        "ii->i": [(3, 3)],
        "bij,bjk->bik": [(2, 2, 3), (2, 3, 2)],
    }[eq]

    def run(c):
        ops = [c.z(*s) for s in shapes]
        y = c.L.einsum(eq, *ops)
        _loss(c, y).backward()
        return [y] + [o.grad for o in ops]

    check(run, cd)


# --- fft -----------------------------------------------------------------------------------

FFT = {
    "fft": lambda L, z: L.fft.fft(z),
    "fft_n_ortho": lambda L, z: L.fft.fft(z, n=6, norm="ortho"),
    "ifft": lambda L, z: L.fft.ifft(z),
    "ifft_dim0": lambda L, z: L.fft.ifft(z, dim=0, norm="forward"),
    "rfft": lambda L, z: L.fft.rfft(z.real * 1),
    "rfft_n": lambda L, z: L.fft.rfft(z.imag * 1, n=7),
}


def _fft(name):
    def run(c):
        z = c.z(3, 5)
        y = FFT[name](c.L, z)
        _loss(c, y).backward()
        return y, z.grad

    return run


for _n in FFT:
    CASES[f"fft_{_n}"] = _fft(_n)


# --- promotion ------------------------------------------------------------------------------


@case
def real_times_complex(c):
    x, z = c.x(4), c.z(4)
    y = x * z
    _loss(c, y).backward()
    return y, x.grad, z.grad


@case
def real_over_complex_plus(c):
    x, z = c.x(2, 3), c.z(3)
    y = x / z + x
    _loss(c, y).backward()
    return y, x.grad, z.grad


@case
def double_times_complex64(c):
    """float64 with complex64 promotes to complex128 (and the other way round for
    complex128 with float32); each gradient keeps its own leaf's dtype."""
    other = c.L.float64 if c.cd == c.L.complex64 else c.L.float32
    x = c.L.tensor(c.rng.uniform(-1, 1, 3), dtype=other, requires_grad=True)
    z = c.z(3)
    y = x * z
    _loss(c, y).backward()
    return y, x.grad, z.grad


@case
def real_times_python_complex(c):
    x = c.x(3)
    y = x * (2 - 1j) + 1j
    _loss(c, y).backward()
    return y, x.grad


@case
def real_to_complex_cast(c):
    x = c.x(3)
    y = x.to(c.cd) * (1 + 2j)
    _loss(c, y).backward()
    return y, x.grad


# --- backward, accumulation, hooks ----------------------------------------------------------


@case
def backward_complex_nonscalar(c):
    z = c.z(2, 3)
    y = z * z.exp()
    y.backward(c.z(2, 3, grad=False))
    return y, z.grad


@case
def autograd_grad_complex_outputs(c):
    z, w = c.z(3), c.z(3)
    y = z * w
    return c.L.autograd.grad(y, (z, w), c.z(3, grad=False))


@case
def grad_accumulates(c):
    z, w = c.z(3), c.z(3, grad=False)
    z.abs().sum().backward()
    first = z.grad.clone()
    (z * w).imag.sum().backward()
    return first, z.grad


@case
def hooks_see_and_change_grads(c):
    z, w = c.z(3), c.z(3, grad=False)
    seen = []
    z.register_hook(lambda g: seen.append(g.clone()))
    y = z * w
    y.register_hook(lambda g: g * 2j)
    y.retain_grad()
    _loss(c, y).backward()
    return seen, y.grad, z.grad


@case
def retain_grad_real_of_complex(c):
    z = c.z(3)
    r = z.abs()
    r.retain_grad()
    (r * r.exp()).sum().backward()
    return r.grad, z.grad


@case
def double_backward(c):
    z = c.z(3)
    (g,) = c.L.autograd.grad((z * z).abs().sum(), z, create_graph=True)
    (g * g.conj()).real.sum().backward()
    return g, z.grad


@case
def linear(c):
    torch.manual_seed(0)
    ref = torch.nn.Linear(3, 2, dtype=getattr(torch, str(c.cd).rpartition(".")[2]))
    m = c.L.nn.Linear(3, 2, dtype=c.cd)
    if c.L is staged:
        m.load_state_dict(
            {k: staged.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()}
        )
    else:
        m = ref
    x = c.z(4, 3)
    y = m(x)
    _loss(c, y).backward()
    return y, x.grad, m.weight.grad, m.bias.grad


@pytest.mark.parametrize("cd", DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_case(name, cd):
    check(CASES[name], cd)


# --- optimizers -----------------------------------------------------------------------------

OPTS = {
    "SGD": ("SGD", dict(lr=0.1)),
    "SGD-momentum": ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    "SGD-nesterov": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    "Adam": ("Adam", dict(lr=0.05)),
    "Adam-amsgrad": ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
    "AdamW": ("AdamW", dict(lr=0.05, weight_decay=0.1)),
    "RMSprop": ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
    "Adagrad": ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.05)),
    "Adam-maximize": ("Adam", dict(lr=0.05, maximize=True)),
    "RMSprop-plain": ("RMSprop", dict(lr=0.01)),
}


def _train(c, name, steps=3):
    kind, kw = OPTS[name]
    p, t = c.z(4), c.z(4, grad=False)
    opt = getattr(c.L.optim, kind)([p], **kw)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((p - t).abs() ** 2).sum() + (p * t).real.sum()
        loss.backward()
        opt.step()
        out.append([loss, p.detach().clone()])
    return out


@pytest.mark.parametrize("cd", DTYPES)
@pytest.mark.parametrize("name", list(OPTS))
def test_optimizer(name, cd):
    check(lambda c: _train(c, name), cd)


# --- errors ---------------------------------------------------------------------------------


def _z(L, grad=False):
    return L.tensor([1 + 2j, -1j, 0.5], requires_grad=grad)


def _grad_of_complex(reduce):
    def run(L):
        z = _z(L, grad=True)
        y = z * 2
        return L.autograd.grad(y.sum() if reduce else y, z)

    return run


def _real_cotangent(L):
    z = _z(L, grad=True)
    return L.autograd.grad(z * 2, z, L.ones(3))


# name -> (call, torch's words in staged's message: () for the very message)
_IMPLICIT = ("grad can be implicitly created only for scalar outputs",)
ERRORS = {
    "grad_of_complex_scalar": (_grad_of_complex(True), ()),
    "grad_of_complex_nonscalar": (_grad_of_complex(False), _IMPLICIT),
    "backward_complex_scalar": (lambda L: (_z(L, grad=True) * 2).sum().backward(), ()),
    "backward_complex_nonscalar": (lambda L: (_z(L, grad=True) * 2).backward(), _IMPLICIT),
    "view_as_real_of_conj": (lambda L: L.view_as_real(_z(L).conj()), ()),
    "view_as_real_of_real": (lambda L: L.view_as_real(L.ones(3)), ()),
    "view_as_complex_last_dim": (lambda L: L.view_as_complex(L.ones(3, 3)), ()),
    "view_as_complex_of_complex": (lambda L: L.view_as_complex(_z(L).reshape(1, 3)), ()),
    "inplace_on_leaf_conj": (lambda L: _z(L, grad=True).conj().mul_(2), ()),
    "complex_of_mixed": (lambda L: L.complex(L.ones(2), L.ones(2, dtype=L.float64)), ()),
    "polar_of_complex": (lambda L: L.polar(_z(L), _z(L)), ()),
    "mixed_inplace": (lambda L: L.ones(3).mul_(_z(L)), ()),
    "inplace_on_leaf_view_as_real": (
        lambda L: L.view_as_real(_z(L, grad=True)).mul_(2),
        (),
    ),
    "grad_real_grad_output_for_complex": (_real_cotangent, ()),
    "backward_complex_gradient_of_real": (
        lambda L: _z(L, grad=True).abs().backward(_z(L)),
        (),
    ),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error(name):
    call, words = ERRORS[name]
    if words:
        raises_like_torch(call, *words)
    else:
        assert_raises_like_torch(call)


# --- compiled steps -------------------------------------------------------------------------
# Each group builds, for library L, a step, its arguments and what to watch after each call
# (gradients that accumulate across calls, parameters); staged runs the step compiled.
# Three calls of each, against torch's eager run of the same step.


def _real_loss(ys):
    """A real scalar of the tensors ``ys``, the real and imaginary parts weighed apart
    (fixed weights, not drawn inside the step: staged traces it once)."""
    total = 0
    for y in ys:
        total = total + (y * (0.3 - 0.7j if y.is_complex() else 0.3)).real.sum() + y.abs().sum()
    return total


def _elementwise(c):
    z, w = c.z(2, 3), c.z(2, 3)

    def step(z, w):
        ys = [UNARY[n](z) for n in ("exp", "log", "sqrt", "reciprocal", "sigmoid", "tanh")]
        ys += [z**2.5, 2.0**z, z.sgn(), z.abs(), z.angle(), z.real, z.imag, z.conj() * w]
        ys += [z * w / (z + 2), z**w]
        loss = _real_loss(ys)
        loss.backward()
        return loss, ys[0], ys[-1]

    return step, (z, w), lambda: [z.grad, w.grad]


def _reductions(c):
    z, a, b = c.z(3, 4), c.z(2, 3), c.z(3, 4)

    def step(z, a, b):
        L = c.L
        ys = [f(z) for f in REDUCE.values()]
        ys += [a @ b, L.einsum("ij,jk->ik", a, b), L.einsum("ii->i", z[:, :3]), a @ b[:, 0]]
        loss = _real_loss(ys)
        loss.backward()
        return loss, ys[4], ys[-2]

    return step, (z, a, b), lambda: [z.grad, a.grad, b.grad]


def _views(c):
    z, w, r, th = c.z(4), c.z(4, grad=False), c.x(4, 2), c.x(4, lo=0.5, hi=1.5)

    def step(z, w, r, th):
        L = c.L
        a = z * 1
        a.conj().mul_(w)
        v = L.view_as_real(a)
        v[:, 0].mul_(3)
        b = r * 1
        L.view_as_complex(b).mul_(w)
        ys = [a, b, z.conj().resolve_conj() * w, L.polar(th, r[:, 0]), L.complex(r[:, 1], th)]
        ys += [L.view_as_complex(r) * w, L.view_as_real(z * w)]
        loss = _real_loss(ys)
        loss.backward()
        return loss, a, b, [a.conj().is_conj(), z.conj().resolve_conj().is_conj(), r.is_conj()]

    return step, (z, w, r, th), lambda: [z.grad, r.grad, th.grad]


def _fft_group(c):
    z = c.z(3, 5)

    def step(z):
        ys = [f(c.L, z) for f in FFT.values()]
        loss = _real_loss(ys)
        loss.backward()
        return loss, ys[0], ys[4]

    return step, (z,), lambda: [z.grad]


def _promotion(c):
    x, z = c.x(2, 3), c.z(3)
    other = c.L.float64 if c.cd == c.L.complex64 else c.L.float32
    d = c.L.tensor(c.rng.uniform(-1, 1, 3), dtype=other, requires_grad=True)
    torch.manual_seed(0)
    ref = torch.nn.Linear(3, 2, dtype=getattr(torch, str(c.cd).rpartition(".")[2]))
    m = ref
    if c.L is staged:
        m = staged.nn.Linear(3, 2, dtype=c.cd)
        m.load_state_dict(
            {k: staged.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()}
        )

    def step(x, z, d):
        ys = [x * z, x / z + x, d * z, x * (2 - 1j), x.to(c.cd) * (1 + 2j), m(x * z)]
        loss = _real_loss(ys)
        loss.backward()
        return loss, ys[2], ys[-1]

    return step, (x, z, d), lambda: [x.grad, z.grad, d.grad, m.weight.grad, m.bias.grad]


def _nonscalar_hooks(c):
    z, g = c.z(2, 3), c.z(2, 3, grad=False)
    z.register_hook(lambda u: u * (1 - 1j))

    def step(z, g):
        y = z * z.exp()
        y.register_hook(lambda u: u * 2j)
        y.backward(g)
        return y

    return step, (z, g), lambda: [z.grad]


def _optimizers(c):
    params = [c.z(4) for _ in OPTS]
    t = c.z(4, grad=False)
    opts = [getattr(c.L.optim, kind)([p], **kw) for p, (kind, kw) in zip(params, OPTS.values())]

    def step(t):
        for o in opts:
            o.zero_grad()
        loss = sum(((p - t).abs() ** 2).sum() + (p * t).real.sum() for p in params)
        loss.backward()
        for o in opts:
            o.step()
        return loss

    return step, (t,), lambda: params


GROUPS = {
    "elementwise": _elementwise,
    "reductions": _reductions,
    "views": _views,
    "fft": _fft_group,
    "promotion": _promotion,
    "nonscalar_hooks": _nonscalar_hooks,
    "optimizers": _optimizers,
}


def _calls(L, group, cd, n=3):
    step, args, watched = GROUPS[group](_Ctx(L, cd))
    f = staged.compile(step) if L is staged else step
    return [_tree([f(*args), watched()]) for _ in range(n)]


@pytest.mark.parametrize("cd", DTYPES)
@pytest.mark.parametrize("group", list(GROUPS))
def test_compiled(group, cd):
    _same(_calls(staged, group, cd), _calls(torch, group, cd), TOL[cd])


def _compiled_or_eager(L, step):
    return staged.compile(step) if L is staged else step


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_compiled_error(name):
    """The errors raised inside a compiled step are torch's (eager) ones."""
    call, words = ERRORS[name]
    run = lambda L: _compiled_or_eager(L, lambda z: call(L))(L.ones(1))
    if words:
        raises_like_torch(run, *words)
    else:
        assert_raises_like_torch(run)


# name -> step(L, z) raising inside a step over a complex input ``z`` that requires grad
INPUT_ERRORS = {
    "view_as_real_of_conj": lambda L, z: L.view_as_real(z.conj()),
    "grad_of_complex_scalar": lambda L, z: L.autograd.grad((z * 2).sum(), z),
    "backward_complex_scalar": lambda L, z: (z * 2).sum().backward(),
    "inplace_on_leaf_conj": lambda L, z: z.conj().mul_(2),
}


@pytest.mark.parametrize("name", sorted(INPUT_ERRORS))
def test_compiled_error_of_input(name):
    """Over an input of the compiled step (traced, not a constant of it): torch's errors."""
    step = INPUT_ERRORS[name]
    assert_raises_like_torch(
        lambda L: _compiled_or_eager(L, lambda z: step(L, z))(_z(L, grad=True))
    )
