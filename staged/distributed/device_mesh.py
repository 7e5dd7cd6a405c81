"""``torch.distributed.device_mesh``: its names (``DeviceMesh``, ``init_device_mesh``),
which raise: staged lays no tensors out over a mesh of devices (see
``staged.distributed.tensor``)."""

from __future__ import annotations

__all__ = ["DeviceMesh", "init_device_mesh"]


def no_distributed_tensors(what: str) -> NotImplementedError:
    """The error for making a distributed tensor, mesh or sharded module."""
    return NotImplementedError(
        f"{what}: staged has no distributed tensors (DTensor, DeviceMesh, FSDP, tensor "
        "parallelism); train on several processes with DistributedDataParallel over MPI "
        "(README: Training on several processes and machines)"
    )


class DeviceMesh:
    """torch's mesh of devices: none can be made in staged."""

    def __init__(self, *args, **kwargs):
        raise no_distributed_tensors("DeviceMesh")


def init_device_mesh(*args, **kwargs):
    raise no_distributed_tensors("init_device_mesh")
