"""Eager per-op overhead: forward + backward of ``(x * w + b).relu().sum()`` on tiny
tensors (8 floats), staged eager vs torch eager, timed interleaved in one run.

Each round times a block of steps of each implementation in turn; the figure is the
median over rounds of the per-round ratio to torch (see ../shared/notes/BENCH.md).
``--ops`` times single ops instead (``OPS``, on a 2 x size/2 tensor, without and with
``requires_grad``; the in-place ones, ``INPLACE``, without), the same way.

    .venv/bin/python bench/op_overhead.py [--rounds 15] [--size 8] [--profile] [--ops] [--cpu]

cProfile sees no function of the modules compiled by Cython (Note [native modules] in
staged/_native.py): ``STAGED_NATIVE=0`` runs them as Python for ``--profile``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import numpy as np
import torch

import staged


def make_staged(x, w, b):
    xs = staged.tensor(x, requires_grad=True)
    ws = staged.tensor(w, requires_grad=True)
    bs = staged.tensor(b, requires_grad=True)

    def step():
        (xs * ws + bs).relu().sum().backward()
        xs.grad = ws.grad = bs.grad = None

    return step, (xs, ws, bs)


def make_torch(x, w, b):
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))

    def step():
        (xt * wt + bt).relu().sum().backward()
        xt.grad = wt.grad = bt.grad = None

    return step, (xt, wt, bt)


IMPLS = {"staged eager": make_staged, "torch eager": make_torch}


def _grads(make, x, w, b):
    """Gradients after one step (no reset), to check that both compute the same."""
    step, ts = make(x, w, b)
    (ts[0] * ts[1] + ts[2]).relu().sum().backward()
    return [np.asarray(t.grad) for t in ts]


CLOCK = [time.perf_counter]  # --cpu: time.process_time


def block_time(step, n) -> float:
    clock = CLOCK[0]
    t0 = clock()
    for _ in range(n):
        step()
    return (clock() - t0) / n


def bench(size=8, rounds=15, block_s=0.1):
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(size).astype(np.float32) for _ in range(3))
    ref = _grads(make_torch, x, w, b)
    for got, want in zip(_grads(make_staged, x, w, b), ref):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    return interleaved({name: make(x, w, b)[0] for name, make in IMPLS.items()}, rounds, block_s)


def interleaved(steps, rounds, block_s):
    """``{name: [seconds per step, per round]}``, blocks of each step timed in turn."""
    counts = {}
    for name, step in steps.items():  # warm up and calibrate a block to ~block_s
        t = block_time(step, 200)
        counts[name] = max(50, int(block_s / t))
    times = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            times[name].append(block_time(step, counts[name]))
    return times


def report(times):
    ref = times["torch eager"]
    print("| implementation | µs per step (median) | ratio to torch eager (median of rounds) |")
    print("| --- | ---: | ---: |")
    for name, ts in times.items():
        ratio = statistics.median(t / r for t, r in zip(ts, ref))
        print(f"| {name} | {statistics.median(ts) * 1e6:.1f} | {ratio:.2f} |")


# single ops on a (2, size / 2) float32 tensor ``a`` (and ``b``, not requiring grad)
OPS = {
    "a + b": lambda a, b: a + b,
    "a + 1": lambda a, b: a + 1,
    "a * 2": lambda a, b: a * 2,
    "a.relu()": lambda a, b: a.relu(),
    "a.exp()": lambda a, b: a.exp(),
    "a.sum()": lambda a, b: a.sum(),
    "a.mean()": lambda a, b: a.mean(),
    "a[0]": lambda a, b: a[0],
    "a[:, 1:]": lambda a, b: a[:, 1:],
    "a.view(-1)": lambda a, b: a.view(-1),
    "a.view(2, -1)": lambda a, b: a.view(2, -1),
    "a @ b.T": lambda a, b: a @ b.T,
    "a.add_(b)": lambda a, b: a.add_(b),
    "a.zero_()": lambda a, b: a.zero_(),
}
INPLACE = {"a.add_(b)", "a.zero_()"}  # a leaf that requires grad refuses them
LIBS = {"staged": staged, "torch": torch}


def bench_ops(size=8, rounds=15, block_s=0.02):
    """``{(op, requires_grad): {library: [seconds per call, per round]}}``."""
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((2, size // 2)).astype(np.float32) for _ in range(2))
    out = {}
    for grad in (False, True):
        for name, fn in OPS.items():
            if grad and name in INPLACE:
                continue
            steps = {}
            for lib_name, lib in LIBS.items():
                a, b = lib.tensor(x, requires_grad=grad), lib.tensor(y)
                steps[lib_name] = lambda fn=fn, a=a, b=b: fn(a, b)
            out[name, grad] = interleaved(steps, rounds, block_s)
    return out


def report_ops(results):
    print("| op | requires_grad | staged µs | torch µs | ratio to torch (median of rounds) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for (name, grad), times in results.items():
        s, t = times["staged"], times["torch"]
        ratio = statistics.median(a / b for a, b in zip(s, t))
        print(
            f"| `{name}` | {grad} | {statistics.median(s) * 1e6:.2f} | "
            f"{statistics.median(t) * 1e6:.2f} | {ratio:.2f} |"
        )


def profile(size=8, n=20000):
    rng = np.random.default_rng(0)
    step, _ = make_staged(*(rng.standard_normal(size).astype(np.float32) for _ in range(3)))
    prof = cProfile.Profile()
    prof.runcall(block_time, step, n)
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--size", type=int, default=8)
    p.add_argument("--profile", action="store_true", help="cProfile the staged step instead")
    p.add_argument("--ops", action="store_true", help="time single ops (OPS) instead")
    p.add_argument(
        "--cpu",
        action="store_true",
        help="time the process's CPU time, not wall time (a machine shared with other jobs)",
    )
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.cpu:
        CLOCK[0] = time.process_time
    if a.profile:
        profile(a.size)
        return
    if a.ops:
        print(
            f"single ops on 2 x {a.size // 2} float32s, {a.rounds} rounds, "
            f"{'CPU' if a.cpu else 'wall'} time, {time.strftime('%Y-%m-%d')}"
        )
        report_ops(bench_ops(a.size, a.rounds))
        return
    print(
        f"(x*w + b).relu().sum() forward+backward, {a.size} float32s, {a.rounds} rounds, "
        f"{'CPU' if a.cpu else 'wall'} time, {time.strftime('%Y-%m-%d')}"
    )
    report(bench(a.size, a.rounds))


if __name__ == "__main__":
    main()
