"""float16/bfloat16 ``batch_norm`` against torch 2.13's CPU kernel, bit for bit: training
normalises by the batch's mean and 1/std rounded to the parameters' dtype (torch's
save_mean/save_invstd; the input's unless weight, bias or running statistics are float32),
evaluation by the running statistics in float32; parameters of both dtypes are refused as
torch refuses them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_raises_like_torch

X = np.random.default_rng(0).standard_normal((8, 3, 5)).astype(np.float32) * 2 + 0.5


def _params(lib, half, wd, sd):
    def make(values, d):
        return None if d is None else lib.tensor(values).to(getattr(lib, d))

    return dict(
        weight=make([1.3, 0.7, -0.4], wd),
        bias=make([0.1, -0.2, 0.3], wd),
        running_mean=make([0.3, -0.1, 0.2], sd),
        running_var=make([1.7, 0.9, 2.3], sd),
    )


CASES = [
    (half, wd, sd, training)
    for half in ("bfloat16", "float16")
    for wd, sd in itertools.product([None, half, "float32"], repeat=2)
    for training in (True, False)
    if (sd is not None or training) and not ({wd, sd} >= {half, "float32"})
]


@pytest.mark.parametrize("half, wd, sd, training", CASES)
def test_half_batch_norm_gives_torchs_bits(half, wd, sd, training):
    out = {}
    for lib in (staged, torch):
        x = lib.tensor(X).to(getattr(lib, half))
        y = lib.nn.functional.batch_norm(x, training=training, **_params(lib, half, wd, sd))
        out[lib] = y.float().numpy()
    np.testing.assert_array_equal(out[staged], out[torch])


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("wd, sd", [("bfloat16", "float32"), ("float32", "bfloat16")])
def test_half_batch_norm_refuses_parameters_of_two_dtypes_as_torch(wd, sd, training):
    assert_raises_like_torch(
        lambda lib: lib.nn.functional.batch_norm(
            lib.tensor(X).bfloat16(), training=training, **_params(lib, "bfloat16", wd, sd)
        )
    )
