"""The torch names Hugging Face transformers reaches at import and in its models, beyond
the op surface: ``torch.__version__`` as a version, ``torch.distributed.tensor``'s
placements (and its distributed tensors, which staged refuses by name), ``fsdp``'s
records, ``torch.cuda``'s classes and ``_dynamo``'s ``TransformGetItemToIndex``."""

import subprocess
import sys

import pytest
import torch

import staged


def _as_torch(code: str) -> str:
    """Run ``code`` in a process where staged stands in for torch; its stdout."""
    r = subprocess.run(
        [sys.executable, "-c", "import staged; staged.as_torch()\n" + code],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_version_is_torchs_compared_as_a_version():
    out = _as_torch(
        "import torch, torch.version\n"
        "v = torch.__version__\n"
        "print(v, torch.version.__version__ is v, v >= '2.5', v < (2, 14), v > '2.13.0',"
        " v == '2.13.0', v.split('+')[0])"
    )
    assert out.split() == ["2.13.0+staged.0.1.0", "True", "True", "True", "True", "False"] + [
        "2.13.0"
    ], out
    # staged's own version stays its own where it does not stand in for torch
    assert staged.__version__ == "0.1.0"


def test_torch_version_compares_as_torchs():
    from staged.torch_version import TorchVersion as Ours
    from torch.torch_version import TorchVersion as Theirs

    for v in ["2.13.0+cpu", "2.5.0a0", "1.13.1", "parrot"]:
        for other in ["2.5", "2.13.0", (2, 13), (1, 9), "parrot", "2.13.0+cpu"]:
            for op in ("__lt__", "__le__", "__eq__", "__ge__", "__gt__"):
                assert getattr(Ours(v), op)(other) == getattr(Theirs(v), op)(other), (v, op, other)


def test_placements_are_torchs():
    from staged.distributed.tensor import placement_types as ours
    from torch.distributed.tensor import placement_types as theirs

    def make(m):
        return [m.Shard(-1), m.Shard(0), m.Replicate(), m.Partial(), m.Partial("max")] + [
            m._StridedShard(0, split_factor=2)
        ]

    for a, b in zip(make(ours), make(theirs)):
        assert (repr(a), str(a), hash(a)) == (repr(b), str(b), hash(b))
        assert (a.is_shard(), a.is_shard(0), a.is_replicate(), a.is_partial()) == (
            b.is_shard(),
            b.is_shard(0),
            b.is_replicate(),
            b.is_partial(),
        )
        assert [a == c for c in make(ours)] == [b == c for c in make(theirs)]


def test_distributed_tensors_refused_by_name():
    import torch.distributed.fsdp

    from staged.distributed import device_mesh, fsdp, tensor

    assert not isinstance(staged.ones(2), tensor.DTensor)
    for make, what in [
        (lambda: tensor.DTensor.from_local(staged.ones(2)), "DTensor.from_local"),
        (lambda: tensor.distribute_tensor(staged.ones(2)), "distribute_tensor"),
        (lambda: device_mesh.init_device_mesh("cpu", (2,)), "init_device_mesh"),
        (lambda: fsdp.FullyShardedDataParallel(staged.nn.Linear(2, 2)), "FullyShardedData"),
        (lambda: fsdp.fully_shard(staged.nn.Linear(2, 2)), "fully_shard"),
    ]:
        with pytest.raises(NotImplementedError, match=what) as e:
            make()
        assert "DistributedDataParallel" in str(e.value)
    theirs = torch.distributed.fsdp.MixedPrecisionPolicy(param_dtype=torch.bfloat16)
    ours = fsdp.MixedPrecisionPolicy(param_dtype=staged.bfloat16)
    assert repr(ours).replace("staged.", "torch.") == repr(theirs)
    assert repr(fsdp.CPUOffloadPolicy()) == repr(torch.distributed.fsdp.CPUOffloadPolicy())


def test_transformers_imports_resolve_as_torch():
    out = _as_torch(
        "from torch.distributed.tensor import DTensor, Partial, Replicate, Shard\n"
        "from torch.distributed.tensor.placement_types import _StridedShard\n"
        "from torch.distributed.tensor._utils import compute_local_shape_and_global_offset\n"
        "from torch.distributed.device_mesh import DeviceMesh\n"
        "from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy\n"
        "from torch.distributed._composable.fsdp import fully_shard\n"
        "from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex\n"
        "import torch\n"
        "print(torch.float8_e4m3fn, torch.uint16, torch.cuda.is_current_stream_capturing())"
    )
    assert out.split() == ["torch.float8_e4m3fn", "torch.uint16", "False"]


def test_cuda_classes_exist_and_refuse_as_torchs_cpu_build():
    for name in ["Stream", "Event", "CUDAGraph"]:
        assert isinstance(getattr(staged.cuda, name), type)
        with pytest.raises(AssertionError, match="not compiled with CUDA"):
            getattr(staged.cuda, name)()


def test_transform_getitem_to_index_with_vmap():
    # transformers' vmapped mask functions index captured tensors by the batched indices
    from staged._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex as Ours
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex as Theirs

    def run(T, mode):
        doc = T.tensor([0, 0, 1, 1, 1])

        def mask(q, kv):
            return doc[q] == doc[kv]

        with mode():
            inner = T.vmap(mask, in_dims=(None, 0))
            return T.vmap(inner, in_dims=(0, None))(T.arange(5), T.arange(5))

    assert run(staged, Ours).tolist() == run(torch, Theirs).tolist()


def test_buffer_of_an_expanded_tensor_takes_writes_as_torchs():
    # transformers: nn.Buffer(arange(n).expand((1, -1))), then init's copy_ into it
    def run(T):
        a = T.arange(5)
        b = T.nn.Buffer(a.expand((1, -1)), persistent=False)
        with T.no_grad():
            b.copy_(T.arange(5).expand((1, -1)) * 2)
        p = T.nn.Parameter(T.ones(3).expand(2, 3))
        try:
            with T.no_grad():
                p.mul_(2)
        except RuntimeError as e:
            return b.tolist(), a.tolist(), str(e).partition("unsupported")[2]
        raise AssertionError("a write into repeated elements was taken")

    assert run(staged) == run(torch)


def test_new_factories_take_size_by_keyword_as_torchs():
    # torch's flex_attention noop_mask calls batch.new_ones(size=(), ...)
    def run(T):
        x = T.ones(2, dtype=T.float64)
        return [
            (tuple(t.shape), str(t.dtype).split(".")[1], t.tolist())
            for t in (
                x.new_ones(size=()),
                x.new_zeros(size=(3,), dtype=T.int64),
                x.new_empty(size=[2, 2]).fill_(1),
                x.new_ones(2, 3),
                x.new_zeros([2]),
            )
        ]

    assert run(staged) == run(torch)


def test_accelerate_unwrap_names_as_torchs():
    # accelerate's unwrap_model: isinstance(m, torch._dynamo.eval_frame.OptimizedModule), and
    # FSDP's class from torch.distributed.fsdp.fully_sharded_data_parallel
    from staged._dynamo import eval_frame
    from staged.distributed.fsdp import fully_sharded_data_parallel as ours
    from torch.distributed.fsdp import fully_sharded_data_parallel as theirs

    net = staged.nn.Linear(2, 2)
    assert isinstance(staged.compile(net), eval_frame.OptimizedModule)
    assert not isinstance(net, (eval_frame.OptimizedModule, ours.FullyShardedDataParallel))
    for name in ["ShardingStrategy", "StateDictType", "BackwardPrefetch"]:
        a, b = getattr(ours, name), getattr(theirs, name)
        assert [(m.name, m.value) for m in a] == [(m.name, m.value) for m in b]


def test_peft_imports_as_torchs():
    # peft: from torch.nn.modules import Module; from torch.nn.init import _calculate_correct_fan
    from staged.nn.init import _calculate_correct_fan as ours
    from staged.nn.modules import Module
    from torch.nn.init import _calculate_correct_fan as theirs

    assert Module is staged.nn.Module
    for shape in [(3, 4), (2, 3, 5, 5), (7, 2, 3)]:
        for mode in ["fan_in", "fan_out", "FAN_IN"]:
            assert ours(staged.empty(shape), mode) == theirs(torch.empty(shape), mode)
    with pytest.raises(ValueError, match="Mode fan not supported") as e:
        ours(staged.empty(2, 2), "fan")
    with pytest.raises(ValueError) as t:
        theirs(torch.empty(2, 2), "fan")
    assert str(e.value) == str(t.value)


def test_cudnn_flags_context_as_torchs():
    # transformers' CTC loss: with torch.backends.cudnn.flags(enabled=False): ...
    def run(T):
        c = T.backends.cudnn
        before = (c.enabled, c.deterministic)
        with c.flags(enabled=False, deterministic=True):
            inside = (c.enabled, c.deterministic)
        return before, inside, (c.enabled, c.deterministic)

    assert run(staged) == run(torch)
