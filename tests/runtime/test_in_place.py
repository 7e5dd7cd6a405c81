"""State written into its own buffers (Note [state in place] in
staged/lower/mlir/in_place.py): which steps do it, that they train as torch does (readers
of a parameter that nothing orders before its update included), and what a failed call
leaves."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged.lower.mlir import in_place
from staged.runtime import compiler
from staged.runtime.device import DeviceError

ALIAS = "iree.abi.output"
LISTED = "state written into its own buffers"


OPTIMIZERS = {
    "sgd": lambda lib, ps: lib.optim.SGD(ps, lr=0.1),
    "sgd-momentum": lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5),
    "adam": lambda lib, ps: lib.optim.Adam(ps, lr=0.01),
    "adamw": lambda lib, ps: lib.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
    "rmsprop": lambda lib, ps: lib.optim.RMSprop(ps, lr=0.01, momentum=0.5),
}


def _trainer(model, opt, loss_of):
    """A training step: ``loss_of(model(*args))`` minimised by ``opt``."""

    def step(*args):
        opt.zero_grad()
        loss = loss_of(model(*args[:1]), *args[1:])
        loss.backward()
        opt.step()
        return loss

    return step


def _mlp(lib, name):
    """Three layers: the backward's ``g @ W`` of the last two reads W where nothing orders
    it before W's update."""
    lib.manual_seed(0)
    model = lib.nn.Sequential(
        lib.nn.Linear(6, 16),
        lib.nn.ReLU(),
        lib.nn.Linear(16, 16),
        lib.nn.Tanh(),
        lib.nn.Linear(16, 3),
    )
    opt = OPTIMIZERS[name](lib, model.parameters())
    return model, opt, _trainer(model, opt, lambda out, y: ((out - y) ** 2).mean())


def _batches(n=6):
    rng = np.random.default_rng(0)
    return [
        (rng.standard_normal((8, 6), np.float32), rng.standard_normal((8, 3), np.float32))
        for _ in range(n)
    ]


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_training_in_place_matches_torch(forced, name):
    model, opt, step = _mlp(staged, name)
    ref, ref_opt, ref_step = _mlp(torch, name)
    cstep = staged.compile(step)
    losses = [cstep(staged.tensor(a), staged.tensor(b)) for a, b in _batches()]  # unread
    want = [ref_step(torch.tensor(a), torch.tensor(b)).item() for a, b in _batches()]
    np.testing.assert_allclose([x.item() for x in losses], want, rtol=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
        for k, v in ref_opt.state[q].items():  # float32 rounding of 6 steps, to scale
            want = v.numpy()
            np.testing.assert_allclose(
                np.asarray(opt.state[p][k]), want, rtol=1e-5, atol=1e-5 * np.abs(want).max()
            )
    text = cstep.explanation()
    assert LISTED in text and "0.weight" in text.split(LISTED)[1]
    assert cstep._last.mlir.count(ALIAS) == len(cstep._last.mlir.in_place) > 0


def test_small_steps_keep_two_copies_and_large_ones_write_in_place():
    """The default threshold (IN_PLACE_MIN_BYTES): 16 MiB of state written."""
    for width, listed in ((64, False), (2048, True)):
        staged.manual_seed(0)
        layer = staged.nn.Linear(width, width, bias=False)
        opt = staged.optim.SGD(layer.parameters(), lr=0.1)
        cstep = staged.compile(_trainer(layer, opt, lambda out: out.square().mean()))
        x = staged.randn(4, width)
        cstep(x)  # the first call runs eagerly, giving .grad (Note [deferred compiles])
        before = layer.weight.detach().numpy().copy()
        loss = cstep(x)
        assert (LISTED in cstep.explanation()) is listed
        grad = 2 * (x.numpy() @ before.T).T @ x.numpy() / (4 * width)
        np.testing.assert_allclose(loss.item(), np.mean((x.numpy() @ before.T) ** 2), rtol=1e-5)
        np.testing.assert_allclose(layer.weight.detach().numpy(), before - 0.1 * grad, atol=1e-6)


def test_a_transformer_with_data_tiling_in_place_matches_torch(forced, monkeypatch):
    """Data tiling's packing dispatches read the weights too (Note [data tiling])."""
    monkeypatch.setattr(compiler, "DATA_TILING_MIN_MACS", 0)

    def run(lib):
        lib.manual_seed(0)
        layer = lib.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        opt = lib.optim.SGD(layer.parameters(), lr=0.05, momentum=0.9)
        step = _trainer(layer, opt, lambda out: out.square().mean())
        x = lib.tensor(np.random.default_rng(1).standard_normal((2, 5, 16), np.float32))
        return layer, step, x

    layer, step, x = run(staged)
    ref, ref_step, rx = run(torch)
    cstep = staged.compile(step)
    got = [cstep(x) for _ in range(3)]
    want = [ref_step(rx).item() for _ in range(3)]
    np.testing.assert_allclose([g.item() for g in got], want, rtol=1e-4)
    for p, q in zip(layer.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-5)
    text = cstep.explanation()
    assert "with --iree-opt-data-tiling" in text and LISTED in text


def _sgd_step(w, v, after):
    """``w -= 0.1 * grad``, then ``after(w, old)`` with ``old`` what the step read."""

    def step(x):
        old = w.detach().clone()
        loss = (x @ w).square().sum() + (x @ v).sum()
        loss.backward()
        with staged.no_grad():
            w.sub_(0.1 * w.grad)
            v.sub_(0.1 * v.grad)
        w.grad = v.grad = None
        return loss, after(w, old)

    return step


@pytest.mark.parametrize(
    "after",
    [
        lambda w, old: (w - old).norm(),  # the old value read after the update
        lambda w, old: old,  # the old value returned
        lambda w, old: w.detach().clone(),  # the new value returned beside the state
    ],
    ids=["change", "old", "new"],
)
def test_a_parameter_whose_old_or_new_value_is_read_elsewhere_matches_eager(forced, after):
    rng = np.random.default_rng(0)
    w0, v0 = rng.standard_normal((4, 3), np.float32), rng.standard_normal((4, 3), np.float32)
    x = staged.tensor(rng.standard_normal((5, 4), np.float32))
    runs = []
    for compiled in (False, True):
        w, v = staged.tensor(w0, requires_grad=True), staged.tensor(v0, requires_grad=True)
        step = _sgd_step(w, v, after)
        step = staged.compile(step) if compiled else step
        outs = [[t.detach().numpy().copy() for t in step(x)] for _ in range(3)]
        runs.append((outs, w.detach().numpy(), v.detach().numpy(), step))
    (eager, w_e, v_e, _), (comp, w_c, v_c, cstep) = runs
    for a, b in zip(eager, comp):
        for s, t in zip(a, b):
            np.testing.assert_allclose(t, s, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w_c, w_e, rtol=1e-5)
    np.testing.assert_allclose(v_c, v_e, rtol=1e-5)
    assert cstep._last.mlir.in_place == ("v",)  # w is not
    assert LISTED + " (one copy held; a call that fails on the device loses it) (1): v" in (
        cstep.explanation()
    )


def test_a_state_set_without_being_read_by_its_update_is_not_written_in_place(forced):
    """``w.copy_(...)``: the update does not read ``w``, so nothing could hold it back
    behind the backward's read of ``w`` (``g @ w``)."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((4, 4), np.float32)
    x = staged.tensor(rng.standard_normal((3, 4), np.float32), requires_grad=True)

    def run(compiled):
        w = staged.tensor(w0)

        def step(x):
            y = x @ w
            (gx,) = staged.autograd.grad(y.square().sum(), x)
            with staged.no_grad():
                w.copy_(y.T @ y)
            return gx

        step = staged.compile(step) if compiled else step
        return [step(x).numpy() for _ in range(3)], w.numpy(), step

    eager, w_e, _ = run(False)
    comp, w_c, cstep = run(True)
    for a, b in zip(eager, comp):
        np.testing.assert_allclose(b, a, rtol=1e-5)
    np.testing.assert_allclose(w_c, w_e, rtol=1e-5)
    assert LISTED not in cstep.explanation()


def test_a_call_that_fails_on_the_device_loses_the_state_it_was_writing(forced):
    model, opt, step = _mlp(staged, "sgd-momentum")
    cstep = staged.compile(step)
    a, b = _batches(1)[0]
    x, y = staged.tensor(a), staged.tensor(b)
    cstep(x, y).item()
    loss = cstep(x, y)
    cstep._last.module._timeline[0].fail("injected device failure")
    with pytest.raises(RuntimeError, match="injected device failure"):
        loss.item()
    with pytest.raises(
        DeviceError, match="values are lost: a compiled step that writes it in place"
    ):
        model[0].weight.detach().numpy()
    with pytest.raises(RuntimeError, match="injected device failure"):
        cstep(x, y)  # the next call reports the failure too (Note [failed steps])
    with pytest.raises(DeviceError, match="values are lost"):
        cstep(x, y)
    # loading the state again brings training back
    fresh, fresh_opt, _ = _mlp(staged, "sgd-momentum")
    model.load_state_dict(fresh.state_dict())
    opt.load_state_dict(fresh_opt.state_dict())
    ref, _, ref_step = _mlp(torch, "sgd-momentum")
    np.testing.assert_allclose(
        cstep(x, y).item(), ref_step(torch.tensor(a), torch.tensor(b)).item(), rtol=1e-5
    )


def test_a_reader_of_one_parameter_that_needs_anothers_new_value_matches_eager(forced):
    """``a``'s old value read with ``b``'s new one: one barrier for both updates would
    have to come after that read, which needs ``b``'s update; each gets its own."""
    rng = np.random.default_rng(0)
    a0, b0 = rng.standard_normal((4, 4), np.float32), rng.standard_normal(4).astype(np.float32)
    x = staged.tensor(rng.standard_normal((3, 4), np.float32))

    def run(compiled):
        a, b = staged.tensor(a0), staged.tensor(b0)

        def step(x):
            old_a = a.detach().clone()
            before = (x @ b).sum()  # b's old value, read outside its update
            b.mul_(0.9).add_(x.sum(0))
            mixed = (old_a * b).sum()  # a's old value with b's new one
            a.mul_(0.5).add_(1.0)
            return before, mixed

        step = staged.compile(step) if compiled else step
        return [[t.numpy() for t in step(x)] for _ in range(3)], a.numpy(), b.numpy(), step

    eager, a_e, b_e, _ = run(False)
    comp, a_c, b_c, cstep = run(True)
    for want, got in zip(eager, comp):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(a_c, a_e, rtol=1e-5)
    np.testing.assert_allclose(b_c, b_e, rtol=1e-5)
    assert sorted(cstep._last.mlir.in_place) == ["a", "b"]
    assert cstep._last.mlir.count("util.optimization_barrier") == 2


MOVED_READS = {
    # the copy lowers to ``w`` itself
    "copy transposed": (lambda w: w.add_(0.1 * w.clone().T), ()),
    # IREE fuses the elementwise op through the transpose into the writing dispatch
    "product transposed": (lambda w: w.add_(0.1 * (w * 2).T), ()),
    "cast transposed": (lambda w: w.add_(0.1 * w.double().T.float()), ()),
    # the row is read from behind the barrier, so ``w`` itself can be written in place
    "first row broadcast": (lambda w: w.sub_(0.5 * w[0:1]), ("w",)),
}


@pytest.mark.parametrize("kind", MOVED_READS)
def test_an_update_reading_its_state_at_other_positions_matches_eager(forced, kind):
    """An update that reads its own state through a layout change or a slice (``w +=
    0.1 * (2 * w).T``) is not written in place where the read would be in the dispatch
    that writes ``w``: it would read elements already written."""
    update, in_place = MOVED_READS[kind]
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((64, 64), np.float32)
    x = staged.tensor(rng.standard_normal((3, 64), np.float32))

    def run(compiled):
        w = staged.tensor(w0)

        def step(x):
            y = (x @ w).sum()
            update(w)
            return y

        step = staged.compile(step) if compiled else step
        return [step(x).item() for _ in range(3)], w.numpy(), step

    eager, w_e, _ = run(False)
    comp, w_c, cstep = run(True)
    np.testing.assert_allclose(comp, eager, rtol=1e-5)
    np.testing.assert_allclose(w_c, w_e, rtol=1e-5, atol=1e-6)
    assert cstep._last.mlir.in_place == in_place


def test_a_reader_of_a_slice_of_the_state_is_ordered_before_its_update(forced):
    """IREE clones a slice into each dispatch that reads it, so the matmul reading
    ``w[n:]`` reads ``w``'s buffer itself: the update waits for the matmul, not for a
    copy of the slice (which let the matmul run after ``w`` was written)."""
    n = 64
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((2 * n, n), np.float32) / np.float32(8)
    x = staged.tensor(rng.standard_normal((16, n), np.float32))

    def run(compiled):
        w = staged.tensor(w0, requires_grad=True)
        opt = staged.optim.SGD([w], lr=0.01)

        def step(x):
            opt.zero_grad()
            loss = ((x @ w[:n].T) ** 2).mean()
            metric = (x @ w[n:].T).abs().sum()  # nothing orders it before the update
            loss.backward()
            opt.step()
            return loss, metric

        step = staged.compile(step) if compiled else step
        return [[t.item() for t in step(x)] for _ in range(3)], w.detach().numpy(), step

    eager, w_e, _ = run(False)
    comp, w_c, cstep = run(True)
    np.testing.assert_allclose(comp, eager, rtol=1e-5)
    np.testing.assert_allclose(w_c, w_e, rtol=1e-5, atol=1e-6)
    graph = cstep._last.captured.graph
    made = {op.out.id: op.prim.name for op in graph.ops}
    (gate,) = in_place.plan(graph).gated
    assert sorted(made[v.id] for v in gate[1]) == ["matmul"]
