"""``torch._dynamo._trace_wrapped_higher_order_op``: ``TransformGetItemToIndex``."""

from __future__ import annotations

import contextlib


class TransformGetItemToIndex(contextlib.nullcontext):
    """torch's mode that turns ``t[i]`` by a 0-dim index tensor into an index op, so its
    ``vmap`` can batch it (transformers builds attention masks so). staged's ``vmap``
    batches ``t[i]`` by a batched index tensor itself: the mode changes nothing."""
