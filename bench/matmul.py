"""GFLOP/s of large float32 matmuls (issue 20, item 4): a 1024x1024x1024 matmul compiled by
staged against NumPy's BLAS, torch and JAX jit; the same matmul under IREE flag variants;
and the compiled MLP 784-256-256-10 SGD step at batch 256 and 1024 against JAX jit.

    python bench/matmul.py [--rounds 6] [--skip NAME ...]

All of it is timed in one interleaved run (``bench/common.py``); every result is checked
against NumPy (the matmuls) or against staged's losses (the steps) before timing.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from bench.common import environment, interleaved, item, load_warning, mlp_loss, mlp_params  # noqa: E402
from bench.common import blas_threads, quartiles, torch_threads  # noqa: E402
from bench.compiled_steps import jax, jax_mlp_loss, jax_sgd_step, jnp, sgd_step, torch  # noqa: E402
import staged  # noqa: E402
from staged.runtime import compiler  # noqa: E402
from staged.runtime.device import device  # noqa: E402

N = 1024  # the plain matmul's M = K = N
BATCHES = (256, 1024)

# IREE flags added to staged's llvm-cpu flags (compiler.flags, STEP_FLAGS), with the
# target CPU; the first is what staged.compile builds for this matmul (Note [data tiling])
_TILES = "--iree-llvmcpu-matmul-tile-bytes="
_DT = compiler.DATA_TILING
VARIANTS = {
    "data tiling, 32 KiB tiles (staged's)": ([*_DT, f"{_TILES}32768"], "host"),
    "no data tiling": ([], "host"),
    "data tiling, IREE's default tiles": ([*_DT], "host"),
    "data tiling, 128 KiB tiles": ([*_DT, f"{_TILES}131072"], "host"),
    "data tiling 32 KiB, ukernels=all": (
        [*_DT, f"{_TILES}32768", "--iree-llvmcpu-enable-ukernels=all"],
        "host",
    ),
    "data tiling 32 KiB, ukernels=none": (
        [*_DT, f"{_TILES}32768", "--iree-llvmcpu-enable-ukernels=none"],
        "host",
    ),
    "data tiling 32 KiB, target x86-64-v4 (AVX-512)": ([*_DT, f"{_TILES}32768"], "x86-64-v4"),
    "data tiling 32 KiB, target x86-64-v3 (AVX2)": ([*_DT, f"{_TILES}32768"], "x86-64-v3"),
    # generic with data tiling took 2.2 s a call (5x this, 30x the host's)
    "no data tiling, target x86-64 (generic)": ([], "x86-64"),
}


def check(name: str, out, ref: np.ndarray, k: int) -> None:
    """``out`` must match the float64 ``ref`` to float32 accumulation over ``k`` terms."""
    out = np.asarray(out, np.float64)
    tol = 4 * np.finfo(np.float32).eps * math.sqrt(k) * np.abs(ref).max()
    err = np.abs(out - ref).max()
    if not err <= tol:
        raise AssertionError(f"{name}: max error {err:.3g} over tolerance {tol:.3g}")


def _threads(fn, n):
    """``fn`` run with NumPy's BLAS limited to ``n`` threads."""

    def run():
        with blas_threads(n):
            return fn()

    return run


def _torch_threads(fn, n):
    def run():
        with torch_threads(torch, n):
            return fn()

    return run


def matmuls(a: np.ndarray, b: np.ndarray) -> dict:
    """{name: zero-argument step returning the product's first element} (read each call)."""
    mm = staged.compile(lambda x, y: x @ y)
    sa, sb = staged.tensor(a), staged.tensor(b)
    steps = {
        "staged compiled (NumPy inputs)": lambda: mm(sa, sb).numpy(),
        f"NumPy BLAS ({os.cpu_count()} threads)": lambda: a @ b,
        "NumPy BLAS (1 thread)": _threads(lambda: a @ b, 1),
    }
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        for n in (1, 2):
            steps[f"torch ({n} thread{'s' * (n > 1)})"] = _torch_threads(lambda: ta @ tb, n)
    if jax is not None:
        jmm, ja, jb = jax.jit(lambda x, y: x @ y), jnp.asarray(a), jnp.asarray(b)
        steps["JAX jit"] = lambda: np.asarray(jmm(ja, jb))
    return steps


def variants(a: np.ndarray, b: np.ndarray) -> dict:
    """{name: step} for the matmul's module compiled with each of VARIANTS, called as
    staged calls its modules (device.Module.invoke) on inputs already on the device."""
    from iree.compiler.tools import compile_str

    text = staged.capture(lambda x, y: x @ y, staged.tensor(a), staged.tensor(b)).to_mlir()
    dev = device("llvm-cpu")
    da, db = dev.upload(a), dev.upload(b)
    indirect = [f for f in compiler.GLOBAL_FLAGS if not f.startswith(_TILES)]

    def build(text, flags):  # iree-compile in a process of its own: its own tile budget
        return compile_str(text, extra_args=[*flags, *indirect])

    steps = {}
    for name, (extra, cpu) in VARIANTS.items():
        vmfb = compiler.compile_mlir(
            text,
            "llvm-cpu",
            [*compiler.STEP_FLAGS["llvm-cpu"], *extra],
            builder=build,
            target_cpu=cpu,
        )
        module = dev.load(vmfb)
        steps[name] = lambda m=module: np.asarray(m.invoke("main", [da, db])[0])
    return steps


def mlp_steps(batch: int) -> tuple:
    """({name: SGD step of the MLP at ``batch``}, its matmul flops from staged's trace)."""
    rng = np.random.default_rng(0)
    params = mlp_params(rng)
    x, y = rng.standard_normal((batch, 784), np.float32), rng.integers(0, 10, batch)
    xs, ys = staged.tensor(x), staged.tensor(y)
    graph = staged.capture(sgd_step(staged, params, mlp_loss, {}), xs, ys).graph
    macs = sum(  # as compiler.tuning_flags counts them
        math.prod((*op.out.aval.shape, op.inputs[0].aval.shape[-1]))
        for op in graph.ops
        if op.prim.name == "matmul"
    )
    cstep = staged.compile(sgd_step(staged, params, mlp_loss, {}))
    steps = {f"staged compiled, batch {batch}": lambda: cstep(xs, ys)}
    if torch is not None:
        tstep = sgd_step(torch, params, mlp_loss, {})
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)
        steps[f"torch eager (2 threads), batch {batch}"] = _torch_threads(lambda: tstep(xt, yt), 2)
    if jax is not None:
        jstep = jax_sgd_step(jax_mlp_loss)
        state = {"params": {k: jnp.asarray(v) for k, v in params.items()}}
        jdata = jnp.asarray(x), jnp.asarray(y)

        def jax_step():
            state["params"], loss = jstep(state["params"], *jdata)
            return loss

        steps[f"JAX jit, batch {batch}"] = jax_step
    return steps, 2 * macs


def table(times: dict, flops: float, base: str | None = None) -> str:
    """Markdown: ms per call, GFLOP/s (medians over rounds) and the median of per-round
    ratios of time to ``base``'s (default: the fastest), with quartiles."""
    base = base or min(times, key=lambda k: statistics.median(times[k]))
    lines = [
        f"| implementation | ms/call | GFLOP/s | time ratio to {base} |",
        "|---|---:|---:|---:|",
    ]
    for name, ts in times.items():
        ratios = [t / r for t, r in zip(ts, times[base])]
        q1, q2, q3 = quartiles(ratios)
        ms = statistics.median(ts)
        lines.append(
            f"| {name} | {ms:.2f} | {flops / ms / 1e6:.0f} | {q2:.2f} ({q1:.2f}-{q3:.2f}) |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--skip", nargs="*", default=[], metavar="NAME", help="rows to leave out")
    a = p.parse_args(argv)
    print(load_warning(), flush=True)
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((N, N), np.float32) for _ in range(2))
    ref = x.astype(np.float64) @ y.astype(np.float64)
    groups = {"plain": matmuls(x, y), "variants": variants(x, y)}
    flops = {"plain": 2 * N**3, "variants": 2 * N**3}
    for batch in BATCHES:
        groups[f"mlp{batch}"], flops[f"mlp{batch}"] = mlp_steps(batch)
    for g, steps in groups.items():
        for name in [k for k in steps if k in a.skip]:
            del steps[name]
        if g.startswith("mlp"):  # losses of the first three steps agree
            losses = {k: [item(s()) for _ in range(3)] for k, s in steps.items()}
            ref_loss = next(iter(losses.values()))
            for k, v in losses.items():
                if not np.allclose(v, ref_loss, rtol=2e-4, atol=1e-5):
                    raise AssertionError(f"{k}: losses {v} differ from staged's {ref_loss}")
        else:
            for k, s in steps.items():
                check(k, s(), ref, N)
            for k in list(steps):  # item() of the first element: each call's result is read
                steps[k] = lambda s=steps[k]: s()[0, 0]
    everything = {k: s for steps in groups.values() for k, s in steps.items()}
    times = interleaved(everything, a.rounds)
    print(f"\n## Large float32 matmuls, GFLOP/s (issue 20 item 4), staged {staged.__version__}\n")
    print(environment(a.rounds, "the fastest", torch))
    print(f"- jax {jax.__version__}" if jax else "- JAX: not installed (pip install -e '.[bench]')")
    print(load_warning())
    print(f"### {N}x{N}x{N} float32 matmul, result read each call\n")
    print(table({k: times[k] for k in groups["plain"]}, flops["plain"]))
    print("\n### The same matmul's module under IREE flag variants (device inputs)\n")
    variant_times = {k: times[k] for k in groups["variants"]}
    print(table(variant_times, flops["variants"], next(iter(variant_times), None)))
    for batch in BATCHES:
        g = f"mlp{batch}"
        print(f"\n### MLP 784-256-256-10 SGD step, batch {batch} ({flops[g] / 1e6:.0f} MFLOP)\n")
        print(table({k: times[k] for k in groups[g]}, flops[g]))
    print(f"\n- load average at the end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
