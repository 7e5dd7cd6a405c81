"""Variable-length sequences for the RNNs (``torch.nn.utils.rnn``): padding, and packing
into a ``PackedSequence`` that ``RNN``/``LSTM``/``GRU`` run over without the padding.

A packed sequence is torch's layout: the sequences sorted by decreasing length
(``sorted_indices``), their steps time-major in ``data`` (at step ``t`` the
``batch_sizes[t]`` sequences still running), ``unsorted_indices`` the inverse order. Packing
and unpacking are index ops (``index_select``, ``cat``), so gradients flow through them and
they trace; the lengths themselves are Python numbers, fixed at trace time.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import dtypes as dt
from ...eager import ops
from ...eager.factories import arange, full, tensor
from ...eager.tensor import Tensor

_UNSORTED = (
    "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
    "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep "
    "this requirement if you do not need ONNX exportability."
)


class PackedSequence(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args, **kwargs) -> PackedSequence:
        """The data moved or cast as ``Tensor.to``; the index tensors stay as they are."""
        return self._replace(data=self.data.to(*args, **kwargs))

    def cpu(self) -> PackedSequence:
        return self

    def double(self) -> PackedSequence:
        return self.to(dt.float64)

    def float(self) -> PackedSequence:
        return self.to(dt.float32)

    def half(self) -> PackedSequence:
        return self.to(dt.float16)

    def long(self) -> PackedSequence:
        return self.to(dt.int64)

    def int(self) -> PackedSequence:
        return self.to(dt.int32)

    def short(self) -> PackedSequence:
        return self.to(dt.int16)

    def char(self) -> PackedSequence:
        return self.to(dt.int8)

    def byte(self) -> PackedSequence:
        return self.to(dt.uint8)

    def cuda(self, *args, **kwargs) -> PackedSequence:
        return self._replace(data=self.data.cuda(*args, **kwargs))

    def pin_memory(self) -> PackedSequence:
        return self

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False


def invert_permutation(permutation):
    """The inverse of the index tensor ``permutation`` (None for None), as torch's: between
    a PackedSequence's sorted and unsorted indices."""
    if permutation is None:
        return None
    output = permutation.new_empty(permutation.shape)
    return output.scatter_(0, permutation, arange(permutation.numel()))


def _lengths(lengths) -> np.ndarray:
    a = np.asarray(lengths.tolist() if isinstance(lengths, Tensor) else lengths, np.int64)
    if a.ndim != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D tensor, but got {a.ndim}D")
    if (a <= 0).any():
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in "
            "'lengths' that is <= 0"
        )
    return a


def _long(values) -> Tensor:
    return tensor(np.asarray(values, np.int64))


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack ``input`` (``(T, B, *)``, ``batch_first``: ``(B, T, *)``) holding sequences of
    ``lengths``; unless ``enforce_sorted``, the batch is sorted here (and the order kept)."""
    n = _lengths(lengths)
    if batch_first:
        input = input.transpose(0, 1)
    if len(n) != input.shape[1]:
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {len(n)} (batch_size="
            f"{input.shape[1]})"
        )
    if enforce_sorted:
        if (np.diff(n) > 0).any():
            raise RuntimeError(_UNSORTED)
        sorted_idx = unsorted_idx = None
    else:
        order = np.argsort(-n, kind="stable")
        sorted_idx, unsorted_idx = _long(order), _long(np.argsort(order))
        input, n = input.index_select(1, sorted_idx), n[order]
    if n[0] > input.shape[0]:
        raise RuntimeError(
            f"Expected the longest length ({n[0]}) to be at most the padded length "
            f"({input.shape[0]})"
        )
    sizes = [int((n > t).sum()) for t in range(int(n[0]))]
    data = ops.cat([input[t, :bs] for t, bs in enumerate(sizes)])
    return PackedSequence(data, _long(sizes), sorted_idx, unsorted_idx)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """``(padded, lengths)``: the inverse of ``pack_padded_sequence``, in the batch's
    original order, padded with ``padding_value`` to ``total_length`` steps (default: the
    longest)."""
    data, sizes = sequence.data, sequence.batch_sizes.tolist()
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being "
                f"{steps}"
            )
        steps = total_length
    batch, feature = sizes[0], tuple(data.shape[1:])
    rows, at = [], 0
    for t in range(steps):
        bs = sizes[t] if t < len(sizes) else 0
        part = [data[at : at + bs]] if bs else []
        if bs < batch:
            part.append(full((batch - bs, *feature), padding_value, dtype=data.dtype))
        rows.append(ops.cat(part) if len(part) > 1 else part[0])
        at += bs
    padded = ops.stack(rows)
    lengths = np.array([sum(1 for s in sizes if s > b) for b in range(batch)], np.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices.numpy()]
    return (padded.transpose(0, 1) if batch_first else padded), _long(lengths)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """The tensors of ``sequences`` (each ``(L_i, *)``) stacked into ``(T, B, *)``
    (``batch_first``: ``(B, T, *)``), padded with ``padding_value`` on ``padding_side``."""
    if padding_side not in ("left", "right"):
        raise ValueError(
            f"Expected padding_side to be one of left or right, but got {padding_side}."
        )
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        gap = longest - s.shape[0]
        if gap:
            pad = full((gap, *s.shape[1:]), padding_value, dtype=s.dtype)
            s = ops.cat([pad, s] if padding_side == "left" else [s, pad])
        padded.append(s)
    return ops.stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted=True):
    """``pack_padded_sequence`` of the padded ``sequences``."""
    padded = pad_sequence(sequences)  # raises for an empty list, as torch's
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(padded, lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences ``pad_sequence`` stacked, cut to their ``lengths``."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[b, :n] for b, n in enumerate(_lengths(lengths).tolist())]


def unpack_sequence(packed_sequences):
    """The list of sequences ``pack_sequence`` packed, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
