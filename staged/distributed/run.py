"""``python -m staged.distributed.run``: torchrun's common flags, on MPI's ``mpiexec``.

    python -m staged.distributed.run --nproc-per-node 4 train.py --epochs 3
    python -m staged.distributed.run --nnodes 2 --nproc-per-node 4 --hostfile hosts train.py

starts ``nnodes * nproc-per-node`` ranks with ``mpiexec`` (the one next to this Python,
else the first on PATH); ``--hostfile`` is MPICH's (``host:slots`` a line); without it,
Hydra takes the hosts from a Slurm or PBS allocation, else runs them all here. Each rank
runs the script with ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE`` set
as torchrun sets them, read from the variables the MPI launcher gives it.
"""

from __future__ import annotations

import argparse
import os
import runpy
import shutil
import sys

# (rank, size, local rank, local size) as MPICH's Hydra and Open MPI name them
LAUNCHER_VARS = (
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    (
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
)
RANK_FLAG = "--as-rank"  # how mpiexec runs this module on each rank


def mpiexec() -> str:
    """The ``mpiexec`` next to ``sys.executable`` (the mpich wheel's), else on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = here if os.access(here, os.X_OK) else shutil.which("mpiexec")
    if found is None:
        raise SystemExit(
            "staged.distributed.run: no mpiexec next to Python or on PATH: "
            "pip install 'staged[distributed]' (the mpich and mpi4py wheels)"
        )
    return found


def parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m staged.distributed.run",
        description="Start a script on several ranks with mpiexec.",
    )
    p.add_argument(
        "--nproc-per-node",
        "--nproc_per_node",
        type=int,
        default=1,
        help="ranks per node (default 1)",
    )
    p.add_argument("--nnodes", type=int, default=1, help="nodes (default 1)")
    p.add_argument("--hostfile", help="MPICH hostfile: the nodes, `host[:slots]` a line")
    p.add_argument(
        "-m", "--module", action="store_true", help="run the script as a module, as python -m"
    )
    p.add_argument("script", help="the training script (or module, with -m)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    return p.parse_args(argv)


def command(a) -> list:
    """The mpiexec command line for parsed arguments ``a``."""
    cmd = [mpiexec(), "-n", str(a.nnodes * a.nproc_per_node), "-ppn", str(a.nproc_per_node)]
    if a.hostfile:
        cmd += ["-f", a.hostfile]
    return cmd + [
        sys.executable,
        "-m",
        "staged.distributed.run",
        RANK_FLAG,
        *(["-m"] if a.module else []),
        a.script,
        *a.args,
    ]


def as_rank(argv) -> None:
    """On each rank: set torchrun's variables from the MPI launcher's, run the script."""
    names = next((v for v in LAUNCHER_VARS if v[0] in os.environ), None)
    if names is None:
        raise SystemExit(f"staged.distributed.run {RANK_FLAG}: not started by mpiexec")
    for ours, theirs in zip(("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"), names):
        os.environ[ours] = os.environ.get(theirs, "0" if ours == "LOCAL_RANK" else "1")
    module = argv[0] == "-m"
    target, *args = argv[1:] if module else argv
    sys.argv = [target, *args]
    if module:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        runpy.run_path(target, run_name="__main__")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [RANK_FLAG]:
        return as_rank(argv[1:])
    cmd = command(parse(argv))
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main()
