"""staged.profiler on compiled calls: the phases of a call (argument transfer, enqueue,
device execution, result transfer), record_function blocks of the traced function, the
table and the Chrome trace (Note [compiled calls] in staged/runtime/profiled.py)."""

import itertools
import json

import numpy as np
import pytest

import staged
from staged.profiler import profile, record_function
from staged.runtime import profiled

PHASES = ["argument transfer", "enqueue", "device execution", "result transfer"]


def _step():
    staged.manual_seed(0)
    net = staged.nn.Sequential(staged.nn.Linear(8, 16), staged.nn.ReLU(), staged.nn.Linear(16, 2))
    opt = staged.optim.SGD(net.parameters(), lr=0.1)

    def step(x, y):
        with record_function("model"):
            with record_function("first layer"):
                h = net[0](x)
            out = net[2](net[1](h))
        loss = staged.nn.functional.cross_entropy(out, y)
        with record_function("backward"):
            loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    return staged.compile(step), net


X = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
Y = np.array([0, 1, 0, 1])


@pytest.fixture(scope="module")
def prof():
    step, _ = _step()
    x, y = staged.tensor(X), staged.tensor(Y)
    step(x, y), step(x, y)  # traced (and the optimizer's state made) before the profile
    with profile() as p:
        p.losses = [step(x, y) for _ in range(3)]
    return p


def test_a_call_shows_its_phases_in_order_inside_it(prof):
    calls = [e for e in prof.events() if e.cat == "compiled"]
    assert [e.name for e in calls] == ["staged.compile [llvm-cpu]"] * 3
    for call in calls:
        phases = [c for c in call.children if c.cat == "compiled_phase"]
        assert [c.name for c in phases] == PHASES
        for a, b in itertools.pairwise(phases):
            assert a.end_us <= b.start_us
        assert all(call.start_us <= c.start_us <= c.end_us <= call.end_us for c in phases)
        transfer, enqueue, _, result = phases
        assert transfer.args == {"arrays": 2, "bytes": X.nbytes + Y.nbytes}
        assert enqueue.args == {"function": "main"} and result.args == {"bytes": 4}
    # the loss was read back inside the call: a NumPy payload, no device read left
    assert all(type(l._payload) is np.ndarray for l in prof.losses)


def test_record_function_blocks_show_with_their_op_counts(prof):
    device = next(e for e in prof.events() if e.name == "device execution")
    (model,) = [c for c in device.children if c.name.startswith("model ")]
    (first,) = model.children
    assert model.cat == first.cat == "compiled_range"
    assert first.name == f"first layer [compiled, {sum(first.args['ops'].values())} ops]"
    assert first.args["ops"] == {"forward": 5} and first.args["timed"] is False
    assert model.args["ops"]["forward"] > first.args["ops"]["forward"]
    (backward,) = [c for c in device.children if c.name.startswith("backward ")]
    assert set(backward.args["ops"]) == {"backward"}
    assert model.cpu_time_total == 0  # untimed: IREE fuses across blocks


def test_table_sorts_and_lists_the_phases(prof):
    table = prof.key_averages().table(sort_by="cpu_time_total")
    names = [r.strip() for r in table.splitlines()[3:-3]]
    assert names[0].startswith("staged.compile [llvm-cpu]")
    for phase in PHASES:
        assert any(n.startswith(phase) for n in names), (phase, table)
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["enqueue"].count == 3 and avg["staged.compile [llvm-cpu]"].count == 3


def test_chrome_trace_loads_with_the_phases_nested(prof, tmp_path):
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    names = {e["name"] for e in events}
    assert {"staged.compile [llvm-cpu]", *PHASES} <= names
    assert any(n.startswith("first layer [compiled,") for n in names)
    calls = [e for e in events if e["cat"] == "compiled"]
    for e in events:
        if e["cat"] in ("compiled_phase", "compiled_range"):  # inside one call
            assert (
                sum(
                    c["ts"] <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"] + 1e-3
                    for c in calls
                )
                == 1
            ), e
    # slices on one thread nest or are disjoint (Perfetto draws them as a stack)
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events)
    stack = []
    for start, end in spans:
        while stack and stack[-1] <= start + 1e-3:
            stack.pop()
        assert not stack or end <= stack[-1] + 1e-3, (start, end, stack)
        stack.append(end)
    transfer = next(e for e in events if e["name"] == "argument transfer")
    assert transfer["args"]["arrays"] == 2


def test_no_profile_costs_one_check(monkeypatch):
    step, _ = _step()
    x, y = staged.tensor(X), staged.tensor(Y)
    step(x, y)

    def fail(*a):
        raise AssertionError("profiled path taken with no profile open")

    monkeypatch.setattr(profiled, "run", fail)
    loss = step(x, y)  # the result stays on the device until read
    assert type(loss._payload) is not np.ndarray
    assert np.isfinite(loss.item())


def test_a_one_shot_first_call_under_the_profiler_runs_on_numpy():
    """Adam's first compiled call makes its state (one-shot: the NumPy interpreter runs it,
    Note [one-shot traces]); under the profiler it raised AttributeError (no device)."""
    staged.manual_seed(0)
    models = [staged.nn.Linear(3, 1) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    opts = [staged.optim.Adam(m.parameters(), lr=0.1) for m in models]

    def step(m, opt, x):
        opt.zero_grad()
        loss = m(x).sum()
        loss.backward()
        opt.step()
        return loss

    compiled = staged.compile(step)
    x = staged.ones(2, 3)
    with profile() as p:
        got = [compiled(models[0], opts[0], x).item() for _ in range(3)]
    want = [step(models[1], opts[1], x).item() for _ in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    calls = [e for e in p.events() if e.cat == "compiled"]
    assert len(calls) == 3 and all(
        [c.name for c in e.children if c.cat == "compiled_phase"][:2] == PHASES[:2] for e in calls
    )
