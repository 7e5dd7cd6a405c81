"""``DataParallel`` as torch's behaves on a machine without accelerators."""

from __future__ import annotations

from ..module import Module


class DataParallel(Module):
    """Wraps ``module`` (its ``state_dict`` keys start with ``module.``); with no GPU to
    split the batch over, ``forward`` calls it, and ``device_ids`` is ``[]``, as torch's
    (which then ignores ``device_ids``, ``output_device`` and ``dim``)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = []

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
