"""Eager behaviour that once differed silently from torch 2.13 (issue 15, item 8): each
case runs the same code on staged and on torch and compares errors, values and
gradients."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import message


def outcome(fn, ns):
    """``("raises", type name, message)`` or ``("value", result)`` of ``fn(ns)``."""
    try:
        return ("value", fn(ns))
    except Exception as e:  # noqa: BLE001  (the exception is the result under test)
        # torch's dense permute names the sparse kernel in its message
        return ("raises", type(e).__name__, message(e).replace("permute(sparse_coo)", "permute()"))


def assert_same_error(fn):
    """``fn(staged)`` raises what ``fn(torch)`` raises: same class, same message."""
    want, got = outcome(fn, torch), outcome(fn, staged)
    assert want[0] == "raises", f"torch did not raise: {want}"
    assert got == want


def _x(ns):
    return ns.arange(12.0).reshape(3, 4)


BAD_DIMS = {
    "transpose": lambda ns: _x(ns).transpose(0, 7),
    "transpose-1d": lambda ns: ns.ones(3).transpose(0, 1),
    "flatten": lambda ns: _x(ns).flatten(0, 9),
    "flatten-0d": lambda ns: ns.tensor(1.0).flatten(0, 1),
    "flatten-order": lambda ns: _x(ns).flatten(1, 0),
    "permute-range": lambda ns: _x(ns).permute(0, 2),
    "permute-repeat": lambda ns: _x(ns).permute(1, 1),
    "permute-count": lambda ns: _x(ns).permute(0),
    "unsqueeze": lambda ns: _x(ns).unsqueeze(3),
    "squeeze": lambda ns: _x(ns).squeeze(-3),
    "sum": lambda ns: _x(ns).sum(2),
    "sum-repeat": lambda ns: _x(ns).sum((0, -2)),
    "mean": lambda ns: _x(ns).mean(-3),
    "amax-repeat": lambda ns: _x(ns).amax((1, 1)),
    "argmax-0d": lambda ns: ns.tensor(1.0).argmax(1),
    "softmax": lambda ns: ns.softmax(_x(ns), 2),
    "log_softmax": lambda ns: ns.log_softmax(_x(ns), -3),
    "logsumexp": lambda ns: ns.logsumexp(_x(ns), 2),
    "cumsum": lambda ns: _x(ns).cumsum(2),
    "sort": lambda ns: _x(ns).sort(2),
    "topk": lambda ns: _x(ns).topk(1, 2),
    "var": lambda ns: _x(ns).var(2),
    "cat": lambda ns: ns.cat([_x(ns), _x(ns)], 2),
    "stack": lambda ns: ns.stack([_x(ns), _x(ns)], -4),
    "split": lambda ns: _x(ns).split(1, 2),
    "chunk": lambda ns: _x(ns).chunk(2, -3),
}


def test_dims_are_checked_as_torch():
    """One shared check (``wrap_dim``) for every dim-taking op; dims in range still work."""
    for fn in (
        lambda ns: _x(ns).transpose(-1, 0),
        lambda ns: ns.tensor(2.0).transpose(0, -1),
        lambda ns: _x(ns).flatten(-1, 1),
        lambda ns: ns.tensor(2.0).flatten(-1, 0),
        lambda ns: _x(ns).permute(-1, 0),
        lambda ns: _x(ns).unsqueeze(-3),
    ):
        np.testing.assert_array_equal(fn(staged).numpy(), fn(torch).numpy())
    wrong = {}
    for case, fn in BAD_DIMS.items():
        want, got = outcome(fn, torch), outcome(fn, staged)
        assert want[0] == "raises", case
        if got != want:
            wrong[case] = got
    assert not wrong


def test_view_that_needs_a_copy_raises_as_torch():
    assert_same_error(lambda ns: _x(ns).t().view(12))
    assert_same_error(lambda ns: _x(ns)[:, :2].view(6))
    for ns in (staged, torch):  # after .contiguous() it is a view again, sharing memory
        x = _x(ns)
        v = x.t().contiguous().view(12)
        np.testing.assert_array_equal(v.numpy(), [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11])
        w = x.view(2, 6)
        w[0, 0] = 100.0
        assert x[0, 0].item() == 100.0
        assert x.is_contiguous() and not x.t().is_contiguous()


def test_view_of_an_op_result_shares_memory_whatever_its_numpy_layout():
    """A conv's and a pooling's output (permuted in NumPy here, contiguous in torch) can be
    viewed, and a write through the view reaches them (the view check raised on them)."""
    for ns in (staged, torch):
        h = ns.nn.functional.conv2d(ns.ones(2, 3, 4, 4), ns.ones(5, 3, 3, 3))
        v = h.view(2, -1)
        v[1, 0] = -1.0
        assert h[1, 0, 0, 0].item() == -1.0
        np.testing.assert_array_equal(v[0].detach().numpy(), np.full(20, 27.0))
        m = ns.nn.functional.max_pool2d(ns.ones(2, 3, 4, 4), 2).view(-1)
        assert m.shape == (24,)


def _hooked(hook, leaf=False):
    def fn(ns):
        a = ns.ones(4, requires_grad=True)
        b = a if leaf else a * 2
        b.register_hook(hook)
        (a * 2 if leaf else b).sum().backward()
        return a.grad

    return fn


def named_hook(g):
    return g[:1]


def test_tensor_hook_changing_the_gradient_shape_or_dtype_raises_as_torch():
    assert_same_error(_hooked(named_hook))
    assert_same_error(_hooked(lambda g: g.reshape(2, 2)))
    assert_same_error(_hooked(lambda g: g.sum(), leaf=True))
    assert_same_error(_hooked(lambda g: 3))
    for ns in (staged, torch):  # a dtype change is refused too (torch names its tensor types)
        with pytest.raises(RuntimeError, match="hook '<lambda>' has changed the type of value"):
            _hooked(lambda g: g.double())(ns)
    np.testing.assert_array_equal(_hooked(lambda g: g * 3)(staged).numpy(), [6.0] * 4)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
@pytest.mark.parametrize("shape", [(4, 5), (2, 5, 3)])
def test_cross_entropy_probability_targets_with_weight_match_torch(reduction, smoothing, shape):
    rng = np.random.default_rng(0)
    x, p = rng.standard_normal(shape), rng.random(shape)
    p /= p.sum(1, keepdims=True)
    w = rng.random(5) + 0.5
    out = {}
    for ns in (staged, torch):
        xt = ns.tensor(x, requires_grad=True)
        loss = ns.nn.functional.cross_entropy(
            xt, ns.tensor(p), weight=ns.tensor(w), reduction=reduction, label_smoothing=smoothing
        )
        loss.sum().backward()
        out[ns.__name__] = (loss.detach().numpy(), xt.grad.numpy())
    for got, want in zip(out["staged"], out["torch"]):  # float64: a few ulps of the sums
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_unreduced_class_index_losses_keep_the_spatial_shape():
    x = np.random.default_rng(1).standard_normal((2, 5, 3))
    t = np.array([[0, 1, 2], [3, 4, 0]])
    for name in ("cross_entropy", "nll_loss"):
        got, want = (
            getattr(ns.nn.functional, name)(ns.tensor(x), ns.tensor(t), reduction="none")
            for ns in (staged, torch)
        )
        assert tuple(got.shape) == tuple(want.shape) == (2, 3)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_std_of_a_constant_input_has_gradient_zero_as_torch():
    for shape, dim in (((4,), None), ((2, 3), -1), ((3, 2), 0)):
        grads = []
        for ns in (staged, torch):
            x = ns.full(shape, 2.5, dtype=ns.float64, requires_grad=True)
            ns.autograd.grad(x.std(dim).sum(), x, create_graph=True)[0].sum().backward()
            grads.append((x.grad.numpy(), x.std(dim).detach().numpy()))
        for got, want in zip(*grads):
            np.testing.assert_array_equal(got, want)
    x = staged.tensor([1.0, 2.0, 4.0], dtype=staged.float64, requires_grad=True)
    x.std().backward()  # away from 0 the gradient is unchanged: (x - mean) / (std (n - 1))
    np.testing.assert_allclose(
        x.grad.numpy(), (x.detach().numpy() - 7 / 3) / (np.std([1, 2, 4], ddof=1) * 2), rtol=1e-14
    )


def _quiet_cases(ns):
    z = ns.tensor([0.0, 1.0, -1.0], requires_grad=True)
    ns.log(z).sum().backward()
    (z / z).sum().backward()
    ns.sqrt(z).sum().backward()
    (z**-1.0).sum().backward()
    ns.exp(ns.tensor([1000.0], dtype=ns.float32))
    ns.tensor([60000.0], dtype=ns.float16) * 10
    ns.zeros(0).mean()
    ns.tensor([float("nan"), float("inf")]).long()
    ns.tensor([[float("inf")]]) @ ns.tensor([[0.0]])
    ns.log_softmax(ns.tensor([float("-inf"), float("-inf")]), 0)
    ns.tensor([1.0]) % 0.0
    ns.logsumexp(ns.tensor([float("inf"), 1.0]), 0)
    return ns.tanh(ns.tensor([1e5], requires_grad=True)).sum()


def test_ops_raise_no_numpy_warnings_and_keep_the_callers_error_state():
    """log(0), 0/0, overflow... are values, not warnings (torch is silent); the caller's
    NumPy error state is untouched."""
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        _quiet_cases(torch)
        _quiet_cases(staged).backward()
        with pytest.raises(FloatingPointError):
            np.log(np.zeros(1))


def test_module_made_under_inference_mode_then_trained_raises_torchs_error():
    """Its parameters are inference tensors: the forward and backward run (the bias, used
    without a view, gets its gradient as in torch) and the optimizer's in-place update
    raises torch's error, not an internal TypeError."""

    def train(ns):
        with ns.inference_mode():
            m = ns.nn.Linear(3, 2)
        opt = ns.optim.SGD(m.parameters(), lr=0.1)
        m(ns.ones(2, 3)).sum().backward()
        np.testing.assert_array_equal(m.bias.grad.numpy(), [2.0, 2.0])
        opt.step()

    assert_same_error(train)


def test_nn_init_eye_dirac_orthogonal_trunc_normal_sparse():
    """torch's initialisers: exact values where they are deterministic, the defining
    properties where they are random, and torch's errors."""
    for ns in (staged, torch):
        init = ns.nn.init
        np.testing.assert_array_equal(init.eye_(ns.empty(2, 3)).numpy(), np.eye(2, 3))
    for shape, groups in (((4, 2, 3), 1), ((4, 2, 3, 3), 2), ((2, 3, 1, 3, 5), 1)):
        got, want = (ns.nn.init.dirac_(ns.empty(*shape), groups) for ns in (staged, torch))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    staged.manual_seed(0)
    for shape in ((3, 5), (5, 3), (4, 2, 3)):
        q = staged.nn.init.orthogonal_(staged.empty(*shape), gain=2.0).numpy()
        q = q.reshape(shape[0], -1)
        small = q @ q.T if shape[0] <= q.shape[1] else q.T @ q
        np.testing.assert_allclose(small, 4 * np.eye(len(small)), atol=1e-5)
    t = staged.nn.init.trunc_normal_(
        staged.empty(20000, dtype=staged.float64), 1.0, 2.0, -1.0, 2.0
    ).numpy()
    assert t.min() >= -1.0 and t.max() <= 2.0
    # the truncated normal's moments: alpha = -1, beta = 0.5 in units of std, around mean 1
    pdf = [math.exp(-z * z / 2) / math.sqrt(2 * math.pi) for z in (-1.0, 0.5)]
    mass = (math.erf(0.5 / math.sqrt(2)) - math.erf(-1 / math.sqrt(2))) / 2
    mean = 1.0 + 2.0 * (pdf[0] - pdf[1]) / mass
    std = 2.0 * math.sqrt(
        1 + (-1.0 * pdf[0] - 0.5 * pdf[1]) / mass - ((pdf[0] - pdf[1]) / mass) ** 2
    )
    # 5 standard errors of 20000 draws (std ~0.81): 0.03 for the mean, 0.02 for the std
    assert abs(t.mean() - mean) < 0.03 and abs(t.std() - std) < 0.02
    s = staged.nn.init.sparse_(staged.empty(10, 4), 0.25, std=0.5).numpy()
    assert ((s == 0).sum(0) == 3).all() and s.std() > 0.2  # ceil(0.25 * 10) zeros a column
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        staged.nn.init.trunc_normal_(staged.empty(3), mean=10.0)
    for fn in (
        lambda ns: ns.nn.init.eye_(ns.empty(2, 2, 2)),
        lambda ns: ns.nn.init.dirac_(ns.empty(2, 2)),
        lambda ns: ns.nn.init.dirac_(ns.empty(3, 2, 3), groups=2),
        lambda ns: ns.nn.init.orthogonal_(ns.empty(3)),
        lambda ns: ns.nn.init.sparse_(ns.empty(3), 0.5),
    ):
        assert_same_error(fn)


def test_integer_division_by_zero_raises_as_torch():
    for fn in (
        lambda ns: ns.tensor([5, 3]) % 0,
        lambda ns: ns.tensor([5, 3]) // 0,
        lambda ns: ns.fmod(ns.tensor([5, 3]), ns.tensor([1, 0])),
        lambda ns: 5 % ns.tensor([1, 0]),
        lambda ns: ns.tensor([True]) // True,
    ):
        assert_same_error(fn)


def _floor_divide_forms(ns, a, b):
    """Every spelling of floor division; each must give torch.floor_divide's result."""
    inplace = a.clone()
    inplace //= b
    method = a.clone()
    method.floor_divide_(b)
    return [
        a // b,
        ns.floor_divide(a, b),
        a.floor_divide(b),
        inplace,
        method,
        a[0].item() // b,
        7 // b,
    ]


def test_floor_divide_matches_torch():
    """Python's rounding (down, remainder with the divisor's sign) for floats, with torch's
    signed zeros, inf and NaN, and exact for int64 beyond 2**53."""
    v = [5.0, -5.0, 7.5, -7.5, 0.0, -0.0, 1e300, np.inf, -np.inf, np.nan, 0.3, 6.0]
    w = [2.0, -2.0, 0.0, -0.0, 0.1, 3.0, -3.0, np.inf, 1e-300]
    x, y = np.array([a for a in v for _ in w]), np.array([b for _ in v for b in w])
    ints = (
        np.array([7, -7, 0, 5, -5, 9, -9, 2**62 + 1, -(2**63)]),
        np.array([2, 2, 3, -3, -3, 1, -1, 3, -1]),
    )
    for (a, b), dtype in (
        ((x, y), "float64"),
        ((x, y), "float32"),
        (ints, "int64"),
        ((ints[0][:-2] % 100, ints[1][:-2]), "int32"),
    ):
        got, want = (
            [
                t if isinstance(t, (int, float)) else t.numpy()
                for t in _floor_divide_forms(
                    ns,
                    ns.tensor(a, dtype=getattr(ns, dtype)),
                    ns.tensor(b, dtype=getattr(ns, dtype)),
                )
            ]
            for ns in (staged, torch)
        )
        for g, w_ in zip(got, want):
            np.testing.assert_array_equal(g, w_)
            same_sign = (np.signbit(g) == np.signbit(w_)) | np.isnan(g)  # NaN's sign is noise
            assert same_sign.all()
    with pytest.raises(NotImplementedError, match='"div_floor_cpu" not implemented'):
        staged.tensor([True]) // staged.tensor([True])


@pytest.mark.parametrize("dtype", ["float64", "complex128", "float16", "int64"])
def test_python_data_with_a_dtype_is_cast_once(dtype):
    """``tensor([0.1], dtype=float64)`` went through the default float32 first (0.1 became
    0.10000000149011612); torch casts the Python values straight to ``dtype``."""
    data = [0.1, 1 / 3, 2.0**40 + 1, -7.0]
    got = staged.tensor(data, dtype=getattr(staged, dtype)).numpy()
    want = torch.tensor(data, dtype=getattr(torch, dtype)).numpy()
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize(
    "expr",
    [
        "'{:+.2f}'.format(ns.tensor(1.5))",
        "f'{ns.tensor(3)}'",
        "format(ns.tensor(2.0), '.3e')",
        "f'{ns.ones(2)}'",
    ],
)
def test_format_specs_as_torch(expr):
    """A 0-d tensor formats as its number, as training scripts' f"{loss:.4f}" expect."""
    assert eval(expr, {"ns": staged}) == eval(expr, {"ns": torch})


def test_format_spec_on_a_non_scalar_raises_as_torch():
    assert_same_error(lambda ns: format(ns.ones(2), ".2f"))


# --- found running pytorch/examples scripts under staged.torch_compat (session 20) -------
@pytest.mark.parametrize(
    "args",
    [(5,), (3, 4), ("size",), (), ([1, 2],), ([[1.5, 2]],), ("ndarray",), ("int tensor",)],
    ids=["5", "3,4", "Size", "none", "ints", "floats", "ndarray", "tensor"],
)
def test_tensor_constructor_is_torchs_legacy_one(args):
    """torch.Tensor(5) has 5 elements (staged made a 0-d tensor of 5), Tensor(3, 4) is
    3x4 (staged raised), Tensor(Size) has that shape (staged: shape [2]), data becomes
    the default dtype (staged kept int64), a tensor is aliased whatever its dtype."""
    results = []
    for lib in (staged, torch):
        made = {
            "size": lambda: lib.Size([2, 3]),
            "ndarray": lambda: np.array([1, 2]),
            "int tensor": lambda: lib.tensor([1, 2]),
        }
        a = tuple(made[x]() if isinstance(x, str) else x for x in args)
        t = lib.Tensor(*a)
        results.append((tuple(t.shape), str(t.dtype).split(".")[1]))
        if args in ((5,), (3, 4), ("size",), ()):
            t.zero_()  # uninitialised: only the shape and dtype are torch's
        elif args == ("int tensor",):
            t.add_(1)
            assert a[0].tolist() == [2, 3]  # an alias
        else:
            np.testing.assert_array_equal(t.numpy(), np.asarray(a[0]))
    assert results[0] == results[1]


def test_tensor_constructor_errors_and_half_built_tensors_at_exit():
    """A Python number is not data (torch's error); the Tensor its constructor left half
    built no longer breaks the exit hook that brings device data home."""
    for lib in (staged, torch):
        with pytest.raises(TypeError, match=r"new\(\): data must be a sequence \(got float\)"):
            lib.Tensor(0.5)
    p = subprocess.run(
        [sys.executable, "-c", "import staged\nstaged.Tensor(0.5)"], capture_output=True, text=True
    )
    assert p.returncode == 1 and "data must be a sequence" in p.stderr
    assert "atexit" not in p.stderr and "_payload" not in p.stderr, p.stderr


def test_factories_take_size_as_a_keyword():
    for lib in (staged, torch):
        for f in (lib.zeros, lib.ones, lib.empty, lib.rand, lib.randn):
            assert tuple(f(size=(2, 3)).shape) == (2, 3)
            assert tuple(f(size=[4]).shape) == (4,)
            with pytest.raises(TypeError, match="size"):  # torch's words vary by factory
                f(2, size=(3,))
    staged.manual_seed(1)
    torch.manual_seed(1)
    assert staged.randn(size=(5,)).numpy().tolist() == torch.randn(size=(5,)).numpy().tolist()


def test_sequences_inside_an_index_are_advanced_indices():
    """``x[range(n), labels] = v`` (mnist_forward_forward) and ``x[(0, 1),]``."""
    for lib in (staged, torch):
        x = lib.zeros(3, 4)
        x[range(3), lib.tensor([0, 1, 3])] = 1.0
        assert x.nonzero().tolist() == [[0, 0], [1, 1], [2, 3]]
        assert tuple(x[(0, 2),].shape) == (2, 4)
        assert x[(0, 2), (0, 3)].tolist() == [1.0, 1.0]
        assert tuple(x[range(2)].shape) == (2, 4)


def test_finfo_iinfo_and_device_flags_are_torchs():
    fields = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")
    for name in ("float16", "bfloat16", "float32", "float64", "complex64", "complex128"):
        ours, theirs = staged.finfo(getattr(staged, name)), torch.finfo(getattr(torch, name))
        assert [getattr(ours, f) for f in fields] == [getattr(theirs, f) for f in fields]
    assert staged.finfo().eps == torch.finfo().eps
    for name in ("uint8", "int8", "int16", "int32", "int64"):
        ours, theirs = staged.iinfo(getattr(staged, name)), torch.iinfo(getattr(torch, name))
        assert (ours.bits, ours.max, ours.min, ours.dtype) == (
            theirs.bits,
            theirs.max,
            theirs.min,
            theirs.dtype,
        )
    with pytest.raises(TypeError, match="requires a floating point input type"):
        staged.finfo(staged.int64)
    with pytest.raises(TypeError, match="requires an integer input type"):
        staged.iinfo(staged.float32)
    t = staged.zeros(1)
    for flag in ("is_xpu", "is_mps", "is_meta", "is_sparse", "is_sparse_csr", "is_quantized"):
        assert getattr(t, flag) is False is getattr(torch.zeros(1), flag)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("exponent", [2, 3, -2, 0.5, -0.5, -1, 2.0, 3.0])
def test_pow_by_a_scalar_is_torchs_products_sqrt_and_reciprocals(exponent, dtype):
    """torch runs x ** 2, 3, -2, 0.5, -0.5, -1 as products, sqrt and reciprocals: their
    values to the bit (-0.0 ** -0.5 is -inf, -inf ** -0.5 NaN, as rsqrt), and the
    gradient's x ** (e - 1) too where e - 1 is one of them (or 1); x ** -1.5 and x ** -3
    are pow's, SLEEF's in torch, C's here: within a few ulp."""
    x = [-0.0, 0.0, -np.inf, np.inf, np.nan, -1.0, 4.0, 1e-30, 3.3, -2.7, 1e30, 7e-3]
    out = []
    for lib in (staged, torch):
        t = lib.tensor(x, dtype=getattr(lib, dtype), requires_grad=True)
        y = t**exponent
        (g,) = lib.autograd.grad(y.sum(), [t])
        out.append([a.detach().numpy() for a in (y, g)])
    for ours, theirs, rtol in zip(*out, (0, 0 if exponent - 1 in (2, 3, -2, 1, 0.5, -1) else 4)):
        rtol *= np.finfo(dtype).eps
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=0)
        known = ~np.isnan(theirs)
        assert (np.signbit(ours) == np.signbit(theirs))[known].all(), (ours, theirs)


def test_scatters_into_a_transposed_tensor_are_torchs():
    """scatter, scatter_add and scatter_reduce of a non-contiguous input (a transpose, or a
    batch dim vmap moved) wrote into a copy of the flattened result and returned the input
    unchanged (the copy kept the input's Fortran order, so reshape(-1) copied again)."""
    out = []
    for lib in (staged, torch):
        x = lib.arange(12.0).reshape(4, 3).t()
        idx = lib.tensor([[0, 1, 2, 0], [1, 1, 0, 0], [2, 2, 2, 2]])
        src = lib.arange(12.0).reshape(3, 4) + 1
        out.append(
            [
                x.scatter(1, idx, src),
                x.scatter_add(1, idx, src),
                x.scatter_reduce(1, idx, src, "amax"),
                x.scatter_reduce(1, idx, src, "prod", include_self=False),
                x.gather(1, idx),
            ]
        )
    for ours, theirs in zip(*out):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_empty_slices_are_views_as_torchs():
    """x[:, 1:1] is a view of x (NumPy sees no shared memory in an empty array, so it was a
    new tensor): an in-place op on it with a grad-requiring operand makes x require grad
    (a compiled step, which traced it as a view, disagreed with eager; fuzzer)."""
    for lib in (staged, torch):
        s = lib.tensor(2.0, requires_grad=True)
        x = lib.zeros(3, 2)
        views = [x[:, 1:1], x[2:2], x.narrow(1, 0, 0), x[:, 1:1].reshape(0)]
        assert all(v._base is x for v in views), lib.__name__
        views[0].div_(s)
        assert x.requires_grad and x.grad_fn is not None
        x.sum().backward()
        assert s.grad.item() == 0.0


def test_xlogy_and_xlog1py_are_plus_zero_where_x_is_zero():
    """torch's kernels return 0 where x is 0 (and y is not NaN); the product x * log(y)
    gave -0 for log(y) < 0 (printed as -0., and sqrt of it has a -inf tangent)."""
    x, y = [0.0, -0.0, 0.0, 2.0, 0.0, 5.0], [0.5, 0.5, -1.0, 0.0, float("nan"), -0.0]
    for f in ("xlogy", "xlog1py"):
        got, want = (
            getattr(lib.special, f)(lib.tensor(x), lib.tensor(y)).numpy() for lib in (staged, torch)
        )
        np.testing.assert_array_equal(got, want)
        assert (np.signbit(got) == np.signbit(want)).all(), (f, got, want)
