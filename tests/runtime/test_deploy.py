"""Deployable steps: save a compiled training step, load it in a fresh process without
the compiler or the model code, and continue the loss trajectory exactly."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import staged
from staged import nn, optim
from staged.runtime import cpu
from models.common import classification_step


DEPLOY_RTOL = 1e-5


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A compiled SGD-with-momentum step run 3 times, saved, then run 3 more times."""
    staged.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    step = classification_step(model, opt)

    cstep = staged.compile(step)
    x, y = staged.randn(16, 6), staged.randint(0, 3, (16,))
    for _ in range(3):
        cstep(x, y)
    out = tmp_path_factory.mktemp("deployed")
    cstep.save(out, names={p: k for k, p in model.state_dict(keep_vars=True).items()})
    np.save(out / "x.npy", x.numpy())
    np.save(out / "y.npy", y.numpy())
    after = [cstep(x, y).item() for _ in range(3)]
    return out, after, {k: v.numpy() for k, v in model.state_dict().items()}


def test_saved_files_and_manifest(trained):
    out, _, _ = trained
    m = json.loads((out / "manifest.json").read_text())
    assert {p.name for p in out.iterdir()} >= {"step.vmfb", "params.irpa", "manifest.json"}
    assert [a["name"] for a in m["args"]] == ["x", "y"]
    names = [s["name"] for s in m["state"]]
    assert names[:4] == ["0.weight", "0.bias", "2.weight", "2.bias"] and len(names) == 11
    assert {"SGD.param_groups[0].-lr", "SGD.param_groups[0].momentum"} <= set(names)
    assert m["backend"] == "llvm-cpu" and m["iree_run_module"].startswith("iree-run-module")


def test_loaded_step_continues_in_a_fresh_process_without_the_compiler(trained):
    out, after, params = trained
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        import staged.runtime
        step = staged.runtime.load({str(out)!r})
        x, y = np.load({str(out / "x.npy")!r}), np.load({str(out / "y.npy")!r})
        losses = [step(x, y).item() for _ in range(3)]
        state = {{k: v.tolist() for k, v in step.state_dict().items()}}
        print(json.dumps({{"losses": losses, "state": state,
                           "compiler": "iree.compiler" in sys.modules}}))
    """)
    env = dict(os.environ, PYTHONPATH=str(Path(staged.__file__).parent.parent))
    res = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=out,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["compiler"] is False
    # the deployable module (state in globals) is compiled separately from the in-process
    # one (state as arguments), so IREE may fuse, order the length-12 sums and contract
    # multiply-adds differently (12 eps = 7e-7 of the terms per dot product in float32),
    # compounded over three steps: DEPLOY_RTOL
    np.testing.assert_allclose(got["losses"], after, rtol=DEPLOY_RTOL)
    for k, v in params.items():
        np.testing.assert_allclose(np.asarray(got["state"][k], v.dtype), v, rtol=1e-5, atol=1e-7)


def test_iree_run_module_runs_the_saved_step(trained):
    out, _, _ = trained
    tool = shutil.which("iree-run-module") or str(Path(sys.executable).parent / "iree-run-module")
    m = json.loads((out / "manifest.json").read_text())
    work = out / "cli"
    work.mkdir(exist_ok=True)
    for f in ("step.vmfb", "params.irpa"):
        shutil.copy(out / f, work / f)
    shutil.copy(out / "x.npy", work / "x.npy")
    shutil.copy(out / "y.npy", work / "y.npy")
    cmd = m["iree_run_module"].replace("iree-run-module", tool, 1).split()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=work, timeout=120)
    assert res.returncode == 0, res.stderr
    first = staged.runtime.load(out)(np.load(out / "x.npy"), np.load(out / "y.npy")).item()
    # the loss is result 0; the last result is the index-check report (manifest "checks")
    lines = res.stdout.strip().splitlines()
    assert lines[-1] == "1xi64=0" and m["checks"]  # one check, passed
    value = float(next(x for x in lines if x.startswith("f32=")).split("=")[1])
    assert value == pytest.approx(first, rel=1e-5)


def test_save_needs_a_reusable_trace(tmp_path):
    w = staged.randn(3, requires_grad=True)
    store = {}

    def step(x):
        loss = (x * w).sum()
        loss.backward()
        with staged.no_grad():
            if "buf" not in store:
                store["buf"] = w.grad.clone()
            w.sub_(store["buf"])
            w.grad = None
        return loss

    cstep = staged.compile(step)
    with pytest.raises(RuntimeError, match="call the compiled step once before saving"):
        cstep.save(tmp_path)
    cstep(staged.randn(3))
    # the item the first call stored (Note [tensor stores]) fails its trace's guard
    with pytest.raises(
        RuntimeError,
        match=re.escape("no longer matches the Python state it read (store['buf']: <unbound> -> a"),
    ):
        cstep.save(tmp_path)

    # the first call of a step with momentum made the optimizer's buffers (one-shot)
    lin = nn.Linear(3, 2)
    cstep = staged.compile(
        classification_step(lin, optim.SGD(lin.parameters(), lr=0.1, momentum=0.9))
    )
    cstep(staged.randn(2, 3), staged.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="call the step once more before saving"):
        cstep.save(tmp_path)


def test_load_rejects_a_directory_that_is_not_a_saved_step(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="not a saved staged step"):
        staged.runtime.load(tmp_path)


@pytest.fixture
def copy(trained, tmp_path):
    """A private copy of the saved step's directory."""
    return Path(shutil.copytree(trained[0], tmp_path / "step"))


def _xy(out):
    return np.load(out / "x.npy"), np.load(out / "y.npy")


@pytest.mark.parametrize("name", ["step.vmfb", "params.irpa"])
def test_a_flipped_byte_in_either_file_is_refused_before_loading(copy, name):
    """A flipped byte crashed the process (SIGSEGV, SIGILL), changed the losses, or (in the
    archive) silently made a weight 2.5e35."""
    path = copy / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(
        staged.runtime.deploy.IntegrityError,
        match=rf"{name}: sha256 [0-9a-f]{{64}} does not match the manifest's",
    ):
        staged.runtime.load(copy)


def test_recorded_versions_are_checked(copy):
    manifest = json.loads((copy / "manifest.json").read_text())
    m = json.loads(json.dumps(manifest))
    m["versions"]["iree-compiler"] = "3.0.0"
    (copy / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(
        staged.runtime.deploy.IntegrityError,
        match=r"compiled by IREE 3\.0\.0, this runtime is IREE 3\.",
    ):
        staged.runtime.load(copy)
    m = json.loads(json.dumps(manifest))
    m["versions"]["staged"] = "0.0.1"
    m["manifest_sha256"] = staged.runtime.deploy.manifest_sha256(m)  # edited on purpose
    (copy / "manifest.json").write_text(json.dumps(m))
    with pytest.warns(RuntimeWarning, match=r"saved by staged 0\.0\.1, loaded by staged"):
        staged.runtime.load(copy)
    m["format"] = "staged-step/1"
    (copy / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ValueError, match=r"format 'staged-step/1'.*save the step again"):
        staged.runtime.load(copy)


def test_a_cpu_without_the_code_s_extensions_is_refused_naming_them(copy, monkeypatch):
    """Note [code for another CPU]: a step saved for the host's CPU (AVX-512 where it has
    it) stopped a machine without those extensions with SIGILL at its first call; load
    now names what this CPU lacks. Simulated: this CPU without one extension."""
    m = json.loads((copy / "manifest.json").read_text())
    needed = m["cpu"]["requires"]
    if needed is None:
        pytest.skip("no /proc/cpuinfo here: the host's extensions are unknown")
    assert m["cpu"]["target"] == "host" and "sse2" in needed
    assert set(needed) <= cpu.isa_flags()
    gone = "avx2" if "avx2" in needed else needed[-1]
    monkeypatch.setattr(cpu, "isa_flags", lambda: frozenset(needed) - {gone})
    with pytest.raises(
        staged.runtime.deploy.IntegrityError,
        match=rf"compiled for a CPU \(host where it was saved\) with {gone}, which this CPU "
        r"lacks: .*SIGILL.*target_cpu='x86-64-v3'",
    ):
        staged.runtime.load(copy)


def test_a_step_saved_for_an_x86_64_level_runs_where_that_level_does(tmp_path):
    """``target_cpu="x86-64-v3"``: code any AVX2 machine runs, recorded as such; its
    losses equal the host-compiled step's to float rounding."""
    needed = cpu.required("x86-64-v3")
    if cpu.missing(needed) or cpu.isa_flags() is None:
        pytest.skip(f"this CPU is not x86-64-v3 (lacks {cpu.missing(needed)})")
    staged.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    step = staged.compile(classification_step(model, optim.SGD(model.parameters(), lr=0.1)))
    x, y = staged.randn(16, 6), staged.randint(0, 3, (16,))
    step(x, y)
    step(x, y)
    step.save(tmp_path / "v3", target_cpu="x86-64-v3")
    step.save(tmp_path / "host")
    m = json.loads((tmp_path / "v3" / "manifest.json").read_text())
    assert m["cpu"] == {"target": "x86-64-v3", "requires": needed}
    assert {"avx2", "fma", "sse4_2"} <= set(needed) and "avx512f" not in needed
    v3, host = (staged.runtime.load(tmp_path / d) for d in ("v3", "host"))
    assert (tmp_path / "v3" / "step.vmfb").read_bytes() != (
        tmp_path / "host" / "step.vmfb"
    ).read_bytes() or "avx512f" not in cpu.isa_flags()
    for _ in range(3):
        np.testing.assert_allclose(v3(x, y), host(x, y), rtol=DEPLOY_RTOL)
    with pytest.raises(ValueError, match=r"target_cpu='skylake': use 'host' .* 'x86-64-v3'"):
        step.save(tmp_path / "bad", target_cpu="skylake")


def test_arguments_are_dtype_checked_bound_by_name_and_taken_from_any_array(trained):
    out, _, _ = trained
    step = staged.runtime.load(out)
    x, y = _xy(out)
    start = step.state_dict()

    def loss(*args, **kwargs):
        step.load_state_dict(start)
        return step(*args, **kwargs).item()

    class ArrayLike:  # anything with __array__
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    ref = loss(x, y)
    assert loss(y=y, x=x) == ref and loss(x, y=y) == ref
    assert loss(staged.tensor(x), staged.tensor(y)) == ref
    assert loss(ArrayLike(x), ArrayLike(y)) == ref
    assert loss(x, y.astype(np.int32)) == ref  # lossless widening
    # float labels were cast to int64 silently (0.9 -> class 0)
    with pytest.raises(
        TypeError,
        match=r"argument y: expected int64, got float64, which does "
        r"not convert to int64 without loss",
    ):
        step(x, y + 0.9)
    with pytest.raises(TypeError, match=r"argument x: expected float32, got float64"):
        step(x.astype(np.float64), y)
    with pytest.raises(
        TypeError,
        match=r"unexpected keyword argument 'labels'; its arguments "
        r"are x, y",
    ):
        step(x, labels=y)
    with pytest.raises(TypeError, match=r"multiple values for argument 'x'"):
        step(x, y, x=x)
    with pytest.raises(TypeError, match=r"^tests/runtime/test_deploy.py:\d+: .*missing the arg"):
        step(x)  # the errors name the caller's line
    with pytest.raises(ValueError, match=r"argument x: expected shape \[16, 6\], got \[16, 5\]"):
        step(x[:, :5], y)


def test_state_can_be_read_restored_and_saved(trained, tmp_path):
    """A NaN batch need not ruin a deployment: restore the state read before it."""
    out, after, _ = trained
    step = staged.runtime.load(out)
    x, y = _xy(out)
    before = step.state_dict()
    step(np.full_like(x, np.nan), y)
    assert all(np.isnan(v).all() for k, v in step.state_dict().items() if "weight" in k)
    step.load_state_dict(before)
    for k, v in step.state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    first = step(x, y).item()
    np.testing.assert_allclose(first, after[0], rtol=DEPLOY_RTOL)  # as the in-process step did
    saved = step.save(tmp_path / "resaved")
    again = staged.runtime.load(saved)
    np.testing.assert_array_equal(again(x, y).item(), step(x, y).item())
    with pytest.raises(KeyError, match=r"unexpected keys \['nope'\], missing keys \['0.bias'\]"):
        step.load_state_dict(
            {**{k: v for k, v in before.items() if k != "0.bias"}, "nope": before["0.bias"]}
        )
    with pytest.raises(ValueError, match=r"state 0.weight: expected shape \[12, 6\]"):
        step.load_state_dict({**before, "0.weight": before["0.weight"][:, :5]})


def test_a_python_scalar_argument_must_be_the_traced_value(tmp_path):
    """A scalar argument is built into the saved step: another value used to be ignored
    silently; now it is refused, naming both values."""
    w = staged.ones(3, requires_grad=True)

    def step(x, scale, mode="sum"):
        loss = (x * w).sum() * scale
        loss.backward()
        with staged.no_grad():
            w.sub_(0.1 * w.grad)
            w.grad = None
        return loss

    cstep = staged.compile(step)
    for _ in range(2):
        cstep(staged.ones(3), 2.0)
    cstep.save(tmp_path)
    loaded = staged.runtime.load(tmp_path)
    assert loaded(staged.ones(3), 2.0).item() == pytest.approx(cstep(staged.ones(3), 2.0).item())
    assert loaded(staged.ones(3), scale=2.0, mode="sum").item() > 0
    with pytest.raises(
        ValueError,
        match=r"argument scale=3.0: this step was traced with "
        r"scale=2.0 and has that value built in",
    ):
        loaded(staged.ones(3), 3.0)


@pytest.mark.parametrize("dropout", [0.0, 0.3], ids=["host state", "counter twin"])
def test_a_saved_step_has_the_learning_rate_a_scheduler_set_after_the_last_call(tmp_path, dropout):
    """The lr is state of a saved step; a scheduler's ``step()`` after the last call had
    not reached the device value the archive was written from: the deployed step trained
    on with the lr of the last call."""
    staged.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(dropout), nn.Linear(8, 3))
    opt = optim.Adam(model.parameters(), lr=0.05)
    sched = optim.lr_scheduler.StepLR(opt, 1, 0.1)
    cstep = staged.compile(classification_step(model, opt))
    x, y = staged.randn(16, 6), staged.randint(0, 3, (16,))
    for _ in range(2):
        cstep(x, y)
        sched.step()
    cstep.save(tmp_path)
    loaded = staged.runtime.load(tmp_path)
    lr = {k: v for k, v in loaded.state_dict().items() if k.endswith("lr")}
    assert list(lr) == ["Adam.param_groups[0].lr"], list(lr)
    np.testing.assert_allclose(lr["Adam.param_groups[0].lr"], 0.05 * 0.01, rtol=1e-6)
    if dropout == 0.0:  # the counter twin's dropout masks are not the host stream's
        got = [loaded(x, y).item() for _ in range(2)]
        want = [cstep(x, y).item() for _ in range(2)]
        np.testing.assert_allclose(got, want, rtol=DEPLOY_RTOL)


def test_a_saved_steps_hyper_parameters_computed_from_one_key_change_together(tmp_path):
    """Note [hyper-parameters of a saved step]: AdamW's update uses ``lr`` and ``1 - lr *
    weight_decay``, both state of a saved step; setting the lr alone with load_state_dict
    trained with two learning rates at once, silently. It warns now, naming the other;
    both set, the deployed step trains as the optimizer with that lr does."""
    staged.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.5)
    cstep = staged.compile(classification_step(model, opt))
    x, y = staged.randn(16, 6), staged.randint(0, 3, (16,))
    for _ in range(2):
        cstep(x, y)
    cstep.save(tmp_path)
    loaded = staged.runtime.load(tmp_path)
    lr, decay = "AdamW.param_groups[0].lr", "AdamW.param_groups[0].1 - lr * weight_decay"
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["hyper"][decay] == ["0:lr", "0:weight_decay"]
    before = loaded.state_dict()
    state = {**before, lr: np.float32(0.01)}
    said = re.escape(f"changes '{lr}' but not '{decay}', which is computed from the same lr")
    with pytest.warns(UserWarning, match=said):
        loaded.load_state_dict(state)
    loaded = staged.runtime.load(tmp_path)
    state[decay] = np.float32(1 - 0.01 * 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded.load_state_dict(state)
        loaded.load_state_dict(before)  # an earlier snapshot: every one changes back
        loaded.load_state_dict(state)
    opt.param_groups[0]["lr"] = 0.01
    got = [loaded(x, y).item() for _ in range(2)]
    want = [cstep(x, y).item() for _ in range(2)]
    np.testing.assert_allclose(got, want, rtol=DEPLOY_RTOL)
