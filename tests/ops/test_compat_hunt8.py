"""What an eighth hunt found, a static scan of pytorch/examples for the names its scripts
use (``torch.X``, ``nn.X``, ``F.X``, ``torch.cuda.X`` ..., tensor methods), against torch
2.13: ``Tensor.hardshrink``/``Tensor.prelu``, ``nn.utils``' Conv/Linear-BatchNorm fusion,
``nn.utils.prune`` (the pruning tutorial's calls), ``nn.utils.skip_init``, ``torch.profiler``'s ``activities``/``schedule``/``on_trace_ready``/
``step()``, the deprecated ``nn.init.<name>`` and ``torch.testing.assert_allclose``, and the answers a
CPU-only build gives (``torch.cuda`` memory counters, ``torch.accelerator``'s device
calls, ``torch.version``, ``torch.backends.mkldnn``/``openmp``, ``is_nccl_available``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.utils.prune  # noqa: F401  (torch's is a submodule imported on its own)

import staged
from tests.checks import assert_close, assert_raises_like_torch, raises_like_torch

LIBS = (staged, torch)


# --- Tensor.hardshrink / Tensor.prelu: the methods torch has, with their values and grads ---------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_hardshrink_and_prelu_methods_give_torchs_values_and_gradients(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(dtype)
    w = np.array([0.1, -0.3, 0.7], dtype)
    out = {}
    for lib in LIBS:
        t, a = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = t.hardshrink(0.4) * 2 + t.prelu(a) ** 2
        y.sum().backward()
        out[lib] = (y.detach(), t.grad, a.grad)
    for ours, theirs in zip(out[staged], out[torch]):
        assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
    assert staged.hardshrink is staged.nn.functional.hardshrink  # one op, every surface


def test_prelu_method_refuses_what_torchs_refuses():
    assert_raises_like_torch(lambda lib: lib.ones(2, 3).prelu(lib.ones(4)))
    assert_raises_like_torch(lambda lib: lib.ones(2, 3).prelu(lib.ones(3, dtype=lib.float64)))


# --- nn.utils.fuse_conv_bn_eval / fuse_linear_bn_eval and their weight functions -----------------
def _pair(lib, kind, bias, affine):
    lib.manual_seed(0)
    if kind == "conv":
        layer, bn = lib.nn.Conv2d(3, 4, 3, bias=bias), lib.nn.BatchNorm2d(4, affine=affine)
    elif kind == "convT":
        layer = lib.nn.ConvTranspose2d(3, 4, 3, bias=bias)
        bn = lib.nn.BatchNorm2d(4, affine=affine)
    else:
        layer, bn = lib.nn.Linear(5, 4, bias=bias), lib.nn.BatchNorm1d(4, affine=affine)
    rng = np.random.default_rng(1)
    with lib.no_grad():
        for p in list(layer.parameters()) + list(bn.parameters()):
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype("float32")))
        bn.running_mean.copy_(lib.tensor(rng.standard_normal(4).astype("float32")))
        bn.running_var.copy_(lib.tensor(rng.uniform(0.5, 2.0, 4).astype("float32")))
    return layer.eval(), bn.eval()


# (torch's fuse_linear_bn_weights needs BatchNorm's affine parameters; the conv one does not)
FUSIONS = [(k, b, a) for k in ("conv", "convT", "linear") for b, a in ((1, 1), (0, 1), (1, 0))]


@pytest.mark.parametrize("kind, bias, affine", [f for f in FUSIONS if f[0] != "linear" or f[2]])
def test_fusing_batchnorm_gives_torchs_layer_values_and_gradients(kind, bias, affine):
    shape = (2, 3, 6, 6) if kind != "linear" else (7, 5)
    x = np.random.default_rng(2).standard_normal(shape).astype("float32")
    out = {}
    for lib in LIBS:
        layer, bn = _pair(lib, kind, bias, affine)
        fuse = lib.nn.utils
        if kind == "linear":
            fused = fuse.fuse_linear_bn_eval(layer, bn)
        else:
            fused = fuse.fuse_conv_bn_eval(layer, bn, transpose=kind == "convT")
        t = lib.tensor(x, requires_grad=True)
        y = fused(t)
        (y * y).sum().backward()
        assert isinstance(fused.weight, lib.nn.Parameter) and fused.weight.requires_grad
        # a new bias requires grad as the layer's did (a missing one: zeros that don't)
        assert isinstance(fused.bias, lib.nn.Parameter) and fused.bias.requires_grad == bool(bias)
        assert layer.weight.grad is None  # a copy: the original layer is left alone
        grads = (t.grad, fused.weight.grad) + ((fused.bias.grad,) if bias else ())
        out[lib] = (y.detach(), bn(layer(t)).detach(), *grads)
    for ours, theirs in zip(out[staged], out[torch], strict=True):
        assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    assert_close(out[staged][0], out[staged][1], rtol=1e-5, atol=1e-5)  # = bn(layer(x))


def test_fusion_refuses_training_layers_and_mismatched_features_as_torch():
    raises_like_torch(
        lambda lib: lib.nn.utils.fuse_conv_bn_eval(lib.nn.Conv2d(1, 2, 1), lib.nn.BatchNorm2d(2)),
        "Fusion only for eval!",
    )
    assert_raises_like_torch(
        lambda lib: lib.nn.utils.fuse_linear_bn_eval(
            lib.nn.Linear(2, 3).eval(), lib.nn.BatchNorm1d(2).eval()
        )
    )


# --- nn.init's deprecated names: a FutureWarning, then the in-place init -------------------------
@pytest.mark.parametrize(
    "name, args", [("constant", (0.3,)), ("eye", ()), ("xavier_uniform", ()), ("normal", ())]
)
def test_deprecated_init_names_warn_and_initialise_as_torch(name, args):
    got = {}
    for lib in LIBS:
        lib.manual_seed(0)
        t = lib.empty(3, 4)
        with pytest.warns(FutureWarning) as record:
            r = getattr(lib.nn.init, name)(t, *args)
        assert r is t
        got[lib] = (t, str(record[0].message))
    assert_close(got[staged][0], got[torch][0])
    assert (
        got[staged][1]
        == got[torch][1]
        == (f"`nn.init.{name}` is now deprecated in favor of `nn.init.{name}_`.")
    )


# --- torch.testing.assert_allclose: deprecated, looser defaults, dtypes unchecked ---------------
@pytest.mark.parametrize(
    "actual, expected, kw",
    [
        ([1.0, 2.0], [1.0, 2.00015], {}),  # within float32's (1e-4, 1e-5)
        ([1.0, 2.0], [1.0, 2.001], {}),
        ([1.0, float("nan")], [1.0, float("nan")], {}),  # NaNs equal by default
        ([1.0, float("nan")], [1.0, float("nan")], dict(equal_nan=False)),
        ([1.0, 2.0], [1.0, 2.1], dict(rtol=0.1, atol=0.0)),
        ([1, 2], [1, 3], {}),
    ],
)
def test_assert_allclose_passes_and_fails_as_torchs(actual, expected, kw):
    verdict = {}
    for lib in LIBS:
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            try:
                lib.testing.assert_allclose(lib.tensor(actual), expected, **kw)
                verdict[lib] = "passed"
            except AssertionError as e:
                verdict[lib] = str(e).split("\n")[0]
        assert [w.category for w in record] == [FutureWarning]
    assert verdict[staged] == verdict[torch]


def test_assert_allclose_takes_mixed_dtypes_and_refuses_half_a_tolerance():
    for lib in LIBS:
        with pytest.warns(FutureWarning):
            lib.testing.assert_allclose(lib.tensor([1.0]), lib.tensor([1.0], dtype=lib.float64))
    with pytest.warns(FutureWarning):
        assert_raises_like_torch(
            lambda lib: lib.testing.assert_allclose(lib.ones(1), lib.ones(1), rtol=0.1)
        )


# --- what a CPU-only build answers -----------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
        "memory_stats",
        "is_bf16_supported",
        "is_tf32_supported",
        "get_arch_list",
    ],
)
def test_cuda_counters_answer_as_a_cpu_build(name):
    assert getattr(staged.cuda, name)() == getattr(torch.cuda, name)()


@pytest.mark.parametrize("name", ["memory_cached", "max_memory_cached"])
def test_cuda_cached_counters_warn_renamed_as_torch(name):
    for lib in LIBS:
        with pytest.warns(FutureWarning, match="has been renamed to"):
            assert getattr(lib.cuda, name)() == 0


@pytest.mark.parametrize(
    "name", ["get_rng_state", "initial_seed", "current_stream", "mem_get_info", "init"]
)
def test_cuda_calls_that_need_a_gpu_raise_as_torch(name):
    raises_like_torch(lambda lib: getattr(lib.cuda, name)(), "Torch not compiled with CUDA enabled")


@pytest.mark.parametrize(
    "call",
    [
        lambda acc: acc.current_device_index(),
        lambda acc: acc.set_device_index(0),
        lambda acc: acc.synchronize(),
        lambda acc: acc.memory_allocated(),
        lambda acc: acc.max_memory_allocated(),
        lambda acc: acc.empty_cache(),
        lambda acc: acc.reset_peak_memory_stats(),
        lambda acc: acc.device_index(0).__enter__(),
    ],
)
def test_accelerator_device_calls_raise_as_torch_without_one(call):
    assert_raises_like_torch(lambda lib: call(lib.accelerator))


def test_accelerator_device_index_none_is_a_no_op():
    for lib in LIBS:
        with lib.accelerator.device_index(None):
            assert lib.accelerator.current_accelerator() is None


def test_version_backends_and_distributed_answer_as_a_cpu_build():
    for name in ("cuda", "hip", "rocm", "xpu", "debug"):
        assert getattr(staged.version, name) == getattr(torch.version, name)
    assert staged.version.__version__ == staged.__version__
    # no OpenMP or oneDNN kernels here (torch's own build has both)
    assert staged.backends.openmp.is_available() is staged.backends.mkldnn.is_available() is False
    assert staged.distributed.is_nccl_available() is torch.distributed.is_nccl_available()
    assert staged.distributed.is_gloo_available() is staged.distributed.is_available()


def test_get_device_and_is_inference_functions():
    for lib in LIBS:
        t = lib.ones(2)
        assert lib.get_device(t) == -1 and lib.is_inference(t) is False
        with lib.inference_mode():
            assert lib.is_inference(lib.ones(2))


# --- nn.utils.skip_init: the module made without initialising its parameters ---------------------
def test_skip_init_makes_the_module_uninitialised_as_torch():
    for lib in LIBS:
        m = lib.nn.utils.skip_init(lib.nn.Linear, 5, 2, bias=False, dtype=lib.float64)
        assert isinstance(m, lib.nn.Linear) and m.bias is None
        assert tuple(m.weight.shape) == (2, 5) and m.weight.dtype == lib.float64
        assert m.weight.device.type == "cpu" and m.weight.requires_grad
    raises_like_torch(lambda lib: lib.nn.utils.skip_init(dict), "Expected a Module")
    assert_raises_like_torch(lambda lib: lib.nn.utils.skip_init(lib.nn.ReLU))


# --- torch.profiler: activities, schedule, step() and on_trace_ready ------------------------------
SCHEDULES = [
    dict(wait=1, warmup=1, active=2),
    dict(wait=1, warmup=1, active=2, repeat=2),
    dict(wait=2, warmup=1, active=1, repeat=1, skip_first=3),
    dict(wait=2, warmup=1, active=3, skip_first=1, skip_first_wait=1),
]


@pytest.mark.parametrize("kw", SCHEDULES, ids=str)
def test_profiler_schedule_gives_torchs_actions(kw):
    ours, theirs = staged.profiler.schedule(**kw), torch.profiler.schedule(**kw)
    assert [ours(i).name for i in range(20)] == [theirs(i).name for i in range(20)]


def test_profiler_schedule_refuses_and_warns_as_torch():
    raises_like_torch(
        lambda lib: lib.profiler.schedule(wait=0, warmup=0, active=0), "Invalid profiler schedule"
    )
    for lib in LIBS:
        with pytest.warns(UserWarning, match="Profiler won't be using warmup"):
            lib.profiler.schedule(wait=1, warmup=0, active=1)


BLOCKS = {f"s{i}" for i in range(10)}  # the record_function blocks the programs open


def _windows(lib, steps, **kw):
    """(step_num, the user blocks recorded) at each on_trace_ready call."""
    ready = []

    def on_ready(p):
        names = {e.name for e in p.events()}
        ready.append((p.step_num, sorted(names & (BLOCKS | {"ProfilerStep*"}))))

    x = lib.ones(3)
    act = lib.profiler.ProfilerActivity
    with lib.profiler.profile(activities=[act.CPU], on_trace_ready=on_ready, **kw) as p:
        for i in range(steps):
            with lib.profiler.record_function(f"s{i}"):
                x.exp()
            p.step()
    return ready


@pytest.mark.parametrize("kw, steps", [(SCHEDULES[0], 3), (SCHEDULES[1], 10), (SCHEDULES[2], 9)])
def test_profiler_records_the_scheduled_steps_as_torch(kw, steps):
    got = _windows(staged, steps, schedule=staged.profiler.schedule(**kw))
    assert got == _windows(torch, steps, schedule=torch.profiler.schedule(**kw))
    assert got  # each case hands over at least one window


def test_profiler_without_a_schedule_records_everything_and_hands_over_at_exit():
    assert _windows(staged, 2) == _windows(torch, 2) == [(2, ["s0", "s1"])]


def test_profiler_refuses_activities_without_the_cpu_as_a_cpu_build():
    raises_like_torch(
        lambda lib: lib.profiler.profile(
            activities=[lib.profiler.ProfilerActivity.CUDA]
        ).__enter__(),
        "No activities specified for the profiler",
    )


# --- torch.frombuffer: a 1-D tensor over a buffer's bytes -----------------------------------------
RAW = bytes(range(1, 13))


@pytest.mark.parametrize(
    "dtype, kw",
    [
        ("int32", {}),
        ("int32", dict(count=2, offset=4)),
        ("uint8", dict(offset=5)),
        ("float16", dict(count=3)),
        ("float32", dict(count=-2)),
        ("int64", dict(offset=4)),
        ("int32", dict(count=0)),
        ("int32", dict(offset=12)),
        ("int32", dict(offset=-1)),
        ("int32", dict(count=4)),
        ("int32", dict(offset=2)),
    ],
)
def test_frombuffer_reads_and_refuses_as_torch(dtype, kw):
    def call(lib):
        return lib.frombuffer(bytearray(RAW), dtype=getattr(lib, dtype), **kw)

    try:
        want = call(torch)
    except ValueError:
        assert_raises_like_torch(call)
        return
    assert_close(call(staged), want)


def test_frombuffer_shares_a_writable_buffer_and_copies_a_read_only_one():
    for lib in LIBS:
        buf = bytearray(RAW)
        t = lib.frombuffer(buf, dtype=lib.int16, offset=2, requires_grad=False)
        t[0] = -1
        assert buf[2:4] == b"\xff\xff"
        f = lib.frombuffer(bytearray(8), dtype=lib.float32, requires_grad=True)
        assert f.requires_grad and f.is_leaf
        with warnings.catch_warnings(record=True) as record:  # torch's: once a process
            warnings.simplefilter("always")
            r = lib.frombuffer(RAW, dtype=lib.uint8)
        assert r.tolist() == list(RAW)
        if lib is staged:
            assert "The given buffer is not writable" in str(record[0].message)


@pytest.mark.parametrize("use_gzip", [False, True])
def test_tensorboard_trace_handler_writes_each_window_as_torchs_files(tmp_path, use_gzip):
    import gzip
    import json

    names = {}
    for lib in LIBS:
        out = tmp_path / lib.__name__
        handler = lib.profiler.tensorboard_trace_handler(str(out), "w0", use_gzip=use_gzip)
        with lib.profiler.profile(
            schedule=lib.profiler.schedule(wait=0, warmup=1, active=1, repeat=2),
            on_trace_ready=handler,
        ) as p:
            for i in range(5):
                with lib.profiler.record_function(f"s{i}"):
                    lib.ones(2).exp()
                p.step()
        files = sorted(out.iterdir())
        suffix = ".pt.trace.json" + (".gz" if use_gzip else "")
        assert all(f.name.startswith("w0.") and f.name.endswith(suffix) for f in files)
        opened = gzip.open if use_gzip else open
        names[lib] = []
        for f in files:
            with opened(f, "rt") as fh:
                events = json.load(fh)["traceEvents"]
            names[lib].append(sorted({e["name"] for e in events if e["name"] in BLOCKS}))
    assert names[staged] == names[torch] == [["s1"], ["s3"]]


# --- nn.utils.prune: masks, the forward pre-hook, containers, global pruning and remove ----------
def _pruned(lib):
    prune = lib.nn.utils.prune
    lib.manual_seed(0)
    conv, lin, other = lib.nn.Conv2d(2, 4, 3), lib.nn.Linear(8, 5), lib.nn.Linear(6, 3)
    prune.random_unstructured(conv, name="weight", amount=0.3)
    prune.l1_unstructured(conv, name="bias", amount=2)
    prune.ln_structured(conv, name="weight", amount=0.5, n=2, dim=0)  # narrows the first mask
    prune.random_structured(lin, "weight", amount=2, dim=1)
    prune.l1_unstructured(lin, "weight", amount=0.25)
    prune.global_unstructured(
        [(lin, "bias"), (other, "weight")], pruning_method=prune.L1Unstructured, amount=7
    )
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype("float32")
    t = lib.tensor(x, requires_grad=True)
    y = conv(t).sum() + lin(lib.ones(3, 8)).sum() + other(lib.ones(2, 6)).sum()
    y.backward()
    tensors = [conv.weight_mask, conv.bias_mask, lin.weight_mask, lin.bias_mask]
    tensors += [other.weight_mask, conv.weight, conv.weight_orig.grad, t.grad, y.detach()]
    hooks = {h._tensor_name: h for h in conv._forward_pre_hooks.values()}
    facts = [
        sorted(n for n, _ in conv.named_parameters()),
        sorted(n for n, _ in conv.named_buffers()),
        type(hooks["weight"]).__name__,
        [type(m).__name__ for m in hooks["weight"]],
        prune.is_pruned(conv),
    ]
    prune.remove(conv, "weight")
    tensors.append(conv.weight.detach())
    facts += [sorted(n for n, _ in conv.named_parameters()), prune.is_pruned(lib.nn.ReLU())]
    return tensors, facts


def test_pruning_as_the_tutorial_gives_torchs_masks_values_and_gradients():
    (ours, our_facts), (theirs, their_facts) = _pruned(staged), _pruned(torch)
    for a, b in zip(ours, theirs, strict=True):
        assert_close(a.detach(), b.detach(), rtol=1e-6, atol=1e-6)
    assert our_facts == their_facts
    assert their_facts[3] == ["RandomUnstructured", "LnStructured"]


@pytest.mark.parametrize(
    "call",
    [
        lambda p, lib: p.l1_unstructured(lib.nn.Linear(2, 2), "weight", amount=1.5),
        lambda p, lib: p.l1_unstructured(lib.nn.Linear(2, 2), "weight", amount=-1),
        lambda p, lib: p.l1_unstructured(lib.nn.Linear(2, 2), "weight", amount="x"),
        lambda p, lib: p.l1_unstructured(lib.nn.Linear(2, 2), "weight", amount=5),
        lambda p, lib: p.ln_structured(lib.nn.Linear(2, 2), "bias", amount=1, n=1, dim=0),
        lambda p, lib: p.remove(lib.nn.Linear(2, 2), "weight"),
        lambda p, lib: p.global_unstructured(
            [(lib.nn.Linear(2, 2), "weight")], p.LnStructured, amount=1, n=1
        ),
    ],
)
def test_pruning_refuses_as_torch(call):
    assert_raises_like_torch(lambda lib: call(lib.nn.utils.prune, lib))
