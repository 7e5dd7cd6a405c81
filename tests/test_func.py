"""staged.func against torch.func (torch 2.13): grad, grad_and_value, vjp, jvp, jacrev,
jacfwd, hessian, vmap (batching rules, in_dims/out_dims, nesting, errors), functional_call,
autograd.functional's vectorize=True built on vmap, and vmap(grad) under capture."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged import autodiff as ad
from staged.autograd import batching
from tests.checks import both, close, compare, raises_like_torch

rng = np.random.default_rng(0)
X = rng.standard_normal((5, 3)).astype(np.float32)
Y = rng.standard_normal((5, 3)).astype(np.float32)
W = rng.standard_normal((4, 3)).astype(np.float32)
IMG = rng.standard_normal((2, 1, 2, 5, 5)).astype(np.float32)
KER = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)


# --- per-example gradients of the MLP (the torch.func tutorial) -----------------------------
def _mlp(lib):
    lib.manual_seed(0)
    nn = lib.nn
    model = nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10)
    )
    return model


def test_per_sample_grads_of_the_mlp_match_torch_func():
    x = rng.standard_normal((32, 64)).astype(np.float32)
    y = rng.integers(0, 10, 32)
    weights = {k: v.detach().numpy() for k, v in _mlp(torch).named_parameters()}

    def run(lib):
        model = _mlp(lib)
        params = {k: lib.tensor(v) for k, v in weights.items()}

        def loss(p, xi, yi):
            out = lib.func.functional_call(model, p, (xi.unsqueeze(0),))
            return lib.nn.functional.cross_entropy(out, yi.unsqueeze(0))

        return lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(
            params, lib.tensor(x), lib.tensor(y)
        )

    ours, theirs = both(run)
    assert ours["0.weight"].shape == (32, 128, 64)
    close(ours, theirs, rtol=1e-5, atol=1e-7)


# --- grad, vjp, jvp, jacobians --------------------------------------------------------------
def test_grad_and_grad_and_value_with_argnums_and_aux():
    def run(lib):
        f = lambda x, y: ((x.sin() * y).sum(), {"aux": x.exp()})
        x, y = lib.tensor(X), lib.tensor(Y)
        g1 = lib.func.grad(f, has_aux=True)(x, y)
        g2 = lib.func.grad(f, argnums=(0, 1), has_aux=True)(x, y)
        gv = lib.func.grad_and_value(lambda x, y: (x * y).sum(), argnums=1)(x, y)
        gg = lib.func.grad(lib.func.grad(lambda x: x.sin().sum().mul(2).sin()))(x[0, 0])
        return g1, g2, gv, gg

    compare(run)


def test_grad_takes_dicts_and_lists_of_tensors():
    compare(
        lambda lib: lib.func.grad(lambda p: (p["w"] @ p["b"][0]).tanh().sum())(
            {"w": lib.tensor(W), "b": [lib.tensor(X[0]), lib.tensor(X[1])]}
        )
    )


def test_vjp_and_jvp():
    def run(lib):
        f = lambda x, y: (x * y.cos(), (x @ y.T).sum())
        x, y = lib.tensor(X), lib.tensor(Y)
        out, vjp_fn = lib.func.vjp(f, x, y)
        ct = (lib.tensor(W[:1].repeat(5, 0)[:, :3]), lib.tensor(2.0))
        value, tangent = lib.func.jvp(f, (x, y), (lib.tensor(Y), lib.tensor(X)))
        return out, vjp_fn(ct), vjp_fn(ct), value, tangent

    compare(run)


@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
def test_jacobians(jac):
    def run(lib):
        J = getattr(lib.func, jac)
        f = lambda x, y: {"a": (x * y).sin(), "b": (x @ y.T).sum()}
        x, y = lib.tensor(X[:2]), lib.tensor(Y[:2])
        return J(f)(x, y), J(f, argnums=(0, 1))(x, y), J(lambda x: x.exp() @ x.T)(x)

    compare(run)


def test_hessian_is_forward_over_reverse():
    compare(
        lambda lib: lib.func.hessian(lambda x, w: ((x @ w.T).tanh() ** 2).sum(), argnums=(0, 1))(
            lib.tensor(X[:2]), lib.tensor(W)
        ),
        rtol=1e-4,
        atol=1e-5,
    )


def test_grad_of_vmap_and_vmap_of_grad_with_an_outer_graph():
    def run(lib):
        x = lib.tensor(X[0], requires_grad=True)
        per = lib.func.vmap(lib.func.grad(lambda t: t.sin() * t))(x)  # sin t + t cos t
        (d,) = lib.autograd.grad(per.sum(), x)
        outer = lib.func.grad(lambda v: lib.func.vmap(lambda t: t.exp().sum())(v).sum())(
            lib.tensor(X)
        )
        return per.detach(), d, outer

    compare(run)


# --- vmap: batching rules against torch.vmap ------------------------------------------------
CASES = {
    "elementwise": (lambda lib, x, y: (x * y + 1).exp().where(x > 0, y.tanh()), (0, 0)),
    "broadcast": (lambda lib, x, y: x[:, None] - y, (0, None)),
    "reductions": (
        lambda lib, x, y: (
            x.sum(),
            x.amax(0, keepdim=True),
            x.argmax(),
            x.prod(),
            x.cumsum(0),
            x.sort(descending=True)[0],
        ),
        (1, 1),
    ),
    # the logical dim reduced at the batch dim's place: the batch dim stays (was moved last)
    "argmax at the batch dim": (
        lambda lib, x, y: ((x[:, None] * y).argmax(0), (x[:, None] * y).argmin(0)),
        (0, 0),
    ),
    "softmax": (lambda lib, x, y: lib.nn.functional.log_softmax(x * y, 0), (1, 1)),
    "matmul batched left": (lambda lib, x, w: w @ x, (0, None)),
    "matmul batched right": (lambda lib, x, w: w @ x, (1, None)),
    "matmul both": (lambda lib, x, y: x[:, None] @ y[None, :], (0, 0)),
    "matmul both, matrices": (lambda lib, x, y: x.reshape(3, 1) @ y.reshape(1, 3) @ x, (0, 0)),
    "shape": (
        lambda lib, x, y: (
            x.reshape(3, 1).expand(3, 2).permute(1, 0).flatten(),
            lib.cat([x, y, x]),
            lib.stack([x, y], 1),
        ),
        (0, 0),
    ),
    "indexing": (
        lambda lib, x, y: (x[1:], x[::2], x[lib.tensor([2, 0])], x.gather(0, (y > 0).long())),
        (0, 0),
    ),
    "cross_entropy": (lambda lib, x, t: lib.nn.functional.cross_entropy(x[None], t[None]), (0, 0)),
    "conv2d": (
        lambda lib, img, k: lib.nn.functional.conv2d(img, k, padding=1).relu().mean(),
        (0, None),
    ),
}


def _case_args(name, lib):
    if name == "conv2d":
        return lib.tensor(IMG), lib.tensor(KER)
    if name == "cross_entropy":
        return lib.tensor(X), lib.tensor(np.array([0, 2, 1, 1, 0]))
    if name.startswith("matmul batched"):
        return lib.tensor(X if name.endswith("left") else X.T.copy()), lib.tensor(W)
    return lib.tensor(X), lib.tensor(Y if name != "broadcast" else Y[0])


@pytest.mark.parametrize("name", CASES)
def test_vmap_matches_torch(name):
    fn, in_dims = CASES[name]
    compare(
        lambda lib: lib.func.vmap(lambda *a: fn(lib, *a), in_dims=in_dims)(*_case_args(name, lib))
    )


@pytest.mark.parametrize("name", ["elementwise", "softmax", "matmul both", "indexing", "conv2d"])
def test_vmap_of_grad_and_of_jvp_through_the_rules(name):
    fn, in_dims = CASES[name]

    def scalar(lib):
        def f(*a):
            out = fn(lib, *a)
            return sum(o.float().sum() for o in (out if isinstance(out, tuple) else (out,)))

        return f

    def run(lib):
        args = _case_args(name, lib)
        g = lib.func.vmap(lib.func.grad(scalar(lib)), in_dims=in_dims)(*args)
        t = lib.func.vmap(
            lambda *a: lib.func.jvp(scalar(lib), a, tuple(v.cos() for v in a))[1], in_dims=in_dims
        )(*args)
        return g, t

    compare(run, rtol=1e-4, atol=1e-5)


def test_in_dims_and_out_dims_follow_pytrees():
    def run(lib):
        x, y = lib.tensor(X), lib.tensor(Y)

        def f(d, pair, k):
            return {"s": d["a"] * pair[0] + pair[1] * k, "t": (d["a"].sum(), pair[1])}

        out_dims = {"s": 1, "t": (0, None)}
        return lib.func.vmap(f, in_dims=({"a": 1}, [0, None], None), out_dims=out_dims)(
            {"a": x.T}, [y, y[0]], 2.0
        ), lib.func.vmap(lambda v: v, out_dims=-1)(x)

    compare(run)


def test_nested_vmap_is_an_outer_product_of_batches():
    def run(lib):
        x, y = lib.tensor(X), lib.tensor(Y[:4])
        pairwise = lib.func.vmap(
            lib.func.vmap(lambda a, b: (a * b).sum().tanh(), in_dims=(None, 0)), in_dims=(0, None)
        )
        inner_batched = lib.func.vmap(lambda a: lib.func.vmap(lambda r: r @ a)(y))
        return (
            pairwise(x, y),
            inner_batched(x),
            lib.func.vmap(lib.func.vmap(lib.func.grad(lambda t: t.sin())))(x),
        )

    compare(run)


@pytest.mark.parametrize(
    "name, error",
    [("getitem", IndexError), ("gather", RuntimeError), ("cross_entropy", IndexError)],
)
def test_vmap_checks_indices_at_once_eagerly_and_when_a_compiled_step_is_read(name, error):
    # eagerly the physical indices are checked in NumPy (no check ops bound per call);
    # compiled, the check is in the graph and raises when the result is read
    f = {
        "getitem": lambda x, i: x[i],
        "gather": lambda x, i: x.gather(0, i),
        "cross_entropy": lambda x, i: staged.nn.functional.cross_entropy(x[None], i),
    }[name]
    x, bad = staged.ones(3, 4), staged.tensor([[0], [5], [1]])
    with pytest.raises(error, match="5"):
        staged.func.vmap(f)(x, bad)
    out = staged.compile(staged.func.vmap(f))(x, bad)
    with pytest.raises(error, match="5"):
        out.numpy()


def test_unbatched_outputs_are_broadcast_and_random_draws_can_be_shared():
    def run(lib):
        x = lib.tensor(X)
        a, b = lib.func.vmap(lambda v: (v.sum(), lib.ones(2)), out_dims=(0, 0))(x)
        n = lib.func.vmap(lambda v: v * 0 + lib.rand(()).mul(0), randomness="same")(x)
        return a, b, n

    compare(run)


@pytest.mark.parametrize(
    "draw",
    [
        lambda lib: lambda v: v + lib.rand(3),
        lambda lib: lambda v: lib.randn_like(v) * v,
        lambda lib: lambda v: lib.nn.functional.dropout(v, 0.5),
        lambda lib: lambda v: v.clone().normal_(),
        lambda lib: lib.func.vmap(lambda v: v + lib.rand(()), randomness="different"),
        lambda lib: lib.func.vmap(lambda v: v + lib.rand(()), randomness="same"),
    ],
    ids=["rand", "randn_like", "dropout", "normal_", "nested", "nested-same"],
)
def test_randomness_different_draws_torch_s_batched_numbers(draw):
    """Each draw is made for the whole batch, the batch dims in front (outermost first):
    torch's numbers after the same seed."""

    def run(lib):
        lib.manual_seed(3)
        return lib.func.vmap(draw(lib), randomness="different")(lib.tensor(X))

    close(*both(run), rtol=0, atol=0)


@pytest.mark.parametrize(
    "op",
    [
        lambda lib, v: v.clone().add_(1),
        lambda lib, v: v.clone().mul_(v),
        lambda lib, v: (v - 0.5).relu_(),
        lambda lib, v: v.clone().fill_(2.0),
        lambda lib, v: v.clone().copy_(lib.ones(3)),
        lambda lib, v: lib.func.grad(lambda w: (v * w).clone().relu_().sum())(lib.ones(3)),
    ],
    ids=["add_", "mul_", "relu_", "fill_", "copy_-unbatched", "grad-through-relu_"],
)
def test_inplace_ops_on_batched_tensors_match_torch(op):
    compare(lambda lib: lib.func.vmap(lambda v: op(lib, v))(lib.tensor(X)))


def test_writing_a_batched_value_into_an_unbatched_tensor_raises_and_leaves_it():
    outer = staged.zeros(3)
    raises_like_torch(
        lambda lib: lib.func.vmap(lambda v: (outer if lib is staged else lib.zeros(3)).copy_(v))(
            lib.tensor(X)
        ),
        "vmap: inplace arithmetic(self, *extra_args) is not possible",
    )
    assert type(outer._payload) is np.ndarray and outer.tolist() == [0.0, 0.0, 0.0]


def test_every_primitive_has_a_batching_rule_or_a_reason():
    missing = [
        n
        for n, p in ad.REGISTRY.items()
        if p not in batching.RULES and not batching.UNSUPPORTED.get(p, "").strip()
    ]
    assert not missing, f"primitives with no batching rule and no reason: {missing}"


# --- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, words",
    [
        (
            lambda lib: lib.func.vmap(lambda x: x, in_dims=(0, 0))(lib.ones(2)),
            "in_dims is not compatible with the structure of `inputs`",
        ),
        (
            lambda lib: lib.func.vmap(lambda x, y: x + y)(lib.ones(2), lib.ones(3)),
            (
                "vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                "[2, 3] for the mapped dimension"
            ),
        ),
        (
            lambda lib: lib.func.vmap(lambda x: x, in_dims=2)(lib.ones(2)),
            "Got in_dim=2 for some input, but that input is a Tensor of dimensionality 1",
        ),
        (lambda lib: lib.func.vmap(lambda x: x, in_dims=0)(3.0), "We cannot vmap over non-Tensor"),
        (
            lambda lib: lib.func.vmap(lambda x: x, in_dims=None)(lib.ones(2)),
            "expected `in_dims` to be int or a (potentially nested) tuple",
        ),
        (
            lambda lib: lib.func.vmap(lambda x: x, in_dims=(None,))(lib.ones(2)),
            "vmap: Expected at least one Tensor to vmap over",
        ),
        (
            lambda lib: lib.func.vmap(lambda x: x, out_dims=None)(lib.ones(2)),
            "can not return a BatchedTensor when out_dim is None",
        ),
        (lambda lib: lib.func.vmap(lambda x: 3)(lib.ones(2)), "must only return Tensors"),
        (
            lambda lib: lib.func.vmap(lambda x: x + lib.rand(2))(lib.ones(3, 2)),
            "vmap: called random operation while in randomness error mode",
        ),
        (
            lambda lib: lib.func.vmap(lambda x: x.item())(lib.ones(2)),
            "vmap: It looks like you're calling .item() on a Tensor",
        ),
        (
            lambda lib: lib.func.vmap(lambda x: x, randomness="maybe")(lib.ones(2)),
            "Only allowed values for randomness are 'error', 'different', or 'same'. Got maybe",
        ),
        (
            lambda lib: lib.func.grad(lambda x: x)(lib.ones(2)),
            "Expected f(*args) to return a scalar Tensor, got tensor with 1 dims",
        ),
        (
            lambda lib: lib.func.grad(lambda x: x.sum(), argnums=3)(lib.ones(2)),
            "Got argnum=3, but only 1 positional inputs",
        ),
        (
            lambda lib: lib.func.grad(lambda x: x.sum(), has_aux=True)(lib.ones(2)),
            "output of function f should be a tuple: (output, aux) if has_aux is True",
        ),
        (
            lambda lib: lib.func.grad(lambda x: x.sum())(3.0),
            "Thing passed to transform API must be Tensor, got <class 'float'>",
        ),
        (
            lambda lib: lib.func.jvp(lambda x: x, lib.ones(2), lib.ones(2)),
            "Expected primals to be a tuple",
        ),
        (
            lambda lib: lib.func.functional_call(
                lib.nn.Linear(2, 2), {"weight": lib.ones(2, 2)}, (lib.ones(2),), strict=True
            ),
            "Error(s) in reparametrizing for Linear:\n\tMissing key(s): 'bias'.",
        ),
        (
            lambda lib: lib.func.functional_call(
                lib.nn.Linear(2, 2), ({"bias": lib.ones(2)}, {"bias": lib.ones(2)}), (lib.ones(2),)
            ),
            "['bias'] appeared in multiple dictionaries",
        ),
    ],
)
def test_errors_read_as_torch(call, words):
    raises_like_torch(call, words)


def test_a_primitive_without_a_rule_is_named(monkeypatch):
    monkeypatch.delitem(batching.RULES, ad.exp)
    with pytest.raises(NotImplementedError, match="no batching rule for primitive 'exp'"):
        staged.func.vmap(staged.exp)(staged.ones(2))


# --- functional_call ------------------------------------------------------------------------
def test_functional_call_swaps_and_restores_tied_weights():
    def run(lib):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.Linear(3, 3))
        model[1].weight = model[0].weight  # tied
        x = lib.tensor(X)
        w = lib.tensor(W[:3])
        tied = lib.func.functional_call(model, {"0.weight": w}, x)
        untied = lib.func.functional_call(model, {"0.weight": w}, (x,), tie_weights=False)
        return tied, untied, model(x)

    compare(run)


# --- autograd.functional(vectorize=True) ----------------------------------------------------
@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_autograd_functional_vectorized(strategy):
    def run(lib):
        af = lib.autograd.functional
        f = lambda a, b: ((a * b).sin().sum(0), (a.exp() * b).sum())
        g = lambda a, b: ((a * b).sin() * a).sum()
        args = (lib.tensor(X[0]), lib.tensor(Y[:2]))
        jac = af.jacobian(f, args, vectorize=True, strategy=strategy)
        hess = af.hessian(g, args, vectorize=True, outer_jacobian_strategy=strategy)
        return jac, tuple(tuple(h.detach() for h in row) for row in hess)

    compare(run)


# --- under capture: one graph ---------------------------------------------------------------
def test_vmap_of_grad_compiles_into_one_graph():
    model = staged.nn.Sequential(staged.nn.Linear(8, 16), staged.nn.ReLU(), staged.nn.Linear(16, 3))
    params = {k: v.detach() for k, v in model.named_parameters()}
    F = staged.nn.functional

    def step(p, x, y):
        def loss(p, xi, yi):
            return F.cross_entropy(staged.func.functional_call(model, p, (xi[None],)), yi[None])

        g = staged.func.vmap(staged.func.grad(loss), in_dims=(None, 0, 0))(p, x, y)
        return {k: v.flatten(1).norm(dim=1) for k, v in g.items()}  # per-example norms

    def data(n):
        return staged.randn(n, 8), staged.randint(0, 3, (n,))

    ops = [len(staged.capture(step, params, *data(n)).graph.ops) for n in (4, 16)]
    assert ops[0] == ops[1]  # the batch is a dim of each op, not a Python loop
    compiled = staged.compile(step)
    for n in (6, 6, 6):
        x, y = data(n)
        close(compiled(params, x, y), step(params, x, y), rtol=1e-5, atol=1e-6)
    # functional_call lends the module other tensors inside the step: the guard on the
    # module's own is taken before (it re-traced at every call)
    assert compiled.traces == 1


@pytest.mark.parametrize("chunk_size", [1, 3, 8, 100])
def test_vmap_chunk_size_joins_the_chunks_along_out_dims(chunk_size):
    """Equal to torch.func.vmap's for a batch of 8: an output dim other than 0, a mapped
    dim other than 0, an unmapped input, and per-example gradients (torch's chunking fails
    on an out_dim of None, so none is compared)."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 8)), rng.standard_normal(3)
    results = []
    for lib in (staged, torch):

        def f(xi, wi):
            return (xi * wi).sum(), xi.sin() * wi

        vm = lib.func.vmap(f, in_dims=(1, None), out_dims=(0, 1), chunk_size=chunk_size)
        outs = vm(lib.tensor(x), lib.tensor(w))
        grads = lib.func.vmap(lib.func.grad(lambda xi: (xi * xi).sum()), chunk_size=chunk_size)(
            lib.tensor(x.T)
        )
        results.append([o.numpy() for o in (*outs, grads)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b)


def test_vmap_chunk_size_must_be_positive():
    for lib in (staged, torch):
        with pytest.raises(ValueError, match="chunk_size should be None or greater than 0"):
            lib.func.vmap(lambda x: x, chunk_size=0)(lib.ones(2))


# --- linearize and stack_module_state ------------------------------------------------------
def _linearized(lib):
    x, y = lib.tensor(X.astype(np.float64)), lib.tensor(Y.astype(np.float64))
    out, jvp_fn = lib.func.linearize(lambda a, b: {"p": a.sin() * b, "s": (a @ b.T).sum()}, x, y)
    return out, jvp_fn, x, y


def test_linearize_gives_torch_s_output_and_jvps():
    def run(lib):
        out, jvp_fn, x, y = _linearized(lib)
        return out, jvp_fn(lib.ones_like(x), y), jvp_fn(y, x * 0)

    compare(run, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "tangents, words",
    [
        (lambda lib, x, y: (x,), ["to have the same argspec as the primals"]),
        (lambda lib, x, y: (x, y[0]), ["tangent:1 with shape", "doesn't match the shape"]),
        (lambda lib, x, y: (x, y.float()), ["tangent:1 with dtype", "doesn't match the dtype"]),
    ],
)
def test_linearize_checks_its_tangents_as_torch_does(tangents, words):
    def run(lib):
        _, jvp_fn, x, y = _linearized(lib)
        jvp_fn(*tangents(lib, x, y))

    raises_like_torch(run, *words)


def _ensemble(lib):
    lib.manual_seed(0)
    return [lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4)) for _ in range(3)]


def test_stack_module_state_stacks_new_leaves_for_a_vmapped_ensemble():
    def run(lib):
        models = _ensemble(lib)
        params, buffers = lib.func.stack_module_state(models)
        flags = {k: (v.requires_grad, v.is_leaf) for k, v in {**params, **buffers}.items()}

        def one(p, b, x):
            return lib.func.functional_call(models[0], (p, b), (x,))

        [m.eval() for m in models]
        out = lib.func.vmap(one, (0, 0, None))(params, buffers, lib.tensor(X))
        out.square().sum().backward()
        return params, buffers, flags, out, {k: v.grad for k, v in params.items()}

    (p, b, flags, out, grads), (tp, tb, tflags, tout, tgrads) = both(run)
    assert flags == tflags and flags["0.weight"] == (True, True)
    close([p, b, out, grads], [tp, tb, tout, tgrads])


@pytest.mark.parametrize(
    "models, words",
    [
        (lambda lib: [], ["Expected at least one model, got 0"]),
        (lambda lib: [_ensemble(lib)[0], _ensemble(lib)[1].eval()], ["same training/eval mode"]),
        (lambda lib: [lib.nn.Linear(3, 4), lib.nn.Sequential()], ["of the same class"]),
        (
            lambda lib: [lib.nn.Linear(3, 4), lib.nn.Linear(3, 4).requires_grad_(False)],
            ["Expected weight from each model to have the same .requires_grad"],
        ),
    ],
)
def test_stack_module_state_refuses_what_torch_refuses(models, words):
    raises_like_torch(lambda lib: lib.func.stack_module_state(models(lib)), *words)
