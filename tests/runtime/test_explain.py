"""explain() on one screen, inputs and outputs named by where they come from, and compile
messages through logging (never a print), with a status line on a terminal."""

from __future__ import annotations

import json
import logging
import os
import re
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import staged
import staged.nn.functional as F
from staged import nn, optim
from staged.runtime import logs


@pytest.fixture(scope="module")
def adam_step():
    """A Sequential/Adam step called 3 times (the first traces one-shot: Adam makes its
    buffers), then with a smaller batch (a re-trace)."""
    staged.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = optim.Adam(model.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = staged.compile(step)
    for n in (16, 16, 16, 8):
        compiled(staged.randn(n, 4), staged.randint(0, 3, (n,)))
    return compiled


def test_inputs_and_outputs_are_named_as_torch_names_them(adam_step):
    g = adam_step.graphs()[-1]
    inputs = {i.name for i in g.inputs}
    assert {"x", "y", "0.weight", "0.bias", "2.weight", "2.bias"} <= inputs
    for p in ("0.weight", "0.bias", "2.weight", "2.bias"):
        assert {f"opt.state[{p}].{k}" for k in ("exp_avg", "exp_avg_sq", "step")} <= inputs
    assert not [n for n in inputs if re.fullmatch(r"(state|tensor)\d+", n)]
    assert [o.name for o in g.outputs if o.kind == "out"] == ["loss"]
    assert {o.name for o in g.outputs if o.kind == "grad"} == {
        "0.weight",
        "0.bias",
        "2.weight",
        "2.bias",
    }


def test_explain_fits_a_screen_with_phases_names_guards_and_re_trace_reasons(adam_step):
    text = adam_step.explanation()
    lines = text.splitlines()
    assert len(lines) < 60 and max(map(len, lines)) <= 100
    assert lines[0].startswith("staged.compile(adam_step.<locals>.step): backend llvm-cpu")
    assert re.fullmatch(r"  defined at .*test_explain\.py:\d+", lines[1])
    sizes = {k: int(v) for k, v in re.findall(r"(forward|backward|optimizer) (\d+)", text)}
    assert set(sizes) == {"forward", "backward", "optimizer"} and all(sizes.values())
    assert "test_explain.py:" in text  # the phases' lines of the user's code
    assert "traces: 3" in text and "1. first call; one-shot" in text
    assert "3. x: shape (16, 4) -> (8, 4); y: shape (16,) -> (8,)" in text
    assert "segments: 1" in text
    assert "returns (1): loss float32[]" in text
    assert "opt.state[0.weight].exp_avg" in text and "0.weight.grad" in text
    assert "Sequential.training == True" in text
    assert re.search(
        r"compile: trace [\d.]+ s, lower [\d.]+ s, IREE compile [\d.]+ s, "
        r"load [\d.]+ s",
        text,
    )
    assert "MLIR" not in text.replace("its MLIR", "")


def test_verbose_adds_the_graph_and_the_mlir_printed_once(adam_step, capsys):
    assert adam_step.explain(verbose=True) is None
    out = capsys.readouterr().out
    assert out == adam_step.explanation(verbose=True) + "\n"
    assert out.count("func.func @main(") == 1 and out.count("\ngraph(\n") == 1
    assert "# state opt.state[2.bias].exp_avg_sq" in out  # the graph names its inputs
    assert re.search(r"dispatches: \d+", out)


def test_deploy_names_state_as_the_trace_does(adam_step, tmp_path):
    adam_step.save(tmp_path)
    m = json.loads((tmp_path / "manifest.json").read_text())
    names = [s["name"] for s in m["state"]]
    assert names[:2] == ["0.weight", "0.bias"] and "opt.state[2.weight].exp_avg" in names
    assert [o["name"] for o in m["outputs"]] == ["loss"]


w_global = staged.randn(3)


class Trainer:
    def __init__(self):
        self.enc, self.head = nn.Linear(3, 3), nn.Linear(3, 2)
        self.opt = optim.SGD(
            [*self.enc.parameters(), *self.head.parameters()], lr=0.1, momentum=0.9
        )

    def step(self, x):
        self.opt.zero_grad()
        z = self.head(self.enc(x * w_global))
        loss = z.square().mean()
        loss.backward()
        self.opt.step()
        return loss, {"logits": z}


def test_names_through_self_globals_and_several_modules():
    t = Trainer()
    g = staged.capture(t.step, staged.randn(5, 3))  # creates the momentum buffers
    assert {"w_global", "self.enc.weight", "self.head.bias"} <= {i.name for i in g.graph.inputs}
    escaped = {o.name for o in g.graph.outputs if o.kind == "escaped"}
    assert "self.opt.state[self.enc.weight].momentum_buffer" in escaped
    assert [o.name for o in g.graph.outputs if o.kind == "out"] == ["loss", "logits"]


def test_compiles_log_through_logging_and_print_nothing(caplog, capfd):
    f = staged.compile(lambda x: x * 3 + 1)
    with caplog.at_level(logging.DEBUG, logger="staged"):
        f(staged.randn(4))
        f(staged.randn(6))
    assert capfd.readouterr() == ("", "")
    by = {}
    for r in caplog.records:
        by.setdefault(r.name, []).append(r.getMessage())
    msgs = by["staged.compile"]
    assert any(m.endswith(": first call") for m in msgs)
    assert any(m.endswith("x: shape (4,) -> (6,)") for m in msgs)
    assert any(
        re.search(r"compiled .*<lambda> \(\d+ ops, llvm-cpu\) in [\d.]+ s: trace", m) for m in msgs
    )
    assert any(m.startswith("graph of ") for m in msgs)  # the graph, at DEBUG
    assert any(
        re.search(r"IREE module \w+ for llvm-cpu: (compiled|from the cache)", m)
        for m in by["staged.runtime"]
    )


def test_staged_log_env_turns_the_messages_on(tmp_path):
    script = textwrap.dedent("""
        import staged
        staged.compile(lambda x: x - 1)(staged.ones(3))
    """)
    env = dict(os.environ, PYTHONPATH=str(Path(staged.__file__).parent.parent))
    runs = {}
    for value in ("info", ""):
        env["STAGED_LOG"] = value
        env.pop("STAGED_DEBUG", None)
        runs[value] = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert runs[value].returncode == 0, runs[value].stderr
        assert runs[value].stdout == ""
    assert "[staged.compile] tracing <lambda>: first call" in runs["info"].stderr
    assert re.search(
        r"\[staged.compile\] compiled <lambda> \(\d+ ops, llvm-cpu\) in [\d.]+ s: "
        r"trace [\d.]+ s, lower",
        runs["info"].stderr,
    )
    assert "[staged.compile] graph" not in runs["info"].stderr  # that is debug
    assert runs[""].stderr == ""


def test_a_slow_compile_shows_its_phase_on_a_terminal_then_clears_it(monkeypatch):
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as tty:
        monkeypatch.setattr(sys, "stderr", tty)
        monkeypatch.setattr(logs, "SHOW_AFTER", 0.05)
        with logs.Phases("compiling step") as p:
            with p("trace"):
                pass
            with p("IREE compile"):
                time.sleep(0.4)
        shown = b""
        while select.select([master], [], [], 0.2)[0]:
            shown += os.read(master, 1 << 16)
        shown = shown.decode()
    os.close(master)
    assert re.search(r"\rstaged: compiling step: IREE compile 0\.\d s\x1b\[K", shown)
    assert shown.endswith("\r\x1b[K")  # cleared: the line is the progress bar's again
    assert list(p.times) == ["trace", "IREE compile"] and p.times["IREE compile"] >= 0.4
