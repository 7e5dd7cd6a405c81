"""Attributes a user sets on tensors (``x.tag = 1``), as torch's tensors take them: kept by
copies, pickles and checkpoints as torch keeps them, and seen by compiled steps."""

from __future__ import annotations

import copy
import io
import pickle
import warnings

import pytest
import torch

import staged


@pytest.fixture(params=["staged", "torch"])
def lib(request):
    return staged if request.param == "staged" else torch


def test_attributes_set_read_and_listed(lib):
    x = lib.ones(2)
    x.tag, x.scale = "w", 2.0
    assert (x.tag, vars(x)) == ("w", {"tag": "w", "scale": 2.0})
    del x.tag
    assert not hasattr(x, "tag") and vars(x) == {"scale": 2.0}


def test_results_views_and_detached_tensors_do_not_inherit_them(lib):
    x = lib.ones(2)
    x.tag = 1
    assert [hasattr(y, "tag") for y in (x.detach(), x.clone(), x.view(2), x[:1], x + 1)] == [
        False
    ] * 5


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_copies_and_pickles_keep_them(lib, how):
    x = lib.ones(2)
    x.tag = {"k": [1, 2]}
    y = {
        "copy": copy.copy,
        "deepcopy": copy.deepcopy,
        "pickle": lambda t: pickle.loads(pickle.dumps(t)),
    }[how](x)
    assert y is not x and y.tag == {"k": [1, 2]}
    assert (y.tag is x.tag) == (how == "copy")  # a deep copy copies them too


def test_a_deep_copy_of_an_attribute_holding_the_tensor_holds_the_copy():
    """(torch copies the tensor twice: its ``memo`` entry is made after the attributes.)"""
    x = staged.ones(2)
    x.me = x
    y = copy.deepcopy(x)
    assert y.me is y


def test_parameters_pickle_them_and_deep_copies_drop_them_as_torchs(lib):
    p = lib.nn.Parameter(lib.ones(2))
    p.flag = True
    assert pickle.loads(pickle.dumps(p)).flag is True
    assert not hasattr(copy.deepcopy(p), "flag")


def test_checkpoints_carry_them_both_ways():
    x, p = staged.ones(2), staged.nn.Parameter(staged.ones(3))
    x.tag, p.flag = "w", (1, 2)
    f = io.BytesIO()
    staged.save({"x": x, "p": p, "plain": staged.zeros(1)}, f)
    f.seek(0)
    theirs = torch.load(f)  # weights_only: torch's own records for these
    assert (theirs["x"].tag, theirs["p"].flag, vars(theirs["plain"])) == ("w", (1, 2), {})
    assert type(theirs["p"]) is torch.nn.Parameter
    f = io.BytesIO()
    torch.save(theirs, f)
    f.seek(0)
    ours = staged.load(f)
    assert (ours["x"].tag, ours["p"].flag, vars(ours["plain"])) == ("w", (1, 2), {})
    assert type(ours["p"]) is staged.nn.Parameter and ours["p"].tolist() == [1.0] * 3


def _loss(out) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(out)


def test_a_compiled_step_retraces_when_an_arguments_attribute_changes():
    step = staged.compile(lambda x: (x * x.scale).sum())
    x = staged.ones(3)
    x.scale = 2.0
    assert _loss(step(x)) == _loss(step(x)) == 6.0
    x.scale = 5.0
    assert _loss(step(x)) == 15.0
    assert "x: attributes {scale: 5.0} -> {}" in _retrace_reason(step, staged.ones(3))


def _retrace_reason(step, x) -> str:
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'scale'"):
        step(x)  # as eager code raises
    return step.last_retrace_reason


def test_a_compiled_step_retraces_when_a_state_tensors_attribute_changes():
    w = staged.ones(3, requires_grad=True)
    w.scale = 2.0

    def step(x):
        loss = (x * w).sum() * w.scale
        loss.backward()
        return loss

    f = staged.compile(step)
    x = staged.ones(3)
    assert [_loss(f(x)) for _ in range(3)] == [6.0] * 3
    w.scale = 5.0
    assert _loss(f(x)) == 15.0
    assert f.last_retrace_reason == "w.scale: 2.0 -> 5.0"


def test_a_checkpoints_state_sets_attributes_only():
    """A crafted record cannot reach staged's own fields: slot state is refused, and a
    name that is one lands in ``__dict__``, which the field's descriptor shadows."""
    from staged.serialization import _set_state

    t = _set_state(staged.ones(2), {"_payload": 5, "tag": 1})
    assert t.tolist() == [1.0, 1.0] and t.tag == 1
    for bad in (({}, {"_payload": 1}), ["tag"], {1: "x"}):
        with pytest.raises(ValueError, match="invalid tensor state"):
            _set_state(staged.ones(2), bad)
