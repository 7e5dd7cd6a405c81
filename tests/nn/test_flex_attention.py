"""``nn.attention.flex_attention`` against torch 2.13's: outputs, lse and gradients (query,
key, value and a tensor the ``score_mod`` closes over) for the usual masks and score mods,
in float32 and float64, with lengths that are not multiples of the block size; the
BlockMask's fields, its dense form and drawing; errors; and a compiled step.

torch refuses a backward on CPU only in its front end (``_validate_device``: its CPU kernel
has none); without that check it runs its math reference (``sdpa_dense``) forward and
backward, the oracle here. Its eager reference applies ``mask_mod`` alone, where its
kernels (GPU, ``torch.compile``) also mask what lies outside the mask's blocks and skip
``mask_mod`` in full blocks, as staged does: blocks that disagree with the ``mask_mod`` are
checked against torch with the ``mask_mod`` those kernels amount to."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.attention.flex_attention as theirs
from torch._higher_order_ops.flex_attention import math_attention

import staged
import staged.nn.attention.flex_attention as ours
from tests.checks import assert_close, assert_raises_like_torch, raises_like_torch, to_numpy

FA = {staged: ours, torch: theirs}


@pytest.fixture(autouse=True)
def _torch_backward_on_cpu(monkeypatch):
    monkeypatch.setattr(theirs, "_validate_device", lambda *args: None)
    with warnings.catch_warnings():  # torch's "called without torch.compile()"
        warnings.simplefilter("ignore", UserWarning)
        yield


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _sliding(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < 5)


def _every_third_row_blind(b, h, q_idx, kv_idx):
    return (q_idx % 3 != 0) & (q_idx >= kv_idx)  # those rows attend to nothing


def _document(doc):
    """Causal attention within each document; ``doc`` is a captured tensor of ids."""

    def mask_mod(b, h, q_idx, kv_idx):
        return (doc[q_idx] == doc[kv_idx]) & (q_idx >= kv_idx)

    return mask_mod


def _alibi(bias):
    """A per-head slope on the distance plus a captured per-query bias (it gets a grad)."""

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + bias[q_idx] - (h + 1) * 0.25 * (q_idx - kv_idx).abs()

    return score_mod


def _run(lib, arrays, mask_mod=None, score_mod=None, block=128, gqa=False, **kw):
    """Output, lse and the gradients of a loss of both (query, key, value, bias)."""
    q, k, v, bias = (lib.tensor(a, requires_grad=True) for a in arrays)
    fa = FA[lib]
    block_mask = None
    if mask_mod is not None:
        mm = mask_mod(lib) if mask_mod is _document_mask else mask_mod
        block_mask = fa.create_block_mask(
            mm, q.shape[0], q.shape[1], q.shape[2], k.shape[2], BLOCK_SIZE=block
        )
    out, aux = fa.flex_attention(
        q,
        k,
        v,
        score_mod=_alibi(bias) if score_mod else None,
        block_mask=block_mask,
        enable_gqa=gqa,
        return_aux=fa.AuxRequest(lse=True),
        **kw,
    )
    finite = aux.lse.masked_fill(aux.lse.isneginf(), 0)
    ((out * out).sum() + (finite * finite).sum()).backward()
    return out, aux.lse, q.grad, k.grad, v.grad, bias.grad


_DOC_IDS = np.repeat(np.arange(4), [6, 1, 9, 7])


def _document_mask(lib):
    return _document(lib.tensor(_DOC_IDS))


CASES = {
    # name: (mask_mod, score_mod, BLOCK_SIZE, (B, Hq, Hkv, L, S))
    "full": (None, False, 128, (2, 2, 2, 11, 7)),
    "causal": (_causal, False, 128, (2, 2, 2, 23, 23)),
    "causal-blocks": (_causal, False, 8, (1, 2, 2, 23, 23)),
    "sliding": (_sliding, True, (4, 8), (2, 1, 1, 19, 19)),
    "document": (_document_mask, True, 4, (1, 2, 2, 23, 23)),
    "alibi": (None, True, 128, (2, 3, 3, 9, 14)),
    "gqa": (_causal, True, 8, (2, 4, 2, 17, 17)),
    "blind-rows": (_every_third_row_blind, True, 4, (1, 2, 2, 13, 13)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_torch(case, dtype):
    mask_mod, score_mod, block, (B, Hq, Hkv, L, S) = CASES[case]
    rng = np.random.default_rng(len(case))
    arrays = [
        rng.standard_normal(shape).astype(dtype)
        for shape in ((B, Hq, L, 8), (B, Hkv, S, 8), (B, Hkv, S, 5), (L,))
    ]
    kw = dict(mask_mod=mask_mod, score_mod=score_mod, block=block, gqa=Hq != Hkv)
    got, want = _run(staged, arrays, **kw), _run(torch, arrays, **kw)
    tol = 1e-12 if dtype == "float64" else 2e-5
    for name, g, w in zip(("out", "lse", "dq", "dk", "dv", "dbias"), got, want):
        if w is None:
            assert g is None, name
            continue
        assert_close(g, w, rtol=tol, atol=tol)
    lse = to_numpy(got[1])
    assert (np.isneginf(lse) == np.isneginf(to_numpy(want[1]))).all()
    if case == "blind-rows":  # a row that attends to nothing: output 0, lse -inf
        assert np.isneginf(lse[:, :, ::3]).all() and not to_numpy(got[0])[:, :, ::3].any()


def test_scale_bkv_broadcast_and_deprecated_return_lse():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s) for s in ((3, 2, 6, 4), (1, 2, 9, 4), (1, 2, 9, 3)))
    outs = {}
    for lib, fa in FA.items():
        bm = fa.create_block_mask(_causal, 3, None, 6, 9, BLOCK_SIZE=4)
        args = [lib.tensor(a) for a in (q, k, v)]
        with pytest.warns(FutureWarning, match="return_lse is deprecated"):
            outs[lib] = fa.flex_attention(*args, block_mask=bm, scale=0.3, return_lse=True)
    for g, w in zip(outs[staged], outs[torch]):
        assert_close(g, w, rtol=1e-12, atol=1e-12)


def test_max_scores_as_torch_math_reference():
    """torch's CPU front end refuses ``max_scores``; its math reference computes them."""
    rng = np.random.default_rng(4)
    q, k, v, bias = (rng.standard_normal(s) for s in ((1, 2, 7, 4), (1, 2, 7, 4), (1, 2, 7, 4), 7))
    bm = ours.create_block_mask(_every_third_row_blind, 1, 2, 7, 7, BLOCK_SIZE=4)
    args = [staged.tensor(a) for a in (q, k, v)]
    out, aux = ours.flex_attention(
        *args, _alibi(staged.tensor(bias)), bm, return_aux=ours.AuxRequest(max_scores=True)
    )
    assert aux.lse is None
    tbm = theirs.create_block_mask(_every_third_row_blind, 1, 2, 7, 7, BLOCK_SIZE=4)
    want_out, _, want_max = math_attention(
        *(torch.tensor(a) for a in (q, k, v)),
        _alibi(torch.tensor(bias)),
        tbm.as_tuple(),
        0.5,
        {},
    )
    assert_close(aux.max_scores, want_max * math.log(2), rtol=1e-12, atol=1e-12)
    assert_close(out, want_out, rtol=1e-12, atol=1e-12)


def test_half_inputs_compute_in_float32():
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((1, 2, 10, 8)).astype(np.float32) for _ in range(3)]
    got, want = (
        FA[lib].flex_attention(
            *(lib.tensor(a, dtype=lib.float16) for a in arrays),
            return_aux=FA[lib].AuxRequest(lse=True),
        )
        for lib in (staged, torch)
    )
    assert_close(got[0], want[0], rtol=2e-3, atol=2e-3)
    assert_close(got[1].lse, want[1].lse, rtol=1e-5, atol=1e-5)  # float32, as torch's


_FIELDS = [
    "kv_num_blocks",
    "kv_indices",
    "full_kv_num_blocks",
    "full_kv_indices",
    "q_num_blocks",
    "q_indices",
    "full_q_num_blocks",
    "full_q_indices",
]


def _same_block_mask(got, want):
    for name in _FIELDS:
        g, w = getattr(got, name), getattr(want, name)
        assert (g is None) == (w is None), name
        if w is not None:
            assert_close(g, w, rtol=0, atol=0)
    assert got.BLOCK_SIZE == want.BLOCK_SIZE and got.seq_lengths == want.seq_lengths
    assert got.shape == want.shape and got.numel() == want.numel()
    assert got.sparsity() == pytest.approx(want.sparsity())
    assert_close(got.to_dense(), want.to_dense(), rtol=0, atol=0)
    assert str(got) == str(want)
    assert repr(got).replace("staged.Size", "torch.Size") == repr(want)


def _and_or(lib):
    fa = FA[lib]
    return fa.or_masks(fa.and_masks(_sliding, fa.noop_mask), lambda b, h, q, kv: kv == 0)


@pytest.mark.parametrize(
    "mask_mod, B, H, Q, KV, kw",
    [
        (_causal, None, None, 300, 300, {}),
        (_causal, 2, 1, 33, 45, {"BLOCK_SIZE": 8}),
        (_sliding, 1, 3, 40, 40, {"BLOCK_SIZE": (4, 8)}),
        (_every_third_row_blind, 2, 2, 21, 17, {"BLOCK_SIZE": 4, "separate_full_blocks": False}),
        (_document_mask, 1, 1, 23, 23, {"BLOCK_SIZE": 4}),
        (_and_or, 1, 2, 30, 30, {"BLOCK_SIZE": 4}),
    ],
)
def test_block_mask_as_torch(mask_mod, B, H, Q, KV, kw):
    made, dense = {}, {}
    for lib, fa in FA.items():
        mm = mask_mod(lib) if mask_mod in (_document_mask, _and_or) else mask_mod
        made[lib] = fa.create_block_mask(mm, B, H, Q, KV, **kw)
        dense[lib] = fa.create_mask(mm, B, H, Q, KV)
    assert_close(dense[staged], dense[torch], rtol=0, atol=0)
    _same_block_mask(made[staged], made[torch])
    grid = made[staged].to_string(grid_size=-1, limit=1)
    assert grid == made[torch].to_string(grid_size=-1, limit=1)


def test_block_mask_slice_adjust_and_from_kv_blocks_as_torch():
    bms = {
        lib: fa.create_block_mask(_sliding, 3, 2, 40, 36, BLOCK_SIZE=8) for lib, fa in FA.items()
    }
    _same_block_mask(bms[staged][1], bms[torch][1])
    _same_block_mask(bms[staged][-1, :, 1:3], bms[torch][-1, :, 1:3])
    _same_block_mask(bms[staged]._adjust(20, 17), bms[torch]._adjust(20, 17))
    rows = [[[[2, 0, 1], [1, 2, 0]]]]
    made = {
        lib: fa.BlockMask.from_kv_blocks(
            lib.tensor([[[1, 2]]], dtype=lib.int32),
            lib.tensor(rows, dtype=lib.int32),
            BLOCK_SIZE=(4, 2),
        )
        for lib, fa in FA.items()
    }
    _same_block_mask(made[staged], made[torch])
    assert len(made[staged].as_tuple()) == len(made[torch].as_tuple())


def test_create_mask_of_a_score_mod():
    """A ``score_mod`` given to create_mask masks where it makes a zero score -inf."""
    got = {}
    for lib, fa in FA.items():

        def above_to_minus_inf(score, b, h, q_idx, kv_idx, lib=lib):
            return lib.where(q_idx >= kv_idx, score, float("-inf"))

        got[lib] = fa.create_mask(above_to_minus_inf, 2, 1, 5, 7)
    assert_close(got[staged], got[torch], rtol=0, atol=0)


def test_positions_outside_blocks_are_masked_as_torch_kernels_mask_them():
    """Block (0, 0) and (1, 1) partial under a causal ``mask_mod``, block (0, 1) full: its
    positions are attended although ``mask_mod`` refuses them, block (1, 0)'s are not
    although it allows them (torch.compile's CPU kernel agrees to 5e-7 in float32)."""
    L, blk = 10, 5
    allowed = np.zeros((L, L), bool)
    allowed[:blk, :blk] = allowed[blk:, blk:] = np.tril(np.ones((blk, blk), bool))
    allowed[:blk, blk:] = True
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal((1, 1, L, 4)) for _ in range(3)]

    def i32(x):
        return staged.tensor(x, dtype=staged.int32)

    bm = ours.BlockMask.from_kv_blocks(
        i32([[[1, 1]]]),
        i32([[[[0, 1], [1, 0]]]]),
        i32([[[1, 0]]]),
        i32([[[[1, 0], [0, 1]]]]),
        BLOCK_SIZE=blk,
        mask_mod=_causal,
    )
    dense = torch.tensor(allowed)
    equivalent = theirs.create_block_mask(lambda b, h, q, kv: dense[q, kv], 1, 1, L, L)
    results = []
    for lib, block_mask in ((staged, bm), (torch, equivalent)):
        q, k, v = (lib.tensor(a, requires_grad=True) for a in arrays)
        out = FA[lib].flex_attention(q, k, v, block_mask=block_mask)
        (out * out).sum().backward()
        results.append((out, q.grad, k.grad, v.grad))
    for got, want in zip(*results):
        assert_close(got, want, rtol=1e-12, atol=1e-12)


def _qkv(lib):
    return lib.tensor(np.zeros((1, 2, 8, 4), np.float32))


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: FA[lib].create_block_mask(lambda b, h, q: q, 1, 1, 8, 8),
        lambda lib: FA[lib].create_mask(lambda b, h, q, kv, x, y: q, 1, 1, 8, 8),
        lambda lib: FA[lib].flex_attention(_qkv(lib), _qkv(lib)[:, :1], _qkv(lib)[:, :1]),
        lambda lib: FA[lib].flex_attention(
            _qkv(lib).expand(1, 3, 8, 4), _qkv(lib), _qkv(lib), enable_gqa=True
        ),
        lambda lib: FA[lib].flex_attention(_qkv(lib)[0], _qkv(lib)[0], _qkv(lib)[0]),
        lambda lib: FA[lib].flex_attention(_qkv(lib), _qkv(lib)[..., :3], _qkv(lib)),
        lambda lib: FA[lib].flex_attention(
            _qkv(lib),
            _qkv(lib),
            _qkv(lib),
            block_mask=FA[lib].create_block_mask(_causal, 1, 1, 16, 8),
        ),
        lambda lib: FA[lib].flex_attention(
            _qkv(lib),
            _qkv(lib),
            _qkv(lib),
            block_mask=FA[lib].create_block_mask(_causal, 1, 1, 4, 8),
        ),
        lambda lib: FA[lib].flex_attention(
            _qkv(lib),
            _qkv(lib),
            _qkv(lib),
            block_mask=FA[lib].create_block_mask(_causal, 1, 2, 8, 8)[:, 1],
        ),
        lambda lib: FA[lib].flex_attention(
            _qkv(lib),
            _qkv(lib),
            _qkv(lib),
            return_lse=True,
            return_aux=FA[lib].AuxRequest(lse=True),
        ),
        lambda lib: FA[lib].flex_attention(
            _qkv(lib), _qkv(lib), _qkv(lib), kernel_options={"BACKEND": "CUTE"}
        ),
        lambda lib: FA[lib].or_masks(_causal, 3),
    ],
)
def test_errors_as_torch(call):
    assert_raises_like_torch(call)


def test_create_block_mask_refuses_a_score_mod():
    raises_like_torch(
        lambda lib: FA[lib].create_block_mask(lambda s, b, h, q, kv: s, 1, 1, 8, 8),
        "create-block_mask requires a mask_mod function! Got <function",
    )


def test_compiled_step_equals_eager():
    """A causal block mask and a captured bias, forward and gradients, under staged.compile."""
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal((1, 2, 20, 8)).astype(np.float32) for _ in range(3)]
    arrays.append(rng.standard_normal(20).astype(np.float32))
    block_mask = ours.create_block_mask(_causal, None, None, 20, 20, BLOCK_SIZE=8)

    def step(q, k, v, bias):
        out = ours.flex_attention(q, k, v, score_mod=_alibi(bias), block_mask=block_mask)
        loss = (out * out).sum()
        return (loss, *staged.autograd.grad(loss, (q, k, v, bias)))

    def run(fn):
        return fn(*(staged.tensor(a, requires_grad=True) for a in arrays))

    for got, want in zip(run(staged.compile(step)), run(step)):
        assert_close(got, want, rtol=1e-5, atol=1e-5)
