"""The results of a compiled step that runs its own backward (Note [graphless results] in
staged/runtime/graphless.py): they require grad where torch's do, and a backward through
one raises (torch's freed-graph error where torch's would, else staged's saying that it
carries no graph), never leaving its term out. The same training step written against
torch 2.13 is the oracle for flags and errors; staged's eager step for values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from staged.runtime import load
from tests.checks import message


def _make(lib):
    """A model, its SGD and a step returning what eager code can: the loss, the output
    (both through the step's backward), a prediction after the update, a prediction under
    no_grad, a detached and an integer result, a view of a weight and a weight."""
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        out = m(x)
        loss = lib.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        with lib.no_grad():
            quiet = m(x)
        return loss, out, m(x), quiet, out.detach(), out.argmax(1), m[0].weight[0], m[2].bias

    return m, step


NAMES = ("loss", "out", "pred", "no_grad", "detached", "argmax", "weight row", "bias")
FREED = {"loss", "out"}  # graphs the step's backward went through
GRAPHLESS = FREED | {"pred"}


def _data(lib):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    return lib.tensor(x), lib.tensor(rng.integers(0, 2, 5))


@pytest.fixture(scope="module")
def compiled():
    """Two calls of the compiled step, and the eager step's (``.detach()``-ed) results
    for the same seed (a view of a weight follows the later update, as eagerly)."""
    _, step = _make(staged)
    eager = [[t.detach() for t in step(*_data(staged))] for _ in range(2)]
    m, step = _make(staged)
    f = staged.compile(step)
    return m, f, [f(*_data(staged)) for _ in range(2)], eager


def test_the_results_require_grad_as_torchs(compiled):
    _, _, calls, eager = compiled
    _, step = _make(torch)
    theirs = step(*_data(torch))
    for name, ours, t in zip(NAMES, calls[-1], theirs):
        assert (ours.requires_grad, ours.is_leaf) == (t.requires_grad, t.is_leaf), name
        if name in GRAPHLESS:
            assert type(ours.grad_fn).__name__ == "GraphlessResult", name
            assert ours.grad_fn.name() == "GraphlessResult"
            assert repr(ours).endswith("grad_fn=<GraphlessResult>)")
    assert calls[-1][1].grad_fn is not calls[0][1].grad_fn  # a Node per call
    for got, want in zip(calls, eager):
        for name, ours, e in zip(NAMES, got, want):
            np.testing.assert_allclose(
                ours.detach().numpy(), e.numpy(), rtol=1e-6, atol=1e-7, err_msg=name
            )


def test_the_results_are_read_as_torchs(compiled):
    _, _, calls, eager = compiled
    loss, out = calls[-1][:2]
    _, step = _make(torch)
    t_loss, t_out = step(*_data(torch))[:2]
    with pytest.raises(RuntimeError) as theirs:
        t_out.numpy()
    for t in (loss, out):
        with pytest.raises(RuntimeError) as ours:
            t.numpy()
        assert message(ours.value) == str(theirs.value)
    assert loss.item() == float(loss) == loss.tolist() == pytest.approx(eager[-1][0].item())
    np.testing.assert_allclose(out.tolist(), eager[-1][1].numpy(), rtol=1e-6, atol=1e-7)
    assert f"{loss.item():.4f}" in str(loss)


def _torch_error(backward) -> str:
    _, step = _make(torch)
    with pytest.raises(RuntimeError) as theirs:
        backward(step(*_data(torch)), torch)
    return str(theirs.value)


@pytest.mark.parametrize("which", sorted(FREED))
@pytest.mark.parametrize("mixed", [False, True], ids=["alone", "in a sum"])
def test_a_backward_through_a_result_the_step_differentiated_raises_torchs_error(
    compiled, which, mixed
):
    """The step's backward freed the graph of its loss and output: a later backward
    through one raises torch's error, also in a sum whose other term is a real graph,
    and no .grad changes."""
    i = NAMES.index(which)

    def backward(results, lib):
        t = results[i].sum()
        (t + results[-1].sum() if mixed else t).backward()

    want = _torch_error(backward)
    m, _, calls, _ = compiled
    before = [p.grad.numpy().copy() for p in m.parameters()]
    with pytest.raises(RuntimeError) as ours:
        backward(calls[-1], staged)
    assert message(ours.value) == want
    for p, g in zip(m.parameters(), before):
        np.testing.assert_array_equal(p.grad.numpy(), g)


def _no_graph(err) -> None:
    assert message(err) == (
        "staged.compile: this result of a compiled training step (one that runs a backward) "
        "requires grad but carries no autograd graph: eagerly a backward through it would "
        "reach the parameters, compiled it holds values only. Compute the term inside the "
        "step, call the step uncompiled, or .detach() the result to use it as a constant"
    )


@pytest.mark.parametrize(
    "backward",
    [
        lambda pred, w: pred.sum().backward(),
        lambda pred, w: (pred.sum() + w.sum()).backward(),
        lambda pred, w: pred.sum().backward(inputs=[w]),
        lambda pred, w: staged.autograd.grad(pred.sum(), [w]),
        lambda pred, w: staged.autograd.grad(pred.sum(), [w], allow_unused=True),
    ],
    ids=["backward", "in a sum", "inputs", "autograd.grad", "allow_unused"],
)
def test_a_backward_through_a_prediction_made_after_the_update_raises(compiled, backward):
    """Eagerly it would add to the weights' .grad (torch runs it); compiled it holds no
    graph, so it raises, saying what to do, and no .grad changes."""
    m, _, calls, _ = compiled
    t_m, t_step = _make(torch)
    t_pred = t_step(*_data(torch))[2]
    t_pred.sum().backward()  # the oracle: torch differentiates it
    assert t_m[0].weight.grad is not None
    before = [p.grad.numpy().copy() for p in m.parameters()]
    with pytest.raises(RuntimeError) as ours:
        backward(calls[-1][2], m[0].weight)
    _no_graph(ours.value)
    for p, g in zip(m.parameters(), before):
        np.testing.assert_array_equal(p.grad.numpy(), g)


def test_results_under_dynamic_batch_sizes_are_graphless_too():
    _, step = _make(staged)
    f = staged.compile(step, dynamic=True)
    for n in (5, 7):
        x, y = staged.randn(n, 3), staged.randint(0, 2, (n,))
        loss, out, pred, quiet = f(x, y)[:4]
        assert [t.requires_grad for t in (loss, out, pred, quiet)] == [True, True, True, False]
        with pytest.raises(RuntimeError) as err:
            pred.sum().backward()
        _no_graph(err.value)


def test_a_deployed_steps_results_are_values(tmp_path):
    """A loaded step holds none of the caller's tensors and its results depend on none:
    they do not require grad, and read as the compiled step's."""
    _, step = _make(staged)
    f = staged.compile(step)
    f(*_data(staged)), f(*_data(staged))  # the first call makes the momentum buffers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f.save(tmp_path / "step")
    want = f(*_data(staged))
    got = load(tmp_path / "step")(*_data(staged))
    for name, ours, w in zip(NAMES, got, want):
        assert not ours.requires_grad and ours.grad_fn is None, name
        np.testing.assert_allclose(ours.numpy(), w.detach().numpy(), rtol=1e-6, err_msg=name)
