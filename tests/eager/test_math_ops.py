"""The math entries of the op database (tests/ops/db/math.py) against torch 2.13: forward
values and dtypes, gradients under a random cotangent, and (float64) finite differences;
then the gradient rules at non-differentiable points, dtypes and erf's accuracy."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, check_grads, to_numpy
from tests.ops.db.math import ENTRIES

TOL = {"float16": (2e-3, 2e-3), "float32": (1e-5, 1e-6), "float64": (1e-10, 1e-12),
       "int64": (0, 0)}
CASES = [(e, d) for e in ENTRIES for d in e.dtypes]


def _convert(sample, make):
    def conv(a):
        return make(a) if isinstance(a, np.ndarray) else a
    return [conv(a) for a in sample.args], {k: conv(v) for k, v in sample.kwargs.items()}


def _tensors(args, kwargs):
    return [a for a in list(args) + list(kwargs.values())
            if isinstance(a, (staged.Tensor, torch.Tensor)) and a.requires_grad]


@pytest.mark.parametrize("entry,dtype", CASES, ids=[f"{e.name}-{d}" for e, d in CASES])
def test_forward_and_vjp_match_torch(entry, dtype):
    rtol, atol = entry.rtol if entry.rtol is not None else TOL[dtype][0], \
        entry.atol if entry.atol is not None else TOL[dtype][1]
    grad = entry.differentiable and dtype != "int64"
    rng = np.random.default_rng(0)
    for sample in entry.samples(dtype, rng):
        args, kwargs = _convert(sample, lambda a: staged.tensor(
            a, requires_grad=grad and a.dtype.kind == "f"))
        targs, tkwargs = _convert(sample, lambda a: torch.tensor(
            a, requires_grad=grad and a.dtype.kind == "f"))
        out, tout = entry.op(*args, **kwargs), entry.torch_op(*targs, **tkwargs)
        assert_close(out, tout, rtol, atol)
        assert out.requires_grad == tout.requires_grad, sample.name
        if not grad or not tout.numel():
            continue
        u = rng.standard_normal(tuple(tout.shape)).astype(to_numpy(tout).dtype)
        grads = staged.autograd.grad(out, _tensors(args, kwargs), staged.tensor(u),
                                     allow_unused=True)
        tgrads = torch.autograd.grad(tout, _tensors(targs, tkwargs), torch.tensor(u),
                                     allow_unused=True)
        for g, tg in zip(grads, tgrads):
            assert (g is None) == (tg is None), sample.name
            if g is not None:  # torch answers some zero gradients with a ZeroTensor
                tg = torch.zeros_like(tg) if tg._is_zerotensor() else tg
                assert_close(g, tg, rtol * 10, atol * 10)


FD = [e for e in ENTRIES if e.differentiable and "float64" in e.dtypes
      and not e.skip_reason("fd", "float64")]


@pytest.mark.parametrize("entry", FD, ids=[e.name for e in FD])
def test_vjp_matches_finite_differences(entry):
    rng = np.random.default_rng(1)
    for sample in entry.samples("float64", rng):
        arrays = [a for a in list(sample.args) + list(sample.kwargs.values())
                  if isinstance(a, np.ndarray)]
        if not all(a.size for a in arrays):
            continue

        def f(*ts):
            it = iter(ts)
            args, kwargs = _convert(sample, lambda a: next(it))
            return entry.op(*args, **kwargs)
        check_grads(f, arrays)
