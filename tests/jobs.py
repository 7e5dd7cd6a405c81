"""Jobs started by tests (``mpiexec`` ranks, the launcher, README's commands): a job that
outlives its timeout fails its test with every process's Python stacks, and never hangs it.

``subprocess.run(timeout=...)`` is not enough: on timeout it kills only the process it
started, then reads the pipes to their end, and MPICH's ranks (each in a session of its
own, so not reached through a process group) keep them open: a hung rank hung the test,
and the CI run with it. Here the whole tree of processes is found through ``/proc``; the
leaves get SIGABRT first (``PYTHONFAULTHANDLER`` prints each thread's stack on it), then
everything left is killed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time


def run(args, *, timeout: float, env=None, input=None, **kw) -> subprocess.CompletedProcess:
    """``subprocess.run(args, capture_output=True, text=True, timeout=timeout, ...)``, but a
    timeout ends the job's whole process tree and fails the test with its output."""
    env = dict(os.environ if env is None else env, PYTHONFAULTHANDLER="1")
    stdin = subprocess.PIPE if input is not None else None
    with subprocess.Popen(
        args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw
    ) as p:
        try:
            out, err = p.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _end_tree(p.pid)
            out, err = p.communicate(timeout=60)
            raise AssertionError(
                f"{' '.join(map(str, args))} did not finish within {timeout} s; its processes "
                f"were stopped (stacks below, where Python printed them)\n"
                f"stdout: {out[-3000:]}\nstderr: {err[-12000:]}"
            ) from None
    return subprocess.CompletedProcess(args, p.returncode, out, err)


def _end_tree(root: int) -> None:
    """SIGABRT to the leaves of ``root``'s process tree (the ranks: their stacks reach the
    launcher while it still forwards output), then SIGKILL to all of it."""
    tree = _descendants(root)
    parents = set(_parents().values())
    for pid in [pid for pid in tree if pid not in parents] or [root]:
        _signal(pid, signal.SIGABRT)
    time.sleep(3)
    for pid in [*tree, root]:
        _signal(pid, signal.SIGKILL)


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (Linux's /proc; empty elsewhere)."""
    out = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(f"/proc/{name}/stat") as f:
                        stat = f.read()
                    out[int(name)] = int(stat.rpartition(")")[2].split()[1])
    return out


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)
