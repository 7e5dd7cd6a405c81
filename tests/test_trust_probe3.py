"""Compiled and deployed training steps against the same code run eagerly, call for call
(the third trust probe): Python values that hooks read, an EMA of the weights updated
inside the step, a dynamic batch of 0, the training patterns that already match (gradient
accumulation, train/eval switches, frozen parameters, optimizer and model state changed
between calls), and deployed steps continued after saving or given bad input."""

from __future__ import annotations

import copy
import tempfile

import numpy as np
import pytest

import staged
import staged.nn.functional as F
from staged import nn, optim
from tests.checks import batches as _batches
from staged.optim import swa_utils


def _mlp(*middle):
    return nn.Sequential(nn.Linear(3, 4), *middle, nn.Tanh(), nn.Linear(4, 2))


def _training_step(m, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def _host(tree):
    if isinstance(tree, staged.Tensor):
        return tree.detach().numpy().copy()
    if isinstance(tree, (list, tuple)):
        return [_host(t) for t in tree]
    return tree


def _run(build, how, sizes=(4,) * 4, save_at=None):
    """Results of the step ``build()`` makes (``(step, change, state)``: ``change(i)`` runs
    before call ``i``, ``state()`` is what to compare after), run ``how``: "eager", or
    ``staged.compile``'s keyword arguments; with ``save_at``, saved before that call and
    continued deployed."""
    staged.manual_seed(0)
    step, change, state = build()
    f = step if how == "eager" else staged.compile(step, **how)
    out = []
    for i, (x, y) in enumerate(_batches(sizes)):
        if i == save_at:
            d = tempfile.mkdtemp()
            f.save(d)
            f = staged.runtime.load(d)
        change(i)
        out.append(_host(f(x, y)))
    return out, _host(state()), f


def _close(ours, eager) -> None:
    if isinstance(eager, list):
        assert isinstance(ours, list) and len(ours) == len(eager)
        for a, b in zip(ours, eager):
            _close(a, b)
    else:
        np.testing.assert_allclose(ours, eager, rtol=1e-5, atol=1e-6)


def _same_as_eager(build, sizes=(4,) * 4, save_at=None, **how):
    """Compiled (``how``: staged.compile's arguments) as eagerly: each call's results and
    the state after; a step deployed at call ``save_at`` has its state on its own."""
    ours, state, f = _run(build, how, sizes, save_at)
    eager, eager_state, _ = _run(build, "eager", sizes)
    _close(ours, eager)
    if save_at is None:
        _close(state, eager_state)
    return f


def _nothing(i):
    pass


# --- Python values that hooks read (Note [hooks' reads] in staged/tracing/capture.py) -------


class _Scale:
    """A forward hook object: scales the module's output by ``self.s``."""

    def __init__(self):
        self.s = 1.0

    def __call__(self, module, args, out):
        return out * self.s


CLIP = {"max": 0.01}
_GLOBAL_HOOKS: list = []  # handles of the global hooks the tests register, removed after


def _hooked(kind):
    def build():
        m = _mlp()
        opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        scale = _Scale()
        if kind == "tensor":  # gradient clipping by a hook, its bound in a config dict
            m[0].weight.register_hook(lambda g: g.clamp(-CLIP["max"], CLIP["max"]))
        elif kind == "module":
            m[2].register_forward_hook(scale)
        else:
            _GLOBAL_HOOKS.append(
                nn.modules.module.register_module_forward_hook(
                    lambda mod, args, out: out * CLIP["max"] * 100 if mod is m[2] else None
                )
            )

        def change(i):
            CLIP["max"], scale.s = (0.01, 1.0) if i < 2 else (0.03, 3.0)

        return _training_step(m, opt), change, lambda: list(m.parameters())

    return build


@pytest.mark.parametrize(
    "kind, how, reason",
    [
        ("tensor", {}, "CLIP['max']: 0.01 -> 0.03"),
        ("module", {}, "self.s: 1.0 -> 3.0"),
        ("global", {"dynamic": True}, "CLIP['max']: 0.01 -> 0.03"),
    ],
)
def test_a_value_a_hook_reads_re_traces_when_it_changes(kind, how, reason):
    """The hook's value was a constant of the trace: compiled calls went on clamping to
    0.01 (scaling by 1.0) after the caller set 0.03 (3.0); with the hook object, losses
    0.728, 0.756 for eager's 0.802, 1.076 at calls 3 and 4, weights 0.14 off."""
    sizes = (4, 5, 3, 6) if how.get("dynamic") else (4,) * 4
    try:
        f = _same_as_eager(_hooked(kind), sizes, **how)
    finally:
        while _GLOBAL_HOOKS:
            _GLOBAL_HOOKS.pop().remove()
    assert f.traces == 3 and f.history[-1]["reason"].startswith(reason)


class _Counting:
    def __init__(self):
        self.calls = 0

    def hook(self, module, args, out):
        self.calls += 1
        return out

    def step_hook(self, optimizer, args, kwargs):
        self.calls += 1


def test_a_hook_that_counts_its_calls_counts_every_compiled_call():
    """Note [binding writes]: set again after each call; a count that changes at every
    call then runs the step eagerly, with a warning naming it."""
    m = _mlp()
    counter = _Counting()
    m[0].register_forward_hook(counter.hook)
    step = staged.compile(_training_step(m, optim.SGD(m.parameters(), lr=0.1)))
    with pytest.warns(UserWarning, match=r"changes self.calls at every call"):
        for x, y in _batches([4] * 6):
            step(x, y)
    assert counter.calls == 6


@pytest.mark.parametrize("when", ["pre", "post"])
def test_an_optimizer_hook_that_counts_steps_counts_every_compiled_call(when):
    """An optimizer's step hooks are the user's code too (Note [hooks' reads]): compiled
    calls ran a counting hook only while traced (2 of 6 calls), silently."""
    m = _mlp()
    opt = optim.SGD(m.parameters(), lr=0.1)
    counter = _Counting()
    getattr(opt, f"register_step_{when}_hook")(counter.step_hook)
    step = staged.compile(_training_step(m, opt))
    with pytest.warns(UserWarning, match=r"changes self.calls at every call"):
        for x, y in _batches([4] * 6):
            step(x, y)
    assert counter.calls == 6


# --- an EMA of the weights inside the step (Note [averaging in a compiled step]) -------------


def _averaged(kwargs, use_buffers=False):
    def build():
        m = _mlp(nn.BatchNorm1d(4))
        opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        ema = swa_utils.AveragedModel(m, use_buffers=use_buffers, **kwargs())
        train = _training_step(m, opt)

        def step(x, y):
            loss = train(x, y)
            ema.update_parameters(m)
            return loss, ema(x).detach()

        return step, _nothing, lambda: list(ema.parameters()) + list(ema.buffers())

    return build


def _swa_multi():
    return {"multi_avg_fn": swa_utils.get_swa_multi_avg_fn()}  # lerp by a 0-d tensor


def _ema():
    return {"avg_fn": swa_utils.get_ema_avg_fn(0.9)}  # one tensor at a time


@pytest.mark.parametrize("kwargs, use_buffers", [(_swa_multi, False), (_ema, True)])
def test_averaged_model_updated_inside_a_compiled_step(kwargs, use_buffers):
    """``update_parameters`` branched on ``n_averaged == 0`` (and SWA's lerp on its weight
    tensor): CaptureError."""
    f = _same_as_eager(_averaged(kwargs, use_buffers))
    assert f.traces == 2  # the first call's momentum buffers, then one trace for all calls


def test_averaged_model_in_a_deployed_step():
    _same_as_eager(_averaged(_swa_multi), save_at=3)


# --- a dynamic batch of 0 ---------------------------------------------------------------------


def test_a_dynamic_step_at_batch_0_runs_as_eagerly():
    """cross_entropy's target check reduced over no targets: INT64_MIN on llvm-cpu, read as
    a report, raised ``IndexError: Target -4611686018427387903 is out of bounds`` (compiled
    and deployed); eagerly, as torch, the loss is NaN and the gradients are zeros."""

    def build():
        m = _mlp()
        opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        return _training_step(m, opt), _nothing, lambda: list(m.parameters())

    sizes = (4, 5, 0, 3, 0)
    _same_as_eager(build, sizes, dynamic=True)
    _same_as_eager(build, sizes, save_at=2, dynamic=True)


# --- training patterns that match (kept so they stay matched) ---------------------------------


def _accumulating(compiled, k=2, calls=7):
    """Gradient accumulation: the step takes a Python flag ``update`` (the k logic outside);
    two traces, one per flag value."""
    staged.manual_seed(0)
    m = _mlp()
    opt = optim.Adam(m.parameters(), lr=0.05)

    def step(x, y, update):
        loss = F.cross_entropy(m(x), y) / k
        loss.backward()
        if update:
            opt.step()
            opt.zero_grad()
        return loss.detach()

    f = staged.compile(step) if compiled else step
    out = [f(x, y, (i + 1) % k == 0).item() for i, (x, y) in enumerate(_batches((4,) * calls))]
    return out, _host(list(m.parameters()) + [p.grad for p in m.parameters()]), f


def test_gradient_accumulation_with_the_update_flag_as_an_argument():
    ours, state, _ = _accumulating(True)
    eager, eager_state, _ = _accumulating(False)
    _close(ours, eager)
    _close(state, eager_state)


@pytest.mark.parametrize("evaluate", ["same", "separate"])
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_evaluation_between_training_calls(evaluate, mode):
    """``model.eval()`` and ``no_grad`` (``inference_mode``) for an evaluation call between
    training calls, by the training step itself or by a compiled evaluation function:
    dropout off, BatchNorm's running statistics read, not updated."""

    def run(compiled):
        staged.manual_seed(0)
        m = nn.Sequential(nn.BatchNorm1d(3), nn.Linear(3, 4), nn.Tanh(), nn.Dropout(0.3))
        opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            loss = F.cross_entropy(m(x)[:, :2], y)
            if staged.is_grad_enabled():
                opt.zero_grad()
                loss.backward()
                opt.step()
            return loss.detach()

        def evaluate_fn(x, y):
            return F.cross_entropy(m(x)[:, :2], y)

        train = staged.compile(step) if compiled else step
        ev = (
            train
            if evaluate == "same"
            else staged.compile(evaluate_fn)
            if compiled
            else evaluate_fn
        )
        out = []
        for i, (x, y) in enumerate(_batches((4,) * 5)):
            if i in (2, 3):
                m.eval()
                with getattr(staged, mode)():
                    out.append(ev(x, y).item())
                m.train()
            else:
                out.append(train(x, y).item())
        return out, _host(list(m.parameters()) + list(m.buffers()))

    (ours, state), (eager, eager_state) = run(True), run(False)
    np.testing.assert_allclose(ours, eager, rtol=1e-5)
    for a, b in zip(state, eager_state):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _changed_between_calls(what):
    def build():
        m = _mlp()
        opt = optim.Adam(m[2].parameters(), lr=0.05)
        saved = {}

        def change(i):
            if i == 1:
                saved["m"], saved["opt"] = (
                    copy.deepcopy(m.state_dict()),
                    copy.deepcopy(opt.state_dict()),
                )
            if i != 3:
                return
            if what == "freeze":
                m[2].weight.requires_grad_(False)
            elif what == "add_param_group":
                opt.add_param_group({"params": list(m[0].parameters()), "lr": 0.01})
            elif what == "betas":
                opt.param_groups[0]["betas"] = (0.5, 0.9)
            elif what == "weight_decay":  # 0 -> 0.1: another code path, re-traced
                opt.param_groups[0]["weight_decay"] = 0.1
            elif what == "load_state_dict":
                m.load_state_dict(saved["m"])
                opt.load_state_dict(saved["opt"])
            else:  # a parameter's data replaced
                m[2].weight.data = staged.full((2, 4), 0.1)

        def state():
            return list(m.parameters()) + [v for s in opt.state.values() for v in s.values()]

        return _training_step(m, opt), change, state

    return build


@pytest.mark.parametrize(
    "what", ["freeze", "add_param_group", "betas", "weight_decay", "load_state_dict", "data"]
)
def test_optimizer_and_model_state_changed_between_calls(what):
    _same_as_eager(_changed_between_calls(what), (4,) * 5)


def test_clipping_tied_weights_and_a_parameter_vector_in_one_step():
    """``clip_grad_norm_``'s returned norm, an embedding tied to the output layer, an L2
    penalty over ``parameters_to_vector``."""

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(3, 4)
            self.out = nn.Linear(4, 3, bias=False)
            self.out.weight = self.emb.weight

        def forward(self, x):
            return self.out((x @ self.emb.weight).tanh())

    def build():
        m = Tied()
        opt = optim.AdamW(m.parameters(), lr=0.05)

        def step(x, y):
            opt.zero_grad()
            v = nn.utils.parameters_to_vector(m.parameters())
            loss = F.cross_entropy(m(x), y) + 0.01 * (v * v).sum()
            loss.backward()
            norm = nn.utils.clip_grad_norm_(m.parameters(), 0.05)
            opt.step()
            return loss.detach(), norm

        return step, _nothing, lambda: list(m.parameters())

    _same_as_eager(build, (4,) * 5)


# --- deployed steps ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    staged.manual_seed(0)
    m = _mlp()
    f = staged.compile(_training_step(m, optim.SGD(m.parameters(), lr=0.1, momentum=0.9)))
    for x, y in _batches((4,) * 3):
        f(x, y)
    d = tmp_path_factory.mktemp("step")
    f.save(d)
    return staged.runtime.load(d)


@pytest.mark.parametrize(
    "x, y, error, message",
    [
        (
            np.zeros((4, 3), np.float64),
            None,
            TypeError,
            "argument x: expected float32, got float64",
        ),
        (None, np.zeros(4, np.float32), TypeError, "argument y: expected int64, got float32"),
        (np.zeros((5, 3), np.float32), None, ValueError, r"argument x: expected shape \[4, 3\]"),
        (np.zeros((4, 3, 1), np.float32), None, ValueError, r"expected shape \[4, 3\], got"),
        (None, np.array([0, 1, 2, 0]), IndexError, "Target 2 is out of bounds"),
    ],
)
def test_a_deployed_step_given_bad_input_raises_and_keeps_its_state(deployed, x, y, error, message):
    good_x, good_y = _batches([4])[0]
    before = deployed.state_dict()
    with pytest.raises(error, match=message):
        deployed(good_x if x is None else x, good_y if y is None else y).item()
    after = deployed.state_dict()
    assert all(np.array_equal(before[k], after[k]) for k in before)


# --- state the step binds and returns ---------------------------------------------------------


def test_gradient_accumulation_with_zero_grad_set_to_none_traces_a_bounded_number_of_times():
    """The accumulating trace binds each ``.grad`` through its parameter (Note [grads by
    owner]): ``zero_grad()`` (set_to_none) making new ones re-traced at every update."""
    ours, state, f = _accumulating(True, calls=12)
    eager, eager_state, _ = _accumulating(False, calls=12)
    np.testing.assert_allclose(ours, eager, rtol=1e-6)
    assert [a is None for a in state] == [b is None for b in eager_state]
    for a, b in zip(state, eager_state):
        if b is not None:  # 12 accumulated float32 gradients, each a few ulps of the
            # largest entry (0.5) off eager's kernels: a small entry is off by that much
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=12 * 2**-24 * np.abs(b).max())
    assert f.traces <= 3, [h["reason"] for h in f.history]


def test_an_accumulating_step_saves_the_grads_its_parameters_hold_now():
    """Saved once new .grad objects were set since its last call, the accumulating trace
    (which serves them: Note [grads by owner]) saves those, not the ones it last read."""
    staged.manual_seed(0)
    m = _mlp()

    def step(x, y):
        F.cross_entropy(m(x), y).backward()

    f = staged.compile(step)
    for x, y in _batches((4,) * 3):  # the 1st call makes the grads, the 2nd accumulates
        f(x, y)
    for p in m.parameters():
        p.grad = staged.full_like(p.detach(), 0.5)
    d = tempfile.mkdtemp()
    f.save(d)
    saved = staged.runtime.load(d).state_dict()
    for name, p in m.named_parameters():
        np.testing.assert_array_equal(saved[name + ".grad"], p.grad.numpy())
    assert f.traces == 2


def test_grad_scaler_scale_changed_by_update_between_compiled_calls():
    def run(compiled):
        staged.manual_seed(0)
        m = _mlp()
        opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        scaler = staged.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=2)

        def forward_backward(x, y):  # scaler.step and update outside the compiled part
            opt.zero_grad()
            with staged.autocast("cpu", dtype=staged.bfloat16):
                loss = F.cross_entropy(m(x), y)
            scaler.scale(loss).backward()
            return loss.detach()

        f = staged.compile(forward_backward) if compiled else forward_backward
        out = []
        for x, y in _batches((4,) * 5):
            out.append(f(x, y).item())
            scaler.step(opt)
            scaler.update()  # 256 -> 512 -> 1024: growth every 2 steps
        return out, m[0].weight.detach().numpy()

    (ours, w), (eager, w_eager) = run(True), run(False)
    np.testing.assert_allclose(ours, eager, rtol=1e-5)
    np.testing.assert_allclose(w, w_eager, rtol=1e-5, atol=1e-6)


def _scaled_step():
    staged.manual_seed(0)
    m = _mlp()
    opt = optim.SGD(m.parameters(), lr=0.1)

    def step(x, y, scale=1.0):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y) * scale
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def test_a_deployed_step_refuses_an_argument_its_trace_left_at_the_default():
    f = staged.compile(_scaled_step())
    x, y = _batches([4])[0]
    f(x, y)
    f(x, y)  # the first call made the .grad tensors (one-shot)
    d = tempfile.mkdtemp()
    f.save(d)
    loaded = staged.runtime.load(d)
    with pytest.raises(
        ValueError, match=r"argument scale=2.0: this step was traced with scale=1.0"
    ):
        loaded(x, y, scale=2.0)  # it ran with 1.0
    loaded(x, y, scale=1.0)


def test_a_deployed_dynamic_step_refuses_arguments_of_different_batch_sizes():
    m = _mlp()
    opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    f = staged.compile(_training_step(m, opt), dynamic=True)
    for x, y in _batches((4, 5)):
        f(x, y)
    d = tempfile.mkdtemp()
    f.save(d)
    (x, _), (_, y) = _batches((5, 4))
    loaded = staged.runtime.load(d)
    with pytest.raises(ValueError, match=r"argument y: dim 0 \(batch\) has size 4, but argument x"):
        loaded(x, y)  # it read past y's end (loss 0.47), where eager raises
    np.testing.assert_allclose(
        loaded(x, _batches((5,))[0][1]).item(), f(x, _batches((5,))[0][1]).item(), rtol=1e-5
    )


def test_a_returned_parameter_is_the_parameter():
    def run(compiled):
        staged.manual_seed(0)
        m = _mlp()
        train = _training_step(m, optim.SGD(m.parameters(), lr=0.1))

        def step(x, y):
            return train(x, y), m[0].bias

        f = staged.compile(step) if compiled else step
        kept = [f(x, y)[1] for x, y in _batches((4,) * 3)]
        return [k.detach().numpy() for k in kept]

    for ours, eager in zip(run(True), run(False)):
        np.testing.assert_allclose(ours, eager, rtol=1e-6)


def test_a_step_whose_python_state_keeps_changing_keeps_a_bounded_number_of_traces(
    monkeypatch,
):
    """A step re-traced at every call (a number it reads keeps changing) keeps at most
    ``MAX_ENTRIES`` traces, which every call checks in turn (the least recently used go,
    and a value whose trace went is traced again); the values stay eager's."""
    from staged.runtime import compile_config
    from staged.runtime.compiled import MAX_ENTRIES

    def run(compiled):
        staged.manual_seed(0)
        m = _mlp()
        opt = optim.SGD(m.parameters(), lr=0.1)
        cfg = {"scale": 1.0}

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y) * cfg["scale"]
            loss.backward()
            opt.step()
            return loss.detach()

        f = staged.compile(step) if compiled else step
        out = []
        for i, (x, y) in enumerate(_batches((4,) * (MAX_ENTRIES + 3))):
            # MAX_ENTRIES + 1 values in turn: each call's value is that of the trace just
            # dropped, so every call re-traces (the last two from the compile cache)
            cfg["scale"] = 1.0 + i % (MAX_ENTRIES + 1) / 8
            out.append(f(x, y).item())
        return out, _host(list(m.parameters())), f

    monkeypatch.setattr(compile_config, "recompile_limit", 64)  # every call traces
    ours, state, f = run(True)
    eager, eager_state, _ = run(False)
    _close(ours, eager)
    _close(state, eager_state)
    assert f.traces == MAX_ENTRIES + 3  # one per call
    assert max(map(len, f._entries.values())) == MAX_ENTRIES  # per call signature
