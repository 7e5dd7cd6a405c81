"""Random draws in compiled steps (Note [host draws] in staged/tracing/draws.py): made on
the host at every call from torch's stream, so a compiled step gives eager's numbers and
torch 2.13's (the oracle), call for call, and leaves the generators in the same state."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import staged
import staged.nn.functional as F
from staged.autodiff import collective as C
from staged.lower.onnx_lowering import ExportError

X = np.random.default_rng(0).standard_normal((6, 10)).astype(np.float32)
Y = np.array([0, 1, 2, 1, 0, 2])
CALLS = 4


def dropout_mlp(lib, seed=0, p=0.3):
    """A seeded MLP with two dropouts and its SGD training step (the same code for
    torch and staged)."""
    lib.manual_seed(seed)
    nn = lib.nn
    model = nn.Sequential(
        nn.Linear(10, 32),
        nn.ReLU(),
        nn.Dropout(p),
        nn.Linear(32, 16),
        nn.Tanh(),
        nn.Dropout(p / 2),
        nn.Linear(16, 3),
    )
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return model, step


def train(lib, compiled=False, calls=CALLS, **kw):
    """(losses, rng state bytes, first weight) after ``calls`` steps."""
    model, step = dropout_mlp(lib, **kw)
    if compiled:
        step = staged.compile(step)
    x, y = lib.tensor(X), lib.tensor(Y)
    losses = [step(x, y).item() for _ in range(calls)]
    return losses, np.asarray(lib.get_rng_state().numpy()), model[0].weight.detach().numpy().copy()


def test_seeded_dropout_training_equals_eager_and_torch_call_for_call():
    theirs, eager, ours = train(torch), train(staged), train(staged, compiled=True)
    np.testing.assert_allclose(ours[0], eager[0], rtol=1e-6)  # IREE sums in other orders
    np.testing.assert_allclose(ours[0], theirs[0], rtol=2e-6)  # float32 round-off
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ours[1], eager[1])  # the generator advanced as eager's
    np.testing.assert_array_equal(ours[1], theirs[1])  # ... and as torch's


def test_draws_inside_a_step_are_torch_s_at_every_call():
    """rand, randn (block and serial paths), randint, randperm, the _like forms, normal,
    and the in-place methods drawn inside a compiled step: torch's values, bit for bit."""

    def draws(lib, x):
        t = lib.zeros(5, 7)
        return (
            lib.rand(3, 5) + x,
            lib.randn(40) + x,
            lib.randn(3) + x,
            lib.randint(0, 10, (6,)),
            lib.randperm(9),
            lib.rand_like(t) + x,
            lib.randn_like(t, dtype=lib.float64),
            lib.normal(2.0, 3.0, (17,)) + x,
            t.clone().uniform_(-2, 3) + x,
            t.clone().normal_(1.0, 0.5) + x,
            t.clone().exponential_(2.0) + x,
            t.clone().bernoulli_(0.3) + x,
            lib.nn.init.kaiming_uniform_(lib.empty(4, 6)) + x,
        )

    step = staged.compile(lambda x: draws(staged, x))
    staged.manual_seed(11)
    torch.manual_seed(11)
    for _ in range(3):
        ours = step(staged.tensor(0.0))
        theirs = draws(torch, torch.tensor(0.0))
        for a, b in zip(ours, theirs):
            assert a.dtype.name == str(b.dtype).split(".")[1]
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert step.traces == 1
    np.testing.assert_array_equal(staged.get_rng_state().numpy(), torch.get_rng_state().numpy())


def _transposed_draws(lib, x):
    y = (x.transpose(0, 1) * 2).exp()  # a transposed layout, kept by elementwise ops
    return (
        lib.nn.functional.dropout(x.transpose(1, 2), 0.5),
        lib.rand_like(y),
        lib.randn_like(y),
        lib.empty_like(y).bernoulli_(0.5),
        y.clone().uniform_(),
    ), (y.stride(), y.is_contiguous(), (y + 1).stride())


def test_draws_fill_a_transposed_tensor_in_its_memory_order_as_eager_and_torch():
    """Note [traced layouts]: a traced value has no strides; a draw filled it in row-major
    order, not eager's (and torch's) memory order, so a compiled
    ``TransformerEncoderLayer(batch_first=True)`` dropped out other elements."""
    torch.manual_seed(3)
    want, layout = _transposed_draws(torch, torch.ones(2, 3, 4))
    step = staged.compile(lambda x: _transposed_draws(staged, x))
    for _ in range(2):  # the tracing call, then a compiled one
        staged.manual_seed(3)
        got, got_layout = step(staged.ones(2, 3, 4))
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert got_layout == layout == ((4, 12, 1), False, (4, 12, 1))


def test_a_compiled_batch_first_encoder_layer_drops_out_eagers_elements():
    def run(compiled):
        staged.manual_seed(0)
        layer = staged.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5, batch_first=True)
        f = staged.compile(layer) if compiled else layer
        x = staged.randn(3, 5, 8)
        return [f(x).detach().numpy() for _ in range(2)]

    for a, b in zip(run(False), run(True)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_draws_from_traced_probabilities_and_means_are_torch_s():
    """bernoulli(p), bernoulli_(p) and normal(mean, std) of tensors the step computes: the
    uniforms and normals are drawn on the host, the comparison and scaling in the graph."""

    def draws(lib, x):
        p = lib.sigmoid(x)
        return (
            lib.bernoulli(p),
            lib.bernoulli(p.double()),
            lib.zeros(3, 5).bernoulli_(p),
            lib.normal(x, 0.5),
            lib.normal(x, p),
            lib.normal(1.5, p),
            lib.bernoulli(p, 0.25),
        )

    step = staged.compile(lambda x: draws(staged, x))
    x = np.random.default_rng(3).standard_normal((3, 5)).astype(np.float32)
    staged.manual_seed(5)
    torch.manual_seed(5)
    for _ in range(3):
        ours, theirs = step(staged.tensor(x)), draws(torch, torch.tensor(x))
        for a, b in zip(ours, theirs):
            assert a.dtype.name == str(b.dtype).split(".")[1]
            # exact but for the graph's float32 rounding of sigmoid and of mean + z * std
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=4e-7, atol=4e-7)
    assert step.traces == 1
    np.testing.assert_array_equal(staged.get_rng_state().numpy(), torch.get_rng_state().numpy())


def test_multinomial_in_a_step_samples_torch_s_indices():
    """multinomial with and without replacement inside a compiled step (as a sampling loop
    would compile it): the exponentials and uniforms drawn on the host, the top-k and the
    search in the graph, torch's indices exactly."""

    def sample(lib, p):
        return (
            lib.multinomial(p, 1),
            lib.multinomial(p, 4),
            lib.multinomial(p, 6, True),
            lib.multinomial(p[0], 3, True),
        )

    p = np.random.default_rng(4).random((3, 7)).astype(np.float32)
    p[1, 2] = 0.0
    step = staged.compile(lambda p: sample(staged, p))
    staged.manual_seed(9)
    torch.manual_seed(9)
    for _ in range(3):
        for a, b in zip(step(staged.tensor(p)), sample(torch, torch.tensor(p))):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert step.traces == 1
    with pytest.raises(RuntimeError, match="invalid multinomial distribution"):
        step(staged.zeros(3, 7))[0].numpy()


@pytest.mark.parametrize("bad", ["bernoulli", "bernoulli_", "normal"])
def test_a_traced_probability_or_std_out_of_range_raises_torch_s_error_when_read(bad):
    def draw(x):
        if bad == "bernoulli":
            return staged.bernoulli(x)
        if bad == "bernoulli_":
            return staged.zeros(2).bernoulli_(x)
        return staged.normal(0.0, x)

    step = staged.compile(draw)
    assert step(staged.tensor([0.5, 1.0])).shape == (2,)
    message = (
        "normal expects all elements of std >= 0.0"
        if bad == "normal"
        else r"Expected p_in >= 0 && p_in <= 1 to be true, but got false"
    )
    out = step(staged.tensor([0.5, -0.5 if bad == "normal" else float("nan")]))
    with pytest.raises(RuntimeError, match=message):
        out.numpy()


def test_explicit_generators_advance_as_eager_and_the_trace_draws_nothing():
    def make(lib):
        g = lib.Generator().manual_seed(42)
        lib.manual_seed(3)

        def step(x):
            a = lib.rand(4, generator=g) + x
            b = lib.nn.functional.dropout(x.expand(20), 0.5)
            c = lib.randn(18, generator=g) + x
            return a, b, c

        return g, step

    (g, step), (tg, tstep) = make(staged), make(torch)
    compiled = staged.compile(step)
    before = g.get_state().numpy(), staged.get_rng_state().numpy()
    staged.capture(step, staged.tensor(1.0))  # a trace alone leaves the generators as they are
    np.testing.assert_array_equal(g.get_state().numpy(), before[0])
    np.testing.assert_array_equal(staged.get_rng_state().numpy(), before[1])
    for _ in range(3):
        for a, b in zip(compiled(staged.tensor(1.0)), tstep(torch.tensor(1.0))):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(g.get_state().numpy(), tg.get_state().numpy())
    np.testing.assert_array_equal(staged.get_rng_state().numpy(), torch.get_rng_state().numpy())


def test_a_generator_seeded_inside_the_step_repeats_its_draws():
    """manual_seed and get/set_rng_state inside the step are replayed at every call."""

    def step(lib, x):
        lib.manual_seed(5)
        a = lib.rand(3) + x
        state = lib.get_rng_state()
        b = lib.randn(20) + x
        lib.set_rng_state(state)
        c = lib.randn(20) + x  # b again
        return a, b, c, lib.rand(2) + x

    compiled = staged.compile(lambda x: step(staged, x))
    for _ in range(2):
        ours = compiled(staged.tensor(0.0))
        theirs = step(torch, torch.tensor(0.0))
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(ours[1].numpy(), ours[2].numpy())
    np.testing.assert_array_equal(staged.get_rng_state().numpy(), torch.get_rng_state().numpy())


def test_seed_inside_the_step_draws_new_entropy_at_every_call():
    """Generator.seed() (and staged.seed()) in a step seeds from the OS at every call, as
    eager code does, instead of replaying the trace's seed."""
    gen = staged.Generator()

    def step(x):
        gen.seed()
        staged.seed()
        return staged.rand(4, generator=gen) + x, staged.rand(4) + x

    compiled = staged.compile(step)
    calls = [compiled(staged.tensor(0.0)) for _ in range(3)]
    firsts = {tuple(a.numpy()) for a, _ in calls} | {tuple(b.numpy()) for _, b in calls}
    assert len(firsts) == 6  # 53-bit seeds from os.urandom: equal draws would be a bug
    gen.manual_seed(gen.initial_seed())  # the last call's seed: its draws again
    np.testing.assert_array_equal(staged.rand(4, generator=gen).numpy(), calls[-1][0].numpy())


def test_checkpointed_dropout_replays_the_forward_mask_compiled_as_eager():
    """checkpoint(preserve_rng_state=True) sets the state back before its recompute: the
    program replays it, so gradients and the generator state are eager's and torch's."""
    w0 = np.random.default_rng(2).standard_normal((10, 10)).astype(np.float32)

    def make(lib):
        lib.manual_seed(9)
        w = lib.tensor(w0, requires_grad=True)

        def block(x):
            return lib.nn.functional.dropout((x @ w).tanh(), 0.4, True) * 2

        def step(x):
            w.grad = None
            y = lib.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            loss = (y * y).sum()
            loss.backward()
            return loss, w.grad * 1

        return step

    ours, theirs = staged.compile(make(staged)), make(torch)
    for _ in range(3):
        for a, b in zip(ours(staged.tensor(X)), theirs(torch.tensor(X))):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=2e-5, atol=1e-5)
    np.testing.assert_array_equal(staged.get_rng_state().numpy(), torch.get_rng_state().numpy())


def test_dynamic_batch_draws_the_call_s_shape():
    """dynamic=True: one trace; each call's mask has that call's batch, as eager's."""
    sizes = (6, 3, 5, 6)

    def run(lib, compiled):
        _, step = dropout_mlp(lib, seed=4)
        if compiled:
            step = staged.compile(step, dynamic=True)
        out = [step(lib.tensor(X[:n]), lib.tensor(Y[:n])).item() for n in sizes]
        return out, step, np.asarray(lib.get_rng_state().numpy())

    (ours, step, state), (eager, _, estate), (theirs, _, tstate) = (
        run(staged, True),
        run(staged, False),
        run(torch, False),
    )
    assert step.traces == 2  # the first call makes SGD's buffers (a one-shot trace)
    np.testing.assert_allclose(ours, eager, rtol=1e-6)
    np.testing.assert_allclose(ours, theirs, rtol=2e-6)
    np.testing.assert_array_equal(state, estate)
    np.testing.assert_array_equal(state, tstate)


def test_a_step_in_segments_draws_on_the_host_as_eager():
    """A step with collectives runs as compiled segments (alone, each collective is the
    identity): the draws before and after one are eager's."""

    def step(x):
        y = C.all_reduce(F.dropout(x * 2, 0.5), op="sum")
        return (F.dropout(y, 0.25) + staged.rand(x.shape[0])).sum() * 1, y * 1

    x = staged.tensor(X[0])
    compiled = staged.compile(step)
    for _ in range(3):
        staged.manual_seed(8)
        eager = step(x)
        staged.manual_seed(8)
        ours = compiled(x)
        assert len(compiled._last.module.plan.segments) > 1
        for a, b in zip(ours, eager):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)


def test_eval_mode_retraces_without_draws_and_train_mode_draws_again():
    theirs_model, tstep = dropout_mlp(torch, seed=1)
    model, step = dropout_mlp(staged, seed=1)
    step = staged.compile(step)
    x, y, tx, ty = staged.tensor(X), staged.tensor(Y), torch.tensor(X), torch.tensor(Y)
    for mode in ("train", "eval", "train"):
        for m in (model, theirs_model):
            getattr(m, mode)()
        for _ in range(2):
            np.testing.assert_allclose(step(x, y).item(), tstep(tx, ty).item(), rtol=2e-6)
        np.testing.assert_array_equal(staged.get_rng_state().numpy(), torch.get_rng_state().numpy())
    assert step.traces == 3  # train (one-shot, then reused) and eval
    assert "random draws made on the host" in step.explanation()


def test_rng_counter_draws_in_the_graph_new_masks_not_torch_s():
    losses = []
    for rng in ("counter", "host"):
        _, step = dropout_mlp(staged, seed=0)
        step = staged.compile(step, rng=rng)
        state = staged.get_rng_state().numpy()
        losses.append([step(staged.tensor(X), staged.tensor(Y)).item() for _ in range(3)])
        changed = not np.array_equal(staged.get_rng_state().numpy(), state)
        assert changed == (rng == "host")  # counter: torch's generator is not used
    assert losses[0] != losses[1] and len(set(losses[0])) == 3
    with pytest.raises(ValueError, match="rng must be 'host' or 'counter'"):
        staged.compile(lambda x: x, rng="torch")


def test_saving_a_step_with_host_draws_saves_the_counter_stream(tmp_path):
    """A deployed step runs no host code: save() traces the step again with its dropout
    in the graph; the loaded step runs and draws new masks at every call."""
    _, step = dropout_mlp(staged, seed=0)
    step = staged.compile(step)
    x, y = staged.tensor(X), staged.tensor(Y)
    step(x, y), step(x, y)
    state = staged.get_rng_state().numpy()
    step.save(tmp_path / "step")
    np.testing.assert_array_equal(staged.get_rng_state().numpy(), state)  # untouched
    manifest = json.loads((tmp_path / "step" / "manifest.json").read_text())
    assert [a["name"] for a in manifest["args"]] == ["x", "y"]  # no draws to pass in
    loaded = staged.runtime.load(tmp_path / "step")
    losses = [loaded(X, Y).item() for _ in range(3)]
    assert np.isfinite(losses).all() and len(set(losses)) == 3


def test_onnx_export_of_a_graph_with_host_draws_says_how(tmp_path):
    model, _ = dropout_mlp(staged, seed=0)
    c = staged.capture(lambda x: model(x).sum(), staged.tensor(X))
    with pytest.raises(ExportError, match="staged.onnx.export"):
        c.export_onnx(tmp_path / "m.onnx")


def test_a_first_grad_made_of_a_view_and_contiguous_are_row_major_as_eager():
    """A Linear's weight gradient is a transposed matmul: eager copies it into a row-major
    ``.grad`` (and ``contiguous()`` copies a view), but the trace kept the transposed
    order, so a compiled ``randn_like(w.grad)`` (gradient noise) placed torch's draws
    transposed (Note [traced layouts])."""

    def step(lib, w, x):
        w.grad = None
        (x @ w.t()).sum().backward()
        return lib.randn_like(w.grad), lib.randn_like(w.t().contiguous()), w.grad.stride()

    torch.manual_seed(0)
    want = step(torch, torch.zeros(4, 3, requires_grad=True), torch.ones(2, 3))
    w, x = staged.zeros(4, 3, requires_grad=True), staged.ones(2, 3)
    compiled = staged.compile(lambda: step(staged, w, x)[:2])
    for _ in range(2):
        staged.manual_seed(0)
        got = compiled()
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert w.grad.stride() == want[2] == (3, 1)
