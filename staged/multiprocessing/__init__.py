"""``staged.multiprocessing``: Python's ``multiprocessing``, as ``torch.multiprocessing``
re-exports it (tensors it sends share their memory: Note [shared memory] in
eager/shared_memory.py), and torch's sharing strategies, except ``spawn``: staged's ranks
are MPI processes, which a launcher starts, so ``spawn`` fails at once naming it."""

from multiprocessing import *  # noqa: F403

_STRATEGIES = {"file_descriptor", "file_system"}
_strategy = ["file_descriptor"]


def get_all_sharing_strategies() -> set:
    """torch's two names: staged shares by file descriptor under either (below)."""
    return set(_STRATEGIES)


def get_sharing_strategy() -> str:
    return _strategy[0]


def set_sharing_strategy(new_strategy: str) -> None:
    """torch's: one of ``get_all_sharing_strategies()``. Programs choose ``file_system``
    for the limit on open files, which staged's sharing does not reach (small tensors
    share a file; a process receiving them maps each file once), so tensors go by file
    descriptor under either, and the sender lives until they are received, as under
    torch's ``file_descriptor`` (torch's ``file_system`` keeps a named file for them)."""
    if new_strategy not in _STRATEGIES:
        raise AssertionError(
            f"invalid sharing strategy {new_strategy!r}, expected one of {_STRATEGIES}"
        )
    _strategy[0] = new_strategy


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Refused: start the ranks with ``python -m staged.distributed.run`` instead (torch's
    ``spawn`` and Lightning's ``ddp_spawn``/``ddp_fork`` strategies call it)."""
    raise RuntimeError(
        f"staged.multiprocessing.{start_method}: staged's ranks are MPI processes, started by a "
        f"launcher, not by the script: run `python -m staged.distributed.run "
        f"--nproc-per-node {nprocs} script.py` (or `mpiexec -n {nprocs} python script.py`) and "
        f"call {getattr(fn, '__name__', 'fn')}(rank, ...) once in each process, with the rank "
        "from staged.distributed.get_rank() after init_process_group()"
    )


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Refused: start the ranks with ``python -m staged.distributed.run`` instead."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
