"""``.item()`` inside a compiled step (Note [traced items] in staged/tracing/scalars.py),
and data reads of tensors from before the trace (Note [data reads]): the numbers each call
returns are eager's (and torch's), what needs a number while tracing raises naming both
lines, and nothing is kept stale."""

import math
import warnings

import numpy as np
import pytest
import torch

import staged
from staged.onnx import ExportError
from staged.tracing.symbolic import CaptureError


def _training(lib):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 3))
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        out = model(x)
        loss = lib.nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        correct = (out.argmax(1) == y).sum()
        return {
            "loss": loss.item(),
            "total": loss.item() * x.size(0),  # as `running_loss += loss.item() * n` logs
            "acc": round(100 * correct.item() / x.size(0), 2),
            "correct": correct.item(),
            "sum": sum(p.sum().item() for p in model.parameters()),
        }

    return step


def _batches(n=4):
    rng = np.random.default_rng(3)
    return [
        (rng.standard_normal((6, 4)).astype(np.float32), rng.integers(0, 3, 6)) for _ in range(n)
    ]


@pytest.mark.parametrize("mode", ["blocking", "background"])
def test_a_step_returning_items_gives_torchs_numbers_at_every_call(mode):
    ours = staged.compile(_training(staged), mode=mode)
    theirs = _training(torch)
    for x, y in _batches():
        got = ours(staged.tensor(x), staged.tensor(y))
        want = theirs(torch.tensor(x), torch.tensor(y))
        assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in want.items()}
        assert got["correct"] == want["correct"] and type(got["correct"]) is int
        for k in ("loss", "total", "sum"):
            assert got[k] == pytest.approx(want[k], rel=1e-5, abs=1e-5), k
        assert got["acc"] == want["acc"]  # rounded: equal unless a count differs
    # the first call makes the momentum buffers (a one-shot trace; background: untraced)
    assert ours.traces == {"blocking": 2, "background": 1}[mode]


def test_an_item_is_the_value_at_the_read_not_after_later_writes():
    def f(x):
        s = x.sum()
        before = s.item()
        s.mul_(10)
        return before, s.item(), -before, abs(-before) ** 2, before // 1, math.floor(before)

    step = staged.compile(f)
    for v in (np.array([1.5, 2.25]), np.array([-3.5, 0.75])):
        want = f(staged.tensor(v, dtype=staged.float32))
        got = step(staged.tensor(v, dtype=staged.float32))
        assert got == want
        assert [type(a) for a in got] == [type(b) for b in want]


def test_items_of_ints_and_bools_are_ints_and_bools():
    step = staged.compile(lambda x: ((x > 0).any().item(), x.argmax().item(), x.sum().item()))
    x = staged.tensor([1.0, -2.0, 3.0])
    got = step(x)
    assert got == (True, 2, 2.0) and [type(v) for v in got] == [bool, int, float]
    got = step(staged.tensor([-1.0, -2.0, -3.0]))
    assert got == (False, 0, -6.0)


@pytest.mark.parametrize(
    "use, what",
    [
        (lambda v, x: x * 2 if v > 0 else x, r"comparing it \(>\)"),
        (lambda v, x: x * v, r"a tensor op \(mul\)"),
        (lambda v, x: x + float(v), r"float\(\)"),
        (lambda v, x: (print(f"{v:.3f}"), x)[1], "formatting it"),
        (lambda v, x: x[: int(v)], r"int\(\)"),
        (lambda v, x: x if v == 1 else -x, r"comparing it \(==\)"),
        (lambda v, x: staged.tensor(v) + x, r"NumPy \(or a tensor op\)"),
    ],
)
def test_what_needs_the_number_while_tracing_raises_naming_both_lines(use, what):
    def f(x):
        v = x.sum().item()
        return use(v, x)

    with pytest.raises(
        CaptureError,
        match=rf"test_traced_items.py:\d+: {what} needs the number read by \.item\(\) at .*test_traced_items.py:\d+",
    ):
        staged.compile(f)(staged.ones(3))


def test_an_item_stored_outside_the_results_raises_and_changes_nothing():
    log, box = [], type("Box", (), {})()
    box.last = 0.0

    def appends(x):
        loss = (x * 2).sum()
        log.append(loss.item())
        return loss

    def sets(x):
        loss = (x * 2).sum()
        box.last = loss.item()
        return loss

    for f in (appends, sets):
        with pytest.raises(CaptureError, match=r"stored outside the compiled step's results"):
            staged.compile(f)(staged.ones(3))
    assert log == [] and box.last == 0.0
    with pytest.warns(UserWarning, match="running .*appends eagerly"):  # eager's numbers then
        assert staged.compile(appends, fallback="eager")(staged.ones(3)).item() == 6.0
    assert log == [6.0]


def test_an_item_kept_by_other_code_says_it_never_has_a_value():
    kept = {}

    def f(x):
        kept["v"] = x.sum().item()  # a new key: not one the walk before the trace saw
        return x

    with pytest.raises(CaptureError, match="stored outside"):
        staged.capture(f, staged.ones(2))
    with pytest.raises(CaptureError, match="kept outside the step's results: it never has"):
        kept["v"] + 1


def test_saved_step_returns_the_numbers():
    def f(x):
        s = (x * x).sum()
        return s, s.item() / 2

    step = staged.compile(f)
    step(staged.ones(3))
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        step.save(d)
        loaded = staged.runtime.load(d)
        s, half = loaded(np.full(3, 2.0, np.float32))
        assert s.item() == 12.0 and half == 6.0 and type(half) is float


def test_dynamic_batch_step_returns_items():
    step = staged.compile(lambda x: (x.sum().item(), x.mean().item() * 2), dynamic=True)
    for n in (3, 4, 5, 4):
        x = staged.arange(float(n))
        assert step(x) == pytest.approx((x.sum().item(), x.mean().item() * 2))
    assert step.traces == 1
    sized = staged.compile(lambda x: x.mean().item() * x.size(0), dynamic=True)
    with pytest.raises(staged.tracing.dynamic.DynamicError, match=r"\.item\(\) expression"):
        sized(staged.ones(3))


def test_onnx_export_of_an_item_says_to_return_the_tensor(tmp_path):
    with pytest.raises(ExportError, match="loss, not loss.item()"):
        staged.onnx.export(
            lambda x: x.sum().item(), (staged.ones(2),), tmp_path / "m.onnx", with_gradients=False
        )


def test_data_read_of_a_tensor_from_before_the_trace_follows_its_changes():
    """``counter.item()`` read a tensor that no op of the trace read: its number was
    frozen at the trace while the step incremented it (eager: 0, 1, 2)."""
    counter = staged.zeros(())

    def f(x):
        n = counter.item()
        counter.add_(1)
        return x * n

    step = staged.compile(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [step(staged.ones(2)).tolist() for _ in range(6)]
    assert got == [[float(i)] * 2 for i in range(6)]
    assert counter.item() == 6.0
    assert any("eagerly from now on" in str(w.message) for w in caught)


def test_data_read_of_a_constant_tensor_is_traced_once_and_retraced_when_it_changes():
    scale = staged.tensor([2.0, 3.0])

    def f(x):
        a, b = scale.tolist()  # Python numbers: constants of the graph
        return x * a + b

    step = staged.compile(f)
    assert step(staged.ones(1)).item() == 5.0
    assert step(staged.ones(1)).item() == 5.0
    assert step.traces == 1
    with staged.no_grad():
        scale.mul_(2)
    assert step(staged.ones(1)).item() == 10.0
    assert step.traces == 2 and "the data of tensor" in step.last_retrace_reason


def _logged_training(lib, log, compile_step):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(3, 5), lib.nn.ReLU(), lib.nn.Linear(5, 1))
    opt = lib.optim.SGD(model.parameters(), lr=0.1)

    @lib.compiler.disable
    def log_stats(name, t, extra=None):  # a graph break in torch; after the graph here
        log.append((name, t.detach().abs().mean().item(), extra))

    def step(x, y):
        h = model[0](x)
        log_stats("h", h, extra=h.sum().item())
        loss = lib.nn.functional.mse_loss(model[2](model[1](h)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log_stats("w", model[0].weight)  # after the update, as eager sees it
        return loss

    return compile_step(step)


def test_a_disabled_logging_function_runs_at_every_call_with_eagers_values():
    ours_log, theirs_log = [], []
    ours = _logged_training(staged, ours_log, staged.compile)
    theirs = _logged_training(torch, theirs_log, lambda f: f)
    for x, y in _batches(3):
        x, y = x[:, :3], x[:, 3:]
        ours(staged.tensor(x), staged.tensor(y))
        theirs(torch.tensor(x), torch.tensor(y))
    assert [e[0] for e in ours_log] == [e[0] for e in theirs_log] == ["h", "w"] * 3
    for (_, a, b), (_, c, d) in zip(ours_log, theirs_log):
        assert a == pytest.approx(c, rel=1e-5) and (
            b is d is None or b == pytest.approx(d, rel=1e-5)
        )
    assert ours.traces == 2  # the first call gives the parameters their .grad


def test_a_disabled_function_that_returns_a_value_is_traced_with_its_caller():
    @staged.compiler.disable
    def helper(x):
        return x + 1

    step = staged.compile(lambda x: helper(x) * 2)
    assert step(staged.ones(2)).tolist() == [4.0, 4.0]


def test_a_step_that_logs_and_returns_its_argument_returns_that_tensor():
    """The disabled call's loop variable shadowed the call's arguments, so a returned
    argument (Note [returned state]) was looked up among the logged values instead."""
    logged = []

    @staged.compiler.disable
    def log(t, u):
        logged.append(float(t))

    w = staged.ones(3, requires_grad=True)

    def body(x, y):
        loss = (x * w).sum()
        loss.backward()
        log(loss.detach(), y)
        return loss.detach(), x

    step = staged.compile(body)
    x, y = staged.arange(3.0), staged.full((2,), 7.0)
    for _ in range(3):
        loss, out = step(x, y)
        assert out is x and float(loss) == 3.0
    assert logged == [3.0] * 3


def test_a_disabled_function_returns_none_in_the_step_as_in_eager():
    @staged.compiler.disable
    def effect(x):
        if x is None:
            return
        print("called")

    def step(x):
        r = effect(x)
        return x * 2 if r is None else x

    assert staged.compile(step)(staged.ones(2)).tolist() == [2.0, 2.0]


def test_a_saved_step_refuses_a_disabled_call(tmp_path):
    seen = []

    @staged.compiler.disable
    def note(x):
        seen.append(x.sum().item())

    def step(x):
        note(x)
        return x * 2

    f = staged.compile(step)
    f(staged.ones(2))
    f(staged.full((2,), 3.0))
    assert seen == [2.0, 6.0]
    with pytest.raises(CaptureError, match="runs no Python at its calls"):
        f.save(tmp_path / "s")
