"""staged.compile(dynamic=True) gives the batch sizes it is called at twice a static module
of their own, compiled from the same trace at the second call (with mode="background": on
the background worker; Note [specialized batch sizes] in staged/runtime/specialized.py).
Eager mode is the oracle, call for call, as calls move between the dynamic and the static
modules; trace counts prove that nothing is traced again. Nothing is timed: ``drain()``
waits for the background worker where a test needs a module to have arrived."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staged
from models.common import classification_step
from staged import nn, optim
from staged.runtime import compiled as compiled_mod
from staged.runtime import specialized
from staged.runtime.background import drain
from staged.runtime.compiler import CompileError
from staged.tracing.dynamic import specialize

WAIT_S = 300  # a hang guard, not a timing: a cold compile on a loaded machine is slow


def _trainer(seed=0):
    staged.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    opt = optim.Adam(model.parameters(), lr=1e-2)
    return model, opt, classification_step(model, opt)


def _data(rng, n):
    return (
        staged.tensor(rng.standard_normal((n, 6)).astype(np.float32)),
        staged.tensor(rng.integers(0, 3, n)),
    )


def _state(model, opt) -> dict:
    """Every state-dict entry of the model and the optimizer, as arrays."""
    out = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    for i, s in opt.state_dict()["state"].items():
        for k, v in s.items():
            out[f"opt.{i}.{k}"] = v.detach().numpy() if isinstance(v, staged.Tensor) else v
    return out


@pytest.fixture
def traces(monkeypatch):
    """How many times ``fn`` has been traced (each retrace of staged.compile, the traces a
    dynamic step is generalized from, and the check of Note [batch size 1])."""
    count = [0]
    real = compiled_mod._trace

    def counted(*a, **kw):
        count[0] += 1
        return real(*a, **kw)

    monkeypatch.setattr(compiled_mod, "_trace", counted)
    return count


def _entry(step):
    entry = step._last
    assert entry.specialized is not None
    return entry


def test_alternating_batch_sizes_match_eager_and_keep_the_state(traces):
    model, opt, step = _trainer()
    ref_model, ref_opt, ref_step = _trainer()
    compiled = staged.compile(step, dynamic=True)
    rng = np.random.default_rng(0)
    for n in [8, 8, 5, 8, 5, 8, 5, 8, 1, 5, 1, 1, 8, 1, 5, 8, 5]:
        x, y = _data(rng, n)
        loss = compiled(x, y)
        np.testing.assert_allclose(loss.item(), ref_step(x, y).item(), rtol=1e-5, err_msg=n)
        got, want = _state(model, opt), _state(ref_model, ref_opt)
        assert got.keys() == want.keys()
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-7, err_msg=f"{k} at {n}")
    # call 1 made Adam's buffers (one-shot), call 2 the dynamic trace (at 8 and 9) and its
    # check at 1 (Note [batch size 1]), call 3 the check at 5 (Note [automatic dynamic]);
    # the static modules traced nothing
    assert compiled.traces == 2 and traces[0] == 1 + 2 + 1 + 1
    jobs = _entry(compiled).specialized.jobs
    assert list(jobs) == [8, 5, 1]  # in the order each size came back
    # each size's second call on the dynamic module compiled its static one and ran it
    assert [jobs[n].calls for n in (8, 5, 1)] == [5, 5, 3]
    assert all(j.error is None for j in jobs.values())
    text = compiled.explanation()
    assert (
        "static modules for batch sizes called 2 times (at most 4; the dynamic module ran" in text
    )
    assert "batch 8: loaded from the cache" in text or "batch 8: compiled in" in text
    assert "5 calls ran it" in text and "3 calls ran it" in text


def test_the_static_module_is_the_static_steps_own():
    """The same MLIR as a trace at that size, so the same cached module: a specialized
    size runs exactly what ``dynamic=False`` runs (and a warm cache has it at once)."""
    rng = np.random.default_rng(1)
    x, y = _data(rng, 12)
    static = staged.compile(_trainer()[2])
    dynamic = staged.compile(_trainer()[2], dynamic=True)
    plain = staged.compile(_trainer()[2], dynamic=True, specialize=False)
    for _ in range(3):
        a, b, c = static(x, y).item(), dynamic(x, y).item(), plain(x, y).item()
    np.testing.assert_allclose([b, c], [a, a], rtol=1e-5)
    job = _entry(dynamic).specialized.jobs[12]
    assert job.stats == {"cache": "hit", "key": static._last.cache["key"]}
    assert job.mlir == static._last.mlir
    assert "batch 12: loaded from the cache" in dynamic.explanation()
    assert plain._last.specialized is None
    assert "static modules for batch sizes: none (specialize=False)" in plain.explanation()


def test_no_retrace_across_batch_sizes_1_to_512_and_at_most_four_static_modules(traces):
    staged.manual_seed(3)
    lin = nn.Linear(5, 4)

    def predict(x):
        return (lin(x).relu() - x.mean(0, keepdim=True)[:, :4]).sum(1)

    compiled = staged.compile(predict, dynamic=True)
    rng = np.random.default_rng(2)
    with staged.no_grad():
        compiled(staged.randn(600, 5))  # a size the loops below do not call
        first = traces[0]
        for n in rng.permutation(np.arange(1, 513)):  # each size once: nothing compiles,
            # each size but 1 is checked by a trace (Python only; Note [automatic dynamic])
            x = staged.randn(int(n), 5)
            np.testing.assert_allclose(
                compiled(x).numpy(), predict(x).numpy(), rtol=1e-5, atol=1e-5
            )
        assert _entry(compiled).specialized.jobs == {}
        for n in (3, 300, 64, 2, 100, 5, 100):  # their second calls: the first four compile
            x = staged.randn(n, 5)
            np.testing.assert_allclose(
                compiled(x).numpy(), predict(x).numpy(), rtol=1e-5, atol=1e-5
            )
        for n in (3, 300, 64, 2, 100):
            x = staged.randn(n, 5)
            np.testing.assert_allclose(
                compiled(x).numpy(), predict(x).numpy(), rtol=1e-5, atol=1e-5
            )
    jobs = _entry(compiled).specialized.jobs
    assert list(jobs) == [3, 300, 64, 2] and all(j.calls == 2 for j in jobs.values())
    assert compiled.traces == 1
    # batch 1 was checked by the trace that made the batch dynamic (Note [batch size 1]),
    # 600 and 601 are the sizes that trace was made at
    assert traces[0] == first + 511


def test_specialize_gives_the_graph_a_trace_at_that_size_gives():
    """``dynamic.specialize`` puts a size into the generalized graph: shapes, shape
    parameters and the constants computed at run time (1/N, N - 1), as tracing at that
    size makes them (printed graphs hold every constant's value and dtype)."""

    def stats(x):
        m, v = x.mean(0), x.var(0)
        (g,) = staged.autograd.grad(v.sum() + (x - m).abs().mean(), x)
        return m, v, g

    compiled = staged.compile(stats, dynamic=True)
    compiled(staged.randn(6, 3).requires_grad_())
    general = compiled.graphs()[0]
    assert general.sym_consts  # fitted on traces at 6, 7 and 15
    for n in (2, 7, 33):
        at = staged.capture(stats, staged.randn(n, 3).requires_grad_()).graph
        assert str(specialize(general, {"batch": n})) == str(at)


def test_batch_size_0_gets_no_static_module_of_the_dynamic_trace():
    def stats(x):
        m, v = x.mean(0), x.var(0)  # 1/N and 1/(N - 1): constants of the static modules
        return m, v, (x - m).abs().sum(0)

    compiled = staged.compile(stats, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 0/0 at batch sizes 0 and 1
        for n in (6, 0, 0, 6, 41, 41, 0, 6, 41, 2, 2, 2, 0):
            x = staged.randn(n, 3)
            for a, b in zip(compiled(x), stats(x)):
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)
    # batch 0 has a trace of its own: its 0/0 constants differ from the dynamic graph's
    # at 0 (checked by a trace at each new size, Note [automatic dynamic])
    assert compiled.traces == 2
    (dynamic,) = [e for es in compiled._entries.values() for e in es if e.specialized]
    jobs = dynamic.specialized.jobs
    assert list(jobs) == [6, 41, 2] and [j.calls for j in jobs.values()] == [2, 2, 2]


def test_a_failed_static_compile_leaves_the_dynamic_module_serving(monkeypatch, tmp_path):
    monkeypatch.setenv("STAGED_CACHE_DIR", str(tmp_path))  # the static module is not cached

    def refuse(text, flags):
        raise CompileError("iree-compile: injected failure")

    monkeypatch.setattr(specialized, "compile_subprocess", refuse)
    model, opt, step = _trainer()
    ref_model, ref_opt, ref_step = _trainer()
    compiled = staged.compile(step, dynamic=True)
    rng = np.random.default_rng(4)
    for _ in range(6):
        x, y = _data(rng, 4)
        np.testing.assert_allclose(compiled(x, y).item(), ref_step(x, y).item(), rtol=1e-5)
    got, want = _state(model, opt), _state(ref_model, ref_opt)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-7, err_msg=k)
    spec = _entry(compiled).specialized
    job = spec.jobs[4]
    assert isinstance(job.error, CompileError) and job.calls == 0
    assert spec.dynamic_calls == 5  # every call after the one-shot first
    assert (
        "batch 4: its compile failed, so it runs the dynamic module: CompileError: "
        "iree-compile: injected failure" in " ".join(compiled.explanation().split())
    )


def test_background_mode_specializes_once_its_dynamic_module_is_loaded():
    model, opt, step = _trainer()
    ref_model, ref_opt, ref_step = _trainer()
    compiled = staged.compile(step, dynamic=True, mode="background")
    rng = np.random.default_rng(5)
    for n in (6, 6, "drain", 6, 6, "drain", 6, 3):
        if n == "drain":
            assert drain(WAIT_S)
            continue
        x, y = _data(rng, n)
        np.testing.assert_allclose(compiled(x, y).item(), ref_step(x, y).item(), rtol=1e-5)
    got, want = _state(model, opt), _state(ref_model, ref_opt)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-7, err_msg=k)
    # call 2 ran the graph on NumPy while the dynamic module compiled: it counts for no
    # size; calls 3 and 4 ran that module, the 4th started the static module at 6 (the
    # drains make which call runs where independent of how fast the compiles are)
    spec = _entry(compiled).specialized
    assert list(spec.jobs) == [6] and spec.jobs[6].calls == 1 and spec.dynamic_calls == 3


def test_static_and_dynamic_modules_share_one_timeline():
    """Note [one timeline]: a static module's call is queued on the dynamic module's
    timeline, so a failure there undoes it, as Note [failed steps] says of one module."""
    model, opt, step = _trainer()
    compiled = staged.compile(step, dynamic=True)
    rng = np.random.default_rng(6)
    for n in (8, 8, 8, 5):
        compiled(*_data(rng, n))
    entry = _entry(compiled)
    static = entry.specialized.jobs[8].module
    assert static.queue is entry.module and entry.module.queue is entry.module
    before = _state(model, opt)
    loss = compiled(*_data(rng, 8))  # on the static module, not read yet
    assert entry.specialized.jobs[8].calls == 2
    entry.module._timeline[0].fail("injected device failure")
    with pytest.raises(RuntimeError, match="injected device failure"):
        loss.item()
    after = _state(model, opt)
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)
