"""A compiled step that sets a Module's plain attributes (``model.train()`` at its start,
a counter) sets them again after every call, as eager code does (Note [attribute writes]
in staged/tracing/guards.py), and is reused while the attributes enter as they did."""

import warnings

import numpy as np
import staged
from staged import nn, optim


def _train_step(model, opt):
    """pyGAT's step: it puts the model in train mode itself."""

    def step(x, y):
        model.train()
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    return step


def _gat_like(compiled: bool, epochs: int = 10):
    """pyGAT's loop: the step calls ``model.train()``, the loop ``model.eval()`` after it."""
    staged.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
    step = _train_step(model, optim.SGD(model.parameters(), lr=0.1))
    f = staged.compile(step) if compiled else step
    x, y = staged.randn(16, 4), staged.randn(16, 1)
    losses, flags, evals = [], [], []
    for _ in range(epochs):
        losses.append(f(x, y).item())
        flags.append([m.training for m in model.modules()])
        model.eval()
        with staged.no_grad():
            evals.append(model(x).numpy().copy())
    return f, losses, flags, evals, [p.detach().numpy().copy() for p in model.parameters()]


def test_train_in_the_step_and_eval_after_it_traces_at_most_twice():
    f, losses, flags, evals, params = _gat_like(True)
    _, losses0, flags0, evals0, params0 = _gat_like(False)
    assert f.traces <= 2
    assert flags == flags0 == [[True] * 4] * 10
    np.testing.assert_allclose(losses, losses0, rtol=1e-5)
    for a, b in zip(evals + params, evals0 + params0):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


class _Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.counter = 0

    def forward(self, x):
        self.counter += 1
        return self.fc(x) * 2.0


def test_a_counter_a_module_increments_is_replayed_at_every_call():
    """Read before it is written: each count enters its own trace, and none is lost."""
    m = _Counting()
    f = staged.compile(lambda x: m(x).sum())
    x = staged.randn(4, 3)
    with staged.no_grad():
        results = [f(x).item() for _ in range(3)]
    assert m.counter == 3
    np.testing.assert_allclose(results, [(m.fc(x) * 2.0).sum().item()] * 3, rtol=1e-6)
    assert (f.traces, f.last_retrace_reason) == (3, "m.counter: 1 -> 2")


def test_a_call_that_enters_with_another_attribute_value_re_traces():
    """The step writes ``training``, not ``Dropout.p``: a new ``p`` re-traces, naming it;
    an unwritten flag reads as it entered (``eval()`` on the step's own entry)."""
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.0))

    def step(x):
        model.train()
        return model(x).sum()

    f = staged.compile(step)
    x = staged.randn(2, 3)
    with staged.no_grad():
        for _ in range(3):
            f(x)
            assert model.training and model[1].training
            model.eval()
        assert f.traces == 2
        model[1].p = 0.25
        f(x)
    assert f.traces == 3
    assert (
        f.last_retrace_reason
        == "Dropout attributes/hooks: inplace=False, p=0.0 -> inplace=False, p=0.25"
    )


class _GAT(nn.Module):
    """Reads ``self.training`` in its own code, as pyGAT's layers do."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.dropout = 0.5

    def forward(self, x):
        return self.fc(nn.functional.dropout(x, self.dropout, training=self.training))


def _gat_adam(compiled: bool):
    staged.manual_seed(1)
    model = _GAT()
    train = _train_step(model, optim.Adam(model.parameters(), lr=0.01))
    f = staged.compile(train) if compiled else train
    x, y = staged.randn(8, 4), staged.randn(8, 1)
    losses = []
    for _ in range(6):
        losses.append(f(x, y).item())
        assert model.training
        model.eval()
    return f, losses, model.fc.weight.detach().numpy()


def test_a_module_that_reads_its_training_flag_is_replayed_without_a_warning():
    """The flag the step's code names was a side effect, warned as never changed again."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f, losses, w = _gat_adam(True)
    _, losses0, w0 = _gat_adam(False)
    assert f.traces == 2  # the first call one-shot (Adam makes its state), then one
    np.testing.assert_allclose(losses, losses0, rtol=1e-5)
    np.testing.assert_allclose(w, w0, rtol=1e-5, atol=1e-6)
