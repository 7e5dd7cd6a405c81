"""SyncBatchNorm in one process (no process group): torch's BatchNorm, its checks and
convert_sync_batchnorm, against torch 2.13. Across ranks: tests/distributed/
sync_batch_norm.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, from_torch


def _model(lib):
    lib.manual_seed(0)
    inner = lib.nn.Sequential(lib.nn.BatchNorm2d(4, momentum=None), lib.nn.Tanh())
    return lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3), lib.nn.BatchNorm2d(4, affine=False), inner)


def test_converted_model_trains_as_torchs():
    models = []
    for lib in (staged, torch):
        m = _model(lib)
        bn = m[0]  # not a batch norm: returned as it is, with its children converted
        assert lib.nn.SyncBatchNorm.convert_sync_batchnorm(bn) is bn
        m = lib.nn.SyncBatchNorm.convert_sync_batchnorm(m)
        assert [type(c).__name__ for c in m.modules()].count("SyncBatchNorm") == 2
        models.append(m)
    ours, theirs = models
    ours.load_state_dict({k: from_torch(v) for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(0)
    for train in (True, True, False):
        x = rng.standard_normal((5, 3, 6, 6)).astype(np.float32)
        outs = []
        for lib, m in ((staged, ours), (torch, theirs)):
            m.train(train)
            xt = lib.tensor(x, requires_grad=True)
            out = m(xt)
            out.square().sum().backward()
            outs.append((out, xt.grad, dict(m.named_buffers())))
        (out, gx, bufs), (tout, tgx, tbufs) = outs
        assert_close(out, tout, rtol=1e-5, atol=1e-5)
        assert_close(gx, tgx, rtol=1e-4, atol=1e-5)
        for name in tbufs:
            assert_close(bufs[name], tbufs[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(4,), (2, 0, 3)])
def test_bad_input_raises_as_torch(shape):
    errors = []
    for lib in (staged, torch):
        with pytest.raises(ValueError) as e:
            lib.nn.SyncBatchNorm(3)(lib.zeros(shape))
        errors.append(str(e.value))
    assert errors[0].endswith(errors[1])  # staged names the user's line first
