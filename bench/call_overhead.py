"""µs per call of compiled steps that do (almost) nothing, so that what is left is the
per-call cost: argument conversion, guard checks, binding, IREE's invoke and the result's
transfer. staged.compile (llvm-cpu) against JAX jit and torch eager, timed interleaved in
one run, each step's result unread (asynchronous calls) and read every call (``.item()``,
as a training loop that logs does). Issue 20, item 5.

    python bench/call_overhead.py [--rounds 8] [--profile]

Steps: ``x + 1`` on one float (one input, one output); the same with 6 parameters of the
MLP 784-256-256-10 held as state and read (``x + w.sum()`` each, the parameters staying on
the device between calls).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from bench.common import environment, interleaved, mlp_params, ratio_table  # noqa: E402
from bench.compiled_steps import jax, jnp, torch  # noqa: E402  (each None where missing)
import staged  # noqa: E402


def _params():
    return list(mlp_params(np.random.default_rng(0)).values())


def staged_steps() -> dict:
    x = staged.zeros(())
    P = [staged.tensor(p) for p in _params()]
    add = staged.compile(lambda x: x + 1)
    reads = staged.compile(lambda x: x + sum(p.sum() for p in P))
    return {
        "x + 1": lambda: add(x),
        "x + 1, read": lambda: add(x).item(),
        "6 params": lambda: reads(x),
        "6 params, read": lambda: reads(x).item(),
    }


def jax_steps() -> dict:
    x = jnp.zeros(())
    P = [jnp.asarray(p) for p in _params()]
    add = jax.jit(lambda x: x + 1)
    reads = jax.jit(lambda x, P: x + sum(p.sum() for p in P))
    return {
        "x + 1": lambda: add(x),
        "x + 1, read": lambda: float(add(x)),
        "6 params": lambda: reads(x, P),
        "6 params, read": lambda: float(reads(x, P)),
    }


def torch_steps() -> dict:
    x = torch.zeros(())
    P = [torch.tensor(p) for p in _params()]
    return {
        "x + 1": lambda: x + 1,
        "x + 1, read": lambda: (x + 1).item(),
        "6 params": lambda: x + sum(p.sum() for p in P),
        "6 params, read": lambda: (x + sum(p.sum() for p in P)).item(),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n"))
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--profile", action="store_true", help="profile staged's read calls")
    a = p.parse_args(argv)
    ours = staged_steps()
    if a.profile:
        pr = cProfile.Profile()
        pr.runcall(lambda: [ours["x + 1, read"]() for _ in range(5000)])
        pstats.Stats(pr).sort_stats("tottime").print_stats(20)
        return 0
    libs = {"staged compiled": ours}
    if jax is not None:
        libs["JAX jit"] = jax_steps()
    if torch is not None:
        torch.set_num_threads(1)
        libs["torch eager (1 thread)"] = torch_steps()
    steps = {f"{lib}: {case}": f for lib, cases in libs.items() for case, f in cases.items()}
    for s in steps.values():  # compile, warm up
        for _ in range(3):
            s()
    times = interleaved(steps, a.rounds, block_s=0.1, pause=0.2)
    base = "torch eager (1 thread): x + 1" if torch is not None else next(iter(steps))
    print("# per-call overhead: compiled steps that do almost nothing, µs/call\n")
    print(environment(a.rounds, base, torch) + "\n")
    print("| step | " + " | ".join(libs) + " |")
    print("|---|" + "---:|" * len(libs))
    for case in ours:
        cells = [f"{1e3 * float(np.median(times[f'{lib}: {case}'])):.1f}" for lib in libs]
        print(f"| {case} | " + " | ".join(cells) + " |")
    print()
    print(ratio_table({"": times}, list(steps), base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
