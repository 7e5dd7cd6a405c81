"""``staged.version``: as ``torch.version`` answers in a CPU-only build (no CUDA, no ROCm)."""

from ._version import __version__ as __version__

cuda = None
hip = None
rocm = None
xpu = None
debug = False
