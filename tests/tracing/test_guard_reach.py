"""Compiled steps against the same code run eagerly when Python state the step reaches
changes between calls: attributes of the user's Modules however the step reaches them
(through containers, lists, arguments), replaced children, values compared by type as
well as value; tensors built from traced ones; pre-trace views of state and pre-trace
tensors returned as they are; PyTorch's actor-critic example compiled."""

from __future__ import annotations

import re
import warnings
from collections import namedtuple

import numpy as np
import pytest
import torch

import staged
import staged.distributions  # noqa: F401  (staged.distributions, as torch's)
import staged.nn.functional as F
from staged import nn, optim

OFFSET = 0.0  # a global a Module's forward reads, the Module reached through a container


class _Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0

    def forward(self, x):
        return self._scaled(x) + OFFSET

    def _scaled(self, x):  # a method forward calls: what it reads is read too
        return x * self.scale


class _Holder(nn.Module):
    """A user Module holding its layers in a plain list, a ModuleList or a ModuleDict."""

    def __init__(self, how):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        layers = [_Scale(), _Scale()]
        self.how = how
        if how == "list":
            self.layers = layers
        elif how == "modulelist":
            self.layers = nn.ModuleList(layers)
        else:
            self.blocks = nn.ModuleDict({"a": layers[0], "b": layers[1]})

    def forward(self, x):
        x = self.fc(x)
        for m in self.blocks.values() if self.how == "moduledict" else self.layers:
            x = m(x)
        return x


def _model(how):
    if how == "sequential":
        return nn.Sequential(nn.Linear(3, 2), nn.Sequential(_Scale(), nn.Tanh()))
    return _Holder("list" if how == "argument" else how)


def _layer(model, how):
    """The inner ``_Scale`` whose attributes the test changes."""
    if how == "sequential":
        return model[1][0]
    return model.blocks["b"] if how == "moduledict" else model.layers[1]


def _run(how, changes, compiled):
    """Losses of an SGD step on ``_model(how)``, ``changes[i](model)`` before call ``i``,
    and the final weight; the compiled function, if ``compiled``."""
    staged.manual_seed(0)
    model = _model(how)
    opt = optim.SGD(model.parameters(), lr=0.1)

    def step(x, m=None):
        opt.zero_grad()
        loss = ((model if m is None else m)(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    f = staged.compile(step) if compiled else step
    x = staged.ones(4, 3)
    losses = []
    for change in changes:
        change(model)
        losses.append(f(x, model).item() if how == "argument" else f(x).item())
    return losses, model.fc.weight.detach().numpy() if how != "sequential" else None, f


def _same_as_eager(how, changes):
    ours, w, f = _run(how, changes, True)
    eager, w_eager, _ = _run(how, changes, False)
    np.testing.assert_allclose(ours, eager, rtol=1e-5)  # IREE's tanh: a few ulps
    if w is not None:
        np.testing.assert_allclose(w, w_eager, rtol=1e-5)
    return f


def _keep(model):
    pass


@pytest.mark.parametrize(
    "how, name",
    [
        ("sequential", "model.1.0.scale"),
        ("modulelist", "model.layers.1.scale"),
        ("moduledict", "model.blocks.b.scale"),
        ("list", "model.layers[1].scale"),
        ("argument", "m.layers[1].scale"),
    ],
)
def test_an_attribute_of_a_module_reached_through_a_container_re_traces(how, name):
    """``model[1][0].scale = 3.0`` after the first calls: the compiled step used 2.0."""

    def scale(v):
        def change(model):
            _layer(model, how).scale = v

        return change

    f = _same_as_eager(how, [_keep, _keep, scale(3.0), scale(3.0)])
    assert f.last_retrace_reason == f"{name}: 2.0 -> 3.0"
    assert f.traces == 3  # the first call creates the .grad buffers: one-shot


def test_a_global_read_by_the_forward_of_a_module_in_a_container_re_traces():
    global OFFSET

    def offset(v):
        def change(model):
            global OFFSET
            OFFSET = v

        return change

    try:
        f = _same_as_eager("sequential", [offset(0.0), _keep, offset(0.5), _keep])
    finally:
        OFFSET = 0.0
    assert f.last_retrace_reason == "OFFSET: 0.0 -> 0.5"


def test_a_replaced_child_module_re_traces():
    """The new child's parameters are not the ones the trace read: the step trained the
    old layer, silently."""

    def replace(model):
        model[0] = nn.Linear(3, 2)

    def run(compiled):
        staged.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 2), _Scale())
        f = lambda x: model(x).sum().detach()
        f = staged.compile(f) if compiled else f
        x = staged.ones(4, 3)
        out = [f(x).item()]
        replace(model)
        out.append(f(x).item())
        return out, f

    (ours, f), (eager, _) = run(True), run(False)
    np.testing.assert_allclose(ours, eager, rtol=1e-5)
    assert f.last_retrace_reason.startswith("model children: 0=Linear at 0x")


class _Typed(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 1
        self.flag = True

    def forward(self, x):
        return x * self.k + (1 if self.flag is True else 0)


@pytest.mark.parametrize("attr, values", [("k", (1, 1.0)), ("flag", (True, 1))])
def test_a_module_attribute_changed_to_an_equal_value_of_another_type_re_traces(attr, values):
    """``1 == 1.0 == True``, but ``x * 1`` of an int tensor stays int where ``x * 1.0`` is
    float, and ``flag is True`` tells ``True`` from ``1``."""

    def run(compiled):
        model = nn.Sequential(_Typed())
        f = staged.compile(model) if compiled else model
        x = staged.tensor([1, 2, 3])
        out = []
        for v in values:
            setattr(model[0], attr, v)
            out.append(f(x))
        return out, f

    (ours, f), (eager, _) = run(True), run(False)
    for a, b in zip(ours, eager):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert f.traces == 2
    old, new = values
    assert f.last_retrace_reason.endswith(f".{attr}: {old!r} -> {new!r}")


def test_a_nan_attribute_does_not_re_trace_each_call():
    """NaN is not equal to itself; the guards of the user's and of staged's own Module
    attributes (``ConstantPad1d.value``) take it as unchanged all the same."""
    layer = _Scale()
    layer.scale = float("nan")
    model = nn.Sequential(layer, nn.ConstantPad1d(1, float("nan")))
    f = staged.compile(model)
    x = staged.ones(2, 3)
    for _ in range(3):
        layer.scale = model[1].value = float("nan")  # a new NaN object each time
        got = f(x)
    assert f.traces == 1, f.last_retrace_reason
    np.testing.assert_array_equal(got.numpy(), model(x).numpy())


# --- tensor(), as_tensor() of traced tensors ------------------------------------------------


def _from_tensors(lib, w, x):
    """Tensors built from 0-d tensors a step computed (torch's dtypes, detached)."""
    s = (w * x).sum()
    r = s * 2
    return [
        lib.tensor([r, s, 1.5]),
        lib.tensor([[w[0]], [w[1]]], dtype=lib.float64),
        lib.as_tensor([r.to(lib.int32), 3]),
        lib.tensor([r.to(lib.int32)]),
        lib.tensor(r),
        lib.tensor((w[2],), requires_grad=True),
    ]


def _flags(built) -> list:
    """Whether each requires grad and is a leaf (a compiled step returns values)."""
    return [(t.requires_grad, t.is_leaf) for t in built]


def _same_tensors(ours, want):
    for got, t in zip(ours, want):
        assert str(got.dtype) == str(t.dtype).replace("torch", "staged")
        np.testing.assert_array_equal(got.detach().numpy(), t.detach().numpy())


def test_tensor_of_traced_zero_d_tensors_is_built_from_their_values():
    """``torch.tensor([t])`` of a traced ``t`` raised CaptureError; it is their values now,
    as torch.compile builds it (detached, of torch's dtype), and a parameter's value at
    each call, not at trace time."""

    def run(compiled):
        w = nn.Parameter(staged.tensor([1.0, 2.0, 3.0]))
        opt = optim.SGD([w], lr=0.1)

        def step(x):
            opt.zero_grad()
            built = _from_tensors(staged, w, x)
            s = (w * x).sum()
            F.smooth_l1_loss(s.reshape(1), staged.tensor([s * 2])).backward()
            opt.step()
            return built, _flags(built)

        f = staged.compile(step) if compiled else step
        return [f(staged.full((3,), float(i + 1))) for i in range(3)], f

    (ours, f), (eager, _) = run(True), run(False)
    for (got, flags), (want, eager_flags) in zip(ours, eager):
        _same_tensors(got, want)
        assert flags == eager_flags
    assert f.traces == 2  # the first call creates w.grad: one-shot
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: "To copy construct from a tensor ..."
        want = _from_tensors(torch, torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0])), 1.0)
    _same_tensors(ours[0][0], want)
    assert ours[0][1] == _flags(want) == [(False, True)] * 5 + [(True, True)]


@pytest.mark.parametrize(
    "make",
    [
        lambda m: [m.tensor(1, dtype=m.int32)],
        lambda m: [m.tensor(1.0, dtype=m.float64), 2],
        lambda m: [m.tensor(1.0, dtype=m.float16), 2],
        lambda m: [m.tensor(2, dtype=m.uint8), m.tensor(3, dtype=m.int8)],
        lambda m: [m.tensor(True), 2],
        lambda m: [[m.tensor([1.5])], [m.ones(1, 1)]],
        lambda m: [],
    ],
)
def test_tensor_of_tensors_takes_torch_s_dtype_and_shape_eagerly(make):
    ours, want = staged.tensor(make(staged)), torch.tensor(make(torch))
    assert str(ours.dtype) == str(want.dtype).replace("torch", "staged")
    np.testing.assert_array_equal(ours.numpy(), want.numpy())


def test_tensor_of_a_list_holding_a_multi_element_tensor_raises_torch_s_error():
    with pytest.raises(ValueError, match="only one element tensors can be converted"):
        torch.tensor([torch.ones(2)])
    with pytest.raises(ValueError, match="only one element tensors can be converted"):
        staged.tensor([staged.ones(2)])
    with pytest.raises(ValueError, match="only one element tensors can be converted"):
        staged.capture(lambda x: staged.tensor([x]), staged.ones(2))


# --- state read through views made before the trace, and returned as it is ------------------


def test_a_view_of_a_parameter_made_before_the_trace_sees_the_step_s_update():
    """A view is read through its base: after the update, as eagerly (it was a second
    input sharing the parameter's memory: SharedInputsError)."""

    def run(compiled):
        w = nn.Parameter(staged.tensor([[1.0, 2.0], [3.0, 4.0]]))
        wt = w.t()  # made eagerly, before the step
        opt = optim.SGD([w], lr=0.5)

        def step(x):
            opt.zero_grad()
            before = (wt @ x).sum()
            (w @ x).sum().backward()
            opt.step()
            return before.detach(), (wt @ x).sum().detach()

        f = staged.compile(step) if compiled else step
        return [[t.item() for t in f(staged.tensor([1.0, -1.0]))] for _ in range(3)]

    assert run(True) == run(False)


def test_state_sharing_written_memory_says_what_to_change():
    """Neither is an argument: the error says how to untie them, not to pass one once."""
    enc, dec = nn.Linear(3, 3), nn.Linear(3, 3)
    dec.weight.data = enc.weight.data
    opt = optim.SGD([*enc.parameters(), *dec.parameters()], lr=0.1)

    def step(x):
        opt.zero_grad()
        dec(enc(x)).sum().backward()
        opt.step()

    with pytest.raises(
        staged.runtime.shared_inputs.SharedInputsError,
        match=r"share memory .* Both are state the step reads, not arguments: .* tie the "
        r"Parameter itself \(dec.weight = enc.weight\)",
    ):
        staged.compile(step)(staged.ones(2, 3))


def test_a_tensor_from_before_the_trace_returned_as_it_is_holds_its_value_at_each_call():
    w = staged.tensor([1.0, 2.0])
    v = staged.tensor([[1.0, 2.0], [3.0, 4.0]])[0]
    f = staged.compile(lambda x: (x * 2, w, v))
    f(staged.ones(1))
    with staged.no_grad():
        w.mul_(10)
        v.mul_(10)
    _, got_w, got_v = f(staged.ones(1))  # was [1., 2.] twice: data baked in at the trace
    assert got_w.tolist() == [10.0, 20.0] and got_v.tolist() == [10.0, 20.0]


# --- PyTorch's reinforcement_learning/actor_critic.py, compiled -----------------------------


SavedAction = namedtuple("SavedAction", ["log_prob", "value"])


class _ActorCritic:
    """The example's policy (two heads), its eagerly collected episode and its
    ``finish_episode`` (actions chosen by the episode, not sampled, so both libraries
    take the same ones)."""

    def __init__(self, lib):
        lib.manual_seed(0)
        self.lib = lib
        nn_ = lib.nn
        self.affine1, self.action_head = nn_.Linear(4, 16), nn_.Linear(16, 2)
        self.value_head = nn_.Linear(16, 1)
        params = [
            p for m in (self.affine1, self.action_head, self.value_head) for p in m.parameters()
        ]
        with lib.no_grad():  # the same initial weights in both libraries
            for k, p in enumerate(params):
                p.copy_(
                    lib.from_numpy(
                        np.random.default_rng(k).normal(0, 0.3, p.shape).astype(np.float32)
                    )
                )
        self.optimizer = lib.optim.Adam(params, lr=3e-2)
        self.saved_actions: list = []
        self.rewards: list = []

    def select_action(self, state, action):
        lib = self.lib
        x = lib.nn.functional.relu(self.affine1(lib.from_numpy(state).float()))
        probs = lib.nn.functional.softmax(self.action_head(x), dim=-1)
        m = lib.distributions.Categorical(probs)
        self.saved_actions.append(SavedAction(m.log_prob(lib.tensor(action)), self.value_head(x)))

    def finish_episode(self):
        lib, R, returns = self.lib, 0, []
        policy_losses, value_losses = [], []
        for r in self.rewards[::-1]:
            R = r + 0.99 * R
            returns.insert(0, R)
        returns = lib.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + 1e-7)
        for (log_prob, value), R in zip(self.saved_actions, returns):
            advantage = R - value.item()
            policy_losses.append(-log_prob * advantage)
            value_losses.append(lib.nn.functional.smooth_l1_loss(value, lib.tensor([R])))
        self.optimizer.zero_grad()
        loss = lib.stack(policy_losses).sum() + lib.stack(value_losses).sum()
        loss.backward()
        self.optimizer.step()
        del self.rewards[:]
        del self.saved_actions[:]
        return loss


def test_pytorch_s_actor_critic_example_compiled_trains_as_torch():
    """Its saved values keep the transposed head weights Linear saved for the backward:
    views of the parameters the step updates (it refused with SharedInputsError), and
    ``torch.tensor([R])`` of a traced return (it raised CaptureError)."""
    agents = {lib: _ActorCritic(lib) for lib in (staged, torch)}
    step = staged.compile(agents[staged].finish_episode)
    rng = np.random.default_rng(0)
    for length in (4, 3, 5):
        for _ in range(length):
            state = rng.standard_normal(4).astype(np.float32)
            action = int(rng.integers(2))
            for agent in agents.values():
                agent.select_action(state, action)
                agent.rewards.append(1.0)
        got, want = step().item(), agents[torch].finish_episode().item()
        assert got == pytest.approx(want, rel=1e-4, abs=1e-6)
    for mine, theirs in zip(
        agents[staged].optimizer.param_groups[0]["params"],
        agents[torch].optimizer.param_groups[0]["params"],
    ):
        np.testing.assert_allclose(mine.detach().numpy(), theirs.detach().numpy(), atol=1e-5)


def test_relu__is_torch_s_in_place_relu():
    for lib in (staged, torch):
        a = lib.tensor([-1.0, 2.0], requires_grad=True)
        b = a * 1
        assert lib.relu_(b) is b and b.tolist() == [0.0, 2.0]
        b.sum().backward()
        assert a.grad.tolist() == [0.0, 1.0]


def _reads_defaults(kind):
    """A step whose helper or gradient hook reads a value through a mutable default
    argument or a short list, and the change the caller then makes to that value."""
    cfg, box = {"scale": 2.0}, [2.0]
    w = staged.ones(3, requires_grad=True)
    if kind == "dict default":

        def helper(x, cfg=cfg):
            return x * cfg["scale"]
    elif kind == "list default":

        def helper(x, *, box=box):
            return x * box[0]
    elif kind == "list in a closure":

        def helper(x):
            return x * box[0]
    else:  # a gradient hook's default
        w.register_hook(lambda g, c=cfg: g * c["scale"])

        def helper(x):
            return x

    def step(x):
        w.grad = None
        loss = (helper(x) * w).sum()
        loss.backward()
        return loss.detach(), w.grad.detach()

    def change():
        cfg["scale"] = box[0] = 3.0

    return step, change


@pytest.mark.parametrize("kind", ["dict default", "list default", "list in a closure", "hook"])
def test_a_value_read_through_a_default_argument_or_a_short_list_re_traces(kind):
    """Compiled calls kept scaling by 2.0 after the caller set 3.0 (eager reads the new one)."""
    got = {}
    for compiled in (False, True):
        step, change = _reads_defaults(kind)
        f = staged.compile(step) if compiled else step
        x = staged.arange(1.0, 4.0)
        out = [f(x), f(x)]
        change()
        out.append(f(x))
        got[compiled] = [[t.numpy() for t in o] for o in out]
    for ours, eager in zip(got[True], got[False]):
        for a, b in zip(ours, eager):
            np.testing.assert_array_equal(a, b)
    scaled = 1 if kind == "hook" else 0  # the hook scales the gradient, the helper the loss
    assert got[False][2][scaled].tolist() != got[False][0][scaled].tolist()  # 3.0 counts
    reasons = [h["reason"] for h in f.history]
    name = {"list default": "box", "list in a closure": "box", "hook": "c"}.get(kind, "cfg")
    change = r"\[2.0\] -> \[3.0\]" if "list" in kind else "2.0 -> 3.0"
    assert len(reasons) == 3 and re.fullmatch(rf"{name}(\['scale'\])?: {change}", reasons[-1])


def test_a_list_of_values_the_step_reads_and_empties_re_traces_when_refilled_otherwise():
    """REINFORCE's rewards: read as constants of the trace, then ``del rewards[:]``. The
    trace serves lists of the same rewards and re-traces for others (it had served its
    first episode's rewards to every later one). Compiled calls do not empty the list: the
    trace warns, as it does of a counter list the body appends to."""
    w = staged.ones(1, requires_grad=True)
    rewards: list = []
    calls: list = []

    def finish():
        calls.append(1)
        loss = sum(r * w for r in rewards).sum()
        del rewards[:]
        return loss.detach()

    f = staged.compile(finish)
    got = []
    with pytest.warns(UserWarning) as seen:
        for episode in ([1.0, 2.0], [1.0, 2.0], [5.0, 1.0]):
            rewards[:] = episode
            got.append(f().item())
    assert got == [3.0, 3.0, 6.0] and f.traces == 2
    said = " ".join(str(w.message) for w in seen)
    assert "calls ([] -> [1])" in said and "rewards ([1.0, 2.0] -> [])" in said, said
