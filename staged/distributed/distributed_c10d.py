"""``torch.distributed``'s process group and collectives, over MPI.

The collectives write their result into the tensors passed, as torch's do, outside the
autograd graph (``staged.distributed.nn.functional`` has the differentiable forms). They
are the registry's primitives (Note [collectives] in ``autodiff/collective.py``), so a
traced step records them; ``async_op=True`` starts the MPI operation and returns a
``Work`` whose ``wait()`` writes the result.
"""

from __future__ import annotations

import enum
import importlib.util
import os
import pickle  # noqa: S403  (torch's object collectives pickle too)
import sys
from typing import Any
from datetime import timedelta

from ..autodiff import collective as C
from ..eager.factories import from_numpy
from ..eager.grad_mode import no_grad
from .._where import at_user
from ..eager.interceptor import current_interceptor
from ..eager.ops.inplace import write
from . import mpi

BACKENDS = ("mpi", "gloo")  # both mean MPI; "gloo" is what PyTorch scripts say on CPU
default_pg_timeout = timedelta(minutes=5)
LAUNCH = "python -m staged.distributed.run --nproc-per-node N script.py"


class Backend(str):
    """torch's names of collective backends: ``Backend("GLOO")`` is "gloo". staged runs
    "gloo" and "mpi" as MPI (``BACKENDS``); the others are refused by
    ``init_process_group``."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    XCCL = "xccl"
    UCC = "ucc"
    MPI = "mpi"
    backend_list = [UNDEFINED, GLOO, NCCL, XCCL, UCC, MPI]
    default_device_backend_map = {"cpu": GLOO, "cuda": NCCL}

    def __new__(cls, name: str):  # type: ignore[misc]
        if not isinstance(name, str):
            raise ValueError(
                f"Backend constructor parameter must be string-ish, but got: {type(name)}"
            )
        value = getattr(Backend, name.upper(), Backend.UNDEFINED)
        return name.lower() if value == Backend.UNDEFINED else value


class ReduceOp:
    """How ``all_reduce`` and ``reduce_scatter_tensor`` combine the ranks' tensors: torch's
    class, whose ``SUM``... are members of its ``RedOpType`` enum (``ReduceOp(op)`` wraps
    one). staged's MPI collectives run SUM, AVG, MAX, MIN and PRODUCT."""

    class RedOpType(enum.Enum):
        SUM = 0
        AVG = 1
        PRODUCT = 2
        MIN = 3
        MAX = 4
        BAND = 5
        BOR = 6
        BXOR = 7
        PREMUL_SUM = 8

    SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM = RedOpType

    def __init__(self, op: ReduceOp.RedOpType) -> None:
        self.op = ReduceOp.RedOpType(op)

    def __eq__(self, other) -> bool:
        return self.op == (other.op if isinstance(other, ReduceOp) else other)

    def __hash__(self) -> int:
        return hash(self.op)

    def __repr__(self) -> str:
        return f"ReduceOp({self.op})"


_state: dict[str, Any] = {"group": None, "backend": None, "hook": None}


class ProcessGroup:
    """The default process group: every rank of the MPI job (staged has no subgroups yet).
    ``group.WORLD`` is it once ``init_process_group`` has run."""

    def rank(self) -> int:
        return get_rank()

    def size(self) -> int:
        return get_world_size()

    def name(self) -> str:
        return get_backend()

    def __repr__(self) -> str:
        return f"<staged.distributed.ProcessGroup {get_backend()}, {get_world_size()} ranks>"


class GroupMember:
    """torch's ``group.WORLD``: the default ``ProcessGroup``, None before it is made."""

    WORLD: ProcessGroup | None = None


group = GroupMember


def is_available() -> bool:
    """Whether mpi4py (and so an MPI library) is installed: ``pip install staged[distributed]``."""
    return importlib.util.find_spec("mpi4py") is not None


def is_nccl_available() -> bool:
    """False: collectives run on the host through MPI, never NCCL."""
    return False


is_gloo_available = is_mpi_available = is_available  # "gloo" means MPI here (BACKENDS)


def is_torchelastic_launched() -> bool:
    """Whether a torchrun-style launcher started this process (it sets
    ``TORCHELASTIC_RUN_ID``; ``staged.distributed.run`` does)."""
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def is_initialized() -> bool:
    return _state["group"] is not None


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    store=None,
    group_name: str = "",
    pg_options=None,
    device_id=None,
) -> None:
    """Join the default process group: every process of the MPI job that started this one.

    Rank and size come from MPI (``mpiexec -n N`` or ``python -m staged.distributed.run``);
    ``world_size`` and ``rank``, where given, must agree with them. ``backend`` is "mpi",
    or "gloo" (PyTorch's CPU backend, meaning MPI here); "nccl" is refused: staged's eager
    tensors live on the host. Every collective fails after ``timeout`` (default 5 minutes)
    and an uncaught exception on any rank aborts the whole job, naming the rank.

    Example:
        >>> dist.init_process_group("gloo")   # under mpiexec -n 2 python train.py
        >>> dist.get_rank(), dist.get_world_size()
        (0, 2)
    """
    if is_initialized():
        raise ValueError("trying to initialize the default process group twice!")
    name = str(backend or "mpi").lower()
    if name == "nccl":
        raise ValueError(
            "backend 'nccl': staged runs collectives on the host through MPI; "
            "use backend='gloo' or 'mpi' (its compiled CUDA steps do not run "
            "collectives yet)"
        )
    if name not in BACKENDS:
        raise ValueError(
            f"Invalid backend: {backend!r}; staged's backends are {BACKENDS} (both are MPI)"
        )
    if not is_available():
        raise RuntimeError(
            "staged.distributed needs mpi4py and an MPI library: "
            "pip install 'staged[distributed]' (the mpich and mpi4py wheels)"
        )
    group = mpi.connect(timeout or default_pg_timeout)
    env = {k: int(os.environ[k]) for k in ("WORLD_SIZE", "RANK") if k in os.environ}
    want = (
        world_size if world_size != -1 else env.get("WORLD_SIZE", group.size),
        rank if rank != -1 else env.get("RANK", group.rank),
    )
    if want != (group.size, group.rank):
        how = (
            "this process was not started by an MPI launcher (it is alone in its world): "
            "staged cannot join processes started otherwise (multiprocessing.spawn); "
            if group.size == 1
            else ""
        )
        raise RuntimeError(
            f"init_process_group(world_size={want[0]}, rank={want[1]}): {how}"
            f"MPI gives world size {group.size} and rank {group.rank}. "
            f"Start the ranks with `{LAUNCH}` or `mpiexec -n N python script.py`"
        )
    _state.update(group=group, backend=name, hook=sys.excepthook)
    GroupMember.WORLD = ProcessGroup()
    sys.excepthook = group.abort_on_error()
    C.GROUP[0] = group


def destroy_process_group(group=None) -> None:
    """Leave the default process group (MPI itself is finalised at exit)."""
    _group()
    sys.excepthook = _state["hook"]
    _state.update(group=None, backend=None, hook=None)
    GroupMember.WORLD = None
    C.GROUP[0] = C.Solo()


def _group():
    g = _state["group"]
    if g is None:
        raise ValueError(
            at_user(
                "Default process group has not been initialized, please make sure to call "
                "init_process_group."
            )
            + " Call staged.distributed.init_process_group() first, "
            "and start the script on N ranks with python -m staged.distributed.run "
            "--nproc-per-node N script.py"
        )
    return g


def _get_default_group() -> ProcessGroup:
    """The default process group (raises before ``init_process_group``)."""
    _group()
    return GroupMember.WORLD  # type: ignore[return-value]


def get_rank(group=None) -> int:
    return _group().rank


def get_world_size(group=None) -> int:
    return _group().size


def get_backend(group=None) -> str:
    _group()
    return _state["backend"]


class Work:
    """A collective started with ``async_op=True``: ``wait()`` completes it and writes its
    result into the tensors it was given; ``result()`` waits and gives those tensors."""

    def __init__(self, request=None, done=None, outputs=()):
        self._request, self._done, self._outputs = request, done, list(outputs)

    def is_completed(self) -> bool:
        return self._request is None or self._request.test()

    def wait(self, timeout: timedelta | None = None) -> bool:
        if self._request is not None:
            out = self._request.wait()
            self._request = None
            with no_grad():
                self._done(from_numpy(out))
        return True

    def result(self) -> list:
        self.wait()
        return self._outputs


def _collective(prim, tensor, params, done, async_op, outputs, checked=True):
    """Run ``prim`` on ``tensor`` and hand its result to ``done``, which writes it into
    ``outputs``: now, through the primitive (so that a trace records it), or for
    ``async_op`` on the host, at ``wait()``."""
    group = _group()
    if async_op and current_interceptor() is None:
        request = group.start(prim.name, tensor.detach().numpy(), params, checked)
        return Work(request, done, outputs)
    with no_grad():
        done(prim(tensor, **params))
    return Work(outputs=outputs) if async_op else None


def _verify(what: str, values, describe) -> None:
    """Fail on every rank, naming the ranks, unless all pass equal ``values`` (a few ints)."""
    _group().check(what, values, describe)


def _used_anywhere(flags) -> list[bool]:
    """Which of ``flags`` (one per DDP parameter, in an order every rank shares) any rank
    set; exchanged on the host, so a compiled step fixes it when traced."""
    return [bool(f) for f in _group().used_anywhere(flags)]


def _bucket_all_reduce(flat, divisor=None):
    """DDP's average of a gradient bucket (the sum over the ranks / ``divisor``, by default
    the world size), started at once; unchecked, since DDP checked the parameters' shapes
    across the ranks (Note [waits] in ``mpi.py``)."""
    if divisor is None:
        params, done = {"op": "avg"}, lambda r: write(flat, r)
    else:  # under DDP.join(divide_by_initial_world_size=False): the ranks not joined
        params, done = {"op": "sum"}, lambda r: write(flat, r / divisor)
    return _collective(C.all_reduce, flat, params, done, True, [flat], checked=False)


def _op(op) -> str:
    """The collective's name for ``op`` (a ``ReduceOp``, one of its members or its name)."""
    kind = op.op if isinstance(op, ReduceOp) else op
    if isinstance(kind, str) and kind.upper() in ReduceOp.RedOpType.__members__:
        kind = ReduceOp.RedOpType[kind.upper()]
    name = kind.name.lower() if isinstance(kind, ReduceOp.RedOpType) else None
    if name not in C.REDUCE_OPS:
        raise ValueError(
            f"reduce op {op!r}: staged's collectives reduce with ReduceOp.SUM, AVG, MAX, MIN "
            "or PRODUCT (MPI's); BAND, BOR, BXOR and PREMUL_SUM are not supported"
        )
    return name


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` over every rank with ``op``, in place on each."""
    return _collective(
        C.all_reduce, tensor, {"op": _op(op)}, lambda r: write(tensor, r), async_op, [tensor]
    )


def broadcast(tensor, src, group=None, async_op=False, group_src=None):
    """Overwrite ``tensor`` on every rank with rank ``src``'s."""
    return _collective(
        C.broadcast, tensor, {"src": src}, lambda r: write(tensor, r), async_op, [tensor]
    )


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[r]`` becomes rank ``r``'s ``tensor``."""
    if len(tensor_list) != get_world_size():
        raise ValueError(
            f"all_gather: tensor_list has {len(tensor_list)} tensors, the world "
            f"size is {get_world_size()}"
        )

    def done(rows):
        for i, t in enumerate(tensor_list):
            write(t, rows[i])

    return _collective(
        C.all_gather, tensor, {"world": get_world_size()}, done, async_op, tensor_list
    )


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """``output_tensor`` (world size times ``input_tensor``'s elements, concatenated along
    dim 0 or stacked) becomes every rank's ``input_tensor`` in rank order."""
    world = get_world_size()
    if output_tensor.numel() != world * input_tensor.numel():
        raise ValueError(
            f"all_gather_into_tensor: the output has {output_tensor.numel()} "
            f"elements, {world} x the input's {input_tensor.numel()} expected"
        )
    return _collective(
        C.all_gather,
        input_tensor,
        {"world": world},
        lambda r: write(output_tensor, r.reshape(output_tensor.shape)),
        async_op,
        [output_tensor],
    )


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` (world size times ``output``'s elements) over every rank with
    ``op``; rank ``r`` gets the ``r``-th of its equal parts along dim 0 in ``output``."""
    world = get_world_size()
    if input.numel() != world * output.numel():
        raise ValueError(
            f"reduce_scatter_tensor: the input has {input.numel()} elements, "
            f"{world} x the output's {output.numel()} expected"
        )
    return _collective(
        C.reduce_scatter,
        input.reshape((world, *output.shape)),
        {"op": _op(op), "world": world},
        lambda r: write(output, r),
        async_op,
        [output],
    )


def _objects(what: str, obj, src: int | None = None) -> list:
    """Every rank's ``obj`` in rank order, or with ``src`` rank ``src``'s alone (a list of
    one), pickled across as torch's object collectives do (so only for trusted peers)."""
    return [pickle.loads(b) for b in _group().gather_bytes(what, pickle.dumps(obj), src)]


def _root(rank, group_rank) -> int:
    """The rank a rooted collective names (its ``src``/``dst`` or ``group_src``/``group_dst``:
    one group here, so the same), 0 by default."""
    rank = group_rank if rank is None else rank
    return 0 if rank is None else rank


def all_gather_object(object_list, obj, group=None) -> None:
    """``object_list[r]`` becomes rank ``r``'s ``obj`` (any picklable object)."""
    every = _objects("all_gather_object", obj)
    if len(object_list) != len(every):
        raise ValueError(
            f"all_gather_object: object_list has {len(object_list)} entries, the world "
            f"size is {len(every)}"
        )
    object_list[:] = every


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Every rank's ``object_list`` becomes rank ``src``'s (same length on every rank)."""
    src = _root(src, group_src)
    mine = list(object_list) if get_rank() == src else None
    theirs = _objects("broadcast_object_list", mine, src)[0]
    if len(theirs) != len(object_list):
        raise ValueError(
            f"broadcast_object_list: rank {get_rank()}'s object_list has "
            f"{len(object_list)} entries, rank {src}'s {len(theirs)}"
        )
    object_list[:] = theirs


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """On rank ``dst`` (default 0), ``object_gather_list[r]`` becomes rank ``r``'s ``obj``."""
    dst = _root(dst, group_dst)
    every = _objects("gather_object", obj)
    if get_rank() == dst:
        if object_gather_list is None or len(object_gather_list) != len(every):
            raise ValueError(
                f"gather_object: rank {dst} needs an object_gather_list of the world size, "
                f"{len(every)}"
            )
        object_gather_list[:] = every


def scatter_object_list(
    scatter_object_output_list,
    scatter_object_input_list=None,
    src=None,
    group=None,
    group_src=None,
):
    """``scatter_object_output_list[0]`` becomes rank ``src``'s
    ``scatter_object_input_list[r]`` on each rank ``r``."""
    src = _root(src, group_src)
    world = get_world_size()
    mine = None
    if get_rank() == src:
        if scatter_object_input_list is None or len(scatter_object_input_list) != world:
            raise ValueError(
                f"scatter_object_list: rank {src} needs a scatter_object_input_list of the "
                f"world size, {world}"
            )
        mine = list(scatter_object_input_list)
    if not scatter_object_output_list:
        raise ValueError(
            "Expected argument scatter_object_output_list to be a list of size at least 1."
        )
    scatter_object_output_list[0] = _objects("scatter_object_list", mine, src)[0][get_rank()]


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank has called ``barrier``."""
    _group().barrier()
    return Work() if async_op else None
