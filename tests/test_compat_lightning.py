"""The torch names PyTorch Lightning 2.6 (with lightning_fabric and torchmetrics) reaches
in a Trainer's fit, beyond the op surface, each against torch 2.13: ``ReduceOp``'s enum,
``Backend``, ``torch._C``'s ``_TensorMeta`` and ``_nn._parse_to``, the DataLoader's
iterator classes, ``jit.ScriptModule``, ``fx.GraphModule``, ``PyTorchFileReader``, the
profiler's extras, ``cuda``'s all-device RNG state and ``multiprocessing.start_processes``.
The torch function modes and the flop counter have their own files."""

import io
import json
import os

import numpy as np
import pytest
import torch

import staged
import staged.distributed as dist
from staged.distributed.distributed_c10d import _op


def test_reduce_op_members_are_its_red_op_type_enum_as_torchs():
    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"):
        ours, theirs = getattr(dist.ReduceOp, name), getattr(torch.distributed.ReduceOp, name)
        assert ours is getattr(dist.ReduceOp.RedOpType, name)
        assert (ours.name, ours.value) == (theirs.name, int(theirs.value))
        assert dist.ReduceOp(ours) == ours and hash(dist.ReduceOp(ours)) == hash(ours)
    assert list(dist.ReduceOp.RedOpType.__members__) == list(
        torch.distributed.ReduceOp.RedOpType.__members__
    )
    assert [_op(dist.ReduceOp.AVG), _op(dist.ReduceOp(dist.ReduceOp.MAX)), _op("product")] == [
        "avg",
        "max",
        "product",
    ]
    for bad in (dist.ReduceOp.BAND, dist.ReduceOp.PREMUL_SUM, "median"):
        with pytest.raises(ValueError, match="SUM, AVG, MAX, MIN or PRODUCT"):
            _op(bad)


def test_backend_names_and_the_default_group_before_init_as_torchs():
    B, TB = dist.Backend, torch.distributed.Backend
    for name in ("GLOO", "gloo", "Mpi", "NCCL", "custom"):
        assert B(name) == TB(name) and type(B(name)) is str
    assert B.default_device_backend_map["cpu"] == TB.default_device_backend_map["cpu"] == "gloo"
    with pytest.raises(ValueError, match="string-ish"):
        B(3)
    assert dist.group.WORLD is None and dist.GroupMember is dist.group
    assert torch.distributed.group.WORLD is None
    with pytest.raises(ValueError, match="init_process_group"):
        dist.distributed_c10d._get_default_group()
    from staged.distributed.constants import default_pg_timeout

    # staged's own: 5 minutes (torch's 30), after which a collective fails naming the rank
    assert default_pg_timeout is dist.default_pg_timeout


def test_torchelastic_launched_reads_torchruns_variable(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert dist.is_torchelastic_launched() is torch.distributed.is_torchelastic_launched() is False
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job")
    assert dist.is_torchelastic_launched() is torch.distributed.is_torchelastic_launched() is True


def test_parse_to_and_module_to_take_torchs_forms():
    ours, theirs = staged._C._nn._parse_to, torch._C._nn._parse_to
    cases = [
        (("cpu",), {}),
        (("float64",), {}),
        (("cpu", "float16", True), {}),
        (("float32", True), {}),
        ((None, "float64"), {}),
        ((), {"device": "cpu", "dtype": "float32", "non_blocking": True}),
    ]
    for args, kwargs in cases:
        s_args = [getattr(staged, a) if str(a).startswith("float") else a for a in args]
        t_args = [getattr(torch, a) if str(a).startswith("float") else a for a in args]
        s_kw = {k: getattr(staged, v) if k == "dtype" else v for k, v in kwargs.items()}
        t_kw = {k: getattr(torch, v) if k == "dtype" else v for k, v in kwargs.items()}
        s, t = ours(*s_args, **s_kw), theirs(*t_args, **t_kw)
        assert str(s[0]) == str(t[0]) and str(s[1]).split(".")[-1] == str(t[1]).split(".")[-1]
        assert s[2:] == t[2:], (args, s, t)
    s = ours(staged.ones(1, dtype=staged.int32))
    assert (str(s[0]), s[1]) == ("cpu", staged.int32)
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        ours(staged.float32, "cpu")
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        torch._C._nn._parse_to(torch.float32, "cpu")
    m = staged.nn.Linear(2, 2)
    for args, want in [
        (("cpu", staged.float64, True), staged.float64),
        ((staged.ones(1, dtype=staged.float32),), staged.float32),
        ((None, staged.float16), staged.float16),
        ((staged.float64, True), staged.float64),
    ]:
        assert m.to(*args) is m and m.weight.dtype == want, args
    assert staged._C._TensorMeta is type(staged.Tensor)


def test_dataloader_iterators_have_torchs_class_names():
    from staged.utils.data import DataLoader
    from staged.utils.data import dataloader as dl

    data = staged.arange(10.0)
    plain, workers = (
        iter(DataLoader(data, batch_size=4)),
        iter(DataLoader(data, batch_size=4, num_workers=2)),
    )
    assert isinstance(plain, dl._BaseDataLoaderIter) and isinstance(
        plain, dl._SingleProcessDataLoaderIter
    )
    assert not isinstance(plain, dl._MultiProcessingDataLoaderIter)
    assert isinstance(workers, dl._MultiProcessingDataLoaderIter) and isinstance(
        workers, dl._BaseDataLoaderIter
    )
    assert next(workers).tolist() == [0.0, 1.0, 2.0, 3.0]
    workers._shutdown_workers()  # Lightning's, before a new pass: the batches handed out go
    with pytest.raises(StopIteration):
        next(workers)


def test_script_module_graph_module_and_optimized_module_classes():
    m = staged.nn.Linear(2, 2)
    assert staged.jit.script(m) is m and not isinstance(m, staged.jit.ScriptModule)
    assert staged.ScriptModule is staged.jit.ScriptModule and not isinstance(
        len, staged.jit.ScriptFunction
    )
    with pytest.raises(NotImplementedError, match="no torch.fx symbolic tracer"):
        staged.fx.GraphModule(m, None)
    assert isinstance(staged.compile(m), staged._dynamo.OptimizedModule)


def test_pytorch_file_reader_reads_torchs_and_stageds_archives(tmp_path):
    obj = {"w": torch.arange(6.0).reshape(2, 3), "n": 3}
    path = str(tmp_path / "t.pt")
    torch.save(obj, path)
    ours, theirs = staged.PyTorchFileReader(path), torch.PyTorchFileReader(path)
    assert sorted(ours.get_all_records()) == sorted(theirs.get_all_records())
    for name in theirs.get_all_records():
        assert ours.get_record(name) == bytes(theirs.get_record(name)), name
        assert ours.get_record_offset(name) == theirs.get_record_offset(name), name
    assert ours.has_record("data.pkl") and not ours.has_record("nothing")
    with pytest.raises(RuntimeError, match="not found"):
        ours.get_record("nothing")
    buf = io.BytesIO()
    staged.save({"w": staged.ones(2)}, buf)
    reader = staged.PyTorchFileReader(io.BytesIO(buf.getvalue()))
    assert "data.pkl" in reader.get_all_records()
    storage = np.frombuffer(reader.get_record("data/0"), np.float32)
    assert storage.tolist() == [1.0, 1.0]


def test_profiler_extras_lightnings_profiler_calls(tmp_path):
    assert staged.profiler.kineto_available() is torch.profiler.kineto_available() is True
    import staged.profiler.profiler as inner

    assert inner is staged.profiler
    assert inner._default_schedule_fn(7) == staged.profiler.ProfilerAction.RECORD
    x = staged.ones(3, requires_grad=True)
    assert staged.autograd._profiler_enabled() is False
    with staged.profiler.profile(with_stack=True, record_shapes=True) as prof:
        assert staged.autograd._profiler_enabled() is True
        (x * 2).sum().backward()
    prof.add_metadata("Framework", "pytorch-lightning")
    prof.add_metadata_json("extra", '{"a": 1}')
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    assert trace["Framework"] == "pytorch-lightning" and trace["extra"] == {"a": 1}
    stacks = tmp_path / "stacks.txt"
    prof.export_stacks(str(stacks))
    lines = stacks.read_text().splitlines()
    assert lines and all(line.rsplit(" ", 1)[1].isdigit() for line in lines)
    assert all(os.path.basename(__file__) in line for line in lines)
    with pytest.raises(ValueError, match="metric"):
        prof.export_stacks(str(stacks), metric="nonsense")
    by_shape = prof.function_events.key_averages(group_by_input_shapes=True)
    assert {e.key for e in by_shape} >= {"mul"}
    with pytest.raises(AssertionError, match="not compiled with CUDA"):
        with staged.autograd.profiler.emit_nvtx():
            pass
    with pytest.raises(AssertionError, match="not compiled with CUDA"):
        with torch.autograd.profiler.emit_nvtx():
            pass


def test_cuda_rng_state_of_every_device_is_empty_as_on_a_cpu_build():
    assert staged.cuda.get_rng_state_all() == torch.cuda.get_rng_state_all() == []
    staged.cuda.set_rng_state_all([])
    torch.cuda.set_rng_state_all([])
    with pytest.raises(AssertionError, match="not compiled with CUDA"):
        staged.cuda.set_rng_state_all([staged.zeros(8, dtype=staged.uint8)])


def test_start_processes_is_refused_naming_the_launcher():
    with pytest.raises(RuntimeError, match="python -m staged.distributed.run --nproc-per-node 2"):
        staged.multiprocessing.start_processes(print, nprocs=2, start_method="fork")
    from staged.distributed.algorithms.ddp_comm_hooks import (
        default_hooks,
        post_localSGD_hook,
        powerSGD_hook,
    )

    with pytest.raises(NotImplementedError, match="no communication hooks"):
        post_localSGD_hook.PostLocalSGDState(None, None, 2)
    # accelerate maps a user's choice through these on every prepare, then calls none
    for hook in (default_hooks.fp16_compress_hook, powerSGD_hook.PowerSGDState):
        with pytest.raises(NotImplementedError, match=f"{hook.__name__}: .*no communication hooks"):
            hook(None)
    assert staged.cpu.set_device("cpu") is torch.cpu.set_device("cpu") is None
