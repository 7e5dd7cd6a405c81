"""Ops that torch always writes anew return a tensor of their own at their edge sizes too
(``repeat(1, 1)``, a pad by 0, a resize to the same size, a 0-d sort): a write to the
result must not reach the input (their compositions here were the input itself or a view
of it), nor raise for an expanded view's shared elements (``repeat`` with a new leading
dim, as PyTorch's fast_neural_style example writes its repeated style image in place)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

import staged
from staged.eager.ops.table import OWN_RESULTS

CASES = {
    "repeat ones": lambda T, x: x.repeat(1, 1),
    "repeat a new leading dim": lambda T, x: x.repeat(4, 1, 1),
    "repeat a new dim of one": lambda T, x: x.repeat(1, 1, 1),
    "tile ones": lambda T, x: x.tile((1,)),
    "repeat_interleave once": lambda T, x: x.repeat_interleave(1, dim=0),
    "repeat_interleave flat once": lambda T, x: x.repeat_interleave(1),
    "repeat_interleave a row": lambda T, x: x[:1].repeat_interleave(3, dim=0),
    "sort 0-d": lambda T, x: T.sort(x[0, 0]).values,
    "msort 0-d": lambda T, x: T.msort(x[0, 0]),
    "topk 0-d": lambda T, x: T.topk(x[0, 0], 1).values,
    "pad by 0": lambda T, x: T.nn.functional.pad(x, (0, 0)),
    "pad that crops": lambda T, x: T.nn.functional.pad(x, (-1, 0)),
    "reflect pad by 0": lambda T, x: T.nn.functional.pad(x[None], (0, 0), mode="reflect"),
    "interpolate to the same size": lambda T, x: T.nn.functional.interpolate(x[None], size=3),
    "adaptive_avg_pool to the same size": lambda T, x: T.nn.functional.adaptive_avg_pool1d(
        x[None], 3
    ),
    "pixel_shuffle by 1": lambda T, x: T.nn.functional.pixel_shuffle(x[None, :, :, None], 1),
    "pixel_unshuffle by 1": lambda T, x: T.nn.functional.pixel_unshuffle(x[None, :, :, None], 1),
    "channel_shuffle of one group": lambda T, x: T.nn.ChannelShuffle(1)(x[None, :, :, None]),
    "histogram's bin edges": lambda T, x: T.histogram(x.flatten(), x[0]).bin_edges,
    "matrix_power 1": lambda T, x: T.linalg.matrix_power(x[:, :2], 1),
}


@pytest.mark.parametrize("name", CASES)
def test_a_write_to_the_result_does_not_reach_the_input(name):
    results = []
    for T in (staged, torch):
        x = T.arange(1.0, 7.0).reshape(2, 3)
        y = CASES[name](T, x)
        y.add_(100.0)
        np.testing.assert_array_equal(x.numpy(), np.arange(1.0, 7.0).reshape(2, 3))
        results.append(y.numpy())
    np.testing.assert_array_equal(*results)


@pytest.mark.parametrize("name", ["repeat ones", "pad by 0", "sort 0-d", "pixel_shuffle by 1"])
def test_the_copy_carries_the_gradient(name):
    """Written in place after the copy, the result's gradient still reaches the input."""
    grads = []
    for T in (staged, torch):
        x = T.arange(1.0, 7.0).reshape(2, 3).requires_grad_()
        y = CASES[name](T, x)
        y.mul_(3.0)
        (y * y).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(*grads, rtol=1e-6)


def test_a_compiled_step_writes_the_copy_not_the_input():
    def step(x):
        y = x.repeat(1, 1)
        y.add_(1.0)
        return x.sum(), y.sum()

    x = staged.arange(6.0).reshape(2, 3)
    eager = [t.item() for t in step(x)]
    compiled = [t.item() for t in staged.compile(step)(x)]
    assert eager == compiled == [15.0, 21.0]
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(2, 3))


def _views(T, leaves_of, entry, sample, grad):
    from tests.ops import harness

    with T.no_grad() if not grad else contextlib.nullcontext():
        out = harness.call(entry.op if T is staged else entry.torch_op, sample, leaves_of(sample))
    return [t._is_view() for t in harness.flat(out) if isinstance(t, T.Tensor)]


@pytest.mark.parametrize("name", sorted({"matmul", *OWN_RESULTS}))
def test_results_are_views_where_torchs_are(name):
    """Note [own results] in staged/eager/ops/table.py: ops that compute their result in
    steps return no view of their own intermediates, as torch's do (each op's first four
    samples, with grad mode on and off)."""
    from tests.ops import harness
    from tests.ops.db import OP_DB

    entries = [e for e in OP_DB if e.name == name]
    assert entries, f"no op-database entry {name}"
    for e in entries:
        for sample in e.samples(e.dtypes[0], np.random.default_rng(0))[:4]:
            for grad in (False, True):
                got = _views(staged, lambda s: harness.staged_leaves(s, grad), e, sample, grad)
                want = _views(torch, lambda s: harness.torch_leaves(s, grad), e, sample, grad)
                assert got == want, (sample.name, grad)


@pytest.mark.parametrize("make", [lambda x, m: x @ x, lambda x, m: x @ m, lambda x, m: m.mT @ x])
def test_a_product_of_vectors_made_under_no_grad_is_written_in_grad_mode(make):
    """tests/fuzz/test_views_inplace.py's find: the product was a view of the matmul's 2-D
    result, so writing a grad-requiring value into it raised torch's no_grad-view error."""
    grads = []
    for T in (staged, torch):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        m = T.ones(2, 2)
        with T.no_grad():
            y = make(x, m)
        assert not y._is_view()
        y[T.tensor(True)] = x.sum() * 3
        y.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(*grads)
