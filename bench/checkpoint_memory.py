"""Memory of one forward + backward of the transformer of models/ (TinyDecoder), eager,
with and without ``staged.utils.checkpoint`` around each block:

- **saved**: bytes of the activations held for backward when the forward ends (the
  distinct arrays behind the tensors saved outside any checkpoint, counted by an outer
  ``saved_tensors_hooks``; parameters excluded);
- **peak**: tracemalloc's peak of NumPy allocations over forward and backward, less
  what was allocated before (parameters, the batch);
- **ms**: wall time of forward + backward (best of 3).

With ``--compiled``, it also captures the training step of the first model both ways and
prints the size of the graph and the number of dispatches IREE makes of it (compiled to
its flow phase): whether the recompute survives IREE's common-subexpression elimination.

    python bench/checkpoint_memory.py [--batch 32] [--block 64] [--d 128] [--layers 2 4 8]
                                      [--compiled]
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
from iree.compiler.tools import compile_str

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
import staged  # noqa: E402
from models.transformer import TinyDecoder, lm_loss  # noqa: E402
from staged.autograd.graph import saved_tensors_hooks  # noqa: E402
from staged.runtime.compiler import flags  # noqa: E402
from staged.utils.checkpoint import checkpoint  # noqa: E402


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


def compiled_counts(model, idx, target, ckpt: bool) -> tuple:
    """(ops in the captured step, dispatches in IREE's flow-phase module)."""

    def step(idx, target):
        loss = lm_loss(forward(model, idx, ckpt), target)
        loss.backward()
        return loss

    traced = staged.capture(step, idx, target)
    flow = compile_str(
        traced.to_mlir(),
        target_backends=["llvm-cpu"],
        extra_args=flags("llvm-cpu") + ["--compile-to=flow"],
    )
    model.zero_grad(set_to_none=True)
    return len(traced.graph.ops), len(re.findall(r"flow\.dispatch @", flow.decode()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--compiled", action="store_true")
    a = p.parse_args(argv)
    vocab = 64
    print(
        f"TinyDecoder d={a.d}, {a.heads} heads, batch {a.batch} x {a.block} characters, "
        f"vocabulary {vocab}, float32, eager\n"
    )
    print("| blocks | checkpoint | saved MiB | peak MiB | ms fwd+bwd |")
    print("| ---: | :---: | ---: | ---: | ---: |")
    mib = 2**20
    models = []
    for layers in a.layers:
        staged.manual_seed(0)
        model = TinyDecoder(vocab, block=a.block, d=a.d, heads=a.heads, layers=layers)
        idx = staged.randint(0, vocab, (a.batch, a.block))
        target = staged.randint(0, vocab, (a.batch, a.block))
        models.append((layers, model, idx, target))
        for ckpt in (False, True):
            row = (
                saved_bytes(model, idx, target, ckpt) / mib,
                peak_bytes(model, idx, target, ckpt) / mib,
                ms(model, idx, target, ckpt),
            )
            print(
                f"| {layers} | {'yes' if ckpt else 'no'} | {row[0]:.1f} | {row[1]:.1f} | "
                f"{row[2]:.0f} |"
            )
    if a.compiled:
        layers, *run = models[0]
        print(f"\ncompiled training step, {layers} blocks (llvm-cpu)\n")
        print("| checkpoint | captured ops | IREE dispatches |\n| :---: | ---: | ---: |")
        for ckpt in (False, True):
            print("| {} | {} | {} |".format("yes" if ckpt else "no", *compiled_counts(*run, ckpt)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
