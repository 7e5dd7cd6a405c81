"""Every registry primitive, swept in float64: shape rule vs impl, VJP vs finite
differences and vs torch.autograd.grad, JVP vs finite differences; grad-of-grad for a few.

A primitive's samples are its SAMPLES entry, else those recorded from the op database
(``tests/ops/recorded.py``: a new primitive behind a public op needs no entry here). A
primitive with neither fails here."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged import dtypes as dt
from staged.autodiff import REGISTRY, Aval, jvp_rule
from tests.checks import assert_close, check_grads, numerical_jvp, to_numpy, to_torch
from tests.ops import recorded


def r(*shape, low=-2.0, high=2.0):
    return np.random.uniform(low, high, shape)


def mask(*shape):
    return np.random.random(shape) < 0.5


def _clamp_sample(keep):
    """clamp_where's operands as clamp(x, min=bound) makes them: c is x < bound."""
    bound, x = r(2, 3), r(2, 3)
    return [x < bound, bound, x], {"keep": keep}


def nonzero(*shape):  # away from the kinks of abs, sign, relu at 0
    return r(*shape, low=0.2) * np.where(mask(*shape), 1, -1)


POS = dict(low=0.3, high=2.0)
UNARY = {
    "neg": {},
    "copy": {},
    "finite_grad": {},
    "conj": {},
    "exp": {},
    "log": POS,
    "log1p": POS,
    "expm1": {},
    "sqrt": POS,
    "rsqrt": POS,
    "reciprocal": POS,
    "tanh": {},
    "sigmoid": {},
    "sin": {},
    "cos": {},
}
BINARY = ("add", "sub", "mul", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge")

WINDOWS_2D = {"kernel": (2, 3), "stride": (2, 1), "padding": ((1, 0), (1, 2)), "dilation": (1, 2)}
WINDOWS_1D = {"kernel": (3,), "stride": (2,), "padding": ((1, 1),), "dilation": (1,)}

# name -> function returning a list of (inputs, params); inputs are NumPy arrays
_SLOPE = {"negative_slope": 0.01}
_BOUNDS = {"min_val": -1.0, "max_val": 1.0}
_HT = np.array([-1.7, -1.2, -0.6, 0.3, 0.9, 1.6])
SAMPLES = {
    **{
        n: (lambda kw: lambda: [([r(2, 3, **kw)], {}), ([r(**kw)], {})])(kw)
        for n, kw in UNARY.items()
    },
    **{n: lambda: [([nonzero(2, 3)], {}), ([nonzero()], {})] for n in ("relu", "abs", "sign")},
    **{n: lambda: [([r(2, 3), r(2, 3)], {}), ([r(), r()], {})] for n in BINARY},
    "logical_not": lambda: [([mask(4)], {})],
    "logical_and": lambda: [([mask(4), mask(4)], {})],
    "floor_divide": lambda: [([np.array([7, -7, 0, 2**62 + 1]), np.array([2, 2, -3, 3])], {})],
    "logical_or": lambda: [([mask(4), mask(4)], {})],
    "div": lambda: [([r(2, 3), nonzero(2, 3)], {})],
    "pow": lambda: [([r(2, 3, **POS), r(2, 3)], {}), ([r(3, **POS), np.full(3, 2.0)], {})],
    "where": lambda: [([mask(2, 3), r(2, 3), r(2, 3)], {})],
    "fma": lambda: [([r(2, 3), r(2, 3), r(2, 3)], {}), ([r(), r(), r()], {})],
    "clamp_where": lambda: [_clamp_sample("ge"), _clamp_sample("gt")],
    "threshold_backward": lambda: [
        ([r(2, 3), nonzero(2, 3)], {"threshold": 0}),
        ([r(), nonzero()], {"threshold": 0.05}),
    ],
    "leaky_relu": lambda: [([nonzero(2, 3)], {"negative_slope": 0.2}), ([nonzero()], _SLOPE)],
    "leaky_relu_backward": lambda: [([r(2, 3), nonzero(2, 3)], {"negative_slope": -0.5})],
    # away from the bounds, where the gradient steps
    "hardtanh": lambda: [([_HT], _BOUNDS), ([np.float64(0.4)], _BOUNDS)],
    "hardtanh_backward": lambda: [
        ([r(6), _HT], _BOUNDS),
        ([r(6), _HT], {**_BOUNDS, "max_val": 2.0}),
    ],
    "cast": lambda: [
        ([r(2, 3)], {"dtype": dt.float64}),
        ([r(3)], {"dtype": dt.float32}),
        ([r(3)], {"dtype": dt.int64}),
    ],
    "view_dtype": lambda: [
        ([r(2, 4)], {"dtype": dt.int64}),
        ([r(2, 4)], {"dtype": dt.float32}),
        ([r(3)], {"dtype": dt.uint8}),
    ],
    "reshape": lambda: [([r(2, 3)], {"shape": (3, 2)}), ([r(4)], {"shape": (2, 1, 2)})],
    "expand": lambda: [([r(2, 1)], {"shape": (2, 3)}), ([r(1, 1)], {"shape": (4, 3)})],
    "permute": lambda: [([r(2, 3, 4)], {"perm": (2, 0, 1)})],
    "reduce_sum": lambda: [
        ([r(2, 3, 4)], {"dims": (0, 2), "keepdim": False}),
        ([r(2, 3)], {"dims": (1,), "keepdim": True}),
    ],
    "reduce_max": lambda: [
        ([r(2, 3, 4)], {"dims": (1,), "keepdim": False}),
        ([r(2, 3)], {"dims": (0, 1), "keepdim": True}),
    ],
    "reduce_min": lambda: [([r(2, 3, 4)], {"dims": (0, 2), "keepdim": True})],
    "argmax": lambda: [([r(2, 3)], {"dim": 1, "keepdim": False})],
    "argmin": lambda: [([r(2, 3)], {"dim": 0, "keepdim": True})],
    "matmul": lambda: [([r(2, 3), r(3, 4)], {}), ([r(2, 2, 3), r(2, 3, 1)], {})],
    # math: complex behaviour of sgn/angle/real/imag/abs is swept in tests/eager/test_complex.py
    **{
        n: (lambda kw: lambda: [([r(2, 3, **kw)], {}), ([r(**kw)], {})])(kw)
        for n, kw in {
            "tan": dict(low=-1.2, high=1.2),
            "sinh": {},
            "cosh": {},
            "atan": {},
            "erf": {},
            "asin": dict(low=-0.9, high=0.9),
            "acos": dict(low=-0.9, high=0.9),
            "log2": POS,
            "log10": POS,
            "exp2": {},
            "floor": {},
            "ceil": {},
            "round": {},
            "trunc": {},
            "real": {},
        }.items()
    },
    "imag": lambda: [([r(2, 3) + 1j * r(2, 3)], {}), ([np.complex128(r() - 1j)], {})],
    **{n: lambda: [([nonzero(2, 3)], {}), ([nonzero()], {})] for n in ("sgn", "angle")},
    **{
        n: lambda: [([r(2, 3), nonzero(2, 3)], {}), ([r(), nonzero()], {})]
        for n in ("atan2", "remainder", "fmod")
    },
    "reduce_prod": lambda: [
        ([r(2, 3, 4)], {"dims": (0, 2), "keepdim": False}),
        ([r(2, 3)], {"dims": (1,), "keepdim": True}),
        ([np.array([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0]])], {"dims": (1,), "keepdim": False}),
    ],
    "cumsum": lambda: [
        ([r(2, 3, 4)], {"dim": 1, "reverse": False}),
        ([r(5)], {"dim": 0, "reverse": True}),
    ],
    "argsort": lambda: [
        ([r(3, 5)], {"dim": 1, "descending": False, "k": 5}),
        ([r(3, 5)], {"dim": 0, "descending": True, "k": 2}),
    ],
    "im2col": lambda: [
        ([r(2, 3, 5, 4)], WINDOWS_2D | {"pad_value": 0.0}),
        ([r(1, 2, 7)], WINDOWS_1D | {"pad_value": -1.5}),
    ],
    "col2im": lambda: [
        ([r(2, 3, 3, 3, 2, 3)], WINDOWS_2D | {"shape": (5, 4)}),
        ([r(1, 4, 2, 3)], WINDOWS_1D | {"shape": (7,)}),
    ],
    "uniform": lambda: [
        ([np.array([7, 3])], {"shape": (2, 3), "dtype": dt.float64}),
        ([np.array([-1, 2**40])], {"shape": (), "dtype": dt.float32}),
    ],
    "slice": lambda: [([r(4, 5)], {"starts": (1, 0), "stops": (4, 5), "steps": (2, 2)})],
    "strided": lambda: [
        ([r(3, 4)], {"shape": (2, 3), "strides": (5, 1), "offset": 1}),
        ([r(3, 4)], {"shape": (4, 3), "strides": (2, 1), "offset": 0}),  # overlapping
    ],
    "slice_scatter": lambda: [
        ([r(4, 5), r(2, 3)], {"starts": (1, 0), "stops": (4, 5), "steps": (2, 2)})
    ],
    "gather": lambda: [
        ([r(3, 4), np.random.randint(0, 4, (3, 2))], {"dim": 1}),
        ([r(2, 3), np.random.randint(0, 2, (4, 3))], {"dim": 0}),
    ],
    "scatter_add": lambda: [([r(3, 4), np.random.randint(0, 4, (3, 5)), r(3, 5)], {"dim": 1})],
    "scatter_reduce": lambda: [
        ([r(3, 4), np.random.randint(0, 4, (3, 5)), r(3, 5)], {"dim": 1, "reduce": reduce})
        for reduce in ("prod", "amax", "amin")
    ],
    # distinct indices per row: with repeated ones only the last write reaches the output,
    # yet every source gets its gradient (torch's), which finite differences cannot see
    "scatter": lambda: [
        ([r(3, 4), np.argsort(np.random.random((3, 4)), 1)[:, :3], r(3, 3)], {"dim": 1})
    ],
    "concat": lambda: [([r(2, 3), r(2, 1), r(2, 2)], {"dim": 1, "sizes": (3, 1, 2)})],
    "check": lambda: [
        ([np.array([0])], {"error": "IndexError", "message": "index {}", "lo": 0, "hi": 3})
    ],
    "barrier": lambda: [([r(2, 3)], {}), ([r()], {})],
    # collectives, in the group of this process alone (Note [collectives]); on several
    # ranks they are checked by tests/distributed
    "all_reduce": lambda: [
        ([nonzero(2, 3)], {"op": op}) for op in ("sum", "avg", "max", "min", "product")
    ],
    "broadcast": lambda: [([r(2, 3)], {"src": 0})],
    "all_gather": lambda: [([r(2, 3)], {"world": 1}), ([r()], {"world": 1})],
    "reduce_scatter": lambda: [
        ([r(1, 2, 3)], {"op": "sum", "world": 1}),
        ([r(1, 3)], {"op": "avg", "world": 1}),
    ],
}


def _prod(x, dims, keepdim):
    for d in sorted(dims, reverse=True):
        x = x.prod(d, keepdim=keepdim)
    return x


def _torch_dtype(d):
    return getattr(torch, d.name)


# name -> the equivalent torch op, called as fn(*torch_inputs, **params)
TORCH = {
    **{
        n: getattr(torch, n)
        for n in (
            "neg",
            "exp",
            "log",
            "log1p",
            "expm1",
            "sqrt",
            "rsqrt",
            "reciprocal",
            "tanh",
            "sigmoid",
            "sin",
            "cos",
            "relu",
            "abs",
            "sign",
            "conj",
            "add",
            "sub",
            "mul",
            "div",
            "pow",
            "maximum",
            "minimum",
            "where",
            "matmul",
        )
    },
    "copy": torch.clone,
    "clamp_where": lambda c, bound, x, keep: torch.where(c, bound, x),
    "fma": lambda a, b, c: torch.addcmul(c, a, b),
    "barrier": torch.clone,
    "floor_divide": torch.floor_divide,
    "threshold_backward": torch.ops.aten.threshold_backward,
    "leaky_relu": torch.ops.aten.leaky_relu,
    "leaky_relu_backward": lambda g, x, negative_slope: torch.ops.aten.leaky_relu_backward(
        g, x, negative_slope, False
    ),
    "hardtanh": torch.ops.aten.hardtanh,
    "hardtanh_backward": torch.ops.aten.hardtanh_backward,
    "nan_to_num": torch.nan_to_num,
    "polygamma": lambda x, n: torch.polygamma(n, x),
    "cast": lambda x, dtype: x.to(_torch_dtype(dtype)),
    "view_dtype": lambda x, dtype: x.view(_torch_dtype(dtype)),
    "reshape": lambda x, shape: x.reshape(shape),
    "expand": lambda x, shape: x.expand(shape),
    "permute": lambda x, perm: x.permute(perm),
    "finite_grad": torch.clone,  # its gradient differs only where not finite
    "reduce_sum": lambda x, dims, keepdim: x.sum(dims, keepdim),
    "reduce_max": lambda x, dims, keepdim: x.amax(dims, keepdim),
    "reduce_min": lambda x, dims, keepdim: x.amin(dims, keepdim),
    **{
        n: getattr(torch, n)
        for n in (
            "tan",
            "sinh",
            "cosh",
            "asin",
            "acos",
            "atan",
            "erf",
            "log2",
            "log10",
            "exp2",
            "floor",
            "ceil",
            "round",
            "trunc",
            "angle",
            "real",
            "atan2",
            "remainder",
            "fmod",
        )
    },
    "xlogy": torch.xlogy,
    "binary_cross_entropy": lambda x, y: torch.nn.functional.binary_cross_entropy(
        x, y, reduction="none"
    ),
    "xlog1py": torch.special.xlog1py,
    "sgn": lambda x: torch.sgn(x) + x * 0,  # a dense zero gradient, not torch's ZeroTensor
    "reduce_prod": lambda x, dims, keepdim: _prod(x, dims, keepdim),
    "cumsum": lambda x, dim, reverse: (
        x.flip(dim).cumsum(dim).flip(dim) if reverse else x.cumsum(dim)
    ),
    "slice": lambda x, starts, stops, steps: x[tuple(map(slice, starts, stops, steps))],
    "strided": lambda x, shape, strides, offset: x.reshape(-1).as_strided(shape, strides, offset),
    "slice_scatter": lambda x, src, starts, stops, steps: _slice_scatter(
        x, src, starts, stops, steps
    ),
    "gather": lambda x, index, dim: torch.gather(x, dim, index),
    "scatter_add": lambda x, index, src, dim: torch.scatter_add(x, dim, index, src),
    "scatter_reduce": lambda x, index, src, dim, reduce: torch.scatter_reduce(
        x, dim, index, src, reduce
    ),
    "scatter": lambda x, index, src, dim: torch.scatter(x, dim, index, src),
    "concat": lambda *xs, dim, sizes: torch.cat(xs, dim),
    "all_reduce": lambda x, op: x.clone(),  # collectives in a group of one process
    "broadcast": lambda x, src: x.clone(),
    "all_gather": lambda x, world: x.unsqueeze(0),
    "reduce_scatter": lambda x, op, world: x[0],
    "view_as_complex": torch.view_as_complex,
}


def _slice_scatter(x, src, starts, stops, steps):
    out = x.clone()
    out[tuple(map(slice, starts, stops, steps))] = src
    return out


def _torch_im2col(x, kernel, stride, padding, dilation, pad_value=0.0):
    """im2col from torch's Tensor.unfold, one spatial dim at a time."""
    k = len(kernel)
    x = torch.nn.functional.pad(x, [p for pair in reversed(padding) for p in pair], value=pad_value)
    for i in range(k):
        x = x.unfold(2 + i, dilation[i] * (kernel[i] - 1) + 1, stride[i])
    x = x[(Ellipsis,) + tuple(slice(None, None, d) for d in dilation)]
    return x.permute((0,) + tuple(range(2, 2 + k)) + (1,) + tuple(range(2 + k, 2 + 2 * k)))


def _torch_col2im(cols, shape, **windows):
    """col2im as the transpose of im2col (differentiable again: create_graph)."""
    k = len(shape)
    x = torch.zeros(
        (cols.shape[0], cols.shape[1 + k]) + tuple(shape), dtype=cols.dtype, requires_grad=True
    )
    return torch.autograd.grad(_torch_im2col(x, **windows), x, cols, create_graph=True)[0]


TORCH["im2col"] = _torch_im2col
TORCH["col2im"] = _torch_col2im

# checked on real samples; a primitive whose domain is complex only (imag) is checked
# against torch and finite differences in tests/eager/test_complex.py
DIFFERENTIABLE = sorted(
    n for n, p in REGISTRY.items() if p.differentiable and "float" not in p.unsupported
)


def samples(name):
    """SAMPLES' cases, else the op database's (its float operands in float64)."""
    if name in SAMPLES:
        return SAMPLES[name]()
    found = recorded.samples(name)
    assert found, f"primitive {name!r}: no entry in SAMPLES and no public op reaches it"
    return [
        ([x.astype(np.float64) if x.dtype.kind == "f" else x for x in xs], p) for xs, p in found
    ]


def torch_op(name):
    """The torch twin of primitive ``name``: TORCH's entry, else ``torch.<name>`` (or
    ``torch.special.<name>``) for a primitive that is itself a public op (``public=``)."""
    if name in TORCH:
        return TORCH[name]
    twin = getattr(torch, name, None) or getattr(torch.special, name, None)
    assert REGISTRY[name].public is not None and twin is not None, (
        f"primitive {name!r} has no torch equivalent in TORCH"
    )
    return twin


def _float_samples(name, float64_only=True):
    """Real samples whose output is differentiable (a cast to int64 is not); finite
    differences need a float64 output (a cast to float32 rounds away their accuracy)."""
    return [
        (xs, p)
        for xs, p in samples(name)
        if all(np.asarray(x).dtype.kind != "c" for x in xs)
        and (
            p.get("dtype", dt.float64) is dt.float64
            or not float64_only
            and p["dtype"].is_floating_point
        )
    ]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_shape_rule_matches_impl(name):
    prim = REGISTRY[name]
    for xs, params in samples(name):
        out = np.asarray(prim.impl(*xs, **params))
        aval = prim.abstract_eval(
            *(Aval(np.shape(x), dt.from_numpy_dtype(np.asarray(x).dtype)) for x in xs), **params
        )
        assert aval == Aval(out.shape, dt.from_numpy_dtype(out.dtype)), (params, aval, out.dtype)
        bound = prim(*(staged.tensor(x) for x in xs), **params)  # through eager dispatch
        assert bound._aval() == aval


# inputs whose VJP rule raises, as torch's backward does (torch differentiates only q)
NOT_DIFFERENTIATED = {"zeta": {0}, "igamma": {0}, "igammac": {0}}
# primitives whose forward mode raises, as torch's (NotImplementedError)
NO_FORWARD_AD = {"igamma", "igammac"}


def _varied(name, xs):
    """The positions of ``xs`` that gradients and tangents are taken for."""
    return [
        i
        for i, x in enumerate(xs)
        if x.dtype.kind == "f" and i not in NOT_DIFFERENTIATED.get(name, ())
    ]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_vjp_matches_finite_differences(name):
    if name == "view_as_complex":
        pytest.skip("real in, complex out: tests/test_view_as_real.py runs gradcheck on it")
    fixed = NOT_DIFFERENTIATED.get(name, set())
    for xs, params in _float_samples(name):

        def f(*ins, xs=xs, params=params):
            it = iter(ins)
            ins = [staged.tensor(x) if i in fixed else next(it) for i, x in enumerate(xs)]
            return REGISTRY[name](*ins, **params)

        check_grads(f, [x for i, x in enumerate(xs) if i not in fixed])


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_vjp_matches_torch(name):
    prim = REGISTRY[name]
    for xs, params in _float_samples(name, float64_only=False):
        varied = _varied(name, xs)
        ins = [staged.tensor(x, requires_grad=i in varied) for i, x in enumerate(xs)]
        tins = [to_torch(t) for t in ins]
        out, tout = prim(*ins, **params), torch_op(name)(*tins, **params)
        assert_close(out, tout)
        u = np.random.standard_normal(out.shape).astype(to_numpy(out).dtype)
        wrt = [t for t in ins if t.requires_grad]
        grads = staged.autograd.grad(out, wrt, staged.tensor(u))
        tgrads = torch.autograd.grad(tout, [t for t in tins if t.requires_grad], torch.tensor(u))
        for g, tg in zip(grads, tgrads):
            assert_close(g, tg, rtol=1e-6, atol=1e-6)


def _tangent_subsets(name, xs):
    """All float inputs carrying a tangent, then (for several) each one alone."""
    floats = _varied(name, xs)
    return [floats] + ([[i] for i in floats] if len(floats) > 1 else [])


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_jvp_matches_finite_differences(name):
    prim = REGISTRY[name]
    jvp = jvp_rule(prim)
    for xs, params in _float_samples(name):
        if name in NO_FORWARD_AD:
            primals = [staged.tensor(x) for x in xs]
            tangents = [staged.tensor(np.ones(x.shape)) for x in xs]
            with pytest.raises(NotImplementedError, match="forward AD"):
                jvp(primals, tangents, prim(*primals, **params), **params)
            continue
        for which in _tangent_subsets(name, xs):
            vs = [
                np.random.standard_normal(x.shape) if i in which else None for i, x in enumerate(xs)
            ]
            primals = [staged.tensor(x) for x in xs]
            tangents = [None if v is None else staged.tensor(v) for v in vs]
            out = prim(*primals, **params)
            t_out = jvp(primals, tangents, out, **params)
            expected = numerical_jvp(lambda *ins: prim(*ins, **params), xs, vs)
            assert t_out.shape == out.shape and t_out.dtype is out.dtype
            assert_close(t_out, expected, rtol=1e-5, atol=1e-7, check_dtype=False)


@pytest.mark.parametrize("name", sorted(n for n, p in REGISTRY.items() if not p.differentiable))
def test_jvp_of_non_differentiable_is_none(name):
    xs, params = samples(name)[0]
    primals = [staged.tensor(x) for x in xs]
    tangents = [staged.tensor(np.ones(x.shape)) for x in xs]
    assert jvp_rule(REGISTRY[name])(primals, tangents, None, **params) is None


@pytest.mark.parametrize(
    "name",
    [
        "exp",
        "tanh",
        "mul",
        "div",
        "matmul",
        "reduce_max",
        "pow",
        "sigmoid",
        "where",
        "sqrt",
        "erf",
        "reduce_prod",
        "atan2",
        "im2col",
        "col2im",
    ],
)
def test_grad_of_grad_matches_finite_differences(name):
    for xs, params in _float_samples(name):
        check_grads(lambda *ins: REGISTRY[name](*ins, **params), xs, order=2, rtol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_large_threshold_and_hardtanh_backward_are_torchs_bit_for_bit(dtype):
    """Past 256 elements these backward kernels mask bits instead of calling np.where: the
    same bits as torch's kernel, with +0 where masked (a -0.0 or NaN gradient included),
    infinities and NaNs passed, NaN results passing the gradient, strided operands."""
    rng = np.random.default_rng(0)
    g, x = (rng.standard_normal((40, 30)).astype(dtype) for _ in range(2))
    x[0, :6] = [0.0, -0.0, np.nan, np.inf, -np.inf, 0.05]
    g[0, 6:10] = g[1, :4] = [np.inf, np.nan, -0.0, -np.inf]
    x[1, :4] = -1.0
    for gs, xs in ((g, x), (g[:, ::2], x[:, 1::2]), (g.T, x.T)):
        for threshold in (0, 0.05):
            got = REGISTRY["threshold_backward"].impl(gs, xs, threshold=threshold)
            want = torch.ops.aten.threshold_backward(
                torch.tensor(gs), torch.tensor(xs), threshold
            ).numpy()
            bits = f"uint{8 * got.dtype.itemsize}"
            np.testing.assert_array_equal(got.view(bits), want.view(bits))
        xs = np.where(np.isnan(xs), xs.dtype.type(0.3), xs)  # torch's kernels disagree at NaN
        got = REGISTRY["hardtanh_backward"].impl(gs, xs, min_val=-0.5, max_val=0.5)
        want = torch.ops.aten.hardtanh_backward(torch.tensor(gs), torch.tensor(xs), -0.5, 0.5)
        np.testing.assert_array_equal(got.view(bits), want.numpy().view(bits))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_stacked_outer_products_are_torchs(dtype):
    """A stack of outer products (k = 1) is one BLAS GEMM per matrix, k padded to 2 with
    zeros (Note [outer products]; float16 by einsum): torch's values entry for entry, +0
    for a -0 product, infinities and NaN passed, strided operands."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 40, 1)).astype(dtype), rng.standard_normal((5, 1, 30))
    b = b.astype(dtype)
    a[0, :4, 0] = [-1.0, 0.0, np.inf, 1e-3]
    b[0, 0, :4] = [0.0, -2.0, np.nan, 1e-4]
    for x, y in ((a, b), (a[:, ::2], b[:, :, 1::3]), (a[::-1], b[:, :, ::-1])):
        got = REGISTRY["matmul"].impl(x, y)
        want = (torch.tensor(x.copy()) @ torch.tensor(y.copy())).numpy()
        np.testing.assert_array_equal(got, want)  # NaN where torch's (its sign may differ)
        finite = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]))


# --- where's selection by bits (elementwise._select) -------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32"])
@pytest.mark.parametrize("shape", [(300,), (17, 40), (7,)], ids=["300", "17x40", "7"])
def test_where_selects_np_where_bit_for_bit(dtype, shape):
    import sys

    import ml_dtypes

    select = sys.modules["staged.autodiff.elementwise"]._select
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 4).astype(dt)
    y = (rng.standard_normal(shape) * 4).astype(dt)
    if np.dtype(dt).kind != "i":
        x.reshape(-1)[::7] = np.nan
        y.reshape(-1)[::5] = -0.0
        x.reshape(-1)[::11] = np.inf
        y.reshape(-1)[::13] = -np.inf
    c = rng.random(shape) > 0.5
    zero = np.zeros((), dt)
    for cond, a, b in [
        (c, x, y),
        (c, x, np.broadcast_to(zero, shape)),  # a gradient's where(c, g, 0)
        (c, zero, y),
        (c[..., :1], x, y),  # a broadcast condition
    ]:
        ours, ref = select(cond, a, b), np.where(cond, a, b)
        assert ours.dtype == ref.dtype and ours.shape == ref.shape
        np.testing.assert_array_equal(ours.view(np.uint8), ref.view(np.uint8))


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("size", [300, 7], ids=["bits", "masked write"])
def test_relu_and_hardtanh_are_torchs_bit_for_bit(size, order):
    """relu by _zero_where's bits past a few hundred values, hardtanh by np.clip: torch's
    results bit for bit (NaN, -0.0 kept at a bound of 0, infinities), in either layout."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((size, 3)) * 4).astype(np.float32)
    x[:5, 0] = [np.nan, -0.0, 0.0, np.inf, -np.inf]
    x = np.asarray(x, order=order)
    xt = torch.tensor(x)
    cases = {"relu": (lambda t: t.relu(), lambda t: t.relu())}
    for lo, hi in [(-1.0, 1.0), (0.0, 6.0), (-6.0, 0.0), (0.0, 0.0)]:
        cases[f"hardtanh({lo}, {hi})"] = (
            lambda t, lo=lo, hi=hi: staged.nn.functional.hardtanh(t, lo, hi),
            lambda t, lo=lo, hi=hi: torch.nn.functional.hardtanh(t, lo, hi),
        )
    for name, (ours, theirs) in cases.items():
        got = ours(staged.tensor(x)).numpy()
        want = theirs(xt).numpy()
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=name)


@pytest.mark.parametrize("slope", [0.0, 0.01, 1.0, 2.0, -0.5])
def test_leaky_relu_is_torchs_bit_for_bit(slope):
    """leaky_relu by max(x, slope x) for slopes in (0, 1], by selection otherwise: torch's
    values bit for bit at NaN, signed zeros, infinities and the smallest subnormal."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((300, 3)) * 4).astype(np.float32)
    x[:6, 0] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 1e-45]
    got = staged.nn.functional.leaky_relu(staged.tensor(x), slope).numpy()
    want = torch.nn.functional.leaky_relu(torch.tensor(x), slope).numpy()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("descending", [True, False])
def test_argsort_of_a_few_by_partition_is_the_stable_sorts(descending):
    """argsort's first k of a float row (k at most a quarter of it) by a partition: the
    full stable sort's first k, ties in index order, where equal values straddle the
    boundary or NaN is present too (both fall back); and torch's topk values."""
    argsort = REGISTRY["argsort"].impl
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(4, 40))
        x = rng.standard_normal((3, n, 2)).astype(np.float32)
        if trial % 2:  # few distinct values: ties within and across the boundary
            x = rng.integers(-3, 4, x.shape).astype(np.float32)
        if trial % 5 == 0:
            x[0, 0, 0] = np.nan
        x[1, :2, 1] = [-0.0, 0.0]
        k = int(rng.integers(1, n // 4 + 1))
        got = argsort(x, dim=1, descending=descending, k=k)
        key = -x if descending else x  # (NaN stays last: the full sort's order below)
        order = np.argsort(np.flip(x, 1), axis=1, kind="stable") if descending else None
        full = n - 1 - np.flip(order, 1) if descending else np.argsort(key, 1, kind="stable")
        np.testing.assert_array_equal(got, full[:, :k], err_msg=f"trial {trial}")
        want = torch.tensor(x).topk(k, 1, largest=descending).values.numpy()
        np.testing.assert_array_equal(np.take_along_axis(x, got, 1), want)
