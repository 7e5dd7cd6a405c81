"""Re-trace guards, the eager fallback, explain(), debug logging and the compile cache as
seen through staged.compile."""
from __future__ import annotations

import logging
import re
import warnings

import numpy as np
import pytest

import staged
from staged import nn
from staged.capture.symbolic import CaptureError
from staged.runtime import compiled as compiled_mod


def test_module_training_flag_and_parameter_identity_are_guarded():
    m = nn.Linear(3, 2)
    f = staged.compile(lambda x: m(x).sum())
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
    np.testing.assert_allclose(f(x).item(), (x.numpy().sum(1) * 2).sum()
                               + m.bias.detach().numpy().sum() * 4, rtol=1e-5)
    assert f.traces == 3
    assert re.fullmatch(r"Linear parameters/buffers: bias#(\d+), weight#(\d+) -> "
                        r"bias#\1, weight#(\d+)", f.last_retrace_reason)


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
    f = staged.compile(lambda x: (x @ w).relu().sum())
    assert "not called yet" in f.explain()
    f(staged.randn(4, 3))
    text = f.explain()
    assert "last re-trace: first call" in text
    assert "= matmul(" in text and "linalg.matmul" in text
    assert int(text.split("dispatches: ")[1].split()[0]) >= 1
    assert capsys.readouterr().out.startswith("staged.compile: not called yet")


def test_debug_logging_says_why_it_traced(caplog):
    f = staged.compile(lambda x: x * 3)
    with caplog.at_level(logging.INFO, logger="staged"):
        f(staged.randn(2))
        f(staged.randn(5))
    msgs = [r.getMessage() for r in caplog.records if r.name == "staged"]
    assert any("first call" in m for m in msgs)
    assert any(m.endswith("x: shape (2,) -> (5,)") for m in msgs)


def test_slow_compiles_say_so(monkeypatch, capsys):
    monkeypatch.setattr(compiled_mod._progress, "__init__",
                        lambda self, what, after=0.0: setattr(self, "what", what) or
                        setattr(self, "after", 0.0))
    staged.compile(lambda x: x.exp())(staged.randn(7))
    err = capsys.readouterr().err
    assert "staged: compiling a step of 1 ops for llvm-cpu" in err and "done in" in err


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
