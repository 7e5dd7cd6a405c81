"""The process group over MPI (mpi4py): collectives started non-blocking, waited by polling.

Note [waits]: a blocking MPI call waits forever for a rank that died or never calls the
collective, so every wait polls its request and fails after the group's timeout with an
error naming this rank and the collective; the error, uncaught, aborts the job
(``abort_on_error``). Polls run back to back (yielding the core) for ``SPIN_S`` before
they sleep: MPI progresses a collective only while its ranks are in MPI calls. Before a
checked collective the ranks exchange what they are about to do (the op, dtype and shape:
13 int64 each, one ``Iallgather``, microseconds on a machine), so that mismatched calls
fail with an error naming the ranks instead of hanging or reducing garbage. DDP's bucket all-reduces skip it: it checks the parameters once.

Note [two communicators]: the checks (and ``barrier``, itself a check) run on a duplicate
of the communicator, the data on the original, and each check's row starts with a hash of
what is called, so a rank that skips a step can never pair its check with another rank's
unchecked bucket all-reduce: MPI matches collectives only by their order on a
communicator, and that pairing gave the all-reduce 96 bytes of the check's integers as a
peer's gradient (with 3 ranks, one raising and skipping its backward, ranks 0 and 2 ended
the backward with different gradients, max 0.114 and 0.275). Now the rank in the
all-reduce waits on the data communicator and the others on the control one, until the
timeout names each; ranks that reach different checks (a barrier against a DDP forward)
fail at once, each named with what it called.
"""

from __future__ import annotations

import os
import sys
import time
import zlib
from datetime import timedelta

import numpy as np

from ..autodiff.collective import REDUCE_OPS

ABORT_GRACE = 0.5  # seconds the launcher gets to forward an aborting rank's output
# MPICH advances a collective only inside an MPI call on every rank, so a rank asleep
# between polls holds up its peers: a DDP step of the MLP took 3.3 ms with sleeps from the
# first poll, where its compute and a bare all-reduce take 0.7 ms. Polls back to back (the
# core yielded between them) for this long, then sleep.
SPIN_S = 0.05
_yield = getattr(os, "sched_yield", lambda: time.sleep(0))

KINDS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter")
WIDTH = 13  # int64 per rank in a check: what is called (a hash), then its arguments
_CALLS: dict[int, tuple] = {}  # a check's hash -> (what, describe), for naming others' calls


def connect(timeout: timedelta) -> MPIGroup:
    """The group of every process of this MPI job (MPI is initialised here, once)."""
    from mpi4py import MPI  # deferred: importing mpi4py initialises MPI

    return MPIGroup(MPI, MPI.COMM_WORLD, timeout)


class Request:
    """A started collective: ``wait()`` gives its result (a NumPy array)."""

    def __init__(self, group, what, req, out, finish=None):
        self.group, self.what, self.req, self.out, self.finish = group, what, req, out, finish

    def test(self) -> bool:
        """Whether it has completed (asking also lets MPI progress it)."""
        return self.req is None or bool(self.req.Test())

    def wait(self) -> np.ndarray:
        if self.req is not None:
            self.group.wait(self.req, self.what)
            self.req = None
            if self.finish is not None:
                self.finish(self.out)
        return self.out


class MPIGroup:
    """Ranks ``0 .. size - 1`` of an MPI communicator, with a timeout on every wait."""

    def __init__(self, mpi, comm, timeout: timedelta):
        self.mpi, self.comm, self.timeout = mpi, comm, timeout
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.control = comm.Dup()  # the checks' (Note [two communicators])
        self.ops = {
            "sum": mpi.SUM,
            "avg": mpi.SUM,
            "max": mpi.MAX,
            "min": mpi.MIN,
            "product": mpi.PROD,
        }

    def run(self, name, x, params):
        """What the primitives' impls call: a checked collective, waited for."""
        return self.start(name, x, params).wait()

    def start(self, name, x, params, checked=True) -> Request:
        """Start collective ``name`` on NumPy ``x``; the result is a new array."""
        x = np.asarray(x, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        op = params.get("op")
        if checked:
            arg = REDUCE_OPS.index(op) if op is not None else params.get("src", -1)
            self.check(
                name, [KINDS.index(name), arg, ord(x.dtype.char), x.ndim, *x.shape], _describe
            )
        if op == "avg" and x.dtype.kind not in "fc":
            raise RuntimeError(f"{name}: ReduceOp.AVG needs a floating point tensor, got {x.dtype}")
        mpi_op = self.ops[op] if op is not None else None
        if x.dtype == np.bool_ and op is not None:  # MPI reduces bools with logical ops
            mpi_op = self.mpi.LOR if op in ("sum", "max") else self.mpi.LAND
        finish = _divide(self.size) if op == "avg" else None
        if name == "all_reduce":
            out = x.copy()
            req = self.comm.Iallreduce(self.mpi.IN_PLACE, out, op=mpi_op)
        elif name == "broadcast":
            out = x.copy()
            req = self.comm.Ibcast(out, root=params["src"])
        elif name == "all_gather":
            out = np.empty((self.size, *x.shape), x.dtype)
            req = self.comm.Iallgather(x, out)
        else:
            out = np.empty(x.shape[1:], x.dtype)
            req = self.comm.Ireduce_scatter_block(x, out, op=mpi_op)
        return Request(self, name, req, out, finish)

    def check(self, what: str, values, describe) -> None:
        """Fail on every rank, naming the ranks, unless all pass equal ``values`` (at most
        WIDTH - 1 ints; ``describe(row)`` shows one rank's in the message)."""
        key = _key(what, describe)
        mine = np.full(WIDTH, -1, np.int64)
        mine[0] = key
        mine[1 : 1 + min(len(values), WIDTH - 1)] = values[: WIDTH - 1]
        rows = np.empty((self.size, WIDTH), np.int64)
        self.wait(self.control.Iallgather(mine, rows), f"{what} (checking the ranks agree)")
        differ = [r for r in range(self.size) if not np.array_equal(rows[r], rows[0])]
        if not differ:
            return
        if all(row[0] == key for row in rows):
            shown = "; ".join(f"rank {r}: {describe(rows[r][1:])}" for r in [0, *differ[:3]])
            raise RuntimeError(
                f"{what}: the ranks called it with different arguments "
                f"({shown}); every rank must pass the same shape and dtype"
            )
        shown = "; ".join(f"rank {r}: {_call(rows[r])}" for r in [0, *differ[:3]])
        raise RuntimeError(
            f"rank {self.rank} called {what}, and the ranks called different things "
            f"({shown}): every rank must call the same collectives in the same order"
        )

    def gather_bytes(self, what: str, data: bytes, src: int | None = None) -> list[bytes]:
        """Every rank's ``data`` in rank order, or with ``src`` rank ``src``'s alone (a list
        of one): the pickled objects of the object collectives, checked and waited as the
        others (Note [waits])."""
        self.check(what, [-1 if src is None else src], lambda row: f"src {row[0]}")
        mine = np.frombuffer(data, np.uint8)
        if src is not None:
            n = np.array([mine.size], np.int64)
            self.wait(self.comm.Ibcast(n, root=src), what)
            buf = mine.copy() if self.rank == src else np.empty(int(n[0]), np.uint8)
            self.wait(self.comm.Ibcast(buf, root=src), what)
            return [buf.tobytes()]
        sizes = np.empty(self.size, np.int64)
        self.wait(self.comm.Iallgather(np.array([mine.size], np.int64), sizes), what)
        counts = [int(n) for n in sizes]
        offsets = [sum(counts[:r]) for r in range(self.size)]
        out = np.empty(sum(counts), np.uint8)
        self.wait(self.comm.Iallgatherv(mine, [out, counts, offsets, self.mpi.BYTE]), what)
        return [out[o : o + n].tobytes() for o, n in zip(offsets, counts)]

    def used_anywhere(self, flags) -> np.ndarray:
        """Which of ``flags`` any rank set (DDP's map of the parameters a backward used)."""
        mine, out = np.asarray(flags, np.int64), np.zeros(len(flags), np.int64)
        self.wait(self.comm.Iallreduce(mine, out, op=self.mpi.MAX), "DDP's used-parameter map")
        return out.astype(bool)

    def barrier(self) -> None:
        """A check of nothing: it completes once every rank has called it."""
        self.check("barrier", [], lambda row: "")

    def wait(self, req, what: str) -> None:
        """Poll ``req`` until it completes or the timeout passes (Note [waits]): yielding
        the core for the first ``SPIN_S``, then sleeping up to 1 ms between polls."""
        start = time.monotonic()
        deadline = start + self.timeout.total_seconds()
        spin_until = start + SPIN_S
        delay = 0.0
        while not req.Test():
            now = time.monotonic()
            if now < spin_until:
                _yield()
                continue
            if now > deadline:
                raise RuntimeError(
                    f"rank {self.rank}: {what} did not complete within "
                    f"{self.timeout}: another rank failed, exited or did not "
                    "call it (init_process_group(timeout=...) sets the limit)"
                )
            time.sleep(delay)
            delay = min(2 * delay + 1e-6, 1e-3)

    def abort_on_error(self):
        """A ``sys.excepthook`` that names the rank and error, prints the traceback as usual,
        then aborts every rank. MPICH's launcher stops forwarding output once a rank aborts,
        so output still in the pipe is lost (CI saw half a traceback): the line that names
        the rank goes first, in one write, and the launcher gets ``ABORT_GRACE`` seconds to
        forward the rest."""
        previous = sys.excepthook

        def hook(kind, value, tb):
            sys.stderr.write(
                f"staged.distributed: rank {self.rank} raised {kind.__name__}: "
                f"{value}; aborting the job\n"
            )
            sys.stderr.flush()
            previous(kind, value, tb)
            sys.stderr.flush()
            time.sleep(ABORT_GRACE)
            self.comm.Abort(1)

        return hook


def _divide(n):
    def finish(out):
        out /= n

    return finish


def _key(what: str, describe) -> int:
    """The hash that stands for ``what`` in a check's row (remembered, to name it)."""
    key = zlib.crc32(what.encode())
    _CALLS[key] = (what, describe)
    return key


def _call(row) -> str:
    """What one rank's check row says it called."""
    what, describe = _CALLS.get(int(row[0]), ("a call this rank never made", None))
    detail = describe(row[1:]) if describe is not None else ""
    return f"{what} ({detail})" if detail else what


def _describe(row) -> str:
    kind, arg, char, ndim = (int(v) for v in row[:4])
    shape = [int(d) for d in row[4 : 4 + min(ndim, len(row) - 4)]]
    what = f"op {REDUCE_OPS[arg]}" if kind in (0, 3) else f"src {arg}" if kind == 1 else ""
    return f"{KINDS[kind]} of {np.dtype(chr(char)).name}{shape}" + (f" ({what})" if what else "")


for _name in KINDS:  # what another rank may call that this one has not yet
    _key(_name, _describe)
_key("barrier", None)
