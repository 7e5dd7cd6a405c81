"""Every error names the user's line once (staged/_where.py, Note [An error is sited once]):
nn.functional, Modules, Tensor methods and factories given bad inputs, called from this file
and from code whose file is not a ``name.py`` (``<cell>``, a path with a space), where the
prefix used to come twice or three times. Where torch raises, the type and message are
torch 2.13's (after the site, before any hint staged adds)."""

from __future__ import annotations

import os
import types

import numpy as np
import pytest
import torch

import staged

# name -> call(lib); each raises in torch 2.13 and in staged, with torch's type and message
CASES = {
    "dropout p": lambda t: t.nn.functional.dropout(t.ones(3), p=1.5),
    "dropout of ints": lambda t: t.nn.functional.dropout(t.ones(3, dtype=t.long)),
    "dropout1d of 4-D": lambda t: t.nn.functional.dropout1d(t.ones(2, 3, 4, 5)),
    "dropout2d of ints": lambda t: t.nn.functional.dropout2d(t.ones(2, 3, 4, 5, dtype=t.long)),
    "dropout3d of ints": lambda t: t.nn.functional.dropout3d(t.ones(2, 3, 4, 5, 6, dtype=t.long)),
    "dropout2d p": lambda t: t.nn.functional.dropout2d(t.ones(2, 3, 4, 5), p=-0.1),
    "alpha_dropout of ints": lambda t: t.nn.functional.alpha_dropout(
        t.ones(2, 3, dtype=t.long), training=True
    ),
    "feature_alpha_dropout of ints": lambda t: t.nn.functional.feature_alpha_dropout(
        t.ones(2, 3, 4, 5, dtype=t.long), training=True
    ),
    "Dropout1d of 4-D": lambda t: t.nn.Dropout1d()(t.ones(2, 3, 4, 5)),
    "Dropout2d of ints": lambda t: t.nn.Dropout2d()(t.ones(2, 3, 4, 5, dtype=t.long)),
    "Dropout of ints": lambda t: t.nn.Dropout()(t.ones(2, dtype=t.long)),
    "conv1d of 1-D": lambda t: t.nn.functional.conv1d(t.ones(3), t.ones(1, 1, 2)),
    "conv2d channels": lambda t: t.nn.functional.conv2d(t.ones(2, 3, 4, 5), t.ones(2, 2, 3, 3)),
    "conv2d of ints": lambda t: t.nn.functional.conv2d(
        t.ones(2, 3, 4, 5, dtype=t.long), t.ones(2, 3, 3, 3)
    ),
    "conv2d kernel too big": lambda t: t.nn.functional.conv2d(
        t.ones(2, 3, 4, 5), t.ones(2, 3, 9, 9)
    ),
    "conv2d stride 0": lambda t: t.nn.functional.conv2d(
        t.ones(2, 3, 4, 5), t.ones(2, 3, 3, 3), stride=0
    ),
    "conv_transpose2d channels": lambda t: t.nn.functional.conv_transpose2d(
        t.ones(2, 3, 4, 5), t.ones(2, 2, 3, 3)
    ),
    "Conv2d of 2-D": lambda t: t.nn.Conv2d(3, 2, 3)(t.ones(3, 5)),
    "Conv1d channels": lambda t: t.nn.Conv1d(3, 2, 3)(t.ones(1, 4, 5)),
    "max_pool2d kernel": lambda t: t.nn.functional.max_pool2d(t.ones(2, 3, 4, 5), 9),
    "avg_pool1d padding": lambda t: t.nn.functional.avg_pool1d(t.ones(1, 2, 6), 2, padding=2),
    "adaptive_avg_pool2d of 1-D": lambda t: t.nn.functional.adaptive_avg_pool2d(t.ones(5), 2),
    "MaxPool2d kernel": lambda t: t.nn.MaxPool2d(9)(t.ones(2, 3, 4, 5)),
    "batch_norm features": lambda t: t.nn.functional.batch_norm(
        t.ones(2, 3, 4, 5), t.ones(4), t.ones(4)
    ),
    "BatchNorm2d of 2-D": lambda t: t.nn.BatchNorm2d(3)(t.ones(2, 3)),
    "BatchNorm1d features": lambda t: t.nn.BatchNorm1d(4)(t.ones(2, 3)),
    "layer_norm shape": lambda t: t.nn.functional.layer_norm(t.ones(2, 3, 4, 5), (4,)),
    "layer_norm of ints": lambda t: t.nn.functional.layer_norm(
        t.ones(2, 3, 4, 5, dtype=t.long), (5,)
    ),
    "LayerNorm shape": lambda t: t.nn.LayerNorm(4)(t.ones(2, 3)),
    "group_norm channels": lambda t: t.nn.functional.group_norm(t.ones(2, 3, 4, 5), 2),
    "embedding of float indices": lambda t: t.nn.functional.embedding(t.ones(2), t.ones(3, 2)),
    "embedding out of range": lambda t: t.nn.functional.embedding(t.tensor([5]), t.ones(3, 2)),
    "Embedding of float indices": lambda t: t.nn.Embedding(3, 2)(t.ones(2)),
    "Embedding out of range": lambda t: t.nn.Embedding(3, 2)(t.tensor([3])),
    "Bilinear features": lambda t: t.nn.Bilinear(2, 3, 4)(t.ones(1, 2), t.ones(1, 2)),
    "mse_loss shapes": lambda t: t.nn.functional.mse_loss(t.ones(2, 3), t.ones(3, 2)),
    "l1_loss shapes": lambda t: t.nn.functional.l1_loss(t.ones(2, 3), t.ones(4, 3)),
    "huber_loss shapes": lambda t: t.nn.functional.huber_loss(t.ones(2, 3), t.ones(4, 3)),
    "cross_entropy target shape": lambda t: t.nn.functional.cross_entropy(
        t.ones(2, 3), t.zeros(3, dtype=t.long)
    ),
    "cross_entropy target dtype": lambda t: t.nn.functional.cross_entropy(
        t.ones(2, 3), t.zeros(2, dtype=t.int32)
    ),
    "nll_loss target shape": lambda t: t.nn.functional.nll_loss(
        t.ones(2, 3), t.zeros(3, dtype=t.long)
    ),
    "nll_loss float target": lambda t: t.nn.functional.nll_loss(t.ones(2, 3), t.zeros(2)),
    "smooth_l1_loss reduction": lambda t: t.nn.functional.smooth_l1_loss(
        t.ones(2), t.ones(2), reduction="avg"
    ),
    "CrossEntropyLoss target shape": lambda t: t.nn.CrossEntropyLoss()(
        t.ones(2, 3), t.zeros(3, dtype=t.long)
    ),
    "NLLLoss float target": lambda t: t.nn.NLLLoss()(t.ones(2, 3), t.zeros(2)),
    "MSELoss shapes": lambda t: t.nn.MSELoss()(t.ones(2, 3), t.ones(3, 2)),
    "pad of odd length": lambda t: t.nn.functional.pad(t.ones(2, 3), (1,)),
    "reflect pad too wide": lambda t: t.nn.functional.pad(t.ones(1, 2, 3), (3, 3), mode="reflect"),
    "ReflectionPad1d too wide": lambda t: t.nn.ReflectionPad1d(3)(t.ones(1, 2, 3)),
    "interpolate bilinear of 3-D": lambda t: t.nn.functional.interpolate(
        t.ones(1, 1, 4), scale_factor=2, mode="bilinear"
    ),
    "interpolate without a size": lambda t: t.nn.functional.interpolate(t.ones(1, 1, 4)),
    "Upsample bilinear of 3-D": lambda t: t.nn.Upsample(scale_factor=2, mode="bilinear")(
        t.ones(1, 1, 4)
    ),
    "softmax dim": lambda t: t.nn.functional.softmax(t.ones(2, 3), dim=4),
    "log_softmax of ints": lambda t: t.nn.functional.log_softmax(t.ones(2, dtype=t.long), 0),
    "one_hot of floats": lambda t: t.nn.functional.one_hot(t.tensor([1.0])),
    "relu_ of bools": lambda t: t.nn.functional.relu_(t.ones(2, dtype=t.bool)),
    "PReLU parameters": lambda t: t.nn.PReLU(3)(t.ones(2, 4)),
    "LSTM input size": lambda t: t.nn.LSTM(3, 4)(t.ones(2, 1, 5)),
    "GRU of 1-D": lambda t: t.nn.GRU(3, 4)(t.ones(3)),
    "Flatten dims": lambda t: t.nn.Flatten(3)(t.ones(2, 3)),
    "view": lambda t: t.ones(2, 3).view(4),
    "reshape with two -1": lambda t: t.ones(2, 3).reshape(-1, -1),
    "sum dim": lambda t: t.ones(2, 3).sum(3),
    "transpose dim": lambda t: t.ones(2, 3).transpose(0, 5),
    "permute of a repeated dim": lambda t: t.ones(2, 3).permute(0, 0),
    "expand": lambda t: t.ones(2, 3).expand(3, 3),
    "gather dims": lambda t: t.ones(2, 3).gather(1, t.zeros(2, dtype=t.long)),
    "masked_fill of a float mask": lambda t: t.ones(2).masked_fill(t.ones(2), 0.0),
    "mean of ints": lambda t: t.ones(3, dtype=t.long).mean(),
    "topk of more than the size": lambda t: t.ones(3).topk(5),
    "chunk 0": lambda t: t.ones(5).chunk(0),
    "split sizes": lambda t: t.ones(5).split([2, 2]),
    "add of mismatched sizes": lambda t: t.ones(2, 3) + t.ones(4, 5),
    "add_ of floats into ints": lambda t: t.ones(2, dtype=t.long).add_(t.ones(2)),
    "ones of a float size": lambda t: t.ones(2, 0.5),
    "randn of a negative size": lambda t: t.randn(-2),
    "randperm of a negative size": lambda t: t.randperm(-1),
    "full of a list": lambda t: t.full((2,), [1, 2]),
    "arange step 0": lambda t: t.arange(0, 5, 0),
    "linspace of negative steps": lambda t: t.linspace(0, 1, -1),
    "eye of a negative size": lambda t: t.eye(-1),
    "randint of float bounds": lambda t: t.randint(0.5, 5.5, (3,)),
    "randint of a float high bound": lambda t: t.randint(0, 5.5, (3,)),
    "randint of a bool low bound": lambda t: t.randint(True, 5, (3,)),
    "randint(high, size) of a float": lambda t: t.randint(5.5, (3,)),
    "randint(high, size) of a NumPy float": lambda t: t.randint(np.float64(2), (3,)),
    "randint(high, size) of a float tensor": lambda t: t.randint(t.tensor(5.5), (3,)),
    "randint of bounds in order": lambda t: t.randint(5, 2, (3,)),
}

# name -> call(lib): staged's message words its own (the site is what is tested here)
SITED_ONLY = {
    "batch_norm of one value": lambda t: t.nn.functional.batch_norm(
        t.ones(1, 3), None, None, training=True
    ),
    "max_pool2d of 1-D": lambda t: t.nn.functional.max_pool2d(t.ones(5), 2),
    "linear shapes": lambda t: t.nn.functional.linear(t.ones(2, 3), t.ones(4, 5)),
    "Linear features": lambda t: t.nn.Linear(4, 2)(t.ones(2, 3)),
    "Linear of ints": lambda t: t.nn.Linear(3, 2)(t.ones(2, 3, dtype=t.long)),
    "binary_cross_entropy shapes": lambda t: t.nn.functional.binary_cross_entropy(
        t.ones(2, 3) / 2, t.ones(3, 2)
    ),
    "BCELoss shapes": lambda t: t.nn.BCELoss()(t.ones(2, 3) / 2, t.ones(3, 2)),
    "cross_entropy float target shape": lambda t: t.nn.functional.cross_entropy(
        t.ones(2, 3), t.ones(2, 4)
    ),
    "pad mode": lambda t: t.nn.functional.pad(t.ones(1, 2, 3), (1, 1), mode="wrap"),
    "interpolate mode": lambda t: t.nn.functional.interpolate(t.ones(1, 1, 4), 3, mode="cubic"),
    "Unflatten sizes": lambda t: t.nn.Unflatten(1, (2, 2))(t.ones(2, 3)),
    "index_select of a float index": lambda t: t.ones(2, 3).index_select(0, t.ones(1)),
    "zeros of a negative size": lambda t: t.zeros(-1),
    "empty of a float": lambda t: t.empty(1.5),
    "zeros of a string": lambda t: t.zeros("a"),
}


def _raised(fn, lib):
    with pytest.raises(Exception) as info:
        fn(lib)
    return info.value


def _refiled(fn, filename: str):
    """``fn`` with its code filed under ``filename`` (its lines kept): a call from a
    notebook cell, ``python -c`` or a script whose path has a space."""
    code = fn.__code__.replace(co_filename=filename)
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def _shown(path: str) -> str:
    rel = os.path.relpath(path)  # as staged/_where.py names a file
    return path if rel.startswith("..") else rel


def _body(e: BaseException, fn) -> str:
    """``e``'s message after the one site it must start with: ``fn``'s file and line."""
    site = f"{_shown(fn.__code__.co_filename)}:{fn.__code__.co_firstlineno}: "
    text = str(e)
    assert text.startswith(site), (text, site)
    body = text[len(site) :]
    assert site not in body and not body.startswith(site.split(":")[0]), text  # once
    return body


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_error_names_the_users_line_once_and_is_torchs(name):
    want = _raised(CASES[name], torch)
    got = _raised(CASES[name], staged)
    assert isinstance(got, type(want)), (type(got), got, type(want), want)
    theirs = str(want).splitlines()[0].rstrip(".")
    assert _body(got, CASES[name]).startswith(theirs), (str(got), theirs)


@pytest.mark.parametrize("filename", ["<cell>", "/tmp/a notebook/cell 3.py", "script"])
def test_a_site_outside_a_name_py_file_is_named_once(filename):
    """Before Note [An error is sited once], an error passing nn.functional's and a Module's
    wrappers carried ``<cell>:10: <cell>:10: `` (a ``\\S+\\.py`` pattern took the first for
    no site)."""
    for name, case in {**CASES, **SITED_ONLY}.items():
        call = _refiled(case, filename)
        got = _raised(call, staged)
        assert _body(got, call), name


@pytest.mark.parametrize("name", sorted(SITED_ONLY))
def test_an_error_worded_by_staged_names_the_users_line_once(name):
    _raised(SITED_ONLY[name], torch)  # torch raises too
    assert _body(_raised(SITED_ONLY[name], staged), SITED_ONLY[name])


class _Net(staged.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = staged.nn.LayerNorm(4)

    def forward(self, x):
        return staged.nn.functional.dropout1d(self.norm(x))  # raises for a 4-D x


@pytest.mark.parametrize("filename", [None, "<cell>"])
@pytest.mark.parametrize("hooked", [False, True])
def test_an_error_inside_a_forward_names_the_forwards_line_with_hooks_or_without(filename, hooked):
    forward = _Net.forward if filename is None else _refiled(_Net.forward, filename)
    net = type("Net", (_Net,), {"forward": forward})()
    seen = []
    if hooked:
        net.register_forward_pre_hook(lambda m, args: seen.append("pre"))
        net.register_forward_hook(lambda m, args, out: seen.append("post"))
        net.norm.register_forward_hook(lambda m, args, out: seen.append("norm"))
    with pytest.raises(RuntimeError) as info:
        net(staged.ones(2, 3, 5, 4))
    site = f"{_shown(forward.__code__.co_filename)}:{forward.__code__.co_firstlineno + 1}: "
    text = str(info.value)
    assert text.startswith(site) and text.count(site.split(":")[0] + ":") == 1, text
    assert text[len(site) :] == message_of(
        lambda: torch.nn.functional.dropout1d(torch.ones(2, 3, 5, 4))
    )
    assert seen == (["pre", "norm"] if hooked else [])


def message_of(fn) -> str:
    with pytest.raises(Exception) as info:
        fn()
    return str(info.value)


@pytest.mark.parametrize("filename", [None, "<cell>"])
def test_a_built_in_layers_error_through_hooks_names_the_call_line_once(filename):
    def call(t):
        layer = t.nn.Dropout2d()
        layer.register_forward_pre_hook(lambda m, args: None)
        layer.register_forward_hook(lambda m, args, out: None)
        return layer(t.ones(2, 3, 4, 5, dtype=t.long))

    fn = call if filename is None else _refiled(call, filename)
    got = _raised(fn, staged)
    site = f"{_shown(fn.__code__.co_filename)}:{fn.__code__.co_firstlineno + 4}: "
    assert str(got).startswith(site) and str(got).count(site) == 1, str(got)
    want = _raised(call, torch)
    assert type(got) is type(want) and str(got)[len(site) :] == str(want)


@pytest.mark.parametrize("seed", [np.int64(3), np.int32(3), np.uint8(3)])
def test_a_generators_seed_of_a_numpy_integer_is_refused_as_torchs(seed):
    want = _raised(lambda t: t.Generator().manual_seed(seed), torch)
    got = _raised(lambda t: t.Generator().manual_seed(seed), staged)
    assert type(got) is type(want) is TypeError and str(want) == "an integer is required"
    assert str(got).endswith(str(want))


def test_the_global_seed_of_a_numpy_integer_is_taken_as_torchs():
    torch.manual_seed(np.int64(3))
    staged.manual_seed(np.int64(3))
    assert staged.randn(4).tolist() == pytest.approx(torch.randn(4).tolist(), abs=0)


def test_randint_of_integer_bounds_of_any_integer_type_draws_torchs_stream():
    for low, high in [(np.int64(0), np.int64(5)), (0, np.int32(7)), (np.int16(2), 9)]:
        torch.manual_seed(1)
        staged.manual_seed(1)
        want = torch.randint(low, high, (6,)).tolist()
        assert staged.randint(low, high, (6,)).tolist() == want
