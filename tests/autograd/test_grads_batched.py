"""``autograd.grad(..., is_grads_batched=True)`` against torch: a batch of cotangents in
one backward pass (Jacobians, MLP, reductions, complex), create_graph, retain_graph,
allow_unused / materialize_grads, custom Functions and hooks, and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, assert_raises_like_torch, both


def _data(*shapes, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    out = [rng.standard_normal(s) for s in shapes]
    if np.dtype(dtype).kind == "c":
        out = [a + 1j * rng.standard_normal(a.shape) for a in out]
    return [a.astype(dtype) for a in out]


def _leaves(lib, *arrays):
    return [lib.tensor(a.copy(), requires_grad=True) for a in arrays]


def _same(ours, theirs, rtol=1e-10, atol=1e-12):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert (a is None) == (b is None)
        if b is not None:
            assert_close(a, b, rtol, atol)
            assert a.requires_grad == b.requires_grad


def _mlp(lib, x, w1, b1, w2):
    return lib.tanh(x @ w1 + b1) @ w2


def _elementwise(lib, x, y):
    return lib.sin(x) * lib.exp(y) + x**2 / (1 + y * y)


def _matmul(lib, a, b):
    return lib.matmul(a, b)  # (2, 3, 4) @ (4, 5): a batched matmul


def _reductions(lib, x):
    return (x.sum(0), lib.logsumexp(x, 1), x.mean(), lib.softmax(x, 1).amax(0))


GRAPHS = {  # name: (fn, input shapes, output shapes)
    "mlp": (_mlp, [(4, 3), (3, 5), (5,), (5, 2)], [(4, 2)]),
    "elementwise": (_elementwise, [(3, 2), (3, 2)], [(3, 2)]),
    "matmul": (_matmul, [(2, 3, 4), (4, 5)], [(2, 3, 5)]),
    "reductions": (_reductions, [(3, 4)], [(4,), (3,), (), (4,)]),
}


@pytest.mark.parametrize("name", GRAPHS)
def test_batched_vjps_match_torch_and_a_loop(name):
    fn, shapes, out_shapes = GRAPHS[name]
    inputs = _data(*shapes)
    cots = _data(*[(5, *s) for s in out_shapes], seed=1)

    def run(lib):
        xs = _leaves(lib, *inputs)
        outs = fn(lib, *xs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        gos = [lib.tensor(c) for c in cots]
        batched = lib.autograd.grad(outs, xs, gos, retain_graph=True, is_grads_batched=True)
        loop = [
            lib.autograd.grad(outs, xs, [g[k] for g in gos], retain_graph=True) for k in range(5)
        ]
        return batched, [lib.stack([r[i] for r in loop]) for i in range(len(xs))]

    (ours, our_loop), (theirs, _) = both(run)
    _same(ours, theirs)
    _same(ours, our_loop)
    assert all(tuple(g.shape) == (5, *s) for g, s in zip(ours, shapes))


def test_identity_cotangents_give_the_jacobian_rows():
    (x0,) = _data((4,))

    def run(lib):
        (x,) = _leaves(lib, x0)
        y = lib.sin(x) * x.sum() + x.cumsum(0)
        return lib.autograd.grad(y, x, lib.eye(4, dtype=lib.float64), is_grads_batched=True)

    (ours,), (theirs,) = both(run)
    assert_close(ours, theirs, 1e-12, 1e-12)
    jac = torch.autograd.functional.jacobian(
        lambda t: torch.sin(t) * t.sum() + t.cumsum(0), torch.tensor(x0)
    )
    assert_close(ours, jac, 1e-12, 1e-12)


def test_complex_graph():
    z0, w0 = _data((3,), (3,), dtype=np.complex128)
    (c0,) = _data((2, 3), seed=2, dtype=np.complex128)

    def run(lib):
        z, w = _leaves(lib, z0, w0)
        out = z * w.conj() + lib.exp(z) * z.abs()
        return lib.autograd.grad(out, (z, w), lib.tensor(c0), is_grads_batched=True)

    _same(*both(run))


def test_create_graph_then_a_second_grad_gives_hessian_terms():
    x0, v0 = _data((3,), (3,))

    def run(lib):
        (x,) = _leaves(lib, x0)
        y = (x**3).sum() * x + lib.sin(x)
        (rows,) = lib.autograd.grad(
            y, x, lib.eye(3, dtype=lib.float64), create_graph=True, is_grads_batched=True
        )
        assert rows.requires_grad and rows.grad_fn is not None
        (second,) = lib.autograd.grad((rows * lib.tensor(v0)).sum(), x)
        return rows.detach(), second

    _same(*both(run))


def test_a_grad_output_that_requires_grad_is_differentiated_through():
    (x0,) = _data((3,))

    def run(lib):
        (x,) = _leaves(lib, x0)
        go = lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(x * x, x, go * 2, create_graph=True, is_grads_batched=True)
        return g, *lib.autograd.grad(g.sum(), (x, go))

    ours, theirs = both(run)
    _same(ours, theirs)


def test_retain_graph_defaults_to_create_graph():
    (x0,) = _data((3,))

    def twice(lib, **kw):
        (x,) = _leaves(lib, x0)
        y = lib.exp(x)
        go = lib.ones(2, 3, dtype=lib.float64)
        lib.autograd.grad(y, x, go, is_grads_batched=True, **kw)
        return lib.autograd.grad(y, x, go, is_grads_batched=True)

    assert_raises_like_torch(twice)
    _same(*both(lambda lib: twice(lib, retain_graph=True)))
    _same(*both(lambda lib: twice(lib, create_graph=True)))


@pytest.mark.parametrize(
    "kw",
    [
        {"allow_unused": True},
        {"materialize_grads": True},
        {"materialize_grads": True, "create_graph": True},
    ],
)
def test_unused_inputs(kw):
    x0, w0 = _data((3,), (2,))

    def run(lib):
        x, w = _leaves(lib, x0, w0)
        out = lib.autograd.grad(
            x * 2, (x, w), lib.ones(4, 3, dtype=lib.float64), is_grads_batched=True, **kw
        )
        return out

    ours, theirs = both(run)
    _same(ours, theirs)  # materialized: zeros of the input's shape, no batch dim (torch's)


def test_non_leaf_input_and_an_output_the_batch_does_not_reach():
    (x0,) = _data((3,))

    def run(lib):
        (x,) = _leaves(lib, x0)
        h = x * 2
        return lib.autograd.grad(
            (h.exp(), x + 0),
            (h, x),
            (lib.eye(3, dtype=lib.float64), lib.zeros(3, 3, dtype=lib.float64)),
            is_grads_batched=True,
        )

    _same(*both(run))


@pytest.mark.parametrize(
    "case",
    [
        "no_batch_dim_0d",
        "no_batch_dim",
        "wrong_shape",
        "empty_batch",
        "batch_sizes_differ",
        "none_grad_output",
        "complex_dtype",
        "unused",
    ],
)
def test_errors_match_torch(case):
    def call(lib):
        x = lib.ones(3, dtype=lib.float64, requires_grad=True)
        y, s = x * 2, x.sum()
        f64 = {"dtype": lib.float64}
        args = {
            "no_batch_dim_0d": (s, x, lib.tensor(1.0, **f64)),
            "no_batch_dim": (y, x, lib.ones(3, **f64)),
            "wrong_shape": (y, x, lib.ones(2, 4, **f64)),
            "empty_batch": (y, x, lib.ones(0, 3, **f64)),
            "batch_sizes_differ": ((y, s), x, (lib.ones(2, 3, **f64), lib.ones(4, **f64))),
            "none_grad_output": ((y, s), x, (lib.ones(2, 3, **f64), None)),
            "complex_dtype": (y * (1 + 1j), x, lib.ones(2, 3, **f64)),
            "unused": (y, (x, lib.ones(2, requires_grad=True)), lib.ones(2, 3, **f64)),
        }[case]
        return lib.autograd.grad(*args, is_grads_batched=True)

    assert_raises_like_torch(call)


@pytest.mark.parametrize("how", ["method", "function"])
def test_backward_does_not_take_it(how):
    for lib in (staged, torch):
        x = lib.ones(3, requires_grad=True)
        go = lib.ones(2, 3)
        with pytest.raises(TypeError, match="is_grads_batched"):
            if how == "method":
                (x * 2).backward(go, is_grads_batched=True)
            else:
                lib.autograd.backward(x * 2, go, is_grads_batched=True)


def _square(lib):
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            calls.append(tuple(g.shape))
            (x,) = ctx.saved_tensors
            return 2 * x * g

    calls: list = []
    return Square, calls


def test_custom_function_backward_runs_once_on_the_batch():
    (x0,) = _data((3,))

    def run(lib):
        square, calls = _square(lib)
        (x,) = _leaves(lib, x0)
        (g,) = lib.autograd.grad(
            square.apply(x).exp(), x, lib.eye(3, dtype=lib.float64), is_grads_batched=True
        )
        return g, calls

    (ours, our_calls), (theirs, their_calls) = both(run)
    assert_close(ours, theirs, 1e-12, 1e-12)
    assert our_calls == their_calls == [(3,)]  # one call, on per-example (logical) shapes


def test_data_dependent_custom_backward_raises_runtime_error():
    def call(lib):
        class Item(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 3

            @staticmethod
            def backward(ctx, g):
                return g * float(g.sum().item())

        x = lib.ones(3, requires_grad=True)
        return lib.autograd.grad(Item.apply(x), x, lib.eye(3), is_grads_batched=True)

    for lib in (staged, torch):  # torch: "Batching rule not implemented for aten::item"
        with pytest.raises(RuntimeError):
            call(lib)


def test_hooks_run_once_and_may_replace_the_batched_gradient():
    (x0,) = _data((3,))

    def run(lib):
        (x,) = _leaves(lib, x0)
        y = x * 2
        seen = []
        y.register_hook(lambda g: seen.append(("tensor", tuple(g.shape))) or g * 10)
        y.grad_fn.register_hook(lambda gi, go: seen.append(("node", tuple(gi[0].shape))))
        (g,) = lib.autograd.grad(y.sin(), x, lib.eye(3, dtype=lib.float64), is_grads_batched=True)
        return g, seen

    (ours, our_seen), (theirs, their_seen) = both(run)
    assert_close(ours, theirs, 1e-12, 1e-12)
    assert our_seen == their_seen == [("tensor", (3,)), ("node", (3,))]
