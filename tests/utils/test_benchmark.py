"""staged.utils.benchmark against torch.utils.benchmark: Measurement's statistics and repr
from the same times, Timer's runs of setup and statement, its threads, Compare's table."""

from __future__ import annotations

import pytest
import torch.utils.benchmark as tb

import staged
import staged.utils.benchmark as sb

TIMES = [1e-5, 1.2e-5, 1.1e-5, 3e-5, 1e-5]


@pytest.mark.parametrize("times", [TIMES, TIMES[:3], TIMES[:1], [2e-3, 2.01e-3, 2e-3, 1.99e-3]])
@pytest.mark.parametrize(
    "spec",
    [
        dict(stmt="x @ x", setup="pass"),
        dict(stmt="y = f(x)\ny.sum()", setup="x = 1\nf = abs", label="L", sub_label="s"),
        dict(stmt="x + 1", setup="x = 2", description="small", num_threads=2),
    ],
)
def test_a_measurement_reads_as_torch_s(times, spec):
    ours = sb.Measurement(10, times, sb.TaskSpec(**spec))
    theirs = tb.Measurement(10, times, tb.utils.common.TaskSpec(**spec))
    for name in ("median", "mean", "iqr"):
        assert getattr(ours, name) == pytest.approx(getattr(theirs, name), rel=1e-12)
    assert ours.times == theirs.times and ours.has_warnings == theirs.has_warnings
    assert ours.title == theirs.title and ours.stmt == theirs.stmt
    assert ours.num_threads == theirs.num_threads and ours.env == theirs.env
    assert repr(ours).split("\n")[1:] == repr(theirs).split("\n")[1:]


def test_the_timer_runs_setup_once_and_the_statement_number_times_per_block():
    calls = {"setup": 0, "stmt": 0}

    def bump(k):
        calls[k] += 1

    t = sb.Timer("bump('stmt')", setup="bump('setup')", globals={"bump": bump})
    m = t.timeit(number=300)
    assert calls == {"setup": 2, "stmt": 300 + 3}  # a warm-up block of max(300 // 100, 2)
    assert m.number_per_run == 300 and len(m.raw_times) == 1 and m.median > 0


def test_autoranges_run_for_their_minimum_time_in_blocks_of_one_size():
    seen = []
    t = sb.Timer("sum(range(50))")
    m = t.blocked_autorange(callback=lambda n, s: seen.append((n, s)), min_run_time=0.05)
    assert sum(m.raw_times) >= 0.05 and {n for n, _ in seen} == {m.number_per_run}
    assert [s for _, s in seen] == m.raw_times and m.number_per_run >= 10
    a = t.adaptive_autorange(min_run_time=0.01, max_run_time=0.3)
    assert len(a.raw_times) > 3 or sum(a.raw_times) > 0.3


def test_the_timer_runs_with_its_threads_and_gives_them_back():
    before = staged.get_num_threads()
    seen = []
    t = sb.Timer(
        "seen.append(staged.get_num_threads())",
        globals={"seen": seen, "staged": staged},
        num_threads=3,
    )
    t.timeit(4)
    assert set(seen) == {3} and staged.get_num_threads() == before


def test_compare_tabulates_medians_by_row_and_column():
    spec = dict(setup="pass", label="ops")
    ms = [
        sb.Measurement(
            1, [2e-6, 2e-6], sb.TaskSpec("a", sub_label="add", description="f32", **spec)
        ),
        sb.Measurement(
            1, [4e-6, 4e-6], sb.TaskSpec("m", sub_label="mul", description="f32", **spec)
        ),
        sb.Measurement(
            1, [8e-6, 8e-6], sb.TaskSpec("m", sub_label="mul", description="f64", **spec)
        ),
    ]
    lines = str(sb.Compare(ms)).splitlines()
    assert "ops" in lines[0] and lines[-1] == "Times are in microseconds (us)."
    row = {ln.split("|")[0].strip(): ln.split("|")[1:] for ln in lines if "|" in ln}
    assert [float(v) for v in row["mul"]] == [4.0, 8.0] and float(row["add"][0]) == 2.0
    assert row["add"][1].strip() == ""


def test_other_languages_are_refused():
    with pytest.raises(ValueError, match="Python statements only"):
        sb.Timer("x++;", language="c++")
