"""ms/step of the compiled MLP SGD step (784-256-256-10, bench/compiled_steps.py's) at
several batches with IREE data tiling off, on, and as staged's policy chooses it
(``compiler.DATA_TILING_MIN_MACS``, Note [data tiling]), against JAX jit, timed
interleaved in one run; plus each variant's cold compile time.

    python bench/data_tiling.py [--rounds 9] [--batches 32 256 1024]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from bench.common import environment, interleaved, item, mlp_loss, mlp_params  # noqa: E402
from bench.common import ratio_table  # noqa: E402
from bench.compiled_steps import jax, jax_mlp_loss, jax_sgd_step, jnp, sgd_step  # noqa: E402
import staged  # noqa: E402
from staged.runtime import compiler  # noqa: E402

POLICIES = {"off": 1 << 62, "on": 0, "policy": compiler.DATA_TILING_MIN_MACS}


def variants(batch: int) -> tuple:
    """({name: step}, {name: cold compile s}) for one batch."""
    rng = np.random.default_rng(0)
    params = mlp_params(rng)
    x, y = rng.standard_normal((batch, 784), np.float32), rng.integers(0, 10, batch)
    xs, ys = staged.tensor(x), staged.tensor(y)
    steps, cold = {}, {}
    for name, macs in POLICIES.items():
        compiler.DATA_TILING_MIN_MACS = macs  # read by tuning_flags when the step compiles
        step = staged.compile(sgd_step(staged, params, mlp_loss, {}))
        t0 = time.perf_counter()
        item(step(xs, ys))
        cold[name] = time.perf_counter() - t0
        steps[f"data tiling {name}"] = lambda step=step: step(xs, ys)
    compiler.DATA_TILING_MIN_MACS = POLICIES["policy"]
    if jax is not None:
        jstep = jax_sgd_step(jax_mlp_loss)
        state = {"p": {k: jnp.asarray(v) for k, v in params.items()}}
        jx, jy = jnp.asarray(x), jnp.asarray(y)

        def jax_step():
            state["p"], loss = jstep(state["p"], jx, jy)
            return loss

        steps["JAX jit"] = jax_step
    return steps, cold


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--batches", type=int, nargs="+", default=[32, 256, 1024])
    a = p.parse_args(argv)
    os.environ["STAGED_CACHE_DIR"] = tempfile.mkdtemp(prefix="staged-dt-")  # cold compiles
    results, colds, names = {}, {}, []
    for b in a.batches:
        print(f"batch {b}: ...", flush=True)
        steps, colds[b] = variants(b)
        results[f"batch {b}"] = interleaved(steps, a.rounds)
        names += [k for k in steps if k not in names]
    base = "JAX jit" if jax is not None else "data tiling off"
    print("\n## MLP SGD step: IREE data tiling (llvm-cpu), f32\n")
    print(environment(a.rounds, base) + "\n")
    print(ratio_table(results, names, base))
    print("\n| cold compile (s) | " + " | ".join(f"batch {b}" for b in a.batches) + " |")
    print("|---" + "|---:" * len(a.batches) + "|")
    for k in ("off", "on"):  # the policy's module is one of these, from the cache
        print(f"| data tiling {k} | " + " | ".join(f"{colds[b][k]:.2f}" for b in a.batches) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
