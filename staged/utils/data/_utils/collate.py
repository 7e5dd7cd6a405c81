"""``torch.utils.data._utils.collate``: ``staged/utils/data/_collate.py``'s functions under
torch's module path (``from torch.utils.data._utils.collate import default_collate``)."""

from .._collate import (  # noqa: F401
    collate,
    collate_float_fn,
    collate_int_fn,
    collate_numpy_array_fn,
    collate_numpy_scalar_fn,
    collate_str_fn,
    collate_tensor_fn,
    default_collate,
    default_collate_fn_map,
    default_convert,
)
