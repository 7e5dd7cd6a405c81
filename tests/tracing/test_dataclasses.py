"""Dataclasses a compiled step takes or returns are containers of their fields, as tuples
and dicts are: the step returned one holding its loss re-traced at every call (the loss
was taken for a tensor stored outside the step), and one as an argument was refused."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

import staged
from staged import nn


@dataclasses.dataclass(frozen=True)
class Batch:
    x: staged.Tensor
    scale: float = 2.0


@dataclasses.dataclass
class Out:
    loss: staged.Tensor
    n: int
    parts: list = dataclasses.field(default_factory=list)
    total: float = dataclasses.field(init=False, default=0.0)

    def __post_init__(self):
        self.total = float(self.n)


def _step(lin):
    def step(b):
        y = lin(b.x)
        return Out(y.sum() * b.scale, 3, [y.detach().mean()])

    return step


def test_a_dataclass_argument_and_result_follow_eager_with_one_trace_per_value():
    staged.manual_seed(0)
    lin = nn.Linear(3, 1)
    step = _step(lin)
    compiled = staged.compile(step)
    x = staged.randn(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for scale in (2.0, 2.0, 3.0, 3.0):
            got, want = compiled(Batch(x, scale)), step(Batch(x, scale))
            assert type(got) is Out and (got.n, got.total) == (3, 3.0)
            np.testing.assert_allclose(got.loss.item(), want.loss.item(), rtol=1e-6)
            np.testing.assert_allclose(got.parts[0].item(), want.parts[0].item(), rtol=1e-6)
    assert compiled.traces == 2  # one per scale: a float field is a value of the trace


def test_a_dataclass_result_s_loss_backpropagates():
    lin = nn.Linear(3, 1)
    compiled = staged.compile(lambda x: Out(lin(x).sum(), 1))
    x = staged.ones(2, 3)
    compiled(x).loss.backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.full((1, 3), 2.0))
