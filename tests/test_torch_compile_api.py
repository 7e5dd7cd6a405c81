"""torch.compile's own arguments, ``torch.compiler`` and ``torch._dynamo`` (Note
[torch.compile's arguments] in staged/runtime/compiled.py): what programs written for
torch.compile pass and call means what it can here, and the rest says why not."""

from __future__ import annotations

import copy
import importlib
import warnings

import numpy as np
import pytest
import torch

import staged
from staged.runtime import compile_config
from staged.runtime.compiled import Compiled
from staged.tracing.symbolic import CaptureError


def _mlp(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 2))


def _losses(lib, wrap):
    m = _mlp(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    step = wrap(step)
    x = lib.tensor(np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32))
    y = lib.tensor(np.arange(8) % 2)
    return [step(x, y).item() for _ in range(3)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fullgraph": True},
        {"fullgraph": False, "dynamic": None},
        {"mode": "reduce-overhead"},
        {"mode": "max-autotune", "backend": "inductor"},
        {"mode": "max-autotune-no-cudagraphs", "options": {"triton.cudagraphs": False}},
        {"mode": None, "mode_default": True},
    ],
    ids=lambda k: ",".join(k),
)
def test_torch_compile_arguments_compile_the_step_with_torchs_numbers(kwargs):
    kwargs = {k: v for k, v in kwargs.items() if k != "mode_default"}
    f = staged.compile(**kwargs)
    got = _losses(staged, lambda s: f(s))
    np.testing.assert_allclose(got, _losses(torch, lambda s: s), rtol=1e-5)
    assert isinstance(f(lambda x: x), Compiled)


@pytest.mark.parametrize(
    "kwargs", [{"backend": "eager"}, {"backend": "aot_eager"}, {"disable": True}]
)
def test_backends_that_run_eagerly_and_disable_return_the_function(kwargs):
    fn = _mlp(staged)
    assert staged.compile(fn, **kwargs) is fn
    assert staged.compile(**kwargs)(fn) is fn


def test_what_cannot_mean_anything_here_says_why():
    with pytest.raises(TypeError, match="cannot hand the graph to a custom torch.compile backend"):
        staged.compile(lambda x: x, backend=lambda gm, example_inputs: gm)
    with pytest.raises(ValueError, match="'max-autotune'.*got 'fast'"):
        staged.compile(lambda x: x, mode="fast")


def test_module_compile_takes_torchs_modes():
    m, ref = _mlp(staged), _mlp(torch)
    m.compile(mode="reduce-overhead", fullgraph=True)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(
        m(staged.tensor(x)).detach().numpy(), ref(torch.tensor(x)).detach().numpy(), rtol=1e-6
    )


def test_torch_compiler_names():
    seen = []

    @staged.compile
    def f(x):
        seen.append(staged.compiler.is_compiling())
        return helper(x) * 2

    @staged.compiler.disable
    def helper(x):  # traced with its caller: staged never splits a graph
        return x + 1

    assert staged.compiler.disable(recursive=False)(helper) is helper
    with pytest.warns(UserWarning, match=r"changed seen \(\[\] -> \[True\]\)"):
        assert f(staged.ones(2)).tolist() == [4.0, 4.0]
    assert seen == [True] and not staged.compiler.is_compiling()
    assert set(staged.compiler.list_backends()) == {"inductor", "eager", "aot_eager"}
    assert staged.compiler.reset() is None and not staged.compiler.is_exporting()


def test_dynamo_config_sets_the_recompile_limit_and_suppresses_errors(monkeypatch):
    dynamo = importlib.import_module("staged._dynamo")
    assert importlib.import_module("staged._dynamo.config") is compile_config is dynamo.config
    monkeypatch.setattr(compile_config, "recompile_limit", 8)
    staged._dynamo.config.cache_size_limit = 2  # torch's older name
    assert compile_config.recompile_limit == 2
    f = staged.compile(lambda x: x + 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 5):
            f(staged.ones(n))
    assert [str(w.message).split(" (")[0] for w in caught if "recompile" in str(w.message)] == [
        "staged.compile: test_dynamo_config_sets_the_recompile_limit_and_suppresses_errors."
        "<locals>.<lambda> would be re-traced and compiled for the 3rd time"
    ]

    def branchy(x):
        return x * 2 if x.sum() > 0 else x

    with pytest.raises(CaptureError):
        staged.compile(branchy)(staged.ones(2))
    monkeypatch.setattr(compile_config, "suppress_errors", True)
    with pytest.warns(UserWarning, match="branchy eagerly"):
        assert staged.compile(branchy)(staged.ones(2)).tolist() == [2.0, 2.0]
    dynamo.mark_dynamic(staged.ones(2), 0)  # a hint: nothing to check but that it is there


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.compile's imports of torch.jit
def test_a_compiled_module_is_a_module_as_torchs_is(tmp_path):
    """Note [optimized modules]: torch's OptimizedModule's keys, chaining, copies."""
    m, ref = _mlp(staged), _mlp(torch)
    cm, cref = staged.compile(m), torch.compile(ref)
    assert isinstance(cm, staged.nn.Module) and cm._orig_mod is m
    assert list(cm.state_dict()) == list(cref.state_dict())  # "_orig_mod.0.weight", ...
    assert [n for n, _ in cm.named_parameters()] == [n for n, _ in cref.named_parameters()]
    assert cm.train() is cm and cm.to("cpu") is cm and cm.eval() is cm and not m.training
    assert repr(cm) == repr(cref)
    m.note = "the model's"  # what it lacks is the model's, then the compiled function's
    assert cm.note == "the model's" and cm.fn is m
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(
        cm(staged.tensor(x)).detach().numpy(), cref(torch.tensor(x)).detach().numpy(), rtol=1e-6
    )
    assert cm.traces == 1 and "staged.compile" in cm.explanation()
    # a checkpoint saved from torch's compiled model loads into staged's, and back
    torch.save(cref.state_dict(), tmp_path / "t.pt")
    other = staged.compile(_mlp(staged))
    other.load_state_dict(staged.load(tmp_path / "t.pt"))
    staged.save(cm.state_dict(), tmp_path / "s.pt")
    cref.load_state_dict(torch.load(tmp_path / "s.pt"))
    for c in (copy.deepcopy(cm), staged.load(_saved(cm, tmp_path), weights_only=False)):
        assert type(c) is type(cm) and c._orig_mod is not m
        np.testing.assert_allclose(
            c(staged.tensor(x)).detach().numpy(), cm(staged.tensor(x)).detach().numpy()
        )
        assert c.traces == 1  # compiled anew, with the same arguments


def _saved(obj, tmp_path):
    staged.save(obj, tmp_path / "whole.pt")
    return tmp_path / "whole.pt"


def test_messages_name_a_compiled_module_by_its_class():
    cm = staged.compile(_mlp(staged), dynamic=False)  # a trace per batch size
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 11):
            cm(staged.ones(n, 4))
    (msg,) = [str(w.message) for w in caught if "recompile" in str(w.message)]
    assert msg.startswith(
        "staged.compile: Sequential would be re-traced and compiled for the 9th time"
    )
    assert "staged.compile(Sequential): backend llvm-cpu" in cm.explanation()


def test_a_compiled_modules_warnings_point_at_the_users_line():
    """Through OptimizedModule's forward, not at staged/nn/optimized.py."""
    cm = staged.compile(_mlp(staged), dynamic=False)
    compile_config.recompile_limit, limit = 1, compile_config.recompile_limit
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for n in range(1, 4):
                cm(staged.ones(n, 4))
    finally:
        compile_config.recompile_limit = limit
    (w,) = [w for w in caught if "recompile limit" in str(w.message)]
    assert w.filename == __file__
