"""Issue 20's speed and memory targets, each measured beside its anchor in one run, and a
table of which are met.

    python bench/targets.py [--rounds 8] [--repeats 2]

Three parts, the workloads and steps of ``compiled_steps.py``:

- **steady steps**, timed interleaved in one ``common.interleaved`` run (ratio = median
  over rounds of the per-round ratio, quartiles in parentheses): the four compiled
  training steps, static and ``dynamic=True``, staged eager, torch eager on 1 and 2
  threads and JAX jit; the batch-32 MLP step with its loss read every step, staged and
  JAX; ``op_overhead.py``'s step; ``matmul.py``'s 1024x1024x1024 matmul (result read);
- **cold events** (``first_step.py``, median of ``--repeats``): the first result of
  ``mode="background"`` and of an eager step, each in a new process; a blocking compile
  into an empty cache; JAX jit's first call;
- **peak memory** (``scaling.py``'s processes, one per implementation and workload, 2
  threads: what a user gets by default), staged compiled against torch eager.

Eager steps run with one BLAS thread and are compared with torch on one thread (issue 20's
eager targets); compiled steps are compared with JAX jit and torch's default threads. At a
load average above 1 per core the script says so, loudly, before and after its tables.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
import staged  # noqa: E402
from bench import first_step, matmul, op_overhead, scaling  # noqa: E402
from bench.common import environment, interleaved, item, load_warning, quartiles  # noqa: E402
from bench.common import blas_threads, mlp_loss, mlp_params, ratio_table  # noqa: E402
from bench.common import torch_threads  # noqa: E402
from bench.compiled_steps import WORKLOADS, implementations, jax, ready, sgd_step, torch  # noqa: E402

COLD_LIMIT_S = {"mlp32": 1.0, "cnn": 2.0, "transformer": 2.0}  # or JAX's first call
MEMORY_WORKLOADS = scaling.grid(full=False)


def steady_steps() -> tuple:
    """({name: step}, {name: context}, {workload: [its step names]}) for the steady part."""
    steps, contexts, groups = {}, {}, {}
    for w in WORKLOADS:
        skip = ("torch.compile", "staged dynamic, unspecialized")
        impls = ready(w, {k: v for k, v in implementations(w).items() if k not in skip})
        named = {f"{w}: {k}": s for k, s in impls.items()}
        if "torch eager" in impls:  # one torch model, timed on 1 and on 2 threads
            t = named.pop(f"{w}: torch eager")
            for n in (1, 2):
                named[f"{w}: torch eager ({n} thread{'s' * (n > 1)})"] = t
                contexts[f"{w}: torch eager ({n} thread{'s' * (n > 1)})"] = lambda n=n: (
                    torch_threads(torch, n)
                )
        contexts[f"{w}: staged eager"] = lambda: blas_threads(1)
        groups[w] = list(named)
        steps.update(named)
    for k in ("staged compiled", "JAX jit"):  # the MLP at batch 32, its loss read every step
        if f"mlp32: {k}" in steps:
            name = f"mlp32: {k}, read every step"
            steps[name] = lambda s=steps[f"mlp32: {k}"]: item(s())
            groups["mlp32"].append(name)
    for name, make in op_overhead.IMPLS.items():
        rng = np.random.default_rng(0)
        step, _ = make(*(rng.standard_normal(8).astype(np.float32) for _ in range(3)))
        steps[f"op overhead: {name}"] = lambda step=step: step() or 0.0
        if name == "torch eager":
            contexts[f"op overhead: {name}"] = lambda: torch_threads(torch, 1)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((matmul.N, matmul.N), np.float32) for _ in range(2))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for name, s in matmul.matmuls(a, b).items():
        matmul.check(name, s(), ref, matmul.N)
        steps[f"matmul: {name}"] = lambda s=s: s()[0, 0]
    return steps, contexts, groups


def ratio(times, name, base) -> list:
    """Quartiles of the per-round ratios of ``name``'s times to ``base``'s."""
    return quartiles([t / r for t, r in zip(times[name], times[base])])


def retraces_over_batches() -> int:
    """Traces a ``dynamic=True`` MLP step makes beyond its first over batch sizes 1-512."""
    rng = np.random.default_rng(0)
    step = staged.compile(sgd_step(staged, mlp_params(rng), mlp_loss, {}), dynamic=True)

    def call(n):
        item(
            step(
                staged.tensor(rng.standard_normal((n, 784), np.float32)),
                staged.tensor(rng.integers(0, 10, n)),
            )
        )

    call(32)
    call(32)  # the optimizer-free step traces once; a second call settles it
    first = step.traces
    for n in range(1, 513):
        call(n)
    return step.traces - first


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2, help="runs of each cold event")
    a = ap.parse_args(argv)
    print(load_warning(), flush=True)
    rows = []  # (item, target, staged, anchor, ratio text, met)

    def row(what, target, staged_fig, anchor, q, met):
        rows.append((what, target, staged_fig, anchor, q, "yes" if met else "**no**"))

    # cold events first, before this process's own compiles warm anything
    staged.compile(lambda t: t * 2)(staged.ones(2))  # MLIR context, IREE runtime: once
    med = statistics.median
    with first_step.cold_caches():
        for w in COLD_LIMIT_S:
            print(f"cold: {w} ...", flush=True)
            runs = {k: [] for k in ("new", "new bg", "blocking", "jax")}
            for _ in range(a.repeats):
                runs["new"].append(first_step.first_in_new_process(w, "eager"))
                runs["new bg"].append(first_step.first_in_new_process(w, "background"))
                runs["blocking"].append(first_step.blocking_first(w)[0])
                runs["jax"].append(first_step.jax_first(w))
            new, bg, blk = med(runs["new"]), med(runs["new bg"]), med(runs["blocking"])
            row(
                f'{w}: first result, `mode="background"`, new process',
                "<= 1.5x the first eager step",
                f"{bg * 1e3:.1f} ms",
                f"eager {new * 1e3:.1f} ms",
                f"{bg / new:.2f}",
                bg <= 1.5 * new,
            )
            jx = [r for r in runs["jax"] if r is not None]
            limit = max(COLD_LIMIT_S[w], med(jx) if jx else 0)
            row(
                f"{w}: cold compile (trace, lower, IREE, run)",
                f"<= max({COLD_LIMIT_S[w]:.0f} s, JAX jit's first call)",
                f"{blk:.2f} s",
                f"JAX {med(jx):.2f} s" if jx else "JAX: not installed",
                f"{blk / limit:.2f}",
                blk <= limit,
            )

    print("steady steps: tracing, compiling, checking losses ...", flush=True)
    steps, contexts, groups = steady_steps()
    print(f"steady steps: {len(steps)} timed interleaved, {a.rounds} rounds ...", flush=True)
    times = interleaved(steps, a.rounds, contexts=contexts)
    ms = {k: med(v) for k, v in times.items()}

    def ratio_row(what, target, name, base, limit, anchor_label=None):
        q1, q2, q3 = ratio(times, name, base)
        row(
            what,
            target,
            f"{ms[name]:.3f} ms",
            f"{anchor_label or base.split(': ')[1]} {ms[base]:.3f} ms",
            f"{q2:.2f} ({q1:.2f}-{q3:.2f})",
            q2 <= limit,
        )

    for w in WORKLOADS:
        ratio_row(
            f"{w}: `dynamic=True` step",
            "<= 1.1x the static step",
            f"{w}: staged compiled dynamic",
            f"{w}: staged compiled",
            1.1,
        )
    retraces = retraces_over_batches()
    row(
        "MLP `dynamic=True`, batch sizes 1-512 in one run",
        "no re-trace",
        f"{retraces} re-traces",
        "",
        "",
        retraces == 0,
    )
    ratio_row(
        "op overhead: `(x*w + b).relu().sum()` fwd+bwd",
        "<= 1.2x torch eager (1 thread)",
        "op overhead: staged eager",
        "op overhead: torch eager",
        1.2,
    )
    for w in ("cnn", "transformer"):
        if f"{w}: torch eager (1 thread)" in times:
            ratio_row(
                f"{w}: eager training step",
                "<= 2x torch eager (1 thread)",
                f"{w}: staged eager",
                f"{w}: torch eager (1 thread)",
                2.0,
            )
    if jax is not None:
        ratio_row(
            "mlp256: compiled step", "<= JAX jit", "mlp256: staged compiled", "mlp256: JAX jit", 1.0
        )
        ratio_row(
            "mlp32: compiled step, loss read every step",
            "<= JAX jit read every step",
            "mlp32: staged compiled, read every step",
            "mlp32: JAX jit, read every step",
            1.0,
        )
    mm = {k: v for k, v in ms.items() if k.startswith("matmul: ")}
    fastest = min((k for k in mm if "staged" not in k), key=mm.get)
    flops = 2 * matmul.N**3
    q1, q2, q3 = ratio(times, fastest, "matmul: staged compiled (NumPy inputs)")
    row(
        f"{matmul.N}³ float32 matmul, result read",
        ">= 0.8x the fastest's GFLOP/s",
        f"{flops / mm['matmul: staged compiled (NumPy inputs)'] / 1e6:.0f} GFLOP/s",
        f"{fastest.split(': ')[1]} {flops / mm[fastest] / 1e6:.0f} GFLOP/s",
        f"{q2:.2f} ({q1:.2f}-{q3:.2f})",
        q2 >= 0.8,
    )

    print("peak memory: one process per implementation and workload ...", flush=True)
    for w in MEMORY_WORKLOADS:
        got = {i: scaling.measure(i, w, 1.0, 2) for i in ("staged compiled", "torch eager")}
        s, t = got["staged compiled"], got["torch eager"]
        if s and t:
            row(
                f"{w}: peak memory of a compiled step",
                "<= torch eager's",
                f"{s['peak_mb']:.0f} MB ({s['ms']:.1f} ms)",
                f"{t['peak_mb']:.0f} MB ({t['ms']:.1f} ms)",
                f"{s['peak_mb'] / t['peak_mb']:.2f}",
                s["peak_mb"] <= t["peak_mb"],
            )

    print(f"\n## Issue 20's targets, staged {staged.__version__}\n")
    print(
        environment(a.rounds, "the anchor", torch)
        + (
            f"\n- jax {jax.__version__}"
            if jax
            else "\n- JAX: not installed (pip install -e '.[bench]')"
        )
        + f"\n- cold events: median of {a.repeats}; peak memory: one process each, 2 threads"
    )
    print(load_warning())
    print("| what | target | staged | anchor | ratio | met |")
    print("|---|---|---:|---:|---:|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    met = sum(r[-1] == "yes" for r in rows)
    print(f"\n{met} of {len(rows)} met.\n\n### The steady steps (ratio to torch eager, 1 thread)\n")
    per_workload = {
        w: {k.split(": ", 1)[1]: times[k] for k in names} for w, names in groups.items()
    }
    names = list(dict.fromkeys(k for g in per_workload.values() for k in g))
    if torch is not None:
        print(ratio_table(per_workload, names, "torch eager (1 thread)"))
    print(load_warning())
    return 0


if __name__ == "__main__":
    sys.exit(main())
