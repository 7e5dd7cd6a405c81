"""ms per Hessian-vector product of an MLP loss (64-128-10, tanh, MSE) with respect to its
weights: staged eager (double backward, and forward-over-reverse), staged compiled
(double backward traced into one IREE module), torch (double backward) and JAX (jvp of
grad, jit) where installed; timed in interleaved blocks.

    python bench/hvp.py [--rounds 10] [--batch 32]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
import staged  # noqa: E402
from bench.common import quartiles  # noqa: E402
from staged.autograd import forward_ad as fwad  # noqa: E402

try:
    import torch
except ImportError:
    torch = None
try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = None

SIZES = (64, 128, 10)


def problem(batch, seed=0):
    """Weights, a direction for each, inputs and targets (float32)."""
    rng = np.random.default_rng(seed)
    ws = [
        (rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32)
        for i, o in zip(SIZES[:-1], SIZES[1:])
    ]
    vs = [rng.standard_normal(w.shape).astype(np.float32) for w in ws]
    x = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
    y = rng.standard_normal((batch, SIZES[-1])).astype(np.float32)
    return ws, vs, x, y


def loss_fn(w1, w2, x, y):  # the same code for staged, torch and jax.numpy arrays
    return (((x @ w1).tanh() @ w2 - y) ** 2).mean()


def _double_backward(lib):
    def hvp(w1, w2, v1, v2, x, y):
        g1, g2 = lib.autograd.grad(loss_fn(w1, w2, x, y), (w1, w2), create_graph=True)
        return lib.autograd.grad((g1 * v1).sum() + (g2 * v2).sum(), (w1, w2))

    return hvp


def make_staged_eager(ws, vs, x, y):
    args = [staged.tensor(w, requires_grad=True) for w in ws] + [
        staged.tensor(a) for a in (*vs, x, y)
    ]
    return lambda: _double_backward(staged)(*args)


def make_staged_fwd_over_rev(ws, vs, x, y):
    w1, w2 = (staged.tensor(w, requires_grad=True) for w in ws)
    v1, v2, xt, yt = (staged.tensor(a) for a in (*vs, x, y))

    def hvp():
        with fwad.dual_level():
            d1, d2 = fwad.make_dual(w1, v1), fwad.make_dual(w2, v2)
            g = staged.autograd.grad(loss_fn(d1, d2, xt, yt), (d1, d2))
            return tuple(fwad.unpack_dual(t).tangent for t in g)

    return hvp


def make_staged_compiled(ws, vs, x, y):
    args = [staged.tensor(w, requires_grad=True) for w in ws] + [
        staged.tensor(a) for a in (*vs, x, y)
    ]
    step = staged.compile(_double_backward(staged))
    return lambda: step(*args)


def make_torch(ws, vs, x, y):
    args = [torch.tensor(w, requires_grad=True) for w in ws] + [
        torch.tensor(a) for a in (*vs, x, y)
    ]
    return lambda: _double_backward(torch)(*args)


def make_jax(ws, vs, x, y):
    def loss(w, x, y):
        return ((jnp.tanh(x @ w[0]) @ w[1] - y) ** 2).mean()

    hvp = jax.jit(lambda w, v, x, y: jax.jvp(lambda w: jax.grad(loss)(w, x, y), (w,), (v,))[1])
    args = (
        tuple(map(jnp.asarray, ws)),
        tuple(map(jnp.asarray, vs)),
        jnp.asarray(x),
        jnp.asarray(y),
    )
    return lambda: hvp(*args)


IMPLS = {
    "staged eager (double backward)": make_staged_eager,
    "staged eager (forward-over-reverse)": make_staged_fwd_over_rev,
    "staged compiled (llvm-cpu)": make_staged_compiled,
}
if torch is not None:
    IMPLS["torch eager (double backward)"] = make_torch
if jax is not None:
    IMPLS["jax jit (jvp of grad)"] = make_jax


def _numpy(hv):
    return [np.asarray(h.detach() if hasattr(h, "detach") else h) for h in hv]


def bench(batch, rounds, block_s=0.15, pause=0.5):
    ws, vs, x, y = problem(batch)
    fns = {name: make(ws, vs, x, y) for name, make in IMPLS.items()}
    ref = None
    for name, fn in fns.items():  # warm-up (traces and compiles) and a sanity check
        hv = _numpy(fn())
        ref = hv if ref is None else ref
        for a, b in zip(hv, ref):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5, err_msg=name)
    reps = {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        _numpy(fn())
        reps[name] = max(3, int(block_s / (time.perf_counter() - t0)))
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            time.sleep(pause)  # OpenBLAS threads spin after a call (notes/BENCH.md)
            t0 = time.perf_counter()
            for _ in range(reps[name]):
                hv = fn()
            _numpy(hv)
            times[name].append((time.perf_counter() - t0) / reps[name] * 1e3)
    return times


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--batch", type=int, default=32)
    a = p.parse_args(argv)
    times = bench(a.batch, a.rounds)
    base = "torch eager (double backward)" if torch is not None else next(iter(IMPLS))
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"\n## HVP of an MLP {'-'.join(map(str, SIZES))} loss, batch {a.batch}, f32\n")
    print(
        f"- date: {datetime.datetime.now().isoformat(timespec='minutes')}; machine: "
        f"{platform.machine()}, nproc {os.cpu_count()}, load average {load}"
    )
    print(
        f"- numpy {np.__version__}"
        + (f", torch {torch.__version__}" if torch else "")
        + (f", jax {jax.__version__}" if jax else ", jax not installed")
    )
    print(
        f"- {a.rounds} rounds; ratio = median over rounds of (ms / {base} ms in the same "
        "round), with its quartiles; lower is faster\n"
    )
    print("| implementation | ms/HVP | ratio |\n|---|---:|---:|")
    for name, ts in times.items():
        ratios = [t / b for t, b in zip(ts, times[base])]
        q1, q2, q3 = quartiles(ratios)
        print(f"| {name} | {statistics.median(ts):.3f} | {q2:.2f} ({q1:.2f}-{q3:.2f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
