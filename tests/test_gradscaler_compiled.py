"""torch's AMP loop compiled whole: autocast, ``scaler.scale(loss).backward()``,
``unscale_``, ``clip_grad_norm_``, ``scaler.step`` and ``scaler.update`` in one graph
(Note [scaler in a trace] in staged/amp.py), against torch 2.13's GradScaler on the CPU:
every call's loss, parameters, optimizer state, scale and growth tracker, with calls whose
gradients overflow, and with no re-trace per call."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged

N_CALLS = 8


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(6, 8), lib.nn.ReLU(), lib.nn.Linear(8, 3))


def _batches(overflow):
    """``N_CALLS`` batches; those in ``overflow`` times 1e38 (infinite gradients)."""
    rng = np.random.default_rng(0)
    return [
        (
            rng.standard_normal((5, 6)).astype(np.float32) * (1e38 if i in overflow else 1.0),
            rng.integers(0, 3, 5),
        )
        for i in range(N_CALLS)
    ]


def _loop(lib, opt_name, dtype, clip):
    """The model, optimizer, scaler and step of torch's AMP recipe in ``lib``."""
    model = _model(lib)
    if lib is staged:  # torch's initial weights
        model.load_state_dict(
            {k: staged.tensor(v.numpy()) for k, v in _model(torch).state_dict().items()}
        )
    opt = (
        lib.optim.Adam(model.parameters(), lr=0.05)
        if opt_name == "Adam"
        else lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    )
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=2)

    def step(x, y):
        opt.zero_grad()
        with lib.autocast("cpu", dtype=getattr(lib, dtype)):
            loss = lib.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        if clip:
            scaler.unscale_(opt)
            lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        return loss

    return model, opt, scaler, step


def _record(loss, model, opt, scaler) -> dict:
    state = opt.state_dict()["state"]
    return {
        "loss": float(loss.detach()),
        "params": [p.detach().numpy().copy() for p in model.parameters()],
        "state": {i: {k: np.array(v.numpy()) for k, v in s.items()} for i, s in state.items()},
        "scale": scaler.get_scale(),
        "tracker": scaler._get_growth_tracker(),
    }


def _same(ours: dict, theirs: dict, i: int) -> None:
    where = f"call {i}"
    assert ours["scale"] == theirs["scale"], where
    assert ours["tracker"] == theirs["tracker"], where
    np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=1e-5, err_msg=where)
    for p, q in zip(ours["params"], theirs["params"], strict=True):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6, err_msg=where)
    assert ours["state"].keys() == theirs["state"].keys(), where
    for k, s in theirs["state"].items():
        assert ours["state"][k].keys() == s.keys(), where
        for name, v in s.items():
            np.testing.assert_allclose(
                ours["state"][k][name], v, rtol=1e-5, atol=1e-7, err_msg=f"{where} {k} {name}"
            )


def _run(lib, opt_name, dtype, clip, batches, compiled=False, between=None):
    model, opt, scaler, step = _loop(lib, opt_name, dtype, clip)
    f = staged.compile(step) if compiled else step
    out = []
    for i, (x, y) in enumerate(batches):
        if between is not None:
            between(i, scaler)
        out.append(_record(f(lib.tensor(x), lib.tensor(y)), model, opt, scaler))
    return out, f


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "eager"])
@pytest.mark.parametrize("clip", [True, False], ids=["unscale_clip", "no_clip"])
@pytest.mark.parametrize("opt_name", ["Adam", "SGD"])
def test_the_amp_loop_steps_as_torch_with_overflowing_calls(opt_name, clip, compiled):
    """Calls 3 and 6 overflow: the step is skipped (Adam's ``step`` stays), the scale backs
    off and the tracker restarts; two clean calls in a row double the scale."""
    batches = _batches(overflow={2, 5})
    theirs, _ = _run(torch, opt_name, "bfloat16", clip, batches)
    ours, f = _run(staged, opt_name, "bfloat16", clip, batches, compiled)
    assert [r["scale"] for r in theirs] == [1024.0, 2048.0, 1024.0, 1024.0, 2048.0, 1024.0,
                                            1024.0, 2048.0]  # fmt: skip
    for i, (a, b) in enumerate(zip(ours, theirs)):
        _same(a, b, i)
    if opt_name == "Adam":
        assert [float(r["state"][0]["step"]) for r in ours] == [1, 2, 2, 3, 4, 4, 5, 6]
    if compiled:  # the first call's trace makes the optimizer's state; none after
        assert f.traces == 2


def test_float16_autocast_loop_steps_as_torch():
    batches = _batches(overflow={2})
    theirs, _ = _run(torch, "Adam", "float16", True, batches)
    ours, f = _run(staged, "Adam", "float16", True, batches, compiled=True)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        _same(a, b, i)
    assert f.traces == 2


def test_scaler_state_dict_loaded_between_compiled_calls():
    """``load_state_dict`` writes the scale and tracker the graph reads; new factors
    re-trace (they are the graph's constants)."""
    loaded = {
        3: {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2,
            "_growth_tracker": 1},
        5: {"scale": 64.0, "growth_factor": 4.0, "backoff_factor": 0.25, "growth_interval": 1,
            "_growth_tracker": 0},
    }  # fmt: skip
    saved = {}

    def between(i, scaler):
        if i == 2:
            saved[type(scaler).__module__.split(".")[0]] = scaler.state_dict()
        if i in loaded:
            scaler.load_state_dict(loaded[i])

    batches = _batches(overflow={6})
    theirs, _ = _run(torch, "Adam", "bfloat16", True, batches, between=between)
    ours, f = _run(staged, "Adam", "bfloat16", True, batches, True, between)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        _same(a, b, i)
    assert saved["staged"] == saved["torch"]
    assert [r["scale"] for r in ours][3:] == [16.0, 16.0, 256.0, 64.0, 256.0]
    assert f.traces == 3
    assert f.last_retrace_reason.startswith(
        "GradScaler growth_factor, backoff_factor, growth_interval:"
    )


def test_a_first_call_that_overflows_leaves_adam_as_torch_would_step_it():
    """The state a skipped first step made in the graph is zeros (torch makes none): the
    next step is torch's, and from it on the state is torch's too."""
    batches = _batches(overflow={0})
    theirs, _ = _run(torch, "Adam", "bfloat16", True, batches)
    ours, _ = _run(staged, "Adam", "bfloat16", True, batches, compiled=True)
    assert theirs[0]["state"] == {}
    assert {k: float(s["step"]) for k, s in ours[0]["state"].items()} == dict.fromkeys(
        range(4), 0.0
    )
    ours[0]["state"] = {}
    for i, (a, b) in enumerate(zip(ours, theirs)):
        _same(a, b, i)
