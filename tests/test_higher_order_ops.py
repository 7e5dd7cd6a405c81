"""``torch._higher_order_ops`` against torch 2.13: ``associative_scan`` (torch's recursive
odd/even scan, so float results are torch's to the bit), ``scan`` and ``map``, their
gradients and errors, and an associative scan under staged.compile."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch._higher_order_ops as T

import staged
import staged._higher_order_ops as S

RNG = np.random.default_rng(0)
HOPS = {staged: S, torch: T}
GENERIC = {"combine_mode": "generic"}


def linear_recurrence(left, right):
    """Mamba's combine: h_t = a_t h_{t-1} + b_t as pairs (a, b)."""
    return left[0] * right[0], right[0] * left[1] + right[1]


COMBINES = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "max": lambda a, b: a.maximum(b),
    "linear": linear_recurrence,
}


def _inputs(name, shape, dtype):
    a = RNG.uniform(0.5, 1.5, shape).astype(dtype)  # products stay finite over the scan
    return (a, RNG.standard_normal(shape).astype(dtype)) if name == "linear" else a


def _to(lib, tree, requires_grad=False):
    if isinstance(tree, tuple):
        return tuple(_to(lib, t, requires_grad) for t in tree)
    return lib.tensor(tree, requires_grad=requires_grad)


def _leaves(tree):
    return list(tree) if isinstance(tree, (tuple, list)) else [tree]


def _torch_quietly(fn):
    """torch's HOPs warn that they are prototypes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


@pytest.mark.parametrize("name", sorted(COMBINES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 5, 8, 13])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_is_torchs_to_the_bit(name, dtype, n, dim, reverse):
    shape = [3, 4, 2]
    shape[dim] = n
    xs = _inputs(name, shape, dtype)

    def run(lib):
        out = HOPS[lib].associative_scan(
            COMBINES[name], _to(lib, xs), dim, reverse=reverse, **GENERIC
        )
        return [t.numpy() for t in _leaves(out)]

    ours, theirs = run(staged), _torch_quietly(lambda: run(torch))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)  # the same combine calls on IEEE-exact ops


def test_associative_scan_of_a_cumulative_sum_equals_cumsum():
    x = staged.tensor(RNG.standard_normal((6, 3)))
    out = S.associative_scan(lambda a, b: a + b, x, 0, **GENERIC)
    np.testing.assert_allclose(out.numpy(), np.cumsum(x.numpy(), 0), rtol=1e-14)


def test_associative_scan_keeps_pytree_structure_and_combine_dtypes():
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    ints = np.arange(7)

    def run(lib):
        hop = HOPS[lib]
        d = hop.associative_scan(
            lambda a, b: {"s": a["s"] + b["s"], "p": [a["p"][0] * b["p"][0]]},
            {"s": lib.tensor(x), "p": [lib.tensor(x)]},
            0,
            **GENERIC,
        )
        widened = hop.associative_scan(lambda a, b: (a + b).double(), lib.tensor(x), 1, **GENERIC)
        whole = hop.associative_scan(lambda a, b: a + b, lib.tensor(ints), 0, **GENERIC)
        flags = hop.associative_scan(
            lambda a, b: a | b, lib.tensor([False, True, False]), 0, **GENERIC
        )
        return d, widened, whole, flags

    (d, widened, whole, flags), (td, tw, tint, tflags) = (
        run(staged),
        _torch_quietly(lambda: run(torch)),
    )
    assert sorted(d) == ["p", "s"] and isinstance(d["p"], list)
    np.testing.assert_array_equal(d["s"].numpy(), td["s"].numpy())
    np.testing.assert_array_equal(d["p"][0].numpy(), td["p"][0].numpy())
    assert widened.dtype == staged.float64
    np.testing.assert_array_equal(widened.numpy(), tw.numpy())
    assert whole.dtype == staged.int64
    np.testing.assert_array_equal(whole.numpy(), tint.numpy())
    np.testing.assert_array_equal(flags.numpy(), tflags.numpy())


@pytest.mark.parametrize("name", ["mul", "linear", "max"])
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_gradients_are_torchs(name, reverse):
    xs = _inputs(name, (3, 7, 2), np.float64)
    weights = [RNG.standard_normal((3, 7, 2)) for _ in _leaves(xs)]

    def run(lib):
        inputs = _to(lib, xs, requires_grad=True)
        out = HOPS[lib].associative_scan(COMBINES[name], inputs, 1, reverse=reverse, **GENERIC)
        loss = sum((t * lib.tensor(w)).sum() for t, w in zip(_leaves(out), weights))
        loss.backward()
        return [t.grad.numpy() for t in _leaves(inputs)]

    for a, b in zip(run(staged), _torch_quietly(lambda: run(torch))):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)


def _error(fn):
    with pytest.raises(Exception) as info:
        _torch_quietly(fn)
    return info.value


X = np.arange(15.0, dtype=np.float32).reshape(5, 3)
AS_ERRORS = {
    "not callable": lambda lib: (3, lib.tensor(X), 0, {}),
    "float dim": lambda lib: (lambda a, b: a + b, lib.tensor(X), 0.0, GENERIC),
    "dim out of range": lambda lib: (lambda a, b: a + b, lib.tensor(X), 2, GENERIC),
    "int reverse": lambda lib: (lambda a, b: a + b, lib.tensor(X), 0, dict(GENERIC, reverse=1)),
    "mode": lambda lib: (lambda a, b: a + b, lib.tensor(X), 0, {"combine_mode": "x"}),
    "pointwise on the CPU": lambda lib: (lambda a, b: a + b, lib.tensor(X), 0, {}),
    "no leaves": lambda lib: (lambda a, b: a + b, [], 0, GENERIC),
    "a number leaf": lambda lib: (lambda a, b: a + b, [lib.tensor(X), 1.0], 0, GENERIC),
    "empty scan dim": lambda lib: (lambda a, b: a + b, lib.tensor(X[:0]), 0, GENERIC),
    "0-dim": lambda lib: (lambda a, b: a + b, lib.tensor(1.0), 0, GENERIC),
    "short leaf": lambda lib: (
        lambda a, b: (a[0] + b[0], a[1] + b[1]),
        (lib.tensor(X), lib.tensor(X[:, 0])),
        1,
        GENERIC,
    ),
    "lengths differ": lambda lib: (
        lambda a, b: (a[0] + b[0], a[1] + b[1]),
        (lib.tensor(X), lib.tensor(X[:4])),
        0,
        GENERIC,
    ),
    "more outputs than leaves": lambda lib: (
        lambda a, b: (a + b, a * b),
        lib.tensor(X),
        0,
        GENERIC,
    ),
}


@pytest.mark.parametrize("case", sorted(AS_ERRORS))
def test_associative_scan_raises_torchs_errors(case):
    def call(lib):
        fn, xs, dim, kwargs = AS_ERRORS[case](lib)
        return lambda: HOPS[lib].associative_scan(fn, xs, dim, **kwargs)

    ours, theirs = _error(call(staged)), _error(call(torch))
    assert type(ours) is type(theirs) and str(ours) == str(theirs)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dim", [1, -2])
def test_scan_carry_ys_and_gradients_are_torchs(reverse, dim):
    """A carry pytree and a ys pytree: h <- h * tanh(x) + d, y = {"h": 2h, "s": [sum(x) + h]}."""
    arrays = [RNG.standard_normal(s) for s in [(4, 5, 3), (4, 3), (4, 3)]]

    def run(lib):
        xs, h0, d = inputs = [lib.tensor(a, requires_grad=True) for a in arrays]

        def step(carry, x):
            h = carry["h"] * x.tanh() + d
            return {"h": h}, {"h": h * 2, "s": [x.sum() + h[0, 0]]}

        carry, ys = HOPS[lib].scan(step, {"h": h0}, xs, dim=dim, reverse=reverse)
        (carry["h"].sum() + (ys["h"] * ys["h"]).sum() + ys["s"][0].sum()).backward()
        return [carry["h"], ys["h"], ys["s"][0]] + [t.grad for t in inputs]

    for a, b in zip(run(staged), _torch_quietly(lambda: run(torch))):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-13, atol=1e-14)


def test_scan_keeps_combines_carry_structure_and_empty_ys():
    xs = np.arange(15.0, dtype=np.float32).reshape(5, 3)

    def run(lib):
        hop = HOPS[lib]
        a = hop.scan(lambda c, x: ({"b": c["a"] + x}, ()), {"a": lib.zeros(3)}, lib.tensor(xs))
        b = hop.scan(lambda c, x: (c + x, x.sum()), lib.zeros(5), lib.tensor(xs), dim=1)
        none = hop.scan(lambda c, x: (c, x), lib.zeros(3), [])
        return a, b, none

    (a, b, none), (ta, tb, tnone) = run(staged), _torch_quietly(lambda: run(torch))
    assert list(a[0]) == ["b"] and a[1] == ()
    np.testing.assert_array_equal(a[0]["b"].numpy(), ta[0]["b"].numpy())
    for x, y in zip(b, tb):  # a 0-dim y stacks along 0 (dim 1 is beyond it)
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert none[1] == [] and tnone[1] == [] and none[0].shape == (3,)


SCAN_ERRORS = {
    "not callable": (lambda lib: (3, lib.zeros(3), lib.tensor(X), {}), None),
    "float dim": (
        lambda lib: (lambda c, x: (c + x, x * 1), lib.zeros(3), lib.tensor(X), {"dim": 1.0}),
        None,
    ),
    "int reverse": (
        lambda lib: (lambda c, x: (c + x, x * 1), lib.zeros(3), lib.tensor(X), {"reverse": 1}),
        None,
    ),
    "dim out of range": (
        lambda lib: (lambda c, x: (c + x, x * 1), lib.zeros(3), lib.tensor(X), {"dim": 2}),
        None,
    ),
    "no init": (lambda lib: (lambda c, x: (c, x * 1), (), lib.tensor(X), {}), None),
    "number init": (lambda lib: (lambda c, x: (c + x, x * 1), 1.0, lib.tensor(X), {}), None),
    "number xs": (
        lambda lib: (lambda c, x: (c + x, x * 1), lib.zeros(3), [lib.tensor(X), 2.0], {}),
        None,
    ),
    "empty scan dim": (
        lambda lib: (lambda c, x: (c + x, x * 1), lib.zeros(3), lib.tensor(X[:0]), {}),
        None,
    ),
    # torch's messages name its fake tensors; the first line and the type are the same
    "carry shape": (
        lambda lib: (lambda c, x: (lib.cat([c, x]), x * 1), lib.zeros(3), lib.tensor(X), {}),
        "Expected init and carry to have same metadata but found:",
    ),
    "carry dtype": (
        lambda lib: (lambda c, x: ((c + x).double(), x * 1), lib.zeros(3), lib.tensor(X), {}),
        "Expected init and carry to have same metadata but found:",
    ),
    "carry count": (
        lambda lib: (lambda c, x: ((c + x, c * 2), x * 1), lib.zeros(3), lib.tensor(X), {}),
        "Expected init and carry to have same number of outputs",
    ),
    "one return": (
        lambda lib: (lambda c, x: c + x, lib.zeros(3), lib.tensor(X), {}),
        "improper combine_fn number of returns",
    ),
    "three returns": (
        lambda lib: (lambda c, x: (c + x, c * 1, x * 1), lib.zeros(3), lib.tensor(X), {}),
        "improper combine_fn number of returns",
    ),
}


@pytest.mark.parametrize("case", sorted(SCAN_ERRORS))
def test_scan_raises_torchs_errors(case):
    make, prefix = SCAN_ERRORS[case]

    def call(lib):
        fn, init, xs, kwargs = make(lib)
        return lambda: HOPS[lib].scan(fn, init, xs, **kwargs)

    ours, theirs = _error(call(staged)), _error(call(torch))
    if prefix is None:
        assert type(ours) is type(theirs) and str(ours) == str(theirs)
    else:
        assert isinstance(ours, RuntimeError) and isinstance(theirs, RuntimeError)
        assert prefix in str(ours) and prefix in str(theirs)


def test_scan_names_the_steps_differing_metadata():
    with pytest.raises(
        RuntimeError, match=r"pair\[0\] differ in 'dtype: staged.float32 vs staged.float64'"
    ):
        S.scan(lambda c, x: ((c + x).double(), x * 1), staged.zeros(3), staged.tensor(X))


def test_map_stacks_fs_outputs_with_torchs_gradients():
    xs = RNG.standard_normal((4, 3))
    w = RNG.standard_normal(3)

    def run(lib):
        x = lib.tensor(xs, requires_grad=True)
        out = HOPS[lib].map(
            lambda p, v: {"s": (p[0] * v).sin(), "t": (p[1].sum(),)}, [x, x * 2], lib.tensor(w)
        )
        (out["s"].sum() + out["t"][0].sum()).backward()
        return [out["s"], out["t"][0], x.grad]

    for a, b in zip(run(staged), _torch_quietly(lambda: run(torch))):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-14)


@pytest.mark.parametrize(
    "xs",
    [
        lambda lib: [lib.tensor(X), 1],
        lambda lib: lib.tensor(X[:0]),
        lambda lib: [lib.tensor(X), lib.tensor(X[:2])],
    ],
)
def test_map_raises_torchs_errors(xs):
    ours = _error(lambda: S.map(lambda x: x * 1, xs(staged)))
    theirs = _error(lambda: T.map(lambda x: x * 1, xs(torch)))
    assert type(ours) is type(theirs)
    assert str(ours).split(" Got")[0] == str(theirs).split(" Got")[0]


def test_the_package_exports_torchs_control_flow():
    assert S.cond is staged.cond and S.while_loop is staged.while_loop
    assert set(S.__all__) == {"associative_scan", "cond", "map", "scan", "while_loop"}
    assert set(S.__all__) <= set(T.__all__)


def test_a_compiled_associative_scan_equals_eager():
    a, b = (staged.tensor(t) for t in _inputs("linear", (2, 3, 11, 4), np.float32))

    def states(a, b):
        return S.associative_scan(linear_recurrence, (a, b), dim=2, **GENERIC)[1].sum(-1)

    eager = states(a, b)
    np.testing.assert_allclose(
        staged.compile(states)(a, b).numpy(), eager.numpy(), rtol=1e-5, atol=1e-6
    )
