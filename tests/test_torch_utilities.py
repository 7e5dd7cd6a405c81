"""torch's small top-level utilities against torch 2.13: printing and ``set_printoptions``,
``testing.assert_close``, ``amp.GradScaler``, the global switches, dtype
queries, and a tensor's memory facts (strides, offsets, sizes)."""

from __future__ import annotations

import os
import subprocess
import sys
import typing
import warnings

import numpy as np
import pytest
import torch

import staged

ARRAYS = [
    np.random.RandomState(0).randn(3, 4).astype(np.float32) * 1000,
    np.array([1.0, 2.0, 3.0], np.float32),
    np.array([1.5, -2.25], np.float32),
    np.array([1e-8, 1.0], np.float32),
    np.array([np.nan, 1.0, np.inf], np.float32),
    np.array(3.14159, np.float32),
    np.array([1e10, 1.0], np.float32),
    np.array([-0.0, 0.0], np.float32),
    np.zeros((0, 3), np.float32),
    np.array([[1, -200], [3, 4]], np.float32),
    np.array([0.1, 0.25], np.float64),
    np.array([1 + 2j], np.complex64),
    np.array([1, 2], np.int64),
    np.array([1, 2], np.int32),
    np.array([True, False]),
    np.zeros(0, np.int64),
    np.zeros((2, 0), np.int64),
    np.zeros(0, bool),
    np.zeros(0, np.complex64),
    np.zeros(0, np.float64),
]


def _same_text(ours: str, theirs: str) -> None:
    assert ours.replace("staged.", "torch.") == theirs


@pytest.mark.parametrize("k", range(len(ARRAYS)))
def test_tensors_print_as_torchs(k):
    _same_text(repr(staged.tensor(ARRAYS[k])), repr(torch.tensor(ARRAYS[k])))


@pytest.mark.parametrize(
    "options", [dict(precision=2), dict(sci_mode=True), dict(profile="short"), dict(sci_mode=False)]
)
def test_set_printoptions_changes_the_text_as_torchs(options):
    x = np.array([[0.123456, 12.5], [-3.25, 1e-3]], np.float32)
    try:
        staged.set_printoptions(**options)
        torch.set_printoptions(**options)
        _same_text(repr(staged.tensor(x)), repr(torch.tensor(x)))
    finally:
        staged.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")


CLOSE_CASES = [
    ((1.0, 2.0, 3.0), (1.0, 2.1, 3.0), {}),
    ((1.0, 2.0), (1.0,), {}),
    ([1, 2], [1, 3], {}),
    ([float("nan")], [float("nan")], {}),
    ([float("nan")], [float("nan")], {"equal_nan": True}),
    ([True], [False], {}),
    ([1.0, 2.0], [1.0, 2.05], {"rtol": 0.1, "atol": 0.0}),
]


@pytest.mark.parametrize("a,b,kw", CLOSE_CASES)
def test_assert_close_passes_and_fails_as_torchs_with_its_messages(a, b, kw):
    def outcome(lib):
        try:
            lib.testing.assert_close(lib.tensor(a), lib.tensor(b), **kw)
        except AssertionError as err:
            return str(err).replace("staged.", "torch.")
        return None

    assert outcome(staged) == outcome(torch)


def test_assert_close_on_containers_numbers_and_dtypes():
    def outcome(lib, a, b, **kw):
        try:
            lib.testing.assert_close(a(lib), b(lib), **kw)
        except (AssertionError, TypeError, ValueError) as err:
            return type(err).__name__, str(err).replace("staged.", "torch.")
        return None

    cases = [
        (
            lambda lib: [lib.tensor(1.0), lib.tensor(2.0)],
            lambda lib: [lib.tensor(1.0), lib.tensor(3.0)],
            {},
        ),
        (lambda lib: {"a": lib.tensor(1.0)}, lambda lib: {"a": lib.tensor(2.0)}, {}),
        (lambda lib: 1.0, lambda lib: 1.1, {}),
        (lambda lib: lib.ones(2), lambda lib: lib.ones(2, dtype=lib.float64), {}),
        (
            lambda lib: lib.ones(2),
            lambda lib: lib.ones(2, dtype=lib.float64),
            {"check_dtype": False},
        ),
        (lambda lib: lib.ones(2), lambda lib: lib.ones(2), {"rtol": 0.1}),
    ]
    for a, b, kw in cases:
        assert outcome(staged, a, b, **kw) == outcome(torch, a, b, **kw)
    with pytest.raises(TypeError, match="No comparison pair"):
        staged.testing.assert_close(staged.tensor(1.0), 1.0)
    with pytest.raises(AssertionError, match="^custom$"):
        staged.testing.assert_close(staged.ones(1), staged.zeros(1), msg="custom")


def _scaled_training(lib):
    """Loss scaling with an overflowing step in the middle: skipped, the scale halved."""
    w = lib.nn.Parameter(lib.tensor([1.0, -2.0]))
    opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=2)
    seen = []
    for step in range(6):
        opt.zero_grad()
        loss = (w * w).sum() * (1e36 if step == 2 else 1.0)  # inf once scaled
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        seen.append(w.grad.clone())
        scaler.step(opt)
        scaler.update()
        seen.append(scaler.get_scale())
    return w.detach(), seen, scaler.state_dict()


def test_grad_scaler_scales_skips_and_adapts_as_torchs():
    (w, seen, state), (tw, tseen, tstate) = _scaled_training(staged), _scaled_training(torch)
    np.testing.assert_allclose(w.numpy(), tw.numpy(), rtol=1e-6)
    for s, t in zip(seen, tseen):
        if isinstance(t, float):
            assert s == t
        else:
            np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-6)
    assert {k: float(v) for k, v in state.items()} == {k: float(v) for k, v in tstate.items()}
    scaler = staged.amp.GradScaler("cpu")
    opt = staged.optim.SGD([staged.nn.Parameter(staged.ones(1))], lr=0.1)
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: 0)


def test_a_cuda_grad_scaler_disables_itself():
    with pytest.warns(UserWarning, match="CUDA is not available.  Disabling"):
        scaler = staged.amp.GradScaler()
    loss = staged.tensor(2.0)
    assert not scaler.is_enabled() and scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    with staged.autocast("cpu", enabled=False):  # autocast itself: tests/test_autocast.py
        assert not staged.is_autocast_enabled()


def test_global_switches_read_back_as_torchs():
    for lib in (staged, torch):
        lib.use_deterministic_algorithms(True, warn_only=True)
    try:
        for name in (
            "are_deterministic_algorithms_enabled",
            "is_deterministic_algorithms_warn_only_enabled",
            "get_deterministic_debug_mode",
        ):
            assert getattr(staged, name)() == getattr(torch, name)(), name
    finally:
        for lib in (staged, torch):
            lib.use_deterministic_algorithms(False)
    with pytest.raises(RuntimeError, match="expected 0, 1, or 2, but got 5"):
        staged.set_deterministic_debug_mode(5)
    staged.set_float32_matmul_precision("high")
    assert staged.get_float32_matmul_precision() == "high"
    with pytest.warns(UserWarning, match="has no effect"):
        staged.set_float32_matmul_precision("low")
    staged.set_float32_matmul_precision("highest")
    staged.set_anomaly_enabled(True)
    assert staged.is_anomaly_enabled() and staged.is_anomaly_check_nan_enabled()
    staged.set_anomaly_enabled(False)
    assert not staged.is_anomaly_enabled()


DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


def test_dtype_queries_and_names_are_torchs():
    for a in DTYPES:
        for b in DTYPES:
            sa, sb, ta, tb = (getattr(lib, n) for lib in (staged, torch) for n in (a, b))
            assert str(staged.promote_types(sa, sb)) == str(torch.promote_types(ta, tb)).replace(
                "torch.", "staged."
            )
            assert staged.can_cast(sa, sb) == torch.can_cast(ta, tb), (a, b)
    assert staged.result_type(staged.tensor([1, 2]), 1.0) is staged.float32
    assert staged.int is staged.int32 and staged.short is staged.int16
    assert staged.typename(staged.ones(2, dtype=staged.float64)) == "torch.DoubleTensor"
    assert staged.scalar_tensor(3).dtype is staged.float32
    assert staged.pi == torch.pi and staged.newaxis is None


@pytest.mark.parametrize(
    "view",
    [
        lambda x: x,
        lambda x: x.t(),
        lambda x: x[1:, ::2],
        lambda x: x[:, 1],
        lambda x: x.reshape(4, 3),
    ],
)
def test_strides_offsets_and_sizes_are_torchs(view):
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    s, t = view(staged.tensor(a)), view(torch.tensor(a))
    assert s.stride() == t.stride() and s.storage_offset() == t.storage_offset()
    assert (s.element_size(), s.itemsize, s.nbytes, s.ndimension()) == (
        t.element_size(),
        t.itemsize,
        t.nbytes,
        t.ndimension(),
    )
    assert s.layout == staged.strided and s.stride(0) == t.stride(0)
    with pytest.raises(RuntimeError, match="Cannot access accelerator device"):
        s.pin_memory()


def test_set_default_tensor_type_warns_and_sets_the_default_dtype():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        staged.set_default_tensor_type(staged.DoubleTensor)
    try:
        assert "deprecated" in str(caught[0].message)
        assert staged.tensor([1.0]).dtype is staged.float64
    finally:
        staged.set_default_dtype(staged.float32)


def test_torch_cuda_amp_names_answer_as_a_cpu_build():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        assert not staged.cuda.amp.GradScaler().is_enabled()
    with pytest.warns(FutureWarning, match="cuda.amp.autocast"):
        with staged.cuda.amp.autocast(enabled=False):
            pass


def test_jit_entry_points_return_what_they_are_given_and_archives_raise():
    def f(x):
        return x * 2

    lin = staged.nn.Linear(2, 1)
    assert staged.jit.script(f) is f and staged.jit.trace(lin, staged.ones(1, 2)) is lin
    assert staged.jit.ignore(f) is f and staged.jit.ignore(drop=True)(f) is f
    assert not staged.jit.is_scripting() and staged.jit.wait(staged.jit.fork(f, 3)) == 6
    with pytest.raises(NotImplementedError, match="TorchScript archives"):
        staged.jit.save(lin, "model.pt")


def test_what_torchvision_calls_at_import_and_construction_runs_as_torchs():
    """torch.fx.wrap at a module's top level (Swin, stochastic depth), torch._C's usage log
    (every model's constructor), jit overload declarations before a method (DenseNet),
    torch._assert (ViT's input check) and an Identity given a layer's arguments (timm)."""

    def f(x):
        return x

    assert staged.fx.wrap(f) is f and staged.fx.wrap("f") == "f"
    assert staged._C._log_api_usage_once("torchvision.models.resnet.ResNet") is None

    class Layer(staged.nn.Module):
        @staged.jit._overload_method
        def forward(self, x: list) -> list: ...

        @staged.jit._overload_method
        def forward(self, x: staged.Tensor) -> staged.Tensor: ...  # noqa: F811

        def forward(self, x):  # noqa: F811  (DenseNet's pattern)
            return x * 2

    np.testing.assert_array_equal(Layer()(staged.ones(2)).numpy(), [2.0, 2.0])
    from staged.jit.annotations import BroadcastingList2, List  # timm's DenseNet

    assert List is BroadcastingList2 is typing.List  # noqa: UP006  (typing's, as torch's)
    assert staged.jit.Final is typing.Final and staged.jit.interface(Layer) is Layer
    for lib in (staged, torch):
        x = lib.ones(2)
        assert lib.nn.Identity(54, unused_argument=0.1, inplace=True)(x) is x  # timm's GhostNet
        lib._assert(lib.tensor(True), "fine")
        with pytest.raises(AssertionError, match="Wrong image height!"):
            lib._assert(3 == 4, "Wrong image height!")


def test_variable_makes_a_new_leaf_as_torchs():
    for lib in (staged, torch):
        x = lib.ones(2, requires_grad=True) * 3
        v = lib.autograd.Variable(x, requires_grad=True)
        assert v.is_leaf and v.requires_grad and isinstance(lib.zeros(1), lib.autograd.Variable)
        assert not lib.autograd.Variable(x).requires_grad
        assert lib.autograd.grad_mode.no_grad is lib.no_grad


def test_submodules_torch_imports_are_attributes_after_a_plain_import():
    """``torch.distributions.Normal`` and ``torch.multiprocessing.spawn`` after ``import
    torch`` alone (a mixture density network's idiom), loaded on first use."""
    code = (
        "import sys, staged\n"
        "assert 'staged.distributions' not in sys.modules\n"
        "d = staged.distributions.Normal(staged.zeros(2), 1.0)\n"
        "print(d.log_prob(staged.ones(2)).tolist(), callable(staged.multiprocessing.spawn))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(staged.__file__)))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    expected = torch.distributions.Normal(torch.zeros(2), 1.0).log_prob(torch.ones(2))
    assert out.stdout.split() == [*map(str, str(expected.tolist()).split()), "True"]
