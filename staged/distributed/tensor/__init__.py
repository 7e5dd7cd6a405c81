"""``torch.distributed.tensor``: its names, so programs and libraries that import them
(Hugging Face transformers checks ``isinstance(p, DTensor)`` on every parameter it loads)
run. staged has no distributed tensors: its multi-process training is data parallel over
MPI (``DistributedDataParallel``); no tensor is a ``DTensor``, and making one raises
``NotImplementedError``. The placements (``placement_types``) are torch's."""

from __future__ import annotations

from ...eager.tensor import Tensor
from ..device_mesh import DeviceMesh, init_device_mesh, no_distributed_tensors
from .placement_types import Partial, Placement, Replicate, Shard

__all__ = [
    "DTensor",
    "DeviceMesh",
    "Partial",
    "Placement",
    "Replicate",
    "Shard",
    "distribute_module",
    "distribute_tensor",
    "init_device_mesh",
]


class DTensor(Tensor):
    """torch's distributed tensor: none exists in staged (``isinstance`` is False for
    every tensor); ``DTensor.from_local`` raises."""

    def __new__(cls, *args, **kwargs):
        raise no_distributed_tensors("DTensor")

    @staticmethod
    def from_local(*args, **kwargs):
        raise no_distributed_tensors("DTensor.from_local")


def distribute_tensor(*args, **kwargs):
    raise no_distributed_tensors("distribute_tensor")


def distribute_module(*args, **kwargs):
    raise no_distributed_tensors("distribute_module")
