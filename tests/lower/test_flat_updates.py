"""Elementwise updates of state lowered over one dynamic size (Note [flat updates] in
staged/lower/mlir/flat.py): a step whose parameters have several shapes trains as torch
does, bit for bit as the same step lowered statically, and every parameter's update is
lowered over a dynamic size."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import staged
import staged.runtime.compiled as compiled
from staged.nn import functional as F
from staged.runtime.compiler import lowering_options

WIDTHS = (5, 7, 6, 3)
OPTIMIZERS = {
    "adam": lambda lib, ps: lib.optim.Adam(ps, lr=0.05),
    "sgd-momentum": lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3),
}


def _model(lib, weights):
    layers = [lib.nn.Linear(a, b) for a, b in zip(WIDTHS, WIDTHS[1:])]
    with lib.no_grad():
        for p, w in zip((p for m in layers for p in m.parameters()), weights):
            p.copy_(lib.tensor(w))
    return lib.nn.Sequential(layers[0], lib.nn.Tanh(), layers[1], lib.nn.ReLU(), layers[2])


def _weights():
    rng = np.random.default_rng(0)
    return [
        rng.standard_normal(s).astype(np.float32) * 0.5
        for a, b in zip(WIDTHS, WIDTHS[1:])
        for s in ((b, a), (b,))
    ]


def _data(k):
    rng = np.random.default_rng(k)
    return rng.standard_normal((8, WIDTHS[0])).astype(np.float32), rng.integers(0, WIDTHS[-1], 8)


def _staged_run(opt_name, calls=6):
    model = _model(staged, _weights())
    opt = OPTIMIZERS[opt_name](staged, model.parameters())

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    cstep = staged.compile(step)
    losses = [cstep(*map(staged.tensor, _data(k))).item() for k in range(calls)]
    return cstep, losses, [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_flat_updates_train_as_torch_and_as_the_static_lowering(opt_name, monkeypatch):
    cstep, losses, params = _staged_run(opt_name)
    model = _model(torch, _weights())
    opt = OPTIMIZERS[opt_name](torch, model.parameters())
    for k, loss in enumerate(losses):
        opt.zero_grad()
        x, y = map(torch.tensor, _data(k))
        expected = torch.nn.functional.cross_entropy(model(x), y)
        expected.backward()
        opt.step()
        np.testing.assert_allclose(loss, expected.item(), rtol=1e-5, err_msg=f"call {k}")
    for p, q in zip(params, model.parameters()):
        np.testing.assert_allclose(p, q.detach().numpy(), rtol=1e-5, atol=1e-6)
    # every parameter's update over a dynamic size: one per distinct element count
    mlir = cstep._last.mlir
    consts = dict(re.findall(r"(%c\d+) = arith\.constant (\d+) : index", mlir))
    flat = {int(consts[c]) for c in re.findall(r"util\.optimization_barrier (%c\d+) : index", mlir)}
    assert flat == {p.size for p in params}
    static = {**lowering_options("llvm-cpu"), "flat_updates": False}
    monkeypatch.setattr(compiled, "lowering_options", lambda backend, graph=None: static)
    cstatic, static_losses, static_params = _staged_run(opt_name)
    assert "tensor<?x" not in cstatic._last.mlir and "tensor<?x" in mlir
    assert static_losses == losses
    for p, q in zip(params, static_params):
        np.testing.assert_array_equal(p, q)
