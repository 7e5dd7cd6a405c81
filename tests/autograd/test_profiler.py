"""The autograd profiler: events, averages, PyTorch's table layout, Chrome traces."""

import json
import re

import numpy as np
import pytest
import torch

import staged
from staged.autograd import profiler

X = np.random.default_rng(0).random((4, 4))


def _run(lib, x):
    y = (x**2).exp()
    y.sum().backward()
    return y


@pytest.fixture(scope="module")
def prof():
    x = staged.tensor(X, requires_grad=True)
    with profiler.profile(record_shapes=True, profile_memory=True, with_stack=True) as p:
        with profiler.record_function("my_block"):
            y = _run(staged, x)
    p.nodes = {y.grad_fn.name(), y.grad_fn.next_functions[0][0].name()}
    return p


def test_every_op_and_every_backward_node_is_an_event(prof):
    names = [e.name for e in prof.events()]
    assert {"pow", "exp", "reduce_sum"} <= set(names)
    assert prof.nodes <= set(names) and {"SumBackward0", "torch::autograd::AccumulateGrad"} <= set(
        names
    )
    with torch.autograd.profiler.profile() as tprof:
        _run(torch, torch.tensor(X, requires_grad=True))
    torch_nodes = {e.key for e in tprof.key_averages() if re.fullmatch(r"\w+Backward0", e.key)}
    assert torch_nodes == {n for n in names if n.endswith("Backward0")}
    for e in prof.events():
        assert e.cpu_time_total > 0 and 0 <= e.self_cpu_time_total <= e.cpu_time_total
    (block,) = [e for e in prof.events() if e.name == "my_block"]
    assert block.cat == "user_annotation" and block.parent is None
    assert all(e.parent is not None for e in prof.events() if e is not block)
    assert block.cpu_memory_usage == sum(e.self_cpu_memory_usage for e in prof.events())
    (exp,) = [e for e in prof.events() if e.name == "exp"]
    assert exp.input_shapes == ((4, 4),) and exp.self_cpu_memory_usage == 16 * 8
    assert any("test_profiler.py" in s for s in exp.stack)


def test_key_averages_group_by_input_shape(prof):
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["exp"].count == 1 and avg["pow"].count >= 1
    assert avg["my_block"].cpu_time_total == pytest.approx(prof.self_cpu_time_total)
    by_shape = prof.key_averages(group_by_input_shape=True)
    assert sum(e.count for e in by_shape if e.key == "reshape") == avg["reshape"].count
    assert {e.input_shapes for e in by_shape if e.key == "exp"} == {((4, 4),)}


def _header(table):
    lines = table.splitlines()
    return re.split(r"\s{2,}", lines[1].strip()), lines


def test_table_has_pytorchs_layout(prof):
    with torch.autograd.profiler.profile(profile_memory=True, record_shapes=True) as tprof:
        _run(torch, torch.tensor(X, requires_grad=True))
    for kw in ({}, {"group_by_input_shape": True}):
        ours, lines = _header(
            prof.key_averages(**kw).table(sort_by="self_cpu_time_total", row_limit=3)
        )
        theirs, tlines = _header(
            tprof.key_averages(**kw).table(sort_by="self_cpu_time_total", row_limit=3)
        )
        assert ours == theirs
        assert len(lines) == len(tlines) and lines[-1].startswith("Self CPU time total:")
        assert re.fullmatch(r"(-+  )+", lines[0]) and lines[0] == lines[2] == lines[-2]
    rows = prof.key_averages().table(sort_by="cpu_time_total", row_limit=0).splitlines()[3:-2]
    totals = [
        float(r.split()[4].rstrip("msu"))
        * {"ms": 1e3, "us": 1, "s": 1e6}[re.search(r"(ms|us|s)$", r.split()[4]).group(1)]
        for r in rows
    ]
    assert totals == sorted(totals, reverse=True) and rows[0].split()[0] == "my_block"
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="no_such_column")


def test_chrome_trace_follows_the_trace_event_format(prof, tmp_path):
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    assert set(doc) >= {"traceEvents"} and isinstance(doc["traceEvents"], list)
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(prof.events())
    schema = {
        "name": str,
        "cat": str,
        "ph": str,
        "ts": (int, float),
        "dur": (int, float),
        "pid": int,
        "tid": int,
        "args": dict,
    }
    for e in complete:
        assert set(e) == set(schema)
        for key, typ in schema.items():
            assert isinstance(e[key], typ), (key, e)
        assert e["dur"] >= 0
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M") and isinstance(e["pid"], int)
    (exp,) = [e for e in complete if e["name"] == "exp"]
    assert exp["args"]["Input Dims"] == [[4, 4]]


def test_record_function_decorator_and_nesting():
    @profiler.record_function("outer_fn")
    def outer(x):
        with profiler.record_function("inner"):
            return x.exp()

    outer(staged.ones(2))  # no profile open: a plain call
    with profiler.profile() as p:
        outer(staged.ones(2))
    outer_e, inner_e, exp_e = p.events()
    assert (outer_e.name, inner_e.name, exp_e.name) == ("outer_fn", "inner", "exp")
    assert inner_e.parent is outer_e and exp_e.parent is inner_e


def test_off_costs_nothing():
    from staged.autodiff.primitive import _bind
    from staged.eager import dispatch

    with profiler.profile():
        assert _bind[0] is not dispatch.apply
    assert _bind[0] is dispatch.apply and profiler.profile is not None
    with profiler.profile(enabled=False):
        assert _bind[0] is dispatch.apply


def _flops(lib, conv_too):
    lib.manual_seed(0)
    m, x = lib.nn.Linear(64, 32), lib.randn(8, 64)
    conv, img = lib.nn.Conv2d(3, 4, 3), lib.randn(2, 3, 6, 6, requires_grad=True)
    with lib.profiler.profile(with_flops=True) as p:
        m(x).sum().backward()
        x @ x.T
        if conv_too:
            conv(img).sum().backward()
    return sum(e.flops for e in p.key_averages()), p


def test_with_flops_counts_torchs_flops_and_shows_its_column():
    """torch's profiler counts matrix products forward and backward, and a convolution's
    forward; staged's counts its backward too, as torch's FlopCounterMode does."""
    ours, prof = _flops(staged, False)
    assert ours == _flops(torch, False)[0] > 0
    with_conv = _flops(staged, True)[0]
    conv_forward = 2 * 2 * 16 * 4 * 27  # N, H_out * W_out, C_out, C_in * kernel
    assert with_conv == _flops(torch, True)[0] + 2 * conv_forward
    assert {e.key for e in prof.key_averages() if e.flops} == {"matmul"}  # kernels decomposed
    header = prof.key_averages().table().splitlines()[1]
    assert header.split()[-2:] == ["Total", "KFLOPs"]
    assert "--" in prof.key_averages().table()  # events without flops
    with staged.profiler.profile() as plain:
        staged.nn.Linear(4, 2)(staged.ones(1, 4))
    assert "FLOPs" not in plain.key_averages().table()
    assert "linear" in {e.key for e in plain.key_averages()}  # the fused kernel, as before
