"""Activations and normalisations whose torch kernels are written for floats refuse
integer and bool inputs as torch's do (NotImplementedError naming the kernel and dtype),
where staged computed a float result that torch never gives."""

from __future__ import annotations

import pytest
import torch

import staged

CASES = {
    "gelu": lambda F, x: F.gelu(x),
    "silu": lambda F, x: F.silu(x),
    "mish": lambda F, x: F.mish(x),
    "elu": lambda F, x: F.elu(x),
    "selu": lambda F, x: F.selu(x),
    "celu": lambda F, x: F.celu(x),
    "hardswish": lambda F, x: F.hardswish(x),
    "hardsigmoid": lambda F, x: F.hardsigmoid(x),
    "softplus": lambda F, x: F.softplus(x),
    "logsigmoid": lambda F, x: F.logsigmoid(x),
    "glu": lambda F, x: F.glu(x, 1),
    "layer_norm": lambda F, x: F.layer_norm(x, (2,)),
    "threshold": lambda F, x: F.threshold(x, 1, 0),
}


def _outcome(L, case, dtype):
    x = L.tensor([[1, 2], [3, 4]]).to(getattr(L, dtype))
    try:
        r = CASES[case](L.nn.functional, x)
    except Exception as e:  # noqa: BLE001 (the exception is what is compared)
        return type(e).__name__, str(e).rsplit(": ", 1)[-1]
    return str(r.dtype).split(".")[-1], r.tolist()


@pytest.mark.parametrize("dtype", ["int64", "int8", "bool"])
@pytest.mark.parametrize("case", CASES)
def test_a_float_kernel_refuses_integers_as_torch(case, dtype):
    assert _outcome(staged, case, dtype) == _outcome(torch, case, dtype)
