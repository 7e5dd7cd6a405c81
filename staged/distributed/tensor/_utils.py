"""``torch.distributed.tensor._utils``: the name transformers imports; it raises, as no
distributed tensor exists in staged (``staged.distributed.tensor``)."""

from __future__ import annotations

from ..device_mesh import no_distributed_tensors


def compute_local_shape_and_global_offset(*args, **kwargs):
    raise no_distributed_tensors("compute_local_shape_and_global_offset")
