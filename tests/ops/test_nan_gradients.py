"""No NaN gradient where torch's is a number: every differentiable entry of the op
database in float64, on its samples and on them with a third of each float operand set to
0, under a zero cotangent and a cotangent of ones. A zero cotangent (a masked-out loss
term) must not turn 0 * inf into NaN (xlogy at y = 0 did), nor may a clamp, a where or a
saturated probability (binary_cross_entropy at 1 did); the op sweep's random samples and
cotangents never land there."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from tests.ops import harness as H
from tests.ops.db import OP_DB
from tests.ops.opinfo import Sample

# entries whose gradient at a zeroed sample is documented to differ: {name: why}
KNOWN = {
    "linalg_slogdet_logabsdet": "an all-zero matrix is singular: its gradient raises "
    "LinAlgError here (README, staged.linalg), torch's is finite",
}
ENTRIES = [e for e in OP_DB if e.differentiable and "float64" in e.dtypes]


def _zeroed(sample: Sample, rng) -> Sample:
    args = []
    for a in sample.args:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size:
            a = a.copy()
            flat = a.reshape(-1)
            flat[rng.choice(flat.size, size=max(1, flat.size // 3), replace=False)] = 0
        args.append(a)
    return Sample(tuple(args), sample.kwargs, sample.name)


def _grads(lib, entry, sample, cotangent):
    ins = H.staged_leaves(sample, True) if lib is staged else H.torch_leaves(sample, True)
    outs = H.flat(H.call(entry.op if lib is staged else entry.torch_op, sample, ins))
    outs = [o for o in outs if getattr(o, "requires_grad", False)]
    wrt = [t for t in ins if getattr(t, "requires_grad", False)]
    if not outs or not wrt:
        return None
    cots = [lib.tensor(np.full(tuple(o.shape), cotangent, H.numpy(o).dtype)) for o in outs]
    return [
        None if g is None else H.numpy(g)
        for g in lib.autograd.grad(outs, wrt, cots, allow_unused=True)
    ]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_no_nan_gradient_where_torchs_is_a_number(entry):
    if entry.name in KNOWN:
        pytest.skip(KNOWN[entry.name])
    rng = np.random.default_rng(0)
    for k, sample in enumerate(entry.samples("float64", np.random.default_rng(1))):
        for variant, s in (("sample", sample), ("zeroed", _zeroed(sample, rng))):
            for cotangent in (0.0, 1.0):
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    try:
                        theirs = _grads(torch, entry, s, cotangent)
                    except Exception:  # noqa: BLE001  (torch refuses the zeroed sample)
                        continue
                    ours = _grads(staged, entry, s, cotangent)
                if theirs is None:
                    continue
                for i, (g, tg) in enumerate(zip(ours, theirs)):
                    if g is None or tg is None:
                        continue
                    bad = np.isnan(np.broadcast_to(g, tg.shape)) & ~np.isnan(tg)
                    assert not bad.any(), (
                        f"sample {k} ({variant}), cotangent {cotangent}: gradient {i} is NaN "
                        f"at {np.argwhere(bad)[:3].tolist()} where torch's is "
                        f"{tg[bad][:3].tolist()}"
                    )
