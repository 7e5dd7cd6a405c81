"""``torch.distributed.tensor.placement_types``: how a distributed tensor lies on each
dimension of a device mesh (``Shard(dim)``, ``Replicate()``, ``Partial(reduce_op)``), with
torch's equality, hashing and printing. staged has no distributed tensors to place
(``staged.distributed.tensor``): these describe layouts, as libraries that import them
(Hugging Face transformers' tensor-parallel plans) build them at import time."""

from __future__ import annotations

__all__ = ["Placement", "Shard", "Replicate", "Partial"]


class Placement:
    """The base of the placements."""

    def is_shard(self, dim: int | None = None) -> bool:
        return isinstance(self, Shard) and (dim is None or self.dim == dim)

    def is_replicate(self) -> bool:
        return isinstance(self, Replicate)

    def is_partial(self, reduce_op: str | None = None) -> bool:
        return isinstance(self, Partial) and (reduce_op is None or self.reduce_op == reduce_op)


class Shard(Placement):
    """The tensor split into even chunks along ``dim``, one per rank of the mesh dimension."""

    def __init__(self, dim: int = 0):
        self.dim = dim

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.dim == self.dim

    def __hash__(self) -> int:
        return hash(self.dim)

    def __repr__(self) -> str:
        return f"Shard(dim={self.dim})"

    def __str__(self) -> str:
        return f"S({self.dim})"


class _StridedShard(Placement):
    """A shard of a tensor sharded again along the same dim on an earlier mesh dimension
    (``split_factor`` chunks of each rank's shard, interleaved); not a ``Shard``, as
    torch's."""

    def __init__(self, dim: int = 0, split_factor: int = 1, *, sf: int | None = None):
        self.dim = dim
        self.split_factor = split_factor if sf is None else sf

    def __eq__(self, other) -> bool:
        return (
            type(other) is _StridedShard
            and other.dim == self.dim
            and other.split_factor == self.split_factor
        )

    def __hash__(self) -> int:
        return hash((self.dim, self.split_factor))

    def __repr__(self) -> str:
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"

    def __str__(self) -> str:
        return f"_S({self.dim}, {self.split_factor})"


class Replicate(Placement):
    """The whole tensor on every rank of the mesh dimension."""

    def __eq__(self, other) -> bool:
        return type(other) is Replicate

    def __hash__(self) -> int:
        return -1

    def __repr__(self) -> str:
        return "Replicate()"

    def __str__(self) -> str:
        return "R"


class Partial(Placement):
    """Each rank holds a partial value; the tensor is their ``reduce_op`` ("sum", "avg",
    "max", "min") across the mesh dimension."""

    def __init__(self, reduce_op: str = "sum"):
        self.reduce_op = reduce_op

    def __eq__(self, other) -> bool:
        return type(other) is Partial and other.reduce_op == self.reduce_op

    def __hash__(self) -> int:
        return 1 + hash(self.reduce_op)

    def __repr__(self) -> str:
        return f"Partial({self.reduce_op})"

    def __str__(self) -> str:
        return f"P({self.reduce_op})"
