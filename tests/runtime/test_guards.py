"""Re-trace guards, the eager fallback, explain(), debug logging and the compile cache as
seen through staged.compile."""

from __future__ import annotations

import logging
import os
import random
import re
import time
import warnings

import numpy as np
import pytest
import torch

import staged
from staged import nn
from staged.lower.mlir import to_mlir
from staged.tracing.symbolic import CaptureError


def test_module_training_flag_and_parameter_identity_are_guarded():
    m = nn.Linear(3, 2)
    f = staged.compile(lambda x: m(x).sum().detach())  # a value: no backward outside
    x = staged.randn(4, 3)
    f(x)
    f(x)
    assert f.traces == 1
    m.eval()
    f(x)
    assert f.traces == 2 and f.last_retrace_reason == "Linear.training: True -> False"
    m.train()
    f(x)
    assert f.traces == 2  # the train-mode trace is reused
    m.weight = nn.Parameter(staged.ones(2, 3))
    np.testing.assert_allclose(
        f(x).item(), (x.numpy().sum(1) * 2).sum() + m.bias.detach().numpy().sum() * 4, rtol=1e-5
    )
    assert f.traces == 3
    assert re.fullmatch(
        r"Linear parameters/buffers: bias#(\d+), weight#(\d+) -> "
        r"bias#\1, weight#(\d+)",
        f.last_retrace_reason,
    )


def test_data_dependent_branch_raises_naming_the_line_or_falls_back_with_a_warning():
    def f(x):
        if x.sum() > 0:  # a Python branch on a value
            return x * 2
        return x

    x = staged.ones(3)
    with pytest.raises(CaptureError, match=r"test_guards\.py:\d+: this needs the data"):
        staged.compile(f)(x)
    g = staged.compile(f, fallback="eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out1, out2 = g(x), g(x)
    assert [str(w.message) for w in caught if "eagerly" in str(w.message)].__len__() == 1
    assert "cannot be captured" in str(caught[0].message)
    np.testing.assert_array_equal(out1.numpy(), [2, 2, 2])
    np.testing.assert_array_equal(out2.numpy(), [2, 2, 2])
    assert g.traces == 0
    with pytest.raises(ValueError, match="fallback must be None or 'eager'"):
        staged.compile(f, fallback="python")


def test_explain_shows_reason_graph_mlir_and_dispatch_count(capsys):
    w = staged.randn(3, 2, requires_grad=True)
    f = staged.compile(lambda x: (x @ w).relu().sum().detach())
    assert f.explain() is None  # printed, not returned: a REPL would show it twice
    assert "not called yet" in capsys.readouterr().out
    f(staged.randn(4, 3))
    text = f.explanation(verbose=True)
    assert "1. first call" in text
    assert "= matmul(" in text and "linalg.matmul" in text
    assert int(text.split("dispatches: ")[1].split()[0]) >= 1


def test_debug_logging_says_why_it_traced(caplog):
    f = staged.compile(lambda x: x * 3)
    with caplog.at_level(logging.INFO, logger="staged"):
        f(staged.randn(2))
        f(staged.randn(5))
    msgs = [r.getMessage() for r in caplog.records if r.name == "staged.compile"]
    assert any("first call" in m for m in msgs)
    assert any(m.endswith("x: shape (2,) -> (5,)") for m in msgs)


def test_a_damaged_cache_entry_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("STAGED_CACHE_DIR", str(tmp_path))
    x = staged.randn(6)
    first = staged.compile(lambda x: x.tanh() * 3)(x).numpy()
    (entry,) = [p for p in tmp_path.iterdir() if p.is_file()]
    entry.write_bytes(entry.read_bytes()[:100])  # truncated, as by a crash mid-write
    # an equal step on another line: the same cache entry (locations are not in the key)
    again = staged.compile(lambda x: x.tanh() * 3)(x).numpy()
    np.testing.assert_array_equal(first, again)
    assert entry.stat().st_size > 100


def _scheduled_run(ns, compiled):
    """SGD with momentum and Adam, each under a scheduler, with hyper-parameters also
    changed by hand; returns (losses, final weights, the step function)."""
    rng = np.random.RandomState(0)
    w1, w2 = (
        ns.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
        for s in [(3, 4), (4, 2)]
    )
    x, y = (ns.tensor(rng.standard_normal(s).astype(np.float32)) for s in [(8, 3), (8, 2)])
    sgd = ns.optim.SGD([w1], lr=0.1, momentum=0.9)
    adam = ns.optim.Adam([w2], lr=0.05)
    scheds = [
        ns.optim.lr_scheduler.StepLR(sgd, step_size=2, gamma=0.5),
        ns.optim.lr_scheduler.CosineAnnealingLR(adam, T_max=4),
    ]

    def step(x, y):
        sgd.zero_grad()
        adam.zero_grad()
        loss = (((x @ w1).tanh() @ w2 - y) ** 2).mean()
        loss.backward()
        sgd.step()
        adam.step()
        return loss

    f = staged.compile(step) if compiled else step
    losses = []
    for i in range(9):
        if i == 3:
            sgd.param_groups[0].update(momentum=0.5, dampening=0.2)
            adam.param_groups[0].update(betas=(0.8, 0.99), eps=1e-3)
        if i == 6:  # zero -> nonzero steers the update: a re-trace, with its reason
            sgd.param_groups[0]["weight_decay"] = 0.1
        losses.append(float(f(x, y).item()))
        for s in scheds:
            s.step()
    return losses, [w.detach().numpy() for w in (w1, w2)], f


def test_hyper_parameters_and_schedulers_take_effect_without_a_re_trace():
    ours, weights, f = _scheduled_run(staged, compiled=True)
    eager, eager_weights, _ = _scheduled_run(staged, compiled=False)
    theirs, torch_weights, _ = _scheduled_run(torch, compiled=False)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    np.testing.assert_allclose(ours, eager, rtol=1e-5)
    for a, b, c in zip(weights, eager_weights, torch_weights):
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the first call makes the optimizers' state (one-shot), the second serves calls 2-6
    assert f.traces == 3
    assert f.last_retrace_reason == "SGD.param_groups[0]['weight_decay']: 0 -> 0.1"


W = staged.tensor([1.0, 2.0, 3.0])
SCALE = 1.0


def _reads_globals(x):
    return (x * W).sum() * SCALE


_model = nn.Linear(3, 1)
_opt = staged.optim.SGD(_model.parameters(), lr=0.1)
step = 0  # a training loop's counter, named as the optimizer's method


def _sgd_step(x):
    _opt.zero_grad()
    loss = _model(x).sum()
    loss.backward()
    _opt.step()
    return loss


def test_a_global_named_as_an_attribute_the_step_reads_is_not_guarded():
    """``for step in range(n): train(x)`` with ``opt.step()`` inside: the global ``step``
    is not read by the step, so it must not re-trace at every iteration."""
    global step
    f = staged.compile(_sgd_step)
    x = staged.ones(2, 3)
    for _step in range(5):
        f(x)
    assert f.traces == 2, f.last_retrace_reason  # the first call creates the .grad buffers


def test_rebound_globals_and_closures_re_trace_instead_of_running_stale_values():
    global W, SCALE
    f = staged.compile(_reads_globals)
    x = staged.ones(3)
    assert f(x).item() == 6.0
    old = W
    W = staged.tensor([10.0, 10.0, 10.0])
    assert f(x).item() == 30.0 == _reads_globals(x).item()  # was 6.0: the old tensor
    assert f.last_retrace_reason == (
        f"W: tensor#{old._serial} float32[3] -> tensor#{W._serial} float32[3]"
    )
    SCALE = 0.5
    assert f(x).item() == 15.0 and f.last_retrace_reason == "SCALE: 1.0 -> 0.5"
    W, SCALE = old, 1.0
    assert f(x).item() == 6.0 and f.traces == 3  # the first trace serves again
    W = staged.tensor([1.0, 2.0])  # another shape: a new trace, no shape error
    assert f(x[:2]).item() == 3.0

    v = staged.tensor([1.0, 1.0])

    def g(x):
        return (x * v).sum()

    cg = staged.compile(g)
    assert cg(x[:2]).item() == 2.0
    v = staged.tensor([4.0, 5.0])  # rebinds the closure cell g reads
    assert cg(x[:2]).item() == 9.0 and cg.last_retrace_reason.startswith("v: tensor#")


class _Policy:
    """REINFORCE's shape (PyTorch's reinforcement_learning example): log-probabilities
    saved in a list by eager code, the update reading and emptying that list."""

    def __init__(self, lib):
        lib.manual_seed(0)
        self.lib, self.net = lib, lib.nn.Linear(3, 2)
        self.opt = lib.optim.SGD(self.net.parameters(), lr=0.1)
        self.saved_log_probs: list = []

    def act(self, x):
        self.saved_log_probs.append(self.lib.log_softmax(self.net(x), 0)[0])

    def finish(self):
        self.opt.zero_grad()
        loss = -self.lib.stack(self.saved_log_probs).sum()
        loss.backward()
        self.opt.step()
        del self.saved_log_probs[:]
        return loss


def test_a_list_of_tensors_changed_in_place_re_traces():
    """A list a step reads is changed in place, never rebound: its items are guarded (as
    they were before the trace, which emptied it). Reused, the trace replayed the first
    episode's graph at every call, silently."""
    pols = {lib: _Policy(lib) for lib in (staged, torch)}
    rng = np.random.default_rng(0)
    step = staged.compile(pols[staged].finish)
    for n in (3, 2, 2, 4):
        xs = rng.standard_normal((n, 3)).astype(np.float32)
        for lib, pol in pols.items():
            for x in xs:
                pol.act(lib.tensor(x))
        got, want = step().item(), pols[torch].finish().item()
        assert got == pytest.approx(want, rel=1e-5)
    assert step.last_retrace_reason.startswith("self.saved_log_probs: [tensor#")
    assert "(2 items) -> [" in step.last_retrace_reason and "(4 items)" in step.last_retrace_reason
    np.testing.assert_allclose(
        pols[staged].net.weight.detach().numpy(), pols[torch].net.weight.detach().numpy(), rtol=1e-5
    )


def test_re_trace_reasons_name_the_argument_and_the_change():
    def step(x, scale, *, flag):
        return x * scale if flag else x

    f = staged.compile(step)
    x = staged.randn(32, 784)
    f(x, 0.1, flag=True)
    assert f.last_retrace_reason == "first call"
    f(staged.randn(33, 784), 0.1, flag=True)
    assert f.last_retrace_reason == "x: shape (32, 784) -> (33, 784)"
    f(staged.randn(33, 784), 0.05, flag=True)
    assert f.last_retrace_reason == "scale: 0.1 -> 0.05"
    f(staged.randn(33, 784, dtype=staged.float64), 0.05, flag=False)
    assert f.last_retrace_reason == "x: dtype float32 -> float64; flag: True -> False"
    with staged.no_grad():
        f(staged.randn(33, 784, dtype=staged.float64), 0.05, flag=False)
    assert f.last_retrace_reason == "grad mode: enabled -> disabled"
    f(staged.randn(33, 784, requires_grad=True), 0.05, flag=False)
    assert f.last_retrace_reason == (
        "x: dtype float64 -> float32; x: requires_grad False -> "
        "True; grad mode: disabled -> enabled"
    )
    assert "x: dtype float64 -> float32; x: requires_grad" in f.explanation()


def test_past_the_recompile_limit_calls_no_trace_serves_run_eagerly(caplog):
    """Note [the recompile limit]: as torch's, after 8 re-traces a call that needs another
    runs eagerly (one warning naming why), and the traces keep serving their calls."""
    f = staged.compile(lambda x: x * 2, dynamic=False)  # a trace per size
    with (
        warnings.catch_warnings(record=True) as caught,
        caplog.at_level(logging.INFO, logger="staged"),
    ):
        warnings.simplefilter("always")
        for n in [*range(1, 13), 3, 12]:
            assert f(staged.ones(n)).tolist() == [2.0] * n
    msgs = [str(w.message) for w in caught if "recompile limit" in str(w.message)]
    assert msgs == [
        f"staged.compile: {f.__qualname__} would be re-traced and compiled for the 9th time "
        "(more than 8, the recompile limit: torch._dynamo.config.recompile_limit), this time "
        "because x: shape (9,) -> (10,); as torch's, calls its traces do not serve run "
        "eagerly from now on. Pass values that change between calls as tensors, keep the "
        "sizes of dims other than the batch (dim 0, dynamic by itself) fixed (pad them), or "
        "raise the limit"
    ]
    assert caught[0].filename == __file__
    assert sum("tracing" in r.getMessage() for r in caplog.records) == f.traces == 9
    assert "calls 10-12: eager (the recompile limit)" in f.explanation()
    assert "call 13: compiled (trace 3)" in f.explanation()


def test_storing_a_new_tensor_at_every_call_warns_at_the_second_naming_the_line():
    """losses.append(loss) in the body stores new state at each call: every call re-traces,
    which the 2nd call says (not the 9th); a first optimizer step's buffers, made once,
    do not warn."""
    model = nn.Linear(3, 1)
    opt = staged.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []

    def step(x):
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        return loss

    def logging_step(x):
        loss = model(x).sum().detach()
        losses.append(loss)
        return loss

    line = logging_step.__code__.co_firstlineno + 1
    here = os.path.relpath(__file__)  # ops name their lines relative to the cwd
    x = staged.ones(2, 3)
    for fn, calls in ((step, 4), (logging_step, 3)):
        f = staged.compile(fn)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(calls):
                f(x)
        got = [str(w.message) for w in caught]
        if fn is step:
            assert got == [] and f.traces == 2  # the momentum buffers' one-shot trace, then one
        else:
            assert got == [
                "staged.compile: test_storing_a_new_tensor_at_every_call_warns_at_the_second_"
                f"naming_the_line.<locals>.logging_step stored new tensors made at {here}:"
                f"{line} outside itself at two calls in a row (appended them to a list, "
                "stored them in a dict, or bound them to a global, an attribute or a buffer): "
                "a call that makes new state is "
                "traced again, so every call re-traces. Update state in place "
                "(self.ema.mul_(0.5).add_(x)), return the tensor from the function, or store "
                "it outside the compiled function"
            ]
            assert caught[0].filename == __file__ and f.traces == 3 and len(losses) == 3
            np.testing.assert_allclose([t.item() for t in losses], [model(x).sum().item()] * 3)


def test_random_draws_and_clock_reads_while_tracing_warn_once_naming_the_line():
    def dynamic_net(x):  # as PyTorch's dynamic_net tutorial: a random depth
        for _ in range(random.randint(0, 3)):
            x = x.tanh()
        noise = np.random.rand()
        started = time.perf_counter()
        return x * noise + staged.randn(*x.shape) * 0 + started * 0

    lines = {
        name: dynamic_net.__code__.co_firstlineno + k
        for k, name in [(1, "random.randint"), (3, "numpy.random.rand"), (4, "time.perf_counter")]
    }
    f = staged.compile(dynamic_net)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f(staged.ones(3))
        f(staged.ones(4))  # traced again: the same sites are not reported twice
        random.random(), time.time()  # outside a trace: silent
    got = {str(w.message).split(": ")[1].split("()")[0]: w for w in caught}
    assert len(caught) == 3 and set(got) == set(lines)  # staged.randn is drawn at every call
    for name, w in got.items():
        assert (w.filename, w.lineno) == (__file__, lines[name])
        assert str(w.message).startswith(f"{os.path.relpath(__file__)}:{lines[name]}: ")
        assert "is frozen into the compiled step and every call reuses it" in str(w.message)
    assert not any(hasattr(f, "__wrapped__") for f in (random.randint, np.random.rand, time.time))


def test_rand_and_randn_in_a_compiled_step_draw_anew_at_every_call():
    """Note [draws in traced steps]: the VAE's ``eps = torch.randn_like(std)`` was frozen
    at trace time; it is now drawn on the host at every call (Note [host draws]), new per
    call, reproducible after ``manual_seed``, with the right distribution (torch's values:
    tests/runtime/test_compiled_rng.py)."""

    def noise(x):
        return staged.randn(20000) + x, staged.rand_like(staged.zeros(20000)) + x

    f = staged.compile(noise)
    staged.manual_seed(5)
    (n1, u1), (n2, u2) = [tuple(t.numpy() for t in f(staged.tensor(0.0))) for _ in range(2)]
    assert not np.array_equal(n1, n2) and not np.array_equal(u1, u2)
    k = 5 / np.sqrt(n1.size)  # five standard errors
    assert abs(n1.mean()) < k and abs(n1.std() - 1) < 2 * k
    assert abs((abs(n1) > 1).mean() - 0.3173) < k  # P(|z| > 1) of a standard normal
    assert abs(u1.mean() - 0.5) < k * 0.29 and 0 <= u1.min() and u1.max() < 1
    staged.manual_seed(5)
    np.testing.assert_array_equal(f(staged.tensor(0.0))[0].numpy(), n1)


def test_a_re_trace_that_touches_state_in_another_order_is_served_by_the_cache(caplog):
    """The first call finds .grad None and backward writes the gradients in its own order;
    the second re-traces (the .grad are set now) and zero_grad() writes them in parameter
    order first. The outputs follow the tensors' creation order, so both traces lower to
    one module, which a cache serves to either (an LSTM language model's step took 12 s
    more). The first, which gave the .grad, runs on NumPy (Note [deferred compiles]): the
    second call's compile is the only one."""
    staged.manual_seed(0)
    a, b = nn.Linear(3, 4), nn.Linear(4, 2)  # a's tensors are older, and used first
    opt = staged.optim.SGD([*b.parameters(), *a.parameters()], lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = b(a(x).tanh()).square().mean()
        loss.backward()
        opt.step()
        return loss

    c = staged.compile(step)
    x = staged.randn(5, 3)
    with caplog.at_level(logging.DEBUG, logger="staged"):
        losses = [c(x).item() for _ in range(3)]
    first, second = c.graphs()
    assert [o.name for o in first.outputs] == [o.name for o in second.outputs]
    assert to_mlir(first) == to_mlir(second)
    modules = [m for r in caplog.records if (m := r.getMessage()).startswith("IREE module")]
    assert len(modules) == 1, modules
    staged.manual_seed(0)
    a2, b2 = nn.Linear(3, 4), nn.Linear(4, 2)
    opt2 = staged.optim.SGD([*b2.parameters(), *a2.parameters()], lr=0.1)
    for want in losses:
        opt2.zero_grad()
        loss = b2(a2(x).tanh()).square().mean()
        loss.backward()
        opt2.step()
        assert loss.item() == pytest.approx(want, rel=1e-5)


OPTIMIZER_STATE_CHANGES = {
    "state.clear()": lambda opt, sd: opt.state.clear(),
    "load_state_dict": lambda opt, sd: opt.load_state_dict(sd),
    "a new momentum buffer": lambda opt, sd: [
        s.__setitem__("momentum_buffer", s["momentum_buffer"] * 0) for s in opt.state.values()
    ],
}


@pytest.mark.parametrize("change", OPTIMIZER_STATE_CHANGES)
def test_a_changed_optimizer_state_re_traces(change):
    """The compiled step binds the tensors it found in ``opt.state``: after the user
    replaced them, it went on updating the old ones (the losses of an untouched run; the
    optimizer's own state dict left behind). Now the step re-traces, as eager reads them."""

    def run(compiled):
        staged.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
        opt = staged.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            return loss

        fn = staged.compile(step) if compiled else step
        x, y = staged.randn(8, 4), staged.randn(8, 2)
        losses = [fn(x, y).item() for _ in range(2)]
        sd = opt.state_dict()
        losses.append(fn(x, y).item())
        OPTIMIZER_STATE_CHANGES[change](opt, sd)
        losses += [fn(x, y).item() for _ in range(3)]
        bufs = [s["momentum_buffer"].numpy().copy() for s in opt.state.values()]
        return losses, bufs, fn

    (eager, eager_bufs, _), (got, bufs, fn) = run(False), run(True)
    np.testing.assert_allclose(got, eager, rtol=1e-5)
    for a, b in zip(bufs, eager_bufs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    reasons = [str(h["reason"]) for h in fn.history]
    # cleared, it is the first call's (one-shot) trace again; a loaded state dict is
    # copied into the buffers the step holds
    if change == "a new momentum buffer":
        assert "optimizer state: as traced -> entries added, removed or replaced" in reasons
