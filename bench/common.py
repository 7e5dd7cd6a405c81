"""Shared benchmark machinery: interleaved timing, the environment header, ratio tables.

Implementations are timed in rounds of blocks (A B C A B C ...), with a pause before each
block so that BLAS threads spinning after one implementation don't slow the next; ratios
are per round against a baseline, so machine-wide speed swings cancel (notes/BENCH.md).
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np


def item(loss) -> float:
    return loss if isinstance(loss, float) else loss.item()


def interleaved(steps: dict, rounds: int, block_s=0.15, pause=0.5, contexts=None) -> dict:
    """{name: [ms/step per round]} for zero-argument steps that return a loss; each step's
    blocks run inside ``contexts[name]()`` where given (a thread limit, say)."""
    contexts = contexts or {}
    n_steps = {}
    for name, s in steps.items():  # calibrate steps per block to about block_s
        with contexts.get(name, contextlib.nullcontext)():
            t0 = time.perf_counter()
            item(s())
            n_steps[name] = max(5, int(block_s / max(time.perf_counter() - t0, 1e-6)))
    times = {name: [] for name in steps}
    for _ in range(rounds):
        for name, s in steps.items():
            time.sleep(pause)
            with contexts.get(name, contextlib.nullcontext)():
                t0 = time.perf_counter()
                for _ in range(n_steps[name]):
                    loss = s()
                item(loss)
                times[name].append((time.perf_counter() - t0) / n_steps[name] * 1e3)
    return times


def load_warning() -> str:
    """A loud warning when the load average is above 1 per core, else ""."""
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load <= cores:
        return ""
    return (
        f"\n**WARNING: load average {load:.1f} on {cores} cores (above 1 per core): other "
        "jobs share these cores, so times are long and noisy and ratios skewed; rerun on a "
        "quiet machine before quoting any figure.**\n"
    )


def _git(*args) -> str:
    here = Path(__file__).parent
    return subprocess.run(
        ["git", "-C", str(here), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def commit() -> str:
    """The checkout's commit (with ``+`` for uncommitted changes), or "unknown"."""
    try:
        rev = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+" if dirty else "")


def blas_threads(n):
    """A context in which NumPy's BLAS runs on ``n`` threads (threadpoolctl)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(n, "blas")


@contextlib.contextmanager
def torch_threads(torch, n):
    """A context in which ``torch`` runs on ``n`` threads."""
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def blas_info() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"

    def one(i):
        words = [i.get("internal_api"), i.get("version"), i.get("architecture")]
        return (
            " ".join(w for w in words if w)
            + f" ({i['num_threads']} threads, {Path(i['filepath']).name})"
        )

    return "; ".join(one(i) for i in threadpool_info())


def environment(rounds: int, base: str, torch=None) -> str:
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    env = {k: os.environ.get(k, "unset") for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    return "\n".join(
        [
            f"- date: {datetime.datetime.now().isoformat(timespec='minutes')}, commit {commit()}",
            f"- machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
            f"nproc {os.cpu_count()}, load average {load}",
            f"- python {platform.python_version()}, numpy {np.__version__}"
            + (f", torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else ""),
            f"- BLAS/OpenMP: {blas_info()}; {', '.join(f'{k}={v}' for k, v in env.items())}",
            f"- {rounds} rounds; ratio = median over rounds of (ms/step / {base} ms/step in the "
            "same round), with its quartiles; lower is faster",
        ]
    )


def quartiles(values) -> list:
    """The quartiles of ``values`` within their range (the inclusive method: the default
    extrapolates past the extremes, a negative quartile from two rounds)."""
    values = list(values)
    return statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3


def ratio_table(results: dict, names, base: str) -> str:
    """Markdown: one row per implementation, ms/step and ratio per column of ``results``
    ({column label: {name: [ms per round]}})."""
    lines = [
        "| implementation |" + "".join(f" {c} ms/step | {c} ratio |" for c in results),
        "|---|" + "---:|---:|" * len(results),
    ]
    for name in names:
        row = f"| {name} |"
        for times in results.values():
            if name not in times:
                row += " - | - |"
                continue
            ratios = [t / r for t, r in zip(times[name], times[base])]
            q1, q2, q3 = quartiles(ratios)
            row += f" {statistics.median(times[name]):.3f} | {q2:.2f} ({q1:.2f}-{q3:.2f}) |"
        lines.append(row)
    return "\n".join(lines)


# --- workloads shared by the benchmarks (NumPy only: each imports its frameworks) ---
def _uniform(rng, shape, fan_in):
    k = 1 / math.sqrt(fan_in)
    return rng.uniform(-k, k, shape).astype(np.float32)


def block_shapes(width: int) -> dict:
    """The weight shapes of a transformer block of ``width``: attention, then the MLP."""
    return {
        **dict.fromkeys(("wq", "wk", "wv", "wo"), (width, width)),
        "w1": (4 * width, width),
        "w2": (width, 4 * width),
    }


def mlp_params(rng, sizes=(784, 256, 256, 10)):
    return {
        f"{k}{i}": _uniform(rng, (o, n) if k == "w" else (o,), n)
        for i, (n, o) in enumerate(zip(sizes[:-1], sizes[1:]))
        for k in "wb"
    }


def mlp_loss(F, P, x, y):
    h = x
    for i in range(3):
        h = F.linear(h, P[f"w{i}"], P[f"b{i}"])
        h = h.relu() if i < 2 else h
    return F.cross_entropy(h, y)
