"""Note [autograd boundary]: a compiled body that returns tensors requiring grad and runs
no backward (``model = torch.compile(model)`` then ``loss.backward()`` outside) runs as one
Node: its forward compiled under no_grad, its backward a compiled recomputation, with
eager's (torch's) numbers, state and random stream. What cannot be recomputed exactly
runs eagerly, with one warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staged
from staged import nn


def _train(compiled: bool, dropout=0.0, batch_norm=False, zero_first=False):
    staged.manual_seed(0)
    layers = [nn.Linear(4, 8)] + ([nn.BatchNorm1d(8)] if batch_norm else [])
    m = nn.Sequential(*layers, nn.ReLU(), nn.Dropout(dropout), nn.Linear(8, 2))
    opt = staged.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    model = staged.compile(m) if compiled else m
    x, y = staged.randn(16, 4), staged.randint(0, 2, (16,))
    model.train()
    losses = []
    for _ in range(4):
        if zero_first:
            opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        if not zero_first:
            opt.zero_grad()  # after the forward: .grad set at the forward, None at backward
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with staged.no_grad():
        out = model(x)
    state = [t.detach().numpy().copy() for t in m.state_dict().values()]
    return losses, out.numpy(), state, staged.get_rng_state().numpy(), model


@pytest.mark.parametrize(
    "dropout,batch_norm,zero_first",
    [(0.0, False, False), (0.3, False, True), (0.0, True, False), (0.5, True, True)],
)
def test_a_compiled_model_trained_with_backward_outside_gives_eagers_numbers(
    dropout, batch_norm, zero_first
):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # it compiles: no eager-fallback warning
        losses, out, state, rng, model = _train(True, dropout, batch_norm, zero_first)
    want, want_out, want_state, want_rng, _ = _train(False, dropout, batch_norm, zero_first)
    # the same masks and stream (replayed for the recomputation, advanced once)
    assert (rng == want_rng).all()
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    assert losses[3] < losses[0]  # the parameters were updated
    for a, b in zip(state, want_state):  # weights, momentum-free buffers: running stats
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-6)
    text = model.explanation()
    assert "its results are differentiated outside" in text and "eager" not in text
    assert len(list(model.parameters())) == 4 + 2 * batch_norm and model.training is False


def test_gradients_reach_arguments_closures_and_the_graph_before_the_call():
    def run(compiled: bool):
        staged.manual_seed(1)
        w0 = staged.randn(3, 3, requires_grad=True)
        b = staged.randn(3, requires_grad=True)
        w = w0 * 2  # not a leaf: its gradient goes on to w0

        def f(x, scale, pair):
            h = (x @ w + b).tanh() * scale
            return {"out": h, "n": 3, "idx": h.argmax(1), "sq": (pair[0] * pair[1]).sum()}

        fn = staged.compile(f) if compiled else f
        x = staged.randn(4, 3, requires_grad=True)
        u, v = staged.randn(2), staged.randn(2, requires_grad=True)
        r = fn(x, 2.0, (u, v))
        assert r["n"] == 3 and not r["idx"].requires_grad
        loss = (r["out"] ** 2).sum() + r["sq"]
        return [t.numpy() for t in staged.autograd.grad(loss, [x, v, w0, b])], r["idx"].numpy()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, idx = run(True)
    want, want_idx = run(False)
    assert (idx == want_idx).all()
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_changing_an_input_before_backward_raises_and_double_backward_raises():
    lin = nn.Linear(3, 1)
    model = staged.compile(lin)
    x = staged.randn(2, 3)
    out = model(x).sum()
    x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()
    with pytest.raises(RuntimeError, match="backward is not differentiable"):
        staged.autograd.grad(model(x).sum(), [lin.weight], create_graph=True)


def test_what_cannot_be_recomputed_runs_eagerly_with_one_warning():
    lin = nn.Linear(3, 2)
    lin.weight.register_hook(lambda g: g * 10)  # would run in the recomputation and again
    model = staged.compile(lin)
    x = staged.randn(4, 3)
    with pytest.warns(UserWarning, match="state tensor weight requires grad and has a tensor hook"):
        model(x).sum().backward()
    want = 10 * x.sum(0).expand(2, 3).numpy()
    np.testing.assert_allclose(lin.weight.grad.numpy(), want, rtol=1e-6)
    assert model.traces == 0 and "has a tensor hook" in model.explanation()

    drop = staged.compile(nn.Dropout(0.5), rng="counter")
    with pytest.warns(UserWarning, match="counter-based stream"):
        drop(staged.ones(4, requires_grad=True)).sum().backward()


def test_a_step_that_differentiates_itself_compiles_as_one_graph():
    w = staged.randn(3, requires_grad=True)

    def step(x):
        loss = (x * w).sum()
        loss.backward()
        return loss

    s = staged.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s(staged.ones(3))
    # its first call gave w a .grad, so it ran on NumPy (Note [deferred compiles])
    assert s.traces == 1 and "backward 3" in s.explanation(), s.explanation()
    np.testing.assert_allclose(w.grad.numpy(), np.ones(3))


def test_an_argument_the_call_writes_in_place_is_recomputed_from_its_old_value():
    def run(compiled: bool):
        w = staged.tensor([1.0, 2.0, 3.0], requires_grad=True)

        def f(x):
            x.mul_(2)  # the forward doubles x; the recomputation must not double it again
            return (x * w).sum()

        x = staged.tensor([1.0, -1.0, 0.5])
        (staged.compile(f) if compiled else f)(x).backward()
        return w.grad.numpy(), x.numpy()

    (g, x), (want_g, want_x) = run(True), run(False)
    np.testing.assert_allclose(g, want_g)
    np.testing.assert_allclose(x, want_x)


_STORED: dict = {}  # where a body stores a tensor requiring grad: its call runs as its graph


class _TinyLM(nn.Module):
    """nanoGPT's shape: an embedding, a head, the loss inside ``forward``."""

    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.Embedding(10, 8), nn.Linear(8, 10)

    def forward(self, idx, targets):
        logits = self.head(self.emb(idx))
        return nn.functional.cross_entropy(logits.view(-1, 10), targets.view(-1))


@pytest.mark.parametrize(
    "body",
    [
        lambda m, idx, t: m(idx, t),  # embedding and cross-entropy: index-checked ops
        lambda m, idx, t: m.head(m.emb.weight[idx]).gather(-1, t[..., None]).sum(),
        lambda m, idx, t: _STORED.update(h=m.emb(idx)) or m(idx, t),
    ],
    ids=["cross_entropy", "indexing_and_gather", "a_tensor_stored_outside"],
)
@pytest.mark.filterwarnings("ignore:staged.compile. running:UserWarning")  # the stored one's
def test_index_checked_ops_differentiate_outside_the_call(body):
    """The checks' select of the outputs requires no grad: the recomputation differentiates
    the values before it (``Captured.unchecked``); it raised "element 0 of tensors does not
    require grad" at ``loss.backward()``."""

    def grads(compiled):
        staged.manual_seed(0)
        m = _TinyLM()
        f = staged.compile(lambda idx, t: body(m, idx, t)) if compiled else (lambda *a: body(m, *a))
        idx, t = staged.randint(0, 10, (2, 5)), staged.randint(0, 10, (2, 5))
        out = []
        for _ in range(2):  # the trace's call, then a compiled one
            m.zero_grad()
            f(idx, t).backward()
            out.append([p.grad.numpy().copy() for p in m.parameters()])
        return out

    for got, want in zip(grads(True), grads(False)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)
