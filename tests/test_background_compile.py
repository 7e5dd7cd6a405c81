"""staged.compile(mode="background"): calls run eagerly (the traced graph on NumPy) while
IREE compiles, then compiled, with the results and state of a fully compiled run and of
an eager one (Note [background compiles]). Nothing here is timed: a gate holds the
worker's compile until the test lets it go, so which calls run where is fixed."""

from __future__ import annotations

import copy
import threading
import warnings

import numpy as np
import pytest

import staged
import staged.nn.functional as F
from staged import nn, optim
from staged.runtime import compiled as compiled_mod
from staged.runtime.compiler import CompileError

WAIT_S = 300  # a hang guard, not a timing: a cold compile on a loaded machine is slow


def _model(seed=0):
    staged.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def _data(n=5, seed=1):
    rng = np.random.default_rng(seed)
    return (
        staged.tensor(rng.standard_normal((n, 6)).astype(np.float32)),
        staged.tensor(rng.integers(0, 3, n)),
    )


def _trainer(model, make_opt):
    opt = make_opt(model.parameters())
    hooked = []  # Python effects of a hook: once per trace when compiled, as when traced
    model[0].weight.register_hook(lambda g: hooked.append(1) or g * 0.5)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step, opt, hooked


OPTIMIZERS = {
    "sgd": lambda ps: optim.SGD(ps, lr=0.1),
    "momentum": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda ps: optim.Adam(ps, lr=1e-2),
}


def _wait(step):
    """Wait for the compile of the trace that served last, where it was started (not one
    deferred to its second call: Note [deferred compiles])."""
    bg = step._last.background
    assert bg.status.state == "deferred" or bg.done.wait(WAIT_S)


def _run(make_opt, mode, n, gate=None, release_after=None):
    model = _model()
    step, opt, hooked = _trainer(model, make_opt)
    if mode == "eager":
        run = step
    else:
        run = staged.compile(step, mode=mode)
    x, y = _data()
    losses = []
    for k in range(n):
        if gate is not None and k == release_after:
            gate.set()
            _wait(run)
        losses.append(float(run(x, y)))
    return model, opt, losses, run, hooked


def _params(model):
    return [p.detach().numpy() for p in model.parameters()]


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_first_calls_eager_then_compiled_equal_compiled_and_eager(name, gate):
    n = 8
    bg_model, bg_opt, bg_losses, bg, bg_hooked = _run(
        OPTIMIZERS[name], "background", n, gate, release_after=4
    )
    cm, _c_opt, c_losses, comp, c_hooked = _run(OPTIMIZERS[name], "blocking", n)
    em, e_opt, e_losses, _, _ = _run(OPTIMIZERS[name], "eager", n)
    np.testing.assert_allclose(bg_losses, c_losses, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bg_losses, e_losses, rtol=1e-5, atol=1e-6)
    for a, b, c in zip(_params(bg_model), _params(cm), _params(em)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)
    for p, q in zip(bg_model.parameters(), em.parameters()):  # optimizer state too
        for k, v in e_opt.state[q].items():
            got = bg_opt.state[p][k]
            np.testing.assert_allclose(
                np.asarray(got.detach().numpy() if hasattr(got, "numpy") else got),
                np.asarray(v.detach().numpy() if hasattr(v, "numpy") else v),
                rtol=1e-5,
                atol=1e-6,
            )
    # the hook's Python effect: at the untraced first call, then once per trace
    assert len(bg_hooked) == 1 + bg.traces and len(c_hooked) == comp.traces
    runs = [(where, first, last) for where, _, first, last in bg.calls.runs]
    assert runs[0] == (compiled_mod.UNTRACED, 1, 1) and runs[-1] == ("compiled", 5, n)
    eager = [r for r in runs if r[0] != "compiled"]
    assert eager[-1][2] == 4
    text = bg.explanation()
    assert "calls 5-8: compiled" in text and "compiled in the background" in text


def test_the_untraced_first_call_makes_the_state_the_trace_compiles(gate):
    """Momentum's first step makes its buffers: the untraced first call makes them, so the
    trace at the second call is not one-shot (it was, traced at the first: Note [untraced
    first call]) and starts the compile."""
    _, _, _, bg, _ = _run(OPTIMIZERS["momentum"], "background", 2, gate)
    (first,) = bg.history
    assert first["background"].state == "compiling" and first["reason"].startswith("first trace")
    assert [r[0] for r in bg.calls.runs] == [
        compiled_mod.UNTRACED,
        "eager while compiling in the background",
    ]
    assert "call 1: eager, untraced (background mode's first call)" in bg.explanation()


def test_one_shot_trace_is_not_compiled(gate):
    """A trace that makes state (momentum's buffers, after the optimizer's state was
    reset) serves one call, eagerly."""
    model = _model()
    step, opt, _ = _trainer(model, OPTIMIZERS["momentum"])
    bg = staged.compile(step, mode="background")
    x, y = _data()
    bg(x, y)
    bg(x, y)
    opt.state.clear()  # momentum restarts: the next step makes its buffers again
    bg(x, y)
    assert [h["background"].state for h in bg.history][-1] == "eager"
    assert bg.calls.runs[-1][0] == "eager: a one-shot trace, not compiled"


def test_failed_background_compile_runs_eagerly_warns_once(monkeypatch):
    def broken(*a, **k):
        raise CompileError("IREE compilation failed: forced for the test")

    monkeypatch.setattr(compiled_mod, "compile_mlir", broken)
    model = _model()
    ref = copy.deepcopy(model)
    step, _, _ = _trainer(model, OPTIMIZERS["sgd"])
    ref_step, _, _ = _trainer(ref, OPTIMIZERS["sgd"])
    bg = staged.compile(step, mode="background")
    x, y = _data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [float(bg(x, y)) for _ in range(2)]  # call 1 runs untraced
        _wait(bg)
        losses += [float(bg(x, y)) for _ in range(2)]
        x2, y2 = _data(n=7)  # a new shape: traced again, its compile fails too
        losses.append(float(bg(x2, y2)))
        _wait(bg)
        losses.append(float(bg(x2, y2)))
    ref_losses = [float(ref_step(x, y)) for _ in range(4)] + [
        float(ref_step(x2, y2)) for _ in range(2)
    ]
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-6)
    for a, b in zip(_params(model), _params(ref)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    ours = [w for w in caught if "background compile" in str(w.message)]
    assert len(ours) == 1 and "forced for the test" in str(ours[0].message)
    assert issubclass(ours[0].category, RuntimeWarning)
    assert bg.traces == 2  # call 2 (call 1 ran untraced); a new shape
    text = bg.explanation()
    assert "the background compile failed" in text and "forced for the test" in text
    assert "eager: its background compile failed" in text


def test_guards_retrace_in_background(gate):
    model = _model()
    ref = copy.deepcopy(model)

    def make(m):
        return _trainer(m, lambda ps: optim.SGD(ps, lr=0.1))[0]

    bg = staged.compile(make(model), mode="background")
    eager = make(ref)
    x, y = _data()
    x2, y2 = _data(n=9, seed=2)
    got, want = [], []
    for args in [(x, y), (x, y), (x2, y2), (x, y), (x2, y2)]:
        got.append(float(bg(*args)))
        want.append(float(eager(*args)))
    # traces: call 2 (call 1 ran untraced), a new shape (call 3)
    assert bg.traces == 2 and "shape" in bg.last_retrace_reason
    model.train(False)  # a guard the trace read: the next call traces again
    ref.train(False)
    got.append(float(bg(x, y)))
    want.append(float(eager(x, y)))
    assert bg.traces == 3
    gate.set()
    for entry in [e for es in bg._entries.values() for e in es]:  # call 1's is deferred
        assert entry.background.status.state == "deferred" or entry.background.done.wait(WAIT_S)
    for _ in range(2):
        got.append(float(bg(x, y)))
        want.append(float(eager(x, y)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for a, b in zip(_params(model), _params(ref)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert bg.calls.runs[-1] == ["compiled", 3, 7, 8]


def test_dynamic_batch_other_sizes_wait_for_the_module(gate):
    model = _model()
    ref = copy.deepcopy(model)
    step, _, _ = _trainer(model, OPTIMIZERS["sgd"])
    ref_step, _, _ = _trainer(ref, OPTIMIZERS["sgd"])
    bg = staged.compile(step, mode="background", dynamic=True)
    data = [_data(n=5), _data(n=5, seed=3), _data(n=11, seed=4), _data(n=5)]
    got = [float(bg(*data[0])), float(bg(*data[1]))]  # the traced size: eager
    assert all(r[0].startswith("eager") for r in bg.calls.runs)
    threading.Timer(0.1, gate.set).start()  # the call at 11 waits for the compile
    got += [float(bg(*d)) for d in data[2:]]
    want = [float(ref_step(*d)) for d in data]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # call 1 runs untraced; one trace (call 2) serves calls 2, 3 and 4 (dynamic)
    assert bg.traces == 1 and bg.calls.runs[-1] == ["compiled", 1, 3, 4]


def test_index_check_raises_at_the_eager_call_and_keeps_state(gate):
    emb = nn.Embedding(4, 3)
    opt = optim.SGD(emb.parameters(), lr=0.1)

    def step(i):
        opt.zero_grad()
        loss = emb(i).sum()
        loss.backward()
        opt.step()
        return loss

    bg = staged.compile(step, mode="background")
    bg(staged.tensor([0, 1]))
    before = emb.weight.detach().numpy().copy()
    with pytest.raises(IndexError):
        bg(staged.tensor([0, 7]))
    np.testing.assert_array_equal(emb.weight.detach().numpy(), before)


def test_results_do_not_alias_state_or_arguments(gate):
    """The interpreter's results are arrays of their own, as a module's are: a view of an
    argument (a value of the call's) is not written by a write to the argument; a view of
    a state tensor returned is a view of that tensor, as eagerly (Note [returned state]):
    ``w.reshape(3)`` of a 3-vector is a view of ``w``, not ``w``, as torch's."""
    w = staged.ones(3)

    def step(x):
        return x.reshape(1, 3), w.reshape(3) * 2, w.reshape(3)

    bg = staged.compile(step, mode="background")
    x = staged.zeros(3)
    a, b, c = bg(x)
    a.add_(1.0)
    b.add_(1.0)
    assert float(x.sum()) == 0.0 and float(w.sum()) == 3.0
    assert c is not w and c._base is w
    with staged.no_grad():
        w.add_(1.0)
    assert c.tolist() == [2.0, 2.0, 2.0]


def test_mode_is_checked():
    with pytest.raises(ValueError, match="mode"):
        staged.compile(lambda x: x, mode="later")
