"""The math entries of the op database (tests/ops/db/math.py) against torch 2.13: forward
values and dtypes, gradients under a random cotangent, and (float64) finite differences;
then the gradient rules at non-differentiable points, dtypes and erf's accuracy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import staged
from staged.autodiff.polynomials import POLYNOMIALS
from tests.checks import assert_close, check_grads, compare_with_torch, message, to_numpy
from tests.ops.db.math import ENTRIES

TOL = {
    "float16": (2e-3, 2e-3),
    "float32": (1e-5, 1e-6),
    "float64": (1e-10, 1e-12),
    "complex64": (1e-5, 1e-6),
    "complex128": (1e-10, 1e-12),
    **dict.fromkeys(("int64", "int32", "int8", "uint8", "bool"), (0, 0)),
}
CASES = [(e, d) for e in ENTRIES for d in e.dtypes]


def _convert(sample, make):
    def conv(a):
        return make(a) if isinstance(a, np.ndarray) else a

    return [conv(a) for a in sample.args], {k: conv(v) for k, v in sample.kwargs.items()}


def _tensors(args, kwargs):
    return [
        a
        for a in list(args) + list(kwargs.values())
        if isinstance(a, (staged.Tensor, torch.Tensor)) and a.requires_grad
    ]


@pytest.mark.parametrize("entry,dtype", CASES, ids=[f"{e.name}-{d}" for e, d in CASES])
def test_forward_and_vjp_match_torch(entry, dtype):
    rtol, atol = (
        entry.rtol if entry.rtol is not None else TOL[dtype][0],
        entry.atol if entry.atol is not None else TOL[dtype][1],
    )
    grad = entry.differentiable and np.dtype(dtype).kind in "fc"
    rng = np.random.default_rng(0)
    for sample in entry.samples(dtype, rng):
        args, kwargs = _convert(
            sample, lambda a: staged.tensor(a, requires_grad=grad and a.dtype.kind in "fc")
        )
        targs, tkwargs = _convert(
            sample, lambda a: torch.tensor(a, requires_grad=grad and a.dtype.kind in "fc")
        )
        out, tout = entry.op(*args, **kwargs), entry.torch_op(*targs, **tkwargs)
        assert_close(out, tout, rtol, atol)
        assert out.requires_grad == tout.requires_grad, sample.name
        if not grad or not tout.numel():
            continue
        u = rng.standard_normal(tuple(tout.shape)).astype(to_numpy(tout).dtype)
        grads = staged.autograd.grad(
            out, _tensors(args, kwargs), staged.tensor(u), allow_unused=True
        )
        tgrads = torch.autograd.grad(
            tout, _tensors(targs, tkwargs), torch.tensor(u), allow_unused=True
        )
        for g, tg in zip(grads, tgrads):
            if tg is None and g is not None:  # torch's undefined gradient (slogdet's sign,
                assert not g.numpy().any(), sample.name  # ord=0 norms): staged's zeros
                continue
            assert (g is None) == (tg is None), sample.name
            if g is not None:  # torch answers some zero gradients with a ZeroTensor
                tg = torch.zeros_like(tg) if tg._is_zerotensor() else tg
                assert_close(g, tg, rtol * 10, atol * 10)


FD = [
    e
    for e in ENTRIES
    if e.differentiable and "float64" in e.dtypes and not e.skip_reason("fd", "float64")
]


@pytest.mark.parametrize("entry", FD, ids=[e.name for e in FD])
def test_vjp_matches_finite_differences(entry):
    rng = np.random.default_rng(1)
    for sample in entry.samples("float64", rng):
        arrays = [
            a for a in list(sample.args) + list(sample.kwargs.values()) if isinstance(a, np.ndarray)
        ]
        if not all(a.size for a in arrays):
            continue

        def f(*ts):
            it = iter(ts)
            args, kwargs = _convert(sample, lambda a: next(it))
            return entry.op(*args, **kwargs)

        check_grads(f, arrays)


# --- gradients at non-differentiable points (the seed's rules), against torch -------------
KINKS = {
    "relu at 0": (lambda x: x.relu(), [0.0, -0.0, 1.0]),
    "sqrt at 0 is inf": (lambda x: x.sqrt(), [0.0, 4.0]),
    "abs at 0": (lambda x: x.abs(), [0.0, -0.0, -2.0]),
    "clamp at bounds": (lambda x: x.clamp(-1.0, 1.0), [-1.0, 1.0, 0.5, 2.0]),
    "clamp tensor bounds": (lambda x: x.clamp(x * 0 - 1, x * 0 + 1), [-1.0, 1.0, 3.0]),
    "amax ties split": (lambda x: x.amax(), [2.0, 2.0, 1.0]),
    "amin ties split": (lambda x: x.reshape(2, 2).amin(1), [1.0, 1.0, 0.0, 3.0]),
    "max with dim: chosen index": (lambda x: x.reshape(2, 2).max(1).values, [2.0, 2.0, 1.0, 3.0]),
    "min with dim: chosen index": (lambda x: x.reshape(2, 2).min(0).values, [1.0, 1.0, 1.0, 3.0]),
    "maximum ties split": (lambda x: x.maximum(x.detach() * 0 + 1), [1.0, 2.0]),
    "norm at 0": (lambda x: x.norm(), [0.0, 0.0]),
    "norm dim at 0": (lambda x: x.reshape(2, 2).norm(dim=1), [0.0, 0.0, 3.0, 4.0]),
    "sgn at 0": (lambda x: x.sgn(), [0.0, 1.0]),
    "prod with one zero": (lambda x: x.prod(), [2.0, 0.0, 3.0]),
    "prod with two zeros": (lambda x: x.prod(), [0.0, 0.0, 3.0]),
    "floor at an integer": (lambda x: x.floor() + x.round(), [1.0, 2.5]),
    "sort ties": (lambda x: x.sort().values * torch_or_staged_arange(x), [1.0, 1.0, 0.0]),
    "softplus at threshold": (lambda x: staged_or_torch_softplus(x), [20.0, 20.5, 19.5]),
    "nan propagates": (lambda x: (x * 2).exp().sum(), [float("nan"), 1.0]),
    "nan through relu and abs": (lambda x: x.relu() + x.abs(), [float("nan"), 1.0]),
    "nan through amax": (lambda x: x.amax(), [float("nan"), 1.0]),
    "log at 0": (lambda x: x.log(), [0.0, 1.0]),
    "pow 0 ** 0": (lambda x: x ** x.detach() * 0 + x**0.0, [0.0, 1.0]),
}


def torch_or_staged_arange(x):
    n = x.shape[0]
    return torch.arange(n) if isinstance(x, torch.Tensor) else staged.arange(n)


def staged_or_torch_softplus(x):
    return torch.nn.functional.softplus(x) if isinstance(x, torch.Tensor) else staged.softplus(x)


@pytest.mark.parametrize("name", sorted(KINKS))
def test_gradient_at_non_differentiable_points_matches_torch(name):
    fn, values = KINKS[name]
    x = staged.tensor(values, dtype=staged.float64, requires_grad=True)
    tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    out, tout = fn(x), fn(tx)
    assert_close(out, tout)
    u = np.arange(1, tout.numel() + 1, dtype=np.float64).reshape(tuple(tout.shape))
    (g,) = staged.autograd.grad(out, x, staged.tensor(u))
    (tg,) = torch.autograd.grad(tout, tx, torch.tensor(u))
    assert_close(g, torch.zeros_like(tg) if tg._is_zerotensor() else tg)


def test_prod_second_order_at_zeros_matches_torch():
    for values in ([2.0, 0.0, 3.0, 0.5], [0.0, 0.0, 3.0, 2.0], [0.0, 0.0, 0.0, 2.0]):
        x = staged.tensor(values, dtype=staged.float64, requires_grad=True)
        tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
        w = np.array([1.0, -2.0, 0.5, 3.0])
        (g,) = staged.autograd.grad(x.prod(), x, create_graph=True)
        (tg,) = torch.autograd.grad(tx.prod(), tx, create_graph=True)
        (h,) = staged.autograd.grad((g * staged.tensor(w)).sum(), x)
        (th,) = torch.autograd.grad((tg * torch.tensor(w)).sum(), tx)
        assert_close(h, th)


@pytest.mark.parametrize("v", [math.inf, -math.inf, math.nan, 2.0])
def test_prod_of_a_0d_tensor_has_gradient_and_tangent_one_as_torch(v):
    """torch's 0-d product passes the gradient through (staged's out / x was NaN at
    infinities and NaN); a 1-element dim divides in both."""
    for lib in (staged, torch):
        x = lib.tensor(v, requires_grad=True)
        (g,) = lib.autograd.grad(x.prod(), x)
        assert g.item() == 1.0, lib.__name__
        fa = lib.autograd.forward_ad
        with fa.dual_level():
            t = fa.unpack_dual(fa.make_dual(lib.tensor(v), lib.tensor(3.0)).prod()).tangent
        assert t.item() == 3.0, lib.__name__
    got, want = (
        lib.autograd.grad(x.prod(0), x)[0]
        for lib in (staged, torch)
        for x in [lib.tensor([v], requires_grad=True)]
    )
    assert_close(got, want)


# --- dtypes ------------------------------------------------------------------------------
def test_integer_and_bool_results_are_not_differentiable():
    x = staged.tensor([1.5, -2.5], requires_grad=True)
    for out in (
        x.to(staged.int64),
        x.long(),
        x > 0,
        x.isnan(),
        x.argmax(),
        x.sort().indices,
        x.topk(1).indices,
    ):
        assert not out.requires_grad and out.grad_fn is None
        with pytest.raises(RuntimeError) as err:
            out.requires_grad_()
        with pytest.raises(RuntimeError) as terr:
            torch.tensor([1]).requires_grad_()
        assert message(err.value) == str(terr.value)  # (after the user's line: docs/errors.md)


@pytest.mark.parametrize("op", ["erf", "exp2", "log2", "floor", "sinh", "square", "sgn"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_computes_in_that_dtype(op, dtype):
    if getattr(staged, dtype) is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    values = np.linspace(0.1, 3, 7)
    x = staged.tensor(values).to(getattr(staged, dtype))
    tx = torch.tensor(values).to(getattr(torch, dtype))
    out, tout = getattr(x, op)(), getattr(tx, op)()
    assert out.dtype is getattr(staged, dtype)
    np.testing.assert_allclose(np.asarray(out, np.float32), tout.float().numpy(), rtol=1e-2)


def test_integer_inputs_promote_as_torch():
    i = staged.tensor([1, 2, 3])
    ti = torch.tensor([1, 2, 3])
    for f in (
        lambda t: t.erf(),
        lambda t: t.floor(),
        lambda t: t.prod(),
        lambda t: t.cumsum(0),
        lambda t: t.sort().values,
        lambda t: t % 2,
        lambda t: t.reciprocal(),
        lambda t: t.square(),
        lambda t: t.atan2(t),
    ):
        assert_close(f(i), f(ti), 1e-6, 1e-6)


def test_erf_matches_math_erf_to_one_ulp():
    x = np.concatenate([np.linspace(-7, 7, 20001), np.geomspace(1e-300, 1e-3, 200)])
    ref = np.array([math.erf(v) for v in x])
    got = staged.erf(staged.tensor(x)).numpy()
    assert np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)) < 1e-15


def test_float32_erf_is_within_one_ulp():
    """The single-precision approximation erf takes for float32 (and float16), against
    float64 erf: under 1 ulp on a dense grid over both pieces (split at 0.9277), tiny
    magnitudes, and inf, NaN and signed zeros kept."""
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            np.linspace(-4.5, 4.5, 900_001),
            rng.uniform(0.92, 0.94, 100_000),
            np.geomspace(1e-38, 1e-3, 2000),
            -np.geomspace(1e-38, 1e-3, 2000),
        ]
    ).astype(np.float32)
    want = staged.erf(staged.tensor(x.astype(np.float64))).numpy()
    got = staged.erf(staged.tensor(x)).numpy()
    assert got.dtype == np.float32
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert (np.abs(got - want) / ulp).max() < 0.9
    special = staged.tensor([np.inf, -np.inf, np.nan, 0.0, -0.0, 10.0])
    np.testing.assert_array_equal(staged.erf(special).numpy(), [1, -1, np.nan, 0, -0.0, 1])
    assert np.signbit(staged.erf(staged.tensor(-0.0)).numpy())
    h = x[::97].astype(np.float16)
    exact = staged.erf(staged.tensor(h.astype(np.float64))).numpy()
    half = staged.erf(staged.tensor(h)).numpy()
    assert (np.abs(half - exact) <= np.spacing(np.abs(exact).astype(np.float16))).all()


def _worst_relative(got, want, floor):
    """The largest |got - want| / max(|want|, floor), where ``want`` is finite; and that
    ``got`` has ``want``'s infinities and NaNs."""
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite])
    floor = np.broadcast_to(floor, want.shape)[finite]
    err = np.abs(got[finite] - want[finite]) / np.maximum(np.abs(want[finite]), floor)
    return err.max()


def test_erfc_keeps_its_relative_accuracy_in_the_tail():
    """erfc(x) down to float64's subnormals (x = 26.5), 2 - erfc(-x) for negative x."""
    x = np.concatenate([np.linspace(-10, 26.5, 36501), [0.0, -0.0, np.inf, -np.inf, np.nan]])
    want = torch.erfc(torch.tensor(x)).numpy()
    assert _worst_relative(staged.erfc(staged.tensor(x)).numpy(), want, 1e-300) < 2e-15


def test_erfinv_is_accurate_up_to_one():
    """erfinv to the last bits on [-1, 1], 1 - 2**-53 included; +-inf at +-1, NaN beyond.
    The tail is conditioned well (the residual is (1 - y) - erfc(x), both exact enough)."""
    y = np.concatenate([np.linspace(-1, 1, 20001), 1 - np.geomspace(2**-53, 0.5, 2000)])
    y = np.concatenate([y, -y, np.geomspace(1e-300, 1e-3, 200), [1.5, -np.inf, np.nan]])
    want = torch.erfinv(torch.tensor(y)).numpy()
    assert _worst_relative(staged.erfinv(staged.tensor(y)).numpy(), want, 1e-300) < 2e-15
    assert staged.erfinv(staged.tensor(-0.0)).item() == 0.0


# lgamma, digamma and polygamma over [-20, 30] (poles excluded), tiny and huge magnitudes
_GAMMA_X = np.concatenate(
    [
        np.linspace(-20, 30, 50021),
        np.geomspace(1e-300, 1e300, 1000),
        -np.geomspace(1e-300, 1e3, 500),
        1 + np.geomspace(2**-52, 0.1, 100),
        2 - np.geomspace(2**-52, 0.1, 100),
    ]
)
_GAMMA_X = _GAMMA_X[(_GAMMA_X != np.round(_GAMMA_X)) | (_GAMMA_X > 0)]


def _reflected(want_of_1mx):
    """The magnitude reflection subtracts for x < 0 (|f(1 - x)|), where f(x) is small."""
    return np.where(_GAMMA_X < 0, np.abs(want_of_1mx), 0.0)


def test_lgamma_matches_torch_to_the_last_bits():
    """Relative to lgamma, or for x < 0 to lgamma(1 - x), which reflection subtracts; the
    zeros at 1 and 2 relative to themselves (a series at 2), the poles +inf."""
    tx = torch.tensor(_GAMMA_X)
    floor = _reflected(torch.lgamma(1 - tx).numpy())
    got = staged.lgamma(staged.tensor(_GAMMA_X)).numpy()
    assert _worst_relative(got, torch.lgamma(tx).numpy(), np.maximum(floor, 1e-300)) < 4e-15
    poles = np.array([0.0, -0.0, -1.0, -7.0, -1e20, -np.inf, np.inf])
    assert (staged.lgamma(staged.tensor(poles)).numpy() == np.inf).all()


def test_digamma_matches_torch_to_the_last_bits():
    """Relative to the terms summed: log(x + 10) and the 1/(x + k) that shift x below 10
    (digamma's zero at 1.46 is where they cancel), and below 0 pi / sin(pi x)^2, the
    derivative of the pi cot(pi x) reflection adds (torch takes it of pi r, r = x -
    trunc(x), whose rounding that scales); torch's -inf at +0, +inf at -0 and NaN at the
    negative integers."""
    tx = torch.tensor(_GAMMA_X)
    ax = np.abs(_GAMMA_X)
    with np.errstate(divide="ignore", over="ignore"):  # inf: no bound at the tiniest x
        reflection = _reflected(np.pi / np.sin(np.pi * ax) ** 2)
        terms = np.log(ax + 10) + np.where(ax < 10, 1 / ax, 0) + reflection
    got = staged.digamma(staged.tensor(_GAMMA_X)).numpy()
    assert _worst_relative(got, torch.digamma(tx).numpy(), terms) < 4e-15
    edges = np.array([0.0, -0.0, -1.0, -3.0, -np.inf, np.inf, np.nan])
    np.testing.assert_array_equal(
        staged.digamma(staged.tensor(edges)).numpy(), torch.digamma(torch.tensor(edges)).numpy()
    )


def _trigamma(x):
    """sum of 1/(x + k)^2 for k >= 0, exactly summed to k = 999, then Euler-Maclaurin."""
    w = x + 1000
    tail = 1 / w + 1 / (2 * w**2) + 1 / (6 * w**3)
    return math.fsum([1 / (x + k) ** 2 for k in range(1000)] + [tail])


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_polygamma_is_accurate(n):
    """x > 0 relative; x < 0 relative to polygamma(n, 1 - x), which reflection subtracts.
    torch's trigamma is 5e-10 off (its asymptotic series stops at 1/x^7), so n = 1 is
    checked against the series summed here, for x > 0."""
    x = _GAMMA_X[(_GAMMA_X > 1e-60) & (_GAMMA_X < 1e60)]
    if n == 1:
        x = x[::50]
        want = np.array([_trigamma(v) for v in x])
        assert _worst_relative(staged.polygamma(1, staged.tensor(x)).numpy(), want, 0) < 2e-15
        return
    x = x[x < 1e30]  # beyond, torch's values flush to -0.0 (ours are ~(n - 1)! / x^n)
    want = torch.polygamma(n, torch.tensor(x)).numpy()
    assert _worst_relative(staged.polygamma(n, staged.tensor(x)).numpy(), want, 1e-300) < 4e-15
    # x < 0: relative to the largest terms summed, which cancel where polygamma is small:
    # torch's n! / (x + k)^(n + 1) up to x + k > 0, and our reflection's polygamma(n, 1 - x)
    neg = _GAMMA_X[(_GAMMA_X < 0) & (_GAMMA_X > -20)]
    want = torch.polygamma(n, torch.tensor(neg)).numpy()
    with np.errstate(over="ignore"):
        terms = math.factorial(n) * np.abs(neg[:, None] + np.arange(21)) ** -(n + 1.0)
    floor = terms.max(1) + np.abs(torch.polygamma(n, torch.tensor(1 - neg)).numpy())
    assert _worst_relative(staged.polygamma(n, staged.tensor(neg)).numpy(), want, floor) < 4e-15


def test_polygamma_poles_and_errors_as_torch():
    edges = staged.tensor([0.0, -0.0, -2.0])
    assert (staged.polygamma(1, edges).numpy() == np.inf).all()
    assert (staged.polygamma(2, edges).numpy() == -np.inf).all()
    assert (
        staged.polygamma(0, staged.tensor(1.5)).item() == staged.digamma(staged.tensor(1.5)).item()
    )
    with pytest.raises(RuntimeError, match=r"polygamma\(n, x\) does not support negative n\."):
        staged.polygamma(-1, staged.tensor(1.0))


def test_bad_input_errors():
    with pytest.raises(RuntimeError, match=r"selected index k out of range \(k=4, size 3\)"):
        staged.topk(staged.tensor([1.0, 2.0, 3.0]), 4)
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        staged.gelu(staged.tensor([1.0]), approximate="fast")


def test_max_and_min_over_a_non_empty_dim_of_an_empty_tensor():
    # a batch of size 0: reducing the (non-empty) class dim is fine, as in torch
    x, t = staged.zeros(0, 5), torch.zeros(0, 5)
    for name in ("amax", "amin"):
        assert getattr(x, name)(1).shape == getattr(t, name)(1).shape == (0,)
        with pytest.raises(IndexError, match="to have non-zero size"):
            getattr(x, name)(0)
    assert math.isnan(
        staged.nn.functional.cross_entropy(x, staged.zeros(0, dtype=staged.int64)).item()
    )


def test_operators_on_integers_are_bitwise():
    """``&``, ``|``, ``^``, ``~``, ``<<`` and ``>>`` on integer tensors are torch's bitwise
    ops (``&`` and ``~`` were logical, a silent wrong result: ``5 & 1`` gave True), in
    place and reflected too; on bools they stay logical; ``~`` of a float raises."""
    a, b = [5, -3, 12], [1, 2, 7]
    for t in (torch, staged):
        x, y = t.tensor(a), t.tensor(b)
        z = x.clone()
        z ^= y
        z <<= 1
        got = [x & y, x | y, x ^ y, ~x, x << y, x >> y, 3 & x, 1 << y, z, ~t.tensor([True, False])]
        if t is torch:
            want = [r.tolist() for r in got]
        else:
            assert [r.tolist() for r in got] == want
            assert all(r.dtype == w for r, w in zip(got, [staged.int64] * 9 + [staged.bool]))
    with pytest.raises(TypeError, match="only implemented on integer and Boolean"):
        ~staged.ones(2)


def test_order_statistics_with_nan_and_ties_match_torch():
    """NaN rows (median propagates, nanmedian skips), ties (median's index, cummax's later
    entry) and median()'s gradient shared evenly among ties, against torch."""
    nan = math.nan
    rows = [[3.0, nan, 1.0, nan], [4.0, 2.0, 2.0, 9.0], [5.0, 1.0, 7.0, 0.5]]
    got = {}
    for lib in (torch, staged):
        x = lib.tensor(rows, dtype=lib.float64, requires_grad=True)
        m, nm = lib.median(x, 1), lib.nanmedian(x, 1)
        tied = lib.tensor([2.0, 1.0, 2.0, 2.0, 5.0], dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(lib.median(tied), (tied,))
        got[lib.__name__] = [
            m.values.tolist(),
            m.indices.tolist(),
            nm.values.tolist(),
            nm.indices.tolist()[:2],  # torch's index for an all-NaN row is its kernel's
            lib.quantile(x, 0.4, dim=1).tolist(),
            lib.nanquantile(x, 0.4, dim=1).tolist(),
            lib.cummax(x[0].detach(), 0).indices.tolist(),
            lib.cummin(x[1].detach(), 0).indices.tolist(),
            g.tolist(),
        ]
    assert str(got["staged"]) == str(got["torch"])  # (NaN != NaN, but prints alike)


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "sign", "sgn", "angle"])
def test_piecewise_constant_gradients_are_zero_under_inf_and_nan(name):
    """torch's gradient of a piecewise constant op is 0 whatever comes in (g * 0 is NaN)."""
    g = [math.inf, -math.inf, math.nan]
    got, want = [], []
    for t, out in ((staged, got), (torch, want)):
        x = t.tensor([1.5, -2.0, 0.25], requires_grad=True)
        getattr(t, name)(x).backward(t.tensor(g))
        out.append(x.grad)
        with t.autograd.forward_ad.dual_level():
            dual = t.autograd.forward_ad.make_dual(t.tensor([1.5, -2.0, 0.25]), t.tensor(g))
            out.append(t.autograd.forward_ad.unpack_dual(getattr(t, name)(dual)).tangent)
    for mine, theirs in zip(got, want, strict=True):  # torch's sgn gives ZeroTensors
        np.testing.assert_array_equal(to_numpy(mine), theirs.numpy(force=True))


SPECIAL_ARGS = {  # the arguments past the tensor, and the tensor's range
    "polygamma": ((1,), (0.5, 3.0)),
    "logsumexp": ((0,), (-2.0, 2.0)),
    "softmax": ((0,), (-2.0, 2.0)),
    "log_softmax": ((0,), (-2.0, 2.0)),
    "erfinv": ((), (-0.9, 0.9)),
    "logit": ((), (0.1, 0.9)),
    "xlogy": (("y",), (0.5, 3.0)),
    "xlog1py": (("y",), (0.5, 3.0)),
    "ndtr": ((), (-6.0, 4.0)),
    "multigammaln": ((3,), (1.5, 4.0)),
    "zeta": ((2.5,), (0.5, 3.0)),  # zeta(2.5, q): torch differentiates q only
    "gammainc": (("y",), (0.2, 6.0)),  # gammainc(y, x): torch differentiates x only
    "gammaincc": (("y",), (0.2, 6.0)),
}
SPECIAL_ARGS.update(dict.fromkeys(POLYNOMIALS, ((7,), (-1.5, 1.5))))  # T_7(x) ...


@pytest.mark.parametrize("name", staged.special.__all__)
def test_special_names_are_torch_specials(name):
    """staged.special.<name> is torch.special.<name>: values and gradient."""
    extra, (lo, hi) = SPECIAL_ARGS.get(name, ((), (0.5, 3.0)))
    x = np.random.default_rng(0).uniform(lo, hi, 5)
    y = np.random.default_rng(1).uniform(0.5, 3.0, 5)

    def call(t, a):
        fn = getattr(t.special, name)
        args = [t.tensor(y) if e == "y" else e for e in extra]
        last = ("polygamma", "zeta", "gammainc", "gammaincc")
        return fn(*args, a) if name in last else fn(a, *args)

    compare_with_torch(lambda a: call(staged, a), lambda a: call(torch, a), x, rtol=1e-12)


def test_bessel_jy_are_accurate_where_torch_is_not():
    """Cephes' j0, j1, y0, y1 against mpmath near x = 5, where torch's float64 kernels are
    up to 9e-7 off (the op database compares with torch at 1e-6)."""
    x = staged.tensor([4.9, 5.1, 7.0], dtype=staged.float64)
    want = {  # mpmath.besselj / bessely at 30 digits
        "bessel_j0": [-0.2097383275853262, -0.14433474706050065, 0.3000792705195556],
        "bessel_j1": [-0.31469467101519066, -0.3370972020182318, -0.004682823482345833],
        "bessel_y0": [-0.2920545942440142, -0.3216024491248594, -0.025949743967209265],
        "bessel_y1": [0.18124669204504856, 0.11373644197749973, -0.30266723702418485],
    }
    for name, w in want.items():
        np.testing.assert_allclose(
            getattr(staged.special, name)(x).numpy(), w, rtol=4e-15, atol=1e-16
        )


def test_zeta_edges_and_gradients_as_torch():
    """zeta at its poles, NaNs and negative q as torch (bit for bit where torch's direct
    sum is short); the gradient for q, and torch's error for x."""
    x = [1.0, 0.5, 2.0, 2.0, 2.0, 2.0, 3.0, 2.0, 1e20, 50.0, np.inf, 2.0, 2.0, np.nan, 4.0]
    q = [1.0, 1.0, 0.0, -1.0, -1.5, np.inf, -2.5, np.nan, 2.0, 1e-3, 2.0, 1e9, 1e-300, 1.0, -22.7]
    got = staged.special.zeta(
        staged.tensor(x, dtype=staged.float64), staged.tensor(q, dtype=staged.float64)
    )
    want = torch.special.zeta(
        torch.tensor(x, dtype=torch.float64), torch.tensor(q, dtype=torch.float64)
    )
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    # below q = -23 torch sums |q| terms; ours has a fixed length (NaN there)
    assert np.isnan(staged.special.zeta(4.0, staged.tensor([-30.5])).item())
    xs = staged.tensor([2.0, 3.5], requires_grad=True)
    qs = staged.tensor([0.5, 2.0], requires_grad=True)
    staged.special.zeta(xs.detach(), qs).sum().backward()
    np.testing.assert_allclose(
        qs.grad.numpy(), (-xs * staged.special.zeta(xs + 1, qs)).detach().numpy(), rtol=1e-6
    )
    with pytest.raises(NotImplementedError, match="derivative for 'zeta' is not implemented"):
        staged.special.zeta(xs, qs).sum().backward()
    with pytest.raises(RuntimeError, match="not defined for complex64"):
        staged.special.zeta(staged.tensor([1 + 1j]), 2.0)


def test_airy_ai_edges_as_torch():
    """Ai at the branch points, past its underflow, at +-inf and NaN, as torch's (within
    an ulp: the series on (-2.09, 2.09) is SciPy's to the bit, torch's 32 ulp off); its
    result does not require grad, as torch's."""
    x = [0.0, -0.0, 2.09, -2.09, 8.3203353, 8.33, 103.892, 103.9, -50.5, np.inf, -np.inf, np.nan]
    got = staged.special.airy_ai(staged.tensor(x, dtype=staged.float64, requires_grad=True))
    want = torch.special.airy_ai(torch.tensor(x, dtype=torch.float64))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-15, atol=0)
    assert not got.requires_grad


def _ulps(got, want):
    """|got - want| in ulps of want (at least the least normal's), NaN where both are."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    tiny = np.finfo(np.float64).tiny
    u = np.abs(got - want) / np.spacing(np.maximum(np.abs(want), tiny))
    return np.where(np.isnan(got) & np.isnan(want), 0.0, u)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_incomplete_gamma_edges_and_branches_as_torch(name):
    """P(a, x) and Q(a, x) at torch's boundary values (a or x negative, zero, inf, NaN:
    to the bit) and over every branch of its algorithm: the power series (small x), its
    complement and the continued fraction (x > a), the series of Q (x <= 1.1), Temme's
    expansion (a > 20, x near a; a > 200, x within 4.5 sqrt(a)), within a few float64 ulps
    of torch's (its igammac kernel's build fuses a multiply-add or two, which ours
    follows) where libm's last bits agree, within what they move the result where not."""
    ours, theirs = getattr(staged.special, name), getattr(torch.special, name)
    edge = [-1.0, 0.0, 0.5, 3.0, np.inf, np.nan]
    a, x = (np.array(v, np.float64).ravel() for v in np.meshgrid(edge, [*edge, -np.inf]))
    got = ours(staged.tensor(a), staged.tensor(x)).numpy()
    want = theirs(torch.tensor(a), torch.tensor(x)).numpy()
    inner = np.isin(a, [0.5, 3.0]) & np.isin(x, [0.5, 3.0])
    np.testing.assert_array_equal(got[~inner], want[~inner])
    assert _ulps(got, want).max() <= 4
    rng = np.random.default_rng(0)
    a = np.concatenate(
        [np.exp(rng.uniform(-5, 7, 4000)), rng.uniform(20, 200, 500), rng.uniform(200, 1e4, 500)]
    )
    x = a * np.exp(np.concatenate([rng.uniform(-3, 3, 4000), rng.uniform(-0.3, 0.3, 1000)]))
    x[:500] = rng.uniform(0, 1.1, 500)  # Q's series and P's
    got = ours(staged.tensor(a), staged.tensor(x)).numpy()
    want = theirs(torch.tensor(a), torch.tensor(x)).numpy()
    # a log x, x and lgamma(a) each enter the exponent of x^a e^-x / gamma(a) with about an
    # ulp of its size from libm, which exp turns into a relative error; libm's last bits
    # differ between machines (NumPy's AVX-512 log/exp against glibc's, torch's)
    lgamma = np.vectorize(math.lgamma)(a)
    assert (_ulps(got, want) <= 16 + 4 * (np.abs(a * np.log(x)) + x + np.abs(lgamma))).all()
    # float32 is computed in float64 and rounded once: within an ulp of torch's float64
    # (torch's float32 kernel computes in float32, hundreds of ulps off in places)
    a32, x32 = a.astype(np.float32), x.astype(np.float32)
    got = ours(staged.tensor(a32), staged.tensor(x32)).numpy()
    want = theirs(torch.tensor(a32, dtype=torch.float64), torch.tensor(x32, dtype=torch.float64))
    want = want.numpy().astype(np.float32)
    u = np.abs(got.astype(np.float64) - want) / np.spacing(np.maximum(np.abs(want), 1e-30))
    assert u[np.abs(want) > 1e-30].max() <= 1


def test_incomplete_gamma_gradients_and_errors_as_torch():
    """The gradient for x as torch's; torch's errors for a's gradient and for forward
    mode; an integer a is promoted beside a float x, as torch's."""
    a, x = np.array([0.5, 2.0, 30.0, 300.0]), np.array([0.3, 3.5, 29.0, 310.0])
    for name in ("gammainc", "gammaincc", "igamma", "igammac"):
        mod = staged.special if name.startswith("gamma") else staged
        tmod = torch.special if name.startswith("gamma") else torch
        xs, tx = staged.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        getattr(mod, name)(staged.tensor(a), xs).sum().backward()
        getattr(tmod, name)(torch.tensor(a), tx).sum().backward()
        np.testing.assert_allclose(xs.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
        op = "igammac" if name in ("gammaincc", "igammac") else "igamma"
        with pytest.raises(NotImplementedError, match=f"derivative for '{op}: input' is not"):
            getattr(mod, name)(staged.tensor(a, requires_grad=True), xs).sum().backward()
    fw = staged.autograd.forward_ad
    with fw.dual_level(), pytest.raises(NotImplementedError, match="forward AD with igamma "):
        staged.igamma(staged.tensor(a), fw.make_dual(staged.tensor(x), staged.tensor(x)))
    got = staged.tensor([1, 2]).igamma(staged.tensor([1.0, 2.0], dtype=staged.float64))
    want = torch.tensor([1, 2]).igamma(torch.tensor([1.0, 2.0], dtype=torch.float64))
    assert got.dtype == staged.float64
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-15)
    t = staged.tensor([1.0, 2.0])
    t.igammac_(staged.tensor([0.5, 4.0]))
    np.testing.assert_allclose(
        t.numpy(), torch.tensor([1.0, 2.0]).igammac_(torch.tensor([0.5, 4.0])).numpy(), rtol=1e-6
    )
    with pytest.raises(RuntimeError, match="igamma"):
        staged.igamma(staged.tensor([1, 2]), staged.tensor([1, 2]))


_POLY_X = [-2.0, -1.5, -1.0, -0.7, -0.3, 0.0, 1e-20, 0.2, 0.5, 0.9, 0.999, 1.0, 1.0000001]
_POLY_X += [1.3, 2.0, 3.0, 10.0, np.nan, np.inf, -np.inf]
_POLY_N = [-3, -1, -0.5, 0, 0.3, 1, 1.9, 2, 3, 4, 5, 6, 7, 8, 9, 10, 30, 100, 129, 600, 1e30]
_POLY_N += [np.nan, np.inf, -np.inf]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_orthogonal_polynomials_edges_as_torch(name, dtype):
    """Every x edge (+-1, 0, NaN, +-inf, just past 1) with every n edge (negative, whole
    and not, each side of the trigonometric forms' thresholds, Hermite's NaN limit, NaN,
    +-inf, past int64): torch's values to the bit (its kernels' fma; float32's trig forms
    within an ulp on this grid: our acos is correctly rounded, glibc's acosf not always), but
    where x is NaN and n >= 2: there torch's U, V, W, shifted, He, L and P kernels return
    an uninitialised variable, ours NaN."""
    x, n = (a.astype(dtype) for a in np.meshgrid(np.array(_POLY_X), np.array(_POLY_N)))
    got = getattr(staged.special, name)(staged.tensor(x), staged.tensor(n)).numpy()
    want = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n)).numpy()
    garbage = np.isnan(x) & (n >= 2) & np.isfinite(n) & (n < 1e18)
    ok = ~garbage | (name == "chebyshev_polynomial_t") | (name == "hermite_polynomial_h")
    # float32's trig forms: our acos is correctly rounded, glibc's acosf (torch's) not always
    rtol = 1.2e-7 if dtype == "float32" else 0
    _assert_near(name, x[ok], n[ok], got[ok], want[ok], rtol)
    assert np.isnan(got[garbage]).all()
    # a Python n (truncated), an int tensor x, a Python x with a tensor n: torch's dtypes
    for xs, ns in (
        (staged.tensor(np.nan_to_num(x[0])), 7.9),
        (staged.tensor([1, 2, 3]), 3),
        (0.5, staged.tensor(n[:, 0])),
    ):
        tx, tn = (torch.tensor(v.numpy()) if isinstance(v, staged.Tensor) else v for v in (xs, ns))
        r, tr = getattr(staged.special, name)(xs, ns), getattr(torch.special, name)(tx, tn)
        assert r.dtype.name == str(tr.dtype).removeprefix("torch.")
        xn = [np.asarray(v.numpy() if isinstance(v, staged.Tensor) else v) for v in (xs, ns)]
        xb, nb = (np.broadcast_to(v, r.shape).astype(r.numpy().dtype) for v in xn)
        _assert_near(name, xb, np.trunc(nb), r.numpy(), tr.numpy(), 0)


def _assert_near(name, x, n, got, want, rtol):
    """``got`` is torch's ``want`` (at ``x``, ``n``): to the bit, but ``rtol`` and what libm's
    last bits move the trigonometric forms by (``_trig_form_error``)."""
    with np.errstate(invalid="ignore"):
        near = np.abs(got - want) <= rtol * np.abs(want) + _trig_form_error(name, x, n)
    same = (got == want) | (np.isnan(got) & np.isnan(want)) | near
    assert same.all(), (x[~same], n[~same], got[~same], want[~same])


def _trig_form_error(name, x, n):
    """How far float64 libm's last bits (NumPy's AVX-512 acos, sin, cos against glibc's,
    torch's) move Chebyshev's trigonometric forms, cos(n t) and sin((n + 1) t) / sin t at t
    = acos x: an ulp of t is n ulps of the phase, divided by sin t; 0 where none runs."""
    if "chebyshev" not in name or x.dtype != np.float64:
        return 0.0
    with np.errstate(over="ignore"):  # x = +-max (nan_to_num's inf) is outside anyway
        y = 2 * x - 1 if name.startswith("shifted") else x
    inside = (np.abs(y) < 1) & np.isfinite(n) & (n > 0) & (n < 1e18)
    s = np.sqrt(1 - np.where(inside, y, 0) ** 2)
    eps = np.finfo(np.float64).eps
    return np.where(inside, 4 * np.pi * eps * ((np.abs(n) + 1) / s + 1 / s**2), 0.0)


def test_orthogonal_polynomials_signature_as_torch():
    """torch's names (x, n), n by keyword too, and its TypeError for two numbers."""
    got = staged.special.legendre_polynomial_p(x=staged.tensor([0.5]), n=3)
    np.testing.assert_array_equal(got.numpy(), [-0.4375])
    with pytest.raises(TypeError, match="x or n must be a Tensor"):
        staged.special.hermite_polynomial_h(2.0, 3)


def test_orthogonal_polynomials_int64_edges_and_no_gradient():
    """n past 2^62 (torch's 2n + 1 wraps in int64, its trig forms take the huge n), and no
    gradient: as torch's, the result does not require grad, so backward raises."""
    x = torch.tensor([-1.0, 1.0, 0.5, -0.3], dtype=torch.float64)
    n = torch.tensor([2.0**62, 2.0**62, 2.0**62, 2.0**63 - 2**11], dtype=torch.float64)
    # inside (-1, 1) the trigonometric forms take n ~ 2^62 times acos x: an ulp of libm
    # (NumPy's AVX-512 acos against glibc's) is any value there, so only the ends compare
    ends = np.abs(x.numpy()) == 1
    for name in ("chebyshev_polynomial_v", "chebyshev_polynomial_w", "chebyshev_polynomial_t"):
        got = getattr(staged.special, name)(staged.tensor(x.numpy()), staged.tensor(n.numpy()))
        want = getattr(torch.special, name)(x, n).numpy()
        np.testing.assert_array_equal(got.numpy()[ends], want[ends])
        assert np.isfinite(got.numpy()).all() and np.isfinite(want).all()
    a = staged.tensor([0.5, 2.0], requires_grad=True)
    for name in POLYNOMIALS:
        out = getattr(staged.special, name)(a, staged.tensor([3.0, 2.0], requires_grad=True))
        assert not out.requires_grad and out.grad_fn is None
        with pytest.raises(RuntimeError, match="does not require grad"):
            out.sum().backward()


def test_orthogonal_polynomials_compiled():
    """Compiled (llvm-cpu): n a tensor argument (the loop's bound read per element at run
    time) or a Python int; torch's float32 values to the bit, float64 within 1e-15 where
    the trigonometric forms come near the polynomials' zeros."""
    x, n = (a.astype("float32") for a in np.meshgrid(np.array(_POLY_X), np.array(_POLY_N)))
    for name in (
        "chebyshev_polynomial_u",
        "shifted_chebyshev_polynomial_w",
        "legendre_polynomial_p",
    ):
        fn = getattr(staged.special, name)
        got = staged.compile(lambda a, b, fn=fn: fn(a, b))(
            staged.tensor(x), staged.tensor(n)
        ).numpy()
        want = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n)).numpy()
        ok = ~np.isnan(x)
        np.testing.assert_array_equal(got[ok], want[ok])
        row = np.nan_to_num(x[0])
        got = staged.compile(lambda a, fn=fn: fn(a, 9))(staged.tensor(row)).numpy()
        np.testing.assert_array_equal(
            got, getattr(torch.special, name)(torch.tensor(row), 9).numpy()
        )
    x64 = x.astype("float64")
    got = staged.compile(lambda a, b: staged.special.chebyshev_polynomial_t(a, b))(
        staged.tensor(x64), staged.tensor(np.full_like(x64, 30.0))
    )
    want = torch.special.chebyshev_polynomial_t(torch.tensor(x64), 30.0).numpy()
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14, atol=1e-15)


def test_orthogonal_polynomials_are_not_exported_to_onnx():
    """ONNX: refused with the reason (the loop of n steps), never a wrong graph."""
    from staged.lower.onnx_lowering.model import TABLE

    reason = TABLE.reason("legendre_polynomial_p", staged.float32)
    assert reason and "n steps per element" in reason


def test_incomplete_gamma_compiled_as_eager():
    """Compiled (llvm-cpu: each loop a per-element scf.while stopping on torch's rule),
    P and Q are eager's at the boundaries and on every branch, within 1e-12 relative (its
    lgamma is ours where eager's is the C library's; IREE flushes subnormals)."""
    edge = [-1.0, 0.0, 0.5, 3.0, np.inf, np.nan]
    ea, ex = (np.ravel(v) for v in np.meshgrid(edge, [*edge, -np.inf]))
    a = np.concatenate([ea, [0.1, 0.1, 2.0, 2.0, 30.0, 30.0, 150.0, 500.0, 800.0, 1e4]])
    x = np.concatenate([ex, [0.3, 2.0, 0.8, 9.0, 28.0, 45.0, 160.0, 530.0, 300.0, 1.01e4]])
    step = staged.compile(lambda a, x: (staged.igamma(a, x), staged.special.gammaincc(a, x)))
    got = step(staged.tensor(a), staged.tensor(x))
    for g, want in zip(got, (staged.igamma, staged.igammac)):
        w = want(staged.tensor(a), staged.tensor(x)).numpy()
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-12, atol=1e-300)


DIV_A = [-7.5, 7.0, 3.0, -0.5, 0.5, math.inf, math.nan, -3.0, -1.0, 2.0, 0.0, -0.0, 5.25]
DIV_B = [2.0, -2.0, 0.0, 2.0, -2.0, 2.0, 1.0, math.inf, math.inf, -math.inf, 3.0, 3.0, -0.5]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_div_with_a_rounding_mode_is_torchs(mode, dtype):
    """``div(x, y, rounding_mode=...)`` (it raised NotImplementedError): torch's values, signs
    of zero and dtypes (integers stay integers), a zero gradient where inputs require grad
    (torch's DivBackward2), in-place and compiled."""
    floats = dtype.startswith("float")
    a = DIV_A if floats else [-7, 7, 5, -9, 0, 8]
    b = DIV_B if floats else [2, -2, 3, -4, 5, 1]
    res = []
    for lib in (staged, torch):
        x = lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=floats)
        y = lib.tensor(b, dtype=getattr(lib, dtype), requires_grad=floats)
        q = lib.div(x, y, rounding_mode=mode)
        grads = lib.autograd.grad(q.sum(), (x, y)) if floats else ()
        inplace = x.detach().clone().div_(y.detach(), rounding_mode=mode)
        res.append((q, *grads, inplace, lib.div(x.detach(), 2, rounding_mode=mode)))
    for s, t in zip(*res):
        assert str(s.dtype).split(".")[1] == str(t.dtype).split(".")[1]
        np.testing.assert_array_equal(s.detach().numpy(), t.detach().numpy())
        np.testing.assert_array_equal(
            np.signbit(s.detach().numpy()), np.signbit(t.detach().numpy())
        )
    if floats:
        step = staged.compile(lambda x, y: staged.div(x, y, rounding_mode=mode))
        x, y = (
            staged.tensor(a, dtype=getattr(staged, dtype)),
            staged.tensor(b, dtype=getattr(staged, dtype)),
        )
        np.testing.assert_array_equal(step(x, y).numpy(), res[0][0].detach().numpy())


def test_div_rounding_mode_errors_are_torchs():
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        staged.div(staged.tensor([5]), staged.tensor([0]), rounding_mode="trunc")
    with pytest.raises(
        RuntimeError, match="rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'"
    ):
        staged.div(staged.ones(2), 2.0, rounding_mode="round")


def test_remainders_gradient_for_the_divisor_is_minus_torchs_floor_division():
    """-g * div(x, y, rounding_mode="floor"), as torch: at an infinite divisor that quotient
    is -1 for a negative x (floor(-1 / inf) is -0, which gave 0; fuzzer)."""
    for lib in (staged, torch):
        x = lib.tensor([-1.0, 2.0, -3.0, 5.5], dtype=lib.float64)
        y = lib.tensor([math.inf, math.inf, -math.inf, -2.0], dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(lib.remainder(x, y).sum(), y)
        np.testing.assert_array_equal(g.numpy(), [1.0, -0.0, -0.0, 3.0])


def test_logit_with_eps_has_torchs_gradient_at_nan_and_outside():
    """torch's logit_backward with eps: 0 outside [eps, 1 - eps], NaN at a NaN (the clamp's
    mask gave 0 there)."""
    x = [math.nan, 0.5, 1e-9, 0.9999999, 0.3]
    got, want = (
        lib.autograd.grad(lib.logit(t, eps=1e-6), t, lib.ones(5))[0]
        for lib in (staged, torch)
        for t in [lib.tensor(x, requires_grad=True)]
    )
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    step = staged.compile(lambda t: staged.logit(t, eps=1e-6) * 2)
    np.testing.assert_allclose(
        step(staged.tensor(x)).numpy(),
        torch.logit(torch.tensor(x), eps=1e-6).numpy() * 2,
        rtol=1e-6,
    )
