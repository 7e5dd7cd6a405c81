"""``torch.functional``'s counterpart: the names torch defines there, which are staged's
top-level functions themselves (``staged.functional.einsum is staged.einsum``). Not
there: ``pca_lowrank`` and ``svd_lowrank``."""

from . import (  # noqa: F401  (staged/__init__.py imports this module once these are set)
    atleast_1d,
    atleast_2d,
    atleast_3d,
    block_diag,
    broadcast_shapes,
    broadcast_tensors,
    cartesian_prod,
    cdist,
    chain_matmul,
    einsum,
    istft,
    lu,
    meshgrid,
    norm,
    split,
    stft,
    tensordot,
    unique,
    unique_consecutive,
    unravel_index,
)

__all__ = sorted(n for n in globals() if not n.startswith("_"))
