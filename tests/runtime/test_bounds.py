"""Indices and targets out of range in compiled, deployed and ONNX steps (Note [index
checks]): the compiled step raises eager's error (PyTorch's) when a result of the bad call is
read or at the next call, and keeps parameters and optimizer state bit for bit; later good
calls train along eager. ONNX, which cannot raise, gives NaN results and the old state."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

import staged
from staged import nn, optim
from staged.autodiff.indexing import KEY_CAP
from staged.nn import functional as F
from staged.runtime import compiler
from tests.backends import needs_vulkan

V, D, C = 10, 3, 4
GOOD = {
    "tok": [1, 2],
    "g": [[3, 0, 9], [1, 2, 3]],
    "isel": [4, 5],
    "tad": [[0, 9, 1]],
    "gi": [7, -1],
    "gi2": [0, 2],
    "sc": [[9, 0, 1], [2, 2, 2]],
    "tgt": [0, 3],
}
# (argument, entry 1 of it or of its first row, the op that reads it first)
BAD = [
    ("tok", 1000, "embedding"),
    ("tok", 10**9, "embedding"),
    ("tok", -1, "embedding"),
    ("g", 10, "gather"),
    ("g", -1, "gather"),
    ("isel", -11, "index_select"),
    ("tad", 10, "take_along_dim"),
    ("gi", -11, "x[i]"),
    ("gi2", 3, "x[i, j]"),
    ("sc", 10, "scatter_add"),
    ("tgt", 4, "cross_entropy"),
    ("tgt", -1, "cross_entropy"),
    ("tok", 2**30, "embedding"),
    ("g", 10 - 2**30, "gather"),
]


def setup():
    """A model whose step indexes with every op, and Adam with its state made eagerly."""
    staged.manual_seed(0)
    model = nn.ModuleDict({"emb": nn.Embedding(V, D), "lin": nn.Linear(D, C)})
    table = nn.Parameter(staged.randn(V, D))
    opt = optim.Adam([*model.parameters(), table], lr=0.05)

    def step(tok, g, isel, tad, gi, gi2, sc, tgt):
        opt.zero_grad()
        h = model["emb"](tok) + table.gather(0, g)
        h = h + table.index_select(0, isel) + table[gi] + table[gi, gi2].unsqueeze(1)
        h = h + staged.take_along_dim(table, tad, 0)
        acc = staged.zeros(V, D).scatter_add(0, sc, h)
        logits = model["lin"](h)
        loss = (
            F.cross_entropy(logits, tgt)
            + F.nll_loss(logits.log_softmax(1), tgt)
            + 0.01 * (acc * acc).sum()
        )
        loss.backward()
        opt.step()
        return loss

    step(**args())  # Adam's state exists before the step is compiled
    return step, model, table, opt


def args(bad=None):
    a = {k: np.array(v) for k, v in GOOD.items()}
    if bad is not None:
        name, value = bad
        a[name].reshape(-1)[1] = value
    return {k: staged.tensor(v) for k, v in a.items()}


def snapshot(model, table, opt) -> list:
    """Every parameter and optimizer state tensor, as host arrays."""
    out = [p.detach().numpy().copy() for p in [*model.parameters(), table]]
    for slots in opt.state.values():
        out += [
            np.array(v.numpy() if isinstance(v, staged.Tensor) else v)
            for _, v in sorted(slots.items())
        ]
    return out


def eager_error(bad):
    step, *_ = setup()
    with pytest.raises((IndexError, RuntimeError)) as err:
        step(**args(bad))
    return err.type, str(err.value)


@pytest.fixture(scope="module")
def expected():
    return [eager_error((name, value)) for name, value, _ in BAD]


def check_bad_calls(call, state, expected):
    """Each bad call raises eager's error at the read of its loss, then (for a bad call
    whose loss is not read) at the next call once it has finished; the state stays bit for
    bit."""
    for (name, value, op), (error, message) in zip(BAD, expected):
        before = state()
        loss = call(args((name, value)))
        with pytest.raises(error) as got:
            loss.item()
        assert str(got.value) == message, op
        with pytest.raises(error):  # every read raises
            np.asarray(loss.detach())
        for a, b in zip(before, state()):
            np.testing.assert_array_equal(a, b, err_msg=f"{op}: state changed")
    call(args(BAD[-1][:2]))  # not read: reported by the first call after it finished,
    before = state()  # (reading the state waits for it) which is dropped too
    with pytest.raises(expected[-1][0], match=expected[-1][1]):
        call(args())
    for a, b in zip(before, state()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "backend", ["llvm-cpu", "in place", pytest.param("vulkan-spirv", marks=needs_vulkan)]
)
def test_compiled_step_raises_and_keeps_state(backend, expected, monkeypatch):
    """``in place``: llvm-cpu writing the state into its own buffers (Note [state in
    place]), where a call after a failed one must not even be enqueued."""
    if backend == "in place":
        monkeypatch.setattr(compiler, "IN_PLACE_MIN_BYTES", 0)
        backend = "llvm-cpu"
    step, model, table, opt = setup()
    estep, emodel, etable, eopt = setup()
    cstep = staged.compile(step, backend=backend)
    good = [cstep(**args()).item(), estep(**args()).item()]
    check_bad_calls(lambda a: cstep(**a), lambda: snapshot(model, table, opt), expected)
    for _ in range(2):
        good += [cstep(**args()).item(), estep(**args()).item()]
    np.testing.assert_allclose(good[0::2], good[1::2], rtol=1e-5)
    for a, b in zip(snapshot(model, table, opt), snapshot(emodel, etable, eopt)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert cstep.traces == 1
    assert bool(cstep._last.mlir.in_place) is compiler.writes_in_place(
        cstep._last.captured.graph, backend
    )


def test_deployed_step_raises_and_keeps_state(tmp_path, expected):
    step, model, table, opt = setup()
    cstep = staged.compile(step)
    cstep(**args())
    cstep.save(tmp_path)
    loaded = staged.runtime.load(tmp_path)
    first = loaded(**args()).item()
    check_bad_calls(lambda a: loaded(**a), lambda: list(loaded.state_dict().values()), expected)
    assert np.isfinite(loaded(**args()).item()) and loaded(**args()).item() < first


def test_onnx_step_gives_nan_and_keeps_state(tmp_path):
    step, model, table, opt = setup()
    c = staged.capture(step, **args())
    c.export_onnx(tmp_path / "step.onnx")
    sess = ort.InferenceSession(str(tmp_path / "step.onnx"), providers=["CPUExecutionProvider"])
    state = [w.tensor.detach().numpy() for w in c.state]
    names = [o.name for o in sess.get_outputs()]
    updated = [
        names.index(f"updated.{w.name}") if f"updated.{w.name}" in names else None for w in c.state
    ]

    def run(a):
        feed = dict(zip([w.name for w in c.state], state))
        feed.update({k: v.numpy() for k, v in a.items()})
        return sess.run(None, feed)

    np.testing.assert_allclose(run(args())[0], step(**args()).item(), rtol=1e-5)
    for name, value, op in BAD:
        out = run(args((name, value)))
        assert np.isnan(out[0]), op
        for s, k in zip(state, updated):
            if k is not None:
                np.testing.assert_array_equal(out[k], s, err_msg=op)


def test_many_optimizer_counters_compile_with_checks():
    """AdamW over 20 parameters: 20 0-d step counters selected under the check flag. One 0-d
    select each made IREE fuse them into a dispatch binding more buffers than the 32 allowed
    (``binding count 36 > 32`` at load); the step must load, train as eager and keep its
    state on a bad index."""

    def build():
        staged.manual_seed(0)
        emb = nn.Embedding(V, D)
        ws = [nn.Parameter(staged.randn(D) * 0.1) for _ in range(19)]
        opt = optim.AdamW([emb.weight, *ws], lr=0.05)

        def step(tok):
            opt.zero_grad()
            h = emb(tok)
            loss = sum(((h + w) ** 2).mean() for w in ws)
            loss.backward()
            opt.step()
            return loss

        return step, opt

    step, opt = build()
    estep, _ = build()
    cstep = staged.compile(step)
    tok = staged.tensor([1, 2, 3])
    got = [(cstep(tok).item(), estep(tok).item()) for _ in range(3)]
    np.testing.assert_allclose(*zip(*got), rtol=1e-5)
    before = [s["step"].item() for s in opt.state.values()]
    loss = cstep(staged.tensor([1, V]))
    with pytest.raises(IndexError, match="index out of range"):
        loss.item()
    assert [s["step"].item() for s in opt.state.values()] == before == [3.0] * 20


@pytest.mark.parametrize("backend", ["llvm-cpu", pytest.param("vulkan-spirv", marks=needs_vulkan)])
def test_values_beyond_the_report_cap_read_at_least(backend):
    """A report keeps values within 2**30 of the range exactly (Vulkan holds int64 in int32);
    one further out is named as a bound, never as a wrong value."""
    table = staged.randn(V, D)
    step = staged.compile(lambda i: table[i].sum(), backend=backend)
    for value, read in [
        (2**31 - 1, f"at least {V + KEY_CAP}"),
        (-(2**31), f"at most {-V - 1 - KEY_CAP}"),
    ]:
        with pytest.raises(IndexError) as got:
            step(staged.tensor([0, value])).item()
        assert f"index {read} is out of bounds" in str(got.value)


def _exits_cleanly(script: str, cache) -> str:
    """What ``script`` prints, run by a new interpreter that must exit with 0 (not killed
    by a signal at shutdown)."""
    env = {**os.environ, "STAGED_CACHE_DIR": str(cache)}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_unread_reports_are_released_before_shutdown(tmp_path):
    """The index-check report of a call never read is held by its compiled step alone (no
    Tensor): the exit hook releases its buffer with the Tensors' before IREE is torn down
    (freed later, in a shutdown GC that had freed the device, it crashed the process)."""
    script = (
        "import gc, staged, staged.nn.functional as F\n"
        "from staged.runtime.compiled import _bring_state_home\n"
        "from staged.runtime.device import DeviceValue\n"
        "w = staged.randn(8, 4, requires_grad=True)\n"
        "opt = staged.optim.SGD([w], lr=0.1)\n"
        "x, t = staged.randn(32, 8), staged.randint(0, 4, (32,))\n"
        "@staged.compile\n"
        "def step(x, t):\n"
        "    opt.zero_grad()\n"
        "    loss = F.cross_entropy(x @ w, t)\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    return loss\n"
        "for _ in range(3):\n"
        "    loss = step(x, t)\n"
        "def held():\n"
        "    return [v for v in gc.get_objects() if type(v) is DeviceValue and v.view is not None]\n"
        "before = len(held())\n"
        "_bring_state_home()\n"
        "print(before, len(held()), loss.item() > 0, tuple(w.grad.shape))\n"
    )
    before, after, *rest = _exits_cleanly(script, tmp_path).split()
    assert int(before) >= 2 and int(after) == 0  # a report beside the payloads
    assert rest == ["True", "(8,", "4)"]


def test_an_argument_written_in_place_keeps_its_value_on_a_bad_index():
    """A step that adds rows it gathers into its argument: with an index out of range the
    argument keeps what it held (the rows were clamped: a write of them would be wrong;
    it held [12, 16, 20, 24] after it) and reading it raises, as reading the loss does."""
    table = staged.arange(12.0).reshape(3, 4)

    def step(acc, idx):
        acc.add_(table[idx].sum(0))
        return acc.sum()

    f = staged.compile(step)
    acc = staged.zeros(4)
    f(acc, staged.tensor([0, 1]))
    np.testing.assert_array_equal(acc.numpy(), [4.0, 6.0, 8.0, 10.0])
    loss = f(acc, staged.tensor([0, 7]))
    with pytest.raises(IndexError, match="out of bounds"):
        loss.item()
    with pytest.raises(IndexError, match="out of bounds"):
        acc.numpy()
    f(acc, staged.tensor([0, 1]))  # on the value acc held before the bad call
    np.testing.assert_array_equal(acc.numpy(), [8.0, 12.0, 16.0, 20.0])


def test_an_argument_whose_shape_the_step_changes_in_place_compiles_with_checks():
    """``target.unsqueeze_(-1)`` on an argument (char_rnn_generate's step): its new value
    has another shape than it came in with, so a failed check cannot keep the old one."""
    table = staged.arange(12.0).reshape(3, 4)

    def step(target, idx):
        target.unsqueeze_(-1)
        return (table[idx] * target).sum()

    f = staged.compile(step)
    for _ in range(2):
        t = staged.tensor([1.0, 2.0])
        assert f(t, staged.tensor([0, 1])).item() == 50.0  # 1 * (0+1+2+3) + 2 * (4+5+6+7)
        assert t.shape == (2, 1)


def test_kept_errors_hold_no_device_objects_at_shutdown(tmp_path):
    """An error raised where a result is read, kept until exit, holds the frames of the
    read, whose locals are the call's semaphore and module: the exit hook clears staged's
    frames before IREE is torn down (freed in the last shutdown GC, after their device,
    they crashed a test run of Vulkan steps with SIGSEGV)."""
    script = (
        "import staged\n"
        "from staged.runtime.compiled import _bring_state_home\n"
        "step = staged.compile(lambda x, i: x[i])\n"
        "try:\n"
        "    step(staged.arange(4.0), staged.tensor([7])).tolist()\n"
        "except IndexError as err:\n"
        "    kept = [err]\n"
        "    kept.append(kept)  # a cycle: freed by the last collection at shutdown\n"
        "def staged_locals(tb):\n"
        "    n = 0\n"
        "    while tb is not None:\n"
        "        if '/staged/' in tb.tb_frame.f_code.co_filename:\n"
        "            n += len(tb.tb_frame.f_locals)\n"
        "        tb = tb.tb_next\n"
        "    return n\n"
        "before = staged_locals(kept[0].__traceback__)\n"
        "_bring_state_home()\n"
        "print(before > 0, staged_locals(kept[0].__traceback__))\n"
    )
    assert _exits_cleanly(script, tmp_path).split() == ["True", "0"]


def test_the_exit_hook_turns_off_nanobinds_report_of_live_objects(tmp_path):
    """Device values still referenced when nanobind looks for live objects at shutdown
    (a compiled timm ViT with gradient checkpointing left some) made IREE's
    bindings print 100+ lines of "nanobind: leaked instance ... HalDevice"; the exit hook
    turns that report off once it has closed staged's modules."""
    script = (
        "import staged\n"
        "from iree.runtime import _binding\n"
        "_binding.disable_leak_checker = lambda: print('report off')\n"
        "step = staged.compile(lambda x: x * 2)\n"
        "print(step(staged.ones(2)).tolist())\n"
    )
    assert _exits_cleanly(script, tmp_path).splitlines() == ["[2.0, 2.0]", "report off"]
