"""Bad arguments raise PyTorch's error: the same exception class, and torch 2.13's message
(after the ``file:line:`` that names the caller's line, and before any hint staged adds in
parentheses). Each row is one call, run against both libraries."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import staged
from tests.checks import message

# name -> call(lib); every row fails in torch 2.13
CASES = {
    "view to a size that does not fit": lambda t: t.ones(2, 3).view(4),
    "reshape to a size that does not fit": lambda t: t.ones(2, 3).reshape(5),
    "reshape with -1 that cannot be inferred": lambda t: t.ones(2, 3).reshape(4, -1),
    "reshape with two -1": lambda t: t.ones(2, 3).view(-1, -1),
    "reshape to a negative size": lambda t: t.ones(2, 3).reshape(-2, 3),
    "expand a non-singleton dim": lambda t: t.ones(2, 3).expand(3, 3),
    "expand -1 in a new leading dim": lambda t: t.ones(2, 3).expand(-1, 2, 3),
    "expand to fewer dims": lambda t: t.ones(2, 3).expand(3),
    "cat of no tensors": lambda t: t.cat([]),
    "cat of other sizes": lambda t: t.cat([t.ones(2, 3), t.ones(4, 5)]),
    "cat of other ranks": lambda t: t.cat([t.ones(2, 3), t.ones(3)]),
    "cat of NumPy arrays": lambda t: t.cat([np.ones(2), np.ones(2)]),
    "stack of a tensor and a number": lambda t: t.stack((t.ones(2), 3)),
    "stack of a tensor and a list": lambda t: t.stack([t.ones(2), [1.0, 2.0]]),
    "hstack of NumPy arrays": lambda t: t.hstack([np.ones(2), np.ones(2)]),
    "vstack of a tensor and a number": lambda t: t.vstack([t.ones(2), 3]),
    "column_stack of a list": lambda t: t.column_stack([[1.0], t.ones(1)]),
    "arange with step 0": lambda t: t.arange(0, 5, 0),
    "arange stepping away from its end": lambda t: t.arange(0, 5, -1),
    "full with a list fill value": lambda t: t.full((2,), [1, 2]),
    "integer tensor to a negative Python power": lambda t: t.tensor([2]) ** -1,
    "integer pow_ to a negative Python power": lambda t: t.tensor([2]).pow_(-2),
    "ragged nested lists": lambda t: t.tensor([[1, 2], [3]]),
    "ragged at depth 2": lambda t: t.tensor([[[1, 2], [3, 4]], [[1, 2], [3]]]),
    "class indices of the input's shape": lambda t: t.nn.functional.cross_entropy(
        t.ones(2, 3), t.zeros(2, 3, dtype=t.long)
    ),
    "batch norm of other features": lambda t: t.nn.BatchNorm1d(4)(t.ones(2, 3)),
    "batch norm weight of other features": lambda t: t.nn.functional.batch_norm(
        t.ones(2, 3), None, None, weight=t.ones(4), training=True
    ),
    "broadcast of mismatched sizes": lambda t: t.ones(2, 3) + t.ones(4, 5),
    "matmul of mismatched shapes": lambda t: t.ones(2, 3) @ t.ones(4, 5),
    "Linear of the wrong in_features": lambda t: t.nn.Linear(4, 2)(t.ones(2, 3)),
    "item of many elements": lambda t: t.ones(2, 3).item(),
    "implicit grad of a non-scalar": lambda t: (t.ones(2, 3, requires_grad=True) * 2).backward(),
    "masked_fill with a float mask": lambda t: t.ones(2, 3).masked_fill(t.ones(2, 3), 0.0),
    "mean of integers": lambda t: t.ones(3, dtype=t.long).mean(),
    "in-place on a leaf that requires grad": lambda t: t.ones(2, requires_grad=True).add_(1),
    "one_hot of a class out of range": lambda t: t.nn.functional.one_hot(t.tensor([3]), 2),
    "Embedding index out of range": lambda t: t.nn.Embedding(3, 2)(t.tensor([3])),
    "multinomial of negative weights": lambda t: t.multinomial(t.tensor([-1.0, 2.0]), 1),
    "topk of more than the size": lambda t: t.ones(2, 3).topk(5),
    "pad of odd length": lambda t: t.nn.functional.pad(t.ones(2, 3), (1,)),
    "linspace of negative steps": lambda t: t.linspace(0, 1, -1),
    "eye of a negative size": lambda t: t.eye(-1),
    "a float size": lambda t: t.zeros(2, 0.5),
    "a negative size": lambda t: t.randn(-2),
    "randint without a size": lambda t: t.randint(5),
    "embedding of a 1-D weight": lambda t: t.nn.functional.embedding(t.tensor([0]), t.ones(3)),
    "where of a float condition": lambda t: t.where(t.ones(2), t.ones(2), t.ones(2)),
    "a tensor assigned to a parameter": lambda t: setattr(t.nn.Linear(2, 2), "weight", t.ones(2)),
    "register_parameter of a tensor": lambda t: t.nn.Linear(2, 2).register_parameter(
        "w", t.ones(2)
    ),
    "unflatten to sizes of another product": lambda t: t.ones(2, 3).unflatten(1, (2, 2)),
    "dot of 2-D tensors": lambda t: t.dot(t.ones(2, 2), t.ones(2, 2)),
    "dot of other lengths": lambda t: t.dot(t.ones(2), t.ones(3)),
    "dot of other dtypes": lambda t: t.dot(t.ones(2), t.ones(2, dtype=t.float64)),
    "mv of mismatched sizes": lambda t: t.mv(t.ones(2, 3), t.ones(2)),
    "index_add of a float index": lambda t: t.ones(3).index_add(0, t.zeros(1), t.ones(1)),
    "index_add of a matrix index": lambda t: t.ones(3).index_add_(
        0, t.zeros(1, 1, dtype=t.long), t.ones(1)
    ),
    "index_add of more indices": lambda t: t.ones(3, 2).index_add(
        0, t.tensor([0, 1]), t.ones(1, 2)
    ),
    "index_add of another slice": lambda t: t.ones(3, 2).index_add(0, t.tensor([0]), t.ones(1, 3)),
    "index_add out of range": lambda t: t.ones(3, 2).index_add(0, t.tensor([3]), t.ones(1, 2)),
    "quantile of an integer tensor": lambda t: t.quantile(t.arange(4), 0.5),
    "quantile out of [0, 1]": lambda t: t.quantile(t.ones(4), 1.5),
    "quantile q tensor out of [0, 1]": lambda t: t.quantile(t.ones(4), t.tensor([0.5, -0.1])),
    "quantile of another q dtype": lambda t: t.quantile(
        t.ones(4), t.tensor([0.5], dtype=t.float64)
    ),
    "quantile of an unknown interpolation": lambda t: t.quantile(
        t.ones(4), 0.5, interpolation="cubic"
    ),
    "quantile of an empty tensor": lambda t: t.quantile(t.ones(0), 0.5),
    "median along an empty dim": lambda t: t.median(t.ones(2, 0), 1),
    "searchsorted of rows that do not match": lambda t: t.searchsorted(t.ones(2, 3), t.ones(2)),
    "searchsorted side against right": lambda t: t.searchsorted(
        t.ones(3), t.ones(2), side="left", right=True
    ),
    "scatter_reduce of an unknown reduction": lambda t: t.ones(3).scatter_reduce(
        0, t.tensor([0]), t.ones(1), "add"
    ),
    "scatter_reduce of another dtype": lambda t: t.ones(3).scatter_reduce(
        0, t.tensor([0]), t.ones(1, dtype=t.float64), "sum"
    ),
    "scatter_reduce out of range": lambda t: t.ones(3).scatter_reduce(
        0, t.tensor([0, 5]), t.ones(2), "amax"
    ),
    "scatter_reduce amax of complex": lambda t: t.ones(3, dtype=t.complex64).scatter_reduce(
        0, t.tensor([0]), t.ones(1, dtype=t.complex64), "amax"
    ),
    "interpolate bilinear of 3-D": lambda t: t.nn.functional.interpolate(
        t.ones(1, 1, 4), scale_factor=2, mode="bilinear"
    ),
    "interpolate without a size": lambda t: t.nn.functional.interpolate(t.ones(1, 1, 4)),
    "interpolate with size and scale": lambda t: t.nn.functional.interpolate(
        t.ones(1, 1, 4), size=3, scale_factor=2
    ),
    "interpolate align_corners with nearest": lambda t: t.nn.functional.interpolate(
        t.ones(1, 1, 4), size=3, align_corners=True
    ),
    "reflect pad of a 4-D input by one dim": lambda t: t.nn.functional.pad(
        t.ones(2, 3, 4, 5), (2, 0), mode="reflect"
    ),
    "reflect pad as wide as the input": lambda t: t.nn.functional.pad(
        t.ones(1, 2, 3), (3, 3), mode="reflect"
    ),
    "circular pad wider than the input": lambda t: t.nn.functional.pad(
        t.ones(1, 2, 3), (4, 3), mode="circular"
    ),
    "select out of range": lambda t: t.select(t.ones(3, 4), 0, 5),
    "movedim mismatched": lambda t: t.movedim(t.ones(3, 4), (0, 1), (1,)),
    "movedim repeated": lambda t: t.movedim(t.ones(3, 4), (0, 0), (1, 0)),
    "take out of range": lambda t: t.take(t.ones(3, 4), t.tensor([12])),
    "take negative out of range": lambda t: t.take(t.ones(3, 4), t.tensor([-13])),
    "isclose of other dtypes": lambda t: t.isclose(t.ones(2), t.ones(2, dtype=t.float64)),
    "trace of 3-D": lambda t: t.trace(t.ones(2, 3, 4)),
    "hstack of nothing": lambda t: t.hstack([]),
    "nanmean of integers": lambda t: t.nanmean(t.ones(2, dtype=t.long)),
    "logaddexp of integers": lambda t: t.logaddexp(
        t.ones(2, dtype=t.long), t.ones(2, dtype=t.long)
    ),
    "frac of integers": lambda t: t.frac(t.ones(2, dtype=t.long)),
    "positive of bool": lambda t: t.positive(t.ones(2, dtype=t.bool)),
    "meshgrid indexing": lambda t: t.meshgrid(t.ones(2), indexing="ab"),
    "Linear negative features": lambda t: t.nn.Linear(-1, 2),
    "Conv2d groups": lambda t: t.nn.Conv2d(3, 4, 3, groups=2),
    "Conv2d padding string with stride": lambda t: t.nn.Conv2d(3, 4, 3, padding="same", stride=2),
    "Conv2d input channels": lambda t: t.nn.Conv2d(3, 4, 3)(t.ones(1, 2, 5, 5)),
    "Dropout p": lambda t: t.nn.Dropout(1.5),
    "Embedding padding_idx": lambda t: t.nn.Embedding(3, 2, padding_idx=5),
    "LayerNorm shape": lambda t: t.nn.LayerNorm(4)(t.ones(2, 3)),
    "LSTM input size": lambda t: t.nn.LSTM(3, 4)(t.ones(2, 1, 5)),
    "LSTM rank": lambda t: t.nn.LSTM(3, 4)(t.ones(3)),
    "MultiheadAttention heads": lambda t: t.nn.MultiheadAttention(5, 2),
    "SGD lr": lambda t: t.optim.SGD([t.ones(2, requires_grad=True)], lr=-1),
    "SGD momentum": lambda t: t.optim.SGD([t.ones(2, requires_grad=True)], lr=0.1, momentum=-1),
    "SGD nesterov": lambda t: t.optim.SGD([t.ones(2, requires_grad=True)], lr=0.1, nesterov=True),
    "Adam betas": lambda t: t.optim.Adam([t.ones(2, requires_grad=True)], betas=(1.5, 0.9)),
    "Adam eps": lambda t: t.optim.Adam([t.ones(2, requires_grad=True)], eps=-1),
    "Adam weight_decay": lambda t: t.optim.Adam([t.ones(2, requires_grad=True)], weight_decay=-1),
    "optimizer empty": lambda t: t.optim.SGD([], lr=0.1),
    "optimizer of a tensor": lambda t: t.optim.SGD(t.ones(2, requires_grad=True), lr=0.1),
    "optimizer non-leaf": lambda t: t.optim.SGD([t.ones(2, requires_grad=True) * 2], lr=0.1),
    "StepLR before optimizer": lambda t: t.optim.lr_scheduler.StepLR(None, 1),
    "DataLoader batch_size": lambda t: t.utils.data.DataLoader([1, 2], batch_size=0),
    "DataLoader sampler and shuffle": lambda t: t.utils.data.DataLoader(
        [1, 2], shuffle=True, sampler=[0, 1]
    ),
    "random_split lengths": lambda t: t.utils.data.random_split([1, 2, 3], [2, 2]),
    "TensorDataset sizes": lambda t: t.utils.data.TensorDataset(t.ones(2), t.ones(3)),
    "to invalid device": lambda t: t.ones(2).to("float32"),
    "to cuda": lambda t: t.ones(2).to("cuda"),
    "clamp min tensor broadcast": lambda t: t.clamp(t.ones(2, 3), min=t.ones(4)),
    "nll_loss of ints": lambda t: t.nn.functional.nll_loss(
        t.ones(2, 3, dtype=t.long), t.zeros(2, dtype=t.long)
    ),
    "log_softmax of ints": lambda t: t.ones(2, dtype=t.long).log_softmax(0),
    "softmax dim": lambda t: t.ones(2, 3).softmax(5),
    "sum dim": lambda t: t.ones(2, 3).sum(3),
    "squeeze dim": lambda t: t.ones(2, 3).squeeze(4),
    "stack of other shapes": lambda t: t.stack([t.ones(2), t.ones(3)]),
    "split sizes": lambda t: t.ones(5).split([2, 2]),
    "chunk 0": lambda t: t.ones(5).chunk(0),
    "gather dims": lambda t: t.gather(t.ones(2, 3), 1, t.zeros(2, dtype=t.long)),
    "repeat fewer dims": lambda t: t.ones(2, 3).repeat(2),
    "flatten dims": lambda t: t.ones(2, 3).flatten(1, 0),
    "narrow beyond": lambda t: t.ones(3).narrow(0, 2, 2),
    "requires_grad of int": lambda t: t.ones(2, dtype=t.long).requires_grad_(),
    "mse shapes": lambda t: t.nn.functional.mse_loss(t.ones(2, 3), t.ones(3, 2)),
    "cross_entropy target dtype": lambda t: t.nn.functional.cross_entropy(
        t.ones(2, 3), t.ones(2, dtype=t.int32)
    ),
    "max_pool kernel larger": lambda t: t.nn.functional.max_pool2d(t.ones(1, 1, 2, 2), 3),
    "conv2d weight rank": lambda t: t.nn.functional.conv2d(t.ones(1, 1, 4, 4), t.ones(3, 3)),
    "argmax dim": lambda t: t.ones(2, 3).argmax(3),
    "tensor of strings": lambda t: t.tensor(["a"]),
    "index of float": lambda t: t.ones(3)[t.tensor([0.0])],
    "bmm ranks": lambda t: t.bmm(t.ones(2, 3), t.ones(3, 2)),
    "einsum bad": lambda t: t.einsum("ij,jk->ik", t.ones(2, 3), t.ones(4, 2)),
    "one_hot float": lambda t: t.nn.functional.one_hot(t.tensor([1.0])),
    "clip_grad_norm type": lambda t: t.nn.utils.clip_grad_norm_(
        [t.ones(2, requires_grad=True)], 1.0, norm_type="fro2"
    ),
    "load_state_dict missing": lambda t: t.nn.Linear(2, 2).load_state_dict({}),
    "Sequential index": lambda t: t.nn.Sequential(t.nn.ReLU())[3],
    "ModuleList index": lambda t: t.nn.ModuleList([t.nn.ReLU()])[2],
}


def _raised(fn, lib):
    with pytest.raises(Exception) as info:
        fn(lib)
    return info.value


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_arguments_raise_torchs_error(name):
    want, got = _raised(CASES[name], torch), _raised(CASES[name], staged)
    assert isinstance(got, type(want)), (type(got), got, type(want), want)
    theirs = str(want).splitlines()[0]
    ours = message(got).splitlines()[0]
    assert ours.startswith(theirs.rstrip(".")), (ours, theirs)  # staged may add a hint


def test_unbatched_cross_entropy_and_nll_loss_equal_torchs():
    """A (C,) input with a 0-d target is one sample, reduced or not (a 0-d loss)."""
    for reduction in ("mean", "none", "sum"):
        out = {}
        for lib in (torch, staged):
            x = lib.tensor([0.5, 1.0, -2.0], requires_grad=True)
            ce = lib.nn.functional.cross_entropy(
                x, lib.tensor(1), reduction=reduction, label_smoothing=0.1
            )
            nll = lib.nn.functional.nll_loss(x.log_softmax(0), lib.tensor(2), reduction=reduction)
            (ce + nll).backward()
            out[lib] = [ce.detach().numpy(), nll.detach().numpy(), x.grad.numpy()]
        for a, b in zip(out[staged], out[torch]):
            assert a.shape == b.shape
            torch.testing.assert_close(torch.from_numpy(a), torch.from_numpy(b))


def test_errors_of_ops_functional_and_layers_name_the_callers_line():
    """The site comes first, once, whatever depth the op raised at; the type is kept."""
    rel = os.path.relpath(__file__)  # as staged/_where.py names a file
    here = __file__ if rel.startswith("..") else rel
    calls = [
        lambda: staged.ones(2, 3).view(4),  # a Tensor method
        lambda: staged.movedim(staged.ones(2, 3), (0, 1), (1,)),  # staged.<op>
        lambda: staged.nn.functional.mse_loss(staged.ones(2, 3), staged.ones(3, 2)),
        lambda: staged.nn.Linear(4, 2)(staged.ones(2, 3)),  # a Module call
        lambda: staged.ones(2, 3).sum(5),  # raised deep inside (wrap_dim)
    ]
    for call in calls:
        with pytest.raises(Exception) as info:
            call()
        text = str(info.value)
        assert text.startswith(f"{here}:{call.__code__.co_firstlineno}: "), text
        assert text.count(f"{here}:") == 1, text


def test_an_in_place_write_of_a_shape_that_does_not_broadcast_says_so_as_torch():
    for lib in (staged, torch):
        with pytest.raises(
            RuntimeError, match=r"size of tensor a \(3\) must match the size of tensor b \(4\)"
        ):
            lib.zeros(3).copy_(lib.ones(4))
