"""µs per call spent checking a compiled step's guards (issue 20): before each call a
``staged.compile``d step checks that what its trace read from Python still holds (every
submodule's attributes, training flag, parameters and hooks, globals, the optimizer's
param_groups, each state tensor's shape, dtype, grad and hooks) and only then runs the
compiled module. Nothing changes between the timed calls: this is the common case, the
cost every call pays.

    python bench/guards.py [--rounds 7] [--blocks 12] [--profile]

Steps: an MLP 784-256-256-10 (ReLU, cross-entropy, SGD), and a transformer of ``--blocks``
pre-norm blocks (LayerNorm, 4-head attention, GELU MLP, width 32, a ``scale`` attribute
read per block) with AdamW. Each row: the guards the trace recorded, the state tensors
checked, the median over rounds of µs per guard check, and of µs per whole compiled call
(guards, binding, IREE's invoke, ``.item()``) for comparison. The check is timed in CPU
time of the calling thread (``time.thread_time``), the whole call in wall time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from bench.common import environment  # noqa: E402
import staged  # noqa: E402
import staged.nn.functional as F  # noqa: E402
from staged import nn, optim  # noqa: E402


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.scale = 1.0

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0] * self.scale
        return x + self.mlp(self.ln2(x))


def mlp_step():
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))  # fmt: skip
    opt = optim.SGD(model.parameters(), lr=0.01)

    @staged.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step, (staged.randn(32, 784), staged.randint(0, 10, (32,)))


def blocks_step(n: int):
    model = nn.Sequential(*[Block(32) for _ in range(n)], nn.Linear(32, 10))
    opt = optim.AdamW(model.parameters(), lr=1e-3)

    @staged.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x).mean(1), y)
        loss.backward()
        opt.step()
        return loss

    return step, (staged.randn(4, 8, 32), staged.tensor([0, 1, 2, 3]))


def per_call_us(f, rounds: int, clock=time.perf_counter, block_s: float = 0.1) -> float:
    """Median over rounds of µs per call of ``f()`` by ``clock``, in blocks of about
    ``block_s``."""
    t0 = clock()
    f()
    n = max(10, int(block_s / max(clock() - t0, 1e-7)))
    times = []
    for _ in range(rounds):
        t0 = clock()
        for _ in range(n):
            f()
        times.append((clock() - t0) / n * 1e6)
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--blocks", type=int, default=12)
    p.add_argument("--profile", action="store_true", help="profile the transformer's check")
    a = p.parse_args(argv)
    rows = []
    for name, (step, args) in (
        ("MLP 784-256-256-10, SGD", mlp_step()),
        (f"transformer, {a.blocks} blocks, AdamW", blocks_step(a.blocks)),
    ):
        for _ in range(3):  # trace (one-shot first step: AdamW makes its state), compile
            step(*args).item()
        entry = step._last
        assert step.traces <= 2 and entry.guard_failure() is None, step.last_retrace_reason
        if a.profile and name.startswith("transformer"):
            pr = cProfile.Profile()
            pr.runcall(lambda check=entry.guard_failure: [check() for _ in range(500)])
            pstats.Stats(pr).sort_stats("tottime").print_stats(15)
        # the check is Python on this thread: its CPU time, steady on a loaded machine
        guards = per_call_us(entry.guard_failure, a.rounds, time.thread_time)
        call = per_call_us(lambda: step(*args).item(), a.rounds)  # noqa: B023
        rows.append((name, len(entry.captured.guards), len(entry._guards), guards, call))
    print("# guard checks per compiled call, µs (nothing changed)\n")
    print(environment(a.rounds, "-").rsplit("\n", 1)[0] + "\n")
    print("| step | guards | state tensors | guard check µs/call | whole call µs |")
    print("|---|---:|---:|---:|---:|")
    for name, n, s, g, c in rows:
        print(f"| {name} | {n} | {s} | {g:.1f} | {c:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
