"""A compiled step that writes into its argument tensors in place (``x.clamp_()``, an RNN's
hidden state passed in and updated with ``h.copy_(...)``) writes them back at every call,
as eager code does: the new values are outputs of the step (kind ``"arg"``)."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from staged import nn


def _rnn_steps(compiled: bool, **kw):
    staged.manual_seed(0)
    cell = nn.RNNCell(3, 4)
    opt = staged.optim.SGD(cell.parameters(), lr=0.1)

    def step(x, h):
        new = cell(x, h)
        loss = new.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        h.copy_(new.detach())  # truncated BPTT: the state carried in the argument
        return loss

    f = staged.compile(step, **kw) if compiled else step
    h = staged.zeros(2, 4)
    losses = [f(staged.randn(2, 3), h).item() for _ in range(4)]
    return losses, h.numpy().copy(), h._version


@pytest.mark.parametrize("kw", [{}, {"mode": "background"}])
def test_a_compiled_step_writes_its_argument_back_as_eager_code_does(kw):
    losses, h, version = _rnn_steps(True, **kw)
    want, want_h, want_version = _rnn_steps(False)
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    assert losses[1] != losses[0]  # the carried state changed the next step
    np.testing.assert_allclose(h, want_h, rtol=1e-5, atol=1e-6)
    assert version == want_version == 4


def test_a_written_view_writes_through_to_its_base_and_dynamic_batches_follow():
    def clip(x):
        x.clamp_(-1, 1)
        return x.sum()

    base = staged.tensor([[-3.0, 0.5], [2.0, 0.25], [9.0, -9.0]])
    view = base[1]
    staged.compile(clip)(view)  # a view: the base sees the write
    np.testing.assert_allclose(base.numpy(), [[-3.0, 0.5], [1.0, 0.25], [9.0, -9.0]])
    f = staged.compile(clip, dynamic=True)
    for n in (3, 5, 4):
        x = staged.linspace(-4, 4, 2 * n).reshape(n, 2)
        out = f(x)
        np.testing.assert_allclose(
            x.numpy(), np.clip(np.linspace(-4, 4, 2 * n), -1, 1).reshape(n, 2), rtol=1e-6
        )
        assert out.item() == pytest.approx(float(x.numpy().sum()), abs=1e-5)
    assert f.traces == 1 and "arguments written in place (1): x" in f.explanation()


def test_saving_a_step_that_writes_its_argument_says_why_it_cannot(tmp_path):
    def norm(x):
        x.div_(x.norm())
        return x

    f = staged.compile(norm)
    f(staged.ones(4))
    with pytest.raises(ValueError, match="writes its argument x in place"):
        f.save(tmp_path / "step")
