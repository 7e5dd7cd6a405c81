"""Compiled training steps against the same code run eagerly, call for call (the second
trust probe): lr schedulers stepped inside the step, Python values the step reads from an
optimizer or changes itself, dynamic batches at their smallest sizes, and aliases made
inside a step."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest

import staged
import staged.nn.functional as F
from staged import nn, optim
from tests.checks import batches as _batches
from staged.tracing.symbolic import CaptureError
from staged.utils.checkpoint import checkpoint


# --- an lr scheduler stepped inside the step (Note [deferred calls]) ------------------------


def _scheduled(compiled, mode="blocking", order="torch"):
    """Four calls of an SGD step with ``StepLR.step()`` inside: losses, the lrs after each
    call, the final weight, the step."""
    staged.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = optim.SGD(m.parameters(), lr=0.5)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        if order == "torch":
            opt.step()
            sched.step()
        else:
            sched.step()
            opt.step()
        return loss

    f = staged.compile(step, mode=mode) if compiled else step
    losses, lrs = [], []
    for x, y in _batches([4, 4, 4, 4]):
        losses.append(f(x, y).item())
        lrs.append(opt.param_groups[0]["lr"])
    return losses, lrs, m.weight.detach().numpy(), f


@pytest.mark.parametrize("mode", ["blocking", "background"])
def test_a_scheduler_stepped_inside_a_compiled_step_steps_at_every_call(mode):
    """It ran once, at the trace: the traced call read the lr it had just set (0.25 for
    0.5), and the schedule stopped there (lr 0.25 for good)."""
    losses, lrs, w, f = _scheduled(True, mode)
    want_losses, want_lrs, want_w, _ = _scheduled(False)
    assert lrs == want_lrs == [0.25, 0.125, 0.0625, 0.03125]
    np.testing.assert_allclose(losses, want_losses, rtol=1e-6)
    np.testing.assert_allclose(w, want_w, rtol=1e-6, atol=1e-7)
    with pytest.raises(CaptureError, match=r"StepLR.step\(\) inside the step: a step traced"):
        f.save(tempfile.mkdtemp())  # a deployed step runs no Python: it would not schedule


def test_a_scheduler_stepped_before_the_optimizer_inside_a_step_raises():
    with pytest.raises(CaptureError, match=r"lr is read after StepLR.step\(\)"):
        _scheduled(True, order="scheduler first")


# --- Python values the step reads or changes ------------------------------------------------


def _lr_returned(compiled):
    staged.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = optim.SGD(m.parameters(), lr=0.5)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss, opt.param_groups[0]["lr"]  # logged with the loss

    f = staged.compile(step) if compiled else step
    out = []
    for x, y in _batches([4, 4, 4]):
        loss, lr = f(x, y)
        out.append((loss.item(), lr))
        sched.step()
    return out, f


def test_the_lr_a_step_returns_follows_the_scheduler():
    """``opt.param_groups[0]["lr"]`` was a constant of the trace: 0.5 at every call."""
    ours, f = _lr_returned(True)
    eager, _ = _lr_returned(False)
    assert [lr for _, lr in ours] == [lr for _, lr in eager] == [0.5, 0.25, 0.125]
    np.testing.assert_allclose([v for v, _ in ours], [v for v, _ in eager], rtol=1e-6)
    assert f.last_retrace_reason == "opt.param_groups[0]['lr']: 0.25 -> 0.125"


# --- dynamic batches at their smallest sizes ------------------------------------------------


def _dynamic(sizes, compiled):
    staged.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    opt = optim.SGD(m.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    f = staged.compile(step, dynamic=True) if compiled else step
    return [f(x, y).item() for x, y in _batches(sizes)], m[0].weight.detach().numpy()


def test_a_dynamic_step_first_called_with_a_batch_of_2():
    """A scalar constant expanded to ``(n,)`` (cross_entropy's target bound) was folded at
    ``n <= 2`` only: the traces at 2 and 3 differed, and the call raised DynamicError."""
    sizes = [2, 2, 5, 3]
    (ours, w), (eager, w_eager) = _dynamic(sizes, True), _dynamic(sizes, False)
    np.testing.assert_allclose(ours, eager, rtol=1e-6)
    np.testing.assert_allclose(w, w_eager, rtol=1e-6, atol=1e-7)


def test_a_dynamic_step_first_called_with_a_batch_of_1():
    """Traced at 1 and 2 the graphs differ (an expand to (1, C) is skipped at 1), so the
    call raised DynamicError: batch 1 is traced statically (Note [batch size 1])."""
    sizes = [1, 3, 1, 4]
    (ours, w), (eager, w_eager) = _dynamic(sizes, True), _dynamic(sizes, False)
    np.testing.assert_allclose(ours, eager, rtol=1e-6)
    np.testing.assert_allclose(w, w_eager, rtol=1e-6, atol=1e-7)


def test_dynamic_batch_norm_training_at_batch_1_raises_as_eagerly():
    bn = nn.BatchNorm1d(3)
    f = staged.compile(lambda x: bn(x).sum().detach(), dynamic=True)
    f(staged.randn(4, 3))
    for _ in range(2):  # each call raises, as eagerly (Note [batch size 1])
        with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
            f(staged.randn(1, 3))
    assert not np.isnan(bn.running_var.numpy()).any()  # it had NaN, silently
    f(staged.randn(5, 3))
    assert f.traces == 1


def test_a_branch_on_batch_size_1_is_followed_at_batch_1():
    def step(x):
        return x * 2 if x.shape[0] == 1 else x * 3

    f = staged.compile(step, dynamic=True)
    for n in (4, 1, 6, 1):
        x = staged.randn(n, 2)
        np.testing.assert_array_equal(f(x).numpy(), step(x).numpy())
    assert f.traces == 2  # batch 1 has its own trace


def test_a_checkpoint_in_a_dynamic_step():
    staged.manual_seed(0)
    block = nn.Sequential(nn.Linear(3, 4), nn.Tanh())

    def step(x):
        block.zero_grad()
        checkpoint(block, x, use_reentrant=False).sum().backward()
        return block[0].weight.grad.clone()

    f = staged.compile(step, dynamic=True)
    for x, _ in _batches([5, 3]):
        np.testing.assert_allclose(f(x).numpy(), step(x).numpy(), rtol=1e-5, atol=1e-6)


def test_an_alias_made_in_a_step_sees_a_later_write_to_its_tensor():
    def run(compiled):
        w = nn.Parameter(staged.ones(3))

        def step(x):
            d = w.detach()  # `{k: v.detach() for ...}`, then an update, then a use
            with staged.no_grad():
                w.mul_(x)
            return d * 1

        f = staged.compile(step) if compiled else step
        return [f(staged.tensor([2.0, 3.0, 4.0])).tolist() for _ in range(2)]

    assert run(True) == run(False) == [[2.0, 3.0, 4.0], [4.0, 9.0, 16.0]]


@pytest.mark.parametrize("alias", ["detach", "data", "view_detach"])
@pytest.mark.parametrize("write", ["whole", "view", "alias"])
def test_aliases_made_in_a_step_see_writes_as_eagerly(alias, write):
    """Every alias of w made in the step sees a later write to w, to a view of w, or
    through another alias, compiled as eagerly (Note [aliased memory])."""

    def run(compiled):
        w = nn.Parameter(staged.ones(3))

        def step(x):
            a = {"detach": w.detach, "data": lambda: w.data, "view_detach": lambda: w[1:].detach()}
            d, e = a[alias](), w.detach()
            with staged.no_grad():
                {"whole": w, "view": w[:2], "alias": e}[write].mul_(
                    x[: 3 if write != "view" else 2]
                )
            return d * 1, e + 0

        f = staged.compile(step) if compiled else step
        return [[t.tolist() for t in f(staged.tensor([2.0, 3.0, 4.0]))] for _ in range(2)]

    assert run(True) == run(False)
