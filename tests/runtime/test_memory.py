"""What a compiled step keeps in memory: an upload no later call repeats skips IREE's
caching allocator (Note [caching allocator] in staged/runtime/device.py), so the state a
step writes is not kept twice once its first call has replaced it (Note [state uploads]
in staged/runtime/compiled.py), and a call's buffers go once it is seen to finish."""

from __future__ import annotations

import sys
import weakref

import numpy as np
import pytest
import torch

import staged
from staged.runtime.device import Device, device

ALLOCATOR = device().hal.allocator
pytestmark = pytest.mark.skipif(
    not ALLOCATOR.has_statistics, reason="this IREE runtime keeps no allocator statistics"
)


def _live(allocator=ALLOCATOR) -> int:
    """Bytes a device's underlying allocator holds: live buffers and cached ones."""
    s = allocator.statistics
    return s["device_bytes_allocated"] - s["device_bytes_freed"]


def test_a_repeated_upload_reuses_a_cached_buffer_and_one_made_once_is_freed():
    dev = Device()  # its own allocator: the shared one's cache holds what other tests left
    a = np.arange(1 << 16, dtype=np.float32)
    dev.upload(a)  # freed at once: the cache holds a buffer of this size now
    before = _live(dev.hal.allocator)
    v = dev.upload(a)
    assert _live(dev.hal.allocator) == before  # the cached buffer, reused
    w = dev.upload(a, once=True)
    assert _live(dev.hal.allocator) >= before + a.nbytes  # a buffer of its own
    np.testing.assert_array_equal(np.asarray(w), a)
    del w
    assert _live(dev.hal.allocator) == before  # returned to the system, not cached
    np.testing.assert_array_equal(np.asarray(v), a)
    del v
    assert _live(dev.hal.allocator) == before  # cached again


def _models():
    staged.manual_seed(0)
    m = staged.nn.Linear(256, 128)  # 128 KB of weights, a batch of 2 KB
    ref = torch.nn.Linear(256, 128)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(m.weight.detach().numpy()))
        ref.bias.copy_(torch.tensor(m.bias.detach().numpy()))
    return m, ref


def test_written_state_is_not_kept_after_the_call_that_replaced_it():
    m, ref = _models()
    opt = staged.optim.SGD(m.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    x = np.random.default_rng(0).standard_normal((2, 256)).astype(np.float32)

    def step(x):
        opt.zero_grad()
        loss = m(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    compiled = staged.compile(step)
    before = _live()
    for _ in range(3):
        loss = compiled(staged.tensor(x))
        ref_opt.zero_grad()
        ref_loss = ref(torch.tensor(x)).pow(2).mean()
        ref_loss.backward()
        ref_opt.step()
        np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol=1e-5)
    # what stays with the device's allocator is the cached batch upload, not the 128 KB
    # of parameters the first call uploaded
    params = sum(p.numel() * 4 for p in m.parameters())
    assert _live() - before < params
    for p, q in zip(m.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_read_releases_the_state_a_finished_call_replaced():
    """A call keeps the state it replaced until it is seen to finish (Note [failed
    steps]): a read sees that, not only the next call of its module, which never comes
    for a step traced again."""
    m, _ = _models()
    opt = staged.optim.SGD(m.parameters(), lr=0.1)
    x = staged.tensor(np.ones((2, 256), np.float32))

    def step(x):
        opt.zero_grad()
        loss = m(x).sum()
        loss.backward()
        opt.step()
        return loss

    compiled = staged.compile(step)
    compiled(x)  # gives the .grad: it runs on NumPy (Note [deferred compiles])
    host = weakref.ref(m.weight._payload)
    compiled(x)
    # llvm-cpu: the first compiled call's upload replaced the host array at once, so the
    # state is not held twice (Note [state uploads] in runtime/compiled.py)
    assert host() is None
    replaced = m.weight._payload  # the state the next call replaces (a DeviceValue)
    loss = compiled(x)
    module = compiled._last.module
    assert m.weight._payload is not replaced
    # (getrefcount counts ``replaced`` and its own argument: 2 is held by nothing else)
    assert sys.getrefcount(replaced) > 2  # held: what a failure of the call puts back
    loss.item()
    assert sys.getrefcount(replaced) == 2 and module._in_flight == []
