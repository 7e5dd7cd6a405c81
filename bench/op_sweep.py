"""Eager ops one by one against torch: forward + backward of ``op(x).sum()`` on a 256 x 256
float32 tensor (``--size``), staged eager vs torch eager on one thread, timed interleaved.

Finds the ops whose NumPy kernels or composites are slow (``--min-ratio`` prints only those
at or above a ratio). Each op's gradient is checked against torch's before it is timed
(``rtol`` 1e-4, ``atol`` 1e-5 of the gradient's largest magnitude): a row that does not
match says so instead of a time.

    .venv/bin/python bench/op_sweep.py [--size 256] [--rounds 5] [--min-ratio 0] [OP ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import staged  # noqa: E402
from bench.common import load_warning  # noqa: E402

LIBS = {"staged": staged, "torch": torch}


def _ops(lib):
    """``{name: fn(x, y, t) -> tensor}``: ``x`` requires grad, ``y`` is another float
    tensor of ``x``'s shape, ``t`` integer class targets of its rows."""
    F = lib.nn.functional
    return {
        "add": lambda x, y, t: x + y,
        "mul": lambda x, y, t: x * y,
        "div": lambda x, y, t: x / (y.abs() + 1),
        "pow 2": lambda x, y, t: x**2,
        "pow 2.5": lambda x, y, t: x.abs() ** 2.5,
        "sqrt": lambda x, y, t: x.abs().sqrt(),
        "exp": lambda x, y, t: x.exp(),
        "log": lambda x, y, t: (x.abs() + 1).log(),
        "tanh": lambda x, y, t: x.tanh(),
        "sigmoid": lambda x, y, t: x.sigmoid(),
        "sin": lambda x, y, t: x.sin(),
        "erf": lambda x, y, t: x.erf(),
        "relu": lambda x, y, t: x.relu(),
        "gelu": lambda x, y, t: F.gelu(x),
        "gelu tanh": lambda x, y, t: F.gelu(x, approximate="tanh"),
        "silu": lambda x, y, t: F.silu(x),
        "elu": lambda x, y, t: F.elu(x),
        "leaky_relu": lambda x, y, t: F.leaky_relu(x, 0.1),
        "softplus": lambda x, y, t: F.softplus(x),
        "hardtanh": lambda x, y, t: F.hardtanh(x),
        "mish": lambda x, y, t: F.mish(x),
        "clamp": lambda x, y, t: x.clamp(-0.5, 0.5),
        "where": lambda x, y, t: lib.where(y > 0, x, y),
        "abs": lambda x, y, t: x.abs(),
        "sum dim": lambda x, y, t: x.sum(1),
        "mean dim": lambda x, y, t: x.mean(1),
        "var": lambda x, y, t: x.var(1),
        "std": lambda x, y, t: x.std(1),
        "norm": lambda x, y, t: x.norm(dim=1),
        "amax": lambda x, y, t: x.amax(1),
        "max dim": lambda x, y, t: x.max(1).values,
        "logsumexp": lambda x, y, t: x.logsumexp(1),
        "cumsum": lambda x, y, t: x.cumsum(1),
        "cumprod": lambda x, y, t: (x * 0.01 + 1).cumprod(1),
        "prod": lambda x, y, t: (x * 0.01 + 1).prod(1),
        "sort": lambda x, y, t: x.sort(1).values,
        "topk": lambda x, y, t: x.topk(8, 1).values,
        "median": lambda x, y, t: x.median(1).values,
        "softmax": lambda x, y, t: x.softmax(1),
        "log_softmax": lambda x, y, t: x.log_softmax(1),
        "cross_entropy": lambda x, y, t: F.cross_entropy(x, t),
        "nll_loss": lambda x, y, t: F.nll_loss(x, t),
        "mse_loss": lambda x, y, t: F.mse_loss(x, y),
        "l1_loss": lambda x, y, t: F.l1_loss(x, y),
        "smooth_l1": lambda x, y, t: F.smooth_l1_loss(x, y),
        "huber": lambda x, y, t: F.huber_loss(x, y),
        "bce_logits": lambda x, y, t: F.binary_cross_entropy_with_logits(x, y.sigmoid()),
        "bce": lambda x, y, t: F.binary_cross_entropy(x.sigmoid(), y.sigmoid()),
        "kl_div": lambda x, y, t: F.kl_div(x.log_softmax(1), y.softmax(1), reduction="batchmean"),
        "layer_norm": lambda x, y, t: F.layer_norm(x, x.shape[1:]),
        "normalize": lambda x, y, t: F.normalize(x, dim=1),
        "dropout eval": lambda x, y, t: F.dropout(x, 0.5, training=False),
        "matmul": lambda x, y, t: x @ y,
        "linear": lambda x, y, t: F.linear(x, y),
        "transpose": lambda x, y, t: x.t() * y,
        "cat": lambda x, y, t: lib.cat([x, y], 1),
        "stack": lambda x, y, t: lib.stack([x, y]),
        "index rows": lambda x, y, t: x[t],
        "gather": lambda x, y, t: x.gather(1, t[:, None].expand(-1, 4)),
        "masked_fill": lambda x, y, t: x.masked_fill(y > 0, 0.0),
        "flip": lambda x, y, t: x.flip(1),
        "roll": lambda x, y, t: x.roll(3, 1),
        "pad": lambda x, y, t: F.pad(x, (1, 1, 1, 1)),
        "unfold": lambda x, y, t: x.unfold(1, 4, 2),
        "repeat": lambda x, y, t: x.repeat(2, 1),
        "outer": lambda x, y, t: lib.outer(x[0], y[0]),
        "diff": lambda x, y, t: x.diff(dim=1),
        "cosine_sim": lambda x, y, t: F.cosine_similarity(x, y),
        "lerp": lambda x, y, t: x.lerp(y, 0.3),
        "addcmul": lambda x, y, t: x.addcmul(y, y, value=0.5),
        "avg_pool1d": lambda x, y, t: F.avg_pool1d(x[None], 4),
        "max_pool1d": lambda x, y, t: F.max_pool1d(x[None], 4),
        "conv1d": lambda x, y, t: F.conv1d(x[:, None], y[:4, None, :5]),
    }


def _inputs(lib, x, y, t):
    return lib.tensor(x, requires_grad=True), lib.tensor(y), lib.tensor(t)


def _step(lib, fn, x, y, t):
    xs, ys, ts = _inputs(lib, x, y, t)

    def step():
        fn(xs, ys, ts).sum().backward()
        xs.grad = None

    return step, (xs, ys, ts)


def _grad(lib, fn, x, y, t):
    xs, ys, ts = _inputs(lib, x, y, t)
    fn(xs, ys, ts).sum().backward()
    return np.asarray(xs.grad)


def _block(step, n):
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t0) / n


def sweep(names, size, rounds, block_s=0.05):
    """``{name: (staged µs, torch µs, ratio)}``, or ``{name: "reason"}`` where the gradients
    differ or staged raises."""
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((size, size)).astype(np.float32) for _ in range(2))
    t = rng.integers(0, size, size)
    ops = {"staged": _ops(staged), "torch": _ops(torch)}
    out = {}
    for name in names:
        try:
            got = _grad(staged, ops["staged"][name], x, y, t)
        except Exception as e:  # noqa: BLE001 - a sweep reports every op
            out[name] = f"staged raised {type(e).__name__}: {e}"
            continue
        want = _grad(torch, ops["torch"][name], x, y, t)
        if not np.allclose(got, want, rtol=1e-4, atol=1e-5 * max(np.abs(want).max(), 1)):
            out[name] = f"gradient differs from torch's by {np.abs(got - want).max():.3g}"
            continue
        steps = {lib: _step(mod, ops[lib][name], x, y, t)[0] for lib, mod in LIBS.items()}
        n = {lib: max(3, int(block_s / _block(s, 2))) for lib, s in steps.items()}
        times = {lib: [] for lib in steps}
        for _ in range(rounds):
            for lib, s in steps.items():
                times[lib].append(_block(s, n[lib]))
        ratio = statistics.median(a / b for a, b in zip(times["staged"], times["torch"]))
        out[name] = (
            statistics.median(times["staged"]) * 1e6,
            statistics.median(times["torch"]) * 1e6,
            ratio,
        )
    return out


def report(results, min_ratio=0.0):
    print("| op | staged µs | torch µs | ratio to torch |")
    print("| --- | ---: | ---: | ---: |")
    rows = sorted(results.items(), key=lambda kv: -kv[1][2] if isinstance(kv[1], tuple) else 0)
    for name, r in rows:
        if isinstance(r, str):
            print(f"| {name} | {r} | | |")
        elif r[2] >= min_ratio:
            print(f"| {name} | {r[0]:.0f} | {r[1]:.0f} | {r[2]:.2f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ops", nargs="*", help="ops to time (default: all)")
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--min-ratio", type=float, default=0.0)
    a = p.parse_args()
    torch.set_num_threads(1)
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    names = a.ops or list(_ops(torch))
    unknown = set(names) - set(_ops(torch))
    if unknown:
        p.error(f"unknown ops {sorted(unknown)}; known: {', '.join(_ops(torch))}")
    print(
        f"op(x).sum() forward+backward, x {a.size} x {a.size} float32, one thread, "
        f"{a.rounds} rounds, {time.strftime('%Y-%m-%d %H:%M')}{load_warning()}"
    )
    report(sweep(names, a.size, a.rounds), a.min_ratio)


if __name__ == "__main__":
    main()
