"""Python side effects of a compiled body, call for call against torch 2.13 eager (which
torch.compile matches). A body whose results are differentiated outside and that must run
eagerly has its first call run as its trace (Note [first eager call] in
runtime/boundary.py): what the trace stored outside gets its data and graph, and nothing
the body does in Python happens twice. A compiled step (backward inside, or no_grad)
counts the call that traces once."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from staged.tracing.symbolic import CaptureError


def _linear(lib):
    lib.manual_seed(0)
    return lib.nn.Linear(3, 1)


def _compile(lib, fn):
    return staged.compile(fn) if lib is staged else fn


def _both(program):
    """``program(lib)`` with staged (compiled) and torch (eager), warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return program(staged), program(torch)


def _num(t) -> float:
    return round(float(t.detach()), 5)


def test_a_tensor_appended_to_a_list_is_appended_once_per_call_with_its_data():
    def program(lib):
        log, lin = [], _linear(lib)

        def f(x):
            y = lin(x).sum()
            log.append(y)
            return y

        f = _compile(lib, f)
        seen = []
        for _ in range(3):
            loss = f(lib.ones(2, 3))
            loss.backward()
            seen.append((len(log), log[-1] is loss))
        got = [(_num(t), t.requires_grad, t.grad_fn is not None) for t in log]
        return seen, got, lin.weight.grad.numpy().copy()

    (seen, log, grad), (want_seen, want_log, want_grad) = _both(program)
    assert seen == want_seen == [(1, True), (2, True), (3, True)]
    assert log == want_log
    np.testing.assert_allclose(grad, want_grad, rtol=1e-6)


def test_the_first_call_warns_and_no_longer_leaves_a_tensor_without_data():
    log, lin = [], _linear(staged)

    @staged.compile
    def f(x):
        y = lin(x).sum() * 2
        log.append(y)
        return y + 1

    with pytest.warns(UserWarning, match="its trace stores new tensors outside itself"):
        loss = f(staged.ones(2, 3))
    log[0].backward(retain_graph=True)  # the stored tensor has the call's graph
    loss.backward()
    assert len(log) == 1
    assert _num(loss) == pytest.approx(_num(log[0]) + 1)
    np.testing.assert_allclose(lin.weight.grad.numpy(), 8 * np.ones((1, 3)))  # 2 x 2 rows x 2


def test_a_module_attribute_and_counter_are_set_once_per_call():
    def program(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin, self.calls = _linear(lib), 0

            def forward(self, x):
                y = self.lin(x).sum()
                self.last = y
                self.calls += 1
                return y

        m = M()
        f = _compile(lib, m)
        seen = []
        for _ in range(3):
            loss = f(lib.ones(2, 3))
            loss.backward()
            seen.append((m.calls, _num(m.last), m.last is loss))
        return seen, m.lin.weight.grad.numpy().copy()

    (seen, grad), (want_seen, want_grad) = _both(program)
    assert seen == want_seen
    assert [s[0] for s in seen] == [1, 2, 3]
    np.testing.assert_allclose(grad, want_grad, rtol=1e-6)


def test_a_dict_entry_and_a_count_in_it_are_written_once_per_call():
    def program(lib):
        d, lin = {}, _linear(lib)

        def f(x):
            y = lin(x).sum()
            d["y"] = y
            d["n"] = d.get("n", 0) + 1
            return y

        f = _compile(lib, f)
        seen = []
        for _ in range(3):
            loss = f(lib.ones(2, 3))
            loss.backward()
            seen.append((d["n"], _num(d["y"]), d["y"] is loss))
        return seen

    seen, want = _both(program)
    assert seen == want
    assert [s[0] for s in seen] == [1, 2, 3]


def test_a_print_in_the_body_prints_once_per_call(capsys):
    def program(lib):
        log, lin = [], _linear(lib)

        def f(x):
            y = lin(x).sum()
            log.append(y)
            print("called", len(log))
            return y

        f = _compile(lib, f)
        for _ in range(3):
            f(lib.ones(2, 3)).backward()
        return capsys.readouterr().out

    got, want = _both(program)
    assert got == want == "called 1\ncalled 2\ncalled 3\n"


def test_a_hook_the_body_leaves_is_registered_once_at_the_first_call():
    def program(lib):
        lin = _linear(lib)

        def f(x):
            lin.weight.register_hook(lambda g: g * 2)  # one more at every call
            return lin(x).sum()

        f = _compile(lib, f)
        grads = []
        for _ in range(3):
            lin.weight.grad = None
            f(lib.ones(2, 3)).backward()
            grads.append(_num(lin.weight.grad.sum()))
        return grads

    got, want = _both(program)
    assert got == want == [12.0, 24.0, 48.0]


def test_an_iterator_the_body_advances_is_advanced_once_at_the_first_call():
    def program(lib):
        lin = _linear(lib)
        batches = iter([lib.full((2, 3), float(i)) for i in range(5)])

        def f():
            return lin(next(batches)).sum()

        f = _compile(lib, f)
        losses = []
        for _ in range(3):
            loss = f()
            loss.backward()
            losses.append(_num(loss))
        return losses, lin.weight.grad.numpy().copy()

    (losses, grad), (want_losses, want_grad) = _both(program)
    assert losses == want_losses
    np.testing.assert_allclose(grad, want_grad, rtol=1e-6)


def _stored(body):
    """A program: ``body(lib, lin, x, log)`` compiled (staged) or eager (torch), called
    twice with a backward outside: (losses, len(log), lin's weight grad)."""

    def program(lib):
        lin, log = _linear3x2(lib), []
        f = _compile(lib, lambda x: body(lib, lin, x, log))
        x = lib.arange(6, dtype=lib.float32).reshape(2, 3)
        losses = []
        for _ in range(2):
            loss = f(x)
            loss.backward()
            losses.append(_num(loss))
        return losses, len(log), lin.weight.grad.numpy().copy()

    return program


def _linear3x2(lib):
    lib.manual_seed(0)
    return lib.nn.Linear(3, 2)


def _detached(lib, lin, x, log):
    y = lin(x)
    log.append(y)
    return (y.detach() * y).sum()


def _no_grad_part(lib, lin, x, log):
    with lib.no_grad():
        s = lin(x)
    y = lin(x)
    log.append(y)
    return (s * y).sum()


@pytest.mark.parametrize("body", [_detached, _no_grad_part], ids=["detach", "no_grad"])
def test_the_first_call_s_graph_keeps_what_the_body_detached(body):
    """The trace's ops run in grad mode only where the trace's own inputs required grad."""
    (losses, n, grad), (want_losses, want_n, want_grad) = _both(_stored(body))
    assert (losses, n) == (want_losses, want_n) == (want_losses, 2)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5)


class _Cube(staged.autograd.Function):
    """A backward no op of the graph has (3a, not 2a, for a * a)."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * 3 * a


class _TorchCube(torch.autograd.Function):
    forward = staticmethod(_Cube.forward)
    backward = staticmethod(_Cube.backward)


def _custom(lib, lin, x, log):
    y = (_Cube if lib is staged else _TorchCube).apply(lin(x))
    log.append(y)
    return y.sum()


def _hooked(lib, lin, x, log):
    y = lin(x)
    y.register_hook(lambda g: g * 10)
    log.append(y)
    return y.sum()


@pytest.mark.parametrize("body", [_custom, _hooked], ids=["custom_function", "tensor_hook"])
def test_a_graph_with_more_than_its_ops_reruns_the_body_and_says_so(body):
    """A custom Function's backward or a hook on an intermediate is not in the graph: the
    first call runs ``fn`` again, with eager's gradients, and warns that its Python ran
    twice (the trace's append stays, without data)."""
    with pytest.warns(UserWarning, match="this call runs its Python again, after its trace"):
        losses, n, grad = _stored(body)(staged)
    want_losses, want_n, want_grad = _stored(body)(torch)
    assert losses == want_losses
    assert n == want_n + 1
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5)


def test_state_updates_and_random_draws_of_the_first_call_are_eager_s():
    """BatchNorm's running statistics (state the graph writes) and dropout's mask (host
    draws, from torch's stream) at the call that runs as its trace."""

    def program(lib):
        lib.manual_seed(0)
        m = lib.nn.Sequential(
            lib.nn.Linear(4, 8), lib.nn.BatchNorm1d(8), lib.nn.Dropout(0.5), lib.nn.Linear(8, 1)
        )
        log = []

        def f(x):
            y = (m(x) ** 2).sum()
            log.append(y)
            return y

        f = _compile(lib, f)
        x = lib.arange(24, dtype=lib.float32).reshape(6, 4) / 10
        for _ in range(3):
            f(x).backward()
        return (
            [_num(t) for t in log],
            m[1].running_mean.numpy().copy(),
            m[0].weight.grad.numpy().copy(),
            lib.get_rng_state().numpy().copy(),
        )

    got, want = _both(program)
    assert got[0] == pytest.approx(want[0], rel=1e-5)
    for a, b in zip(got[1:], want[1:]):  # (staged's eager BatchNorm is torch's to 1e-4)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_a_bad_index_at_the_first_call_raises_eager_s_error_before_any_write():
    emb, log = staged.nn.Embedding(4, 2), []

    @staged.compile
    def f(i):
        y = emb(i).sum()
        log.append(y)
        return y

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(IndexError, match="index out of range"):
            f(staged.tensor([1, 7]))
    with pytest.raises(CaptureError, match="has no data"):
        float(log[0])  # the call raised: the trace's tensor never got data


def test_a_compiled_step_counts_the_call_that_traces_once(capsys):
    """Backward inside the step (no autograd boundary): the trace is the first call."""

    def program(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin, self.calls = _linear(lib), 0

            def forward(self, x):
                self.calls += 1
                return self.lin(x).sum()

        m, seen = M(), []
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = m(x)
            loss.backward()
            opt.step()
            seen.append(m.calls)
            print("step")
            return loss.detach()

        step = _compile(lib, step)
        got = [(_num(step(lib.ones(2, 3))), m.calls, len(seen)) for _ in range(3)]
        with lib.no_grad():
            got += [(_num(m(lib.ones(2, 3))), m.calls, len(seen))]
        return got, capsys.readouterr().out.count("step")

    got, want = _both(program)
    assert got == want
    assert [g[1] for g in got[0]] == [1, 2, 3, 4]


def test_a_body_differentiated_outside_counts_each_call_once():
    def program(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin, self.calls = _linear(lib), 0

            def forward(self, x):
                self.calls += 1
                return self.lin(x).sum()

        m = M()
        f = _compile(lib, m)
        seen = []
        for _ in range(3):
            loss = f(lib.ones(2, 3))
            seen.append(m.calls)
            loss.backward()
            seen.append(m.calls)
        return seen

    got, want = _both(program)
    assert got == want


def test_a_body_differentiated_outside_runs_its_python_once_per_trace(capsys):
    """Dropout, BatchNorm and a counter on the Module: one run of the Python per call
    (the counter re-traces per value), with eager's losses, gradients, running statistics
    and random stream (Note [one trace per call] in runtime/boundary.py)."""

    def program(lib):
        lib.manual_seed(0)

        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = lib.nn.Sequential(
                    lib.nn.Linear(4, 8),
                    lib.nn.BatchNorm1d(8),
                    lib.nn.Dropout(0.5),
                    lib.nn.Linear(8, 1),
                )
                self.calls = 0

            def forward(self, x):
                self.calls += 1
                print("forward")
                return (self.net(x) ** 2).sum()

        m = M()
        f = _compile(lib, m)
        x = lib.arange(24, dtype=lib.float32).reshape(6, 4) / 10
        seen, losses = [], []
        for _ in range(3):
            loss = f(x)
            seen.append(m.calls)
            loss.backward()
            seen.append(m.calls)
            losses.append(_num(loss))
        state = m.net[0].weight.grad, m.net[1].running_mean, lib.get_rng_state()
        return seen, losses, capsys.readouterr().out, [t.numpy().copy() for t in state]

    (seen, losses, out, state), (want_seen, want_losses, want_out, want_state) = _both(program)
    assert seen == want_seen == [1, 1, 2, 2, 3, 3]
    assert losses == pytest.approx(want_losses, rel=1e-5)
    assert out == want_out == "forward\n" * 3
    for a, b in zip(state, want_state):  # (staged's eager BatchNorm is torch's to 1e-4)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("grad", [False, True], ids=["x", "x_requiring_grad"])
def test_calls_a_trace_serves_run_no_python_and_give_eager_s_gradients(grad):
    def program(lib):
        lin, runs = _linear(lib), []

        def f(x):
            runs.append(1)
            return (lin(x) * x.sum(1, keepdim=True)).sum()

        f = _compile(lib, f)
        x = lib.ones(2, 3, requires_grad=grad)
        losses = []
        for _ in range(5):
            loss = f(x)
            loss.backward()
            losses.append(_num(loss))
        grads = (lin.weight.grad, x.grad) if grad else (lin.weight.grad,)
        return losses, len(runs), f, [t.numpy().copy() for t in grads]

    (losses, runs, f, grads), (want_losses, want_runs, _, want_grads) = _both(program)
    assert losses == want_losses
    assert want_runs == 5
    assert runs == f.traces == 2  # the second call re-traces: the weight has a .grad now
    for a, b in zip(grads, want_grads):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def _keeps(lib, lin, x, log, store):
    y = lin(x)
    store(y)
    return y.sum().detach()


def _cubed_keeps(lib, lin, x, log, store):
    y = (_Cube if lib is staged else _TorchCube).apply(lin(x))
    store(y)
    return y.sum().detach()


def _stores(body, where, x_grad=False):
    """A program calling a compiled ``body`` 3 times, which stores ``lin(x)`` on a Module or
    in a list and returns it detached; after each call a backward through the stored
    tensor. Gives, per call, the stored tensor's flags and value and the gradients (the
    parameters' and ``x``'s), the body's Python runs, and the last stored tensor."""

    def program(lib):
        log, m, runs = [], lib.nn.Module(), []
        m.lin = _linear3x2(lib)

        def store(y):
            runs.append(1)
            if where == "module":
                m.last = y
            else:
                log.append(y)

        f = _compile(lib, lambda x: body(lib, m.lin, x, log, store))
        x = lib.ones(2, 3, requires_grad=x_grad)
        got = []
        for i in range(3):
            f(x * (i + 1) if x_grad else x + i)
            t = m.last if where == "module" else log[-1]
            got.append((t.requires_grad, t.is_leaf, _num(t.sum())))
            (t * t).sum().backward()  # through the parameters, grads accumulating
            grads = [m.lin.weight.grad, m.lin.bias.grad] + ([x.grad] if x_grad else [])
            got.append([g.numpy().round(4).tolist() for g in grads])
        return got, len(runs), t

    return program


@pytest.mark.parametrize("x_grad", [False, True], ids=["x", "x_requiring_grad"])
@pytest.mark.parametrize("where", ["module", "list"])
def test_a_stored_tensor_requiring_grad_gets_eager_s_graph(where, x_grad):
    """A body returning nothing that requires grad: what it stored gets eager's graph (the
    one-shot call runs as its trace, Note [first eager call]), a backward through it
    reaches the parameters (and the argument) call for call, and the Python runs once per
    call."""
    (got, runs, _), (want, want_runs, _) = _both(_stores(_keeps, where, x_grad))
    assert got == want
    assert runs == want_runs == 3


@pytest.mark.parametrize("where", ["module", "list"])
def test_a_stored_tensor_whose_graph_has_more_than_its_ops_says_it_has_no_graph(where):
    """A custom Function's backward is not in the trace's ops: the stored tensor requires
    grad as eager gives it, and a backward through it raises rather than skipping the
    parameters (eagerly it reaches them)."""
    program = _stores(_cubed_keeps, where)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program(torch)  # eagerly the backwards reach the parameters
        with pytest.raises(
            RuntimeError, match="stored outside itself, requires grad but carries no"
        ):
            program(staged)
