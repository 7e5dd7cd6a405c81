"""ms/step of data-parallel training (DistributedDataParallel over MPI) of the MLP and the
transformer from models/: 1 process against 2 processes of 1 thread each on this machine
(weak scaling: the same per-rank batch), the bytes all-reduced per step and a bare mpi4py
Allreduce of the same buckets, timed in interleaved blocks.

    python bench/ddp.py [--rounds 8] [--workloads mlp transformer] [--bucket-cap-mb MB]

runs the 1-process measurements, then starts itself as ``mpiexec -n 2 python bench/ddp.py
--worker`` for the 2-rank ones, and prints one table. See bench/README.md.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # 1 thread per rank (before NumPy)
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout
from bench.common import environment, item, quartiles  # noqa: E402
import staged  # noqa: E402
import staged.distributed as dist  # noqa: E402
from staged import optim  # noqa: E402
from staged.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from models import mlp, transformer  # noqa: E402
from models.common import classification_step  # noqa: E402

BATCH = 32  # per rank, both workloads (the models' default batch)
KINDS = ("eager", "compiled")


def workload(name: str, seed: int):
    """(model, optimizer factory, loss, x, y) for one rank: the models' own definitions."""
    rng = np.random.default_rng(seed)
    if name == "mlp":  # 64-128-128-10, SGD momentum 0.9 (models/mlp.py)
        model = mlp.build(seed)
        x = rng.standard_normal((BATCH, 64), dtype=np.float32)
        y = rng.integers(0, 10, BATCH)
        return model, lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9), None, x, y
    vocab = len(transformer.load_corpus()[4])  # d=64, 4 heads, 2 blocks, 32 chars, AdamW
    model = transformer.build(vocab, seed)
    x, y = rng.integers(0, vocab, (BATCH, 32)), rng.integers(0, vocab, (BATCH, 32))
    return model, lambda ps: optim.AdamW(ps, lr=3e-3), transformer.lm_loss, x, y


def make_step(name: str, ddp: bool, compiled: bool = False, bucket_cap_mb=None):
    """A zero-argument training step on this rank's fixed batch (a seed per rank), and the
    DDP wrapper (None without ``ddp``; ``bucket_cap_mb``: DDP's, None for its default)."""
    seed = dist.get_rank() if dist.is_initialized() else 0
    model, make_opt, loss_fn, x, y = workload(name, seed)
    wrapped = DDP(model, bucket_cap_mb=bucket_cap_mb) if ddp else None
    net = wrapped if ddp else model
    kw = {} if loss_fn is None else {"loss_fn": loss_fn}
    step = classification_step(net, make_opt(net.parameters()), **kw)
    if compiled:
        step = staged.compile(step, backend="llvm-cpu")
    xs, ys = staged.tensor(x), staged.tensor(y)
    return (lambda: step(xs, ys)), wrapped


def compiled_ddp_works() -> str | None:
    """None when ``staged.compile`` of a DDP step runs here, else why not (one line)."""
    try:
        step, _ = make_step("mlp", ddp=True, compiled=True)
        item(step())
        return None
    except Exception as e:  # noqa: BLE001 - reported in the table
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"


def bucket_sizes(wrapped) -> list[int]:
    """Elements per DDP bucket (float32 here), in the order DDP all-reduces them."""
    return [sum(p.numel() for p in b.params) for b in wrapped._buckets]


def bare_allreduce(sizes, comm, mpi):
    """A step of bare mpi4py: an in-place Iallreduce per bucket, then wait for all."""
    bufs = [np.ones(n, np.float32) for n in sizes]

    def step():
        mpi.Request.Waitall([comm.Iallreduce(mpi.IN_PLACE, b, op=mpi.SUM) for b in bufs])
        return 0.0

    return step


def sleep_barrier(comm):
    """A barrier that sleeps while it waits, so an idle rank leaves its core free."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(5e-4)


def timed_rounds(blocks: dict, rounds: int, comm=None, pause=0.3, block_s=0.15) -> dict:
    """{name: [ms/step per round]}: blocks run in turn (A B C A B C ...), every rank in
    lockstep. ``blocks`` maps a name to ``(step, ranks)``: the ranks that run it (the
    others wait in a sleeping barrier). Steps per block are calibrated on rank 0; a
    block's time is that of its slowest rank."""
    rank = comm.Get_rank() if comm else 0
    if comm:
        from mpi4py.MPI import MAX
    n_steps = {}
    for name, (step, ranks) in blocks.items():
        if rank in ranks:
            t0 = time.perf_counter()
            item(step())
            n = max(3, int(block_s / max(time.perf_counter() - t0, 1e-6)))
        n_steps[name] = comm.bcast(n if rank == 0 else None) if comm else n
        if comm:
            sleep_barrier(comm)
    times = {name: [] for name in blocks}
    for _ in range(rounds):
        for name, (step, ranks) in blocks.items():
            time.sleep(pause)
            if comm:
                sleep_barrier(comm)
            elapsed = 0.0
            if rank in ranks:
                t0 = time.perf_counter()
                for _ in range(n_steps[name]):
                    loss = step()
                item(loss)
                elapsed = time.perf_counter() - t0
            if comm:  # the slowest rank's time: lockstep steps wait for it
                req = comm.Iallreduce(np.array(elapsed), out := np.empty(()), op=MAX)
                while not req.Test():
                    time.sleep(5e-4)
                elapsed = float(out)
            times[name].append(elapsed / n_steps[name] * 1e3)
    return times


def worker(a) -> None:
    """On each of the 2 ranks (under mpiexec): interleaved blocks of one rank computing
    alone, both computing without communication, the DDP step, and the bare all-reduce of
    DDP's buckets. Rank 0 writes ``{workload: {block: [ms per round]}}`` to ``a.out``."""
    from mpi4py import MPI

    dist.init_process_group("mpi")
    comm, rank = MPI.COMM_WORLD, dist.get_rank()
    results = {}
    for name in a.workloads:
        sizes = bucket_sizes(make_step(name, ddp=True, bucket_cap_mb=a.bucket_cap_mb)[1])
        blocks = {"bare Allreduce": (bare_allreduce(sizes, comm, MPI), {0, 1})}
        first = {}
        for kind in KINDS[: 2 if a.compiled else 1]:
            local = make_step(name, ddp=False, compiled=kind == "compiled")[0]
            ddp = make_step(name, True, kind == "compiled", a.bucket_cap_mb)[0]
            blocks.update(
                {
                    f"{kind} 1 rank alone": (local, {0}),
                    f"{kind} 2 ranks, no comm": (local, {0, 1}),
                    f"{kind} DDP": (ddp, {0, 1}),
                }
            )
            first[kind] = [item(ddp()) for _ in range(3)]  # warm-up, and a sanity check
            for _ in range(3):
                item(local())
        if "compiled" in first and not np.allclose(
            first["compiled"], first["eager"], rtol=1e-4, atol=1e-5
        ):
            raise AssertionError(
                f"{name}: compiled DDP losses {first['compiled']} differ "
                f"from eager DDP's {first['eager']}"
            )
        for _ in range(3):
            blocks["bare Allreduce"][0]()
        times = timed_rounds(blocks, a.rounds, comm)
        if rank == 0:
            results[name] = {"times": times, "buckets": sizes}
    if rank == 0:
        Path(a.out).write_text(json.dumps(results))
    dist.destroy_process_group()


def median_ratio(num, den) -> str:
    ratios = [n / d for n, d in zip(num, den)]
    q1, q2, q3 = quartiles(ratios)
    return f"{q2:.2f} ({q1:.2f}-{q3:.2f})"


def med(xs) -> str:
    return f"{statistics.median(xs):.3f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument(
        "--workloads", nargs="+", default=["mlp", "transformer"], choices=["mlp", "transformer"]
    )
    p.add_argument(
        "--bucket-cap-mb",
        type=float,
        help="DDP's bucket_cap_mb (default: DDP's, 25 MB with a first bucket of 1 MB: one "
        "bucket for both models); smaller makes several, whose all-reduces overlap backward",
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--compiled", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        worker(a)
        return 0

    dist.init_process_group("mpi")  # a world of one: DDP's overhead without peers
    why_not = compiled_ddp_works()  # compiled steps with collectives: a world of one here
    one = {}
    print(f"1 process, {a.rounds} rounds ...", flush=True)
    kinds = KINDS if why_not is None else KINDS[:1]
    for name in a.workloads:
        blocks = {}
        for kind in kinds:
            blocks[f"{kind} step"] = (make_step(name, False, kind == "compiled")[0], {0})
            blocks[f"{kind} DDP (world 1)"] = (
                make_step(name, True, kind == "compiled", a.bucket_cap_mb)[0],
                {0},
            )
        for step, _ in blocks.values():
            for _ in range(3):
                item(step())
        one[name] = timed_rounds(blocks, a.rounds)

    print(f"2 ranks (mpiexec -n 2, 1 thread each), {a.rounds} rounds ...", flush=True)
    mpiexec = Path(sys.executable).parent / "mpiexec"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ranks.json"
        cmd = [
            str(mpiexec if mpiexec.exists() else "mpiexec"),
            "-n",
            "2",
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            "--rounds",
            str(a.rounds),
            "--out",
            str(out),
            "--workloads",
            *a.workloads,
            *(["--compiled"] if why_not is None else []),
            *(["--bucket-cap-mb", str(a.bucket_cap_mb)] if a.bucket_cap_mb else []),
        ]
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        subprocess.run(cmd, check=True, env=env, timeout=600)
        two = json.loads(out.read_text())

    print(
        "\n## DistributedDataParallel over MPI: weak scaling, batch "
        f"{BATCH} per rank, 1 thread per rank, f32\n"
    )
    print(environment(a.rounds, "the sum of its round's compute and bare all-reduce"))
    print(
        "- compiled DDP step (staged.compile, llvm-cpu): "
        + ("measured" if why_not is None else f"n/a: not yet ({why_not})")
        + "\n"
    )
    print(
        "| workload | step | bytes all-reduced/step (buckets) | 1 process ms/step | DDP "
        "world-1 ms/step | 1 rank alone ms/step | 2 ranks no-comm ms/step | bare Allreduce "
        "ms | DDP 2 ranks ms/step | DDP / (no-comm + Allreduce) | DDP / 1 rank alone |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in a.workloads:
        t, buckets = two[name]["times"], two[name]["buckets"]
        allreduce = t["bare Allreduce"]
        for kind in KINDS:
            if f"{kind} DDP" not in t:
                print(f"| {name} | {kind} | n/a: not yet |" + " |" * 8)
                continue
            compute, ddp = t[f"{kind} 2 ranks, no comm"], t[f"{kind} DDP"]
            base = [c + r for c, r in zip(compute, allreduce)]
            print(
                f"| {name} | {kind} | {4 * sum(buckets) / 1e3:.1f} kB ({len(buckets)}) | "
                f"{med(one[name][f'{kind} step'])} | {med(one[name][f'{kind} DDP (world 1)'])}"
                f" | {med(t[f'{kind} 1 rank alone'])} | {med(compute)} | {med(allreduce)} | "
                f"{med(ddp)} | {median_ratio(ddp, base)} | "
                f"{median_ratio(ddp, t[f'{kind} 1 rank alone'])} |"
            )
    print(
        "\nratio columns: median over rounds of the per-round ratio (quartiles); the "
        "target is DDP / (no-comm + Allreduce) <= 1.10. '1 process' and 'DDP world-1' ran "
        "in a process of its own, before the 2-rank job; every other column is interleaved "
        "in the 2-rank job, each block timed by its slowest rank ('1 rank alone': rank 1 sleeps "
        "in a barrier meanwhile)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
