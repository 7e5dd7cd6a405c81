"""``F.relu``/``F.silu`` and ``nn.SiLU`` take torch's ``inplace`` (pytorch-beginner's CBOW calls
``F.relu(x, inplace=True)``): the result is the input, written, with torch's gradient."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import to_numpy


@pytest.mark.parametrize("name", ["relu", "silu"])
@pytest.mark.parametrize("inplace", [False, True])
def test_functional_inplace_writes_the_input_with_torchs_gradient(name, inplace):
    got = []
    for L in (staged, torch):
        a = L.tensor([-1.5, 0.0, 2.0], requires_grad=True)
        b = a * 1
        y = getattr(L.nn.functional, name)(b, inplace=inplace)
        (y * L.tensor([1.0, 2.0, 3.0])).sum().backward()
        got.append((y is b, to_numpy(b), to_numpy(y), to_numpy(a.grad)))
    assert got[0][0] is got[1][0] is inplace
    for ours, theirs in zip(got[0][1:], got[1][1:]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("inplace", [False, True])
def test_silu_module_takes_inplace(inplace):
    ours, theirs = staged.nn.SiLU(inplace=inplace), torch.nn.SiLU(inplace=inplace)
    assert repr(ours) == repr(theirs)
    x, tx = staged.tensor([-1.0, 2.0]), torch.tensor([-1.0, 2.0])
    assert (ours(x) is x) is (theirs(tx) is tx) is inplace
    np.testing.assert_allclose(to_numpy(x), to_numpy(tx), rtol=1e-6)
