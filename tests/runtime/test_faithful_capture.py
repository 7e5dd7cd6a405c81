"""Hooks and grad modes are resolved at the trace boundary: every mechanism below runs
while tracing, so the compiled step must give what the eager step gives, and both what
torch gives where torch has the feature."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged.autograd.graph import saved_tensors_hooks
from staged.tracing.symbolic import CaptureError

X = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
W0 = np.random.default_rng(4).standard_normal((3, 2)).astype(np.float32)


def _run_both(make_step, steps=3):
    """Run make_step() eagerly and compiled from the same start; return both results."""
    out = []
    for compiled in (False, True):
        step, read = make_step(staged)
        fn = staged.compile(step) if compiled else step
        res = [fn(staged.tensor(X)) for _ in range(steps)]
        out.append(([r.item() for r in res], read()))
    return out


def _assert_same(pair, torch_result=None):
    (le, se), (lc, sc) = pair
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    for a, b in zip(sc, se):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    if torch_result is not None:
        tl, ts = torch_result
        np.testing.assert_allclose(le, tl, rtol=1e-5)
        for a, b in zip(se, ts):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def _weight(lib):
    if lib is staged:
        return staged.tensor(W0.copy(), requires_grad=True)
    return torch.tensor(W0.copy(), requires_grad=True)


def _sgd(lib, w, lr=0.1):
    with lib.no_grad():
        w.sub_(lr * w.grad)
    w.grad = None


def test_node_pre_and_post_hooks():
    def make(lib):
        w = _weight(lib)

        def step(x):
            h = (x @ w).tanh()
            h.grad_fn.register_prehook(lambda gout: (gout[0] * 2,))
            h.grad_fn.register_hook(lambda gin, gout: (gin[0] + 1,))
            loss = (h * h).sum()
            loss.backward()
            _sgd(lib, w)
            return loss

        return step, lambda: [w.detach().numpy()]

    _assert_same(_run_both(make), _torch(make))


def _torch(make, steps=3):
    step, read = make(torch)
    return [step(torch.tensor(X)).item() for _ in range(steps)], read()


def test_post_accumulate_grad_hook_runs_the_optimizer_in_backward():
    def make(lib):
        w = _weight(lib)
        w.register_post_accumulate_grad_hook(lambda p: _sgd(lib, p, lr=0.05))

        def step(x):
            loss = (x @ w).relu().pow(2).sum()
            loss.backward()
            return loss

        return step, lambda: [w.detach().numpy()]

    _assert_same(_run_both(make), _torch(make))


def test_grad_mode_blocks_and_retain_grad():
    def make(lib):
        w = _weight(lib)
        seen = []

        def step(x):
            h = x @ w
            h.retain_grad()
            with lib.no_grad():
                scale = h.abs().mean()  # constant for the gradient
            with lib.enable_grad():
                loss = (h * scale).sum() + (h * h).mean()
            with lib.inference_mode():
                _ = x * 2  # recorded nowhere
            loss.backward()
            seen.append(h.grad.sum())
            _sgd(lib, w)
            return loss

        return step, lambda: [w.detach().numpy(), [s.item() for s in seen]]

    with pytest.warns(UserWarning, match="stored new tensors"):  # seen: each call re-traces
        pair = _run_both(make)
    _assert_same(pair, _torch(make))


def test_custom_function_is_traced_like_any_other_code():
    def make(lib):
        Function = lib.autograd.Function

        class Cube(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 3 * x * x * g

        w = _weight(lib)

        def step(x):
            loss = Cube.apply(x @ w).sum()
            loss.backward()
            _sgd(lib, w, lr=0.01)
            return loss

        return step, lambda: [w.detach().numpy()]

    _assert_same(_run_both(make), _torch(make))


def test_autograd_grad_with_create_graph_gradient_penalty():
    def make(lib):
        w = _weight(lib)

        def step(x):
            x = x.clone().requires_grad_(True)
            out = (x @ w).tanh().sum()
            (gx,) = lib.autograd.grad(out, x, create_graph=True)
            loss = out + (gx * gx).sum()
            loss.backward()
            _sgd(lib, w, lr=0.01)
            return loss

        return step, lambda: [w.detach().numpy()]

    _assert_same(_run_both(make), _torch(make))


def test_saved_tensor_hooks_and_inplace_on_non_leaves():
    calls = {"pack": 0}

    def make(lib):
        w = _weight(lib)
        hooks = saved_tensors_hooks if lib is staged else torch.autograd.graph.saved_tensors_hooks

        def pack(t):
            calls["pack"] += 1
            return t * 1  # a copy: what unpack returns must only hold the same values

        def step(x):
            with hooks(pack, lambda t: t):
                h = (x @ w).exp()
            h.mul_(2)  # in-place on a non-leaf: the graph is rebased
            loss = (h * h).sum()
            loss.backward()
            _sgd(lib, w, lr=0.001)
            return loss

        return step, lambda: [w.detach().numpy()]

    _assert_same(_run_both(make), _torch(make))
    assert calls["pack"] > 0


def test_a_compressing_pack_hook_leaves_python_numbers_alone():
    """A pack hook storing activations in bfloat16 packs the tensors an op saves, not the
    Python numbers it multiplies by (torch saves those as Scalars): ``h * 0.1`` scaled by
    bfloat16's 0.10009765625 was a 0.1 % wrong gradient, eagerly and compiled."""

    def make(lib):
        w = _weight(lib)
        hooks = saved_tensors_hooks if lib is staged else torch.autograd.graph.saved_tensors_hooks

        def step(x):
            with hooks(lambda t: t.to(lib.bfloat16), lambda t: t.float()):
                h = (x @ w) * 0.1
                loss = (h * 0.3 + h.exp() / 3).sum()
            loss.backward()
            _sgd(lib, w, lr=0.01)
            return loss

        return step, lambda: [w.detach().numpy()]

    _assert_same(_run_both(make), _torch(make))


def test_a_hook_that_reads_data_cannot_be_compiled():
    w = _weight(staged)

    def step(x):
        h = x @ w
        h.register_hook(lambda g: print(g.sum().item()))
        (h * h).sum().backward()  # (the gradient of h.sum() is a constant: its data is known)
        return h.sum()

    with pytest.raises(CaptureError, match=r"test_faithful"):
        staged.compile(step)(staged.tensor(X))


ALIAS_WRITES = {
    "data.add_": lambda w, g: w.data.add_(g, alpha=-0.1),
    "data.copy_": lambda w, g: w.data.copy_(w.data - 0.1 * g),
    "data.mul_": lambda w, g: w.data.mul_(0.5),
    "detach().sub_": lambda w, g: w.detach().sub_(0.1 * g),
    "data.zero_ then add_": lambda w, g: w.data.zero_().add_(g),
}


@pytest.mark.parametrize("write", ALIAS_WRITES, ids=list(ALIAS_WRITES))
def test_writes_through_data_and_detach_update_the_tensor(write):
    """``p.data.add_(...)`` (hand-written SGD in tutorials and makemore-style scripts) wrote
    a copy under capture: the compiled step lost every update (loss 3.0 at every call)."""

    def make_step(lib):
        w = lib.nn.Parameter(lib.tensor(W0))

        def step(x):
            w.grad = None
            loss = (x @ w).pow(2).sum()
            loss.backward()
            ALIAS_WRITES[write](w, w.grad)
            return loss

        return step, lambda: w.detach().numpy().copy()

    pair = _run_both(make_step)
    assert pair[0][0][0] != pair[0][0][1]  # eager trains
    _assert_same(pair)


def test_a_data_write_after_a_compiled_step_reaches_the_parameter():
    """Eagerly, after a compiled step left the parameter's data on the device, ``w.data``
    and ``w.detach()`` share it: writing them writes ``w``."""
    w = staged.nn.Parameter(staged.tensor(W0))

    def step(x):
        w.grad = None
        loss = (x @ w).sum()
        loss.backward()
        with staged.no_grad():
            w.sub_(0.1 * w.grad)
        return loss

    staged.compile(step)(staged.tensor(X))
    before = w.detach().numpy().copy()
    w.data.add_(1.0)
    w.detach().mul_(2.0)
    np.testing.assert_array_equal(w.detach().numpy(), (before + 1) * 2)


@pytest.mark.parametrize("out_features", [1, 2, 5])
def test_zero_grad_without_set_to_none_keeps_the_grad_objects(out_features):
    """``zero_grad(set_to_none=False)`` zeroes ``.grad`` in place. Under capture a bias of
    one or two elements folded its zeros to a constant that replaced the lifted state: the
    grad was lifted twice and the compiled step crashed on its second call (IREE: "expected
    13 arguments but passed 12"). The held ``.grad`` objects stay the parameters' own."""

    def run(compiled):
        staged.manual_seed(0)
        m = staged.nn.Linear(3, out_features)
        opt = staged.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x):
            opt.zero_grad(set_to_none=False)
            loss = m(x).pow(2).sum()
            loss.backward()
            opt.step()
            return loss

        fn = staged.compile(step) if compiled else step
        losses = [fn(staged.tensor(X)).item()]
        held = m.weight.grad, m.bias.grad
        losses += [fn(staged.tensor(X)).item() for _ in range(3)]
        assert held == (m.weight.grad, m.bias.grad)
        return losses, [t.detach().numpy().copy() for t in (m.weight, m.bias, *held)]

    _assert_same((run(False), run(True)))


def test_data_set_to_a_new_constant_in_a_compiled_step():
    """``b.data = zeros(2)`` inside the step: the state's new value is the constant."""
    b = staged.zeros(2)

    def step(x):
        out = (x.sum(1)[:2] + b).sum()
        b.data = staged.ones(2) * 3
        return out

    fn = staged.compile(step)
    got = [fn(staged.tensor(X)).item() for _ in range(3)]
    np.testing.assert_allclose(got[1:], [float(X.sum(1)[:2].sum()) + 6] * 2, rtol=1e-6)
    np.testing.assert_array_equal(b.numpy(), [3.0, 3.0])
