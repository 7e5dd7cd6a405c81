"""``nn.utils.rnn`` (padding, packing) and RNNs over a ``PackedSequence`` against torch 2.13:
outputs, final states, the gradients of the input and of every weight, with the batch
sorted or not, with and without ``hx``, one or two layers, one or two directions."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
import torch

import staged

RNG = np.random.RandomState(1)
X = RNG.randn(5, 3, 3).astype(np.float32)
H0 = RNG.randn(4, 3, 4).astype(np.float32)


def _run(lib, mode, bidirectional, layers, batch_first, lengths, with_hx, dropout=0.0):
    lib.manual_seed(0)
    rnn = getattr(lib.nn, mode)(
        3,
        4,
        num_layers=layers,
        bidirectional=bidirectional,
        batch_first=batch_first,
        dropout=dropout,
    )
    x = lib.tensor(X.transpose(1, 0, 2) if batch_first else X, requires_grad=True)
    packed = lib.nn.utils.rnn.pack_padded_sequence(
        x, lengths, batch_first=batch_first, enforce_sorted=lengths == sorted(lengths)[::-1]
    )
    hx = None
    if with_hx:
        h0 = lib.tensor(H0[: layers * (2 if bidirectional else 1)])
        hx = (h0, h0 * 0.5) if mode == "LSTM" else h0
    out, h = rnn(packed, hx)
    padded, lens = lib.nn.utils.rnn.pad_packed_sequence(out, batch_first, -1.0, total_length=6)
    states = h if mode == "LSTM" else (h,)
    ((padded * padded).sum() + sum((s * 1.5).sum() for s in states)).backward()
    got = [padded, lens, out.data, out.batch_sizes, *states, x.grad]
    return [t.detach().numpy() for t in got] + [p.grad.numpy() for p in rnn.parameters()]


@pytest.mark.parametrize(
    "mode,bidirectional,layers,batch_first,lengths,with_hx",
    [
        (m, bi, nl, bf, ln, hx)
        for (m, bi, nl), (bf, ln, hx) in product(
            product(["RNN", "LSTM", "GRU"], [False, True], [1, 2]),
            [(False, [5, 3, 2], False), (True, [2, 5, 3], True)],
        )
    ],
)
def test_rnns_over_packed_sequences_match_torch(
    mode, bidirectional, layers, batch_first, lengths, with_hx
):
    args = (mode, bidirectional, layers, batch_first, lengths, with_hx)
    for ours, theirs in zip(_run(staged, *args), _run(torch, *args)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_dropout_between_layers_draws_torchs_masks():
    args = ("LSTM", False, 2, False, [5, 3, 2], False, 0.5)
    for ours, theirs in zip(_run(staged, *args), _run(torch, *args)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_padding_and_packing_helpers_match_torch():
    seqs = [np.ones((2, 2), np.float32), np.full((4, 2), 2.0, np.float32), np.zeros((1, 2))]
    for kw in (dict(), dict(batch_first=True, padding_value=-1.0, padding_side="left")):
        got = staged.nn.utils.rnn.pad_sequence([staged.tensor(s) for s in seqs], **kw)
        want = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], **kw)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    for lib in (staged, torch):
        packed = lib.nn.utils.rnn.pack_sequence([lib.tensor(s) for s in seqs], enforce_sorted=False)
        back = lib.nn.utils.rnn.unpack_sequence(packed)
        assert [b.shape[0] for b in back] == [2, 4, 1]
        assert packed.batch_sizes.tolist() == [3, 2, 1, 1]
        assert packed.sorted_indices.tolist() == [1, 0, 2]


@pytest.mark.parametrize(
    "call,error,match",
    [
        (
            lambda lib, x: lib.nn.utils.rnn.pack_padded_sequence(x, [2, 3, 1]),
            RuntimeError,
            "must be sorted in decreasing order",
        ),
        (
            lambda lib, x: lib.nn.utils.rnn.pack_padded_sequence(
                x, [2, 0, 1], enforce_sorted=False
            ),
            RuntimeError,
            "has to be greater than 0",
        ),
        (
            lambda lib, x: lib.nn.utils.rnn.pad_packed_sequence(
                lib.nn.utils.rnn.pack_padded_sequence(x, [3, 2, 1]), total_length=2
            ),
            ValueError,
            "Expected total_length to be at least the length of the longest sequence",
        ),
    ],
)
def test_bad_lengths_raise_torchs_errors(call, error, match):
    for lib in (staged, torch):
        with pytest.raises(error, match=match):
            call(lib, lib.tensor(X[:3]))


def test_no_sequences_raise_torchs_error():
    for lib in (staged, torch):
        for empty in (lib.nn.utils.rnn.pad_sequence, lib.nn.utils.rnn.pack_sequence):
            with pytest.raises(RuntimeError, match="received an empty list of sequences"):
                empty([])


def test_a_compiled_step_over_packed_sequences_trains_as_eager():
    def train(compiled):
        staged.manual_seed(0)
        gru = staged.nn.GRU(3, 4, bidirectional=True)
        opt = staged.optim.SGD(gru.parameters(), lr=0.1)

        def step(x):
            packed = staged.nn.utils.rnn.pack_padded_sequence(x, [5, 3, 2])
            out, h = gru(packed)
            loss = (out.data**2).mean() + h.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        f = staged.compile(step) if compiled else step
        return [f(staged.tensor(X)).item() for _ in range(3)]

    np.testing.assert_allclose(train(True), train(False), rtol=1e-5)
