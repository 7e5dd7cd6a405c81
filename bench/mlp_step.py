"""ms/step of one MLP 784-256-256-10 SGD training step: staged eager, staged compiled
(IREE llvm-cpu), NumPy by hand and torch eager, timed in interleaved blocks.

    python bench/mlp_step.py [--rounds 12] [--batch-sizes 32 256]

See bench/README.md for how to read the ratios.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from bench.common import environment, interleaved, item, ratio_table  # noqa: E402
import staged  # noqa: E402
import staged.nn.functional as F  # noqa: E402
from staged import nn, optim  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

SIZES = (784, 256, 256, 10)
LR = 0.01


def init_params(seed=0):
    """[(W, b), ...] in PyTorch's Linear layout (W: out x in), float32."""
    rng = np.random.default_rng(seed)
    out = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        k = 1 / np.sqrt(n_in)
        out.append(
            (
                rng.uniform(-k, k, (n_out, n_in)).astype(np.float32),
                rng.uniform(-k, k, n_out).astype(np.float32),
            )
        )
    return out


# --- implementations: each make_*(params, x, y) returns a zero-argument step -> loss ---


def _staged_model(params):
    layers = []
    for W, b in params:
        lin = nn.Linear(W.shape[1], W.shape[0])
        with staged.no_grad():
            lin.weight.copy_(staged.tensor(W))
            lin.bias.copy_(staged.tensor(b))
        layers += [lin, nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    opt = optim.SGD(model.parameters(), lr=LR)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def make_staged_eager(params, x, y):
    step, xs, ys = _staged_model(params), staged.tensor(x), staged.tensor(y)
    return lambda: step(xs, ys)


def make_staged_compiled(params, x, y):
    step = staged.compile(_staged_model(params), backend="llvm-cpu")
    xs, ys = staged.tensor(x), staged.tensor(y)
    return lambda: step(xs, ys)


def make_staged_compiled_dynamic(params, x, y):
    """The same step compiled once for every batch size (``dynamic=True``)."""
    step = staged.compile(_staged_model(params), backend="llvm-cpu", dynamic=True)
    xs, ys = staged.tensor(x), staged.tensor(y)
    return lambda: step(xs, ys)


def make_numpy(params, x, y):
    """Forward, backward and SGD written directly in NumPy (same math as the others)."""
    ps = [(W.copy(), b.copy()) for W, b in params]
    onehot = np.eye(SIZES[-1], dtype=np.float32)[y]
    n = len(x)

    def step():
        acts = [x]
        for i, (W, b) in enumerate(ps):
            h = acts[-1] @ W.T + b
            acts.append(np.maximum(h, 0) if i < len(ps) - 1 else h)
        z = acts[-1] - acts[-1].max(1, keepdims=True)
        e = np.exp(z)
        s = e.sum(1, keepdims=True)
        loss = float(np.mean(np.log(s[:, 0]) - (z * onehot).sum(1)))
        g = (e / s - onehot) / n
        for i in range(len(ps) - 1, -1, -1):
            W, b = ps[i]
            gW, gb = g.T @ acts[i], g.sum(0)
            if i:
                g = (g @ W) * (acts[i] > 0)
            W -= LR * gW
            b -= LR * gb
        return loss

    return step


def make_torch(params, x, y):
    layers = []
    for W, b in params:
        lin = torch.nn.Linear(W.shape[1], W.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(W))
            lin.bias.copy_(torch.from_numpy(b))
        layers += [lin, torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        return loss

    return step


IMPLS = {
    "staged eager": make_staged_eager,
    "staged compiled": make_staged_compiled,
    "staged compiled dynamic": make_staged_compiled_dynamic,
    "numpy by hand": make_numpy,
}
if torch is not None:
    IMPLS["torch eager"] = make_torch


def bench(batch, rounds, seed=0):
    """Per-implementation lists of ms/step, one entry per round; also a loss sanity check."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, SIZES[0]), dtype=np.float32)
    y = rng.integers(0, SIZES[-1], batch)
    params = init_params(seed)
    steps = {name: make(params, x, y) for name, make in IMPLS.items()}
    first = {name: [item(s()) for _ in range(3)] for name, s in steps.items()}  # warm-up
    ref = first["numpy by hand"]
    for name, losses in first.items():  # same math: same losses over the first steps
        if not np.allclose(losses, ref, rtol=1e-4, atol=1e-5):
            raise AssertionError(f"{name} losses {losses} differ from NumPy's {ref}")
    return interleaved(steps, rounds)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 256])
    a = p.parse_args(argv)

    base = "torch eager" if torch is not None else "numpy by hand"
    results = {}
    for batch in a.batch_sizes:
        print(f"batch {batch}: {a.rounds} rounds of {', '.join(IMPLS)} ...", flush=True)
        results[batch] = bench(batch, a.rounds)
    print(f"\n## MLP {'-'.join(map(str, SIZES))} SGD step, f32\n")
    print(environment(a.rounds, base, torch) + "\n")
    print(ratio_table({f"b={b}": r for b, r in results.items()}, IMPLS, base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
