"""Memory of one forward + backward of the transformer of models/ (TinyDecoder), eager,
with and without ``staged.utils.checkpoint`` around each block:

- **saved**: bytes of the activations held for backward when the forward ends (the
  distinct arrays behind the tensors saved outside any checkpoint, counted by an outer
  ``saved_tensors_hooks``; parameters excluded);
- **peak**: tracemalloc's peak of NumPy allocations over forward and backward, less
  what was allocated before (parameters, the batch);
- **ms**: wall time of forward + backward (best of 3).

With ``--compiled``, the same for the compiled training step (forward + backward), each
configuration in a process of its own on IREE's ``local-sync`` device: **peak** is the
IREE allocator's peak over one step (the transient buffers of its memory plan and its
results), less the parameters, buffers and batch; **ms** the step's time (one thread).
``local-task`` serves the transient buffers from a pool its allocator statistics do not
count (IREE issue #24854), ``local-sync`` allocates them from the device allocator.

    python bench/checkpoint_memory.py [--batch 32] [--block 64] [--d 128] [--layers 2 4 8]
                                      [--compiled]
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
import staged  # noqa: E402
from models.transformer import TinyDecoder, lm_loss  # noqa: E402
from staged.autograd.graph import saved_tensors_hooks  # noqa: E402
from staged.runtime import device  # noqa: E402
from staged.utils.checkpoint import checkpoint  # noqa: E402

VOCAB = 64
TABLE = (
    "| blocks | checkpoint | saved MiB | peak MiB | ms fwd+bwd |\n"
    "| ---: | :---: | ---: | ---: | ---: |"
)


def forward(model, idx, ckpt: bool):
    """TinyDecoder.forward, each block under ``checkpoint`` when ``ckpt``."""
    t = idx.shape[1]
    x = model.tok(idx) + model.pos(model.positions[:t])
    for block in model.blocks:
        mask = model.mask[:t, :t]
        x = checkpoint(block, x, mask, use_reentrant=False) if ckpt else block(x, mask)
    return model.head(model.ln(x))


def _root(t) -> np.ndarray:
    a = np.asarray(t.detach())
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def saved_bytes(model, idx, target, ckpt: bool) -> int:
    params = {id(_root(p)) for p in model.parameters()}
    held = {}

    def pack(t):
        a = _root(t)
        if id(a) not in params:
            held[id(a)] = a
        return t

    with saved_tensors_hooks(pack, lambda t: t):
        loss = lm_loss(forward(model, idx, ckpt), target)
    del loss
    return sum(a.nbytes for a in held.values())


def peak_bytes(model, idx, target, ckpt: bool) -> int:
    gc.collect()  # no garbage of the last run freed inside this one
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    lm_loss(forward(model, idx, ckpt), target).backward()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    model.zero_grad(set_to_none=True)
    return peak


def ms(model, idx, target, ckpt: bool) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        lm_loss(forward(model, idx, ckpt), target).backward()
        best = min(best, time.perf_counter() - t0)
        model.zero_grad(set_to_none=True)
    return best * 1e3


def compiled(model, idx, target, ckpt: bool) -> tuple:
    """(peak bytes, ms) of the compiled training step, run in this process on a fresh
    ``local-sync`` device without the caching allocator: the peak is the IREE allocator's
    over the first call, less the parameters, buffers and batch it uploads."""
    device.ALLOCATORS.pop("local-sync", None)  # exact statistics: no blocks kept for reuse

    def step(idx, target):
        loss = lm_loss(forward(model, idx, ckpt), target)
        loss.backward()
        return loss

    run = staged.compile(step, device="local-sync")
    run(idx, target).item()
    inputs = sum(
        np.asarray(t.detach()).nbytes for t in (*model.parameters(), *model.buffers(), idx, target)
    )
    peak = device.device("llvm-cpu", "local-sync").hal.allocator.statistics["device_bytes_peak"]
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        run(idx, target).item()
        best = min(best, time.perf_counter() - t0)
    return peak - inputs, best * 1e3


def setup(a, layers: int) -> tuple:
    """(model, idx, target) of ``layers`` blocks, seeded."""
    staged.manual_seed(0)
    model = TinyDecoder(VOCAB, block=a.block, d=a.d, heads=a.heads, layers=layers)
    idx = staged.randint(0, VOCAB, (a.batch, a.block))
    return model, idx, staged.randint(0, VOCAB, (a.batch, a.block))


def compiled_row(argv, layers: int, ckpt: bool) -> tuple:
    """``compiled`` in a process of its own (a fresh device, fresh allocator statistics)."""
    out = subprocess.run(
        [sys.executable, __file__, *argv, "--child", str(layers), str(int(ckpt))],
        capture_output=True,
        text=True,
        check=True,
    )
    peak, ms = out.stdout.split()
    return float(peak), float(ms)


def row(layers: int, ckpt: bool, saved, peak: float, took: float) -> None:
    """Print one table row (``saved`` None: not measured, "-")."""
    held = "-" if saved is None else f"{saved / 2**20:.1f}"
    print(f"| {layers} | {'yes' if ckpt else 'no'} | {held} | {peak / 2**20:.1f} | {took:.0f} |")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--compiled", action="store_true")
    p.add_argument("--child", type=int, nargs=2, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(*compiled(*setup(a, a.child[0]), bool(a.child[1])))
        return 0
    header = (
        f"TinyDecoder d={a.d}, {a.heads} heads, batch {a.batch} x {a.block} characters, "
        f"vocabulary {VOCAB}, float32"
    )
    print(f"{header}, eager\n\n{TABLE}")
    for layers in a.layers:
        run = setup(a, layers)
        for ckpt in (False, True):
            row(layers, ckpt, saved_bytes(*run, ckpt), peak_bytes(*run, ckpt), ms(*run, ckpt))
    if a.compiled:
        print(f"\n{header}, compiled training step (llvm-cpu, local-sync)\n\n{TABLE}")
        for layers in a.layers:
            for ckpt in (False, True):
                row(layers, ckpt, None, *compiled_row(argv, layers, ckpt))
    return 0


if __name__ == "__main__":
    sys.exit(main())
