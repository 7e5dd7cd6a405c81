"""Time to the first result of a training step, cold: staged.compile blocking (trace,
lower, IREE compile, load, run) against ``mode="background"`` (the step run untraced; the
second call traces it and runs the graph eagerly while IREE compiles in a separate
process), one staged eager step and
JAX jit's first call; plus where a blocking cold compile spends its time, and how long a
background compile takes to hand over while eager calls keep running.

    python bench/first_step.py [--workloads mlp32 cnn transformer] [--repeats 2]

Every staged compile starts from an empty compile cache (a fresh ``STAGED_CACHE_DIR``);
the workloads and their SGD step are ``bench/compiled_steps.py``'s. Times are wall
seconds of single cold events (they cannot be interleaved as steady steps are): each is
the median of ``--repeats`` runs, taken in turn, and the load average is printed with
them (a loaded machine stretches IREE's compile most). The first results of an eager and a
background step are also taken in a new Python process each, as a user's first step runs:
there NumPy's kernels and the allocator are cold too, and eager's own first step costs about
twice a steady one.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
import staged
from bench.common import environment
from bench.compiled_steps import (
    JAX_LOSSES,
    WORKLOADS,
    _causal,
    jax,
    jax_sgd_step,
    jnp,
    sgd_step,
    torch,
)

HAND_OVER_S = 600  # give up waiting for a background compile after this long


def _setup(name):
    make_params, make_data, loss_fn = WORKLOADS[name]
    rng = np.random.default_rng(0)
    params, (x, y) = make_params(rng), make_data(rng)
    consts = {"causal": _causal()} if name == "transformer" else {}
    return params, x, y, consts, loss_fn


_DIRS: list = []


def _cold_cache():
    d = tempfile.mkdtemp(prefix="staged-first-step-")
    _DIRS.append(d)
    os.environ["STAGED_CACHE_DIR"] = d
    return d


@contextlib.contextmanager
def cold_caches():
    """Within it, the functions below compile into fresh caches, removed at its end, and
    ``STAGED_CACHE_DIR`` is then restored."""
    old = os.environ.get("STAGED_CACHE_DIR")
    try:
        yield
    finally:
        for d in _DIRS:
            shutil.rmtree(d, ignore_errors=True)
        _DIRS.clear()
        if old is None:
            os.environ.pop("STAGED_CACHE_DIR", None)
        else:
            os.environ["STAGED_CACHE_DIR"] = old


def eager_first(name) -> tuple:
    """(first eager step s, a later eager step s)."""
    params, x, y, consts, loss_fn = _setup(name)
    step = sgd_step(staged, params, loss_fn, consts)
    xs, ys = staged.tensor(x), staged.tensor(y)
    t0 = time.perf_counter()
    step(xs, ys).item()
    first = time.perf_counter() - t0
    later = []
    for _ in range(5):
        t0 = time.perf_counter()
        step(xs, ys).item()
        later.append(time.perf_counter() - t0)
    return first, statistics.median(later)


def blocking_first(name) -> tuple:
    """(first result s, {phase: s}) of a blocking compile into an empty cache."""
    params, x, y, consts, loss_fn = _setup(name)
    _cold_cache()
    step = staged.compile(sgd_step(staged, params, loss_fn, consts))
    xs, ys = staged.tensor(x), staged.tensor(y)
    t0 = time.perf_counter()
    step(xs, ys).item()
    return time.perf_counter() - t0, dict(step.history[0]["times"])


def background_first(name) -> tuple:
    """(first result s, until the first compiled call s, eager calls meanwhile,
    {phase: s}) of a background compile into an empty cache, calling in a loop."""
    params, x, y, consts, loss_fn = _setup(name)
    _cold_cache()
    step = staged.compile(sgd_step(staged, params, loss_fn, consts), mode="background")
    xs, ys = staged.tensor(x), staged.tensor(y)
    t0 = time.perf_counter()
    step(xs, ys).item()
    first = time.perf_counter() - t0
    while step.calls.runs[-1][0] != "compiled" and time.perf_counter() - t0 < HAND_OVER_S:
        step(xs, ys).item()
    switched = time.perf_counter() - t0
    eager = sum(last - f + 1 for where, _, f, last in step.calls.runs if where != "compiled")
    return first, switched, eager, dict(step.history[0]["times"])


def first_in_new_process(name, mode) -> float:
    """The first result (s) of ``name``'s step, eager or ``mode="background"``, in a new
    Python process (staged imported and the model built before the clock starts)."""
    out = subprocess.run(
        [sys.executable, __file__, "--first-in-this-process", name, mode],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.split()[-1])


def _first_in_this_process(name, mode) -> None:
    params, x, y, consts, loss_fn = _setup(name)
    d = _cold_cache()
    step = sgd_step(staged, params, loss_fn, consts)
    if mode == "background":
        step = staged.compile(step, mode="background")
    xs, ys = staged.tensor(x), staged.tensor(y)
    t0 = time.perf_counter()
    step(xs, ys).item()
    print(time.perf_counter() - t0)
    shutil.rmtree(d, ignore_errors=True)


def jax_first(name):
    """JAX jit's first call (trace + XLA compile + run), s; None without JAX."""
    if jax is None:
        return None
    params, x, y, consts, _ = _setup(name)
    jstep = jax_sgd_step(JAX_LOSSES[name])
    p = {k: jnp.asarray(v) for k, v in params.items()}
    data = (jnp.asarray(x), jnp.asarray(y)) + tuple(jnp.asarray(v) for v in consts.values())
    t0 = time.perf_counter()
    _, loss = jstep(p, *data)
    float(loss)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--workloads", nargs="+", default=["mlp32", "cnn", "transformer"], choices=list(WORKLOADS)
    )
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--first-in-this-process", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.first_in_this_process:
        _first_in_this_process(*a.first_in_this_process)
        return 0
    staged.compile(lambda t: t * 2)(staged.ones(2))  # MLIR context, IREE runtime: once
    rows, phase_rows = [], []
    with cold_caches():
        for name in a.workloads:
            print(f"{name}: ...", flush=True)
            runs = {k: [] for k in ("eager", "blocking", "background", "jax", "new", "new bg")}
            for _ in range(a.repeats):
                runs["new"].append(first_in_new_process(name, "eager"))
                runs["new bg"].append(first_in_new_process(name, "background"))
                runs["eager"].append(eager_first(name))
                runs["blocking"].append(blocking_first(name))
                runs["background"].append(background_first(name))
                runs["jax"].append(jax_first(name))
            med = lambda xs: statistics.median(xs)
            e_first, e_step = med([r[0] for r in runs["eager"]]), med([r[1] for r in runs["eager"]])
            blk = med([r[0] for r in runs["blocking"]])
            bg_first = med([r[0] for r in runs["background"]])
            new, new_bg = med(runs["new"]), med(runs["new bg"])
            bg_switch = med([r[1] for r in runs["background"]])
            bg_eager = med([r[2] for r in runs["background"]])
            jx = [r for r in runs["jax"] if r is not None]
            rows.append(
                f"| {name} | {e_step * 1e3:.1f} | {e_first * 1e3:.1f} | "
                f"{bg_first * 1e3:.1f} ({bg_first / e_step:.1f}x) | "
                f"{new * 1e3:.1f} | {new_bg * 1e3:.1f} ({new_bg / new:.2f}x) | "
                f"{blk:.2f} ({blk / e_step:.0f}x) | "
                f"{bg_switch:.2f} after {bg_eager:.0f} eager calls | "
                + (f"{med(jx):.2f} |" if jx else "- |")
            )
            phases = {}
            for _, t in runs["blocking"]:
                for k, v in t.items():
                    phases.setdefault(k, []).append(v)
            total = sum(med(v) for v in phases.values())
            phase_rows.append(
                f"| {name} | "
                + " | ".join(
                    f"{med(phases.get(k, [0])):.3f} ({med(phases.get(k, [0])) / total:.0%})"
                    for k in ("trace", "lower", "IREE compile", "load")
                )
                + f" | {total:.2f} |"
            )
    print("\n## Time to the first result, cold compile cache\n")
    print(
        environment(a.repeats, "staged eager step", torch)
        + (f"\n- jax {jax.__version__}" if jax else "\n- JAX: not installed")
        + "\n"
    )
    print(
        "| workload | eager step (ms) | first eager step (ms) | background: first result "
        "(ms, x eager step) | new process: first eager step (ms) | new process: background "
        "first result (ms, x first eager step) | blocking: first result (s, x eager step) | "
        "background: compiled from (s) | JAX jit first call (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print("\n## Where a blocking cold compile spends its time (s, share)\n")
    print("| workload | trace | lower to MLIR | IREE compile | load | total |")
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(phase_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
