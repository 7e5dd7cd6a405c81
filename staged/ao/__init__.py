"""``torch.ao``: of its quantization, the stubs models mark their quantized region with
(``torch.ao.quantization``)."""

from . import quantization  # noqa: F401
