"""``staged.multiprocessing``: Python's ``multiprocessing``, as ``torch.multiprocessing``
re-exports it, except ``spawn``: staged's ranks are MPI processes, which a launcher
starts, so ``spawn`` fails at once naming it."""

from multiprocessing import *  # noqa: F403


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Refused: start the ranks with ``python -m staged.distributed.run`` instead."""
    raise RuntimeError(
        f"staged.multiprocessing.spawn: staged's ranks are MPI processes, started by a "
        f"launcher, not by the script: run `python -m staged.distributed.run "
        f"--nproc-per-node {nprocs} script.py` (or `mpiexec -n {nprocs} python script.py`) and "
        f"call {getattr(fn, '__name__', 'fn')}(rank, ...) once in each process, with the rank "
        "from staged.distributed.get_rank() after init_process_group()"
    )
