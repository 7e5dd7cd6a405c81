"""Deployed and exported training steps against torch 2.13 (the eighth trust probe): a
compiled step saved after some calls and loaded (in this process and in a fresh one)
continues torch's trajectory call for call, Adam's step count and moments, weight decay,
BatchNorm's running statistics and the dropout stream's position included; a scheduler
stepped inside a saved step, wrong arguments, damaged or foreign files are refused
clearly with nothing half-loaded; a bad class target keeps the state; two threads calling
one loaded step apply every update. ONNX exports of training steps (SGD with momentum,
Adam, AdamW, weight decay, a tensor lr, BatchNorm in train mode, LSTM, an Embedding with
``padding_idx``, tied and frozen weights, dropout, a step clipping its gradients itself)
run N times in onnxruntime with the updated state fed back give torch's losses and
state; gradients summed over micro-batches give torch's accumulated update; an export
after compiled calls and an eager change bakes in the current buffers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

import staged
import staged.onnx
from staged.runtime.deploy import IntegrityError
from staged.tracing.symbolic import CaptureError

RTOL = 1e-5  # a deployed module is compiled apart from the in-process one (README)


# --- the harness ------------------------------------------------------------------------


def _init(L, m):
    """``m`` with parameters drawn by NumPy (the same for both libraries)."""
    rng = np.random.default_rng(7)
    with L.no_grad():
        for p in m.parameters():
            p.copy_(L.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))
    return m


def _mlp(L, *middle):
    return _init(L, L.nn.Sequential(L.nn.Linear(3, 4), *middle, L.nn.Tanh(), L.nn.Linear(4, 2)))


def _data(n, kind="mlp"):
    """``n`` NumPy batches (x, y) of 4: features (n, 3), token ids (4, 2) or sequences."""
    rng = np.random.default_rng(1)
    shape = {"mlp": (4, 3), "lstm": (4, 3, 3)}
    return [
        (
            rng.integers(0, 5, (4, 2))
            if kind == "emb"
            else rng.standard_normal(shape[kind]).astype(np.float32),
            rng.integers(0, 2, 4),
        )
        for _ in range(n)
    ]


def _state(m) -> dict:
    return {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}


def _close(ours, want, where="") -> None:
    assert ours.keys() == want.keys(), where
    for k in want:
        w = np.asarray(want[k])
        scale = float(np.abs(w).max(initial=0.0))
        np.testing.assert_allclose(
            np.asarray(ours[k], w.dtype), w, rtol=RTOL, atol=2e-6 + RTOL * scale, err_msg=where + k
        )


def _torch_run(build, data, change_at=None) -> list:
    """``[(loss, state dict)]`` of torch's training step per batch (``_change`` made before
    the call ``change_at``)."""
    m, opt = build(torch)
    out = []
    for i, (x, y) in enumerate(data):
        if i == change_at:
            _change(torch, m, opt)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        opt.step()
        out.append((loss.item(), _state(m)))
    return out


def _classify(L, m, opt):
    def step(x, y):
        opt.zero_grad()
        loss = L.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def _same_run(ours, want, where) -> None:
    for i, ((loss, state), (tloss, tstate)) in enumerate(zip(ours, want, strict=True)):
        assert loss == pytest.approx(tloss, rel=RTOL), f"{where} call {i}"
        _close(state, tstate, f"{where} call {i}: ")


# --- deployed steps ---------------------------------------------------------------------

_OPTIMIZERS = {
    "adam weight decay": lambda L, m: L.optim.Adam(m.parameters(), lr=0.05, weight_decay=0.1),
    "sgd momentum batchnorm": lambda L, m: L.optim.SGD(
        m.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01
    ),
}


def _build(name):
    def build(L):
        m = _mlp(L, L.nn.BatchNorm1d(4)) if "batchnorm" in name else _mlp(L)
        return m, _OPTIMIZERS[name](L, m)

    return build


def _change(L, m, opt) -> None:
    """Between calls: weights and BatchNorm's running variance changed eagerly, the lr,
    momentum and weight decay set by hand."""
    with L.no_grad():
        m[0].weight.mul_(0.5)
        if isinstance(m[1], L.nn.BatchNorm1d):
            m[1].running_var.add_(1.0)
    group = opt.param_groups[0]
    group["lr"] *= 3
    group["weight_decay"] = 0.2
    if group.get("momentum"):
        group["momentum"] = 0.5


def _saved_after(build, data, n, directory, change=False):
    """Run the compiled step on ``data[:n]``, ``_change`` things if ``change``, save it
    (state named by state_dict keys) and return its records, the step, the model."""
    m, opt = build(staged)
    f = staged.compile(_classify(staged, m, opt))
    out = [(f(staged.tensor(x), staged.tensor(y)).item(), _state(m)) for x, y in data[:n]]
    if change:
        _change(staged, m, opt)
    f.save(directory, names={p: k for k, p in m.state_dict(keep_vars=True).items()})
    return out, f, m


def _deployed_records(step, data, keys) -> list:
    out = []
    for x, y in data:
        loss = step(x, y).item()
        out.append((loss, {k: v for k, v in step.state_dict().items() if k in keys}))
    return out


@pytest.mark.parametrize("name", list(_OPTIMIZERS))
def test_a_step_deployed_after_3_calls_continues_as_torch_and_in_process(name, tmp_path):
    """Adam's step count and moments, weight decay, momentum, BatchNorm's running stats
    and ``num_batches_tracked`` are carried, and so are weights, buffers and
    hyper-parameters changed by hand after the last call: every call's loss and state
    equal torch's, for the loaded step and for the in-process step after the save."""
    build, data = _build(name), _data(6)
    want = _torch_run(build, data, change_at=3)
    before, f, m = _saved_after(build, data, 3, tmp_path, change=True)
    _same_run(before, want[:3], "compiled")
    loaded = _deployed_records(staged.runtime.load(tmp_path), data[3:], want[0][1].keys())
    _same_run(loaded, want[3:], "deployed")
    live = [(f(staged.tensor(x), staged.tensor(y)).item(), _state(m)) for x, y in data[3:]]
    _same_run(live, want[3:], "in process after save")


def test_a_fresh_process_continues_as_torch(tmp_path):
    build, data = _build("adam weight decay"), _data(5)
    want = _torch_run(build, data)
    _saved_after(build, data, 2, tmp_path)
    np.save(tmp_path / "data.npy", np.array([np.concatenate([x, y[:, None]], 1) for x, y in data]))
    script = textwrap.dedent(f"""
        import json
        import numpy as np
        import staged.runtime
        step = staged.runtime.load({str(tmp_path)!r})
        out = []
        for b in np.load({str(tmp_path / "data.npy")!r})[2:]:
            loss = step(b[:, :3].astype(np.float32), b[:, 3].astype(np.int64)).item()
            out.append([loss, {{k: v.tolist() for k, v in step.state_dict().items()}}])
        print(json.dumps(out))
    """)
    env = dict(os.environ, PYTHONPATH=str(Path(staged.__file__).parent.parent))
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    keys = want[0][1].keys()
    _same_run([(loss, {k: s[k] for k in keys}) for loss, s in got], want[2:], "fresh process")


def test_a_scheduler_stepped_inside_a_saved_step_is_refused(tmp_path):
    """A saved step runs no Python: the scheduler would never step again."""
    m = _mlp(staged)
    opt = staged.optim.SGD(m.parameters(), lr=0.5, momentum=0.9)
    sched = staged.optim.lr_scheduler.StepLR(opt, 1, 0.5)
    inner = _classify(staged, m, opt)

    def step(x, y):
        loss = inner(x, y)
        sched.step()
        return loss

    f = staged.compile(step)
    for x, y in _data(2):
        f(staged.tensor(x), staged.tensor(y))
    with pytest.raises(CaptureError, match=r"StepLR.step\(\) inside the step: .* call StepLR"):
        f.save(tmp_path)
    assert not (tmp_path / "manifest.json").exists()


def _dropout_step():
    staged.manual_seed(0)
    m = staged.nn.Sequential(staged.nn.Linear(3, 8), staged.nn.Dropout(0.5), staged.nn.Linear(8, 2))
    opt = staged.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    return m, opt, _classify(staged, m, opt)


def test_a_resaved_deployed_step_continues_the_dropout_stream(tmp_path):
    """The counter of the saved step's dropout stream is state: a step saved again after 2
    calls and loaded draws the masks of calls 3 and 4, not those of 1 and 2 again."""
    _, _, step = _dropout_step()
    f = staged.compile(step, rng="counter")  # the graph the ONNX test below compiles
    x, y = staged.ones(4, 3), staged.tensor([0, 1, 0, 1])
    f(x, y)
    f(x, y)
    f.save(tmp_path / "a")
    straight = staged.runtime.load(tmp_path / "a")
    want = [straight(x, y).item() for _ in range(4)]
    first = staged.runtime.load(tmp_path / "a")
    assert [first(x, y).item() for _ in range(2)] == want[:2]
    first.save(tmp_path / "b")
    again = staged.runtime.load(tmp_path / "b")
    assert [again(x, y).item() for _ in range(2)] == want[2:]
    assert len(set(want)) == 4


def _sgd_on_w(tmp_path):
    """A saved step ``w -= 0.5 * x`` (loss ``w . x``), w starting at -0.5 after 1 call."""
    w = staged.zeros(3, requires_grad=True)

    def step(x):
        loss = (w * x).sum()
        loss.backward()
        with staged.no_grad():
            w.sub_(0.5 * w.grad)
            w.grad = None
        return loss.detach()

    f = staged.compile(step)
    f(staged.ones(3))
    f.save(tmp_path)
    return staged.runtime.load(tmp_path)


def test_two_threads_calling_one_deployed_step_apply_every_update(tmp_path):
    """Lost updates before (Note [one call at a time]): w -26.0 or -50.0 for -50.5."""
    step = _sgd_on_w(tmp_path)
    x = np.ones(3, np.float32)

    def work():
        for _ in range(50):
            step(x)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(step.state_dict()["w"], np.full(3, -50.5, np.float32))


def test_wrong_arguments_are_refused_before_anything_runs(tmp_path):
    step = _sgd_on_w(tmp_path)
    before = step.state_dict()
    with pytest.raises(ValueError, match=r"argument x: expected shape \[3\], got \[4\]"):
        step(np.ones(4, np.float32))  # another batch size
    with pytest.raises(ValueError, match=r"argument x: expected shape \[3\], got \[1, 3\]"):
        step(np.ones((1, 3), np.float32))
    with pytest.raises(TypeError, match=r"argument x: expected float32, got float64, which"):
        step(np.ones(3, np.float64))
    with pytest.raises(TypeError, match=r"argument x: expected float32, got int64"):
        step(np.ones(3, np.int64))
    np.testing.assert_equal(step.state_dict(), before)
    assert step(np.ones(3, np.float16)).item() == -1.5  # widened without loss


def test_a_half_bad_state_dict_loads_nothing(tmp_path):
    step = _sgd_on_w(tmp_path)
    before = step.state_dict()
    with pytest.raises(ValueError, match=r"state w: expected shape \[3\], got \[2\]"):
        step.load_state_dict({"w": np.ones(2, np.float32)})
    with pytest.raises(TypeError, match=r"state w: expected float32, got float64"):
        step.load_state_dict({"w": np.ones(3)})
    np.testing.assert_equal(step.state_dict(), before)


@pytest.mark.parametrize(
    "damage, error, match",
    [
        ("truncate step.vmfb", IntegrityError, r"step.vmfb: sha256 .* does not match"),
        ("truncate params.irpa", IntegrityError, r"params.irpa: sha256 .* does not match"),
        ("truncate manifest.json", IntegrityError, r"manifest.json: not readable as JSON"),
        ("empty manifest.json", IntegrityError, r"manifest.json: not readable as JSON"),
        ("remove params.irpa", FileNotFoundError, r"params.irpa"),
        ("format staged-step/1", ValueError, r"saved in format 'staged-step/1'; this staged"),
        ("format other", ValueError, r"not a saved staged step \(format 'other'"),
    ],
)
def test_a_damaged_or_foreign_saved_step_is_refused(tmp_path, damage, error, match):
    """A cut-short manifest raised a bare ``JSONDecodeError`` naming no file."""
    _sgd_on_w(tmp_path / "ok")
    d = tmp_path / "copy"
    shutil.copytree(tmp_path / "ok", d)
    verb, name = damage.split(" ")
    if verb == "truncate":
        (d / name).write_bytes((d / name).read_bytes()[:40])
    elif verb == "empty":
        (d / name).write_text("")
    elif verb == "remove":
        (d / name).unlink()
    else:
        m = json.loads((d / "manifest.json").read_text())
        m["format"] = name
        (d / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(error, match=match):
        staged.runtime.load(d)


def test_a_step_saved_by_another_staged_version_loads_with_a_warning(tmp_path):
    _sgd_on_w(tmp_path)
    m = json.loads((tmp_path / "manifest.json").read_text())
    m["versions"]["staged"] = "0.0.1"
    m["manifest_sha256"] = staged.runtime.deploy.manifest_sha256(m)  # edited on purpose
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.warns(RuntimeWarning, match=r"saved by staged 0.0.1, loaded by staged"):
        step = staged.runtime.load(tmp_path)
    assert step(np.ones(3, np.float32)).item() == -1.5


def test_a_deployed_call_with_a_bad_target_keeps_the_state(tmp_path):
    """The bad call changes nothing; the error is raised at the next call, and the calls
    after it train as if the bad one had not happened."""
    build, data = _build("sgd momentum batchnorm"), _data(5)
    _saved_after(build, data, 2, tmp_path)
    good = staged.runtime.load(tmp_path)
    want = [good(x, y).item() for x, y in data[2:]]
    step = staged.runtime.load(tmp_path)
    x, y = data[2]
    before = step.state_dict()
    step(x, np.array([0, 5, 1, 0]))
    assert all(np.array_equal(v, before[k]) for k, v in step.state_dict().items())
    with pytest.raises(IndexError, match=r"Target 5 is out of bounds") as err:
        step(x, y)
    assert "This call did not run: call it again" in err.value.__notes__[0]
    assert [step(x, y).item() for x, y in data[2:]] == pytest.approx(want, rel=RTOL)


# --- ONNX training steps in onnxruntime -------------------------------------------------


class _Lstm:
    @staticmethod
    def build(L):
        class M(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn, self.fc = L.nn.LSTM(3, 4, batch_first=True), L.nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(self.rnn(x)[0][:, -1])

        return _init(L, M())


def _tied(L):
    class M(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = L.nn.Linear(3, 3), L.nn.Linear(3, 3), L.nn.Linear(3, 2)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.c(L.tanh(self.b(L.tanh(self.a(x)))))

    return _init(L, M())


def _embedding(L):
    m = L.nn.Sequential(L.nn.Embedding(5, 3, padding_idx=0), L.nn.Flatten(), L.nn.Linear(6, 2))
    _init(L, m)
    with L.no_grad():
        m[0].weight[0].zero_()
    return m


def _frozen(L):
    m = _mlp(L)
    m[0].weight.requires_grad_(False)
    return m


_MODELS = {
    "mlp": (_mlp, "mlp"),
    "batchnorm": (lambda L: _mlp(L, L.nn.BatchNorm1d(4)), "mlp"),
    "lstm": (_Lstm.build, "lstm"),
    "embedding padding_idx": (_embedding, "emb"),
    "tied": (_tied, "mlp"),
    "frozen": (_frozen, "mlp"),
}
_ONNX_OPTIMIZERS = {
    "sgd momentum": lambda L, ps: L.optim.SGD(ps, lr=0.1, momentum=0.9),
    "adam": lambda L, ps: L.optim.Adam(ps, lr=0.05),
    "adam weight decay": lambda L, ps: L.optim.Adam(ps, lr=0.05, weight_decay=0.1),
    "adamw": lambda L, ps: L.optim.AdamW(ps, lr=0.05),
    "adam amsgrad": lambda L, ps: L.optim.Adam(ps, lr=0.05, amsgrad=True),
    "sgd nesterov weight decay": lambda L, ps: L.optim.SGD(
        ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01
    ),
    "adam tensor lr": lambda L, ps: L.optim.Adam(ps, lr=L.tensor(0.05)),
}


def _feed(m, opt, names) -> dict:
    """The exported model's state inputs from the model and the optimizer."""
    params = dict(m.named_parameters())
    feed = {k: v.detach().numpy() for k, v in m.state_dict().items() if k in names}
    for n in names:
        if n.startswith("state."):
            p, slot = n[len("state.") :].rsplit(".", 1)
            feed[n] = opt.state[params[p]][slot].numpy()
    if "rng_state" in names:
        feed["rng_state"] = staged.onnx.rng_state().numpy()
    return feed


def _ort_run(path, feed, batches, arg_names=("input", "target")) -> list:
    """``[(loss, state)]`` of the exported step run once per batch, its ``updated.*``
    outputs fed back as the next run's inputs."""
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outs = [o.name for o in sess.get_outputs()]
    out = []
    for x, y in batches:
        res = dict(zip(outs, sess.run(None, {**feed, **dict(zip(arg_names, (x, y)))})))
        feed = {k: res.get("updated." + k, v) for k, v in feed.items()}
        out.append((float(res["loss"]), dict(feed)))
    return out


@pytest.mark.parametrize(
    "model, optimizer",
    [
        ("mlp", "sgd momentum"),
        ("mlp", "adam"),
        ("mlp", "adam weight decay"),
        ("mlp", "adamw"),
        ("mlp", "adam amsgrad"),
        ("mlp", "sgd nesterov weight decay"),
        ("mlp", "adam tensor lr"),
        ("batchnorm", "sgd momentum"),
        ("lstm", "sgd momentum"),
        ("embedding padding_idx", "adam"),
        ("tied", "adam"),
        ("frozen", "adam"),
    ],
)
def test_an_exported_training_step_run_n_times_in_onnxruntime_follows_torch(
    model, optimizer, tmp_path
):
    make, kind = _MODELS[model]

    def build(L):
        m = make(L)
        return m, _ONNX_OPTIMIZERS[optimizer](L, [p for p in m.parameters() if p.requires_grad])

    data = _data(5, kind)
    want = _torch_run(build, data)
    m, opt = build(staged)
    _classify(staged, m, opt)(*map(staged.tensor, data[0]))  # the state exists
    F = staged.nn.functional
    staged.onnx.export(
        m,
        tuple(map(staged.tensor, data[0])),
        tmp_path / "m.onnx",
        loss_fn=F.cross_entropy,
        training_step=opt,
    )
    names = [i.name for i in ort.InferenceSession(str(tmp_path / "m.onnx")).get_inputs()]
    got = _ort_run(tmp_path / "m.onnx", _feed(m, opt, names), data[1:], names[:2])
    # the model's inputs are its state dict's keys, once per tensor (b.weight is a.weight)
    alias = {"b.weight": "a.weight"} if model == "tied" else {}
    for i, ((loss, state), (tloss, tstate)) in enumerate(zip(got, want[1:], strict=True)):
        assert loss == pytest.approx(tloss, rel=RTOL), f"run {i}"
        ours = {k: state.get(alias.get(k, k), _state(m)[k]) for k in tstate}
        _close(ours, tstate, f"run {i}: ")


def test_a_dynamic_batch_batchnorm_training_step_follows_torch_at_every_batch(tmp_path):
    """Batches of 4, 6, 3, 5, 2 through one export with ``dynamic_axes``: BatchNorm's
    batch statistics and unbiased running variance follow the run-time batch."""
    rng = np.random.default_rng(1)
    data = [
        (rng.standard_normal((n, 3)).astype(np.float32), rng.integers(0, 2, n))
        for n in (4, 6, 3, 5, 2)
    ]

    def build(L):
        m = _mlp(L, L.nn.BatchNorm1d(4))
        return m, _ONNX_OPTIMIZERS["sgd nesterov weight decay"](L, m.parameters())

    want = _torch_run(build, data)
    m, opt = build(staged)
    example = tuple(map(staged.tensor, data[0]))
    _classify(staged, m, opt)(*example)
    with pytest.warns(UserWarning, match=r"Expected more than 1 value per channel"):
        staged.onnx.export(
            m,
            example,
            tmp_path / "b.onnx",
            loss_fn=staged.nn.functional.cross_entropy,
            training_step=opt,
            dynamic_axes={"input": [0], "target": [0]},
        )
    names = [i.name for i in ort.InferenceSession(str(tmp_path / "b.onnx")).get_inputs()]
    got = _ort_run(tmp_path / "b.onnx", _feed(m, opt, names), data[1:])
    _same_run(
        [(loss, {k: s.get(k, _state(m)[k]) for k in want[0][1]}) for loss, s in got],
        want[1:],
        "onnxruntime",
    )


def test_an_exported_step_with_dropout_takes_and_returns_the_rng_state(tmp_path):
    """Refused before (``ExportError: ... neither a parameter, a buffer nor optimizer
    state (state4, int64[2])``); now ``rng_state`` is an input and ``updated.rng_state``
    an output: fed back, the runs draw the masks of ``staged.compile(rng="counter")``
    from the same seed (Note [exported RNG state])."""
    x, y = staged.ones(4, 3), staged.tensor([0, 1, 0, 1])
    *_, step = _dropout_step()
    f = staged.compile(step, rng="counter")
    want = [f(x, y).item() for _ in range(4)]
    m, opt, step = _dropout_step()
    first = staged.compile(step, rng="counter")(x, y).item()
    staged.onnx.export(
        m,
        (x, y),
        tmp_path / "d.onnx",
        loss_fn=staged.nn.functional.cross_entropy,
        training_step=opt,
    )
    names = [i.name for i in ort.InferenceSession(str(tmp_path / "d.onnx")).get_inputs()]
    assert names[-1] == "rng_state"
    got = _ort_run(tmp_path / "d.onnx", _feed(m, opt, names), [(x.numpy(), y.numpy())] * 3)
    assert [first] + [loss for loss, _ in got] == pytest.approx(want, rel=RTOL)
    assert len(set(want)) == 4
    staged.onnx.export(m.eval(), (x,), tmp_path / "e.onnx", with_gradients=False)
    sess = ort.InferenceSession(str(tmp_path / "e.onnx"))
    assert [i.name for i in sess.get_inputs()] == [
        "input",
        "0.weight",
        "0.bias",
        "2.weight",
        "2.bias",
    ]
    (out,) = sess.run(None, {"input": x.numpy(), **_state(m)})
    with staged.no_grad():
        _close({"eval": out}, {"eval": m(x).numpy()})


def test_gradients_summed_over_micro_batches_give_torch_s_accumulated_update(tmp_path):
    data = _data(4)
    tm = _mlp(torch)
    for x, y in data:
        (torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y)) / 4).backward()
    with torch.no_grad():
        for p in tm.parameters():
            p -= 0.1 * p.grad
    m = _mlp(staged)
    x0, y0 = map(staged.tensor, data[0])
    staged.onnx.export(m, (x0, y0), tmp_path / "g.onnx", loss_fn=staged.nn.functional.cross_entropy)
    sess = ort.InferenceSession(str(tmp_path / "g.onnx"))
    outs = [o.name for o in sess.get_outputs()]
    grads = dict.fromkeys(_state(m), 0.0)
    for x, y in data:
        res = dict(zip(outs, sess.run(None, {"input": x, "target": y, **_state(m)})))
        grads = {k: g + res["grad." + k] / 4 for k, g in grads.items()}
    _close({k: v - 0.1 * grads[k] for k, v in _state(m).items()}, _state(tm))


def test_an_exported_step_that_clips_and_steps_itself_follows_torch(tmp_path):
    """A function step with ``clip_grad_norm_`` and SGD with momentum, exported without
    ``training_step=`` (the optimizer read from its closure): refused before
    (``ExportError: ... (state7, float32[4,3])``, the momentum buffers unnamed); with
    ``training_step=`` it raised a bare ``RuntimeError: element 0 of tensors does not
    require grad``, now an ``ExportError`` saying what to do."""

    def build(L):
        m = _mlp(L)
        opt = L.optim.SGD(m.parameters(), lr=0.5, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = L.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            L.nn.utils.clip_grad_norm_(m.parameters(), 0.1)
            opt.step()
            return loss.detach()

        return m, opt, step

    data = _data(5)
    tm, _, tstep = build(torch)
    want = [(tstep(*map(torch.tensor, b)).item(), _state(tm)) for b in data]
    m, opt, step = build(staged)
    step(*map(staged.tensor, data[0]))
    example = tuple(map(staged.tensor, data[0]))
    with pytest.raises(staged.onnx.ExportError, match=r"training_step= runs backward\(\) .* "):
        staged.onnx.export(step, example, tmp_path / "c.onnx", training_step=opt)
    # exported with gradients (the default): torch's bare RuntimeErrors before ("does not
    # require grad", "backward through the graph a second time" had it returned the loss)
    with pytest.raises(
        staged.onnx.ExportError, match=r"runs backward\(\) itself .* with_gradients=False"
    ):
        staged.onnx.export(step, example, tmp_path / "c.onnx")

    def attached(x, y):
        opt.zero_grad()
        loss = staged.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    with pytest.raises(
        staged.onnx.ExportError, match=r"already ran backward\(\) on it .* with_gradients=False"
    ):
        staged.onnx.export(attached, example, tmp_path / "c.onnx")
    staged.onnx.export(step, example, tmp_path / "c.onnx", with_gradients=False)
    names = [i.name for i in ort.InferenceSession(str(tmp_path / "c.onnx")).get_inputs()]
    got = _ort_run(tmp_path / "c.onnx", _feed(m, opt, names), data[1:], ("x", "y"))
    _same_run([(loss, {k: s[k] for k in want[0][1]}) for loss, s in got], want[1:], "onnxruntime")


def test_an_export_after_compiled_calls_and_an_eager_change_bakes_in_the_current_buffers(
    tmp_path,
):
    """BatchNorm's running stats, updated on the device by compiled calls, then doubled
    eagerly, are the initializers of an eval-mode export: its output is torch's."""
    data = _data(3)

    def run(L, compiled):
        m = _init(L, L.nn.Sequential(L.nn.Linear(3, 3), L.nn.BatchNorm1d(3)))

        def forward(x):
            with L.no_grad():
                return m(x).sum()

        step = staged.compile(forward) if compiled else forward
        for x, _ in data:
            step(L.tensor(x))
        with L.no_grad():
            m[1].running_mean.mul_(2.0)
            m[0].weight.mul_(0.5)
        return m.eval()

    want = run(torch, False)(torch.tensor(data[0][0])).detach().numpy()
    m = run(staged, True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        staged.onnx.export(
            m, (staged.tensor(data[0][0]),), tmp_path / "e.onnx", with_gradients=False
        )
    sess = ort.InferenceSession(str(tmp_path / "e.onnx"))
    feed = {i.name: _state(m).get(i.name, data[0][0]) for i in sess.get_inputs()}
    assert [i.name for i in sess.get_inputs()] == [
        "input",
        "0.weight",
        "0.bias",
        "1.weight",
        "1.bias",
    ]
    _close({"output": sess.run(None, feed)[0]}, {"output": want})
