"""Leftover differences from torch 2.13, each checked against torch: NumPy conversion of a
tensor that requires grad, ``optimizer.state`` as a ``defaultdict``, an optimizer whose
parameters changed dtype, writes into an expanded tensor's diagonal, complex ``sigmoid``
at large magnitudes, and ``clip_grad_norm_(error_if_nonfinite=True)`` in a compiled step."""

from __future__ import annotations

import collections
import math
import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, message, raises_like_torch

_REQUIRES_GRAD = "Can't call numpy() on Tensor that requires grad"
# torch's __array__ takes no copy= (NumPy 2 warns)
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept")


# --- NumPy conversion (Tensor.__array__ is numpy(), as torch's) ---------------------------
@pytest.mark.parametrize(
    "convert",
    [
        np.asarray,
        np.array,
        lambda t: np.asarray(t, dtype=np.float64),
        np.sin,
        lambda t: np.stack([t, t]),
        lambda t: np.isclose(t, t),
        lambda t: np.asarray(t * 2),  # a non-leaf
    ],
    ids=["asarray", "array", "asarray dtype", "ufunc", "stack", "isclose", "non-leaf"],
)
def test_numpy_conversion_of_a_tensor_that_requires_grad_raises(convert):
    raises_like_torch(lambda lib: convert(lib.ones(3, requires_grad=True)), _REQUIRES_GRAD)


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_numpy_conversion_works_where_grad_mode_is_off(mode):
    """torch checks requires_grad only while grad mode is on: ``t.numpy()`` and
    ``np.asarray(t)`` of a leaf that requires grad work under ``no_grad``."""
    for lib in (staged, torch):
        t = lib.tensor([1.0, 2.0], requires_grad=True)
        with getattr(lib, mode)():
            np.testing.assert_array_equal(np.asarray(t), [1.0, 2.0])
            np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])


def test_numpy_conversion_of_a_conj_view_and_a_meta_tensor_raise_as_torch():
    raises_like_torch(
        lambda lib: np.asarray(lib.ones(2, dtype=lib.complex64).conj()),
        "Can't call numpy() on Tensor that has conjugate bit set",
    )
    raises_like_torch(
        lambda lib: np.asarray(lib.ones(2, device="meta")),
        "can't convert meta device type tensor to numpy",
    )


def test_numpy_array_copies_and_asarray_shares_as_torch():
    for lib in (staged, torch):
        t = lib.zeros(3)
        np.array(t)[0] = 5.0  # a copy
        np.asarray(t)[1] = 7.0  # t's memory
        assert t.tolist() == [0.0, 7.0, 0.0], lib.__name__


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True")
def test_detached_and_scalar_conversions_still_work():
    for lib in (staged, torch):
        t = lib.tensor([1.5, 2.5], requires_grad=True)
        np.testing.assert_array_equal(np.asarray(t.detach()), [1.5, 2.5])
        assert float(t[0]) == 1.5 and t.tolist() == [1.5, 2.5]
        assert lib.as_tensor(t.detach()).tolist() == [1.5, 2.5]


# --- optimizer.state ------------------------------------------------------------------------
def _adam_after_a_step(lib):
    w = lib.nn.Parameter(lib.tensor([1.0, -2.0]))
    opt = lib.optim.Adam([w], lr=0.1)
    w.square().sum().backward()
    opt.step()
    return w, opt


def test_optimizer_state_is_a_defaultdict_of_dicts_as_torch():
    for lib in (staged, torch):
        w, opt = _adam_after_a_step(lib)
        fresh = lib.zeros(1)
        opt.state[fresh]["seen"] = 1  # a new key: torch's defaultdict(dict) makes its dict
        assert opt.state[fresh] == {"seen": 1}
        del opt.state[fresh]
        loaded = lib.optim.Adam([lib.nn.Parameter(lib.zeros(2))], lr=0.1)
        loaded.load_state_dict(opt.state_dict())
        for o in (opt, loaded):
            assert type(o.state) is collections.defaultdict, lib.__name__
            assert o.state.default_factory is dict
        assert sorted(next(iter(loaded.state.values()))) == ["exp_avg", "exp_avg_sq", "step"]


# --- an optimizer made before the parameters changed dtype ----------------------------------
W0 = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
X0 = np.array([[1.0, 2.0]], np.float32)

# torch's lerp_ of a float32 moving average towards a float64 gradient raises ("expected
# dtype float for `end` but got dtype double"); the others update the float32 state in place
_DTYPE_CHANGE = [
    ("Adam", {}, True),
    ("AdamW", {"amsgrad": True}, True),
    ("Adam", {"foreach": True}, True),
    ("NAdam", {}, True),
    ("RAdam", {}, True),
    ("Adamax", {}, True),
    ("RMSprop", {"centered": True}, True),
    ("Adafactor", {}, True),
    ("SGD", {"momentum": 0.9}, False),
    ("RMSprop", {}, False),
    ("Adagrad", {}, False),
    ("Adadelta", {}, False),
    ("ASGD", {}, False),
    ("Rprop", {}, False),
]


def _step_after_double(lib, name, kw):
    """A step of optimizer ``name`` made for a float32 model, then ``model.double()`` and a
    second step: (its RuntimeError or None, the weight, the state)."""
    model = lib.nn.Linear(2, 2, bias=False)
    with lib.no_grad():
        model.weight.copy_(lib.tensor(W0))
    opt = getattr(lib.optim, name)(model.parameters(), lr=0.1, **kw)
    model(lib.tensor(X0)).square().sum().backward()
    opt.step()
    opt.zero_grad()
    model.double()
    model(lib.tensor(X0).double()).square().sum().backward()
    try:
        opt.step()
        error = None
    except RuntimeError as e:
        error = e
    return error, model.weight, opt.state[model.weight]


@pytest.mark.parametrize("name,kw,raises", _DTYPE_CHANGE, ids=lambda v: str(v))
def test_step_after_model_double_raises_where_torchs_does(name, kw, raises):
    (ours, w, state), (theirs, tw, tstate) = (
        _step_after_double(lib, name, kw) for lib in (staged, torch)
    )
    assert (theirs is not None) == raises, theirs
    assert (ours is not None) == raises, ours
    if raises:
        assert "expected dtype float for `end` but got dtype double" in str(theirs)
        assert message(ours) == (
            "the optimizer's state is staged.float32 but the gradient is staged.float64: the "
            "parameter's dtype changed after the optimizer made its state (as by "
            "model.double() after creating it); create the optimizer after converting the "
            "model"
        )
    # what the step did before it raised (the step count, AdamW's decay), or all of it
    assert_close(w, tw, 1e-6, 1e-7)
    assert sorted(state) == sorted(tstate)
    for k in tstate:
        assert_close(state[k], tstate[k], 1e-6, 1e-7)


# --- writes into an expanded tensor's diagonal ---------------------------------------------
# torch refuses a write only where two elements of the written view share memory (a stride
# 0 of a dimension longer than 1): an expanded vector's diagonal is the vector itself
_DIAGONAL_WRITES = [
    "x = T.zeros(3); x.expand(3, 3).diagonal().fill_(1)",
    "x = T.zeros(3)\nwith T.no_grad():\n    x.expand(3, 3).diagonal().fill_(1)",
    "x = T.zeros(3)\nwith T.no_grad():\n    x.expand(3, 3).diagonal()[1:] = 5",
    "x = T.zeros(3); x.expand(3, 3).diagonal().add_(1)",
    "x = T.arange(3.0); x.expand(3, 3).diagonal(1).fill_(7)",
    "x = T.arange(3.0); x.expand(2, 3, 3).diagonal(dim1=1, dim2=2).fill_(7)",
    "x = T.arange(3.0); x.expand(2, 3, 3).diagonal(dim1=1, dim2=2).add_(7)",  # overlaps
    "x = T.zeros(3, 1); x.expand(3, 3).diagonal().copy_(T.tensor([1.0, 2.0, 3.0]))",
    "x = T.zeros(4); x.expand(2, 4).as_strided((4,), (1,)).add_(1)",
    "x = T.zeros(3); x.detach().expand(3, 3).diagonal().fill_(4)",
    "x = T.zeros(3, requires_grad=True)\nwith T.no_grad():\n    x.expand(3, 3).diagonal().fill_(1)",
    "x = T.zeros(3, requires_grad=True); x.expand(3, 3).diagonal().fill_(1)",  # a leaf's view
    "with T.inference_mode():\n    x = T.zeros(3); x.expand(3, 3).diagonal().fill_(4)",
    "a = T.tensor([1.0, 2.0, 3.0], requires_grad=True); x = a.clone()\n"
    "x.expand(3, 3).diagonal().mul_(T.tensor([2.0, 3.0, 4.0])); x.sum().backward()",
]


@pytest.mark.parametrize("code", _DIAGONAL_WRITES)
def test_write_into_an_expanded_diagonal_matches_torch(code):
    def run(lib):
        ns = {"T": lib}
        try:
            exec(compile(code, "program.py", "exec"), ns)  # noqa: S102  (the test's own)
        except RuntimeError as e:
            return type(e), message(e)
        grad = ns["a"].grad.tolist() if "a" in ns else None
        return ns["x"].detach().tolist(), grad

    assert run(staged) == run(torch)


# --- complex sigmoid at large magnitudes -----------------------------------------------------
_SIGMOID_POINTS = [
    1000 + 1000j, -1000 + 5j, -1000 - 1000j, -1e30 + 1j, -800 + 0.5j, -800 + 0j, -89 + 3j,
    -88.5 + 0j, -745 + 1j, -710 + 1j, 1e308 + 1e308j, complex("inf+0j"), complex("-inf+1j"),
    1j * math.pi, 30 + 0j, -30 + 0j, -40 + 2j, 0.5 - 0.25j,
]  # fmt: skip


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_sigmoid_at_large_magnitudes_matches_torch(dtype):
    with np.errstate(over="ignore"):  # 1e308 is complex64's inf
        z = np.array(_SIGMOID_POINTS, dtype)
    ours = staged.sigmoid(staged.tensor(z)).numpy()
    theirs = torch.sigmoid(torch.tensor(z)).numpy()
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    eps = np.finfo(z.real.dtype).eps
    np.testing.assert_allclose(ours.view(z.real.dtype), theirs.view(z.real.dtype), 8 * eps, 0)
    inplace = staged.tensor(z)
    inplace.sigmoid_()
    np.testing.assert_array_equal(inplace.numpy(), ours)


# --- clip_grad_norm_(error_if_nonfinite=True) in a compiled step -----------------------------
def test_compiled_clip_grad_norm_raises_for_the_bad_call_only():
    """The check raises torch's error when a result of the call with a non-finite norm is
    read (each of its results: they are the failed call's), keeps the old weights, and
    later calls train on without raising it again (as an index check, runtime/checks.py)."""
    staged.manual_seed(0)
    model = staged.nn.Linear(3, 1)
    opt = staged.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        total = staged.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        opt.step()
        return loss, total

    compiled = staged.compile(step)
    y = staged.zeros(2, 1)
    float(compiled(staged.ones(2, 3), y)[0])
    before = model.weight.detach().clone()
    bad = compiled(staged.full((2, 3), math.inf), y)
    theirs = torch.nn.Linear(3, 1)
    theirs(torch.full((2, 3), math.inf)).sum().backward()
    with pytest.raises(RuntimeError) as eager:
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0, error_if_nonfinite=True)
    for result in (bad[0], bad[1], bad[0]):
        with pytest.raises(RuntimeError) as compiled_error:
            float(result)
        assert str(compiled_error.value) == str(eager.value)
    assert model.weight.detach().equal(before)
    losses = [float(compiled(staged.ones(2, 3), y)[0]) for _ in range(3)]
    assert losses[0] > losses[1] > losses[2]


def test_load_state_dict_replaces_the_state_as_torch():
    """The loaded state is the whole state: a parameter it has no entry for loses its
    own, and keys it lacks (AMSGrad's ``max_exp_avg_sq``) go."""

    def run(lib):
        a, b = (lib.nn.Parameter(lib.tensor([1.0, -2.0])) for _ in range(2))
        opt = lib.optim.Adam([a, b], lr=0.1, amsgrad=True)
        (a.square().sum() + b.sum()).backward()
        opt.step()
        sd = opt.state_dict()
        saved = {k: v.clone() for k, v in sd["state"][0].items() if k != "max_exp_avg_sq"}
        opt.load_state_dict({"state": {0: saved}, "param_groups": sd["param_groups"]})
        return [sorted(opt.state[p]) if p in opt.state else None for p in (a, b)]

    ours, theirs = run(staged), run(torch)
    assert theirs == [["exp_avg", "exp_avg_sq", "step"], None]
    assert ours == theirs


def test_float_or_complex_of_a_tensor_requiring_grad_warns_once_in_grad_mode_only():
    """As torch's TORCH_WARN_ONCE: not under no_grad (LBFGS.step's ``float(loss)``) or
    inference_mode, then once a process, ``complex`` sharing it."""
    import staged._where as where

    where._WARNED_ONCE.discard(
        "Converting a tensor with requires_grad=True to a scalar may lead to unexpected "
        "behavior.\nConsider using tensor.detach() first."
    )
    x = staged.ones((), requires_grad=True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with staged.no_grad():
            float(x)
        with staged.inference_mode():
            float(x)
        assert not seen
        float(x)
        float(x * 3)
        complex(x)
    assert [str(w.message)[:36] for w in seen] == ["Converting a tensor with requires_gr"]


@pytest.mark.parametrize("lib", [staged, torch], ids=["staged", "torch"])
def test_as_subclass_is_an_alias_of_the_subclass(lib):
    """torch's ``as_subclass``: a view of the same data and version counter, on the
    autograd graph (a leaf's alias is no leaf)."""

    class Marked(lib.Tensor):
        pass

    x = lib.ones(2, requires_grad=True)
    y = x * 2
    z = y.as_subclass(Marked)
    assert type(z) is Marked and z._is_view() and z.requires_grad and not z.is_leaf
    assert not x.as_subclass(Marked).is_leaf
    with lib.no_grad():
        y.mul_(3)
    assert z.tolist() == [6.0, 6.0] and z._version == y._version == 1
    (z.detach().as_subclass(Marked) * 0 + z).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]  # (the in-place write under no_grad is not on it)
    with pytest.raises(TypeError, match="subclass"):
        x.as_subclass(int)
