"""RNN, LSTM, GRU and their cells, as torch's: parameter names, shapes, gate order and
initialisation (uniform in +-1/sqrt(hidden_size), in parameter order).

The time loop is a Python loop over steps: under ``staged.compile`` it unrolls (fine for
short sequences). Each layer projects its whole input sequence at once (``W_ih x + b_ih``
for every step), then steps through ``W_hh h + b_hh``.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ... import autodiff as ad
from ...autodiff import fused
from ...eager import autocast, ops
from ...eager.factories import empty, zeros
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ..utils.rnn import PackedSequence


# One step of each cell: ``gi`` = W_ih x + b_ih, ``gh`` = W_hh h + b_hh, ``state`` = (h,) or
# (h, c); returns the new state, whose first entry is the output.
def _rnn_tanh(gi, gh, state):
    return (ops.tanh(gi + gh),)


def _rnn_relu(gi, gh, state):
    return (ops.relu(gi + gh),)


def _lstm_composite(gates, c):
    """Gates i, f, g, o: ``c' = f c + i g``, ``h' = o tanh(c')``; (h', c') stacked."""
    i, f, g, o = ops.chunk(gates, 4, 1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return ops.stack([o.sigmoid() * c.tanh(), c])


# one kernel and one Node a step eagerly (Note [fused kernels] in eager/dispatch.py)
_lstm_cell = ad.Fused(
    "lstm_cell",
    fused.lstm_cell_impl,
    _lstm_composite,
    vjp=fused.LSTM_CELL_VJP,
    node_name="LstmCellBackward0",
)


def _lstm(gi, gh, state):
    gates, c = gi + gh, state[1]
    if gates.ndim == 2 and fused.fusable(gates, c):
        hc = _lstm_cell(gates, c)
    else:
        hc = _lstm_composite(gates, c)
    return hc[0], hc[1]


def _gru_composite(gi, gh, h):
    """Gates r, z, n: ``n = tanh(W_in x + b_in + r (W_hn h + b_hn))``, ``h' = n + z (h - n)``."""
    ir, iz, in_ = ops.chunk(gi, 3, 1)
    hr, hz, hn = ops.chunk(gh, 3, 1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    return n + z * (h - n)


_gru_cell = ad.Fused(
    "gru_cell",
    fused.gru_cell_impl,
    _gru_composite,
    vjp=fused.GRU_CELL_VJP,
    node_name="GruCellBackward0",
)


def _gru(gi, gh, state):
    h = state[0]
    if gi.ndim == 2 and fused.fusable(gi, gh, h):
        return (_gru_cell(gi, gh, h),)
    return (_gru_composite(gi, gh, h),)


_CELLS = {
    "RNN_TANH": (1, _rnn_tanh),
    "RNN_RELU": (1, _rnn_relu),
    "LSTM": (4, _lstm),
    "GRU": (3, _gru),
}


def _cell(mode, input, states, w_ih, w_hh, b_ih, b_hh) -> tuple:
    """One step of the cell ``mode``: its new states from ``input`` and ``states``."""
    return _CELLS[mode][1](F.linear(input, w_ih, b_ih), F.linear(states[0], w_hh, b_hh), states)


# torch's top-level cell functions (what nn.LSTMCell and the others call)
def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> tuple:
    """``(h', c')`` of one LSTM step from ``input`` and ``hx = (h, c)``."""
    return _cell("LSTM", input, tuple(hx), w_ih, w_hh, b_ih, b_hh)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``h'`` of one GRU step."""
    return _cell("GRU", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``tanh(W_ih x + b_ih + W_hh h + b_hh)``."""
    return _cell("RNN_TANH", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``relu(W_ih x + b_ih + W_hh h + b_hh)``."""
    return _cell("RNN_RELU", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def _reset(module):
    stdv = 1.0 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else 0
    for weight in module.parameters():
        init.uniform_(weight, -stdv, stdv)


class RNNBase(Module):
    """The stacked, optionally bidirectional recurrence of ``mode`` ("RNN_TANH", "RNN_RELU",
    "LSTM" or "GRU"); ``dropout`` applies to every layer's output but the last's, in
    training."""

    def __init__(
        self,
        mode,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if (
            not isinstance(dropout, numbers.Number)
            or isinstance(dropout, bool)
            or not 0 <= dropout <= 1
        ):
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the "
                "probability of an element being zeroed"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                f"dropout option adds dropout after all but last recurrent layer, so "
                f"non-zero dropout expects num_layers greater than 1, but got "
                f"dropout={dropout} and num_layers={num_layers}",
                stacklevel=3,
            )
        for name, value, kind in (
            ("bias", bias, bool),
            ("batch_first", batch_first, bool),
            ("input_size", input_size, int),
            ("hidden_size", hidden_size, int),
        ):
            if not isinstance(value, kind):
                raise TypeError(
                    f"{name} should be of type {kind.__name__}, got: {type(value).__name__}"
                )
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError(
                "proj_size should be a positive integer or zero to disable projections"
            )
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _CELLS:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        gate_size = _CELLS[mode][0] * hidden_size
        real_hidden = proj_size or hidden_size
        directions = 2 if bidirectional else 1
        self._all_weights = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = {
                    "weight_ih": (gate_size, layer_input),
                    "weight_hh": (gate_size, real_hidden),
                }
                if bias:
                    shapes.update(bias_ih=(gate_size,), bias_hh=(gate_size,))
                if proj_size:
                    shapes.update(weight_hr=(proj_size, hidden_size))
                for name, shape in shapes.items():
                    setattr(
                        self, name + suffix, Parameter(empty(*shape, device=device, dtype=dtype))
                    )
                self._all_weights.append([name + suffix for name in shapes])
        self.reset_parameters()

    def reset_parameters(self):
        _reset(self)

    def flatten_parameters(self):
        """A no-op, as torch's on the CPU (it packs the weights for cuDNN)."""

    # torch's checks and helpers that subclasses of its RNNs call (forward checks the same)
    def check_input(self, input, batch_sizes):
        w = self.weight_ih_l0.dtype
        if input.dtype != w and not autocast.is_enabled("cpu"):
            raise ValueError(
                f"RNN input dtype ({input.dtype}) does not match weight dtype ({w}). Convert "
                f"input: input.to({w}), or convert model: model.to({input.dtype})"
            )
        expected = 2 if batch_sizes is not None else 3
        if input.ndim != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.ndim}")
        if self.input_size != input.shape[-1]:
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                f"got {input.shape[-1]}"
            )

    def get_expected_hidden_size(self, input, batch_sizes):
        return self._expected_size(input, batch_sizes, self.proj_size or self.hidden_size)

    def _expected_size(self, input, batch_sizes, features):
        if batch_sizes is not None:
            batch = int(batch_sizes[0])
        else:
            batch = input.shape[0] if self.batch_first else input.shape[1]
        return (self.num_layers * (2 if self.bidirectional else 1), batch, features)

    def check_hidden_size(self, hx, expected_hidden_size, msg="Expected hidden size {}, got {}"):
        if tuple(hx.shape) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.shape)))

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        return hx if permutation is None else hx.index_select(1, permutation)

    @property
    def all_weights(self):
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def forward(self, input, hx=None):
        """``(output, h_n)`` (LSTM: ``(output, (h_n, c_n))``) of ``(L, N, H_in)`` input
        (``batch_first``: ``(N, L, H_in)``), unbatched ``(L, H_in)`` or a
        ``PackedSequence`` (then ``output`` is one too); ``hx`` defaults to zeros."""
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        lstm = self.mode == "LSTM"
        name = self.mode.split("_")[0]
        if input.ndim not in (2, 3):
            raise ValueError(
                f"{name}: Expected input to be 2D or 3D, got {input.ndim}D "
                + ("tensor instead" if name == "RNN" else "instead")
            )
        batched = input.ndim == 3
        batch_dim = 0 if self.batch_first else 1
        if not batched:
            input = input.unsqueeze(batch_dim)
        if self.batch_first:
            input = input.transpose(0, 1)
        states = self._initial_states(input, hx, batched, lstm)
        output, h_n = self._layers(input, states)
        if self.batch_first:
            output = output.transpose(0, 1)
        if not batched:
            output = output.squeeze(batch_dim)
            h_n = tuple(h.squeeze(1) for h in h_n)
        return output, (h_n if lstm else h_n[0])

    def _forward_packed(self, packed, hx):
        """``forward`` of a PackedSequence: each step runs the sequences still going (the
        first ``batch_sizes[t]`` of the sorted batch), the others keep their state, as
        torch's packed kernels do; ``hx`` and ``h_n`` are in the batch's original order."""
        lstm = self.mode == "LSTM"
        data, sizes = packed.data, packed.batch_sizes.tolist()
        if hx is not None and packed.sorted_indices is not None:
            hx = tuple(h.index_select(1, packed.sorted_indices) for h in (hx if lstm else (hx,)))
            hx = hx if lstm else hx[0]
        # the states' shape check takes (steps, batch, features): one step stands for them
        states = self._initial_states(data[: sizes[0]].unsqueeze(0), hx, True, lstm)
        output, h_n = self._layers(data, states, sizes)
        if packed.unsorted_indices is not None:
            h_n = tuple(h.index_select(1, packed.unsorted_indices) for h in h_n)
        return packed._replace(data=output), (h_n if lstm else h_n[0])

    def _layers(self, input, states, sizes=None):
        """Every layer and direction over ``input`` (``(L, N, H_in)``, or packed data with
        its batch ``sizes``): ``(output, final states stacked)``."""
        directions = 2 if self.bidirectional else 1
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                out, state = self._layer(
                    input, tuple(s[k] for s in states), k, direction == 1, sizes
                )
                outs.append(out)
                finals.append(state)
            input = outs[0] if directions == 1 else ops.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                input = F.dropout(input, self.dropout, True)
        return input, tuple(ops.stack([f[i] for f in finals]) for i in range(len(states)))

    def _initial_states(self, input, hx, batched, lstm):
        """``(h0,)`` or ``(h0, c0)`` for ``input`` (L, N, H_in), each ``(layers * directions,
        N, hidden)``: ``hx`` (unsqueezed for unbatched input) or zeros; checked as torch."""
        if hx is not None:
            hx = tuple(hx) if lstm else (hx,)
            want = 3 if batched else 2
            if any(h.ndim != want for h in hx):
                got = (
                    f"({hx[0].ndim}-D, {hx[1].ndim}-D) tensors"
                    if lstm
                    else f"{hx[0].ndim}-D tensor"
                )
                raise RuntimeError(
                    f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, "
                    f"{'hx and cx' if lstm else 'hx'} should also be {want}-D "
                    f"but got {got}"
                )
            if not batched:
                hx = tuple(h.unsqueeze(1) for h in hx)
        w = self.weight_ih_l0.dtype
        if input.dtype != w:
            raise ValueError(
                f"RNN input dtype ({input.dtype}) does not match weight dtype "
                f"({w}). Convert input: input.to({w}), or convert model: "
                f"model.to({input.dtype})"
            )
        if input.shape[-1] != self.input_size:
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected "
                f"{self.input_size}, got {input.shape[-1]}"
            )
        lead = (self.num_layers * (2 if self.bidirectional else 1), input.shape[1])
        # h's features are proj_size where the LSTM projects, c's always hidden_size
        shapes = [(*lead, self.proj_size or self.hidden_size), (*lead, self.hidden_size)]
        if hx is None:
            return tuple(
                zeros(*shape, dtype=input.dtype, device=input.device)
                for shape in shapes[: 2 if lstm else 1]
            )
        for i, (h, shape) in enumerate(zip(hx, shapes)):
            if tuple(h.shape) != shape:
                what = f"hidden[{i}] size" if lstm else "hidden size"
                raise RuntimeError(f"Expected {what} {shape}, got {list(h.shape)}")
        return hx

    def _layer(self, x, state, k, reverse, sizes=None):
        """One direction of one layer over ``x`` (L, N, H_in): ``(outputs (L, N, hidden),
        final state)``; with batch ``sizes``, over packed data ``(sum of lengths, H_in)``,
        each step moving the first ``sizes[t]`` rows of the state on (the sequences still
        going: in reverse, each starts from its initial state at its last step)."""
        w_ih, w_hh, *rest = self.all_weights[k]
        b_ih, b_hh = rest[:2] if self.bias else (None, None)
        w_hr = rest[-1] if self.proj_size else None
        cell = _CELLS[self.mode][1]

        def step(gi, gh, state):
            new = cell(gi, gh, state)
            return new if w_hr is None else (F.linear(new[0], w_hr), *new[1:])

        gi = F.linear(x, w_ih, b_ih)
        n = x.shape[0] if sizes is None else len(sizes)
        outs = [None] * n
        starts = None if sizes is None else np.concatenate([[0], np.cumsum(sizes)]).tolist()
        for t in range(n - 1, -1, -1) if reverse else range(n):
            if sizes is None or sizes[t] == state[0].shape[0]:
                g = gi[t] if sizes is None else gi[starts[t] : starts[t + 1]]
                state = step(g, F.linear(state[0], w_hh, b_hh), state)
                outs[t] = state[0]
                continue
            bs = sizes[t]
            going = tuple(s[:bs] for s in state)
            going = step(gi[starts[t] : starts[t + 1]], F.linear(going[0], w_hh, b_hh), going)
            state = tuple(ops.cat([g, s[bs:]]) for g, s in zip(going, state))
            outs[t] = going[0]
        return (ops.stack(outs) if sizes is None else ops.cat(outs)), state


class RNN(RNNBase):
    """Elman RNN: ``h' = nonlinearity(W_ih x + b_ih + W_hh h + b_hh)``.

    Example:
        >>> rnn = nn.RNN(10, 20, num_layers=2)
        >>> output, h_n = rnn(staged.randn(5, 3, 10))   # (L, N, H_in) -> (5, 3, 20), (2, 3, 20)

    Further positional arguments are ``RNNBase``'s ``proj_size, device, dtype``, as torch's
    (``proj_size`` by keyword is refused).
    """

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        nonlinearity="tanh",
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        *args,
        **kwargs,
    ):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'."
            )
        self.nonlinearity = nonlinearity
        super().__init__(
            "RNN_" + nonlinearity.upper(),
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            *args,
            **kwargs,
        )


class LSTM(RNNBase):
    """Long short-term memory, torch's gates i, f, g, o; returns ``(output, (h_n, c_n))``.
    ``proj_size`` projects each step's ``h`` by ``weight_hr``."""

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device=None,
        dtype=None,
    ):
        super().__init__(
            "LSTM",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            proj_size,
            device,
            dtype,
        )

    def get_expected_cell_size(self, input, batch_sizes):
        return self._expected_size(input, batch_sizes, self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(
            hidden[0],
            self.get_expected_hidden_size(input, batch_sizes),
            "Expected hidden[0] size {}, got {}",
        )
        self.check_hidden_size(
            hidden[1],
            self.get_expected_cell_size(input, batch_sizes),
            "Expected hidden[1] size {}, got {}",
        )

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return hx[0].index_select(1, permutation), hx[1].index_select(1, permutation)


class GRU(RNNBase):
    """Gated recurrent unit, torch's gates r, z, n; positional arguments as ``RNN``'s, without
    ``nonlinearity``."""

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        *args,
        **kwargs,
    ):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__(
            "GRU",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            *args,
            **kwargs,
        )


class RNNCellBase(Module):
    """One step of a cell: ``weight_ih`` (chunks * hidden, input), ``weight_hh`` (chunks *
    hidden, hidden), biases (chunks * hidden)."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(
            empty(num_chunks * hidden_size, input_size, device=device, dtype=dtype)
        )
        self.weight_hh = Parameter(
            empty(num_chunks * hidden_size, hidden_size, device=device, dtype=dtype)
        )
        for name in ("bias_ih", "bias_hh"):
            self.register_parameter(
                name,
                Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
                if bias
                else None,
            )
        self.reset_parameters()

    def reset_parameters(self):
        _reset(self)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _step(self, mode, input, states, what):
        """The cell ``mode`` on ``input`` (N, H_in) or (H_in) and ``states`` (a tuple, or
        None for zeros), checked as torch's ``what`` cell; returns the new state tuple."""
        if input.ndim not in (1, 2):
            raise ValueError(f"{what}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        for i, s in enumerate(states or ()):
            if s.ndim not in (1, 2):
                label = f"hx[{i}]" if len(states) == 2 else "hidden"
                raise ValueError(f"{what}: Expected {label} to be 1D or 2D, got {s.ndim}D instead")
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
            states = states and tuple(s.unsqueeze(0) for s in states)
        if states is None:
            size = (input.shape[0], self.hidden_size)
            states = (zeros(size, dtype=input.dtype, device=input.device),) * (
                2 if mode == "LSTM" else 1
            )
        if input.shape[1] != self.input_size:
            raise RuntimeError(
                f"input has inconsistent input_size: got {input.shape[1]} "
                f"expected {self.input_size}"
            )
        for i, s in enumerate(states):
            if s.shape[0] != input.shape[0]:
                raise RuntimeError(
                    f"Input batch size {input.shape[0]} doesn't match hidden{i} "
                    f"batch size {s.shape[0]}"
                )
            if s.shape[1] != self.hidden_size:
                raise RuntimeError(
                    f"hidden{i} has inconsistent hidden_size: got {s.shape[1]}, "
                    f"expected {self.hidden_size}"
                )
        out = _cell(mode, input, states, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return out if batched else tuple(s.squeeze(0) for s in out)


class RNNCell(RNNCellBase):
    """``h' = nonlinearity(W_ih x + b_ih + W_hh h + b_hh)``."""

    def __init__(
        self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None
    ):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return self._step(
            "RNN_" + self.nonlinearity.upper(), input, None if hx is None else (hx,), "RNNCell"
        )[0]


class LSTMCell(RNNCellBase):
    """One LSTM step: ``(h', c')`` from ``input`` and ``(h, c)``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        return self._step("LSTM", input, None if hx is None else tuple(hx), "LSTMCell")


class GRUCell(RNNCellBase):
    """One GRU step: ``h'`` from ``input`` and ``h``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        return self._step("GRU", input, None if hx is None else (hx,), "GRUCell")[0]
