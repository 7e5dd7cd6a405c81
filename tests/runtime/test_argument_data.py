"""Note [argument data]: a compiled step may read the data of a small integer or bool
argument (lengths for ``pack_padded_sequence``, a node mask); the trace holds what it
read, a call with other data traces again, and past ``VALUE_TRACES`` such traces new
data runs eagerly. Eager code is the oracle at every call."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staged
import staged.nn.functional as F
from staged import nn
from staged.nn.utils.rnn import pack_padded_sequence
from staged.runtime.compiled import VALUE_TRACES
from staged.tracing.symbolic import CaptureError


def _twins(make):
    """Two copies of the same model and SGD optimizer: one compiled, one eager."""
    out = []
    for _ in range(2):
        staged.manual_seed(0)
        model = make()
        out.append((model, staged.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)))
    return out


def test_lengths_read_by_pack_padded_sequence_trace_per_data_then_run_eagerly():
    def make_step(lin, opt):
        def step(x, lengths):
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            loss = lin(packed.data).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        return step

    (lin, opt), (ref, ref_opt) = _twins(lambda: nn.Linear(3, 2))
    compiled, eager = staged.compile(make_step(lin, opt)), make_step(ref, ref_opt)
    x = staged.randn(3, 5, 3)
    data = [[3, 5, 2]] * 3 + [[4, 5, 1], [3, 5, 2], [2, 5, 2], [1, 5, 1], [5, 5, 5], [2, 5, 2]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for lengths in data:
            got = compiled(x, staged.tensor(lengths)).item()
            np.testing.assert_allclose(got, eager(x, staged.tensor(lengths)).item(), rtol=1e-5)
    np.testing.assert_allclose(lin.weight.detach().numpy(), ref.weight.detach().numpy(), 1e-5)
    reasons = [h.get("reason") for h in compiled.history if not h.get("eager")]
    assert (
        reasons[2:] == ["new data in lengths (read at tests/runtime/test_argument_data.py:34)"] * 3
    ), reasons
    # one trace per data: [3, 5, 2] (twice: its first call gave .grad), and three more
    assert compiled.traces == 2 + VALUE_TRACES - 1
    (msg,) = [str(w.message) for w in caught if "reads the data" in str(w.message)]
    assert (
        "step reads the data of lengths (read at tests/runtime/test_argument_data.py:34), and "
        f"{VALUE_TRACES} traces for other data of it were made: calls with new data there run "
        "eagerly"
    ) in msg
    text = compiled.explanation()
    assert "call 8: eager (new argument data)" in text and "call 9: compiled" in text


def test_a_node_mask_passed_in_traces_once_and_a_saved_step_refuses_it(tmp_path):
    """The GNN idiom ``loss(out[train_mask], y[train_mask])`` with the mask an argument."""

    def make_step(lin, opt):
        def step(x, y, mask):
            loss = F.cross_entropy(lin(x)[mask], y[mask])
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        return step

    (lin, opt), (ref, ref_opt) = _twins(lambda: nn.Linear(4, 3))
    compiled, eager = staged.compile(make_step(lin, opt)), make_step(ref, ref_opt)
    x, y = staged.randn(10, 4), staged.randint(0, 3, (10,))
    train = staged.tensor([True, False] * 5)
    for mask in (train, train, train, ~train, train.clone()):
        got = compiled(x, y, mask).item()
        np.testing.assert_allclose(got, eager(x, y, mask).item(), rtol=1e-5)
    np.testing.assert_allclose(lin.weight.detach().numpy(), ref.weight.detach().numpy(), 1e-5)
    assert compiled.traces == 3  # the first call (it gave .grad), the mask, the other mask
    with pytest.raises(
        CaptureError, match=r"the step reads the data of mask \(read at .*: a saved"
    ):
        compiled.save(tmp_path / "step")


def test_what_a_trace_still_cannot_read():
    """Float arguments (new data at every call) and plain ``staged.capture`` (no call to
    key on) still raise."""
    with pytest.raises(CaptureError, match="needs the data of a tensor"):
        staged.compile(lambda x: x * x.tolist()[0])(staged.ones(2))
    with pytest.raises(CaptureError, match="needs the data of a tensor"):
        staged.capture(lambda n: staged.ones(n.tolist()[0]), staged.tensor([2]))
