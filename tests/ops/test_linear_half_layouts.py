"""Half-precision linear by layout, as torch's CPU linear: a 2-D input or a contiguous one
of more dims is one addmm (rounded once); a non-contiguous input of 3 or more dims is a
matmul and then the bias' sum (rounded twice), which moves bfloat16 results by an ulp at
many entries."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "expanded", "2-D transposed"])
def test_bfloat16_linear_rounds_as_torchs(layout):
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((16, 3, 32), (96, 32), (96,)))
    results = []
    for lib in (staged, torch):
        xt, wt, bt = (lib.tensor(a).to(lib.bfloat16) for a in (x, w, b))
        xt = {
            "contiguous": xt,
            "transposed": xt.transpose(0, 1),
            "expanded": xt[:, :1].expand(16, 3, 32),
            "2-D transposed": xt[:, 0].t().contiguous().t(),
        }[layout]
        results.append(lib.nn.functional.linear(xt, wt, bt).float().numpy())
    # torch's bfloat16 products sum in float32 in its own order: an entry may round apart
    # (none did here); rounding once where torch rounds twice moved 30 % of them
    assert (results[0] != results[1]).mean() < 0.01
