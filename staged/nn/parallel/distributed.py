"""``DistributedDataParallel``: data-parallel training over ``staged.distributed``.

Note [DDP buckets]: as PyTorch's Reducer, gradients are averaged in buckets of about
``bucket_cap_mb`` (the first of 1 MB), filled in reverse parameter order, the order
backward produces them. A post-accumulate-grad hook on each parameter counts its bucket
down; a full bucket is flattened and its all-reduce started at once (MPI Iallreduce), in
bucket order so that every rank starts them in the same order, and the end of backward
(an engine callback) waits for them and writes the averages into ``.grad``: the
communication overlaps the rest of backward.

Note [DDP join]: inside ``join()`` (Note [join] in ``distributed/algorithms/join.py``) each
forward first all-reduces a 1 (the ranks still stepping: a joined rank's shadow adds 0),
then broadcasts the buffers from the highest rank still stepping (rank 0 may have joined
with stale ones; a MAX all-reduce of the ranks finds it) and all-reduces whether this step
reduces gradients (``no_sync``); a joined rank's ``_DDPJoinHook`` makes the same calls,
then one all-reduce of zeros per bucket, in bucket order, and the used-parameter map of
none. The ranks still stepping divide the bucket sums by the world size, or with
``divide_by_initial_world_size=False`` by their own number. The batch-shape check runs only
in steps that no rank has joined (a joined rank cannot know the shape). At the end the
model of the highest rank among the last to join is broadcast to all.
"""

from __future__ import annotations

import contextlib
import zlib
from typing import Any

from ...autodiff.avals import EagerOnlyError
from ...autograd.engine import queue_callback
from ...distributed import distributed_c10d as c10d
from ...distributed.algorithms.join import Join, Joinable, JoinHook
from ...distributed.utils import _sync_module_states, broadcast_tensors
from ...eager.devices import device
from ...eager.factories import tensor, zeros, zeros_like
from ...eager.grad_mode import is_grad_enabled, no_grad
from ...eager.interceptor import current_interceptor
from ...eager.ops.shape import cat
from ...eager.tensor import Tensor
from ..module import Module

FIRST_BUCKET_BYTES = 2**20  # torch's dist._DEFAULT_FIRST_BUCKET_BYTES


class _Bucket:
    __slots__ = ("flat", "params", "pending", "work")

    def __init__(self, params):
        self.params, self.pending, self.flat, self.work = params, len(params), None, None


def _assign(params, cap: int) -> list:
    """Buckets of ``params`` (in the order given) holding one dtype and about ``cap`` bytes
    each; the first closes at ``FIRST_BUCKET_BYTES`` so that communication starts early."""
    buckets: list[Any] = []
    open_: dict[Any, Any] = {}
    limit = min(FIRST_BUCKET_BYTES, cap)
    for p in params:
        members, size = open_.get(p.dtype, ([], 0))
        members.append(p)
        size += p.numel() * p.dtype.itemsize
        open_[p.dtype] = (members, size)
        if size >= limit:
            buckets.append(_Bucket(members))
            del open_[p.dtype]
            limit = cap
    return buckets + [_Bucket(members) for members, _ in open_.values()]


class DistributedDataParallel(Module, Joinable):
    """Runs ``module`` on this rank's batch and averages the gradients over the ranks.

    At construction rank 0's parameters are broadcast to the others, and with
    ``broadcast_buffers`` (the default) its buffers, at construction and before each
    forward but one that follows a forward under ``no_sync`` or ``no_grad`` (torch's
    ``require_forward_param_sync``); without it each rank keeps its own buffers, as
    torch's. Each forward checks that every rank's batch has the same shape but for its
    size: the gradient is the average of the ranks' gradients, so of their means, not the
    mean over all their rows. Parameters that take no part in the loss need
    ``find_unused_parameters=True`` (their gradient is then the average with zeros for the
    ranks that did not use them; one that no rank used keeps its ``.grad``, None after
    ``zero_grad()``, so that the optimizer skips it, as torch's). ``state_dict`` keys start
    with ``module.``. ``join()`` trains on ranks with different numbers of batches (Note
    [DDP join]).

    Example:
        >>> model = DistributedDataParallel(Net())
        >>> loss_fn(model(x), y).backward()   # .grad: the average over the ranks
    """

    def __init__(
        self,
        module,
        device_ids=None,
        output_device=None,
        dim=0,
        broadcast_buffers=True,
        init_sync=True,
        process_group=None,
        bucket_cap_mb=None,
        find_unused_parameters=False,
        check_reduction=False,
        gradient_as_bucket_view=False,
        static_graph=False,
    ):
        super().__init__()
        Joinable.__init__(self)
        if device_ids is not None or output_device is not None:
            raise ValueError(
                "DistributedDataParallel device_ids and output_device arguments "
                "only work with single-device/multiple-device GPU modules, but "
                f"got device_ids {device_ids}, output_device {output_device}, "
                "and module parameters {device(type='cpu')}."
            )
        self.module = module
        self.device = device("cpu")
        self.process_group = process_group
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True  # the next forward broadcasts the buffers
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 2**20)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        layout = repr([(n, tuple(p.shape), p.dtype.name) for n, p in named]).encode()
        c10d._verify(
            "DistributedDataParallel",
            [len(named), zlib.crc32(layout)],
            lambda row: f"{row[0]} parameters of layout {row[1]:08x}",
        )
        self.static_graph = static_graph
        self.gradient_as_bucket_view = gradient_as_bucket_view
        if init_sync:  # torch's: buffers only if broadcast_buffers
            _sync_module_states(
                module, process_group, self.bucket_bytes_cap, 0, (), broadcast_buffers
            )
        self._names = {id(p): n for n, p in named}
        self._buckets = _assign([p for _, p in named][::-1], self.bucket_bytes_cap)
        self._bucket_of = {id(p): b for b in self._buckets for p in b.params}
        self._next = 0  # the next bucket to start
        self._divisor = None  # of the bucket sums, where not the world size (join())
        self._divide_by_initial_world_size = True
        self._armed = False  # a forward prepared a backward that reduces
        self._ready = set()  # ids of the parameters whose gradient arrived
        self._unreduced = []  # names of parameters the last backward did not reach
        for _, p in named:
            p.register_post_accumulate_grad_hook(self._grad_ready)

    def register_comm_hook(self, state, hook) -> None:
        """Refused: staged's DDP averages each gradient bucket over MPI and runs no
        communication hook."""
        raise NotImplementedError(
            "DistributedDataParallel.register_comm_hook: staged's DDP has no communication "
            "hooks; it averages every gradient bucket over MPI each step, uncompressed"
        )

    def _get_ddp_logging_data(self) -> dict:
        """What this DDP was made with (torch's logging data has these keys and more; its
        ``can_set_static_graph``, measured by torch's reducer, is not reported)."""
        params = [p for p in self.module.parameters() if p.requires_grad]
        return {
            "backend_name": c10d.get_backend(),
            "device_ids": "",
            "module_name": type(self.module).__name__,
            "broadcast_buffers": int(self.broadcast_buffers),
            "bucket_cap_bytes": self.bucket_bytes_cap,
            "find_unused_parameters": int(self.find_unused_parameters),
            "gradient_as_bucket_view": int(self.gradient_as_bucket_view),
            "is_multi_device_module": 0,
            "num_parameter_tensors": len(params),
            "output_device": -1,
            "rank": c10d.get_rank(),
            "total_parameter_size_bytes": sum(p.nbytes for p in params),
            "world_size": c10d.get_world_size(),
        }

    def forward(self, *inputs, **kwargs):
        if self._unreduced:
            names, self._unreduced = self._unreduced, []
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a "
                "new one. This error indicates that your module has parameters that were not "
                f"used in producing loss ({', '.join(names)}). You can enable unused parameter "
                "detection by passing the keyword argument `find_unused_parameters=True` to "
                "`DistributedDataParallel`, and by making sure all `forward` function outputs "
                "participate in calculating loss."
            )
        some_joined = self._join_step()
        batch = next((t for t in inputs if isinstance(t, Tensor)), None)
        if batch is not None and not some_joined:
            c10d._verify(  # the batch size may differ (torch's DDP averages the ranks' means)
                "DistributedDataParallel forward",
                [batch.ndim, *batch.shape[1:]],
                lambda row: f"a batch of shape {['N', *[int(d) for d in row[1 : row[0]]]]}",
            )
        if self.require_forward_param_sync:
            self._sync_buffers(stepping=True)
        if self._join_config.enable:  # tells the joined ranks whether to shadow a backward
            reduces = self.require_backward_grad_sync and is_grad_enabled()
            c10d.all_reduce(tensor([float(reduces)]))
        self._armed = self.require_backward_grad_sync
        out = self.module(*inputs, **kwargs)
        self.require_forward_param_sync = self.require_backward_grad_sync and is_grad_enabled()
        return out

    def _join_step(self) -> bool:
        """Inside ``join()``: tell the join that this rank steps and set the divisor of the
        gradients (Note [DDP join]). Whether a rank may have joined."""
        icpt = current_interceptor()
        if icpt is not None:  # a step compiled outside join() is traced again inside
            icpt.guard(
                lambda: self._join_config.enable,
                "DistributedDataParallel.join()",
                key=(id(self), "join"),
            )
            if self._join_config.enable:
                raise EagerOnlyError(
                    "DistributedDataParallel.join(): a compiled step cannot run inside "
                    "join(), whose collectives depend on how many ranks have joined; run "
                    "the step eagerly there (or staged.compile(step, fallback='eager'))"
                )
        work = Join.notify_join_context(self)
        self._divisor = None
        if work is None:
            return self._join_config.enable
        stepping = int(work.result()[0].item())
        if not self._divide_by_initial_world_size and stepping != c10d.get_world_size():
            self._divisor = stepping
        return stepping != c10d.get_world_size()

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes of forwards run inside accumulate ``.grad`` locally, unreduced;
        the first one after reduces the sum."""
        old, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def join(
        self,
        divide_by_initial_world_size: bool = True,
        enable: bool = True,
        throw_on_early_termination: bool = False,
    ) -> Join:
        """Context manager for a training loop whose ranks have different numbers of batches:
        a rank that has run out shadows the others' steps, all-reducing zero gradients
        (Note [DDP join]); at the end every rank gets the model of the last to finish.
        ``divide_by_initial_world_size``: the gradients are divided by the world size
        (each batch weighs the same), else by the number of ranks still stepping.
        ``throw_on_early_termination``: every rank raises ``RuntimeError`` once one has
        run out. Not for a compiled step (it raises ``EagerOnlyError``).

        Example:
            >>> with model.join():
            ...     for x, y in my_batches:    # as many as this rank has
            ...         loss_fn(model(x), y).backward()
        """
        return Join(
            [self],
            enable,
            throw_on_early_termination,
            divide_by_initial_world_size=divide_by_initial_world_size,
        )

    def join_hook(self, **kwargs) -> JoinHook:
        """The hook that shadows this DDP's collectives on a joined rank; ``kwargs``:
        ``divide_by_initial_world_size`` (default True)."""
        return _DDPJoinHook(self, kwargs.get("divide_by_initial_world_size", True))

    @property
    def join_device(self):
        return self.device

    @property
    def join_process_group(self):
        return self.process_group

    def _buffers_to_sync(self) -> list:
        return list(self.module.buffers()) if self.broadcast_buffers else []

    def _sync_buffers(self, stepping: bool) -> None:
        """Broadcast the buffers (``broadcast_buffers``) from rank 0, inside ``join()`` from
        the highest rank still stepping (Note [DDP join])."""
        buffers = self._buffers_to_sync()
        if buffers:
            src = self._find_common_rank(stepping) if self._join_config.enable else 0
            broadcast_tensors(buffers, src)

    def _find_common_rank(self, candidate: bool) -> int:
        """The highest rank of those passing ``candidate`` (a MAX all-reduce, as torch's)."""
        rank = tensor([c10d.get_rank() if candidate else -1])
        c10d.all_reduce(rank, op=c10d.ReduceOp.MAX)
        return int(rank.item())

    def _sync_final_model(self, is_last_joiner: bool) -> None:
        src = self._find_common_rank(is_last_joiner)
        broadcast_tensors([*self.module.parameters(), *self._buffers_to_sync()], src)

    def _grad_ready(self, p) -> None:
        if not self._armed:
            return
        if not self._ready:
            queue_callback(self._finish)
        self._ready.add(id(p))
        self._bucket_of[id(p)].pending -= 1
        self._start_ready()

    def _start_ready(self, every=False) -> None:
        buckets = self._buckets
        while self._next < len(buckets) and (every or buckets[self._next].pending == 0):
            b = buckets[self._next]
            with no_grad():
                b.flat = cat(
                    [(zeros_like(p) if p.grad is None else p.grad).reshape(-1) for p in b.params]
                )
            b.work = c10d._bucket_all_reduce(b.flat, self._divisor)
            self._next += 1
        for b in buckets[: self._next]:
            b.work.is_completed()  # asking lets MPI progress the started all-reduces

    def _finish(self) -> None:
        """End of backward: wait for the all-reduces and write the averages into .grad."""
        skip = set()  # torch's Reducer leaves a gradient no rank produced untouched
        if self.find_unused_parameters:
            self._start_ready(every=True)
            used = c10d._used_anywhere([i in self._ready for i in self._names])
            skip = {i for i, u in zip(self._names, used) if not u}
        elif self._next < len(self._buckets):
            self._unreduced = [n for i, n in self._names.items() if i not in self._ready]
        with no_grad():
            for b in self._buckets[: self._next]:
                b.work.wait()
                at = 0
                for p in b.params:
                    avg = b.flat[at : at + p.numel()].reshape(p.shape)
                    at += p.numel()
                    if id(p) in skip:
                        continue
                    if p.grad is None:
                        p.grad = avg.clone()
                    else:
                        p.grad.copy_(avg)
        for b in self._buckets:
            b.pending, b.flat, b.work = len(b.params), None, None
        self._next, self._armed = 0, False
        self._ready.clear()


class _DDPJoinHook(JoinHook):
    """On a joined rank, each step the others make: their buffer broadcast, their
    ``no_sync`` flag, then (unless every rank is in ``no_sync``) their bucket all-reduces
    with zeros and their used-parameter map; at the end, the last joiner's model."""

    def __init__(self, ddp, divide_by_initial_world_size: bool):
        self.ddp = ddp
        ddp._divide_by_initial_world_size = divide_by_initial_world_size

    def main_hook(self) -> None:
        ddp = self.ddp
        if ddp.require_forward_param_sync:
            ddp._sync_buffers(stepping=False)
        sync = zeros(1)
        c10d.all_reduce(sync)
        ddp.require_forward_param_sync = bool(sync.item())  # as the stepping ranks' next
        if not sync.item():
            return
        works = [
            c10d._bucket_all_reduce(
                zeros(sum(p.numel() for p in b.params), dtype=b.params[0].dtype)
            )
            for b in ddp._buckets
        ]
        for w in works:
            w.wait()
        if ddp.find_unused_parameters:
            c10d._used_anywhere([False] * len(ddp._names))

    def post_hook(self, is_last_joiner: bool) -> None:
        self.ddp._sync_final_model(is_last_joiner)
