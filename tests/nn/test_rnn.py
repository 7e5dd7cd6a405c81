"""RNN, LSTM, GRU and their cells against torch 2.13 with torch's weights copied in: outputs,
final states, the gradient of the input, the initial state and every parameter (dropout
between layers included); parameter names and initialisation, repr, errors; a compiled
LSTM training step equals eager."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import staged
import staged.nn.functional as F
from staged import nn, optim
from tests.checks import assert_close, assert_raises_like_torch, to_numpy

RNG = np.random.RandomState(0)
TOL = dict(rtol=1e-5, atol=1e-5)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _flat(out):
    if out is None:
        return []
    return [t for o in out for t in _flat(o)] if isinstance(out, (tuple, list)) else [out]


def _build(ns, state):
    """``state`` (NumPy arrays, nested as the module's ``hx``) as leaves of ``ns``."""
    if state is None:
        return None
    if isinstance(state, tuple):
        return tuple(_build(ns, s) for s in state)
    return ns.tensor(state, requires_grad=True)


def check_recurrent(make, x, hx=None, train=False):
    """``make(ns)`` of staged and torch (torch's parameters copied) on ``x`` and ``hx``:
    every output and final state, then the gradients of ``x``, ``hx`` and each parameter
    under random cotangents on all of them."""
    tm, m = make(torch), make(staged)
    m.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    m.train(train), tm.train(train)
    assert [(k, tuple(p.shape)) for k, p in m.named_parameters()] == [
        (k, tuple(p.shape)) for k, p in tm.named_parameters()
    ]
    xs, txs = staged.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    hs, ths = _build(staged, hx), _build(torch, hx)
    args, targs = ((xs,), (txs,)) if hx is None else ((xs, hs), (txs, ths))
    staged.manual_seed(1)  # dropout between layers draws torch's masks
    torch.manual_seed(1)
    outs, touts = _flat(m(*args)), _flat(tm(*targs))
    assert len(outs) == len(touts)
    for o, t in zip(outs, touts):
        assert_close(o, t, **TOL)
    cots = [RNG.standard_normal(tuple(t.shape)).astype(np.float32) for t in touts]
    sum((o * staged.tensor(c)).sum() for o, c in zip(outs, cots)).backward()
    sum((t * torch.tensor(c)).sum() for t, c in zip(touts, cots)).backward()
    for a, t in zip([xs] + _flat(hs), [txs] + _flat(ths)):
        assert_close(a.grad, t.grad, **TOL)
    for (_k, p), tp in zip(m.named_parameters(), tm.parameters()):
        assert_close(p.grad, tp.grad, rtol=1e-4, atol=1e-5)


RECURRENT = {
    "RNN": (lambda ns: ns.nn.RNN(4, 5), f32(6, 3, 4), None),
    "RNN-relu-2-layers-bidirectional-hx": (
        lambda ns: ns.nn.RNN(4, 5, 2, nonlinearity="relu", bidirectional=True),
        f32(5, 2, 4),
        f32(4, 2, 5),
    ),
    "LSTM-2-layers-bidirectional-batch-first": (
        lambda ns: ns.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True),
        f32(2, 5, 3),
        None,
    ),
    "LSTM-unbatched-hx": (lambda ns: ns.nn.LSTM(3, 4), f32(5, 3), (f32(1, 4), f32(1, 4))),
    "LSTM-no-bias-batch-first-hx": (
        lambda ns: ns.nn.LSTM(3, 4, bias=False, batch_first=True),
        f32(2, 4, 3),
        (f32(1, 2, 4), f32(1, 2, 4)),
    ),
    "GRU-2-layers-no-bias-batch-first": (
        lambda ns: ns.nn.GRU(3, 4, num_layers=2, bias=False, batch_first=True),
        f32(3, 4, 3),
        None,
    ),
    "GRU-unbatched-bidirectional-hx": (
        lambda ns: ns.nn.GRU(3, 4, bidirectional=True),
        f32(5, 3),
        f32(2, 4),
    ),
}


@pytest.mark.parametrize("name", sorted(RECURRENT))
def test_recurrent_layers_match_torch(name):
    check_recurrent(*RECURRENT[name])


def test_dropout_between_layers_in_training_only():
    """Dropout on every layer's output but the last's, in training: torch's masks from the
    same seed; eval mode ignores it."""

    def make(ns):
        return ns.nn.LSTM(3, 4, num_layers=3, dropout=0.5, bidirectional=True)

    check_recurrent(make, f32(4, 2, 3), train=True)
    check_recurrent(make, f32(4, 2, 3), train=False)
    m = nn.GRU(3, 4, num_layers=2, dropout=0.5)
    x = staged.tensor(f32(4, 2, 3))
    trained = [to_numpy(m(x)[0]) for _ in range(2)]
    evaluated = [to_numpy(m.eval()(x)[0]) for _ in range(2)]
    assert not np.array_equal(*trained) and np.array_equal(*evaluated)


CELLS = {
    "RNNCell-relu": (lambda ns: ns.nn.RNNCell(3, 4, nonlinearity="relu"), f32(2, 3), f32(2, 4)),
    "RNNCell-unbatched-no-hx": (lambda ns: ns.nn.RNNCell(3, 4, bias=False), f32(3), None),
    "LSTMCell": (lambda ns: ns.nn.LSTMCell(3, 4), f32(2, 3), (f32(2, 4), f32(2, 4))),
    "LSTMCell-unbatched-no-hx": (lambda ns: ns.nn.LSTMCell(3, 4), f32(3), None),
    "GRUCell": (lambda ns: ns.nn.GRUCell(3, 4), f32(2, 3), f32(2, 4)),
    "GRUCell-unbatched": (lambda ns: ns.nn.GRUCell(3, 4, bias=False), f32(3), f32(4)),
}


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cells_match_torch(name):
    check_recurrent(*CELLS[name])


def test_parameter_names_and_initialisation_match_torch():
    """torch's names, shapes and, from the same seed, values: each parameter drawn by
    ``nn.init.uniform_`` in +-1/sqrt(hidden), in parameter order."""
    for make in (
        lambda ns: ns.nn.GRU(3, 8, num_layers=2, bidirectional=True),
        lambda ns: ns.nn.LSTM(5, 8, bias=False),
        lambda ns: ns.nn.LSTMCell(5, 8),
    ):
        staged.manual_seed(3)
        torch.manual_seed(3)
        sd, tsd = make(staged).state_dict(), make(torch).state_dict()
        assert list(sd) == list(tsd)
        for k, v in sd.items():
            assert_close(v, tsd[k], 0, 0)
    m = nn.GRU(3, 8, num_layers=2, bidirectional=True)
    assert m.all_weights[3][1] is m.weight_hh_l1_reverse


def test_repr_matches_torch():
    def build(ns):
        return ns.nn.ModuleList(
            [
                ns.nn.RNN(4, 5),
                ns.nn.RNN(4, 5, 2, nonlinearity="relu", bias=False),
                ns.nn.LSTM(4, 5, batch_first=True, dropout=0.25, num_layers=3),
                ns.nn.GRU(4, 5, bidirectional=True),
                ns.nn.RNNCell(4, 5, nonlinearity="relu"),
                ns.nn.LSTMCell(4, 5, bias=False),
                ns.nn.GRUCell(4, 5),
            ]
        )

    assert repr(build(staged)) == repr(build(torch))


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.LSTM(10, 5)(ns.zeros(3, 2, 7)),
        lambda ns: ns.nn.LSTM(10, 5)(ns.zeros(3, 2, 2, 10)),
        lambda ns: ns.nn.RNN(10, 5)(ns.zeros(3, 2, 2, 10)),
        lambda ns: ns.nn.GRU(10, 5, batch_first=True)(ns.zeros(2, 7)),
        lambda ns: ns.nn.LSTM(10, 5)(ns.zeros(3, 2, 10), (ns.zeros(1, 3, 5), ns.zeros(1, 2, 5))),
        lambda ns: ns.nn.LSTM(10, 5)(ns.zeros(3, 2, 10), (ns.zeros(1, 2, 5), ns.zeros(1, 2, 4))),
        lambda ns: ns.nn.LSTM(10, 5)(ns.zeros(3, 2, 10), (ns.zeros(1, 2, 5), ns.zeros(2, 5))),
        lambda ns: ns.nn.GRU(10, 5)(ns.zeros(3, 2, 10), ns.zeros(2, 2, 5)),
        lambda ns: ns.nn.RNN(10, 5)(ns.zeros(3, 10), ns.zeros(1, 1, 5)),
        lambda ns: ns.nn.RNN(10, 5)(ns.zeros(3, 2, 10, dtype=ns.float64)),
        lambda ns: ns.nn.LSTMCell(10, 5)(ns.zeros(2, 7)),
        lambda ns: ns.nn.LSTMCell(10, 5)(ns.zeros(2, 10), (ns.zeros(3, 5), ns.zeros(3, 5))),
        lambda ns: ns.nn.LSTMCell(10, 5)(ns.zeros(2, 10), (ns.zeros(2, 5), ns.zeros(2, 4))),
        lambda ns: ns.nn.GRUCell(10, 5)(ns.zeros(2, 10), ns.zeros(2, 4)),
        lambda ns: ns.nn.GRUCell(10, 5)(ns.zeros(2, 2, 10)),
        lambda ns: ns.nn.RNNCell(10, 5, nonlinearity="foo")(ns.zeros(2, 10)),
        lambda ns: ns.nn.RNN(10, 5, nonlinearity="foo"),
        lambda ns: ns.nn.GRU(10, 5, proj_size=2),
        lambda ns: ns.nn.LSTM(10, 5, dropout=1.5),
        lambda ns: ns.nn.LSTM(10, 0),
    ],
)
def test_errors_match_torch(call):
    assert_raises_like_torch(call)


def test_dropout_warns_like_torch():
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.2)


def test_compiled_lstm_training_step_equals_eager():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 6, batch_first=True)
            self.head = nn.Linear(6, 2)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

    def trainer(model):
        opt = optim.SGD(model.parameters(), lr=0.5)

        def step(x, y):  # zero_grad last: one trace
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        return step

    eager = Model()
    compiled = copy.deepcopy(eager)
    eager_step, compiled_step = trainer(eager), staged.compile(trainer(compiled))
    x, y = staged.tensor(f32(4, 5, 3)), staged.tensor(np.array([0, 1, 1, 0]))
    for i in range(3):
        np.testing.assert_allclose(
            compiled_step(x, y).item(), eager_step(x, y).item(), rtol=1e-5, err_msg=f"step {i}"
        )
    for (_k, p), q in zip(eager.named_parameters(), compiled.parameters()):
        assert_close(q, p, rtol=1e-5, atol=1e-6)
    assert compiled_step.traces == 1
