"""The heap's free memory handed back after a build (Note [heap after lowering] in
staged/_malloc.py)."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from staged import _malloc
from staged.runtime import compiled


def _resident_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise KeyError("VmRSS")


@pytest.mark.skipif(_malloc._LIBC is None, reason="the C library has no malloc_trim (glibc)")
def test_trim_returns_the_heaps_free_memory():
    blocks = [bytearray(2000) for _ in range(20_000)]  # 40 MB of small heap chunks
    top = bytearray(2000)  # above them: their space is free, not at the heap's end
    del blocks
    before = _resident_mb()
    _malloc.trim()
    assert before - _resident_mb() > 20, "the 40 MB freed below the heap's top stayed resident"
    del top


def test_every_build_trims_the_heap_before_loading(monkeypatch):
    calls = []
    monkeypatch.setattr(compiled, "trim", lambda: calls.append("trim"))
    step = staged.compile(lambda x: (x * 2).sum())
    assert step(staged.tensor(np.ones(3, np.float32))).item() == 6.0
    assert calls == ["trim"]
