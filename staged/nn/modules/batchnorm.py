"""torch's module path of the batch norms, ``torch.nn.modules.batchnorm`` (Note [module
paths] in ``__init__.py``): staged keeps them in ``normalization.py``."""

from .normalization import (  # noqa: F401
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    _BatchNorm,
    _NormBase,
)
from .sync_batch_norm import SyncBatchNorm  # noqa: F401
