"""``torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook``: its hook and state
(Lightning checks ``isinstance(state, PostLocalSGDState)``), which raise when used."""

from __future__ import annotations

from ._refused import MESSAGE, refused

post_localSGD_hook = refused("post_localSGD_hook")


class PostLocalSGDState:
    """torch's post-local-SGD hook state; making one raises (``_refused``)."""

    def __init__(self, *args, **kwargs) -> None:
        raise NotImplementedError(f"PostLocalSGDState: {MESSAGE}")
