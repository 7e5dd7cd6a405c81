"""``torch.functional``'s counterpart: the names torch defines there, which are staged's
top-level functions themselves (``staged.functional.einsum is staged.einsum``), filled in
by ``staged/__init__.py`` once it has made them (an import of them here would be an import
circle)."""

_NAMES = [
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "block_diag",
    "broadcast_shapes",
    "broadcast_tensors",
    "cartesian_prod",
    "cdist",
    "chain_matmul",
    "einsum",
    "istft",
    "lu",
    "meshgrid",
    "norm",
    "pca_lowrank",
    "split",
    "stft",
    "svd_lowrank",
    "tensordot",
    "unique",
    "unique_consecutive",
    "unravel_index",
]
__all__ = list(_NAMES)  # defined once staged/__init__.py fills them in
