"""``torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook``: the state class of
torch's post-local-SGD hook (Lightning checks ``isinstance(state, PostLocalSGDState)``).
staged's DDP has no communication hooks, so making one raises."""

from __future__ import annotations


class PostLocalSGDState:
    """torch's post-local-SGD hook state; staged's DDP runs no communication hooks."""

    def __init__(self, *args, **kwargs) -> None:
        raise NotImplementedError(
            "PostLocalSGDState: staged's DistributedDataParallel has no communication hooks "
            "(register_comm_hook); it averages every gradient bucket over MPI each step"
        )
