"""``torch.distributed.utils``: ``_sync_module_states``, which DDP and libraries (Lightning's
strategies outside fitting) call to give every rank rank ``src``'s Module, and the
broadcast of tensors in place under it (DDP's buffer syncs use that too)."""

from __future__ import annotations

from ..eager.grad_mode import no_grad
from . import distributed_c10d as c10d


def _sync_module_states(
    module,
    process_group,
    broadcast_bucket_size: int,
    src: int,
    params_and_buffers_to_ignore=(),
    broadcast_buffers: bool = True,
) -> None:
    """Overwrite ``module``'s parameters (and buffers, with ``broadcast_buffers``) on every
    rank with rank ``src``'s, except those named in ``params_and_buffers_to_ignore``."""
    states = [p for n, p in module.named_parameters() if n not in params_and_buffers_to_ignore]
    if broadcast_buffers:
        states += [b for n, b in module.named_buffers() if n not in params_and_buffers_to_ignore]
    broadcast_tensors(states, src)


def broadcast_tensors(tensors, src: int = 0) -> None:
    """Overwrite each of ``tensors`` on every rank with rank ``src``'s, outside autograd."""
    with no_grad():
        for t in tensors:
            c10d.broadcast(t, src)
