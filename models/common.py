"""What the example models share: the training loop with a progress bar, the eager vs
compiled step timing, the loss-curve plot and the command line.

A model module provides ``new_run(seed, lr, compile, backend) -> (model, step)``, its data
as ``(x_train, y_train, x_test, y_test)`` NumPy arrays and an ``evaluate(model, x, y)``
giving ``(label, text)``; ``main`` does the rest. With ``--ddp`` (or when started on
several ranks by ``mpiexec`` / ``python -m staged.distributed.run``) ``new_run`` is also
passed ``ddp=True`` and wraps its model with ``ddp_wrap``; ``main`` then shards the data
with ``DistributedSampler`` and only rank 0 prints and plots.
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

from models.data import batches  # noqa: E402


def launched_ranks() -> int:
    """How many ranks the launcher started (1 when run as a plain script): the variables
    ``python -m staged.distributed.run``, MPICH's and Open MPI's ``mpiexec`` set."""
    for name in ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 1


def ddp_wrap(model, ddp: bool):
    """``model`` in ``DistributedDataParallel`` when ``ddp`` (the process group started),
    else ``model`` itself."""
    if not ddp:
        return model
    import staged.distributed as dist
    from staged.nn.parallel import DistributedDataParallel

    if not dist.is_initialized():
        dist.init_process_group("gloo")  # staged: MPI; rank and size from the launcher
    return DistributedDataParallel(model)


def classification_step(model, opt, loss_fn=F.cross_entropy):
    """One training step: zero_grad, forward, loss, backward, optimizer update."""

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def shard_batches(x, y, batch_size: int, sampler):
    """Full batches of this rank's shard (``DistributedSampler``'s indices, padded so that
    every rank gets as many): the partial last batch is dropped on every rank alike."""
    idx = np.fromiter(iter(sampler), np.int64)
    for i in range(0, len(idx) - batch_size + 1, batch_size):
        yield x[idx[i : i + batch_size]], y[idx[i : i + batch_size]]


def train(model, step, data, epochs, batch_size, seed=0, progress=True, ddp=False):
    """Train for ``epochs`` over shuffled full batches of ``data[:2]``; the per-step losses
    (with ``ddp``, over this rank's shard of each epoch: ``DistributedSampler``)."""
    from tqdm import tqdm

    x, y = data[0], data[1]
    rng = np.random.default_rng(seed)
    sampler = None
    if ddp:
        from staged.utils.data import DistributedSampler

        sampler = DistributedSampler(range(len(x)), seed=seed)
    per_epoch = (len(x) if sampler is None else sampler.num_samples) // batch_size
    losses = []
    with tqdm(total=epochs * per_epoch, disable=not progress, unit="step") as bar:
        for epoch in range(epochs):
            if sampler is not None:
                sampler.set_epoch(epoch)
            for xb, yb in (
                batches(x, y, batch_size, rng)
                if sampler is None
                else shard_batches(x, y, batch_size, sampler)
            ):
                losses.append(step(staged.tensor(xb), staged.tensor(yb)).item())
                bar.update()
                bar.set_postfix(epoch=epoch + 1, loss=f"{losses[-1]:.4f}", refresh=False)
    return losses


def time_eager_vs_compiled(new_run, x, y, batch_size, lr, seed, backend, steps=20, rounds=5):
    """Median ms/step of eager and compiled steps on two same-seed models, timed in
    interleaved blocks of ``steps`` steps; also the median of per-round ratios."""
    xb, yb = staged.tensor(x[:batch_size]), staged.tensor(y[:batch_size])
    steps_by_kind = {
        "eager": new_run(seed, lr)[1],
        "compiled": new_run(seed, lr, compile=True, backend=backend)[1],
    }
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


def _world() -> int:
    import staged.distributed as dist

    return dist.get_world_size()


def plot(losses, path: Path, title: str, ylabel: str = "cross-entropy loss") -> bool:
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
    ax.set(xlabel="step", ylabel=ylabel, yscale="log", title=title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def parser(prog: str, doc: str, epochs: int, batch_size: int, lr: float):
    """The options every model's command line has, with the model's defaults."""
    p = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    p.add_argument("--compile", action="store_true", help="compile the training step with IREE")
    p.add_argument("--backend", default="llvm-cpu")
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--batch-size", type=int, default=batch_size)
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("out"))
    p.add_argument(
        "--timing-steps",
        type=int,
        default=20,
        help="steps per timed block of eager vs compiled (0: skip the timing)",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument(
        "--ddp",
        action="store_true",
        help="data-parallel: DistributedDataParallel over the ranks of mpiexec or "
        "python -m staged.distributed.run (on by itself when started on "
        "several ranks); --batch-size is per rank",
    )
    return p


def main(a, name: str, describe: str, data, new_run, evaluate) -> int:
    """Train ``new_run``'s model on ``data`` as the options ``a`` say, print the held-out
    figure from ``evaluate``, time eager vs compiled steps, plot the loss curve."""
    t_start = time.perf_counter()
    mode = f"compiled ({a.backend})" if a.compile else "eager"
    ddp = a.ddp or launched_ranks() > 1
    if not ddp:
        print(f"{describe}, batch {a.batch_size}, {a.epochs} epochs, {mode}")
        model, step = new_run(a.seed, a.lr, a.compile, a.backend)
        return _finish(a, name, mode, data, new_run, evaluate, model, step, t_start)
    import staged.distributed as dist

    model, step = new_run(a.seed, a.lr, a.compile, a.backend, ddp=True)  # starts the group
    world, rank = dist.get_world_size(), dist.get_rank()
    if rank == 0:
        print(
            f"{describe}, {mode}, DistributedDataParallel over {world} rank"
            f"{'s' if world > 1 else ''}: batch "
            f"{a.batch_size} per rank, global batch {a.batch_size * world} "
            f"({a.batch_size} x {world}), {a.epochs} epochs"
        )
    else:  # only rank 0 prints and plots
        a.no_progress, a.timing_steps = True, 0
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the rest of this process
    try:
        return _finish(a, name, mode, data, new_run, evaluate, model, step, t_start, ddp=True)
    finally:
        dist.destroy_process_group()


def _finish(a, name, mode, data, new_run, evaluate, model, step, t_start, ddp=False) -> int:
    t0 = time.perf_counter()
    losses = train(model, step, data, a.epochs, a.batch_size, a.seed, not a.no_progress, ddp)
    train_s = time.perf_counter() - t0
    label, figure = evaluate(model, data[2], data[3])
    print(f"{label}: {figure} ({len(data[2])} held-out samples)")

    timing = None
    if a.timing_steps > 0 and ddp:
        print(
            "step time: not timed with --ddp (eager vs compiled is a one-process "
            "comparison: run without --ddp, or bench/ddp.py)"
        )
    elif a.timing_steps > 0:
        timing = time_eager_vs_compiled(
            new_run, data[0], data[1], a.batch_size, a.lr, a.seed, a.backend, steps=a.timing_steps
        )
        print(
            f"step time, batch {a.batch_size} (median of 5 interleaved blocks of "
            f"{a.timing_steps}): eager {timing[0]:.3f} ms, compiled {timing[1]:.3f} ms, "
            f"eager/compiled {timing[2]:.1f}x"
        )

    png = a.out / f"{name}_loss.png"
    import staged.distributed as dist

    on_rank0 = not ddp or dist.get_rank() == 0  # only rank 0 plots
    wrote = on_rank0 and plot(
        losses, png, f"{name}, {mode}" + (f", DDP x{_world()}" if ddp else "")
    )
    print("\nsummary")
    print(
        f"  training:  {len(losses)} steps in {train_s:.1f} s"
        f"{' (incl. tracing and compiling)' if a.compile else ''}, "
        f"loss {losses[0]:.3f} -> {np.mean(losses[-10:]):.4f}"
        + (f" (rank 0's shard; global batch {a.batch_size * _world()})" if ddp else "")
    )
    print(f"  {label}: {figure}")
    if timing:
        print(
            f"  step time: eager {timing[0]:.3f} ms, compiled {timing[1]:.3f} ms ({timing[2]:.1f}x)"
        )
    if wrote:
        print(f"  loss plot: {png}")
    print(f"  total:     {time.perf_counter() - t_start:.1f} s")
    return 0
