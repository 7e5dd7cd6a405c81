"""staged.compile(dynamic=True): one trace and one IREE compile serve every batch size.
Eager mode is the oracle, call for call; trace counts prove the single compile."""

from __future__ import annotations

import glob
import json
import re
import warnings

import numpy as np
import pytest

import staged
import staged.nn.functional as F
from staged import nn, optim
from staged.tracing.dynamic import DynamicError
from staged.runtime import load
from models.common import classification_step


def _mlp_step(seed=0):
    staged.manual_seed(seed)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    step = classification_step(model, opt)
    return model, step


def _batch(rng, n):
    return (
        staged.tensor(rng.standard_normal((n, 20)).astype(np.float32)),
        staged.tensor(rng.integers(0, 5, n)),
    )


def _assert_same_params(a, b):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        np.testing.assert_allclose(
            p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-7, err_msg=name
        )


def test_mlp_sgd_momentum_step_compiles_once_for_every_batch_size(tmp_path):
    model, step = _mlp_step()
    ref_model, ref_step = _mlp_step()
    compiled = staged.compile(step, dynamic=True)
    rng = np.random.default_rng(0)
    for n in (8, 8, 32, 33, 256, 1):
        x, y = _batch(rng, n)
        loss = compiled(x, y)
        np.testing.assert_allclose(loss.item(), ref_step(x, y).item(), rtol=1e-5)
        _assert_same_params(model, ref_model)
    # the first call creates the momentum buffers (a one-shot trace), the second traces
    # the dynamic step: nothing after it traces or compiles again
    assert compiled.traces == 2 and len(compiled.graphs()) == 1
    assert "dynamic batch: traced at batch sizes 8 and 9" in compiled.last_retrace_reason
    assert "one-shot" in compiled.last_retrace_reason
    text = compiled.explanation(verbose=True)
    assert "dynamic batch: dim 0 of x, y" in text
    assert "float32[batch,20]" in text and "tensor<?x20xf32>" in text
    assert "tensor<32x20xf32>" in text  # the state stays static

    # the saved module keeps the batch dynamic
    compiled.save(
        tmp_path / "step", names={p: k for k, p in model.state_dict(keep_vars=True).items()}
    )
    manifest = json.loads((tmp_path / "step" / "manifest.json").read_text())
    assert [a["shape"] for a in manifest["args"]] == [["batch", 20], ["batch"]]
    deployed = load(tmp_path / "step")
    for n in (5, 17):
        x, y = _batch(rng, n)
        np.testing.assert_allclose(deployed(x, y).item(), ref_step(x, y).item(), rtol=1e-5)
    np.testing.assert_allclose(
        deployed.state_dict()["0.weight"],
        ref_model[0].weight.detach().numpy(),
        rtol=1e-5,
        atol=1e-7,
    )
    with pytest.raises(ValueError, match=r"expected shape \['batch', 20\], got \[3, 21\]"):
        deployed(staged.zeros(3, 21), staged.zeros(3, dtype=staged.int64))


def test_dynamic_none_makes_the_batch_dynamic_at_its_third_size(tmp_path):
    """Note [automatic dynamic]: torch.compile's default. Two sizes (an epoch's batches
    and its last, partial one) get static traces; the third makes the batch dynamic, and
    no size after it traces again. Eager is the oracle at every call."""
    model, step = _mlp_step()
    ref_model, ref_step = _mlp_step()
    compiled = staged.compile(step)  # dynamic=None
    rng = np.random.default_rng(1)
    sizes = (8, 8, 5, 8, 5, 7, 30, 7, 1, 64, 3, 8)
    for n in sizes:
        x, y = _batch(rng, n)
        np.testing.assert_allclose(compiled(x, y).item(), ref_step(x, y).item(), rtol=1e-5)
        _assert_same_params(model, ref_model)
    reasons = [h["reason"] for h in compiled.history]
    # 8 (one-shot: momentum buffers), 8, 5, 7 (dynamic), 1 (static, Note [batch size 1])
    assert compiled.traces == 5, reasons
    assert reasons[3].startswith(
        "x: shape (5, 20) -> (7, 20); y: shape (5,) -> (7,) (its 3rd batch size: "
        "dynamic=None makes the batch dynamic) (dynamic batch: traced at batch sizes 7 and 8"
    )
    assert reasons[4].startswith("x: shape (7, 20) -> (1, 20)")
    # sizes 7, 30, 7, 64 and 3 ran the dynamic trace; 8, the static one it had
    text = compiled.explanation()
    assert "calls 6-8: compiled (trace 4)" in text and "calls 10-11: compiled (trace 4)" in text
    assert "call 12: compiled (trace 2)" in text

    # a branch on the size that the traces at 5 and 6 (3 and 4) did not see: the size
    # that takes it gets a trace of its own (checked by a trace at each new size), not
    # the wrong branch; under dynamic=True too
    def branchy(x):
        return (x * 2 if x.shape[0] > 20 else x).sum(0)

    # dynamic=None: 3, 4, 5 (dynamic), 30 (static); dynamic=True: 3 (dynamic), 30 (static)
    for dynamic, traces in ((None, 4), (True, 2)):
        f = staged.compile(branchy, dynamic=dynamic)
        for n in (3, 4, 5, 30, 6, 30, 7):
            x = staged.randn(n, 2)
            np.testing.assert_allclose(f(x).numpy(), branchy(x).numpy(), rtol=1e-6)
        assert f.traces == traces, dynamic
        assert "calls 5-7" not in f.explanation()  # 6 and 7 run the dynamic trace, 30 not

    # a saved step cannot trace: it refuses the size found to differ, serves the others
    f.save(tmp_path / "branchy")
    deployed = load(tmp_path / "branchy")
    x = staged.randn(9, 2)
    np.testing.assert_allclose(deployed(x).numpy(), branchy(x).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="does not serve batch size 30: its code did something"):
        deployed(staged.randn(30, 2))

    # a batch that cannot be dynamic stays static, a trace per size, as dynamic=False's
    def diffs(x):
        return (x[1:] - x[:-1]).pow(2).sum()

    auto, static = staged.compile(diffs), staged.compile(diffs, dynamic=False)
    for n in (4, 5, 6, 7, 6):
        x = staged.randn(n, 3)
        for f in (auto, static):
            np.testing.assert_allclose(f(x).item(), diffs(x).item(), rtol=1e-6)
    assert auto.traces == static.traces == 4
    assert re.search(
        r"its 3rd batch size: .*; it stays static, since .*diffs cannot be compiled for every "
        r"batch size: slice at .*test_dynamic\.py:\d+",
        auto.history[2]["reason"],
    )


def test_mean_and_unbiased_variance_over_the_batch_become_run_time_divisions():
    def stats(x):
        m, v = x.mean(0), x.var(0)  # 1/N and 1/(N - 1): read at run time
        (g,) = staged.autograd.grad(v.sum() + (x - m).abs().mean(), x)
        return m, v, g

    compiled = staged.compile(stats, dynamic=True)
    for n in (6, 2, 41, 6, 1, 0):
        x = staged.randn(n, 3).requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # 0/0 at batch sizes 0 and 1
            got, want = compiled(x), stats(x)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-7)
    # batch 1 has its own trace: var's backward takes another path at N - 1 = 0 (Note
    # [batch size 1]); so has batch 0, whose trace folds 0/0 where the dynamic graph's
    # constant is 0 (checked by a trace at each new size); every other size runs the
    # dynamic one
    assert compiled.traces == 3
    graph = str(compiled.graphs()[0])
    assert "const 1/batch" in graph or "const 1*batch" in graph
    assert "max(batch-1,0)" in graph  # fitted on a third trace, at batch size 15


def _conv_step():
    staged.manual_seed(1)
    conv, bn, fc = nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.Linear(3 * 5 * 5, 4)
    params = list(conv.parameters()) + list(bn.parameters()) + list(fc.parameters())
    opt = optim.SGD(params, lr=0.05)

    def step(x, y):
        opt.zero_grad()
        h = bn(conv(x)).relu()  # running_var takes n / (n - 1), n = 25 * batch
        out = fc(h.view(h.shape[0], -1))  # (batch, 75): a reshape that follows the batch
        loss = F.mse_loss(out, y)
        loss.backward()
        opt.step()
        return loss, out

    return params + [bn.running_mean, bn.running_var], step


def test_conv_batchnorm_and_a_flatten_of_the_batch():
    params, step = _conv_step()
    ref_params, ref_step = _conv_step()
    compiled = staged.compile(step, dynamic=True)
    for n in (4, 7, 1, 9):
        x, y = staged.randn(n, 2, 5, 5), staged.randn(n, 4)
        (loss, out), (ref_loss, ref_out) = compiled(x, y), ref_step(x, y)
        np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol=1e-5)
        np.testing.assert_allclose(
            out.detach().numpy(), ref_out.detach().numpy(), rtol=1e-5, atol=1e-6
        )
        for p, q in zip(params, ref_params):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-7)
    # traced again once, for a reason other than the batch: .grad is set after the first call
    assert compiled.traces == 2
    assert re.match(
        r"state tensor conv\.(weight|bias)\.grad was set or cleared: None -> a tensor",
        compiled.last_retrace_reason,
    )
    assert "const 0.1*batch/(batch-0.04)" in str(compiled.graphs()[0])  # 0.1 * n / (n - 1)


def test_code_that_branches_on_the_batch_size_raises_or_falls_back():
    def f(x):
        if x.shape[0] % 2:  # odd batches take another path
            x = x * 2
        return x.sum(1)

    with pytest.raises(
        DynamicError,
        match=r"cannot be compiled for every batch size: the "
        r"traced graph changes structure with the size of 'batch': .*does the "
        r"code branch on the size\?.*dynamic=False",
    ):
        staged.compile(f, dynamic=True)(staged.ones(8, 3))
    g = staged.compile(f, dynamic=True, fallback="eager")
    with pytest.warns(
        UserWarning, match="eagerly .* since its batch dimension cannot be made dynamic"
    ):
        out = g(staged.ones(8, 3))
    np.testing.assert_array_equal(g(staged.ones(5, 3)).numpy(), [6] * 5)  # eager, no warning
    np.testing.assert_array_equal(out.numpy(), [3] * 8)
    assert g.traces == 0


def test_sizes_that_are_not_multiples_of_the_batch_raise_naming_the_line():
    def diffs(x):
        return (x[1:] - x[:-1]).pow(2).sum()  # batch - 1 rows

    with pytest.raises(
        DynamicError,
        match=r"slice at .*test_dynamic\.py:\d+: a size goes "
        r"from 7 to 8 when 'batch' goes from 8 to 9; only multiples of it can "
        r"be dynamic",
    ):
        staged.compile(diffs, dynamic=True)(staged.randn(8, 3))

    def positions(x):
        return x + staged.arange(x.shape[0]).float()[:, None]  # a constant of batch rows

    with pytest.raises(
        DynamicError,
        match=r"a constant's shape \(8, 1\) depends on the size "
        r"of 'batch'",
    ):
        staged.compile(positions, dynamic=True)(staged.randn(8, 3))

    def count(x):
        return x.sum(), x.shape[0]  # a Python value that follows the batch

    with pytest.raises(
        DynamicError,
        match=r"returns Python values that depend on the batch "
        r"size \(\[8\] at 8, \[9\] at 9\)",
    ):
        staged.compile(count, dynamic=True)(staged.randn(8, 3))


def test_zeros_of_the_batch_size_and_batch_zero_on_the_first_call():
    def f(x):
        h = staged.zeros(x.shape[0], 4) + 0.5  # a fill whose shape follows the batch
        return (x @ staged.ones(3, 4) + h).tanh()

    compiled = staged.compile(f, dynamic=True)
    with pytest.raises(
        DynamicError, match="this call's batch size is 0: call it first with a non-empty batch"
    ):
        compiled(staged.randn(0, 3))
    for n in (3, 10, 0):
        x = staged.randn(n, 3)
        np.testing.assert_allclose(compiled(x).numpy(), f(x).numpy(), rtol=1e-5)
    assert compiled.traces == 1


@pytest.mark.skipif(
    not glob.glob("/usr/share/vulkan/icd.d/lvp_icd.*.json"),
    reason="lavapipe (mesa-vulkan-drivers) is not installed",
)
def test_dynamic_step_on_vulkan():
    model, step = _mlp_step(seed=3)
    ref_model, ref_step = _mlp_step(seed=3)
    try:
        compiled = staged.compile(step, backend="vulkan-spirv", dynamic=True)
    except staged.runtime.DeviceError as err:
        pytest.skip(f"no Vulkan device: {err}")
    rng = np.random.default_rng(1)
    for n in (4, 4, 9, 16):
        x, y = _batch(rng, n)
        np.testing.assert_allclose(compiled(x, y).item(), ref_step(x, y).item(), rtol=1e-5)
    _assert_same_params(model, ref_model)
    assert compiled.traces == 2


def test_a_saved_dynamic_step_raises_at_batch_one_what_eager_code_raises(tmp_path):
    """Note [batch size 1] for a saved step, which checks in no Python: BatchNorm in
    training raises at batch 1; the deployed step made running_var NaN instead."""
    staged.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    opt = optim.SGD(model.parameters(), lr=0.1)
    compiled = staged.compile(classification_step(model, opt), dynamic=True)
    for n in (4, 5, 4):
        compiled(staged.randn(n, 4), staged.randint(0, 2, (n,)))
    compiled.save(tmp_path / "step")
    deployed = load(tmp_path / "step")
    before = deployed.state_dict()["1.running_var"]
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        deployed(np.ones((1, 4), np.float32), np.zeros(1, np.int64))
    np.testing.assert_array_equal(deployed.state_dict()["1.running_var"], before)
    deployed(np.ones((3, 4), np.float32), np.zeros(3, np.int64))  # other sizes run
    assert np.isfinite(deployed.state_dict()["1.running_var"]).all()


def test_the_trace_at_batch_size_1_shows_no_warning_of_its_own():
    """Note [batch size 1]: the dynamic step is also traced at batch size 1, where
    ``var(0)`` has no degree of freedom left; no call ran there, so nothing warns."""
    compiled = staged.compile(lambda x: x.var(0).sum())
    for n in (4, 5):
        compiled(staged.randn(n, 3))
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")  # not "error": the trace at 1 would catch it
        x = staged.randn(6, 3)
        np.testing.assert_allclose(compiled(x).item(), x.var(0).sum().item(), rtol=1e-5)
    assert [str(w.message) for w in shown] == []
    assert "dynamic batch" in compiled.last_retrace_reason
