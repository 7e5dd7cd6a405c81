"""torch's module paths and names that programs use, against torch 2.13:
``nn.utils.clip_grad`` (and the deprecated ``clip_grad_norm``), the deprecated
``nn.utils.stateless.functional_call``, ``utils.data._utils.collate`` and
``nn.utils.parametrizations.orthogonal`` (values, gradients, state, errors)."""

from __future__ import annotations

import collections
import importlib
import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, assert_raises_like_torch, both, close, message

TOL = dict(rtol=1e-5, atol=1e-6)


def _caught(fn):
    """``fn()``'s result and its warnings (each as category, message, file)."""
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        out = fn()
    return out, [(w.category, str(w.message), w.filename) for w in ws]


# -- nn.utils.clip_grad --------------------------------------------------------------------
def test_clip_grad_module_holds_the_clipping_functions():
    from staged.nn.utils import clip_grad

    utils = staged.nn.utils
    for name in ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"):
        assert getattr(clip_grad, name) is getattr(utils, name)
    assert set(clip_grad.__all__) == set(torch.nn.utils.clip_grad.__all__)


def _grads(lib):
    ps = [lib.nn.Parameter(lib.ones(2, 2)), lib.nn.Parameter(lib.ones(3))]
    for p, g in zip(ps, ([[3.0, -4.0], [0.5, 1.0]], [2.0, -0.25, 1.5])):
        p.grad = lib.tensor(g)
    return ps


def test_deprecated_clip_grad_norm_warns_and_clips_as_torch():
    def run(lib):
        ps = _grads(lib)
        total, ws = _caught(lambda: lib.nn.utils.clip_grad.clip_grad_norm(ps, 1.0, 2.0))
        return total, [p.grad for p in ps], ws

    (total, grads, ours), (t_total, t_grads, theirs) = both(run)
    assert_close(total, t_total)
    close(grads, t_grads)
    assert ours == theirs
    assert [(c, f) for c, _, f in ours] == [(FutureWarning, __file__)]


def test_clip_grad_value_from_its_module():
    def run(lib):
        ps = _grads(lib)
        lib.nn.utils.clip_grad.clip_grad_value_(ps, 0.75)
        return [p.grad for p in ps]

    close(*both(run))


# -- nn.utils.stateless ----------------------------------------------------------------------
def test_stateless_functional_call_warns_and_calls_as_torch():
    def run(lib):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.Tanh(), lib.nn.Linear(2, 1))
        params = {k: 2 * v.detach() for k, v in model.named_parameters()}
        x = lib.arange(6.0).reshape(2, 3)
        out, ws = _caught(lambda: lib.nn.utils.stateless.functional_call(model, params, x))
        return out, model(x), ws

    (out, own, ours), (t_out, t_own, theirs) = both(run)
    close(out, t_out, **TOL)
    close(own, t_own, **TOL)  # the module's own parameters are back
    assert ours == theirs
    assert [(c, f) for c, _, f in ours] == [(FutureWarning, __file__)]


def test_stateless_functional_call_strict_error_as_torch():
    def call(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            model = lib.nn.Linear(2, 2)
            lib.nn.utils.stateless.functional_call(
                model, {"weight": lib.ones(2, 2)}, lib.ones(1, 2), strict=True
            )

    assert_raises_like_torch(call)


# -- utils.data._utils.collate -----------------------------------------------------------------
def test_collate_module_path():
    Point = collections.namedtuple("Point", "x y")

    def run(lib):
        mod = importlib.import_module(f"{lib.__name__}.utils.data._utils.collate")
        batch = [
            {"a": lib.tensor([1.0, 2.0]), "b": Point(np.float32(i), i), "c": [0.5 * i, "s"]}
            for i in range(3)
        ]
        converted = mod.default_convert([np.arange(3), (np.int64(4), "t")])
        return (
            mod.default_collate(batch),
            converted,
            mod.collate([1, 2], collate_fn_map=mod.default_collate_fn_map),
        )

    (ours, converted, ints), (theirs, t_converted, t_ints) = both(run)
    close(ours["a"], theirs["a"])
    assert type(ours["b"]).__name__ == "Point"
    close(list(ours["b"]), list(theirs["b"]))
    close(ours["c"][0], theirs["c"][0])
    assert ours["c"][1] == theirs["c"][1] == ("s", "s", "s")
    close(converted[0], t_converted[0])
    assert isinstance(converted[1], list) and converted[1][1] == t_converted[1][1] == "t"
    close(ints, t_ints)
    from staged.utils.data._utils import collate

    assert collate.default_collate is staged.utils.data.default_collate
    assert collate.default_convert is staged.utils.data.default_convert


# -- nn.utils.parametrizations.orthogonal ------------------------------------------------------
def _orthogonal(lib, shape, orthogonal_map=None, use_trivialization=True, dtype=None):
    """A seeded Linear with ``shape``'s weight made orthogonal, one backward through it:
    its weight, the original, the original's gradient and its state_dict."""
    lib.manual_seed(0)
    lin = lib.nn.Linear(shape[1], shape[0], dtype=dtype)
    lib.nn.utils.parametrizations.orthogonal(
        lin, orthogonal_map=orthogonal_map, use_trivialization=use_trivialization
    )
    x = lib.arange(2.0 * shape[1], dtype=lin.weight.dtype).reshape(2, shape[1]) / 7
    lin(x).pow(2).sum().backward()
    original = lin.parametrizations.weight.original
    return lin, (lin.weight, original, original.grad, lin.state_dict())


@pytest.mark.parametrize("use_trivialization", [True, False])
@pytest.mark.parametrize("orthogonal_map", [None, "matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("shape", [(5, 5), (3, 5), (5, 3)])
def test_orthogonal_matches_torch(shape, orthogonal_map, use_trivialization):
    (lin, ours), (t_lin, theirs) = both(
        lambda lib: _orthogonal(lib, shape, orthogonal_map, use_trivialization)
    )
    close(ours, theirs, **TOL)
    W = lin.weight.detach()
    eye = staged.eye(min(shape))
    assert_close(W @ W.mT if shape[0] < shape[1] else W.mT @ W, eye, rtol=0, atol=1e-5)
    assert repr(lin.parametrizations.weight[0]) == repr(t_lin.parametrizations.weight[0])
    assert [k for k, _ in lin.named_buffers()] == [k for k, _ in t_lin.named_buffers()]


def test_orthogonal_default_map_and_trivialization_base():
    for shape, name in (((4, 4), "matrix_exp"), ((4, 2), "householder")):
        lin, _ = _orthogonal(staged, shape)
        orth = lin.parametrizations.weight[0]
        assert orth.orthogonal_map.name == name
        assert orth.base.shape == (4, 4)


def test_orthogonal_batched_float64_and_sgd_steps():
    def run(lib):
        lib.manual_seed(1)

        class Batched(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = lib.nn.Parameter(lib.randn(2, 4, 3, dtype=lib.float64))

        m = Batched()
        lib.nn.utils.parametrizations.orthogonal(m, orthogonal_map="cayley")
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            (m.weight * lib.arange(12.0, dtype=lib.float64).reshape(4, 3)).sum().backward()
            opt.step()
        return m.weight

    ours, theirs = both(run)
    close(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "householder"])
def test_orthogonal_assign_as_torch(orthogonal_map):
    value = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)

    def run(lib):
        lin, _ = _orthogonal(lib, (5, 3), orthogonal_map)
        with lib.no_grad():
            lin.weight = lib.tensor(value)  # not orthogonal: made so by QR
        return lin.weight, lin.parametrizations.weight[0].base

    close(*both(run), **TOL)


def test_orthogonal_assign_without_trivialization_raises_as_torch():
    def call(lib):
        lin, _ = _orthogonal(lib, (4, 4), "cayley", use_trivialization=False)
        lin.weight = lib.eye(4)

    assert_raises_like_torch(call)


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3), "bias"),
        lambda lib: lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3), "w"),
        lambda lib: lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3), "weight", "qr"),
        lambda lib: lib.nn.utils.parametrizations.orthogonal(
            lib.nn.Linear(3, 3, dtype=lib.complex64), orthogonal_map="householder"
        ),
    ],
)
def test_orthogonal_errors_as_torch(make):
    with pytest.raises(ValueError) as theirs:
        make(torch)
    with pytest.raises(ValueError) as ours:
        make(staged)
    if "has no parameter" in str(theirs.value):  # the module's repr differs in its layout
        assert "has no parameter or buffer with name 'w'" in message(ours.value)
    else:
        assert message(ours.value) == str(theirs.value)


def test_orthogonal_wrong_shape_assignment_as_torch():
    def call(lib):
        lin = lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3))
        lin.parametrizations.weight[0].right_inverse(lib.eye(2))

    assert_raises_like_torch(call)
