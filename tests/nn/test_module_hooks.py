"""nn.Module hooks against torch 2.13: each program runs in both libraries and the hooks
log what fired, in order, with their arguments; replacements change the same results."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import to_numpy


def summary(v):
    """A comparable record of a hook argument: arrays for tensors, tuples kept."""
    if isinstance(v, (tuple, list)):
        return tuple(summary(x) for x in v)
    if isinstance(v, dict):
        return {k: summary(x) for k, x in v.items()}
    if isinstance(v, (staged.Tensor, torch.Tensor)):
        return to_numpy(v).copy()
    return v


def assert_same(a, b, path="log"):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), (path, a, b)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=path)
    elif isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (path, a, b)
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k}]")
    else:
        assert a == b, (path, a, b)


def both(program):
    """Run ``program(ns, log)`` with ns = staged and torch; their logs must agree."""
    logs = []
    for ns in (staged, torch):
        log = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program(ns, log)
        logs.append(log)
    assert [e[0] for e in logs[0]] == [e[0] for e in logs[1]]  # firing order first
    assert_same(logs[0], logs[1])
    return logs[0]


def recorder(log, name, ret=None):
    def hook(*args):
        log.append((name, summary(args[1:])))
        return ret(*args) if ret else None

    return hook


W = np.random.RandomState(0).standard_normal((3, 2)).astype(np.float32)
B = np.array([0.1, -0.2, 0.3], np.float32)
X = np.random.RandomState(1).standard_normal((4, 2)).astype(np.float32)


def linear(ns, w=W, b=B):
    lin = ns.nn.Linear(w.shape[1], w.shape[0])
    with ns.no_grad():
        lin.weight.copy_(ns.tensor(w))
        lin.bias.copy_(ns.tensor(b))
    return lin


def mlp(ns):
    return ns.nn.Sequential(linear(ns), ns.nn.Tanh(), linear(ns, W.T.copy(), B[:2]))


def grads(log, *tensors):
    log.append(("grads", tuple(summary(t.grad) for t in tensors)))


# --- forward hooks ----------------------------------------------------------------------
def test_forward_pre_and_forward_hooks_order_prepend_and_replacement():
    def program(ns, log):
        lin = linear(ns)
        mod = ns.nn.modules.module
        handles = [
            mod.register_module_forward_pre_hook(recorder(log, "global-pre")),
            mod.register_module_forward_hook(recorder(log, "global-fwd")),
            lin.register_forward_pre_hook(recorder(log, "pre1", lambda m, a: a[0] * 2)),
            lin.register_forward_pre_hook(recorder(log, "pre0"), prepend=True),
            lin.register_forward_pre_hook(recorder(log, "pre2")),
            lin.register_forward_hook(recorder(log, "fwd1", lambda m, a, o: o + 1)),
            lin.register_forward_hook(recorder(log, "fwd0"), prepend=True),
            lin.register_forward_hook(recorder(log, "fwd2")),
        ]
        out = lin(ns.tensor(X))
        log.append(("out", summary(out)))
        handles[2].remove()
        handles[0].remove()
        handles[1].remove()
        log.append(("out-after-remove", summary(lin(ns.tensor(X)))))
        for h in handles:
            h.remove()
        log.append(("no-hooks", summary(lin(ns.tensor(X)))))

    log = both(program)
    assert [e[0] for e in log[:7]] == [
        "global-pre",
        "pre0",
        "pre1",
        "pre2",
        "global-fwd",
        "fwd0",
        "fwd1",
    ]


def test_forward_hooks_with_kwargs():
    class Scale(staged.nn.Module):
        def forward(self, x, *, scale=1.0):
            return x * scale

    class TScale(torch.nn.Module):
        forward = Scale.forward

    def program(ns, log):
        m = Scale() if ns is staged else TScale()
        m.register_forward_pre_hook(
            lambda mod, a, kw: log.append(("pre", summary(a), kw)) or ((a[0] + 1,), {"scale": 3.0}),
            with_kwargs=True,
        )
        m.register_forward_hook(
            lambda mod, a, kw, out: log.append(("fwd", summary(a), kw, summary(out))),
            with_kwargs=True,
        )
        log.append(("out", summary(m(ns.ones(2), scale=2.0))))

    both(program)


def test_forward_pre_hook_with_kwargs_must_return_pair():
    lin = staged.nn.Linear(2, 2)
    lin.register_forward_pre_hook(lambda m, a, kw: a, with_kwargs=True)
    with pytest.raises(
        RuntimeError, match="must return None or a tuple of \\(new_args, new_kwargs\\)"
    ):
        lin(staged.ones(1, 2))


def test_always_call_hooks_run_when_forward_raises():
    class Bad(staged.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    class TBad(torch.nn.Module):
        forward = Bad.forward

    def program(ns, log):
        m = Bad() if ns is staged else TBad()
        g = ns.nn.modules.module.register_module_forward_hook(
            recorder(log, "global-always"), always_call=True
        )
        m.register_forward_hook(recorder(log, "plain"))
        m.register_forward_hook(recorder(log, "always"), always_call=True)
        m.register_forward_hook(lambda *a: 1 / 0, always_call=True)
        with pytest.raises(ValueError, match="boom"):
            m(ns.ones(1))
        g.remove()

    log = both(program)
    assert [e[0] for e in log] == ["global-always", "always"]


def test_always_call_hook_error_is_a_warning():
    class Bad(staged.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    m = Bad()
    m.register_forward_hook(lambda *a: 1 / 0, always_call=True)
    with pytest.warns(
        UserWarning,
        match="always_call=True`` raised an exception that was silenced.*division by zero",
    ):
        with pytest.raises(ValueError):
            m(staged.ones(1))


# --- full backward hooks ------------------------------------------------------------------
def test_full_backward_hooks_of_nested_modules_fire_in_torch_order():
    def program(ns, log):
        model = mlp(ns)
        mod = ns.nn.modules.module
        handles = [
            mod.register_module_full_backward_pre_hook(recorder(log, "global-pre")),
            mod.register_module_full_backward_hook(recorder(log, "global-bw")),
        ]
        for name, m in model.named_modules():
            m.register_full_backward_pre_hook(recorder(log, f"pre[{name}]"))
            m.register_full_backward_hook(recorder(log, f"bw[{name}]"))
        x = ns.tensor(X, requires_grad=True)
        model(x).pow(2).sum().backward()
        grads(log, x, *model.parameters())
        for h in handles:
            h.remove()

    log = both(program)
    assert [e[0] for e in log][:6] == [
        "global-pre",
        "pre[]",
        "global-pre",
        "pre[2]",
        "global-bw",
        "bw[2]",
    ]


def test_backward_hooks_replace_grad_output_and_grad_input():
    def program(ns, log):
        model = mlp(ns)
        model[2].register_full_backward_pre_hook(recorder(log, "pre", lambda m, go: (go[0] * 2,)))
        model[0].register_full_backward_hook(recorder(log, "bw", lambda m, gi, go: (gi[0] * 10,)))
        model[0].register_full_backward_hook(recorder(log, "bw-sees-replaced"))
        x = ns.tensor(X, requires_grad=True)
        model(x).sum().backward()
        grads(log, x, *model.parameters())

    both(program)


def test_full_backward_hook_with_several_and_non_tensor_inputs_and_outputs():
    class Mix(staged.nn.Module):
        def forward(self, a, k, b):
            return a * b * k, k, (a - b).exp()

    class TMix(torch.nn.Module):
        forward = Mix.forward

    def program(ns, log):
        m = Mix() if ns is staged else TMix()
        m.register_full_backward_pre_hook(recorder(log, "pre"))
        m.register_full_backward_hook(recorder(log, "bw"))
        a = ns.tensor([1.0, 2.0], requires_grad=True)
        b = ns.tensor([0.5, -1.0], requires_grad=True)
        out = m(a, 3.0, b)
        (out[0].sum() + out[2].sum() * 2).backward()
        grads(log, a, b)
        out = m(a, 3.0, b)
        out[0].sum().backward()  # out[2] gets no gradient: None in grad_output
        grads(log, a, b)

    both(program)


def test_hooks_fire_when_no_input_requires_grad():
    def program(ns, log):
        lin = linear(ns)
        lin.register_full_backward_pre_hook(recorder(log, "pre"))
        lin.register_full_backward_hook(recorder(log, "bw"))
        lin(ns.tensor(X)).sum().backward()
        grads(log, *lin.parameters())

    log = both(program)
    assert [e[0] for e in log] == ["pre", "bw", "grads"]
    assert log[1][1][0] == (None,)  # grad_input
    with pytest.warns(
        UserWarning,
        match="Full backward hook is firing when gradients are "
        "computed with respect to module outputs",
    ):
        lin = staged.nn.Linear(2, 1)
        lin.register_full_backward_hook(lambda *a: None)
        lin(staged.ones(1, 2)).sum().backward()


def test_hook_returning_grads_without_inputs_raises():
    lin = staged.nn.Linear(2, 1)
    lin.register_full_backward_hook(lambda m, gi, go: (staged.ones(1, 2),))
    with (
        pytest.warns(UserWarning),
        pytest.raises(RuntimeError, match="should always return None or None for all"),
    ):
        lin(staged.ones(1, 2)).sum().backward()


def test_gradient_reaching_inputs_before_outputs_calls_no_hook():
    """torch 2.13 calls nothing when the inputs' Node runs before the outputs' one (the
    seed's note says grad_output would be filled with None; torch returns early)."""

    class Mid(staged.nn.Module):
        def forward(self, x):
            self.mid = x * 2
            return self.mid.sin()

    class TMid(torch.nn.Module):
        forward = Mid.forward

    def program(ns, log):
        m = Mid() if ns is staged else TMid()
        m.register_full_backward_pre_hook(recorder(log, "pre"))
        m.register_full_backward_hook(recorder(log, "bw"))
        x = ns.tensor([1.0, 2.0], requires_grad=True)
        m(x)
        m.mid.sum().backward()
        grads(log, x)
        m(x).sum().backward()
        grads(log, x)

    log = both(program)
    assert [e[0] for e in log] == ["grads", "pre", "bw", "grads"]


def test_module_called_under_no_grad_fires_nothing():
    def program(ns, log):
        lin = linear(ns)
        lin.register_full_backward_pre_hook(recorder(log, "pre"))
        lin.register_full_backward_hook(recorder(log, "bw"))
        x = ns.tensor(X, requires_grad=True)
        with ns.no_grad():
            out = lin(x)
        log.append(("requires_grad", out.requires_grad))

    assert both(program) == [("requires_grad", False)]


def test_backward_hook_handles_remove_and_prepend():
    def program(ns, log):
        lin = linear(ns)
        h1 = lin.register_full_backward_hook(recorder(log, "a"))
        lin.register_full_backward_hook(recorder(log, "b"), prepend=True)
        lin.register_full_backward_pre_hook(recorder(log, "pa"))
        h2 = lin.register_full_backward_pre_hook(recorder(log, "pb"), prepend=True)
        x = ns.tensor(X, requires_grad=True)
        lin(x).sum().backward()
        h1.remove()
        h2.remove()
        lin(x).sum().backward()

    log = both(program)
    assert [e[0] for e in log] == ["pb", "pa", "b", "a", "pa", "b"]


def test_wrong_number_of_grads_from_hooks_raises():
    for register, hook, msg in (
        (
            "register_full_backward_hook",
            lambda m, gi, go: (gi[0], gi[0]),
            "Backward hook returned an invalid number of grad_input, got 2, but expected 1",
        ),
        (
            "register_full_backward_pre_hook",
            lambda m, go: (go[0], go[0]),
            "Backward pre hook returned an invalid number of grad_output, got 2, but expected 1",
        ),
    ):
        lin = staged.nn.Linear(2, 1)
        getattr(lin, register)(hook)
        with pytest.raises(RuntimeError, match=msg):
            lin(staged.ones(1, 2, requires_grad=True)).sum().backward()


def test_backward_hook_node_is_one_identity_function():
    lin = staged.nn.Linear(2, 3)
    lin.register_full_backward_hook(lambda *a: None)
    x, y = staged.ones(1, 2, requires_grad=True), staged.ones(1, 2, requires_grad=True)
    out = lin(x)
    assert out.grad_fn.name() == "BackwardHookFunctionBackward"

    class Two(staged.nn.Module):
        def forward(self, a, b):
            return a + b

    two = Two()
    two.register_full_backward_pre_hook(lambda *a: None)
    seen = []
    two.register_forward_pre_hook(lambda m, a: None)
    two.register_forward_hook(lambda m, a, o: seen.extend(t.grad_fn for t in a))
    two(x, y)
    assert seen[0] is seen[1] and seen[0].name() == "BackwardHookFunctionBackward"


# --- legacy backward hooks ----------------------------------------------------------------
def test_legacy_backward_hook_sees_the_single_node():
    class Mul(staged.nn.Module):
        def forward(self, a, b):
            return a * b

    class TMul(torch.nn.Module):
        forward = Mul.forward

    class ExpMul(staged.nn.Module):  # two Nodes: the hook sees the last (exp)
        def forward(self, a, b):
            return (a * b).exp()

    class TExpMul(torch.nn.Module):
        forward = ExpMul.forward

    def program(ns, log):
        for cls in (Mul, ExpMul) if ns is staged else (TMul, TExpMul):
            m = cls()
            m.register_backward_hook(recorder(log, cls.__name__.lstrip("T")))
            a = ns.tensor([1.0, 2.0], requires_grad=True)
            b = ns.tensor([3.0, -1.0], requires_grad=True)
            (m(a, b) * ns.tensor([1.0, 0.5])).sum().backward()
            grads(log, a, b)
        m = (Mul if ns is staged else TMul)()
        m.register_backward_hook(lambda mod, gi, go: (gi[0] * 0, gi[1]))
        a = ns.tensor([1.0, 2.0], requires_grad=True)
        m(a, ns.tensor([3.0, 4.0], requires_grad=True)).sum().backward()
        grads(log, a)

    both(program)


def test_legacy_backward_hook_warns_like_torch():
    class ExpMul(staged.nn.Module):
        def forward(self, a, b):
            return (a * b).exp()

    m = ExpMul()
    m.register_backward_hook(lambda *a: None)
    a = staged.ones(2, requires_grad=True)
    with pytest.warns(
        FutureWarning,
        match="Using a non-full backward hook when the forward "
        "contains multiple autograd Nodes is deprecated",
    ):
        m(a, a)


def test_mixing_legacy_and_full_backward_hooks_raises():
    lin = staged.nn.Linear(1, 1)
    lin.register_backward_hook(lambda *a: None)
    with pytest.raises(
        RuntimeError,
        match="Cannot use both regular backward hooks and full backward hooks on a single Module",
    ):
        lin.register_full_backward_hook(lambda *a: None)
    lin = staged.nn.Linear(1, 1)
    lin.register_full_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match="Cannot use both regular"):
        lin.register_backward_hook(lambda *a: None)


# --- registration hooks -------------------------------------------------------------------
def test_global_registration_hooks_see_and_replace():
    def program(ns, log):
        mod = ns.nn.modules.module
        hs = [
            mod.register_module_parameter_registration_hook(
                lambda m, n, p: log.append(("param", n, tuple(p.shape)))
            ),
            mod.register_module_buffer_registration_hook(
                lambda m, n, b: log.append(("buffer", n)) or b * 2
            ),
            mod.register_module_module_registration_hook(
                lambda m, n, s: log.append(("module", n, type(s).__name__))
            ),
        ]
        m = ns.nn.Module()
        m.lin = ns.nn.Linear(2, 1)
        m.register_buffer("scale", ns.ones(2))
        log.append(("scale", summary(m.scale)))
        for h in hs:
            h.remove()
        m.other = ns.nn.Linear(1, 1)

    both(program)


# --- under staged.compile ------------------------------------------------------------------
def test_backward_hooks_are_traced_into_a_compiled_step():
    """Hooks run while tracing; what they do (scaling a grad) is in the compiled step."""

    def run(compile):
        staged.manual_seed(0)
        model = staged.nn.Sequential(
            staged.nn.Linear(2, 3), staged.nn.Tanh(), staged.nn.Linear(3, 1)
        )
        model[0].register_full_backward_hook(lambda m, gi, go: (gi[0] * 3,))
        model[2].register_full_backward_pre_hook(lambda m, go: (go[0] * 0.5,))
        x = staged.tensor(X, requires_grad=True)

        def step(x):
            x.grad = None
            model.zero_grad()
            loss = model(x).pow(2).sum()
            loss.backward()
            return loss

        fn = staged.compile(step) if compile else step
        for _ in range(2):
            fn(x)
        return [to_numpy(x.grad)] + [to_numpy(p.grad) for p in model.parameters()]

    for a, b in zip(run(False), run(True)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
