"""Weight reparametrizations against torch 2.13: ``nn.utils.parametrize`` with custom
parametrizations, ``nn.utils.parametrizations.weight_norm``/``spectral_norm`` and the
hook-based ``nn.utils.weight_norm``/``spectral_norm``. Each model is built after the same
seed in both libraries (spectral norm's u and v are drawn then), and its outputs, gradients,
SGD steps, buffers, state_dicts, removal and errors compared; then a compiled training step
with a weight-normalised layer against eager."""

from __future__ import annotations

import copy
import pickle
import warnings

import numpy as np
import pytest
import torch

import staged
import staged.nn.utils.parametrizations  # noqa: F401  (staged.nn.utils does not import it yet)
from staged import nn, optim
from tests.checks import assert_close, assert_raises_like_torch, to_numpy

TOL = dict(rtol=1e-5, atol=1e-6)


def _symmetric(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).mT

        def right_inverse(self, a):
            return a.triu()

    return Symmetric()


def _scale(lib):
    class Scale(lib.nn.Module):  # no right_inverse: the original is the tensor itself
        def forward(self, x):
            return 2.0 * x

    return Scale()


def _masked(lib):
    """A Linear whose weight is multiplied by a buffer, the buffer parametrized."""

    class Masked(lib.nn.Linear):
        def __init__(self):
            super().__init__(5, 4)
            self.register_buffer("mask", (lib.arange(20.0).reshape(4, 5) % 3 != 0).float())

        def forward(self, x):
            return lib.nn.functional.linear(x, self.weight * self.mask, self.bias)

    return lib.nn.utils.parametrize.register_parametrization(Masked(), "mask", _scale(lib))


def _old(fn):
    def apply(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return fn(*args, **kwargs)

    return apply


# name: (build(lib) -> module, input shape)
CASES = {
    "weight_norm": (
        lambda lib: lib.nn.utils.parametrizations.weight_norm(lib.nn.Linear(5, 4)),
        (3, 5),
    ),
    "weight_norm_conv_dim1": (
        lambda lib: lib.nn.utils.parametrizations.weight_norm(lib.nn.Conv1d(3, 4, 3), dim=1),
        (2, 3, 6),
    ),
    "weight_norm_dim_none": (
        lambda lib: lib.nn.utils.parametrizations.weight_norm(lib.nn.Conv2d(2, 3, 3), dim=None),
        (2, 2, 5, 5),
    ),
    "spectral_norm": (
        lambda lib: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(5, 4)),
        (3, 5),
    ),
    "spectral_norm_conv_transpose": (
        lambda lib: lib.nn.utils.parametrizations.spectral_norm(
            lib.nn.ConvTranspose2d(2, 3, 3), n_power_iterations=2
        ),
        (2, 2, 4, 4),
    ),
    "spectral_norm_conv_dim_last": (
        lambda lib: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Conv1d(3, 4, 3), dim=-1),
        (2, 3, 6),
    ),
    "stacked": (
        lambda lib: lib.nn.utils.parametrize.register_parametrization(
            lib.nn.utils.parametrize.register_parametrization(
                lib.nn.Linear(4, 4), "weight", _symmetric(lib)
            ),
            "weight",
            _scale(lib),
        ),
        (3, 4),
    ),
    "bias_and_weight": (
        lambda lib: lib.nn.utils.parametrizations.spectral_norm(
            lib.nn.utils.parametrize.register_parametrization(
                lib.nn.Linear(5, 4), "bias", _scale(lib)
            )
        ),
        (3, 5),
    ),
    "vector_spectral_norm": (
        lambda lib: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(5, 4), "bias"),
        (3, 5),
    ),
    "buffer": (_masked, (3, 5)),
    "old_weight_norm": (lambda lib: _old(lib.nn.utils.weight_norm)(lib.nn.Linear(5, 4)), (3, 5)),
    "old_weight_norm_dim_none": (
        lambda lib: _old(lib.nn.utils.weight_norm)(lib.nn.Conv2d(2, 3, 3), dim=None),
        (2, 2, 5, 5),
    ),
    "old_spectral_norm": (lambda lib: lib.nn.utils.spectral_norm(lib.nn.Linear(5, 4)), (3, 5)),
    "old_spectral_norm_conv_transpose": (
        lambda lib: lib.nn.utils.spectral_norm(
            lib.nn.ConvTranspose1d(2, 3, 3), n_power_iterations=3
        ),
        (2, 2, 5),
    ),
}


def _build(lib, case):
    lib.manual_seed(0)
    build, shape = CASES[case]
    m = build(lib)
    x = np.random.RandomState(1).standard_normal(shape).astype(np.float32)
    return m, lib.tensor(x)


def _state(m):
    """Parameters, buffers and their grads, by name."""
    out = {k: v for k, v in m.named_parameters()}
    out.update({k + ".grad": v.grad for k, v in m.named_parameters() if v.grad is not None})
    out.update({k: v for k, v in m.named_buffers()})
    return out


def _assert_same_state(ours, theirs):
    a, b = _state(ours), _state(theirs)
    assert list(a) == list(b)
    for k in a:
        assert_close(a[k], b[k], **_tol(b[k]))


def _tol(want):
    """TOL, its atol scaled by the largest magnitude of ``want``: an entry near 0 is a
    cancellation of terms that large, whose float32 error scales with them (BLAS sums in
    another order with more threads: a gradient entry 1.2e-6 off beside entries of 19)."""
    big = np.abs(np.asarray(want.detach().numpy() if hasattr(want, "detach") else want)).max()
    return dict(rtol=TOL["rtol"], atol=TOL["atol"] * max(1.0, float(big)))


@pytest.mark.parametrize("case", list(CASES))
def test_forward_and_gradients_match_torch(case):
    (m, x), (tm, tx) = _build(staged, case), _build(torch, case)
    assert type(m).__name__ == type(tm).__name__
    _assert_same_state(m, tm)  # spectral norm's u, v: the same draws and 15 power steps
    for _ in range(2):  # in training mode, each forward is a power step
        y, ty = m(x), tm(tx)
        assert_close(y, ty, **_tol(ty))
        cot = np.random.RandomState(2).standard_normal(tuple(ty.shape)).astype(np.float32)
        (y * staged.tensor(cot)).sum().backward()
        (ty * torch.tensor(cot)).sum().backward()
        _assert_same_state(m, tm)


def _train(lib, case, steps=4):
    m, x = _build(lib, case)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for i in range(steps):
        opt.zero_grad()
        loss = ((m(x * (1 + 0.5 * i)) - 0.5) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return m, losses


@pytest.mark.parametrize("case", list(CASES))
def test_sgd_steps_match_torch(case):
    (m, losses), (tm, tlosses) = _train(staged, case), _train(torch, case)
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5)
    _assert_same_state(m, tm)
    assert_close(m.weight, tm.weight, **TOL)


@pytest.mark.parametrize("case", list(CASES))
def test_state_dict_keys_and_round_trips(case):
    m, x = _build(staged, case)
    tm, tx = _build(torch, case)
    sd, tsd = m.state_dict(), tm.state_dict()
    assert list(sd) == list(tsd)
    # torch's trained state into a fresh staged model, and staged's into a fresh torch one
    trained, _ = _train(torch, case)
    m.load_state_dict({k: v.numpy() for k, v in trained.state_dict().items()})
    tm.load_state_dict(trained.state_dict())
    m.eval(), tm.eval(), trained.eval()
    assert_close(m(x), trained(tx), **TOL)
    ours, _ = _train(staged, case)
    fresh, fx = _build(torch, case)
    fresh.load_state_dict({k: torch.tensor(to_numpy(v)) for k, v in ours.state_dict().items()})
    fresh.eval(), ours.eval()
    assert_close(ours(x), fresh(fx), **TOL)


@pytest.mark.parametrize("case", ["spectral_norm", "old_spectral_norm"])
def test_spectral_norm_vectors_train_vs_eval(case):
    def run(lib):
        m, x = _build(lib, case)
        log = []
        for mode in ("train", "train", "eval", "eval", "train"):
            getattr(m, mode)()
            m(x)
            log.append([to_numpy(b).copy() for _, b in m.named_buffers()])
        return log

    ours, theirs = run(staged), run(torch)
    for a, b in zip(ours, theirs):
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, **TOL)
    for u, v in zip(ours[2], ours[3]):  # eval: no power step
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(ours[0][0], ours[1][0])  # train: one step per forward


@pytest.mark.parametrize("leave", [True, False])
@pytest.mark.parametrize("case", ["spectral_norm", "stacked", "bias_and_weight"])
def test_remove_parametrizations(case, leave):
    def run(lib):
        m, x = _build(lib, case)
        m(x)
        original = m.parametrizations.weight.original
        lib.nn.utils.parametrize.remove_parametrizations(m, "weight", leave_parametrized=leave)
        assert m.weight is original  # the same object, the optimizer's still
        assert isinstance(m.weight, lib.nn.Parameter) and "weight" in m._parameters
        return m, x

    (m, x), (tm, tx) = run(staged), run(torch)
    assert type(m).__name__ == type(tm).__name__
    assert list(m.state_dict()) == list(tm.state_dict())
    _assert_same_state(m, tm)
    assert_close(m(x), tm(tx), **TOL)
    assert staged.nn.utils.parametrize.is_parametrized(
        m
    ) == torch.nn.utils.parametrize.is_parametrized(tm)


def test_remove_weight_norm_parametrization():
    def run(lib):
        m, x = _build(lib, "weight_norm")
        lib.nn.utils.parametrize.remove_parametrizations(m, "weight")
        return m, x

    (m, x), (tm, tx) = run(staged), run(torch)
    assert type(m) is nn.Linear and isinstance(m.weight, nn.Parameter)
    assert list(m.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    _assert_same_state(m, tm)
    assert_close(m(x), tm(tx), **TOL)
    assert not hasattr(m, "parametrizations")


@pytest.mark.parametrize("case", ["old_weight_norm", "old_spectral_norm_conv_transpose"])
def test_remove_old_hooks(case):
    def run(lib):
        m, x = _train(lib, case, steps=2)[0], _build(lib, case)[1]
        remove = (
            lib.nn.utils.remove_weight_norm
            if "weight" in case
            else lib.nn.utils.remove_spectral_norm
        )
        remove(m)
        assert isinstance(m.weight, lib.nn.Parameter) and not m._forward_pre_hooks
        return m, x

    (m, x), (tm, tx) = run(staged), run(torch)
    assert list(m.state_dict()) == list(tm.state_dict())
    _assert_same_state(m, tm)
    assert_close(m(x), tm(tx), **TOL)


def test_old_weight_norm_warns_and_keeps_weight_attribute():
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        m = nn.utils.weight_norm(nn.Linear(5, 4))
    assert type(m) is nn.Linear
    assert list(m.state_dict()) == ["bias", "weight_g", "weight_v"]
    assert not isinstance(m.weight, nn.Parameter)
    assert_close(m.weight_g, m.weight_v.norm(dim=1, keepdim=True))


def test_assigning_the_weight_calls_right_inverse():
    def run(lib):
        lib.manual_seed(0)
        m = lib.nn.utils.parametrize.register_parametrization(
            lib.nn.Linear(4, 4), "weight", _symmetric(lib)
        )
        original = m.parametrizations.weight.original
        a = lib.tensor(np.arange(16.0, dtype=np.float32).reshape(4, 4))
        m.weight = a + a.T
        assert m.parametrizations.weight.original is original
        return m

    m, tm = run(staged), run(torch)
    assert_close(m.weight, tm.weight)
    assert_close(m.parametrizations.weight.original, tm.parametrizations.weight.original)


def test_cached_computes_once_and_is_parametrized():
    calls = []

    class Counted(nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 2.0

    P = nn.utils.parametrize
    m = nn.Linear(3, 3)
    assert not P.is_parametrized(m)
    P.register_parametrization(m, "weight", Counted())
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight")
    assert not P.is_parametrized(m, "bias")
    assert P.type_before_parametrizations(m) is nn.Linear
    calls.clear()
    with P.cached():
        a, b = m.weight, m.weight
    assert a is b and len(calls) == 1
    assert m.weight is not a and len(calls) == 2


def test_deepcopy_and_pickling():
    m = nn.utils.parametrizations.weight_norm(nn.Linear(5, 4))
    c = copy.deepcopy(m)
    assert (
        type(c) is type(m)
        and c.parametrizations.weight.original1 is not m.parametrizations.weight.original1
    )
    assert_close(c.weight, m.weight)
    with pytest.raises(RuntimeError, match="Serialization of parametrized modules is only"):
        pickle.dumps(m)


def test_transfer_parametrizations_and_params():
    def run(lib):
        lib.manual_seed(0)
        src = lib.nn.utils.parametrizations.weight_norm(lib.nn.Linear(5, 4))
        dst = lib.nn.Linear(5, 4)
        lib.nn.utils.parametrize.transfer_parametrizations_and_params(src, dst)
        return dst

    m, tm = run(staged), run(torch)
    assert list(m.state_dict()) == list(tm.state_dict())
    _assert_same_state(m, tm)


def _register(lib, param, name="weight", **kw):
    return lambda: lib.nn.utils.parametrize.register_parametrization(
        lib.nn.Linear(5, 4), name, param, **kw
    )


class _Reshape:
    @staticmethod
    def make(lib):
        class Reshape(lib.nn.Module):
            def forward(self, x):
                return x.reshape(-1)

        return Reshape()


class _ToDouble:
    @staticmethod
    def make(lib):
        class ToDouble(lib.nn.Module):
            def forward(self, x):
                return x.double()

        return ToDouble()


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda lib: _register(lib, _scale(lib), "nope")(), id="unknown-name"),
        pytest.param(lambda lib: _register(lib, _Reshape.make(lib))(), id="shape"),
        pytest.param(lambda lib: _register(lib, _ToDouble.make(lib))(), id="dtype"),
        pytest.param(
            lambda lib: lib.nn.utils.parametrize.register_parametrization(
                _register(lib, _scale(lib))(), "weight", _Reshape.make(lib)
            ),
            id="shape-second",
        ),
        pytest.param(
            lambda lib: lib.nn.utils.parametrize.register_parametrization(
                _register(lib, _scale(lib))(), "weight", _ToDouble.make(lib)
            ),
            id="dtype-second",
        ),
        pytest.param(
            lambda lib: lib.nn.utils.parametrize.remove_parametrizations(
                lib.nn.Linear(5, 4), "weight"
            ),
            id="remove-unparametrized",
        ),
        pytest.param(
            lambda lib: lib.nn.utils.parametrize.remove_parametrizations(
                lib.nn.utils.parametrizations.weight_norm(lib.nn.Linear(5, 4)),
                "weight",
                leave_parametrized=False,
            ),
            id="remove-tuple-unparametrized",
        ),
        pytest.param(  # the message holds the repr of the parametrized module
            lambda lib: lib.nn.utils.parametrize.remove_parametrizations(
                lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(5, 4)), "bias"
            ),
            id="remove-other-name",
        ),
        pytest.param(
            lambda lib: setattr(_register(lib, _scale(lib))(), "weight", lib.ones(4, 5)),
            id="assign-without-right-inverse",
        ),
        pytest.param(
            lambda lib: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(5, 4), "nope"),
            id="spectral-unknown-name",
        ),
        pytest.param(
            lambda lib: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(5, 4), dim=2),
            id="spectral-dim",
        ),
        pytest.param(
            lambda lib: lib.nn.utils.parametrizations.spectral_norm(
                lib.nn.Linear(5, 4), n_power_iterations=0
            ),
            id="spectral-iterations",
        ),
        pytest.param(
            lambda lib: lib.nn.utils.spectral_norm(lib.nn.utils.spectral_norm(lib.nn.Linear(5, 4))),
            id="old-spectral-twice",
        ),
        pytest.param(
            lambda lib: _old(lib.nn.utils.weight_norm)(
                _old(lib.nn.utils.weight_norm)(lib.nn.Linear(5, 4))
            ),
            id="old-weight-norm-twice",
        ),
        pytest.param(
            lambda lib: lib.nn.utils.remove_weight_norm(lib.nn.Linear(5, 4)),
            id="remove-weight-norm",
        ),
        pytest.param(
            lambda lib: lib.nn.utils.remove_spectral_norm(lib.nn.Linear(5, 4), "bias"),
            id="remove-spectral-norm",
        ),
    ],
)
def test_errors_match_torch(call):
    assert_raises_like_torch(call)


def _trainer(model):
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    return step


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(nn.utils.parametrizations.weight_norm, id="weight_norm"),
        pytest.param(nn.utils.parametrizations.spectral_norm, id="spectral_norm"),
    ],
)
def test_compiled_step_equals_eager(wrap):
    staged.manual_seed(0)
    eager_model = nn.Sequential(wrap(nn.Linear(6, 8)), nn.Tanh(), nn.Linear(8, 3))
    compiled_model = copy.deepcopy(eager_model)
    eager_step, step = _trainer(eager_model), staged.compile(_trainer(compiled_model))
    rng = np.random.default_rng(0)
    for i in range(4):
        x = staged.tensor(rng.standard_normal((5, 6)).astype(np.float32) * (1 + i))
        y = staged.tensor(rng.standard_normal((5, 3)).astype(np.float32))
        assert_close(step(x, y), eager_step(x, y), **TOL)
    assert step.traces == 2  # the first call's trace is one-shot: SGD makes its momentum
    ours, theirs = _state(compiled_model), _state(eager_model)
    assert list(ours) == list(theirs)
    for k in ours:
        assert_close(ours[k], theirs[k], **TOL)
