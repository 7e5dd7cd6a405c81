"""``staged.utils``: as ``torch.utils``; so far ``data`` (datasets, samplers, DataLoader)."""
from . import data  # noqa: F401
