"""Data a traced step needs of values made from constants only (Note [constant data] in
tracing/capture.py): computed at the trace, as eager code computes it, not refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged.tracing.symbolic import CaptureError


def _nt_xent(lib, z):
    """sthalles/SimCLR's ``info_nce_loss``: masks from ``cat`` of ``arange``s and an outer
    ``==``, then boolean indexing of the similarity matrix."""
    n = z.shape[0] // 2
    labels = lib.cat([lib.arange(n), lib.arange(n)])
    labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
    z = lib.nn.functional.normalize(z, dim=1)
    sim = z @ z.T
    mask = lib.eye(labels.shape[0], dtype=lib.bool)
    labels = labels[~mask].view(labels.shape[0], -1)
    sim = sim[~mask].view(sim.shape[0], -1)
    positives = sim[labels.bool()].view(labels.shape[0], -1)
    negatives = sim[~labels.bool()].view(sim.shape[0], -1)
    logits = lib.cat([positives, negatives], dim=1) / 0.5
    return lib.nn.functional.cross_entropy(logits, lib.zeros(logits.shape[0], dtype=lib.long))


def test_a_mask_made_of_constants_indexes_in_a_compiled_step():
    z = np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32)
    zt = torch.tensor(z, requires_grad=True)
    expected = _nt_xent(torch, zt)
    expected.backward()

    def step(z):
        loss = _nt_xent(staged, z)
        loss.backward()
        return loss

    f = staged.compile(step)
    for _ in range(2):
        zs = staged.tensor(z, requires_grad=True)
        loss = f(zs)
        np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-5)
        np.testing.assert_allclose(zs.grad.numpy(), zt.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert f.traces == 1


def test_a_branch_on_constants_takes_the_eager_branch():
    def step(x):
        m = staged.cat([staged.zeros(2), staged.arange(2.0)])
        return x * 2 if bool((m > 0).any()) else x

    assert staged.compile(step)(staged.ones(3)).tolist() == [2.0] * 3


def test_data_an_argument_reaches_still_raises():
    step = staged.compile(lambda x: x * 2 if x.sum().item() > 0 else x)
    with pytest.raises(CaptureError, match=r"comparing it \(>\) needs the number read by"):
        step(staged.ones(2))
