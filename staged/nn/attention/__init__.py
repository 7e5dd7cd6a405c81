"""``torch.nn.attention``: the backend selection for ``scaled_dot_product_attention``
(staged has one implementation of it, and its compiled lowering, so a selection is
accepted, checked as torch checks it, and changes nothing), and the submodule
``flex_attention``, imported on its own as torch's."""

from __future__ import annotations

import contextlib
import enum

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    """torch's backends of scaled dot-product attention, with its values."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Run the block with ``backends`` (one ``SDPBackend`` or a list) selected: every one
    computes staged's attention."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError(
            "Backend must be an instance of SDPBackend or a list of SDPBackend instances, "
            f"got {type(backends).__name__}"
        )
    yield {}
