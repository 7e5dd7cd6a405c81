"""torch's CPU random streams in NumPy (``staged/eager/random``) against torch itself, and
what drawing them on the host costs a compiled step (Note [host draws]).

Part 1 times, interleaved in one run, staged and torch (1 thread; torch's distribution
kernels are serial anyway) making the same numbers: float32 ``randn`` and ``rand`` of 1e6
values, ``uniform_(-1, 1)`` of 1e6, a dropout (p=0.5) of 1e6 float32, and
``nn.Linear(4096, 4096)``'s construction (kaiming_uniform_ then the bias); the values are
checked equal to torch's, bit for bit, first. Targets (issue 18): randn <= 3x torch, the
others <= 1.5x.

Part 2 times a compiled MLP step with dropout (784-256-256-10, dropout 0.5 after each
hidden layer, SGD, batch 32 and 256) drawing its masks on the host (``rng="host"``, the
default: torch's masks) and in the graph (``rng="counter"``), and the host draws alone.

    .venv/bin/python bench/rng.py [--rounds 10] [--skip-compiled]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

import staged

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from bench.common import environment, interleaved, quartiles, ratio_table

N = 1_000_000
TARGETS = {"randn": 3.0, "rand": 1.5, "uniform_": 1.5, "dropout": 1.5, "Linear(4096, 4096)": 1.5}


def workloads(lib):
    """name -> zero-argument function drawing with ``lib`` (staged or torch)."""
    x = lib.ones(N)
    return {
        "randn": lambda: lib.randn(N),
        "rand": lambda: lib.rand(N),
        "uniform_": lambda: x.uniform_(-1, 1),
        "dropout": lambda: lib.nn.functional.dropout(x, 0.5),
        "Linear(4096, 4096)": lambda: lib.nn.Linear(4096, 4096).weight,
    }


def check_equal() -> None:
    """Every workload gives torch's values, bit for bit, after the same seed."""
    ours, theirs = workloads(staged), workloads(torch)
    for name in ours:
        staged.manual_seed(3)
        torch.manual_seed(3)
        a, b = ours[name]().detach().numpy(), theirs[name]().detach().numpy()
        if not np.array_equal(a.view(np.uint8), b.view(np.uint8)):
            raise SystemExit(f"{name}: staged's values differ from torch's")


def generation(rounds: int) -> dict:
    ours, theirs = workloads(staged), workloads(torch)
    results = {}
    for name in ours:
        times = interleaved(
            {
                "staged": lambda f=ours[name]: (f(), 0.0)[1],
                "torch": lambda f=theirs[name]: (f(), 0.0)[1],
            },
            rounds,
            block_s=0.3,
            pause=0.2,
        )
        results[name] = times
    return results


def mlp_step(rng: str, batch: int, p=0.5):
    staged.manual_seed(0)
    nn = staged.nn
    model = nn.Sequential(
        nn.Linear(784, 256),
        nn.ReLU(),
        nn.Dropout(p),
        nn.Linear(256, 256),
        nn.ReLU(),
        nn.Dropout(p),
        nn.Linear(256, 10),
    )
    opt = staged.optim.SGD(model.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = staged.compile(step, rng=rng)
    rs = np.random.default_rng(0)
    x = staged.tensor(rs.standard_normal((batch, 784)).astype(np.float32))
    y = staged.tensor(rs.integers(0, 10, batch))
    for _ in range(3):
        compiled(x, y).item()
    return lambda: compiled(x, y), compiled


def host_draws_alone(compiled, repeat=200) -> float:
    """µs per call of the step's host draws (Program.run), best of 5 runs."""
    entry = compiled._last
    rng, shapes = entry.captured.rng, entry._draw_shapes(None)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeat):
            rng.run(shapes)
        best = min(best, (time.perf_counter() - t0) / repeat)
    return best * 1e6


def compiled_steps(rounds: int) -> tuple:
    results, alone = {}, {}
    for batch in (32, 256):
        steps = {}
        for rng in ("host", "counter"):
            steps[f"compiled, rng={rng!r}"], c = mlp_step(rng, batch)
            if rng == "host":
                alone[batch] = host_draws_alone(c)
        steps["compiled, no dropout"], _ = mlp_step("host", batch, p=0.0)
        results[f"batch {batch}"] = interleaved(steps, rounds, block_s=0.3, pause=0.3)
    return results, alone


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--skip-compiled", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    check_equal()
    print("## torch's streams in NumPy: staged against torch (1e6 float32 values)\n")
    print(environment(args.rounds, "torch", torch) + "\n")
    gen = generation(args.rounds)
    print("| workload | staged ms | torch ms | ratio (quartiles) | target |")
    print("|---|---:|---:|---:|---:|")
    for name, times in gen.items():
        ratios = [a / b for a, b in zip(times["staged"], times["torch"])]
        q1, q2, q3 = quartiles(ratios)
        ok = "ok" if q2 <= TARGETS[name] else "over"
        print(
            f"| {name} | {statistics.median(times['staged']):.2f} | "
            f"{statistics.median(times['torch']):.2f} | {q2:.2f} ({q1:.2f}-{q3:.2f}) | "
            f"<= {TARGETS[name]} ({ok}) |"
        )
    if args.skip_compiled:
        return
    print("\n## host draws in a compiled MLP step with dropout (llvm-cpu)\n")
    results, alone = compiled_steps(args.rounds)
    names = ["compiled, rng='host'", "compiled, rng='counter'", "compiled, no dropout"]
    print(ratio_table(results, names, "compiled, rng='counter'"))
    print()
    for batch, us in alone.items():
        med = {n: statistics.median(t) for n, t in results[f"batch {batch}"].items()}
        extra = (med["compiled, rng='host'"] - med["compiled, rng='counter'"]) * 1e3
        print(
            f"- batch {batch}: host draws alone {us:.0f} µs per call (two masks, "
            f"{2 * batch * 256} float64 uniforms); host - counter per step: {extra:+.0f} µs"
        )
    print(f"- load average at the end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
