"""scaled_dot_product_attention's dropout (the op sweep compares the rest with torch):
eagerly torch's mask from the same seed; compiled, weights dropped and scaled as
``F.dropout`` does."""

from __future__ import annotations

import numpy as np

import staged
import staged.nn.functional as F
from tests.checks import assert_close, both


def test_dropout_is_torchs_eagerly_and_dropout_compiled():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    v = np.broadcast_to(np.eye(3), (2, 3, 3)).copy()  # the output is the attention weights

    def run(lib):
        lib.manual_seed(7)
        qt, kt = (lib.tensor(a, requires_grad=True) for a in (q, k))
        out = lib.nn.functional.scaled_dot_product_attention(
            qt, kt, lib.tensor(v), dropout_p=0.5, is_causal=True
        )
        out.sum().backward()
        return out, qt.grad, kt.grad

    for ours, theirs in zip(*both(run)):
        assert_close(ours, theirs)
    weights = F.scaled_dot_product_attention(*map(staged.tensor, (q, k, v)), is_causal=True)
    out = staged.compile(
        lambda *a: F.scaled_dot_product_attention(*a, dropout_p=0.5, is_causal=True)
    )(*map(staged.tensor, (q, k, v))).numpy()
    w = weights.numpy()
    assert ((out == 0) | np.isclose(out, 2 * w)).all() and (out[w > 0] == 0).any()
