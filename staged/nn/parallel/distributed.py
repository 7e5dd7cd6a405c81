"""``DistributedDataParallel``: data-parallel training over ``staged.distributed``.

Note [DDP buckets]: as PyTorch's Reducer, gradients are averaged in buckets of about
``bucket_cap_mb`` (the first of 1 MB), filled in reverse parameter order, the order
backward produces them. A post-accumulate-grad hook on each parameter counts its bucket
down; a full bucket is flattened and its all-reduce started at once (MPI Iallreduce), in
bucket order so that every rank starts them in the same order, and the end of backward
(an engine callback) waits for them and writes the averages into ``.grad``: the
communication overlaps the rest of backward.
"""

from __future__ import annotations

import contextlib
import zlib
from typing import Any

from ...autograd.engine import queue_callback
from ...distributed import distributed_c10d as c10d
from ...eager.factories import zeros_like
from ...eager.grad_mode import no_grad
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


class DistributedDataParallel(Module):
    """Runs ``module`` on this rank's batch and averages the gradients over the ranks.

    At construction rank 0's parameters are broadcast to the others, and with
    ``broadcast_buffers`` (the default) its buffers, at construction and before each
    forward; without it each rank keeps its own buffers, as torch's. Each forward checks that
    every rank's batch has the same shape but for its size: the gradient is the average of
    the ranks' gradients, so of their means, not the mean over all their rows. Parameters
    that take no part in the loss need ``find_unused_parameters=True`` (their gradient is
    then the average with zeros for the ranks that did not use them; one that no rank used
    keeps its ``.grad``, None after ``zero_grad()``, so that the optimizer skips it, as
    torch's). ``state_dict`` keys start with ``module.``.

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
        if device_ids is not None or output_device is not None:
            raise ValueError(
                "DistributedDataParallel device_ids and output_device arguments "
                "only work with single-device/multiple-device GPU modules, but "
                f"got device_ids {device_ids}, output_device {output_device}, "
                "and module parameters {device(type='cpu')}."
            )
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 2**20)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        layout = repr([(n, tuple(p.shape), p.dtype.name) for n, p in named]).encode()
        c10d._verify(
            "DistributedDataParallel",
            [len(named), zlib.crc32(layout)],
            lambda row: f"{row[0]} parameters of layout {row[1]:08x}",
        )
        if init_sync:  # torch's: buffers only if broadcast_buffers
            buffers = list(module.buffers()) if broadcast_buffers else []
            self._broadcast([*module.parameters(), *buffers])
        self._names = {id(p): n for n, p in named}
        self._buckets = _assign([p for _, p in named][::-1], self.bucket_bytes_cap)
        self._bucket_of = {id(p): b for b in self._buckets for p in b.params}
        self._next = 0  # the next bucket to start
        self._armed = False  # a forward prepared a backward that reduces
        self._ready = set()  # ids of the parameters whose gradient arrived
        self._unreduced = []  # names of parameters the last backward did not reach
        for _, p in named:
            p.register_post_accumulate_grad_hook(self._grad_ready)

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
        batch = next((t for t in inputs if isinstance(t, Tensor)), None)
        if batch is not None:
            c10d._verify(  # the batch size may differ (torch's DDP averages the ranks' means)
                "DistributedDataParallel forward",
                [batch.ndim, *batch.shape[1:]],
                lambda row: f"a batch of shape {['N', *[int(d) for d in row[1 : row[0]]]]}",
            )
        if self.broadcast_buffers:
            self._broadcast(list(self.module.buffers()))
        self._armed = self.require_backward_grad_sync
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes of forwards run inside accumulate ``.grad`` locally, unreduced;
        the first one after reduces the sum."""
        old, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    @staticmethod
    def _broadcast(tensors) -> None:
        with no_grad():
            for t in tensors:
                c10d.broadcast(t, 0)

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
            b.work = c10d._bucket_all_reduce(b.flat)
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
