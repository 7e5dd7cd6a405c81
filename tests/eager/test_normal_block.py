"""The float32 normal block's fused kernels (Note [fused kernels] in
staged/eager/random/avx_mathfun.py): the same bits as the plain transcription of
avx_mathfun's ``log`` and ``sincos`` (checked once for every input; here every 251st and the
delicate ones), and torch's normals for tensors of several chunks, in several threads."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch

import staged
from staged.eager.random import avx_mathfun, normal

F32 = np.float32
# counts w = 2**24 (1 - u) whose log polynomial rounds an exact float32 tie away from zero
# where fmaf rounds it to even (Note [rounding by the bits]): the results must still agree
TIES = [8519680, 8545240, 8960096, 9061161, 9076498, 10092544, 10344339, 10938929]
TIES += [11064928, 11069568, 11218156, 11271728, 11415861, 11624448, 11735592, 12058624]
TIES += [12172288, 12582912, 12583424, 12777779, 14195328, 14428133, 14647296, 14680064]
TIES += [15073280, 15433728, 15626326, 16224768, 16637952]
# counts k whose cosine or sine polynomial times z is such a tie (the same Note)
TRIG_TIES = [1498281, 1568862, 2696023, 3685028, 5284428, 5692587, 5763166, 6575761]
TRIG_TIES += [6819746, 8235313, 8870667, 9886889, 15899079, 16674753]


def same_bits(a, b) -> bool:
    return a.dtype == b.dtype and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def counts() -> np.ndarray:
    """Every 251st count of a uniform, the ends and the ties' counts."""
    ends = [1, 2**23, 2**24 - 1]
    k = np.concatenate([2**24 - np.array(TIES), TRIG_TIES, ends, range(0, 2**24, 251)])
    return k[: len(k) // 8 * 8].astype(np.int32)  # whole lane groups for Work


def test_log_of_count_is_the_transcriptions():
    k = counts()
    work = avx_mathfun.Work(len(k) // 8)
    w = (F32(2**24) - k.astype(F32)).astype(F32)
    expected = avx_mathfun.log(F32(1) - k.astype(F32) * F32(2**-24))
    assert same_bits(avx_mathfun.log_of_count(w, work), expected)


def test_work_arrays_start_on_cache_lines():
    for shape, dtype in (((4, 24), np.float64), ((7, 8), F32), ((3,), np.int32)):
        a = avx_mathfun.aligned(shape, dtype)
        assert a.ctypes.data % 64 == 0 and a.shape == shape and a.dtype == dtype


def test_sincos_of_count_is_the_transcriptions():
    k = counts()
    work = avx_mathfun.Work(len(k) // 8)
    sin, cos = avx_mathfun.sincos(F32(2 * math.pi) * (k.astype(F32) * F32(2**-24)))
    got, flip = avx_mathfun.sincos_of_count(k.astype(F32), work)
    got = (got.view(np.int32) ^ flip).view(F32)
    assert same_bits(got[0], cos) and same_bits(got[1], sin)


def draws(ns, n, dtype):
    return [
        ns.randn(n, dtype=dtype),
        ns.empty(n, dtype=dtype).normal_(-0.5, 3.0),
        ns.randn(17, dtype=dtype),
        ns.rand(3, dtype=dtype),
    ]


def as_bits(t):
    return t.detach().float().numpy().view(np.uint32)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_several_chunks_match_torch(dtype):
    """Two whole chunks, a part of one, and the redrawn last 16 elements."""
    n = 16 * (2 * normal.CHUNK + 3) + 5
    for seed in (0, 2**32 + 7):
        ours, theirs = [], []
        for ns, out in ((staged, ours), (torch, theirs)):
            ns.manual_seed(seed)
            out += draws(ns, n, getattr(ns, dtype))
        for a, b in zip(ours, theirs, strict=True):
            assert np.array_equal(as_bits(a), as_bits(b)), (dtype, seed)


def test_threads_keep_their_own_work_arrays():
    n = 16 * normal.CHUNK + 32
    expected = {}
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        expected[seed] = torch.randn(n, generator=g).numpy()
    got = {}

    def run(seed):
        g = staged.Generator().manual_seed(seed)
        for _ in range(3):
            got[seed] = staged.randn(n, generator=g).numpy()
            g.manual_seed(seed)

    threads = [threading.Thread(target=run, args=(s,)) for s in expected]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for seed, values in expected.items():
        assert same_bits(got[seed], values), seed


@pytest.mark.parametrize("mean", [0.0, -0.0, 2.0])
def test_zero_radius_and_zero_angle_match_torch(mean):
    """Seeds whose first 256 blocks hold a uniform 0: in a lane of u1 (r = 0, whose sign
    the affine step sets: Note [fmaf(x, 1, 0)] in normal.py) and of u2 (a sine of +0)."""
    for seed in (76519, 2313):
        out = []
        for ns in (staged, torch):
            ns.manual_seed(seed)
            out.append(ns.empty(16 * 256).normal_(mean, 1.0).numpy())
        assert same_bits(*out), seed
