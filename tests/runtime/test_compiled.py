"""staged.compile: a compiled training step behaves call for call like the eager one."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import staged
import staged.nn.functional as F
from staged import nn, optim
from staged.lower.mlir import LoweringError


def _model(seed=0):
    staged.manual_seed(seed)
    return nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4))


def _data(n=8, seed=1):
    rng = np.random.default_rng(seed)
    return (
        staged.tensor(rng.standard_normal((n, 10)).astype(np.float32)),
        staged.tensor(rng.integers(0, 4, n)),
    )


def _trainer(model, make_opt, zero_first=True):
    opt = make_opt(model.parameters())
    calls = []

    def step(x, y):
        calls.append(1)
        if zero_first:
            opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if not zero_first:
            opt.zero_grad()
        return loss

    return step, calls


OPTIMIZERS = {
    "sgd": lambda ps: optim.SGD(ps, lr=0.1),
    "sgd-momentum-nesterov": lambda ps: optim.SGD(
        ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3
    ),
    "adam": lambda ps: optim.Adam(ps, lr=1e-2),
    "adamw": lambda ps: optim.AdamW(ps, lr=1e-2),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_compiled_step_equals_eager_for_20_steps(name):
    eager_model = _model()
    compiled_model = copy.deepcopy(eager_model)
    eager_step, _ = _trainer(eager_model, OPTIMIZERS[name])
    step, calls = _trainer(compiled_model, OPTIMIZERS[name])
    cstep = staged.compile(step)
    x, y = _data()
    for i in range(20):
        le = eager_step(x, y).item()
        lc = cstep(x, y).item()
        np.testing.assert_allclose(lc, le, rtol=1e-4, err_msg=f"step {i}")
    for (k, pe), pc in zip(eager_model.state_dict().items(), compiled_model.parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)
    # the first call sees no .grad and no optimizer buffers; the second sees both (and
    # is traced once more); every later call reuses that trace
    assert cstep.traces == 2 and len(calls) == 2


def test_step_that_zeroes_grads_last_is_traced_once():
    step, calls = _trainer(_model(), OPTIMIZERS["sgd"], zero_first=False)
    cstep = staged.compile(step)
    x, y = _data()
    for _ in range(5):
        cstep(x, y)
    assert cstep.traces == 1 and len(calls) == 1


def test_body_runs_once_and_grads_are_written_back():
    model = _model()
    ref = copy.deepcopy(model)
    calls = []

    def grads_only(x, y):
        calls.append(1)
        for p in model.parameters():
            p.grad = None
        F.cross_entropy(model(x), y).backward()

    cg = staged.compile(grads_only)
    x, y = _data()
    for _ in range(3):
        cg(x, y)
    assert len(calls) == 2  # p.grad None on the first call, set on the later ones
    F.cross_entropy(ref(x), y).backward()
    for pc, pr in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(pc.grad.numpy(), pr.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_shape_change_retraces_and_stays_correct():
    model = _model()
    ref = copy.deepcopy(model)
    step, calls = _trainer(model, OPTIMIZERS["sgd"], zero_first=False)
    ref_step, _ = _trainer(ref, OPTIMIZERS["sgd"], zero_first=False)
    cstep = staged.compile(step)
    for n in (8, 8, 5, 5, 8):
        x, y = _data(n, seed=n)
        np.testing.assert_allclose(cstep(x, y).item(), ref_step(x, y).item(), rtol=1e-4)
    assert cstep.traces == 2


def test_grad_mode_is_part_of_the_key():
    w = staged.randn(3, requires_grad=True)
    cf = staged.compile(lambda x: (x * w).sum().detach())
    x = staged.randn(3)
    cf(x)
    with staged.no_grad():
        cf(x)
    assert cf.traces == 2


def test_hooks_and_no_grad_inside_a_compiled_step_match_eager():
    def make():
        model = _model()
        opt = optim.SGD(model.parameters(), lr=0.1)
        for p in model.parameters():
            p.register_hook(lambda g: g.clamp(-0.01, 0.01))  # gradient clipping by hook

        def step(x, y):
            opt.zero_grad()
            h = model[0](x)
            h.register_hook(lambda g: g * 0.5)
            with staged.no_grad():
                frozen = model[2](h.relu())  # a side computation, not differentiated
            loss = F.cross_entropy(model[2](model[1](h)), y) + 0 * frozen.sum()
            loss.backward()
            opt.step()
            return loss

        return model, step

    (me, se), (mc, sc) = make(), make()
    cstep = staged.compile(sc)
    x, y = _data()
    for _ in range(5):
        np.testing.assert_allclose(cstep(x, y).item(), se(x, y).item(), rtol=1e-4)
    for pe, pc in zip(me.parameters(), mc.parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_mixing_eager_and_compiled_calls_on_the_same_parameters():
    model = _model()
    ref = copy.deepcopy(model)
    step, _ = _trainer(model, OPTIMIZERS["sgd"])
    ref_step, _ = _trainer(ref, OPTIMIZERS["sgd"])
    cstep = staged.compile(step)
    x, y = _data()
    for i in range(6):
        run = cstep if i % 2 else step
        np.testing.assert_allclose(run(x, y).item(), ref_step(x, y).item(), rtol=1e-4)
    assert model[0].weight._version > 0


def test_lowering_error_names_the_op_and_the_user_line():
    def f(a):
        return a.asin()  # MLIR's complex dialect has no arcsine

    a = staged.tensor([0.5 + 0.5j])
    with pytest.raises(
        LoweringError,
        match=r"asin on complex64.*test_compiled\.py:\d+: no "
        r"MLIR lowering: MLIR's complex dialect",
    ):
        staged.compile(f)(a)


def test_an_op_outside_its_dtype_domain_raises_at_the_user_line_when_traced():
    """bool matmul is outside matmul's domain: the trace raises torch's error class with
    the reason, as eager does, before anything is lowered."""

    def f(a, b):
        return a @ b

    a = staged.tensor([[True, False]])
    with pytest.raises(
        RuntimeError,
        match=r"'matmul' is not defined for bool tensors: "
        r"NumPy's boolean matmul",
    ):
        staged.compile(f)(a, a.T)
    with pytest.raises(RuntimeError, match=r"'matmul' is not defined for bool"):
        f(a, a.T)


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        staged.compile(lambda x: x, backend="tpu")


def test_grads_of_tensor_arguments_accumulate_call_after_call():
    w = staged.tensor([1.0, 2.0], requires_grad=True)
    c = staged.compile(lambda w: (w * w).sum().backward())
    seen = []
    for _ in range(3):
        c(w)
        seen.append(w.grad.numpy().copy())
    np.testing.assert_array_equal(seen, [[2, 4], [4, 8], [6, 12]])  # as eager accumulates
    w.grad = None
    c(w)
    np.testing.assert_array_equal(w.grad.numpy(), [2, 4])
    assert c.traces == 2  # one trace with .grad None, one with it set


def test_zero_size_contractions_and_reductions_match_torch():
    """A matmul over a zero-size contraction dimension killed Python with SIGFPE inside
    IREE's compiler; ops whose inputs hold no elements are now computed before it."""
    import torch

    shapes = {"a": (2, 0), "b": (0, 3), "p": (4, 2, 0), "q": (4, 0, 3), "e": (0, 4)}

    def fn(a, b, p, q, e):
        return a @ b, p @ q, e.sum(0), e.sum(), e.mean(0), (a @ b).sum() + (p @ q).sum()

    got = staged.compile(fn)(*(staged.ones(*s) for s in shapes.values()))
    want = fn(*(torch.ones(*s) for s in shapes.values()))
    for g, t in zip(got, want):
        assert tuple(g.shape) == tuple(t.shape)
        np.testing.assert_array_equal(g.numpy(), t.numpy())  # exact: 0 or NaN (mean of nothing)


def test_zero_size_contraction_under_a_dynamic_batch():
    f = staged.compile(lambda a, b: (a @ b, (a @ b).mean(1), a.sum(1)), dynamic=True)
    for n in (4, 5):
        mm, mean, total = f(staged.ones(n, 0), staged.ones(0, 3))
        np.testing.assert_array_equal(mm.numpy(), np.zeros((n, 3), np.float32))
        np.testing.assert_array_equal(mean.numpy(), np.zeros(n, np.float32))
        np.testing.assert_array_equal(total.numpy(), np.zeros(n, np.float32))
    assert f.traces == 1


def test_conv_over_zero_input_channels_is_zeros():
    """Sums over no input channels: zeros of the output's shape, as the sum it is (torch
    2.13 returns a (2, 0, 3, 3) tensor here, dropping the weight's 3 output channels)."""
    conv = staged.compile(lambda x, w: F.conv2d(x, w))
    got = conv(staged.ones(2, 0, 5, 5), staged.ones(3, 0, 3, 3))
    np.testing.assert_array_equal(got.numpy(), np.zeros((2, 3, 3, 3), np.float32))


def test_a_steps_arguments_and_results_are_freed_by_reference_counting():
    """Nothing of a call waits for Python's cyclic collector (Note [no recursive closures]
    in staged/tracing/pytree.py): the results' pytree was rebuilt by a recursive closure,
    whose cycle kept every result until a collection, a step returning 16 MB held gigabytes."""
    import gc
    import weakref

    step = staged.compile(lambda x, d: (x * 2, {"y": d["a"] + 1, "z": [x.sum()]}))
    x, d = staged.ones(8), {"a": staged.ones(3)}
    step(x, d)  # traced and compiled
    gc.collect()
    gc.disable()
    try:
        refs = []
        for _ in range(4):
            arg = staged.ones(8)
            out = step(arg, d)
            refs += [weakref.ref(out[0]), weakref.ref(out[1]["y"]), weakref.ref(out[1]["z"][0])]
            refs.append(weakref.ref(arg))
            del out, arg
        assert [r() is not None for r in refs] == [False] * len(refs)
    finally:
        gc.enable()
