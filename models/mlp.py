"""An MLP classifier for scikit-learn's digits, trained eagerly or with a compiled step.

    python -m models.mlp --compile --backend llvm-cpu
"""
from __future__ import annotations

import os

# OpenBLAS threads spin ~0.1 s after each call and slow a following IREE call ~3x when
# eager and compiled steps share a process; must be set before NumPy is imported.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import staged  # noqa: E402
import staged.nn.functional as F  # noqa: E402
from staged import nn, optim  # noqa: E402

from models.data import batches, load_digits  # noqa: E402


def build(seed: int = 0, hidden: int = 128):
    """A fresh 64-hidden-hidden-10 MLP and its SGD-with-momentum optimizer, seeded."""
    staged.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10))


def export_spec(batch_size: int = 32, seed: int = 0) -> dict:
    """What `staged export-onnx` exports: keyword arguments of ``staged.onnx.export``
    (loss and gradients of a fresh seeded model, dynamic batch), plus ``optimizer``, the
    factory used with ``--training-step``."""
    model = build(seed)
    x, y = staged.randn(batch_size, 64), staged.randint(0, 10, (batch_size,))
    return dict(fn_or_module=model, example_args=(x, y), loss_fn=F.cross_entropy,
                dynamic_axes={"input": {0: "batch"}, "target": {0: "batch"}},
                optimizer=lambda params: optim.SGD(params, lr=0.05))


def make_step(model, opt):
    """One training step: forward, cross-entropy, backward, optimizer update."""
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def new_run(seed=0, lr=0.05, compile=False, backend="llvm-cpu"):
    """(model, step) for a fresh seeded model; `step` is compiled when asked."""
    model = build(seed)
    step = make_step(model, optim.SGD(model.parameters(), lr=lr, momentum=0.9))
    return model, (staged.compile(step, backend=backend) if compile else step)


def train(model, step, data, epochs, batch_size, seed=0, progress=True):
    """Train for `epochs` over shuffled full batches; return the per-step losses."""
    from tqdm import tqdm

    x, y = data[0], data[1]
    rng = np.random.default_rng(seed)
    per_epoch = len(x) // batch_size
    losses = []
    with tqdm(total=epochs * per_epoch, disable=not progress, unit="step") as bar:
        for epoch in range(epochs):
            for xb, yb in batches(x, y, batch_size, rng):
                losses.append(step(staged.tensor(xb), staged.tensor(yb)).item())
                bar.update()
                bar.set_postfix(epoch=epoch + 1, loss=f"{losses[-1]:.4f}", refresh=False)
    return losses


def accuracy(model, x, y) -> float:
    """Held-out accuracy of the model's argmax prediction."""
    with staged.no_grad():
        pred = model(staged.tensor(x)).argmax(1).numpy()
    return float((pred == y).mean())


def time_eager_vs_compiled(x, y, batch_size, lr, seed, backend, steps=20, rounds=5):
    """Median ms/step of eager and compiled steps on two same-seed models, timed in
    interleaved blocks of `steps` steps; also the median of per-round ratios."""
    xb, yb = staged.tensor(x[:batch_size]), staged.tensor(y[:batch_size])
    steps_by_kind = {"eager": new_run(seed, lr)[1],
                     "compiled": new_run(seed, lr, compile=True, backend=backend)[1]}
    for step in steps_by_kind.values():  # warm-up (the compiled one traces twice)
        for _ in range(3):
            step(xb, yb).item()
    times = {k: [] for k in steps_by_kind}
    for _ in range(rounds):
        for kind, step in steps_by_kind.items():
            time.sleep(0.5)  # let BLAS threads go idle between blocks (see BENCH.md)
            t0 = time.perf_counter()
            for _ in range(steps):
                loss = step(xb, yb)
            loss.item()
            times[kind].append((time.perf_counter() - t0) / steps * 1e3)
    ratio = statistics.median(e / c for e, c in zip(times["eager"], times["compiled"]))
    return statistics.median(times["eager"]), statistics.median(times["compiled"]), ratio


def plot(losses, path: Path, title: str) -> bool:
    """Write a loss-curve PNG; False (and a message) when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: skipping the loss-curve plot")
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(losses, lw=0.8)
    ax.set(xlabel="step", ylabel="cross-entropy loss", yscale="log", title=title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.mlp", description=__doc__.splitlines()[0])
    p.add_argument("--compile", action="store_true", help="compile the training step with IREE")
    p.add_argument("--backend", default="llvm-cpu")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("out"))
    p.add_argument("--timing-steps", type=int, default=20,
                   help="steps per timed block of eager vs compiled (0: skip the timing)")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)

    t_start = time.perf_counter()
    data = load_digits(seed=a.seed)
    mode = f"compiled ({a.backend})" if a.compile else "eager"
    print(f"digits: {len(data[0])} train / {len(data[2])} test; MLP 64-128-128-10, "
          f"SGD lr={a.lr} momentum=0.9, batch {a.batch_size}, {a.epochs} epochs, {mode}")
    model, step = new_run(a.seed, a.lr, a.compile, a.backend)
    t0 = time.perf_counter()
    losses = train(model, step, data, a.epochs, a.batch_size, a.seed, not a.no_progress)
    train_s = time.perf_counter() - t0
    acc = accuracy(model, data[2], data[3])
    print(f"held-out accuracy: {acc:.2%} ({len(data[2])} images)")

    timing = None
    if a.timing_steps > 0:
        timing = time_eager_vs_compiled(data[0], data[1], a.batch_size, a.lr, a.seed, a.backend,
                                        steps=a.timing_steps)
        print(f"step time, batch {a.batch_size} (median of 5 interleaved blocks of "
              f"{a.timing_steps}): eager {timing[0]:.3f} ms, compiled {timing[1]:.3f} ms, "
              f"eager/compiled {timing[2]:.1f}x")

    png = a.out / "mlp_loss.png"
    wrote = plot(losses, png, f"digits MLP, {mode}")
    print("\nsummary")
    print(f"  training:  {len(losses)} steps in {train_s:.1f} s"
          f"{' (incl. tracing and compiling)' if a.compile else ''}, "
          f"loss {losses[0]:.3f} -> {np.mean(losses[-10:]):.4f}")
    print(f"  accuracy:  {acc:.2%}")
    if timing:
        print(f"  step time: eager {timing[0]:.3f} ms, compiled {timing[1]:.3f} ms "
              f"({timing[2]:.1f}x)")
    if wrote:
        print(f"  loss plot: {png}")
    print(f"  total:     {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
