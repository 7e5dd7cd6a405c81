"""Every optimizer of torch.optim is in staged.optim with torch 2.13's constructor
signature, defaults and param groups; ``foreach``, ``fused``, ``capturable``,
``differentiable``, ``maximize``, ``decoupled_weight_decay`` and named parameters behave
as torch's (Note [implementation flags] in staged/optim/optimizer.py), errors included."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, check_grads, message, to_numpy


def _classes(ns) -> dict:
    base = ns.optim.Optimizer
    return {
        n: c
        for n, c in vars(ns.optim).items()
        if isinstance(c, type) and issubclass(c, base) and c is not base
    }


NAMES = sorted(_classes(torch))


def _takes(name: str, arg: str) -> bool:
    return arg in inspect.signature(getattr(torch.optim, name)).parameters


def test_the_same_optimizers_as_torch():
    assert sorted(_classes(staged)) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_signature_matches_torch(name):
    """Names, kinds (keyword-only where torch's are), defaults and their types."""
    ours, theirs = (
        [
            (p.name, p.kind, p.default, type(p.default))
            for p in inspect.signature(getattr(ns.optim, name)).parameters.values()
        ]
        for ns in (staged, torch)
    )
    assert ours == theirs


def _params(ns, dtype=np.float64):
    """A 3x4 weight and (Muon takes 2-D ones only) a 2x5 one, from fixed data."""
    rng = np.random.RandomState(0)
    return [
        ns.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True)
        for s in [(3, 4), (2, 5)]
    ]


@pytest.mark.parametrize("name", NAMES)
def test_defaults_and_param_groups_match_torch(name):
    """The same keys in the same order, the same values: state_dicts round-trip."""
    ours, theirs = (getattr(ns.optim, name)(_params(ns)) for ns in (staged, torch))
    assert list(ours.defaults.items()) == list(theirs.defaults.items())
    groups = [o.state_dict()["param_groups"] for o in (ours, theirs)]
    assert [list(g.items()) for g in groups[0]] == [list(g.items()) for g in groups[1]]


def _run(ns, name, kwargs, steps=4, dtype=np.float64):
    """``steps`` steps of ``name`` with ``kwargs`` from fixed weights and gradients:
    the weights after each."""
    params = _params(ns, dtype)
    opt = getattr(ns.optim, name)(params, **kwargs)
    rng = np.random.RandomState(1)
    history = []
    for _ in range(steps):
        for p in params:
            p.grad = ns.tensor(rng.standard_normal(tuple(p.shape)).astype(dtype))
        opt.step()
        history.append([to_numpy(p).copy() for p in params])
    return history, opt


STEPPED = [n for n in NAMES if n not in ("LBFGS", "SparseAdam")]  # a closure; sparse grads
FLAGS = [(n, f) for n in STEPPED for f in ("foreach", "fused", "capturable") if _takes(n, f)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name, flag", FLAGS)
def test_kernel_flags_are_kept_and_change_no_number(name, flag, dtype):
    """``foreach``/``fused``/``capturable`` pick torch's kernel: the same steps as without,
    here bit for bit, and as torch's single-tensor kernel (its capturable kernels need a GPU,
    and its multi-tensor ASGD rounds its step size as float32)."""
    plain, _ = _run(staged, name, {}, dtype=dtype)
    flagged, opt = _run(staged, name, {flag: True}, dtype=dtype)
    assert opt.param_groups[0][flag] is True and opt.state_dict()["param_groups"][0][flag]
    for a, b in zip(plain, flagged):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    plain_kernel = flag == "capturable" or (name, flag) == ("ASGD", "foreach")
    theirs, _ = _run(torch, name, {} if plain_kernel else {flag: True}, dtype=dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype is np.float32 else dict(rtol=1e-10, atol=1e-13)
    for a, b in zip(flagged, theirs):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, **tol)


FUSED = [n for n in NAMES if _takes(n, "fused")]


def _error(call):
    with pytest.raises(Exception) as info:
        call()
    return type(info.value), message(info.value).replace("staged.", "torch.")


@pytest.mark.parametrize("name", FUSED)
@pytest.mark.parametrize(
    "kwargs", [dict(fused=True, foreach=True), dict(fused=True, differentiable=True)]
)
def test_fused_constructor_errors_match_torch(name, kwargs):
    errors = [
        _error(lambda: getattr(ns.optim, name)(_params(ns), **kwargs)) for ns in (staged, torch)
    ]
    assert errors[0] == errors[1]


@pytest.mark.parametrize("name", FUSED)
def test_fused_step_wants_floating_point_parameters_as_torch(name):
    def step(ns):
        z = ns.tensor(np.array([1 + 2j, 3 - 1j]), requires_grad=True)
        z.grad = ns.ones_like(z)
        getattr(ns.optim, name)([z], fused=True).step()

    errors = [_error(lambda: step(ns)) for ns in (staged, torch)]
    assert errors[0] == errors[1]
    assert "`fused=True` requires all the params to be floating point" in errors[0][1]


@pytest.mark.parametrize("name", [n for n in FUSED if n != "SGD"])  # SGD has no step count
def test_fused_step_count_is_float32_as_torch(name):
    """torch's fused kernels count steps in float32 whatever the default dtype."""
    dtypes = []
    for ns in (staged, torch):
        ns.set_default_dtype(ns.float64)
        try:
            for fused in (None, True):
                params = _params(ns)
                opt = getattr(ns.optim, name)(params, fused=fused)
                for p in params:
                    p.grad = ns.ones_like(p)
                opt.step()
                dtypes.append(str(opt.state[params[0]]["step"].dtype).rpartition(".")[2])
        finally:
            ns.set_default_dtype(ns.float32)
    assert dtypes == ["float64", "float32"] * 2


MAXIMIZE = [n for n in STEPPED if _takes(n, "maximize")]


@pytest.mark.parametrize("name", MAXIMIZE)
def test_maximize_matches_torch(name):
    """Gradient ascent, the negated gradient entering before the weight decay."""
    kwargs = dict(maximize=True, **({"weight_decay": 0.1} if _takes(name, "weight_decay") else {}))
    ours, _ = _run(staged, name, kwargs)
    theirs, _ = _run(torch, name, kwargs)
    for a, b in zip(ours, theirs):
        for x, y in zip(a, b):
            assert_close(x, y, rtol=1e-10, atol=1e-13)
    descent, _ = _run(staged, name, {k: v for k, v in kwargs.items() if k != "maximize"})
    assert not np.allclose(ours[-1][0], descent[-1][0])


def test_adam_decoupled_weight_decay_is_adamw():
    for ns in (staged, torch):
        adam, _ = _run(ns, "Adam", dict(weight_decay=0.3, decoupled_weight_decay=True))
        adamw, _ = _run(ns, "AdamW", dict(weight_decay=0.3))
        for x, y in zip(adam[-1], adamw[-1]):
            np.testing.assert_array_equal(x, y)
    ours, theirs = (
        _run(ns, "Adam", dict(weight_decay=0.3, decoupled_weight_decay=True))
        for ns in (staged, torch)
    )
    for x, y in zip(ours[0][-1], theirs[0][-1]):
        assert_close(x, y, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("betas", [(0, 0.9), (0.9, 1), (0, 0)])
def test_adam_betas_must_both_be_floats_as_torch(name, betas):
    errors = [
        _error(lambda: getattr(ns.optim, name)(_params(ns), betas=betas)) for ns in (staged, torch)
    ]
    assert errors[0] == errors[1]
    assert errors[0][1] in (
        "betas must be either both floats or both Tensors",
        "Invalid beta parameter at index 1: 1",
    )


# -- named parameters and non-leaf tensors ------------------------------------------------
def test_named_parameters_go_to_param_names_as_torch():
    groups = []
    for ns in (staged, torch):
        model = ns.nn.Linear(3, 2)
        opt = ns.optim.AdamW(model.named_parameters(), lr=0.1)
        opt.add_param_group({"params": [("extra", ns.zeros(2, requires_grad=True))], "lr": 0.5})
        groups.append(opt.state_dict()["param_groups"])
    assert groups[0] == groups[1]
    assert groups[0][0]["param_names"] == ["weight", "bias"]


@pytest.mark.parametrize(
    "build",
    [
        lambda ns: ns.optim.SGD(
            [("w", ns.zeros(2, requires_grad=True)), ns.zeros(2, requires_grad=True)]
        ),
        lambda ns: ns.optim.SGD([ns.zeros(2, requires_grad=True)]).add_param_group(
            {"params": [("w", ns.zeros(2, requires_grad=True))]}
        ),
        lambda ns: ns.optim.SGD([("w", ns.zeros(2, requires_grad=True))]).add_param_group(
            {"params": [ns.zeros(2, requires_grad=True)]}
        ),
        lambda ns: ns.optim.SGD([ns.zeros(2, requires_grad=True) * 2]),
    ],
    ids=["some-names-missing", "group-with-names", "group-without-names", "non-leaf"],
)
def test_param_errors_match_torch(build):
    errors = [_error(lambda: build(ns)) for ns in (staged, torch)]
    assert errors[0] == errors[1]


def test_a_non_leaf_that_retains_grad_is_optimized_as_torch():
    for ns in (staged, torch):
        p = ns.ones(2, requires_grad=True) * 2
        p.retain_grad()
        (p**2).sum().backward()
        ns.optim.SGD([p], lr=0.1).step()
        assert_close(p, ns.tensor([1.6, 1.6]), rtol=1e-7, atol=0)


# -- differentiable steps --------------------------------------------------------------
DIFFERENTIABLE = {  # betas far from 1: torch's differentiable steps count in float32
    "SGD": dict(lr=0.1, momentum=0.9, weight_decay=0.1, nesterov=True),
    "Adam": dict(lr=0.1, betas=(0.5, 0.6), weight_decay=0.1),
    "AdamW": dict(lr=0.1, betas=(0.5, 0.6), amsgrad=True, maximize=True),
    "RMSprop": dict(lr=0.1, momentum=0.5, centered=True, weight_decay=0.1),
    "Adagrad": dict(lr=0.1, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.3),
    "Adamax": dict(lr=0.1, betas=(0.5, 0.6), weight_decay=0.1),
    "NAdam": dict(lr=0.1, betas=(0.5, 0.6), decoupled_weight_decay=True, weight_decay=0.1),
    "RAdam": dict(lr=0.1, betas=(0.5, 0.8), weight_decay=0.1),
    "Adadelta": dict(lr=0.5, weight_decay=0.1),
    "ASGD": dict(lr=0.1, t0=1, weight_decay=0.1),
    "Rprop": dict(lr=0.1, etas=(0.4, 1.3)),
}
# torch's own differentiable steps raise after the first here: a state tensor its autograd
# saved is overwritten in place by the next step (staged's steps work on copies)
ONE_STEP_IN_TORCH = {"AdamW", "RMSprop", "Adamax", "Rprop"}


def test_every_differentiable_optimizer_is_tested():
    assert sorted(DIFFERENTIABLE) == sorted(n for n in NAMES if _takes(n, "differentiable"))


def _differentiable_steps(ns, name, p0, *grads):
    """The weights and state (one vector) after ``len(grads)`` differentiable steps from
    ``p0``, the weights a non-leaf copy of it."""
    p = p0.clone()
    opt = getattr(ns.optim, name)([p], differentiable=True, **DIFFERENTIABLE[name])
    for g in grads:
        p.grad = g
        opt.step()
    state = [v for k, v in sorted(opt.state[p].items()) if k != "step"]
    return ns.cat([t.reshape(-1) for t in [p, *state]])


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_differentiable_step_gradients_match_torch(name):
    """The new weights and state differentiate with respect to the old weights and the
    gradients as torch's (steps as many as torch takes)."""
    steps = 1 if name in ONE_STEP_IN_TORCH else 3
    rng = np.random.RandomState(0)
    data = [rng.standard_normal((3, 2)) for _ in range(steps + 1)]
    results = []
    for ns in (staged, torch):
        ins = [ns.tensor(d, requires_grad=True) for d in data]
        out = _differentiable_steps(ns, name, *ins)
        u = ns.tensor(np.random.RandomState(1).standard_normal(tuple(out.shape)))
        grads = ns.autograd.grad((out * u).sum(), ins)
        results.append([out, *grads])
    for a, b in zip(*results):
        assert_close(a, b, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", sorted(ONE_STEP_IN_TORCH))
def test_differentiable_steps_where_torch_raises_pass_gradcheck(name):
    rng = np.random.RandomState(2)
    check_grads(
        lambda *ins: _differentiable_steps(staged, name, *ins),
        [rng.standard_normal((3, 2)) for _ in range(4)],
    )


def test_differentiable_step_on_a_leaf_that_requires_grad_raises_as_torch():
    def step(ns):
        p = ns.zeros(2, requires_grad=True)
        p.grad = ns.ones(2)
        ns.optim.SGD([p], differentiable=True).step()

    for ns in (staged, torch):
        with pytest.raises(
            RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"
        ):
            step(ns)


def _meta_step(ns, name):
    """A meta-learning step: two differentiable inner steps from copies of ``w``, then the
    loss after them backpropagated into ``w``."""
    rng = np.random.RandomState(0)
    x, y = (ns.tensor(rng.standard_normal(s)) for s in [(8, 3), (8, 2)])
    w = ns.tensor(rng.standard_normal((3, 2)), requires_grad=True)

    def step(x, y):
        p = w.clone()
        opt = getattr(ns.optim, name)([p], lr=0.1, differentiable=True)
        for _ in range(2):
            (p.grad,) = ns.autograd.grad(((x @ p - y) ** 2).mean(), p, create_graph=True)
            opt.step()
        w.grad = None
        loss = ((x @ p - y) ** 2).mean()
        loss.backward()
        return loss

    return w, step, x, y


@pytest.mark.parametrize("name", ["SGD", "RMSprop"])
def test_compiled_differentiable_steps_match_eager_and_torch(name):
    """An optimizer the compiled step makes is its own: no state kept between calls, its
    numbers constants of the trace (one trace serves every call after the first, which
    makes ``w.grad``)."""
    runs = []
    for ns, compiled in ((torch, False), (staged, False), (staged, True)):
        w, step, x, y = _meta_step(ns, name)
        f = staged.compile(step) if compiled else step
        losses = [float(f(x, y).detach()) for _ in range(3)]
        runs.append((losses, to_numpy(w.grad).copy()))
    assert f.traces == 2
    for losses, grad in runs[1:]:
        np.testing.assert_allclose(losses, runs[0][0], rtol=1e-12)
        np.testing.assert_allclose(grad, runs[0][1], rtol=1e-10, atol=1e-13)
